// tools/workload_ref.c — see workload_ref.h.
#include "tools/workload_ref.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"

uint32_t lw__workload_repeat_vadd(uint32_t a, uint32_t b, uint64_t r) {
  uint32_t ra = 1, rb = 0, ba = 3, bb = b;
  while (r) {
    if (r & 1) {
      rb = ba * rb + bb;
      ra = ba * ra;
    }
    bb = ba * bb + bb;
    ba = ba * ba;
    r >>= 1;
  }
  return ra * a + rb;
}

double lw__workload_big_stages(float xf, long stages) {
  double x = xf, acc = 0.0;
  for (long k = 0; k < stages; ++k) {
    double y = x * (1.0 + (double)k / 1024.0);
    for (long j = 0; j < (k % 5) + 2; ++j) {
      y = y * 0.5 + sin(y + (double)k) * cos(x - (double)j) + (double)(k % 3);
    }
    acc += y;
  }
  return acc;
}

lw_status_t lw__workload_vadd_args(uint32_t *a, uint32_t *b, uint32_t *c, uint32_t n,
                                   uint64_t reps, lw_args_t *out) {
  return lw__workload_vadd_args_threads(a, b, c, n, reps, n, out);
}

lw_status_t lw__workload_vadd_args_threads(uint32_t *a, uint32_t *b, uint32_t *c, uint32_t n,
                                           uint64_t reps, uint32_t threads, lw_args_t *out) {
  const uint64_t g[3] = {threads, 0, 0};
  lw_args_init(out);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(out, a, (uint64_t)n * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(out, b, (uint64_t)n * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(out, c, (uint64_t)n * 4, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(out, n));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(out, reps));
  return lw_args_set_launch(out, 1, g, NULL);
}

// ---------------------------------------------------------------------------------------------
// The device backends' cancel workload

lw_status_t lw__repeat_cancel_open(lw_rc_load_fn load, const uint8_t *vadd_dirs,
                                   const uint8_t *hang_dirs, lw_tag_t hang_tag, void **out) {
  lw_repeat_cancel_t *s = calloc(1, sizeof(*s));
  if (!s) return LW_RESOURCE_EXHAUSTED;
  *out = s;
  s->hang_tag = hang_tag;
  s->threads = LW_RC_ITEMS;
  s->loaded = load("repeat_vector_add", 5, vadd_dirs, &s->k);
  s->hang_loaded = s->loaded && load("hang", 2, hang_dirs, &s->hang);
  return s->hang_loaded ? LW_OK : LW_NOT_FOUND;
}

// One uncancelled run at steps: its length in microseconds.
static lw_status_t rc_time(lw_repeat_cancel_t *s, lw_bench_chip_t *d, uint64_t steps,
                           double *us) {
  lw_args_t a;
  LW_RETURN_IF_ERROR(
      lw__workload_vadd_args_threads(s->a, s->b, s->c, LW_RC_ITEMS, steps, s->threads, &a));
  double t0 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->run(d, s->h, &a));
  *us = lw__bench_now_us() - t0;
  return LW_OK;
}

lw_status_t lw__repeat_cancel_setup(void *p, lw_bench_chip_t *d) {
  lw_repeat_cancel_t *s = p;
  s->a = d->alloc(d, LW_RC_ITEMS * 4);
  s->b = d->alloc(d, LW_RC_ITEMS * 4);
  s->c = d->alloc(d, LW_RC_ITEMS * 4);
  s->flag = d->alloc(d, 2 * sizeof(uint32_t));
  if (!s->a || !s->b || !s->c || !s->flag) return LW_RESOURCE_EXHAUSTED;
  // a = b = 1: element i's result is (3^(steps+1) - 1) / 2 mod 2^32, never 0 (see
  // LW_RC_MAX_STEPS), so a 0 in c is an element that did not finish.
  for (uint32_t i = 0; i < LW_RC_ITEMS; ++i) s->a[i] = s->b[i] = 1;
  LW_RETURN_IF_ERROR(d->register_sync(d, &s->k, &s->h));
  LW_RETURN_IF_ERROR(d->register_sync(d, &s->hang, &s->hang_h));
  // Calibration on this device: a first run at one step loads the module (cuda) or compiles
  // the kernel (PoCL does at the first enqueue); then the steps grow until a run lasts
  // LW_RC_PROBE_US, and are scaled to LW_RC_FULL_US from there.
  double us;
  LW_RETURN_IF_ERROR(rc_time(s, d, 1, &us));
  uint64_t steps = LW_RC_FIRST_STEPS;
  for (;;) {
    LW_RETURN_IF_ERROR(rc_time(s, d, steps, &us));
    if (us >= LW_RC_PROBE_US || steps >= LW_RC_MAX_STEPS) break;
    double grow = fmin(fmax(2.0, LW_RC_PROBE_US / fmax(us, 1.0)), 64.0);
    steps = (uint64_t)fmin((double)steps * grow, (double)LW_RC_MAX_STEPS);
  }
  double full = (double)steps * LW_RC_FULL_US / fmax(us, 1.0);
  s->steps = (uint64_t)fmin(fmax(full, 1.0), (double)LW_RC_MAX_STEPS);
  s->full_us = us * (double)s->steps / (double)steps;
  return LW_OK;
}

lw_status_t lw__repeat_cancel_arm(void *p, lw_callable_handle_t *h, lw_args_t *a) {
  lw_repeat_cancel_t *s = p;
  memset(s->c, 0, LW_RC_ITEMS * 4);
  s->hang_armed = false;
  *h = s->h;
  return lw__workload_vadd_args_threads(s->a, s->b, s->c, LW_RC_ITEMS, s->steps, s->threads, a);
}

lw_status_t lw__repeat_cancel_arm_hang(void *p, lw_callable_handle_t *h, lw_args_t *a) {
  lw_repeat_cancel_t *s = p;
  memset(s->flag, 0, 2 * sizeof(uint32_t));
  s->hang_armed = true;
  *h = s->hang_h;
  lw_args_init(a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, s->flag, 2 * sizeof(uint32_t), s->hang_tag));
  return lw_args_add_scalar(a, LW_RC_HANG_STEPS);
}

lw_status_t lw__repeat_cancel_run_short(void *p, lw_bench_chip_t *d) {
  double us;
  return rc_time(p, d, 1, &us);
}

lw_cancel_seen_t lw__repeat_cancel_seen(void *p, double waited_us, char *why, size_t n) {
  (void)why;
  (void)n;
  lw_repeat_cancel_t *s = p;
  if (s->hang_armed) {
    if (__atomic_load_n(&s->flag[0], __ATOMIC_ACQUIRE) != 0) return LW_CANCEL_RUNNING;
    return waited_us >= LW_RC_HANG_START_US ? LW_CANCEL_RUNNING : LW_CANCEL_NOT_YET;
  }
  // Element 0 is in the first block (cuda) or slice (opencl); its result shows in host memory
  // once that is done where the device computes there. Otherwise, a quarter of the way into a
  // run calibrated to LW_RC_FULL_US the kernel runs (the trial's check afterwards confirms it
  // did).
  if (__atomic_load_n(&s->c[0], __ATOMIC_ACQUIRE) != 0) return LW_CANCEL_RUNNING;
  return waited_us >= 0.25 * s->full_us ? LW_CANCEL_RUNNING : LW_CANCEL_NOT_YET;
}

void lw__repeat_cancel_close(void *p, lw_bench_chip_t *d) {
  lw_repeat_cancel_t *s = p;
  if (d) {
    d->free(d, s->a);
    d->free(d, s->b);
    d->free(d, s->c);
    d->free(d, s->flag);
  }
  if (s->loaded) lw_callable_free_loaded(&s->k);
  if (s->hang_loaded) lw_callable_free_loaded(&s->hang);
  free(s);
}
