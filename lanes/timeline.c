// lanes/timeline.c — timeline semaphores (seed 003).
#include "lanes/timeline.h"

#include "lanes/sys.h"

static bool is_shared(const lw_timeline_t *t) { return (t->flags & LW_TIMELINE_SHARED) != 0; }

void lw__timeline_initialize(lw_timeline_t *t, uint64_t initial, uint32_t flags) {
  // Plain initialization: the timeline is not yet visible to anyone else.
  atomic_init(&t->value, initial);
  atomic_init(&t->failure, (int32_t)LW_OK);
  t->flags = flags;
  lw__waitword_initialize(&t->word);
}

void lw__timeline_deinitialize(lw_timeline_t *t) { (void)t; }

lw_status_t lw__timeline_signal(lw_timeline_t *t, uint64_t value) {
  // Acquire pairs with lw__timeline_fail's release: a signal after a failure reports it.
  lw_status_t failure = (lw_status_t)atomic_load_explicit(&t->failure, memory_order_acquire);
  if (failure != LW_OK) return failure;
  // Relaxed first read: the CAS below re-validates it.
  uint64_t cur = atomic_load_explicit(&t->value, memory_order_relaxed);
  do {
    if (value <= cur) return LW_INVALID_ARGUMENT;
    // Release: a waiter that observes value (acquire) sees the signaller's earlier writes.
    // A CAS (not a store) keeps the value monotonic with several racing signallers.
  } while (!atomic_compare_exchange_weak_explicit(&t->value, &cur, value, memory_order_release,
                                                  memory_order_relaxed));
  lw__waitword_wake(&t->word, is_shared(t));
  return LW_OK;
}

void lw__timeline_fail(lw_timeline_t *t, lw_status_t status) {
  if (status == LW_OK) status = LW_INTERNAL;  // failing "with OK" is a caller bug; stay failed
  int32_t expected = (int32_t)LW_OK;
  // Release so that a waiter that sees the failure (acquire) sees what led to it. The CAS
  // makes the first failure win; a later one leaves it in place.
  (void)atomic_compare_exchange_strong_explicit(&t->failure, &expected, (int32_t)status,
                                                memory_order_release, memory_order_relaxed);
  // Wake even when we lost the race: waking twice is harmless, missing a wake-up is not.
  lw__waitword_wake(&t->word, is_shared(t));
}

uint64_t lw__timeline_value(const lw_timeline_t *t) {
  // Acquire: callers act on the value (e.g. read results of the work it covers).
  return atomic_load_explicit(&t->value, memory_order_acquire);
}

lw_status_t lw__timeline_failure(const lw_timeline_t *t) {
  // Acquire pairs with lw__timeline_fail's release.
  return (lw_status_t)atomic_load_explicit(&t->failure, memory_order_acquire);
}

typedef struct wait_ctx {
  const lw_timeline_t *t;
  uint64_t target;
} wait_ctx_t;

static bool reached_or_failed(const void *ctx) {
  const wait_ctx_t *c = ctx;
  return lw__timeline_reached(c->t, c->target) || lw__timeline_failure(c->t) != LW_OK;
}

lw_status_t lw__timeline_wait(lw_timeline_t *t, uint64_t target, int64_t deadline_ns) {
  return lw__timeline_wait_spin(t, target, deadline_ns, 0);
}

lw_status_t lw__timeline_wait_spin(lw_timeline_t *t, uint64_t target, int64_t deadline_ns,
                                   int64_t budget_ns) {
  // Fast path: one acquire load, no syscall.
  if (lw__timeline_reached(t, target)) return LW_OK;
  wait_ctx_t ctx = {t, target};
  lw_status_t st =
      budget_ns < 0
          ? lw__waitword_block(&t->word, reached_or_failed, &ctx, deadline_ns, is_shared(t))
          : lw__waitword_wait_spin(&t->word, reached_or_failed, &ctx, deadline_ns, is_shared(t),
                                   NULL, budget_ns);
  // Check the value before the failure: a target reached before the timeline failed stays
  // reached (completed work stays completed).
  if (lw__timeline_reached(t, target)) return LW_OK;
  if (st != LW_OK) return st;
  lw_status_t failure = lw__timeline_failure(t);
  return failure != LW_OK ? failure : LW_INTERNAL;  // cond held, so one of the two is true
}
