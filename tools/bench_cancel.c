// tools/bench_cancel.c — the `lanework bench cancel` driver (see bench_cancel.h).
//
// cancel_p50_us: lw_handle_cancel on a run whose kernel runs, to the run handle finishing
// CANCELLED; cancel_to_end_p50_us and cancel_after_end_p50_us split each such time where the run
// ended as the runtime saw it (end_seen_us). escalation_ms (L3, where the backend has a kernel
// that ignores cancellation): the same, for a kernel that ignores it (its child is killed after
// the worker's cancel grace); escalation_back_ms: that cancel to a short run finishing on the
// chip's new child.
//
// What makes a trial valid: its kernel was seen running before the cancel (the workload's
// probe), it finished CANCELLED, and the workload's check afterwards says the kernel was
// stopped before its end. At L3 the worker's counters also show that no cooperative cancel
// cost the chip its child (no death), that each escalation killed exactly one child, and that
// the chip runs again afterwards. Anything else: the bench says why and exits 1, no figure.
#include "tools/bench_cancel.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ESCALATIONS 3

typedef struct bench {
  const lw_bench_opts_t *o;
  const lw_cancel_workload_t *w;
  void *ws;
  lw_bench_chip_t *d;
  uint32_t seed;  // the pauses' generator
} bench_t;

// The run's kernel runs (LW_CANCEL_RUNNING), or 1 after saying why not (the run then was
// cancelled and waited for, and released).
static int wait_running(bench_t *b, lw_handle_t *h, const char *what, int index) {
  double t0 = lw__bench_now_us();
  char why[LW_ERROR_MESSAGE_BYTES + 64] = "";
  for (;;) {
    lw_cancel_seen_t seen = b->w->seen(b->ws, lw__bench_now_us() - t0, why, sizeof(why));
    if (seen == LW_CANCEL_RUNNING) return 0;
    bool done = lw_handle_done(h);
    if (seen == LW_CANCEL_NEVER || done) {
      lw_status_t st = LW_OK;
      const lw_error_t *e = NULL;
      if (done) {
        st = lw_handle_wait(h, 0);
        e = lw_handle_error(h);
      } else {
        (void)lw_handle_cancel(h);
        (void)lw_handle_wait(h, LW_WAIT_FOREVER);
      }
      int rc = done ? lw__bench_invalid("%s trial %d: the run finished (%s%s%s) before its "
                                        "kernel was seen running",
                                        what, index, lw_status_name(st), e ? ": " : "",
                                        e ? e->message : "")
                    : lw__bench_invalid("%s trial %d: %s", what, index, why);
      lw_handle_release(h);
      return rc;
    }
    sched_yield();
  }
}

typedef struct trial {
  double cancel_at_us;  // when lw_handle_cancel was called (lw__bench_now_us)
  double us;            // lw_handle_cancel to the handle finishing
  // Where us went, split at the run's end as the runtime saw it (see end_seen_us): to_end_us
  // from the cancel to there (the stop's way to the kernel, the kernel's reaction, and at L3
  // the completion's way back), after_end_us from there to the waiter's return (finishing the
  // run and the handle, waking the waiter). NAN when the handle gave no times.
  double to_end_us, after_end_us;
  lw_status_t st;  // how the run finished
  char message[LW_ERROR_MESSAGE_BYTES];
} trial_t;

// When the finished run h, submitted at submit_us (lw__bench_now_us), ended as the runtime saw
// it: L2, the run's end on the chip's run lane (accepted at the submit call, then its
// host_wall_ns: the kernel's end as the backend saw it and what the backend did after it, up to
// the run's finish; not the kernel's own time, which on a device leaves out the copies and the
// launch before it); L3, the task's completion as the parent took it (its submit, wait and
// round trip: lw_task_report_t). NAN when h has no times.
static double end_seen_us(const lw_handle_t *h, double submit_us) {
  if (lw_handle_kind(h) == LW_HANDLE_WORKER_RUN) {
    lw_task_report_t t;
    size_t n = 0;
    if (lw_handle_run_tasks(h, &t, 1, &n) != LW_OK || n != 1 || t.host_ns == 0) return NAN;
    return (double)(t.submit_ns + t.wait_ns + t.host_ns) / 1e3;
  }
  lw_run_timing_t t = {0};
  (void)lw_handle_timing(h, &t);  // the run's status; the times are filled for a finished run
  if (t.host_wall_ns == 0) return NAN;
  return submit_us + (double)t.host_wall_ns / 1e3;
}

// Submits the armed run, waits until its kernel runs, pauses (cooperative trials), cancels it
// and waits for the handle. 0, or the exit code after saying what went wrong.
static int trial(bench_t *b, lw_callable_handle_t h, const lw_args_t *a, bool pause,
                 const char *what, int index, trial_t *out) {
  lw_handle_t *run = NULL;
  double submit_us = lw__bench_now_us();
  lw_status_t st = b->d->run_async(b->d, h, a, &run);
  if (st != LW_OK) return lw__bench_fail(what, st);
  if (wait_running(b, run, what, index) != 0) return 1;
  if (pause && b->w->max_pause_us >= 1.0) {
    // A pause drawn evenly from [0, max): the cancel lands anywhere in the kernel's block or
    // slice, not always right after the probe showed (which may be the end of a slice).
    b->seed = b->seed * 1664525u + 1013904223u;
    usleep((useconds_t)((b->seed >> 8) % (uint32_t)b->w->max_pause_us));
  }
  double t0 = lw__bench_now_us();
  out->cancel_at_us = t0;
  st = lw_handle_cancel(run);
  out->st = lw_handle_wait(run, LW_WAIT_FOREVER);
  double t1 = lw__bench_now_us();
  out->us = t1 - t0;
  double end_us = end_seen_us(run, submit_us);
  out->to_end_us = end_us - t0;
  out->after_end_us = t1 - end_us;
  const lw_error_t *e = lw_handle_error(run);
  snprintf(out->message, sizeof(out->message), "%s", e ? e->message : "");
  lw_handle_release(run);
  if (st != LW_OK) {
    return lw__bench_invalid("%s trial %d: lw_handle_cancel on a running kernel returned %s",
                             what, index, lw_status_name(st));
  }
  if (out->st != LW_CANCELLED) {
    return lw__bench_invalid("%s trial %d: the run finished %s, not CANCELLED: %s", what,
                             index, lw_status_name(out->st), out->message);
  }
  return 0;
}

static int cooperative(bench_t *b, const char *what, int index, trial_t *out) {
  lw_callable_handle_t h;
  lw_args_t a;
  lw_status_t st = b->w->arm(b->ws, &h, &a);
  if (st != LW_OK) return lw__bench_fail(what, st);
  int rc = trial(b, h, &a, true, what, index, out);
  if (rc != 0) return rc;
  char why[256];
  if (!b->w->stopped_early(b->ws, why, sizeof(why))) {
    return lw__bench_invalid("%s trial %d: %s", what, index, why);
  }
  if (strstr(out->message, "ignored cancellation") != NULL) {
    return lw__bench_invalid("%s trial %d was escalated: %s", what, index, out->message);
  }
  return 0;
}

static int stats(bench_t *b, lw_chip_stats_t *out) {
  lw_status_t st = b->d->stats(b->d, out);
  return st == LW_OK ? 0 : lw__bench_fail("reading the chip's counters", st);
}

// Escalation trials (L3): each must kill exactly one child, after the grace. ms: the cancel to
// the run's end; back_ms: the cancel to a short run finishing on the chip's new child (the chip
// back at work: the kill, the respawn, the callables registered again, one run).
static int escalations(bench_t *b, double *ms, double *back_ms) {
  lw_chip_stats_t before, after;
  for (int i = 0; i < ESCALATIONS; ++i) {
    lw__bench_progress("escalated cancel %d/%d", i + 1, ESCALATIONS);
    if (stats(b, &before) != 0) return 1;
    lw_callable_handle_t h;
    lw_args_t a;
    lw_status_t st = b->w->arm_hang(b->ws, &h, &a);
    if (st != LW_OK) return lw__bench_fail("escalation", st);
    trial_t t;
    int rc = trial(b, h, &a, false, "escalation", i, &t);
    if (rc != 0) return rc;
    if (stats(b, &after) != 0) return 1;
    double grace_us = (double)b->d->cancel_grace_ns / 1e3;
    if (strstr(t.message, "ignored cancellation") == NULL) {
      return lw__bench_invalid("escalation trial %d: the error does not say the kernel ignored "
                               "cancellation: %s", i, t.message);
    }
    if (after.escalations != before.escalations + 1 || after.deaths != before.deaths + 1) {
      return lw__bench_invalid("escalation trial %d: %llu escalations and %llu deaths, not one "
                               "of each", i,
                               (unsigned long long)(after.escalations - before.escalations),
                               (unsigned long long)(after.deaths - before.deaths));
    }
    if (t.us < grace_us) {
      return lw__bench_invalid("escalation trial %d finished %.1f ms after the cancel, within "
                               "the %.0f ms grace: the child was not killed for ignoring it",
                               i, t.us / 1e3, grace_us / 1e3);
    }
    ms[i] = t.us / 1e3;
    // The chip runs again on a new child before the next trial starts its clock.
    lw_status_t rst = b->w->run_short(b->ws, b->d);
    if (rst != LW_OK) return lw__bench_fail("a run after the escalation", rst);
    back_ms[i] = (lw__bench_now_us() - t.cancel_at_us) / 1e3;
  }
  return 0;
}

// The median of the trials' parts; NAN when any trial had no times (a part of some trials only
// would not be the same trials' median as the total's).
static double split_median(double *v, int n) {
  for (int i = 0; i < n; ++i) {
    if (isnan(v[i])) return NAN;
  }
  return lw__bench_median(v, (size_t)n);
}

int lw__bench_cancel(const lw_bench_opts_t *o, const lw_cancel_workload_t *w) {
  bench_t b = {.o = o, .w = w, .seed = 12345};
  int n = o->trials_given ? o->trials : 20;
  // Each trial's total, and its two parts (trial_t), in three rows of n.
  double *us = calloc(3 * (size_t)n, sizeof(double));
  double *to_end = us + n, *after_end = us + 2 * n;
  double esc_ms[ESCALATIONS], back_ms[ESCALATIONS];
  bool escalate = o->level == 3 && w->arm_hang != NULL;
  int rc = 1;
  lw_status_t st = us ? w->open(&b.ws) : LW_RESOURCE_EXHAUSTED;
  if (st != LW_OK) {
    if (!us) fprintf(stderr, "lanework bench cancel: out of memory\n");
    free(us);
    return 1;
  }
  if (w->configure) w->configure(b.ws, o);
  lw_bench_chip_opts_t co = {.level = o->level, .backend = w->backend,
                             .arena_bytes = w->arena_bytes, .pin = lw__bench_pin(o),
                             .respawn_unbounded = true};
  if ((st = lw__bench_chip_open(&co, &b.d)) != LW_OK) {
    rc = lw__bench_fail("opening the chip", st);
    goto out;
  }
  lw__bench_progress("setting up and calibrating the kernel");
  if ((st = w->setup(b.ws, b.d)) != LW_OK) {
    rc = lw__bench_fail("setting up the kernel", st);
    goto out;
  }
  // One untimed trial first: a kernel's first enqueue may compile it (PoCL), first runs touch
  // cold pages.
  lw__bench_progress("warm-up trial");
  trial_t t;
  if ((rc = cooperative(&b, "warm-up", 0, &t)) != 0) goto out;
  lw_chip_stats_t s0, s1;
  if ((rc = stats(&b, &s0)) != 0) goto out;
  for (int i = 0; i < n; ++i) {
    lw__bench_progress("cancel %d/%d", i + 1, n);
    if ((rc = cooperative(&b, "cooperative", i, &t)) != 0) goto out;
    us[i] = t.us;
    to_end[i] = t.to_end_us;
    after_end[i] = t.after_end_us;
  }
  if ((rc = stats(&b, &s1)) != 0) goto out;
  if (s1.deaths != s0.deaths) {
    rc = lw__bench_invalid("%llu chip child(ren) died during the cooperative trials: a "
                           "cooperative cancel must keep its child",
                           (unsigned long long)(s1.deaths - s0.deaths));
    goto out;
  }
  if (escalate) {
    if ((rc = escalations(&b, esc_ms, back_ms)) != 0) goto out;
    // The chip runs again, on a new child, after the last escalation.
    lw__bench_progress("a cancel after the escalations");
    if ((rc = cooperative(&b, "after escalation", 0, &t)) != 0) goto out;
  }
  double p50 = lw__bench_quantile(us, (size_t)n, 0.5), p99 = lw__bench_quantile(us, (size_t)n,
                                                                                0.99);
  double lo = us[0], hi = us[n - 1];  // sorted by the quantile
  double to_end_p50 = split_median(to_end, n), after_end_p50 = split_median(after_end, n);
  double esc = escalate ? lw__bench_median(esc_ms, ESCALATIONS) : 0;
  double back = escalate ? lw__bench_median(back_ms, ESCALATIONS) : 0;
  long long grace_ms = (long long)(b.d->cancel_grace_ns / 1000000);
  lw__bench_progress_end();
  printf("L%d, %s chip, device 0: cancel of a running kernel, lw_handle_cancel -> CANCELLED, "
         "%d trials\n", o->level, w->backend, n);
  w->describe(b.ws, stdout);
  printf("  p50 %.1f us, p99 %.1f us, min %.1f us, max %.1f us", p50, p99, lo, hi);
  if (w->target_p50_us > 0) {
    bool in_ms = w->target_p50_us >= 1e3;  // a 100 us target is not "0 ms"
    printf(" (target p50 <= %.0f %s: %s)", in_ms ? w->target_p50_us / 1e3 : w->target_p50_us,
           in_ms ? "ms" : "us", p50 <= w->target_p50_us ? "holds" : "missed");
  }
  printf("\n");
  const char *end = o->level == 3 ? "the task's completion taken by the parent"
                                  : "the run's end on the chip's run lane";
  if (isnan(to_end_p50) || isnan(after_end_p50)) {
    printf("  split at the run's end (%s): not available (a run gave no times)\n", end);
  } else {
    printf("  split at the run's end (%s): p50 %.1f us to it, %.1f us after it\n", end, to_end_p50,
           after_end_p50);
  }
  if (escalate) {
    printf(
        "cancel of a kernel that ignores it (grace %lld ms, child killed and replaced): "
        "%.1f ms, the chip running again %.1f ms after the cancel (medians of %d)\n",
        grace_ms, esc, back, ESCALATIONS);
  } else {
    printf("escalation: not measured (%s)\n",
           o->level != 3 ? "only L3 has children to kill"
                         : "this backend has no kernel that ignores cancellation");
  }
  rc = 0;
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "cancel");
    lw__json_kv_int(&j, "level", o->level);
    lw__json_kv_int(&j, "runs", n);
    lw__json_kv_string(&j, "status", "CANCELLED");
    lw__json_kv_fixed(&j, "cancel_p50_us", p50, 1);
    lw__json_kv_fixed(&j, "cancel_p99_us", p99, 1);
    lw__json_kv_fixed(&j, "cancel_min_us", lo, 1);
    lw__json_kv_fixed(&j, "cancel_max_us", hi, 1);
    lw__json_kv_fixed(&j, "cancel_to_end_p50_us", to_end_p50, 1);
    lw__json_kv_fixed(&j, "cancel_after_end_p50_us", after_end_p50, 1);
    if (w->target_p50_us > 0) lw__json_kv_bool(&j, "target_holds", p50 <= w->target_p50_us);
    lw__json_kv_int(&j, "grace_ms", grace_ms);
    lw__json_kv_fixed(&j, "escalation_ms", escalate ? esc : NAN, 1);
    lw__json_kv_fixed(&j, "escalation_back_ms", escalate ? back : NAN, 1);
    if (w->json) w->json(b.ws, &j);
    rc = lw__bench_json_end(&j, "cancel");
  }
out:
  if (b.ws) w->close(b.ws, b.d);
  if (b.d) b.d->close(b.d);
  free(us);
  return rc;
}
