// tools/workload_opencl.c — what the benches run on an `opencl` chip (bench_backend.h): the
// OpenCL C kernels of <kernel dir>/opencl, device 0. Built only where LW_HAVE_OPENCL is.
//
// Every program build is cold: PoCL's and NVIDIA's on-disk program caches are off
// (POCL_KERNEL_CACHE=0 and CUDA_CACHE_DISABLE=1 in the backend's environment, so the
// dispatcher re-executes the program with them), and C2 is unregistered after every use.
//
// overlap: C2 = big_program.cl (-DSTAGES=64 unless --stages): its register is a real device
//          compile. C1 = repeat_vector_add.cl, a kernel that has already run (PoCL compiles a
//          kernel's machine code at its first enqueue, under the same process-wide lock as a
//          build, so only a warm C1 can run beside a build), lasting 1.5 x a cold build of C2
//          (within 100 ms - 4 s). C1 computes in exact uint arithmetic and is compared with a
//          host reference (closed form, tools/workload_ref.h); C2 computes sin and cos in
//          float, which a device's math library need not round as the host's does: it is
//          compared with a double-precision host reference (relative error, tolerance
//          C2_REL_TOL) and, bit for bit, with its first run (any difference counts in
//          max_diff).
// cancel:  repeat_vector_add.cl over 2^21 work-items, its steps calibrated on the device at
//          hand so that an uncancelled run lasts ~2 s (a GPU runs in microseconds what a CPU
//          runs for minutes). OpenCL cannot stop an NDRange: the backend enqueues the range in
//          slices of ~1 ms of device time and checks the cancel word between them. The run is
//          seen running once work-item 0's result shows in host memory (a CPU device computes
//          there); a device that copies results back only at the end never shows it, so after
//          a quarter of the calibrated length the run is cancelled anyway. Either way the
//          trial counts only when, after the run finished CANCELLED (its outputs then copied
//          back), work-item 0 has its result (the first slice ran: the kernel was running) and
//          the last work-item has none (it was stopped before its end).
// dispatch: empty.cl on one work-item; the floor is the same empty kernel through the OpenCL
//          API directly (clEnqueueNDRangeKernel + clFinish) on the device (and CPU sub-device)
//          an opencl chip on device 0 uses, with the chip's queue properties.
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "child/backend_opencl.h"
#include "tools/bench_backend.h"
#include "tools/workload_ref.h"

static const uint8_t kVaddDirs[5] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR,
                                     LW_PARAM_SCALAR};

// ---------------------------------------------------------------------------------------------
// overlap

#define C1_ELEMS (1u << 12)
#define C2_ELEMS (1u << 12)
#define C2_DEFAULT_STAGES 64
// C2's device results against the double-precision host reference: worse than this relative
// error (of the output's magnitude) is a wrong result, not rounding.
#define C2_REL_TOL 1e-3

static const uint8_t kC2Dirs[3] = {LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};

typedef struct overlap_ocl {
  lw_callable_t c1, c2;
  bool c1_loaded, c2_loaded;
  char c2_options[32];  // -DSTAGES=N: part of C2's digest, another stage count is another program
  long stages;
  uint32_t *a, *b, *c1_out, *ref1;
  float *x, *c2_out, *first2;
  bool have_first2;
  long ref1_repeat;  // the repeat count ref1 was computed for
} overlap_ocl_t;

static lw_status_t ov_open(const lw_bench_opts_t *o, void **out) {
  overlap_ocl_t *s = calloc(1, sizeof(*s));
  if (!s) return LW_RESOURCE_EXHAUSTED;
  *out = s;
  s->ref1_repeat = -1;
  s->stages = o->stages > 0 ? o->stages : C2_DEFAULT_STAGES;
  snprintf(s->c2_options, sizeof(s->c2_options), "-DSTAGES=%ld", s->stages);
  s->ref1 = malloc(C1_ELEMS * 4);
  s->first2 = malloc(C2_ELEMS * 4);
  if (!s->ref1 || !s->first2) return LW_RESOURCE_EXHAUSTED;
  s->c1_loaded = lw__bench_load_opencl_kernel("repeat_vector_add", 5, kVaddDirs, &s->c1);
  s->c2_loaded = s->c1_loaded && lw__bench_load_opencl_kernel("big_program", 3, kC2Dirs, &s->c2);
  if (!s->c2_loaded) return LW_NOT_FOUND;
  s->c2.build_options = s->c2_options;
  return LW_OK;
}

static const lw_callable_t *ov_c1(void *s) { return &((overlap_ocl_t *)s)->c1; }
static const lw_callable_t *ov_c2(void *s) { return &((overlap_ocl_t *)s)->c2; }

static lw_status_t ov_alloc(void *p, lw_bench_chip_t *d) {
  overlap_ocl_t *s = p;
  s->a = d->alloc(d, C1_ELEMS * 4);
  s->b = d->alloc(d, C1_ELEMS * 4);
  s->c1_out = d->alloc(d, C1_ELEMS * 4);
  s->x = d->alloc(d, C2_ELEMS * 4);
  s->c2_out = d->alloc(d, C2_ELEMS * 4);
  if (!s->a || !s->b || !s->c1_out || !s->x || !s->c2_out) return LW_RESOURCE_EXHAUSTED;
  for (uint32_t i = 0; i < C1_ELEMS; ++i) {
    s->a[i] = i * 2654435761u;
    s->b[i] = (i % 1000) + 1;
  }
  for (uint32_t i = 0; i < C2_ELEMS; ++i) s->x[i] = (float)(i % 1000) * 0.01f - 5.0f;
  return LW_OK;
}

static lw_status_t ov_args_c1(void *p, long repeat, lw_args_t *a) {
  overlap_ocl_t *s = p;
  return lw__workload_vadd_args(s->a, s->b, s->c1_out, C1_ELEMS, (uint64_t)repeat, a);
}

static lw_status_t ov_args_c2(void *p, lw_args_t *a) {
  overlap_ocl_t *s = p;
  const uint64_t g[3] = {C2_ELEMS, 0, 0};
  lw_args_init(a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, s->x, C2_ELEMS * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, s->c2_out, C2_ELEMS * 4, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(a, C2_ELEMS));
  return lw_args_set_launch(a, 1, g, NULL);
}

static void ov_clear(void *p) {
  overlap_ocl_t *s = p;
  memset(s->c1_out, 0, C1_ELEMS * 4);
  memset(s->c2_out, 0, C2_ELEMS * 4);
}

static void ov_check(void *p, long repeat, lw_overlap_check_t *c) {
  overlap_ocl_t *s = p;
  if (s->ref1_repeat != repeat) {
    for (uint32_t i = 0; i < C1_ELEMS; ++i) {
      s->ref1[i] = lw__workload_repeat_vadd(s->a[i], s->b[i], (uint64_t)repeat);
    }
    s->ref1_repeat = repeat;
  }
  for (uint32_t i = 0; i < C1_ELEMS; ++i) {
    double d = fabs((double)s->c1_out[i] - (double)s->ref1[i]);
    if (d > c->max_diff) c->max_diff = d;
  }
  if (!s->have_first2) {
    memcpy(s->first2, s->c2_out, C2_ELEMS * sizeof(float));
    s->have_first2 = true;
    for (uint32_t i = 0; i < C2_ELEMS; ++i) {
      double ref = lw__workload_big_stages(s->x[i], s->stages);
      double rel = fabs((double)s->c2_out[i] - ref) / fmax(fabs(ref), 1.0);
      if (isnan(rel)) rel = INFINITY;  // a NaN output is a wrong one
      if (rel > c->rel_err) c->rel_err = rel;
    }
  }
  for (uint32_t i = 0; i < C2_ELEMS; ++i) {
    // Bit for bit: a NaN in both is the same result, a NaN in one only is not.
    if (memcmp(&s->c2_out[i], &s->first2[i], sizeof(float)) == 0) continue;
    double d = fabs((double)s->c2_out[i] - (double)s->first2[i]);
    if (isnan(d)) d = INFINITY;
    if (d > c->max_diff) c->max_diff = d;
  }
}

static void ov_describe(void *p, long repeat, FILE *f) {
  overlap_ocl_t *s = p;
  fprintf(f,
          "  C1 = opencl/repeat_vector_add (%u work-items, repeat_count=%ld, warm), C2 = "
          "opencl/big_program (%u work-items, %zu-byte source, -DSTAGES=%ld)\n"
          "  builds cold (POCL_KERNEL_CACHE=0, CUDA_CACHE_DISABLE=1: no on-disk program cache); "
          "run(C2) is C2's first enqueue (PoCL generates its machine code then)\n",
          C1_ELEMS, repeat, C2_ELEMS, s->c2.image_bytes, s->stages);
}

static void ov_json(void *p, lw_json_t *j) {
  overlap_ocl_t *s = p;
  lw__json_kv_string(j, "builds", "cold");
  lw__json_kv_int(j, "pocl_kernel_cache", 0);
  lw__json_kv_int(j, "cuda_cache_disable", 1);
  lw__json_kv_int(j, "c2_stages", s->stages);
}

static void ov_close(void *p, lw_bench_chip_t *d) {
  overlap_ocl_t *s = p;
  if (d) {
    d->free(d, s->a);
    d->free(d, s->b);
    d->free(d, s->c1_out);
    d->free(d, s->x);
    d->free(d, s->c2_out);
  }
  free(s->ref1);
  free(s->first2);
  if (s->c1_loaded) lw_callable_free_loaded(&s->c1);
  if (s->c2_loaded) lw_callable_free_loaded(&s->c2);
  free(s);
}

static const lw_overlap_workload_t kOverlapOcl = {
    .backend = "opencl",
    // A 2 ms delay means little next to a build of hundreds of ms: by default one row.
    .default_delays = "0",
    .arena_bytes = 1u << 20,
    .initial_repeat = 4096,
    .register_samples = 1,
    .target_factor = 1.5,
    .target_floor_us = 100000.0,
    .target_cap_us = 4000000.0,
    .rel_tol = C2_REL_TOL,
    .open = ov_open,
    .c1 = ov_c1,
    .c2 = ov_c2,
    .alloc = ov_alloc,
    .args_c1 = ov_args_c1,
    .args_c2 = ov_args_c2,
    .clear = ov_clear,
    .check = ov_check,
    .describe = ov_describe,
    .json = ov_json,
    .close = ov_close,
};

// ---------------------------------------------------------------------------------------------
// cancel

static const uint8_t kHangDirs[2] = {LW_PARAM_INOUT, LW_PARAM_SCALAR};

static lw_status_t ca_open(void **out) {
  return lw__repeat_cancel_open(lw__bench_load_opencl_kernel,
                                kVaddDirs, kHangDirs, LW_TAG_INOUT, out);
}

static bool ca_stopped_early(void *p, char *why, size_t n) {
  lw_repeat_cancel_t *s = p;
  if (s->c[0] == 0) {
    snprintf(why, n, "work-item 0 has no result: the run was stopped before its first slice, "
                     "so no kernel was running when the cancel landed");
    return false;
  }
  if (s->c[LW_RC_ITEMS - 1] != 0) {
    snprintf(why, n, "the run reached its last work-item although it finished CANCELLED: it "
                     "ran to its end (%llu steps, calibrated to %.0f ms) before the cancel",
             (unsigned long long)s->steps, s->full_us / 1e3);
    return false;
  }
  return true;
}

static void ca_describe(void *p, FILE *f) {
  lw_repeat_cancel_t *s = p;
  fprintf(f,
          "  kernel: opencl/repeat_vector_add, %u work-items x %llu steps (an uncancelled run "
          "~%.0f ms on this device, calibrated), sliced; escalation: opencl/hang, one "
          "work-item that runs until its child is killed\n",
          LW_RC_ITEMS, (unsigned long long)s->steps, s->full_us / 1e3);
}

static void ca_json(void *p, lw_json_t *j) {
  lw_repeat_cancel_t *s = p;
  lw__json_kv_uint(j, "work_items", LW_RC_ITEMS);
  lw__json_kv_uint(j, "steps", s->steps);
  lw__json_kv_fixed(j, "uncancelled_run_us", s->full_us, 1);
}

static const lw_cancel_workload_t kCancelOcl = {
    .backend = "opencl",
    .arena_bytes = 3ull * LW_RC_ITEMS * 4,
    .max_pause_us = LW_RC_MAX_PAUSE_US,
    .target_p50_us = 5000.0,
    .open = ca_open,
    .setup = lw__repeat_cancel_setup,
    .arm = lw__repeat_cancel_arm,
    .seen = lw__repeat_cancel_seen,
    .stopped_early = ca_stopped_early,
    .arm_hang = lw__repeat_cancel_arm_hang,
    .run_short = lw__repeat_cancel_run_short,
    .describe = ca_describe,
    .json = ca_json,
    .close = lw__repeat_cancel_close,
};

// ---------------------------------------------------------------------------------------------
// dispatch: the raw floor

typedef struct floor_ocl {
  lw_opencl_chip_device_t dev;
  cl_context ctx;
  cl_command_queue q;
  cl_program prog;
  cl_kernel kern;
  char desc[200];
} floor_ocl_t;

static bool cl_ok(cl_int e, const char *what) {
  if (e == CL_SUCCESS) return true;
  fprintf(stderr, "lanework bench: floor: %s failed: OpenCL error %d\n", what, (int)e);
  return false;
}

static void floor_close(void *p) {
  floor_ocl_t *f = p;
  if (!f) return;
  if (f->kern) clReleaseKernel(f->kern);
  if (f->prog) clReleaseProgram(f->prog);
  if (f->q) clReleaseCommandQueue(f->q);
  if (f->ctx) clReleaseContext(f->ctx);
  if (f->dev.sub) clReleaseDevice(f->dev.dev);
  free(f);
}

static void *floor_open(void) {
  floor_ocl_t *f = calloc(1, sizeof(*f));
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
  if (!lw__bench_load_opencl_kernel("empty", 0, NULL, &empty)) goto fail;
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
  floor_close(f);
  return NULL;
}

static bool floor_sample(void *p, long n, double *v) {
  floor_ocl_t *f = p;
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

static const char *floor_describe(void *p) { return ((floor_ocl_t *)p)->desc; }

static bool load_empty(lw_callable_t *out) {
  return lw__bench_load_opencl_kernel("empty", 0, NULL, out);
}

static const lw_dispatch_workload_t kDispatchOcl = {
    .backend = "opencl",
    .default_iters = 2000,
    .empty_name = "opencl/empty (1 work-item)",
    .load_empty = load_empty,
    .floors = {{.name = "floor",
                .what = "clEnqueueNDRangeKernel + clFinish, OpenCL API directly",
                .json_p50 = "floor_p50_us",
                .json_p99 = "floor_p99_us",
                .open = floor_open,
                .sample = floor_sample,
                .describe = floor_describe,
                .close = floor_close}},
    .n_floors = 1,
    .launch_floor = 0,
    .l2_target = 1.5,
    .dag = false,
    .load = false,
};

// PoCL's program cache and NVIDIA's (~/.nv/ComputeCache) off: with NVIDIA's on, a repeated
// build of big_program (4 stages) took 3-4 ms on an H200's host, where the H100's 2.8 s for 16
// stages says ~0.7 s cold: most likely a cache hit.
static const char *const kEnvOcl[][2] = {
    {"POCL_KERNEL_CACHE", "0"}, {"CUDA_CACHE_DISABLE", "1"}, {NULL, NULL}};

const lw_bench_backend_t lw__bench_backend_opencl = {
    .name = "opencl",
    .env = kEnvOcl,
    .overlap = &kOverlapOcl,
    .dispatch = &kDispatchOcl,
    .cancel = &kCancelOcl,
};
