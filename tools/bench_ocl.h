// tools/bench_ocl.h — what the `--backend opencl` benchmarks share: cold builds, the OpenCL C
// kernels of <kernel dir>/opencl with their signatures, and the raw enqueue + finish floor.
// Built only where LW_HAVE_OPENCL is defined.
#ifndef LANEWORK_TOOLS_BENCH_OCL_H_
#define LANEWORK_TOOLS_BENCH_OCL_H_

#include <stdbool.h>
#include <stdint.h>

#include "tools/bench.h"

// How the benchmarks keep every program build cold, for their output.
#define LW_BENCH_OCL_BUILDS "cold (POCL_KERNEL_CACHE=0: PoCL's on-disk program cache is off)"

// PoCL reads POCL_KERNEL_CACHE once, and chip children start from lanework's zygote, forked
// when the library loads; so the variable must be set before the process starts. Returns
// false when it already is; otherwise sets it and re-executes this program with argv (the
// arguments after `lanework`), returning true only when that failed (then it printed why).
bool lw__bench_ocl_reexec_cold(int argc, char **argv);

// Loads <kernel dir>/opencl/<name>.cl with the signature dirs[0..n_params) (static storage);
// prints the error and returns false.
bool lw__bench_ocl_load(const char *name, uint32_t n_params, const uint8_t *dirs,
                        lw_callable_t *out);

// The raw floor: an empty kernel through the OpenCL API directly, on the device (and CPU
// sub-device) an opencl chip on device 0 uses, with the chip's queue properties (profiling on).
typedef struct lw_bench_ocl_floor lw_bench_ocl_floor_t;
// Opens it; NULL after printing why.
lw_bench_ocl_floor_t *lw__bench_ocl_floor_open(void);
// n launches of one work-item, each clEnqueueNDRangeKernel + clFinish; v[i] in microseconds.
// False (after printing why) when a call failed.
bool lw__bench_ocl_floor_sample(lw_bench_ocl_floor_t *f, long n, double *v);
// The device, as "name (N of M compute units)".
const char *lw__bench_ocl_floor_device(const lw_bench_ocl_floor_t *f);
void lw__bench_ocl_floor_close(lw_bench_ocl_floor_t *f);

int lw__bench_overlap_ocl(const lw_bench_opts_t *o);
int lw__bench_dispatch_ocl(const lw_bench_opts_t *o);
int lw__bench_cancel_ocl(const lw_bench_opts_t *o);

#endif  // LANEWORK_TOOLS_BENCH_OCL_H_
