// tools/bench_overlap.c — `lanework bench overlap`: the register/run overlap table of seed
// 004, at L2 (one lw_chip_t in this process) or L3 (a worker with a forked chip child).
//
//   serial  = run(C1) + register(C2) + run(C2)
//   overlap = run_async(C1), [delay], register_async(C2) while C1 runs, run_async(C2)
//             queued behind C1, wait both
//
// C1 = repeat_vector_add (repeat_count calibrated so one run takes ~25 ms, or twice the C2
// register when that is longer, unless --repeat:
// long enough to hide the C2 register behind it, as in the seed),
// C2 = big_vector_add: an ~8 MiB image with a real prepare hook. C2 is unregistered after
// every trial so each trial pays its full register cost.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench.h"
#include "tools/overlap_driver.h"
#include "tools/overlap_events.h"

// C2 runs over 1 Mi elements. C1 repeats its add over 16 Ki elements (192 KiB: resident in a
// core's L2, like the seed's repeat_count = 1e6 runs): a long run that does not fight C2's
// prepare for cache and memory bandwidth, so the table shows lane overlap rather than
// contention.
#define N_ELEMS (1u << 20)
#define C1_ELEMS (1u << 14)
#define TARGET_C1_US 25000.0

typedef struct bufs {
  float *a, *b, *c1, *c2;
} bufs_t;

static lw_status_t args_for(lw_args_t *args, const bufs_t *b, float *out, long repeat) {
  uint64_t bytes = (repeat > 0 ? C1_ELEMS : N_ELEMS) * sizeof(float);
  lw_args_init(args);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(args, b->a, bytes, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(args, b->b, bytes, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(args, out, bytes, LW_TAG_OUTPUT));
  if (repeat > 0) LW_RETURN_IF_ERROR(lw_args_add_scalar(args, (uint64_t)repeat));
  return LW_OK;
}

static double max_diff(const bufs_t *b, const float *c, uint32_t n) {
  double m = 0.0;
  for (uint32_t i = 0; i < n; ++i) {
    double d = fabs((double)c[i] - (double)(b->a[i] + b->b[i]));
    if (d > m) m = d;
  }
  return m;
}

typedef struct row {
  long delay_ms;
  double run_c1, reg_c2, run_c2, serial, overlap;
  // overlap_by_events over the row's trials: median, min, max (-1: no register span seen)
  double by_events, by_events_min, by_events_max;
} row_t;

static lw_status_t one_trial(lw_overlap_driver_t *d, const lw_callable_t *c2,
                             lw_callable_handle_t h1, const bufs_t *b, long repeat, long delay,
                             const lw_overlap_trial_opts_t *to, row_t *r, double *diff) {
  lw_args_t a1, a2;
  LW_RETURN_IF_ERROR(args_for(&a1, b, b->c1, repeat));
  LW_RETURN_IF_ERROR(args_for(&a2, b, b->c2, 0));
  lw_callable_handle_t h2;

  // Serial.
  memset(b->c1, 0, N_ELEMS * sizeof(float));
  memset(b->c2, 0, N_ELEMS * sizeof(float));
  double t0 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->run(d, h1, &a1));
  double t1 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->register_sync(d, c2, &h2));
  double t2 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->run(d, h2, &a2));
  double t3 = lw__bench_now_us();
  r->run_c1 = t1 - t0;
  r->reg_c2 = t2 - t1;
  r->run_c2 = t3 - t2;
  r->serial = t3 - t0;
  *diff = fmax(*diff, fmax(max_diff(b, b->c1, C1_ELEMS), max_diff(b, b->c2, N_ELEMS)));
  LW_RETURN_IF_ERROR(d->unregister(d, h2));

  // Overlap.
  memset(b->c1, 0, N_ELEMS * sizeof(float));
  memset(b->c2, 0, N_ELEMS * sizeof(float));
  lw_handle_t *run1 = NULL, *reg = NULL, *run2 = NULL;
  lw_status_t st = lw__overlap_phase_start(d, to, h1, &a1, c2, delay, &t0, &run1, &reg);
  if (st != LW_OK && !run1) return st;
  if (st == LW_OK) st = lw_handle_wait(reg, LW_WAIT_FOREVER);
  if (st == LW_OK) st = lw_handle_callable(reg, &h2);
  if (st == LW_OK) st = d->run_async(d, h2, &a2, &run2);
  lw_status_t s1 = lw_handle_wait(run1, LW_WAIT_FOREVER);
  lw_status_t s2 = run2 ? lw_handle_wait(run2, LW_WAIT_FOREVER) : st;
  t1 = lw__bench_now_us();
  r->overlap = t1 - t0;
  lw_status_t ev_st = lw__overlap_events_end(to->ev, to->keep);
  if (st == LW_OK) st = s1 != LW_OK ? s1 : s2;
  if (st == LW_OK) st = ev_st;
  lw_handle_release(run1);
  lw_handle_release(run2);
  lw_handle_release(reg);
  if (st != LW_OK) return st;
  *diff = fmax(*diff, fmax(max_diff(b, b->c1, C1_ELEMS), max_diff(b, b->c2, N_ELEMS)));
  return d->unregister(d, h2);
}

// Picks repeat_count so one C1 run takes about the target: a few rounds, each the median of
// five runs, so one slow run (page faults, a noisy neighbour) does not skew the table. The
// target is TARGET_C1_US, or twice C2's register time when that is longer (a slow or loaded
// machine): C1 exists to hide the register, which it cannot do when it is the shorter of the
// two, and then neither the clock nor the events could show the overlap.
static lw_status_t calibrate(lw_overlap_driver_t *d, lw_callable_handle_t h1,
                             const lw_callable_t *c2, const bufs_t *b, long *out_repeat,
                             double *out_target_us) {
  double reg[3];
  for (int i = 0; i < 3; ++i) {
    lw_callable_handle_t h2;
    double t0 = lw__bench_now_us();
    LW_RETURN_IF_ERROR(d->register_sync(d, c2, &h2));
    reg[i] = lw__bench_now_us() - t0;
    LW_RETURN_IF_ERROR(d->unregister(d, h2));
  }
  double target = fmax(TARGET_C1_US, 2.0 * lw__bench_median(reg, 3));
  *out_target_us = target;
  long repeat = 16;
  for (int round = 0; round < 4; ++round) {
    lw_args_t a;
    LW_RETURN_IF_ERROR(args_for(&a, b, b->c1, repeat));
    double us[5];
    for (int i = 0; i < 5; ++i) {
      double t0 = lw__bench_now_us();
      LW_RETURN_IF_ERROR(d->run(d, h1, &a));
      us[i] = lw__bench_now_us() - t0;
    }
    double m = lw__bench_median(us, 5);
    long next = (long)((double)repeat * target / (m > 1.0 ? m : 1.0));
    repeat = next < 1 ? 1 : next;
  }
  *out_repeat = repeat;
  return LW_OK;
}

int lw__bench_overlap(const lw_bench_opts_t *o) {
  long delays[8];
  int n_delays = 0;
  n_delays = lw__bench_parse_delays(o->delays, delays, 8);
  if (n_delays < 0) return 2;

  lw_callable_t c1, c2;
  if (!lw__bench_load_kernel("repeat_vector_add", &c1)) return 1;
  if (!lw__bench_load_kernel("big_vector_add", &c2)) {
    lw_callable_free_loaded(&c1);
    return 1;
  }
  bufs_t b = {0};
  lw_overlap_driver_t *d = NULL;
  int rc = 1;
  bool pin = o->pin == 1 || (o->pin == -1 && sysconf(_SC_NPROCESSORS_ONLN) >= 2);
  lw_status_t st = lw__overlap_driver_open(o->level, "sim", N_ELEMS * sizeof(float) * 4, pin, &d);
  if (st != LW_OK) {
    rc = lw__bench_fail("opening the driver", st);
    goto out;
  }
  b.a = d->alloc(d, N_ELEMS * sizeof(float));
  b.b = d->alloc(d, N_ELEMS * sizeof(float));
  b.c1 = d->alloc(d, N_ELEMS * sizeof(float));
  b.c2 = d->alloc(d, N_ELEMS * sizeof(float));
  if (!b.a || !b.b || !b.c1 || !b.c2) {
    fprintf(stderr, "lanework bench overlap: out of memory\n");
    goto out;
  }
  for (uint32_t i = 0; i < N_ELEMS; ++i) {
    b.a[i] = (float)(i % 1000) * 0.5f;
    b.b[i] = (float)(i % 333) * 0.25f;
  }
  lw_callable_handle_t h1;
  st = d->register_sync(d, &c1, &h1);
  if (st != LW_OK) {
    rc = lw__bench_fail("register C1", st);
    goto out;
  }
  long repeat = o->repeat;
  double target_us = 0;
  if (repeat <= 0) lw__bench_progress("calibrating C1");
  if (repeat <= 0 && (st = calibrate(d, h1, &c2, &b, &repeat, &target_us)) != LW_OK) {
    rc = lw__bench_fail("calibration", st);
    goto out;
  }
  // One untimed warm-up trial: first-touch page faults and lazy binding stay out of the table.
  double diff = 0.0;
  row_t warm;
  static lw_overlap_events_t ev[8];  // big: not on the stack
  char stem[64];
  snprintf(stem, sizeof(stem), "overlap_l%d_sim%s", o->level, o->serial ? "_serial" : "");
  lw__overlap_events_init(&ev[0], o->trace_dir, stem);
  lw_overlap_trial_opts_t warm_opts = {o->serial, &ev[0], false};
  lw__bench_progress("warm-up trial");
  st = one_trial(d, &c2, h1, &b, repeat, 0, &warm_opts, &warm, &diff);
  if (st != LW_OK) {
    rc = lw__bench_fail("warm-up trial", st);
    goto out;
  }

  row_t rows[8];
  int trials = o->trials;
  for (int di = 0; di < n_delays; ++di) {
    double run_c1[1000], reg_c2[1000], run_c2[1000], serial[1000], overlap[1000];
    // Only the first row's first trial is kept as a picture.
    lw__overlap_events_init(&ev[di], di == 0 ? o->trace_dir : NULL, stem);
    lw_overlap_trial_opts_t topts = {o->serial, &ev[di], true};
    for (int t = 0; t < trials; ++t) {
      row_t r;
      lw__bench_progress("delay %ld ms: trial %d/%d", delays[di], t + 1, trials);
      st = one_trial(d, &c2, h1, &b, repeat, delays[di], &topts, &r, &diff);
      if (st != LW_OK) {
        rc = lw__bench_fail("trial", st);
        goto out;
      }
      if (getenv("LW_BENCH_VERBOSE")) {
        fprintf(stderr, "trial %d delay %ld: run_c1 %.0f reg_c2 %.0f run_c2 %.0f serial %.0f overlap %.0f\n",
                t, delays[di], r.run_c1, r.reg_c2, r.run_c2, r.serial, r.overlap);
      }
      run_c1[t] = r.run_c1;
      reg_c2[t] = r.reg_c2;
      run_c2[t] = r.run_c2;
      serial[t] = r.serial;
      overlap[t] = r.overlap;
    }
    rows[di] = (row_t){delays[di],
                       lw__bench_median(run_c1, (size_t)trials),
                       lw__bench_median(reg_c2, (size_t)trials),
                       lw__bench_median(run_c2, (size_t)trials),
                       lw__bench_median(serial, (size_t)trials),
                       lw__bench_median(overlap, (size_t)trials), -1, -1, -1};
    (void)lw__overlap_events_summary(&ev[di], &rows[di].by_events, &rows[di].by_events_min,
                                     &rows[di].by_events_max);
  }

  lw__bench_progress_end();
  printf("L%d %s end-to-end: C1 = repeat_vector_add (%u elements, repeat_count=%ld), "
         "C2 = big_vector_add (%u elements, %zu-byte image, prepare hook), trials=%d\n",
         o->level, o->level == 2 ? "direct chip worker" : "worker (forked chip child)", C1_ELEMS,
         repeat, N_ELEMS, c2.image_bytes, trials);
  printf("  run(C1) %.1f us, register(C2) %.1f us, run(C2) %.1f us (medians, delay %ld ms)\n",
         rows[0].run_c1, rows[0].reg_c2, rows[0].run_c2, rows[0].delay_ms);
  if (target_us > 0) {
    printf("  C1 calibrated to %.1f ms: max(25 ms, 2 x register(C2) as measured first)\n",
           target_us / 1000.0);
  }
  printf("  lanes: %s\n\n", pin ? "run lane on CPU 0, register lane on CPU 1 (--no-pin to let the OS place them)"
                                 : "placed by the OS");
  if (o->serial) {
    printf("  --serial: C2 is registered only after C1 finished (the negative control: both "
           "columns should read ~0)\n\n");
  }
  printf("| Delay before C2 register | Serial median | Overlap median | Reduction | Speedup | "
         "Hidden | By events (min-max) |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int di = 0; di < n_delays; ++di) {
    const row_t *r = &rows[di];
    double hidden = lw__bench_hidden_fraction(r->serial, r->overlap, r->run_c1, r->reg_c2);
    printf("| %ld ms | %.1f us | %.1f us | %.1f%% | %.2fx | %.2f | %.2f (%.2f-%.2f) |\n",
           r->delay_ms, r->serial, r->overlap, 100.0 * (r->serial - r->overlap) / r->serial,
           r->serial / r->overlap, hidden, r->by_events, r->by_events_min, r->by_events_max);
  }
  printf("\nHidden: from the clock, (serial - overlap) / min(run C1, register C2). By events: the "
         "share of\neach trial's register span inside a run span of the same chip, from the "
         "trial's trace events.\n");
  printf("\nCorrectness: max_diff=%.3e\n", diff);
  int json_rc = 0;
  if (o->json) {
    const row_t *r = &rows[0];
    lw_json_t j;
    lw__bench_json_begin(&j, "overlap");
    lw__json_kv_int(&j, "level", o->level);
    lw__json_kv_int(&j, "trials", trials);
    lw__json_kv_int(&j, "repeat_count", repeat);
    lw__json_kv_bool(&j, "pinned", pin);
    lw__json_kv_int(&j, "delay_ms", r->delay_ms);
    lw__json_kv_fixed(&j, "run_c1_us", r->run_c1, 1);
    lw__json_kv_fixed(&j, "register_c2_us", r->reg_c2, 1);
    lw__json_kv_fixed(&j, "run_c2_us", r->run_c2, 1);
    lw__json_kv_fixed(&j, "serial_median_us", r->serial, 1);
    lw__json_kv_fixed(&j, "overlap_median_us", r->overlap, 1);
    lw__json_kv_fixed(&j, "speedup", r->serial / r->overlap, 3);
    lw__json_kv_fixed(&j, "hidden_fraction",
                      lw__bench_hidden_fraction(r->serial, r->overlap, r->run_c1, r->reg_c2), 3);
    lw__json_kv_bool(&j, "serial_control", o->serial);
    lw__json_kv_fixed(&j, "overlap_by_events", r->by_events, 3);
    lw__json_kv_fixed(&j, "overlap_by_events_min", r->by_events_min, 3);
    lw__json_kv_fixed(&j, "overlap_by_events_max", r->by_events_max, 3);
    lw__json_kv_uint(&j, "trace_dropped_events", ev[0].dropped);
    // Four significant digits, as the table prints it.
    lw__json_key(&j, "max_diff");
    lw__json_double_digits(&j, diff, 4);
    lw__json_key(&j, "rows");
    lw__json_begin_array(&j);
    for (int di = 0; di < n_delays; ++di) {
      const row_t *x = &rows[di];
      lw__json_begin_object(&j);
      lw__json_kv_int(&j, "delay_ms", x->delay_ms);
      lw__json_kv_fixed(&j, "serial_median_us", x->serial, 1);
      lw__json_kv_fixed(&j, "overlap_median_us", x->overlap, 1);
      lw__json_kv_fixed(&j, "speedup", x->serial / x->overlap, 3);
      lw__json_kv_fixed(&j, "hidden_fraction",
                        lw__bench_hidden_fraction(x->serial, x->overlap, x->run_c1, x->reg_c2),
                        3);
      lw__json_kv_fixed(&j, "overlap_by_events", x->by_events, 3);
      lw__json_kv_fixed(&j, "overlap_by_events_min", x->by_events_min, 3);
      lw__json_kv_fixed(&j, "overlap_by_events_max", x->by_events_max, 3);
      lw__json_end_object(&j);
    }
    lw__json_end_array(&j);
    json_rc = lw__bench_json_end(&j, "overlap");
  }
  rc = diff == 0.0 ? json_rc : 1;
  if (rc) fprintf(stderr, "lanework bench overlap: results differ from the reference\n");
out:
  if (d) {
    d->free(d, b.a);
    d->free(d, b.b);
    d->free(d, b.c1);
    d->free(d, b.c2);
    d->close(d);
  }
  lw_callable_free_loaded(&c1);
  lw_callable_free_loaded(&c2);
  return rc;
}
