// examples/opencl_costs.c — what the opencl backend's choices cost on this machine, measured
// in one process against the OpenCL API itself:
//
//   build   the first build in the process (the device compiler's start-up included), then a
//           cold build of big_program.cl (kernels/opencl), the register the overlap hides;
//   floor   an empty kernel: clEnqueueNDRangeKernel (1 work-item) + clFinish, p50;
//   memory  one vector_add launch over 3 host tensors, two ways, p50:
//             per-run: 3 CL_MEM_USE_HOST_PTR buffers created and released around the launch
//                      (what backend_opencl.c does);
//             sub-buffer: one USE_HOST_PTR buffer over a 16 MiB arena made once, 3
//                      clCreateSubBuffer per launch;
//           both with the outputs mapped back and checked;
//   L2      an empty run through an opencl chip (lw_chip_run), p50, and its ratio to the floor;
//   cancel  a long sliced kernel (spin.cl, sized on the device by a probe) cancelled once
//           running: cancel -> handle finished, p50.
//
// PoCL caches compiled programs on disk; unless --cached is given this program sets
// POCL_KERNEL_CACHE=0 before OpenCL starts, so every build is cold.
//
// usage: opencl_costs [kernel-dir] [--quick] [--cached]
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "example_util.h"
#include "lanework/chip.h"

#define CL_CHECK(expr)                                                       \
  do {                                                                       \
    cl_int e_ = (expr);                                                      \
    if (e_ != CL_SUCCESS) {                                                  \
      fprintf(stderr, "%s failed: OpenCL error %d\n", #expr, (int)e_);       \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double p50_us(int64_t *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_i64);
  return (double)v[n / 2] / 1e3;
}

static char *read_file(const char *path, size_t *out_bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "opencl_costs: cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
  buf[n] = '\0';
  fclose(f);
  *out_bytes = (size_t)n;
  return buf;
}

static cl_program build(cl_context ctx, cl_device_id dev, const char *src, const char *opts,
                        double *out_ms) {
  cl_int e;
  int64_t t0 = now_ns();
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
  CL_CHECK(e);
  CL_CHECK(clBuildProgram(p, 1, &dev, opts, NULL, NULL));
  *out_ms = (double)(now_ns() - t0) / 1e6;
  return p;
}

typedef struct mem_case {
  cl_context ctx;
  cl_command_queue q;
  cl_kernel k;
  float *a, *b, *c;
  cl_mem arena;  // sub-buffer case only
  uint8_t *arena_base;
} mem_case_t;

enum { VN = 4096 };

// One vector_add launch; sub: through sub-buffers of m->arena, else per-run buffers.
static void vadd_launch(mem_case_t *m, bool sub) {
  cl_int e;
  cl_mem mem[3];
  float *ptr[3] = {m->a, m->b, m->c};
  cl_mem_flags flags[3] = {CL_MEM_READ_ONLY, CL_MEM_READ_ONLY, CL_MEM_WRITE_ONLY};
  for (int i = 0; i < 3; ++i) {
    if (sub) {
      cl_buffer_region r = {(size_t)((uint8_t *)ptr[i] - m->arena_base), VN * sizeof(float)};
      mem[i] = clCreateSubBuffer(m->arena, flags[i], CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    } else {
      mem[i] = clCreateBuffer(m->ctx, flags[i] | CL_MEM_USE_HOST_PTR, VN * sizeof(float), ptr[i],
                              &e);
    }
    CL_CHECK(e);
    CL_CHECK(clSetKernelArg(m->k, (cl_uint)i, sizeof(cl_mem), &mem[i]));
  }
  uint64_t n = VN;
  CL_CHECK(clSetKernelArg(m->k, 3, sizeof(n), &n));
  size_t global = VN, local = 64;
  CL_CHECK(clEnqueueNDRangeKernel(m->q, m->k, 1, NULL, &global, &local, 0, NULL, NULL));
  void *p = clEnqueueMapBuffer(m->q, mem[2], CL_TRUE, CL_MAP_READ, 0, VN * sizeof(float), 0, NULL,
                               NULL, &e);
  CL_CHECK(e);
  CL_CHECK(clEnqueueUnmapMemObject(m->q, mem[2], p, 0, NULL, NULL));
  CL_CHECK(clFinish(m->q));
  for (int i = 0; i < 3; ++i) clReleaseMemObject(mem[i]);
}

static void check_vadd(const mem_case_t *m, const char *what) {
  for (int i = 0; i < VN; ++i) {
    if (m->c[i] != m->a[i] + m->b[i]) {
      fprintf(stderr, "opencl_costs: %s: c[%d] = %g, want %g\n", what, i, m->c[i],
              m->a[i] + m->b[i]);
      exit(1);
    }
  }
}

// The args of a spin.cl run of n work-items over the two words, zeroed first.
static void spin_args(lw_args_t *a, _Atomic uint32_t *started, _Atomic uint32_t *last,
                     uint64_t n) {
  atomic_store(started, 0);
  atomic_store(last, 0);
  lw_args_init(a);
  CHECK(lw_args_add_tensor(a, (void *)started, sizeof(*started), LW_TAG_OUTPUT));
  CHECK(lw_args_add_tensor(a, (void *)last, sizeof(*last), LW_TAG_INOUT));
  CHECK(lw_args_add_scalar(a, n));
  CHECK(lw_args_add_scalar(a, 4096));  // rounds per work-item: microseconds on any device
  const uint64_t g[3] = {n, 0, 0};
  CHECK(lw_args_set_launch(a, 1, g, NULL));
}

int main(int argc, char **argv) {
  const char *dir = getenv("LW_KERNEL_DIR") ? getenv("LW_KERNEL_DIR") : "kernels";
  bool quick = false, cached = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (strcmp(argv[i], "--cached") == 0) {
      cached = true;
    } else {
      dir = argv[i];
    }
  }
  if (!cached) setenv("POCL_KERNEL_CACHE", "0", 1);
  int iters = quick ? 50 : 2000;
  char path[1024];

  // --- build
  cl_platform_id plat;
  cl_device_id dev;
  CL_CHECK(clGetPlatformIDs(1, &plat, NULL));
  CL_CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  char dev_name[128] = "";
  (void)clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(dev_name) - 1, dev_name, NULL);
  cl_int e;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  CL_CHECK(e);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &e);
  CL_CHECK(e);
  double first_ms, big_ms, vadd_ms;
  cl_program empty = build(ctx, dev, "__kernel void lw_kernel_main(void) {}", "", &first_ms);
  snprintf(path, sizeof(path), "%s/opencl/big_program.cl", dir);
  size_t bytes;
  char *big_src = read_file(path, &bytes);
  cl_program big = build(ctx, dev, big_src, "", &big_ms);
  snprintf(path, sizeof(path), "%s/opencl/vector_add.cl", dir);
  char *vadd_src = read_file(path, &bytes);
  cl_program vadd = build(ctx, dev, vadd_src, "", &vadd_ms);
  printf("device: %s; builds %s\n", dev_name,
         cached ? "may hit PoCL's cache" : "cold (POCL_KERNEL_CACHE=0)");
  printf("build: first in process %.1f ms (compiler start-up included), big_program %.1f ms, "
         "vector_add %.1f ms\n",
         first_ms, big_ms, vadd_ms);

  // --- floor
  cl_kernel ek = clCreateKernel(empty, "lw_kernel_main", &e);
  CL_CHECK(e);
  size_t one = 1;
  int64_t *t = calloc((size_t)iters, sizeof(int64_t));
  for (int i = 0; i < iters + 20; ++i) {
    int64_t t0 = now_ns();
    CL_CHECK(clEnqueueNDRangeKernel(q, ek, 1, NULL, &one, NULL, 0, NULL, NULL));
    CL_CHECK(clFinish(q));
    if (i >= 20) t[i - 20] = now_ns() - t0;  // the first launches compile and warm up
  }
  double floor_us = p50_us(t, iters);
  printf("floor: empty kernel enqueue+finish p50 %.1f us (%d launches)\n", floor_us, iters);

  // --- memory
  mem_case_t m = {.ctx = ctx, .q = q};
  m.k = clCreateKernel(vadd, "lw_kernel_main", &e);
  CL_CHECK(e);
  size_t arena_bytes = 16u << 20;
  m.arena_base = aligned_alloc(4096, arena_bytes);
  memset(m.arena_base, 0, arena_bytes);
  // Tensors 4 KiB-aligned inside the arena, as a worker's allocator hands them out.
  m.a = (float *)(m.arena_base + 4096);
  m.b = (float *)(m.arena_base + 4096 + 65536);
  m.c = (float *)(m.arena_base + 4096 + 2 * 65536);
  for (int i = 0; i < VN; ++i) {
    m.a[i] = (float)i;
    m.b[i] = 0.5f * (float)i;
  }
  m.arena = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, arena_bytes,
                           m.arena_base, &e);
  CL_CHECK(e);
  int mem_iters = quick ? 50 : 1000;
  int64_t *tp = calloc((size_t)mem_iters, sizeof(int64_t));
  int64_t *ts = calloc((size_t)mem_iters, sizeof(int64_t));
  for (int i = 0; i < mem_iters + 10; ++i) {
    // Interleaved so both see the same machine state.
    memset(m.c, 0, VN * sizeof(float));
    int64_t t0 = now_ns();
    vadd_launch(&m, false);
    int64_t t1 = now_ns();
    check_vadd(&m, "per-run buffers");
    memset(m.c, 0, VN * sizeof(float));
    int64_t t2 = now_ns();
    vadd_launch(&m, true);
    int64_t t3 = now_ns();
    check_vadd(&m, "sub-buffers");
    if (i >= 10) {
      tp[i - 10] = t1 - t0;
      ts[i - 10] = t3 - t2;
    }
  }
  printf("memory: vector_add of %d floats, 3 tensors: per-run USE_HOST_PTR buffers p50 %.1f us, "
         "arena buffer + sub-buffers p50 %.1f us (%d launches each, results checked)\n",
         VN, p50_us(tp, mem_iters), p50_us(ts, mem_iters), mem_iters);

  clReleaseMemObject(m.arena);
  clReleaseKernel(m.k);
  clReleaseKernel(ek);
  clReleaseProgram(vadd);
  clReleaseProgram(big);
  clReleaseProgram(empty);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);

  // --- L2: the same empty kernel through an opencl chip.
  lw_chip_config_t cc;
  lw_chip_config_default(&cc);
  snprintf(cc.backend, sizeof(cc.backend), "opencl");
  lw_chip_t *chip;
  CHECK(lw_chip_open(&cc, &chip));
  lw_callable_t ec = {.name = "empty", .image = "__kernel void lw_kernel_main(void) {}",
                      .image_bytes = strlen("__kernel void lw_kernel_main(void) {}")};
  lw_callable_handle_t eh;
  CHECK(lw_chip_register(chip, &ec, &eh));
  for (int i = 0; i < iters + 20; ++i) {
    int64_t t0 = now_ns();
    CHECK(lw_chip_run(chip, eh, NULL, NULL, NULL));
    if (i >= 20) t[i - 20] = now_ns() - t0;
  }
  double l2_us = p50_us(t, iters);
  printf("L2: empty run through an opencl chip p50 %.1f us = %.2fx the floor\n", l2_us,
         l2_us / floor_us);

  // --- cancel: spin.cl (kernels/opencl), sized on this device. "Long" cannot be a constant: a
  // GPU ends in microseconds what a CPU runs for a minute. So a probe of doubling ranges runs
  // until one takes 100 ms of device time, and the run is the range that would keep the device
  // busy for 10 minutes at that rate: still running when the cancel lands, on any device.
  lw_callable_t sc;
  snprintf(path, sizeof(path), "%s/opencl/spin.cl", dir);
  CHECK(lw_callable_load_file(path, &sc));
  static const uint8_t spin_dirs[4] = {LW_PARAM_OUT | LW_PARAM_LIVE, LW_PARAM_INOUT,
                                       LW_PARAM_SCALAR, LW_PARAM_SCALAR};
  sc.n_params = 4;
  sc.param_dirs = spin_dirs;
  lw_callable_handle_t sh;
  CHECK(lw_chip_register(chip, &sc, &sh));
  lw_callable_free_loaded(&sc);
  // started: set by work-item 0, a live tensor (the host sees it while the range runs); last:
  // set by the last work-item, so still 0 when the cancel stopped the range.
  _Atomic uint32_t started = 0, last = 0;
  lw_args_t a;
  uint64_t n = 4096, items = 0;
  for (;; n *= 2) {
    spin_args(&a, &started, &last, n);
    lw_run_timing_t rt;
    CHECK(lw_chip_run(chip, sh, &a, NULL, &rt));
    if (rt.kernel_wall_ns == 0) {
      fprintf(stderr, "opencl_costs: the device gave no kernel time; cannot size the run\n");
      return 1;
    }
    if (rt.kernel_wall_ns >= 100ull * 1000 * 1000 || n >= (1ull << 40)) {
      items = (uint64_t)((double)n * 600e9 / (double)rt.kernel_wall_ns);
      items += 64 - items % 64;
      break;
    }
  }
  int trials = quick ? 3 : 20;
  int64_t *tc = calloc((size_t)trials, sizeof(int64_t));
  for (int i = 0; i < trials; ++i) {
    spin_args(&a, &started, &last, items);
    lw_handle_t *h;
    CHECK(lw_chip_run_async(chip, sh, &a, NULL, &h));
    // Cancel once the kernel runs (its live word says so), after its slices grew toward their
    // ~1 ms (the first slices are small).
    while (atomic_load(&started) == 0 && !lw_handle_done(h)) {
      struct timespec tick = {0, 100 * 1000};
      nanosleep(&tick, NULL);
    }
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    int64_t t0 = now_ns();
    CHECK(lw_handle_cancel(h));
    lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
    tc[i] = now_ns() - t0;
    if (st != LW_CANCELLED || atomic_load(&last) != 0) {
      fprintf(stderr, "opencl_costs: cancelled run finished %s%s\n", lw_status_name(st),
              atomic_load(&last) ? " after its last work-item ran" : "");
      return 1;
    }
    lw_handle_release(h);
  }
  printf("cancel: long sliced kernel (%llu work-items of spin.cl, sized for 10 min on this "
         "device), cancel -> finished p50 %.2f ms (%d trials)\n",
         (unsigned long long)items, p50_us(tc, trials) / 1e3, trials);
  lw_chip_close(chip);
  free(t);
  free(tp);
  free(ts);
  free(tc);
  free(big_src);
  free(vadd_src);
  free(m.arena_base);
  return 0;
}
