// tools/overlap_events.c — see overlap_events.h.
#include "tools/overlap_events.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lanes/trace.h"
#include "tools/bench.h"
#include "tools/tool.h"

void lw__overlap_events_init(lw_overlap_events_t *e, const char *dir, const char *stem) {
  memset(e, 0, sizeof(*e));
  e->dir = dir;
  snprintf(e->stem, sizeof(e->stem), "%s", stem);
}

lw_status_t lw__overlap_events_begin(lw_overlap_events_t *e) {
  (void)e;
  lw_error_t err;
  lw_status_t st = lw__trace_begin(NULL, &err);
  if (st != LW_OK) fprintf(stderr, "lanework bench overlap: %s\n", err.message);
  return st;
}

static lw_status_t keep_files(lw_overlap_events_t *e, const lw_trace_capture_t *cap) {
  if (mkdir(e->dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "lanework bench overlap: --trace %s: %s\n", e->dir, strerror(errno));
    return LW_UNAVAILABLE;
  }
  char json[1024], svg[1024];
  snprintf(json, sizeof(json), "%s/%s.json", e->dir, e->stem);
  snprintf(svg, sizeof(svg), "%s/%s.svg", e->dir, e->stem);
  FILE *f = fopen(json, "w");
  if (!f) {
    fprintf(stderr, "lanework bench overlap: cannot write %s: %s\n", json, strerror(errno));
    return LW_UNAVAILABLE;
  }
  lw_error_t err;
  lw_status_t st = lw__trace_write_json(cap, f, NULL, &err);
  if (fclose(f) != 0 && st == LW_OK) st = LW_UNAVAILABLE;
  if (st != LW_OK) {
    fprintf(stderr, "lanework bench overlap: writing %s failed\n", json);
    return st;
  }
  char *argv[] = {"trace", "svg", json, "-o", svg, NULL};
  if (lw__tool_trace(5, argv) != 0) {
    fprintf(stderr, "lanework bench overlap: drawing %s failed\n", svg);
    return LW_UNAVAILABLE;
  }
  fprintf(stderr, "lanework bench overlap: trace of one trial in %s and %s\n", json, svg);
  return LW_OK;
}

lw_status_t lw__overlap_events_end(lw_overlap_events_t *e, bool keep) {
  lw_error_t err;
  lw_trace_capture_t cap;
  lw_trace_summary_t sum;
  lw_status_t st = lw__trace_end(&cap, &sum, &err);
  if (st != LW_OK) {
    fprintf(stderr, "lanework bench overlap: %s\n", err.message);
    return st;
  }
  size_t spans = 0;
  double f = lw__trace_overlap_by_events(&cap, &spans);
  if (keep && e->n < LW_OVERLAP_EVENTS_MAX) {
    e->fraction[e->n++] = f;
    e->register_spans += spans;
    e->dropped += sum.dropped_events;
    if (e->dir && !e->written) {
      st = keep_files(e, &cap);
      e->written = st == LW_OK;
    }
  }
  lw__trace_capture_free(&cap);
  return st;
}

lw_status_t lw__overlap_phase_start(lw_overlap_driver_t *d, const lw_overlap_trial_opts_t *to,
                                    lw_callable_handle_t h1, const lw_args_t *a1,
                                    const lw_callable_t *c2, long delay_ms, double *t0_us,
                                    lw_handle_t **run1, lw_handle_t **reg) {
  *run1 = *reg = NULL;
  // The phase runs in its own trace session, so its register span is judged against its runs.
  LW_RETURN_IF_ERROR(lw__overlap_events_begin(to->ev));
  *t0_us = lw__bench_now_us();
  lw_status_t st = d->run_async(d, h1, a1, run1);
  if (st != LW_OK) {
    (void)lw__overlap_events_end(to->ev, false);
    return st;
  }
  lw__bench_sleep_ms(delay_ms);
  if (to->serial) st = lw_handle_wait(*run1, LW_WAIT_FOREVER);
  if (st == LW_OK) st = d->register_async(d, c2, reg);
  return st;
}

bool lw__overlap_events_summary(const lw_overlap_events_t *e, double *median, double *min,
                                double *max) {
  double v[LW_OVERLAP_EVENTS_MAX];
  size_t n = 0;
  for (int i = 0; i < e->n; ++i) {
    if (e->fraction[i] >= 0) v[n++] = e->fraction[i];
  }
  if (n == 0) return false;
  *median = lw__bench_median(v, n);
  *min = *max = v[0];
  for (size_t i = 1; i < n; ++i) {
    if (v[i] < *min) *min = v[i];
    if (v[i] > *max) *max = v[i];
  }
  return true;
}
