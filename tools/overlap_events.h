// tools/overlap_events.h — the trace sessions of the overlap bench: each arm of each trial
// runs inside its own in-memory session, and what it recorded is read into an
// lw_overlap_arm_t (tools/overlap_proof.h). `--trace DIR` also keeps the first measured
// trial's overlapped arm as DIR/<stem>.json and draws it as DIR/<stem>.svg.
#ifndef LANEWORK_TOOLS_OVERLAP_EVENTS_H_
#define LANEWORK_TOOLS_OVERLAP_EVENTS_H_

#include <stdbool.h>

#include "lanework/lanework.h"
#include "tools/overlap_proof.h"

typedef struct lw_overlap_events {
  const char *dir;   // --trace DIR, or NULL
  char stem[64];     // file name without extension, e.g. "overlap_l3_sim"
  bool written;      // the trace of one arm was kept
  unsigned long long dropped;  // events the sessions lost to full rings
} lw_overlap_events_t;

void lw__overlap_events_init(lw_overlap_events_t *e, const char *dir, const char *stem);
// Starts an arm's session (in memory). Prints the reason and returns non-OK on failure.
lw_status_t lw__overlap_events_begin(lw_overlap_events_t *e);
// Ends it and reads the arm (C1's run span and C2's register span by their callables' names).
// keep: this arm's trace is the one to write to --trace DIR, if none was written yet.
lw_status_t lw__overlap_events_end(lw_overlap_events_t *e, const char *c1_name,
                                   const char *c2_name, bool keep, lw_overlap_arm_t *arm);

#endif  // LANEWORK_TOOLS_OVERLAP_EVENTS_H_
