// lanes/timeline.h — timeline semaphores: a monotonically increasing uint64 with sticky
// failure (seed 003). Waiters wait for "value >= target"; a failed timeline fails every
// current and future waiter with its failure status.
//
// Layout: fixed-width fields only; may live in shared memory (flag LW_TIMELINE_SHARED selects
// process-shared futexes). Lifecycle: initialize -> signal/fail/wait -> deinitialize (no-op
// today; kept for symmetry). Thread/process safety: any number of signalers and waiters.
//
// Memory ordering: signal stores value with release after the caller's writes; a waiter that
// observes value >= target (acquire) sees those writes. fail stores failure with release
// before bumping the wait word.
#ifndef LANEWORK_LANES_TIMELINE_H_
#define LANEWORK_LANES_TIMELINE_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanes/wait.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LW_TIMELINE_SHARED = 1u };

typedef struct lw_timeline {
  _Atomic uint64_t value;
  _Atomic int32_t failure;  // lw_status_t; LW_OK while healthy
  uint32_t flags;           // LW_TIMELINE_*
  lw_waitword_t word;
} lw_timeline_t;
_Static_assert(sizeof(lw_timeline_t) == 24, "lw_timeline_t is part of shared layouts");

void lw__timeline_initialize(lw_timeline_t *t, uint64_t initial, uint32_t flags);
void lw__timeline_deinitialize(lw_timeline_t *t);

// Advances to value. INVALID_ARGUMENT if value is not greater than the current value (values
// are monotonic); the failure status if the timeline has failed. Wakes waiters.
LW_MUST_USE lw_status_t lw__timeline_signal(lw_timeline_t *t, uint64_t value);

// Fails the timeline with status (not LW_OK). Sticky: the first failure wins; later calls keep
// it. Wakes every waiter.
void lw__timeline_fail(lw_timeline_t *t, lw_status_t status);

// Current value (acquire) and failure status.
uint64_t lw__timeline_value(const lw_timeline_t *t);
lw_status_t lw__timeline_failure(const lw_timeline_t *t);

// True when value >= target: one acquire load, no syscall. It does not look at the failure
// status: a target reached before a failure stays reached (see lw__timeline_wait).
static inline bool lw__timeline_reached(const lw_timeline_t *t, uint64_t target) {
  return atomic_load_explicit(&t->value, memory_order_acquire) >= target;
}

// Waits until value >= target (LW_OK), the timeline fails (its failure status), or the
// absolute deadline passes (LW_DEADLINE_EXCEEDED). A reached target wins over a later
// failure: work that completed stays completed.
lw_status_t lw__timeline_wait(lw_timeline_t *t, uint64_t target, int64_t deadline_ns);

// lw__timeline_wait whose spin's yield phase lasts budget_ns (0: the process's budget;
// negative: no spin, it blocks at once, for a waiter that has just spun).
lw_status_t lw__timeline_wait_spin(lw_timeline_t *t, uint64_t target, int64_t deadline_ns,
                                   int64_t budget_ns);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_TIMELINE_H_
