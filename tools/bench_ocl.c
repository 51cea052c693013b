// tools/bench_ocl.c — helpers of the `--backend opencl` benchmarks (see bench_ocl.h).
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "tools/bench_ocl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child/backend_opencl.h"
#include "tools/tool.h"

bool lw__bench_ocl_reexec_cold(int argc, char **argv) {
  const char *cache = getenv("POCL_KERNEL_CACHE");
  if (cache && strcmp(cache, "0") == 0) return false;
  setenv("POCL_KERNEL_CACHE", "0", 1);
  char **full = calloc((size_t)argc + 2, sizeof(char *));
  if (!full) {
    fprintf(stderr, "lanework bench: out of memory\n");
    return true;
  }
  full[0] = (char *)"lanework";
  for (int i = 0; i < argc; ++i) full[i + 1] = argv[i];
  execv("/proc/self/exe", full);
  fprintf(stderr,
          "lanework bench: cannot re-execute itself with POCL_KERNEL_CACHE=0 (%s); set it in "
          "the environment\n",
          strerror(errno));
  free(full);
  return true;
}

bool lw__bench_ocl_load(const char *name, uint32_t n_params, const uint8_t *dirs,
                        lw_callable_t *out) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/opencl/%s.cl", lw__tool_kernel_dir(), name);
  if (lw_callable_load_file(path, out) != LW_OK) {
    fprintf(stderr, "lanework bench: cannot load OpenCL kernel %s: %s (set LW_KERNEL_DIR?)\n",
            path, lw_last_error()->message);
    return false;
  }
  out->n_params = n_params;
  out->param_dirs = n_params ? dirs : NULL;
  return true;
}

struct lw_bench_ocl_floor {
  lw_opencl_chip_device_t dev;
  cl_context ctx;
  cl_command_queue q;
  cl_program prog;
  cl_kernel kern;
  char desc[200];
};

static bool cl_ok(cl_int e, const char *what) {
  if (e == CL_SUCCESS) return true;
  fprintf(stderr, "lanework bench: floor: %s failed: OpenCL error %d\n", what, (int)e);
  return false;
}

lw_bench_ocl_floor_t *lw__bench_ocl_floor_open(void) {
  lw_bench_ocl_floor_t *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  lw_error_t err;
  if (lw__opencl_chip_device(0, &f->dev, &err) != LW_OK) {
    fprintf(stderr, "lanework bench: floor: %s\n", err.message);
    free(f);
    return NULL;
  }
  snprintf(f->desc, sizeof(f->desc), "%s (%s%u of %u compute units)", f->dev.name,
           f->dev.sub ? "sub-device: " : "", f->dev.units, f->dev.root_units);
  cl_int e = CL_SUCCESS;
  f->ctx = clCreateContext(NULL, 1, &f->dev.dev, NULL, NULL, &e);
  if (!cl_ok(e, "clCreateContext")) goto fail;
  f->q = clCreateCommandQueue(f->ctx, f->dev.dev, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!cl_ok(e, "clCreateCommandQueue")) goto fail;
  lw_callable_t empty;
  if (!lw__bench_ocl_load("empty", 0, NULL, &empty)) goto fail;
  const char *src = empty.image;
  size_t len = empty.image_bytes;
  f->prog = clCreateProgramWithSource(f->ctx, 1, &src, &len, &e);
  lw_callable_free_loaded(&empty);
  if (!cl_ok(e, "clCreateProgramWithSource")) goto fail;
  if (!cl_ok(clBuildProgram(f->prog, 1, &f->dev.dev, "", NULL, NULL), "clBuildProgram")) {
    goto fail;
  }
  f->kern = clCreateKernel(f->prog, "lw_kernel_main", &e);
  if (!cl_ok(e, "clCreateKernel")) goto fail;
  return f;
fail:
  lw__bench_ocl_floor_close(f);
  return NULL;
}

bool lw__bench_ocl_floor_sample(lw_bench_ocl_floor_t *f, long n, double *v) {
  size_t one = 1;
  for (long i = 0; i < n; ++i) {
    double t0 = lw__bench_now_us();
    if (!cl_ok(clEnqueueNDRangeKernel(f->q, f->kern, 1, NULL, &one, NULL, 0, NULL, NULL),
               "clEnqueueNDRangeKernel") ||
        !cl_ok(clFinish(f->q), "clFinish")) {
      return false;
    }
    v[i] = lw__bench_now_us() - t0;
  }
  return true;
}

const char *lw__bench_ocl_floor_device(const lw_bench_ocl_floor_t *f) { return f->desc; }

void lw__bench_ocl_floor_close(lw_bench_ocl_floor_t *f) {
  if (!f) return;
  if (f->kern) clReleaseKernel(f->kern);
  if (f->prog) clReleaseProgram(f->prog);
  if (f->q) clReleaseCommandQueue(f->q);
  if (f->ctx) clReleaseContext(f->ctx);
  if (f->dev.sub) clReleaseDevice(f->dev.dev);
  free(f);
}
