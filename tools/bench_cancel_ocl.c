// tools/bench_cancel_ocl.c — `lanework bench cancel --backend opencl [--level 2|3]`: cancel of
// a long sliced OpenCL kernel, lw_handle_cancel to the run handle finishing CANCELLED.
//
// The kernel is kernels/opencl/repeat_vector_add.cl over 2^21 work-items of 2^15 steps each:
// seconds or more if never stopped. OpenCL cannot stop an NDRange once enqueued, so the
// backend enqueues the range in slices of about 1 ms of device time (LW_OPENCL_SLICE_NS) and
// checks the run's cancel word between them: a cancel lands within the slice under way.
//
// Each trial waits until its own run's kernel is running before it cancels: the output tensor
// is zeroed before the run, and work-item 0 (in the first slice) writes a non-zero value
// there. On a CPU device the buffers are the host memory itself (CL_MEM_USE_HOST_PTR,
// zero-copy), so the write is visible while the run goes on; a device that copies instead
// never shows it, and the benchmark then says so and exits 1 rather than time a cancel of a
// run that had not started. The cancel then comes after a further pause drawn evenly from
// [0, 3) ms, so it lands at a random point of a slice (work-item 0's result can appear only
// when its whole slice is nearly done, and cancelling right then would time the end of a
// slice only). A trial whose run finished other than CANCELLED, or whose last work-item wrote
// its result (the run was not stopped), is an error too.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench.h"
#include "tools/bench_ocl.h"
#include "tools/overlap_driver.h"

#define ITEMS (1u << 21)
#define STEPS (1u << 15)
#define START_TIMEOUT_US 10e6
#define MAX_PAUSE_US 3000u

static const uint8_t kDirs[5] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR,
                                 LW_PARAM_SCALAR};

// Until work-item 0 wrote its result: true; false when the run finished first or nothing
// showed within START_TIMEOUT_US.
static bool wait_started(lw_handle_t *h, uint32_t *c0) {
  double deadline = lw__bench_now_us() + START_TIMEOUT_US;
  while (__atomic_load_n(c0, __ATOMIC_ACQUIRE) == 0) {
    if (lw_handle_done(h) || lw__bench_now_us() > deadline) return false;
    usleep(50);
  }
  return true;
}

int lw__bench_cancel_ocl(const lw_bench_opts_t *o) {
  int trials = o->trials_given ? o->trials : 20;
  lw_callable_t k;
  if (!lw__bench_ocl_load("repeat_vector_add", 5, kDirs, &k)) return 1;
  lw_overlap_driver_t *d = NULL;
  uint32_t *a = NULL, *b = NULL, *c = NULL;
  double *us = malloc(sizeof(double) * (size_t)trials);
  int rc = 1;
  bool pin = o->pin == 1 || (o->pin == -1 && sysconf(_SC_NPROCESSORS_ONLN) >= 2);
  lw_status_t st = lw__overlap_driver_open(o->level, "opencl", 3ull * ITEMS * 4, pin, &d);
  if (st != LW_OK) {
    rc = lw__bench_fail("opening an opencl chip", st);
    goto out;
  }
  a = d->alloc(d, ITEMS * 4);
  b = d->alloc(d, ITEMS * 4);
  c = d->alloc(d, ITEMS * 4);
  if (!a || !b || !c || !us) {
    fprintf(stderr, "lanework bench cancel: out of memory\n");
    goto out;
  }
  // a = b = 1: work-item i's result is (3^(STEPS+1) - 1) / 2 mod 2^32, never 0 for STEPS < 2^31.
  for (uint32_t i = 0; i < ITEMS; ++i) a[i] = b[i] = 1;
  lw_callable_handle_t h;
  if ((st = d->register_sync(d, &k, &h)) != LW_OK) {
    rc = lw__bench_fail("register repeat_vector_add", st);
    goto out;
  }
  lw_args_t args;
  const uint64_t g[3] = {ITEMS, 0, 0};
  lw_args_init(&args);
  st = lw_args_add_tensor(&args, a, ITEMS * 4, LW_TAG_INPUT);
  if (st == LW_OK) st = lw_args_add_tensor(&args, b, ITEMS * 4, LW_TAG_INPUT);
  if (st == LW_OK) st = lw_args_add_tensor(&args, c, ITEMS * 4, LW_TAG_OUTPUT);
  if (st == LW_OK) st = lw_args_add_scalar(&args, ITEMS);
  if (st == LW_OK) st = lw_args_add_scalar(&args, STEPS);
  if (st == LW_OK) st = lw_args_set_launch(&args, 1, g, NULL);
  if (st != LW_OK) {
    rc = lw__bench_fail("building the arguments", st);
    goto out;
  }
  // One untimed trial first: the kernel's first enqueue compiles it, and the backend learns
  // its slice size (the next runs of the callable start from it).
  uint32_t seed = 12345;
  for (int t = -1; t < trials; ++t) {
    if (t < 0) {
      lw__bench_progress("warm-up run");
    } else {
      lw__bench_progress("cancel %d/%d", t + 1, trials);
    }
    memset(c, 0, 64);
    c[ITEMS - 1] = 0;
    lw_handle_t *run = NULL;
    if ((st = d->run_async(d, h, &args, &run)) != LW_OK) {
      rc = lw__bench_fail("run", st);
      goto out;
    }
    if (!wait_started(run, c)) {
      (void)lw_handle_cancel(run);
      lw_status_t fin = lw_handle_wait(run, LW_WAIT_FOREVER);
      lw_handle_release(run);
      fprintf(stderr,
              "lanework bench cancel: invalid measurement: the run finished (%s) or its first "
              "work-item's output did not appear in host memory within %.0f s; this device "
              "does not compute in the host's memory, so a run's start cannot be seen\n",
              lw_status_name(fin), START_TIMEOUT_US / 1e6);
      goto out;
    }
    seed = seed * 1664525u + 1013904223u;
    usleep((seed >> 8) % MAX_PAUSE_US);
    double t0 = lw__bench_now_us();
    (void)lw_handle_cancel(run);
    lw_status_t fin = lw_handle_wait(run, LW_WAIT_FOREVER);
    double t1 = lw__bench_now_us();
    lw_handle_release(run);
    if (fin != LW_CANCELLED) {
      fprintf(stderr, "lanework bench cancel: invalid measurement: a cancelled run finished %s\n",
              lw_status_name(fin));
      goto out;
    }
    if (__atomic_load_n(&c[ITEMS - 1], __ATOMIC_ACQUIRE) != 0) {
      fprintf(stderr, "lanework bench cancel: invalid measurement: the run reached its last "
                      "work-item although it finished CANCELLED\n");
      goto out;
    }
    if (t >= 0) us[t] = t1 - t0;
  }
  double p50 = lw__bench_quantile(us, (size_t)trials, 0.5);
  double p99 = lw__bench_quantile(us, (size_t)trials, 0.99);
  double lo = us[0], hi = us[trials - 1];  // sorted by the quantile
  lw__bench_progress_end();
  printf("L%d, opencl device 0: cancel of repeat_vector_add (%u work-items x %u steps, sliced), "
         "lw_handle_cancel -> CANCELLED, %d trials\n",
         o->level, ITEMS, STEPS, trials);
  printf("  p50 %.3f ms, p99 %.3f ms, min %.3f ms, max %.3f ms (target p50 <= 5 ms: %s)\n",
         p50 / 1e3, p99 / 1e3, lo / 1e3, hi / 1e3, p50 <= 5000.0 ? "holds" : "missed");
  rc = 0;
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "cancel");
    lw__json_kv_string(&j, "backend", "opencl");
    lw__json_kv_int(&j, "level", o->level);
    lw__json_kv_int(&j, "runs", trials);
    lw__json_kv_uint(&j, "work_items", ITEMS);
    lw__json_kv_uint(&j, "steps", STEPS);
    lw__json_kv_string(&j, "status", "CANCELLED");
    lw__json_kv_fixed(&j, "cancel_p50_us", p50, 1);
    lw__json_kv_fixed(&j, "cancel_p99_us", p99, 1);
    lw__json_kv_fixed(&j, "cancel_min_us", lo, 1);
    lw__json_kv_fixed(&j, "cancel_max_us", hi, 1);
    lw__json_kv_bool(&j, "target_holds", p50 <= 5000.0);
    rc = lw__bench_json_end(&j, "cancel");
  }
out:
  if (d) {
    d->free(d, a);
    d->free(d, b);
    d->free(d, c);
    d->close(d);
  }
  free(us);
  lw_callable_free_loaded(&k);
  return rc;
}
