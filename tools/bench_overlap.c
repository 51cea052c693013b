// tools/bench_overlap.c — the `lanework bench overlap` driver (see bench_overlap.h): seed 004's
// register/run overlap table at L2 or L3 on any backend, each row proved from the trials'
// trace events.
//
// A trial is a serial arm then an overlapped arm, each in its own trace session. The clock
// gives seed 004's figures (serial, overlap, speedup, hidden) and the register phase (run(C1)
// and register(C2) against the time until both are done, run(C2) left out: on PoCL run(C2) is
// C2's first enqueue, seconds of machine-code generation whose spread would drown the register
// itself). The events give overlap_by_events, run_stretch and hidden_by_events
// (overlap_proof.h): the overlap holds only when hidden_by_events >= LW_OVERLAP_HOLDS.
//
// Negative controls: --serial registers C2 only after C1 finished (every figure reads ~0);
// --stall-control (sim) turns the sim backend's device lock on (LW_SIM_DEVICE_LOCK=1, set by
// the dispatcher before the process starts), so the register stops the running kernel for its
// whole length, as NVIDIA's OpenCL build does: overlap_by_events still reads ~1, run_stretch
// ~1 + register/run, hidden_by_events ~0.
#include "tools/bench_overlap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/overlap_events.h"
#include "tools/overlap_proof.h"

// One trial. Times in microseconds; c1_done and reg_done from C1's submit in the overlapped
// arm, from its events.
typedef struct trial {
  double run_c1, reg_c2, run_c2, serial;
  double overlap, overlap_reg;
  double c1_done, reg_done;
  double load_c2;   // C2's module load in its first run (overlapped arm; cuda), NAN: none
  uint32_t stalls;  // runs held at a poll in the overlapped arm (the sim device lock)
  bool proved;
  lw_overlap_proof_t proof;
} trial_t;

// Per-trial figures of a row as arrays, so medians and spreads come from one place.
enum {
  F_RUN_C1,
  F_REG_C2,
  F_RUN_C2,
  F_LOAD_C2,
  F_SERIAL,
  F_OVERLAP,
  F_OVERLAP_REG,
  F_C1_DONE,
  F_REG_DONE,
  F_HIDDEN,
  F_HIDDEN_REG,
  F_BY_EVENTS,    // proved trials only, as the next two
  F_RUN_STRETCH,
  F_HIDDEN_BY_EVENTS,
  F_COUNT,
};

typedef struct figure {
  double median, lo, hi;  // NAN when no trial had it
} figure_t;

typedef struct row {
  long delay_ms;
  int proved;   // trials whose events had every span the proof needs
  int stalled;  // trials whose overlapped arm held a run at a poll (the sim device lock)
  figure_t f[F_COUNT];
  double hidden;      // seed 004's: from the medians of serial, overlap, run(C1), register(C2)
  double hidden_reg;  // the same over the register phase
} row_t;

typedef struct bench {
  const lw_bench_opts_t *o;
  const lw_overlap_workload_t *w;
  void *ws;  // the workload's state
  lw_bench_chip_t *d;
  lw_callable_handle_t h1;
  long repeat;  // C1's repeat count
  unsigned n_trials;  // trials run so far (warm-up included): which arm goes first
  lw_overlap_events_t ev;
  lw_overlap_check_t chk;
  double register_floor_us;  // what calibrate wanted of C2's register (0: nothing)
  bool register_floor_met;   // and whether C2 got there (false: at its heaviest), in the
                             // calibration and in the trials' median register
  double register_calibrated_us;  // the calibration's last median register of C2
  const char *c2_label;           // C2's name, taken once (w->c2 is called once a register)
} bench_t;

static const char *c1_name(const bench_t *b) { return b->w->c1(b->ws)->name; }
static const char *c2_name(const bench_t *b) { return b->c2_label; }

// The serial arm: run(C1), register(C2), run(C2), one after the other, traced.
static lw_status_t serial_arm(bench_t *b, const lw_args_t *a1, const lw_args_t *a2,
                              trial_t *t, lw_overlap_arm_t *arm) {
  lw_bench_chip_t *d = b->d;
  lw_callable_handle_t h2;
  b->w->clear(b->ws);
  LW_RETURN_IF_ERROR(lw__overlap_events_begin(&b->ev));
  double t0 = lw__bench_now_us();
  lw_status_t st = d->run(d, b->h1, a1);
  double t1 = lw__bench_now_us();
  if (st == LW_OK) st = d->register_sync(d, b->w->c2(b->ws), &h2);
  double t2 = lw__bench_now_us();
  bool registered = st == LW_OK;
  if (st == LW_OK) st = d->run(d, h2, a2);
  double t3 = lw__bench_now_us();
  lw_status_t ev_st = lw__overlap_events_end(&b->ev, c1_name(b), c2_name(b), false, arm);
  if (st == LW_OK) st = ev_st;
  t->run_c1 = t1 - t0;
  t->reg_c2 = t2 - t1;
  t->run_c2 = t3 - t2;
  t->serial = t3 - t0;
  if (st == LW_OK) b->w->check(b->ws, b->repeat, &b->chk);
  if (registered) {
    lw_status_t ust = d->unregister(d, h2);
    if (st == LW_OK) st = ust;
  }
  return st;
}

// The overlapped arm: run_async(C1), the delay (with --serial, C1's end), register_async(C2),
// and once C2 is registered run_async(C2) queued behind C1; traced. keep: a measured trial,
// whose trace may be the one --trace keeps.
static lw_status_t overlapped_arm(bench_t *b, const lw_args_t *a1, const lw_args_t *a2,
                                  long delay_ms, bool keep, trial_t *t, lw_overlap_arm_t *arm) {
  lw_bench_chip_t *d = b->d;
  lw_handle_t *run1 = NULL, *reg = NULL, *run2 = NULL;
  lw_callable_handle_t h2;
  bool registered = false;
  b->w->clear(b->ws);
  LW_RETURN_IF_ERROR(lw__overlap_events_begin(&b->ev));
  double t0 = lw__bench_now_us();
  lw_status_t st = d->run_async(d, b->h1, a1, &run1);
  if (st == LW_OK) {
    lw__bench_sleep_ms(delay_ms);
    if (b->o->serial) st = lw_handle_wait(run1, LW_WAIT_FOREVER);
  }
  if (st == LW_OK) st = d->register_async(d, b->w->c2(b->ws), &reg);
  if (st == LW_OK) st = lw_handle_wait(reg, LW_WAIT_FOREVER);
  if (st == LW_OK) st = lw_handle_callable(reg, &h2);
  registered = st == LW_OK;
  if (st == LW_OK) st = d->run_async(d, h2, a2, &run2);
  // Both handles are waited whatever failed, so no run outlives the arm.
  lw_status_t s1 = run1 ? lw_handle_wait(run1, LW_WAIT_FOREVER) : LW_OK;
  double t_phase = lw__bench_now_us();
  lw_status_t s2 = run2 ? lw_handle_wait(run2, LW_WAIT_FOREVER) : LW_OK;
  double t_end = lw__bench_now_us();
  lw_status_t ev_st = lw__overlap_events_end(&b->ev, c1_name(b), c2_name(b), keep, arm);
  if (st == LW_OK) st = s1 != LW_OK ? s1 : s2;
  if (st == LW_OK) st = ev_st;
  lw_handle_release(run1);
  lw_handle_release(run2);
  lw_handle_release(reg);
  t->overlap = t_end - t0;
  t->overlap_reg = t_phase - t0;
  double t0_ns = t0 * 1e3;
  t->c1_done = arm->run_t1_ns ? ((double)arm->run_t1_ns - t0_ns) / 1e3 : NAN;
  t->reg_done = arm->reg_t1_ns ? ((double)arm->reg_t1_ns - t0_ns) / 1e3 : NAN;
  if (st == LW_OK) b->w->check(b->ws, b->repeat, &b->chk);
  if (registered) {
    lw_status_t ust = d->unregister(d, h2);
    if (st == LW_OK) st = ust;
  }
  return st;
}

// A trial: its two arms, in turns serial first and overlapped first (by the count of trials so
// far), so a machine whose speed drifts within a trial moves run_stretch both ways rather than
// always the same way.
static lw_status_t one_trial(bench_t *b, long delay_ms, bool keep, trial_t *t) {
  lw_args_t a1, a2;
  LW_RETURN_IF_ERROR(b->w->args_c1(b->ws, b->repeat, &a1));
  LW_RETURN_IF_ERROR(b->w->args_c2(b->ws, &a2));
  lw_overlap_arm_t serial, overlapped;
  memset(t, 0, sizeof(*t));
  if (b->n_trials++ % 2 == 0) {
    LW_RETURN_IF_ERROR(serial_arm(b, &a1, &a2, t, &serial));
    LW_RETURN_IF_ERROR(overlapped_arm(b, &a1, &a2, delay_ms, keep, t, &overlapped));
  } else {
    LW_RETURN_IF_ERROR(overlapped_arm(b, &a1, &a2, delay_ms, keep, t, &overlapped));
    LW_RETURN_IF_ERROR(serial_arm(b, &a1, &a2, t, &serial));
  }
  t->stalls = overlapped.stalls;
  t->load_c2 = overlapped.load_ns >= 0 ? (double)overlapped.load_ns / 1e3 : NAN;
  t->proved = lw__overlap_proof(&serial, &overlapped, &t->proof);
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// C1's length

// Median of three C1 runs at repeat, in microseconds.
static lw_status_t time_c1(bench_t *b, long repeat, double *out_us) {
  lw_args_t a;
  LW_RETURN_IF_ERROR(b->w->args_c1(b->ws, repeat, &a));
  double us[3];
  for (int i = 0; i < 3; ++i) {
    double t0 = lw__bench_now_us();
    LW_RETURN_IF_ERROR(b->d->run(b->d, b->h1, &a));
    us[i] = lw__bench_now_us() - t0;
  }
  *out_us = lw__bench_median(us, 3);
  return LW_OK;
}

// Scales *repeat so one C1 run takes about target_us: at most four rounds, done once a run
// lands within 10% of the target.
static lw_status_t scale_c1(bench_t *b, double target_us, long *repeat) {
  for (int round = 0; round < 4; ++round) {
    double m;
    LW_RETURN_IF_ERROR(time_c1(b, *repeat, &m));
    if (fabs(m - target_us) <= 0.1 * target_us) break;
    double next = (double)*repeat * target_us / (m > 1.0 ? m : 1.0);
    *repeat = next < 1.0 ? 1 : next > 1e9 ? 1000000000L : (long)next;
  }
  return LW_OK;
}

// See lw_overlap_workload_t: C1 at the floor first (warm), then at its target.
static lw_status_t calibrate(bench_t *b, long *repeat, double *out_target_us) {
  const lw_overlap_workload_t *w = b->w;
  *repeat = w->initial_repeat;
  LW_RETURN_IF_ERROR(scale_c1(b, w->target_floor_us, repeat));
  double reg[8], median = 0;
  int n = w->register_samples < 8 ? w->register_samples : 8;
  double floor_us =
      b->o->register_ms >= 0 ? (double)b->o->register_ms * 1e3 : w->register_floor_us;
  b->register_floor_us = floor_us;
  // The first register of C2 in a process also loads its compiler (NVRTC and its builtins,
  // an OpenCL driver's compiler): not a figure of the register the trials hide, so it is not
  // measured.
  {
    lw_callable_handle_t h2;
    LW_RETURN_IF_ERROR(b->d->register_sync(b->d, w->c2(b->ws), &h2));
    LW_RETURN_IF_ERROR(b->d->unregister(b->d, h2));
  }
  // C2 grows until its register takes floor_us: a few rounds, each at most doubling it (a
  // compile's time may grow faster than its code, so a jump aimed straight at the floor could
  // overshoot it many times over).
  for (int round = 0; round < 12; ++round) {
    for (int i = 0; i < n; ++i) {
      lw_callable_handle_t h2;
      double t0 = lw__bench_now_us();
      LW_RETURN_IF_ERROR(b->d->register_sync(b->d, w->c2(b->ws), &h2));
      reg[i] = lw__bench_now_us() - t0;
      LW_RETURN_IF_ERROR(b->d->unregister(b->d, h2));
    }
    // Every sample is said: a round decides C1's length and every trial's, and one slow
    // register (seen on an H100: one of ~3 s among ~40 ms ones) must show where it came from.
    char said[8 * 16] = "";
    for (int i = 0, at = 0; i < n && at < (int)sizeof(said); ++i) {
      at += snprintf(said + at, sizeof(said) - (size_t)at, "%s%.0f", i ? " " : "", reg[i] / 1e3);
    }
    median = lw__bench_median(reg, (size_t)n);
    b->register_floor_met = median >= floor_us;
    b->register_calibrated_us = median;
    if (b->register_floor_met || !w->c2_heavier) {
      lw__bench_progress("C2's register took %s ms (median %.0f ms)", said, median / 1e3);
      break;
    }
    lw__bench_progress("C2's register took %s ms (median %.0f ms), less than %.0f ms: a heavier "
                       "C2", said, median / 1e3, floor_us / 1e3);
    if (!w->c2_heavier(b->ws, median, floor_us)) break;
  }
  double target = fmin(fmax(w->target_factor * median, w->target_floor_us), w->target_cap_us);
  *out_target_us = target;
  return scale_c1(b, target, repeat);
}

// ---------------------------------------------------------------------------------------------
// Rows

static figure_t figure_of(double *v, size_t n) {
  figure_t f = {NAN, NAN, NAN};
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!isnan(v[i])) v[k++] = v[i];
  }
  if (k == 0) return f;
  f.median = lw__bench_median(v, k);
  lw__bench_spread(v, k, &f.lo, &f.hi);
  return f;
}

static void row_of(const trial_t *t, int n, long delay_ms, row_t *r) {
  double *v = malloc(sizeof(double) * (size_t)n);
  memset(r, 0, sizeof(*r));
  r->delay_ms = delay_ms;
  for (int i = 0; i < n; ++i) {
    r->proved += t[i].proved;
    r->stalled += t[i].stalls > 0;
  }
  if (!v) {
    for (int k = 0; k < F_COUNT; ++k) r->f[k] = (figure_t){NAN, NAN, NAN};
  }
  for (int k = 0; k < F_COUNT && v; ++k) {
    for (int i = 0; i < n; ++i) {
      const trial_t *x = &t[i];
      double y = NAN;
      switch (k) {
        case F_RUN_C1: y = x->run_c1; break;
        case F_REG_C2: y = x->reg_c2; break;
        case F_RUN_C2: y = x->run_c2; break;
        case F_LOAD_C2: y = x->load_c2; break;
        case F_SERIAL: y = x->serial; break;
        case F_OVERLAP: y = x->overlap; break;
        case F_OVERLAP_REG: y = x->overlap_reg; break;
        case F_C1_DONE: y = x->c1_done; break;
        case F_REG_DONE: y = x->reg_done; break;
        case F_HIDDEN:
          y = lw__bench_hidden_fraction(x->serial, x->overlap, x->run_c1, x->reg_c2);
          break;
        case F_HIDDEN_REG:
          y = lw__bench_hidden_fraction(x->run_c1 + x->reg_c2, x->overlap_reg, x->run_c1,
                                        x->reg_c2);
          break;
        case F_BY_EVENTS: y = x->proved ? x->proof.by_events : NAN; break;
        case F_RUN_STRETCH: y = x->proved ? x->proof.run_stretch : NAN; break;
        case F_HIDDEN_BY_EVENTS: y = x->proved ? x->proof.hidden_by_events : NAN; break;
      }
      v[i] = y;
    }
    r->f[k] = figure_of(v, (size_t)n);
  }
  free(v);
  const figure_t *f = r->f;
  r->hidden = lw__bench_hidden_fraction(f[F_SERIAL].median, f[F_OVERLAP].median,
                                        f[F_RUN_C1].median, f[F_REG_C2].median);
  r->hidden_reg = lw__bench_hidden_fraction(f[F_RUN_C1].median + f[F_REG_C2].median,
                                            f[F_OVERLAP_REG].median, f[F_RUN_C1].median,
                                            f[F_REG_C2].median);
}

// LW_BENCH_VERBOSE=1: each trial's figures on stderr, for a look at the spread behind a row.
static void print_trial(long delay_ms, int index, const trial_t *t) {
  fprintf(stderr,
          "trial %d delay %ld: run_c1 %.0f reg_c2 %.0f run_c2 %.0f serial %.0f overlap %.0f "
          "overlap_reg %.0f c1_done %.0f reg_done %.0f",
          index, delay_ms, t->run_c1, t->reg_c2, t->run_c2, t->serial, t->overlap,
          t->overlap_reg, t->c1_done, t->reg_done);
  if (t->proved) {
    fprintf(stderr, " by_events %.3f run_stretch %.3f hidden_by_events %.3f\n",
            t->proof.by_events, t->proof.run_stretch, t->proof.hidden_by_events);
  } else {
    fprintf(stderr, " (events incomplete)\n");
  }
}

static bool holds(const row_t *r) {
  return !isnan(r->f[F_HIDDEN_BY_EVENTS].median) &&
         r->f[F_HIDDEN_BY_EVENTS].median >= LW_OVERLAP_HOLDS;
}

// ---------------------------------------------------------------------------------------------
// Output

static void print_table(const bench_t *b, const row_t *rows, int n_rows, long repeat,
                        double target_us, double open_ms) {
  const lw_bench_opts_t *o = b->o;
  const row_t *r0 = &rows[0];
  const figure_t *f = r0->f;
  printf("L%d %s, %s chip, device 0 (opened in %.0f ms), trials=%d\n", o->level,
         o->level == 2 ? "direct chip worker" : "worker (forked chip child)", b->w->backend,
         open_ms, o->trials);
  b->w->describe(b->ws, repeat, stdout);
  printf("  run(C1) %.2f ms, register(C2) %.2f ms (trials %.2f-%.2f), run(C2) %.2f ms "
         "(medians, delay %ld ms)\n",
         f[F_RUN_C1].median / 1e3, f[F_REG_C2].median / 1e3, f[F_REG_C2].lo / 1e3,
         f[F_REG_C2].hi / 1e3, f[F_RUN_C2].median / 1e3, r0->delay_ms);
  if (!isnan(f[F_LOAD_C2].median)) {
    // The cuda backend loads C2's module on the run lane once C1's kernel ended (docs/cuda.md,
    // "The stall"): a part of C2's first run, not of C1's.
    printf("  C2's module load, in its first run after C1: %.3f ms (median; %.3f-%.3f)\n",
           f[F_LOAD_C2].median / 1e3, f[F_LOAD_C2].lo / 1e3, f[F_LOAD_C2].hi / 1e3);
  }
  if (target_us > 0) {
    printf("  C1 calibrated to %.1f ms: %.1f x register(C2), at least %.0f ms", target_us / 1e3,
           b->w->target_factor, b->w->target_floor_us / 1e3);
    if (isfinite(b->w->target_cap_us)) printf(", at most %.0f ms", b->w->target_cap_us / 1e3);
    printf("\n");
    if (b->register_floor_us > 0) {
      printf("  C2 made heavy enough that a register takes at least %.0f ms (--register-ms): %s "
             "(calibration %.0f ms, trials %.0f ms)\n",
             b->register_floor_us / 1e3,
             b->register_floor_met ? "yes" : "NO, C2's register was faster",
             b->register_calibrated_us / 1e3, f[F_REG_C2].median / 1e3);
    }
  }
  printf("  lanes: %s\n", lw__bench_pin(o) ? "run lane on CPU 0, register lane on CPU 1 "
                                             "(--no-pin to let the OS place them)"
                                           : "placed by the OS");
  if (o->serial) {
    printf("  --serial: C2 is registered only after C1 finished, the negative control: "
           "hidden, by events and hidden by events read ~0\n");
  }
  if (o->stall_control) {
    printf("  --stall-control: the sim device lock is on (LW_SIM_DEVICE_LOCK=1): a register "
           "stops the running kernel until it ends, the negative control: by events reads ~1, "
           "run stretch ~1 + register/run, hidden by events ~0; a run was held at a poll in %d "
           "of %d trials (delay %ld ms)\n",
           r0->stalled, o->trials, r0->delay_ms);
  }
  printf("\n| Delay before C2 register | Serial median | Overlap median | Speedup | Hidden "
         "(clock) | By events | Run stretch | Hidden by events (min-max) | Holds |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n_rows; ++i) {
    const row_t *r = &rows[i];
    const figure_t *g = r->f;
    printf("| %ld ms | %.2f ms | %.2f ms | %.2fx | %.3f | %.3f | %.3f | %.3f (%.3f-%.3f) | %s |\n",
           r->delay_ms, g[F_SERIAL].median / 1e3, g[F_OVERLAP].median / 1e3,
           g[F_SERIAL].median / g[F_OVERLAP].median, r->hidden, g[F_BY_EVENTS].median,
           g[F_RUN_STRETCH].median, g[F_HIDDEN_BY_EVENTS].median, g[F_HIDDEN_BY_EVENTS].lo,
           g[F_HIDDEN_BY_EVENTS].hi, holds(r) ? "yes" : "no");
  }
  printf("\nHidden (clock): (serial - overlap) / min(run C1, register C2), seed 004's. By "
         "events: the share of the\nregister span inside run spans of the same chip. Run "
         "stretch: C1's run span overlapped / alone.\nHidden by events: by events - max(0, "
         "run overlapped - run alone) / register, clamped to [0, 1]:\ncontainment minus the "
         "time the register stopped the run. The overlap holds when it is >= %.2f.\n",
         LW_OVERLAP_HOLDS);
  if (r0->proved < o->trials) {
    printf("Events: %d of %d trials recorded every span the proof needs (%llu events "
           "dropped)\n",
           r0->proved, o->trials, (unsigned long long)b->ev.dropped);
  }
  printf("\nRegister phase (run(C1) + register(C2) against C1's submit to both done, run(C2) "
         "left out), delay %ld ms:\n  serial %.2f ms, overlap %.2f ms, hidden %.3f (trials "
         "%.3f-%.3f); C1 done %.2f ms and the register\n  done %.2f ms after C1's submit "
         "(alone: %.2f and %.2f ms)\n",
         r0->delay_ms, (f[F_RUN_C1].median + f[F_REG_C2].median) / 1e3,
         f[F_OVERLAP_REG].median / 1e3, r0->hidden_reg, f[F_HIDDEN_REG].lo, f[F_HIDDEN_REG].hi,
         f[F_C1_DONE].median / 1e3, f[F_REG_DONE].median / 1e3, f[F_RUN_C1].median / 1e3,
         f[F_REG_C2].median / 1e3);
  printf("\nCorrectness: max_diff=%.3e", b->chk.max_diff);
  if (b->w->rel_tol > 0) {
    printf(", max relative error %.3e (tolerance %.0e)", b->chk.rel_err, b->w->rel_tol);
  }
  printf("\n");
}

static void json_row(lw_json_t *j, const row_t *r) {
  const figure_t *f = r->f;
  lw__json_kv_fixed(j, "serial_median_us", f[F_SERIAL].median, 1);
  lw__json_kv_fixed(j, "overlap_median_us", f[F_OVERLAP].median, 1);
  lw__json_kv_fixed(j, "speedup", f[F_SERIAL].median / f[F_OVERLAP].median, 3);
  lw__bench_json_spread(j, "hidden_fraction", r->hidden, f[F_HIDDEN].lo, f[F_HIDDEN].hi, 3);
  lw__bench_json_spread(j, "hidden_fraction_register_phase", r->hidden_reg,
                        f[F_HIDDEN_REG].lo, f[F_HIDDEN_REG].hi, 3);
  lw__bench_json_spread(j, "overlap_by_events", f[F_BY_EVENTS].median, f[F_BY_EVENTS].lo,
                        f[F_BY_EVENTS].hi, 3);
  lw__bench_json_spread(j, "run_stretch", f[F_RUN_STRETCH].median, f[F_RUN_STRETCH].lo,
                        f[F_RUN_STRETCH].hi, 3);
  lw__bench_json_spread(j, "hidden_by_events", f[F_HIDDEN_BY_EVENTS].median,
                        f[F_HIDDEN_BY_EVENTS].lo, f[F_HIDDEN_BY_EVENTS].hi, 3);
  lw__json_kv_bool(j, "overlap_holds", holds(r));
  lw__json_kv_int(j, "trials_proved", r->proved);
  lw__json_kv_int(j, "trials_stalled", r->stalled);
}

static int print_json(const bench_t *b, const row_t *rows, int n_rows, long repeat,
                      double target_us, double open_ms) {
  const lw_bench_opts_t *o = b->o;
  const row_t *r = &rows[0];
  const figure_t *f = r->f;
  lw_json_t j;
  lw__bench_json_begin(&j, "overlap");
  lw__json_kv_int(&j, "level", o->level);
  lw__json_kv_int(&j, "trials", o->trials);
  lw__json_kv_int(&j, "repeat_count", repeat);
  lw__json_kv_fixed(&j, "c1_target_us", target_us > 0 ? target_us : NAN, 1);
  lw__json_kv_fixed(&j, "register_floor_us", b->register_floor_us > 0 ? b->register_floor_us : NAN,
                    1);
  lw__json_kv_bool(&j, "register_floor_met", b->register_floor_met);
  lw__json_kv_fixed(&j, "register_c2_calibrated_us",
                    b->register_floor_us > 0 ? b->register_calibrated_us : NAN, 1);
  lw__json_kv_bool(&j, "pinned", lw__bench_pin(o));
  lw__json_kv_fixed(&j, "chip_open_ms", open_ms, 1);
  lw__json_kv_bool(&j, "serial_control", o->serial);
  lw__json_kv_bool(&j, "stall_control", o->stall_control);
  lw__json_kv_int(&j, "delay_ms", r->delay_ms);
  lw__json_kv_fixed(&j, "run_c1_us", f[F_RUN_C1].median, 1);
  lw__bench_json_spread(&j, "register_c2_us", f[F_REG_C2].median, f[F_REG_C2].lo,
                        f[F_REG_C2].hi, 1);
  lw__json_kv_fixed(&j, "run_c2_us", f[F_RUN_C2].median, 1);
  lw__json_kv_fixed(&j, "load_c2_us", f[F_LOAD_C2].median, 1);
  json_row(&j, r);
  lw__json_kv_fixed(&j, "register_phase_serial_median_us",
                    f[F_RUN_C1].median + f[F_REG_C2].median, 1);
  lw__json_kv_fixed(&j, "register_phase_overlap_median_us", f[F_OVERLAP_REG].median, 1);
  lw__json_kv_fixed(&j, "overlap_c1_done_us", f[F_C1_DONE].median, 1);
  lw__json_kv_fixed(&j, "overlap_register_done_us", f[F_REG_DONE].median, 1);
  lw__json_kv_uint(&j, "trace_dropped_events", b->ev.dropped);
  // Errors with four significant digits, as the table prints them.
  lw__json_key(&j, "max_diff");
  lw__json_double_digits(&j, b->chk.max_diff, 4);
  lw__json_key(&j, "max_rel_err");
  lw__json_double_digits(&j, b->chk.rel_err, 4);
  if (b->w->json) b->w->json(b->ws, &j);
  lw__json_key(&j, "rows");
  lw__json_begin_array(&j);
  for (int i = 0; i < n_rows; ++i) {
    lw__json_begin_object(&j);
    lw__json_kv_int(&j, "delay_ms", rows[i].delay_ms);
    json_row(&j, &rows[i]);
    lw__json_end_object(&j);
  }
  lw__json_end_array(&j);
  return lw__bench_json_end(&j, "overlap");
}

// ---------------------------------------------------------------------------------------------

int lw__bench_overlap(const lw_bench_opts_t *o, const lw_overlap_workload_t *w) {
  long delays[LW_BENCH_MAX_DELAYS];
  int n_delays = lw__bench_parse_delays(o->delays ? o->delays : w->default_delays, delays,
                                        LW_BENCH_MAX_DELAYS);
  if (n_delays < 0) return 2;
  bench_t b = {.o = o, .w = w};
  int rc = 1;
  trial_t *trials = calloc((size_t)o->trials, sizeof(trial_t));
  row_t rows[LW_BENCH_MAX_DELAYS];
  lw_status_t st = trials ? w->open(o, &b.ws) : LW_RESOURCE_EXHAUSTED;
  if (st != LW_OK) {
    if (!trials) fprintf(stderr, "lanework bench overlap: out of memory\n");
    free(trials);
    return 1;
  }
  b.c2_label = w->c2(b.ws)->name;
  double t_open = lw__bench_now_us();
  lw_bench_chip_opts_t co = {.level = o->level, .backend = w->backend,
                             .arena_bytes = w->arena_bytes, .pin = lw__bench_pin(o)};
  st = lw__bench_chip_open(&co, &b.d);
  double open_ms = (lw__bench_now_us() - t_open) / 1e3;
  if (st != LW_OK) {
    rc = lw__bench_fail("opening the chip", st);
    goto out;
  }
  if ((st = w->alloc(b.ws, b.d)) != LW_OK) {
    rc = lw__bench_fail("allocating the tensors", st);
    goto out;
  }
  if ((st = b.d->register_sync(b.d, w->c1(b.ws), &b.h1)) != LW_OK) {
    rc = lw__bench_fail("register C1", st);
    goto out;
  }
  char stem[64];
  snprintf(stem, sizeof(stem), "overlap_l%d_%s%s%s", o->level, w->backend,
           o->serial ? "_serial" : "", o->stall_control ? "_stall" : "");
  lw__overlap_events_init(&b.ev, o->trace_dir, stem);

  b.repeat = o->repeat;
  double target_us = 0;
  if (b.repeat <= 0) {
    lw__bench_progress("calibrating C1");
    if ((st = calibrate(&b, &b.repeat, &target_us)) != LW_OK) {
      rc = lw__bench_fail("calibrating C1", st);
      goto out;
    }
  }
  // One untimed trial: first-touch page faults, lazy binding and first enqueues stay out of
  // the table.
  lw__bench_progress("warm-up trial");
  trial_t warm;
  if ((st = one_trial(&b, 0, false, &warm)) != LW_OK) {
    rc = lw__bench_fail("warm-up trial", st);
    goto out;
  }
  const char *v = getenv("LW_BENCH_VERBOSE");
  bool verbose = v && *v && strcmp(v, "0") != 0;
  for (int di = 0; di < n_delays; ++di) {
    for (int t = 0; t < o->trials; ++t) {
      lw__bench_progress("delay %ld ms: trial %d/%d", delays[di], t + 1, o->trials);
      // Only the first row's first trial may be kept as a picture.
      if ((st = one_trial(&b, delays[di], di == 0, &trials[t])) != LW_OK) {
        rc = lw__bench_fail("trial", st);
        goto out;
      }
      if (verbose) print_trial(delays[di], t, &trials[t]);
    }
    row_of(trials, o->trials, delays[di], &rows[di]);
    // The stall control proves the proof can fail only if it stalled something: a kernel built
    // before kernel ABI 4 never calls the poll hook, and the control would then be a plain run.
    if (o->stall_control && rows[di].stalled == 0) {
      rc = lw__bench_invalid("--stall-control: no run was held at a poll in the %d trials of "
                             "delay %ld ms; the device lock stalled nothing (is %s built "
                             "against kernel ABI 4?)",
                             o->trials, delays[di], c1_name(&b));
      goto out;
    }
  }
  lw__bench_progress_end();
  // The floor holds for the figures only if the trials' registers were that long too (one slow
  // register in the calibration is not a heavy C2).
  if (b.register_floor_us > 0 && !(rows[0].f[F_REG_C2].median >= b.register_floor_us)) {
    b.register_floor_met = false;
  }
  print_table(&b, rows, n_delays, b.repeat, target_us, open_ms);
  rc = o->json ? print_json(&b, rows, n_delays, b.repeat, target_us, open_ms) : 0;
  if (b.chk.max_diff != 0.0 || b.chk.rel_err > w->rel_tol) {
    fprintf(stderr,
            "lanework bench overlap: results differ from the reference (max_diff %.3e, "
            "relative error %.3e, tolerance %.0e)\n",
            b.chk.max_diff, b.chk.rel_err, w->rel_tol);
    rc = 1;
  }
out:
  if (b.ws) w->close(b.ws, b.d);
  if (b.d) b.d->close(b.d);
  free(trials);
  return rc;
}
