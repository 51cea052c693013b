// tools/bench_backend.h — the benches' per-backend table: for each backend, the workloads of
// the benches that run on it (NULL: that bench has no variant there) and the environment its
// benches need before the process starts. Adding a backend is adding a row: a
// workload_<name>.c with its three workloads, and its entry in bench_backend.c.
#ifndef LANEWORK_TOOLS_BENCH_BACKEND_H_
#define LANEWORK_TOOLS_BENCH_BACKEND_H_

#include "tools/bench_cancel.h"
#include "tools/bench_dispatch.h"
#include "tools/bench_overlap.h"

typedef struct lw_bench_backend {
  const char *name;
  // name/value pairs, ended by {NULL, NULL}: see lw__bench_reexec_with_env.
  const char *const (*env)[2];
  const lw_overlap_workload_t *overlap;
  const lw_dispatch_workload_t *dispatch;
  const lw_cancel_workload_t *cancel;
} lw_bench_backend_t;

// The row of backend name, or NULL when lanework knows no such backend or this build lacks it
// (lw__backend_missing_reason says why).
const lw_bench_backend_t *lw__bench_backend_find(const char *name);
// "sim|opencl|cuda": the backends known to the benches, for the --backend choices.
#define LW_BENCH_BACKEND_CHOICES "sim|opencl|cuda"

// The rows (workload_sim.c, workload_opencl.c, workload_cuda.c: built everywhere, as the
// cuda backend is).
extern const lw_bench_backend_t lw__bench_backend_sim;
extern const lw_bench_backend_t lw__bench_backend_cuda;
#ifdef LW_HAVE_OPENCL
extern const lw_bench_backend_t lw__bench_backend_opencl;
#endif

#endif  // LANEWORK_TOOLS_BENCH_BACKEND_H_
