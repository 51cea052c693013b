// lanes/wait.h — the wait primitive used by every blocking wait in lanework.
//
// Shape: check the condition (no syscall when it already holds), spin by the one spin policy
// (lanes/spin.h: cpu pauses, then sched_yield), then sleep on a futex word with an absolute
// deadline. Sleepers are counted so that wakers skip the futex_wake syscall when nobody sleeps.
#ifndef LANEWORK_LANES_WAIT_H_
#define LANEWORK_LANES_WAIT_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanes/spin.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// A futex word plus a sleeper count. Lives in process memory or in shared memory (then
// initialize with shared = true). Plain fixed-width fields: safe in a mailbox.
typedef struct lw_waitword {
  _Atomic uint32_t epoch;     // bumped by every lw__waitword_wake; the futex word
  _Atomic uint32_t sleepers;  // threads inside futex_wait on epoch
} lw_waitword_t;
_Static_assert(sizeof(lw_waitword_t) == 8, "lw_waitword_t is part of shared layouts");

void lw__waitword_initialize(lw_waitword_t *w);

// Called after making the condition true (with release or stronger ordering). Bumps the
// epoch and wakes all sleepers if there are any. seq_cst so that it pairs with the waiter's
// sleeper increment (no lost wake-up).
void lw__waitword_wake(lw_waitword_t *w, bool shared);

// Returns true when the condition holds for the waiter.
typedef bool (*lw_wait_cond_fn)(const void *ctx);

// Waits until cond(ctx) is true or the absolute deadline (lw__now_ns clock) passes.
// LW_OK when the condition holds, LW_DEADLINE_EXCEEDED otherwise. The condition is checked
// before any spinning, so a true condition costs one call and no syscall.
lw_status_t lw__waitword_wait(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                             int64_t deadline_ns, bool shared);

// The partner of a wait (lanes/spin.h): asked before each spin round; ctx is the wait's.
typedef lw__partner_t (*lw_wait_partner_fn)(const void *ctx);

// lw__waitword_wait whose spin asks partner(ctx) what the awaited side is doing (NULL: as
// lw__waitword_wait).
lw_status_t lw__waitword_wait_partner(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                                     int64_t deadline_ns, bool shared,
                                     lw_wait_partner_fn partner);

// lw__waitword_wait_partner whose spin's yield phase lasts budget_ns (0: the process's,
// lw__spin_budget_ns()).
lw_status_t lw__waitword_wait_spin(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                                   int64_t deadline_ns, bool shared, lw_wait_partner_fn partner,
                                   int64_t budget_ns);

// The same wait without the spin: a thread that knows another thread is already spinning for
// the same event (a chip child's mailbox loop while the run lane takes posts) sleeps at once
// instead of taking a CPU from it.
lw_status_t lw__waitword_block(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                              int64_t deadline_ns, bool shared);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_WAIT_H_
