// tools/overlap_events.h — the overlap benches' proof from events: each trial's overlap phase
// runs inside its own in-memory trace session, and overlap_by_events is the fraction of the
// trial's register spans that lies inside run spans of the same chip (lanes/trace.h,
// lw__trace_overlap_by_events). `--trace DIR` also keeps the first measured trial's trace as
// DIR/<stem>.json and draws it as DIR/<stem>.svg.
#ifndef LANEWORK_TOOLS_OVERLAP_EVENTS_H_
#define LANEWORK_TOOLS_OVERLAP_EVENTS_H_

#include <stdbool.h>
#include <stddef.h>

#include "lanework/status.h"

#define LW_OVERLAP_EVENTS_MAX 1000

typedef struct lw_overlap_events {
  const char *dir;   // --trace DIR, or NULL
  char stem[64];     // file name without extension, e.g. "overlap_l3_sim"
  bool written;      // the trace of one trial was kept
  double fraction[LW_OVERLAP_EVENTS_MAX];  // per trial (-1: no register span seen)
  int n;
  size_t register_spans;  // over all trials
  unsigned long long dropped;
} lw_overlap_events_t;

void lw__overlap_events_init(lw_overlap_events_t *e, const char *dir, const char *stem);
// Starts the trial's session (in memory). Prints the reason and returns non-OK on failure.
lw_status_t lw__overlap_events_begin(lw_overlap_events_t *e);
// Ends it: records the trial's fraction; writes the files when asked and not done yet.
lw_status_t lw__overlap_events_end(lw_overlap_events_t *e, bool keep);
// Median, min and max of the recorded fractions (over trials that saw a register span); false
// when none did.
bool lw__overlap_events_summary(const lw_overlap_events_t *e, double *median, double *min,
                                double *max);

#endif  // LANEWORK_TOOLS_OVERLAP_EVENTS_H_
