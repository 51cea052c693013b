// lanes/wait.c — spin (lanes/spin.h: pause, then sched_yield) -> futex sleep, with a sleeper
// count so that a waker with nobody asleep costs no syscall.
//
// Why no wake-up is lost. The waker runs
//   W1  make the condition true (release or stronger)
//   W2  epoch += 1                       (seq_cst RMW; also a release)
//   W3  if (sleepers (seq_cst) != 0) futex_wake(epoch, all)
// and the waiter runs
//   S1  seen = epoch                     (acquire)
//   S2  if cond: done
//   S3  sleepers += 1                    (seq_cst RMW)
//   S4  if cond or epoch (seq_cst) != seen: skip the sleep
//   S5  futex_wait(epoch, seen)          (the kernel sleeps only while epoch == seen)
//   S6  sleepers -= 1, then loop to S1
// W2, W3, S3 and S4's epoch load are seq_cst, so they sit in one total order S.
//   (a) W3 comes after S3 in S: the waker sees sleepers != 0 and calls futex_wake. Either the
//       waiter already sleeps (woken), or it has not reached S5 yet; then W2 precedes the
//       wake and the kernel's futex_wait re-reads epoch under the bucket lock, finds it !=
//       seen and returns -EAGAIN at once.
//   (b) W3 comes before S3 in S: then W2 (before W3) precedes S3 and S4's seq_cst epoch load,
//       so S4 reads the bumped epoch and the waiter does not sleep. It loops to S1; its
//       acquire load of epoch now reads W2 (a release sequenced after W1), so S2 sees the
//       condition.
// In both cases the waiter never sleeps through W1.
#include "lanes/wait.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>

#include "lanes/spin.h"
#include "lanes/sys.h"

void lw__waitword_initialize(lw_waitword_t *w) {
  // Plain stores: the word is not yet visible to other threads or processes.
  atomic_init(&w->epoch, 0);
  atomic_init(&w->sleepers, 0);
}

void lw__waitword_wake(lw_waitword_t *w, bool shared) {
  // W2: seq_cst so it is ordered against the waiter's sleeper increment (see top of file).
  atomic_fetch_add_explicit(&w->epoch, 1, memory_order_seq_cst);
  // W3: seq_cst load; 0 means no waiter can be asleep on the old epoch, skip the syscall.
  if (atomic_load_explicit(&w->sleepers, memory_order_seq_cst) != 0) {
    (void)lw__sys_futex_wake(&w->epoch, INT_MAX, shared);
  }
}

static bool deadline_passed(int64_t deadline_ns) {
  return deadline_ns != LW_DEADLINE_NEVER && lw__now_ns() >= deadline_ns;
}

lw_status_t lw__waitword_wait(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                             int64_t deadline_ns, bool shared) {
  return lw__waitword_wait_partner(w, cond, ctx, deadline_ns, shared, NULL);
}

lw_status_t lw__waitword_wait_partner(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                                     int64_t deadline_ns, bool shared,
                                     lw_wait_partner_fn partner) {
  return lw__waitword_wait_spin(w, cond, ctx, deadline_ns, shared, partner, 0);
}

lw_status_t lw__waitword_wait_spin(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                                   int64_t deadline_ns, bool shared, lw_wait_partner_fn partner,
                                   int64_t budget_ns) {
  // Do a cheap check first: a true condition costs one call and no syscall.
  if (cond(ctx)) return LW_OK;
  if (deadline_passed(deadline_ns)) return LW_DEADLINE_EXCEEDED;

  lw__spin_t spin = LW__SPIN_INIT;
  spin.budget_ns = budget_ns;
  for (lw__spin_step_t step;
       (step = lw__spin_step_for(&spin, partner ? partner(ctx) : LW__PARTNER_UNKNOWN)) !=
       LW__SPIN_BLOCK;) {
    if (cond(ctx)) return LW_OK;
    // Pauses take nanoseconds: reading the clock after each would cost more than the pause.
    if (step == LW__SPIN_YIELDED && deadline_passed(deadline_ns)) return LW_DEADLINE_EXCEEDED;
  }
  return lw__waitword_block(w, cond, ctx, deadline_ns, shared);
}

lw_status_t lw__waitword_block(lw_waitword_t *w, lw_wait_cond_fn cond, const void *ctx,
                              int64_t deadline_ns, bool shared) {
  for (;;) {
    // S1: acquire pairs with the waker's epoch bump (a release after it made cond true).
    uint32_t seen = atomic_load_explicit(&w->epoch, memory_order_acquire);
    if (cond(ctx)) return LW_OK;  // S2
    if (deadline_passed(deadline_ns)) return LW_DEADLINE_EXCEEDED;

    // S3: seq_cst so that a waker either sees us counted or we see its epoch bump (case b).
    atomic_fetch_add_explicit(&w->sleepers, 1, memory_order_seq_cst);
    int rc = 0;
    // S4: the seq_cst epoch load is what makes case (b) sound; cond is re-checked as well.
    if (!cond(ctx) && atomic_load_explicit(&w->epoch, memory_order_seq_cst) == seen) {
      rc = lw__sys_futex_wait(&w->epoch, seen, deadline_ns, shared);  // S5
    }
    // S6: seq_cst keeps the count exact for wakers that race with our exit.
    atomic_fetch_sub_explicit(&w->sleepers, 1, memory_order_seq_cst);

    if (rc == -ETIMEDOUT) return cond(ctx) ? LW_OK : LW_DEADLINE_EXCEEDED;
    // 0 (woken or spurious), -EAGAIN (epoch moved) and -EINTR loop to re-check. Anything
    // else (e.g. -ENOSYS under a strict seccomp filter) means the futex cannot sleep: keep
    // waiting correctly by yielding instead of spinning hot.
    if (rc != 0 && rc != -EAGAIN && rc != -EINTR) sched_yield();
  }
}
