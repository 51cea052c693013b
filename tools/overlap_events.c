// tools/overlap_events.c — see overlap_events.h.
#include "tools/overlap_events.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lanes/trace.h"
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

lw_status_t lw__overlap_events_end(lw_overlap_events_t *e, const char *c1_name,
                                   const char *c2_name, bool keep, lw_overlap_arm_t *arm) {
  lw_error_t err;
  lw_trace_capture_t cap;
  lw_trace_summary_t sum;
  // A session that cannot be ended read nothing: no span, no containment.
  memset(arm, 0, sizeof(*arm));
  arm->by_events = -1;
  arm->load_ns = -1;
  lw_status_t st = lw__trace_end(&cap, &sum, &err);
  if (st != LW_OK) {
    fprintf(stderr, "lanework bench overlap: %s\n", err.message);
    return st;
  }
  lw__overlap_arm_read(&cap, c1_name, c2_name, arm);
  e->dropped += sum.dropped_events;
  if (keep && e->dir && !e->written) {
    st = keep_files(e, &cap);
    e->written = st == LW_OK;
  }
  lw__trace_capture_free(&cap);
  return st;
}
