// tools/bench_cancel.h — `lanework bench cancel`: one driver (bench_cancel.c) over a small
// per-backend workload that says which long kernel it cancels, how the bench sees that the
// kernel of this very run is running, and how it checks afterwards that the cancel stopped a
// running kernel before its end.
//
// The driver, at L2 or L3: cooperative trials (run_async, wait until the kernel runs, a pause
// drawn evenly from [0, max_pause_us), lw_handle_cancel, time to the handle finishing
// CANCELLED); at L3 the worker's counters then prove no cooperative cancel cost the chip its
// child. At L3, where the backend has a kernel that ignores cancellation: escalation trials
// (the same, but the child must be killed after the cancel grace and the chip must run again
// on a new one). A trial that did not measure what it names makes the bench exit 1 with why.
#ifndef LANEWORK_TOOLS_BENCH_CANCEL_H_
#define LANEWORK_TOOLS_BENCH_CANCEL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tools/bench.h"
#include "tools/bench_chip.h"

// What a workload says of a trial's kernel while it waits for it.
typedef enum lw_cancel_seen {
  LW_CANCEL_NOT_YET = 0,  // not seen running yet: ask again
  LW_CANCEL_RUNNING = 1,  // seen running (or, where it cannot be seen, surely running): cancel
  LW_CANCEL_NEVER = 2,    // gave up waiting: the trial is invalid (why says so)
} lw_cancel_seen_t;

typedef struct lw_cancel_workload {
  const char *backend;
  size_t arena_bytes;
  double max_pause_us;  // after the kernel is seen running, before the cancel
  double target_p50_us; // the target the table holds the p50 against (0: none)
  // State: open loads the kernels; setup registers them on d, allocates their tensors in d's
  // memory and calibrates on d's device; close frees it all (d may be NULL).
  lw_status_t (*open)(void **out);
  // The options that shape the workload (cancel --threads), after open; NULL: none apply.
  void (*configure)(void *s, const lw_bench_opts_t *o);
  lw_status_t (*setup)(void *s, lw_bench_chip_t *d);
  // The next cooperative trial's callable and arguments; resets its probes.
  lw_status_t (*arm)(void *s, lw_callable_handle_t *out_h, lw_args_t *out_args);
  // Whether the armed run's kernel runs, waited_us after its submit (why: when NEVER).
  lw_cancel_seen_t (*seen)(void *s, double waited_us, char *why, size_t why_bytes);
  // After the run finished CANCELLED: true when its kernel ran and was stopped before its end;
  // false with why otherwise.
  bool (*stopped_early)(void *s, char *why, size_t why_bytes);
  // Escalation (L3 only): a kernel that ignores its cancel word. arm_hang NULL: none.
  lw_status_t (*arm_hang)(void *s, lw_callable_handle_t *out_h, lw_args_t *out_args);
  // A short run to its end: returns once the chip runs again (after an escalation, its new
  // child replayed every callable), so the next trial's wait covers its own kernel only.
  lw_status_t (*run_short)(void *s, lw_bench_chip_t *d);
  // Lines of the table's header (each ends with a newline) and keys of the workload's own.
  void (*describe)(void *s, FILE *out);
  void (*json)(void *s, lw_json_t *j);
  void (*close)(void *s, lw_bench_chip_t *d);
} lw_cancel_workload_t;

int lw__bench_cancel(const lw_bench_opts_t *o, const lw_cancel_workload_t *w);

#endif  // LANEWORK_TOOLS_BENCH_CANCEL_H_
