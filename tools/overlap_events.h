// tools/overlap_events.h — the overlap benches' proof from events: each trial's overlap phase
// runs inside its own in-memory trace session, and overlap_by_events is the fraction of the
// trial's register spans that lies inside run spans of the same chip (lanes/trace.h,
// lw__trace_overlap_by_events). `--trace DIR` also keeps the first measured trial's trace as
// DIR/<stem>.json and draws it as DIR/<stem>.svg.
#ifndef LANEWORK_TOOLS_OVERLAP_EVENTS_H_
#define LANEWORK_TOOLS_OVERLAP_EVENTS_H_

#include <stdbool.h>
#include <stddef.h>

#include "lanework/lanework.h"
#include "tools/overlap_driver.h"

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
// How a trial's overlap phase is run and proved; the same for every overlap bench.
typedef struct lw_overlap_trial_opts {
  bool serial;                // --serial: register C2 only after C1 finished (negative control)
  lw_overlap_events_t *ev;    // the row's event proof
  bool keep;                  // a measured trial (the warm-up's events are not kept)
} lw_overlap_trial_opts_t;

// Starts a trial's overlap phase: its trace session, then run_async(C1) (*t0_us: just before
// it), the delay, (with --serial, the wait for C1), then register_async(C2). Returns the first
// failure; when C1 could not be submitted, the session is already ended and no handle is set.
// Otherwise the caller waits for *run1 (and *reg when set), then calls
// lw__overlap_events_end(to->ev, to->keep).
lw_status_t lw__overlap_phase_start(lw_overlap_driver_t *d, const lw_overlap_trial_opts_t *to,
                                    lw_callable_handle_t h1, const lw_args_t *a1,
                                    const lw_callable_t *c2, long delay_ms, double *t0_us,
                                    lw_handle_t **run1, lw_handle_t **reg);

// Median, min and max of the recorded fractions (over trials that saw a register span); false
// when none did.
bool lw__overlap_events_summary(const lw_overlap_events_t *e, double *median, double *min,
                                double *max);

#endif  // LANEWORK_TOOLS_OVERLAP_EVENTS_H_
