// tools/bench_trace.c — `lanework bench trace`: what tracing costs.
//
//   event:    one recorded span (lw__trace_span: clock read done by the caller, a 104-byte
//             copy into the thread's ring, one release store), in batches of BATCH events with
//             the rings drained between batches (untimed), so no batch hits a full ring; and
//             the same call with no session (the branch every recording point pays).
//   dispatch: `bench dispatch`'s L3 figures (an empty run's round trip, the per-task cost in a
//             1000-task DAG) with no session and with a session recording into memory,
//             alternated over --trials rounds; the ratio of the medians is the target's
//             (per task with tracing on <= 1.3x off).
#include <stdlib.h>
#include <string.h>

#include "lanes/json.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "tools/bench_sim_only.h"
#include "tools/dispatch_l3.h"

#define BATCH 1000
#define BATCHES 200

// ns per event of each of BATCHES batches.
static void event_cost(double *ns, bool on) {
  for (int b = 0; b < BATCHES; ++b) {
    int64_t t0 = lw__now_ns();
    for (int i = 0; i < BATCH; ++i) {
      lw__trace_span(LW_TRACE_RUN, t0, t0 + i, 1, (uint64_t)i, 0, LW_OK, "bench_trace");
    }
    ns[b] = (double)(lw__now_ns() - t0) / BATCH;
    if (on) lw__trace_flush();
  }
}

int lw__bench_trace(const lw_bench_opts_t *o) {
  if (lw_trace_active()) {
    fprintf(stderr, "lanework bench trace: a trace session is running (LW_TRACE?); unset it\n");
    return 2;
  }
  lw_error_t err;
  double on_ns[BATCHES], off_ns[BATCHES];
  event_cost(off_ns, false);
  if (lw__trace_begin(NULL, &err) != LW_OK) {
    fprintf(stderr, "lanework bench trace: %s\n", err.message);
    return 1;
  }
  lw__trace_role("bench", -1);
  event_cost(on_ns, true);
  lw_trace_summary_t sum;
  if (lw__trace_end(NULL, &sum, &err) != LW_OK) {
    fprintf(stderr, "lanework bench trace: %s\n", err.message);
    return 1;
  }
  uint64_t dropped = sum.dropped_events;

  int rounds = o->trials_given ? o->trials : 5;
  long iters = o->iters > 0 ? o->iters : 2000;
  double *task_off = calloc((size_t)rounds, sizeof(double));
  double *task_on = calloc((size_t)rounds, sizeof(double));
  double *empty_off = calloc((size_t)rounds, sizeof(double));
  double *empty_on = calloc((size_t)rounds, sizeof(double));
  int rc = 1;
  if (!task_off || !task_on || !empty_off || !empty_on) goto out;
  uint64_t traced_events = 0;
  for (int r = 0; r < rounds; ++r) {
    lw__bench_progress("dispatch round %d/%d (tracing off, then on)", r + 1, rounds);
    lw_dispatch_l3_result_t off, on;
    memset(&off, 0, sizeof(off));
    memset(&on, 0, sizeof(on));
    if (lw__dispatch_l3(iters, &off) != 0) {
      fprintf(stderr, "lanework bench trace: dispatch (tracing off): %s\n", off.why);
      goto out;
    }
    if (lw__trace_begin(NULL, &err) != LW_OK) {
      fprintf(stderr, "lanework bench trace: %s\n", err.message);
      goto out;
    }
    int drc = lw__dispatch_l3(iters, &on);
    if (lw__trace_end(NULL, &sum, &err) != LW_OK) {
      fprintf(stderr, "lanework bench trace: %s\n", err.message);
      goto out;
    }
    if (drc != 0) {
      fprintf(stderr, "lanework bench trace: dispatch (tracing on): %s\n", on.why);
      goto out;
    }
    traced_events += sum.events;
    dropped += sum.dropped_events;
    task_off[r] = off.per_task_us;
    task_on[r] = on.per_task_us;
    empty_off[r] = off.empty_p50_us;
    empty_on[r] = on.empty_p50_us;
  }
  double ev_p50 = lw__bench_quantile(on_ns, BATCHES, 0.5);
  double ev_p90 = lw__bench_quantile(on_ns, BATCHES, 0.9);
  double off_p50 = lw__bench_quantile(off_ns, BATCHES, 0.5);
  double t_off = lw__bench_median(task_off, (size_t)rounds);
  double t_on = lw__bench_median(task_on, (size_t)rounds);
  double e_off = lw__bench_median(empty_off, (size_t)rounds);
  double e_on = lw__bench_median(empty_on, (size_t)rounds);
  lw__bench_progress_end();
  printf("trace: one recorded event %.1f ns p50 (%.1f ns p90; %d batches of %d), %.1f ns with "
         "no session\n", ev_p50, ev_p90, BATCHES, BATCH, off_p50);
  printf("dispatch (L3, %d rounds of %ld iterations, medians):\n", rounds, iters);
  printf("  per task in a 1000-task DAG: %.3f us off, %.3f us on (%.2fx)\n", t_off, t_on,
         t_on / t_off);
  printf("  empty run round trip p50:    %.3f us off, %.3f us on (%.2fx)\n", e_off, e_on,
         e_on / e_off);
  printf("  events recorded with tracing on: %llu, dropped: %llu\n",
         (unsigned long long)traced_events, (unsigned long long)dropped);
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "trace");
    lw__json_kv_double(&j, "event_ns_p50", ev_p50);
    lw__json_kv_double(&j, "event_ns_p90", ev_p90);
    lw__json_kv_double(&j, "event_off_ns_p50", off_p50);
    lw__json_kv_int(&j, "rounds", rounds);
    lw__json_kv_int(&j, "iters", iters);
    lw__json_kv_double(&j, "l3_per_task_us_off", t_off);
    lw__json_kv_double(&j, "l3_per_task_us_on", t_on);
    lw__json_kv_double(&j, "l3_per_task_ratio", t_on / t_off);
    lw__json_kv_double(&j, "l3_empty_run_p50_us_off", e_off);
    lw__json_kv_double(&j, "l3_empty_run_p50_us_on", e_on);
    lw__json_kv_uint(&j, "events", traced_events);
    lw__json_kv_uint(&j, "dropped_events", dropped);
    if (lw__bench_json_end(&j, "trace") != 0) goto out;
  }
  rc = 0;
out:
  free(task_off);
  free(task_on);
  free(empty_off);
  free(empty_on);
  return rc;
}
