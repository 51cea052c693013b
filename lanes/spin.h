// lanes/spin.h — the one spin policy: how a thread that waits for another thread or process
// spends the time before it blocks. Every spin -> yield -> block loop in lanework uses it:
// lw__waitword_wait (then a futex), the parent's scheduler loop (then epoll_wait) and a child
// pushing into a full completion ring (then short naps, since nobody wakes it for ring space).
//
// The shape (after seed 001 and CUDA.jl's spinning synchronization): LW_SPIN_PAUSES rounds of
// one cpu pause, for hand-offs that complete within a few hundred nanoseconds; then
// LW_SPIN_YIELDS rounds of sched_yield, which let the thread we wait for run on a busy CPU
// while staying ready to go on at once; then block. The caller checks its condition after
// each round; the policy itself knows nothing about what is awaited.
//
// Bounded by what the yields cost: a yield that comes back after more than slow_yield_ns (on
// an idle CPU it returns in about a microsecond; another of our spinning threads gives it back
// within a few) means some other thread held this CPU for a timeslice, a machine busy with
// other work. The spin then ends at once and the waiter blocks: on a busy CPU each further
// yield would cost a whole timeslice (the scheduler puts a yielder behind every other runnable
// thread), while a thread woken from a sleep is placed ahead and runs soon after the wake.
//
// Usage:
//   lw__spin_t spin = LW__SPIN_INIT;
//   while (!cond()) {
//     if (lw__spin_step(&spin) == LW__SPIN_BLOCK) block();  // futex, epoll, nap
//   }
// and lw__spin_reset after progress, so the next idle stretch spins again.
#ifndef LANEWORK_LANES_SPIN_H_
#define LANEWORK_LANES_SPIN_H_

#include <sched.h>
#include <stdint.h>

#include "lanes/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

// Rounds of one cpu pause, then rounds of sched_yield, before a waiter blocks.
#define LW_SPIN_PAUSES 32
#define LW_SPIN_YIELDS 224
// A yield slower than this ends the spin (see above).
#define LW_SPIN_SLOW_YIELD_NS 50000

typedef enum lw__spin_step {
  LW__SPIN_PAUSED = 0,   // this round paused the cpu once; check the condition again
  LW__SPIN_YIELDED = 1,  // this round called sched_yield; check the condition (and deadline)
  LW__SPIN_BLOCK = 2,    // the spin budget is spent: block until woken (nothing was done)
} lw__spin_step_t;

// One waiter's progress through the policy. Plain data, owned by the waiting thread.
typedef struct lw__spin {
  uint32_t round;
  int64_t slow_yield_ns;  // LW_SPIN_SLOW_YIELD_NS; tests change it
} lw__spin_t;

#define LW__SPIN_INIT {0, LW_SPIN_SLOW_YIELD_NS}

static inline void lw__spin_reset(lw__spin_t *s) { s->round = 0; }

// Performs this round's pause or yield and says which it was, or returns LW__SPIN_BLOCK
// (doing nothing) once LW_SPIN_PAUSES + LW_SPIN_YIELDS rounds are spent or a yield was slow;
// it keeps returning LW__SPIN_BLOCK until lw__spin_reset.
static inline lw__spin_step_t lw__spin_step(lw__spin_t *s) {
  if (s->round < LW_SPIN_PAUSES) {
    s->round++;
    lw__cpu_relax();
    return LW__SPIN_PAUSED;
  }
  if (s->round < LW_SPIN_PAUSES + LW_SPIN_YIELDS) {
    s->round++;
    int64_t t0 = lw__now_ns();
    sched_yield();
    // The CPU is busy with other work: block from the next round on.
    if (lw__now_ns() - t0 >= s->slow_yield_ns) s->round = LW_SPIN_PAUSES + LW_SPIN_YIELDS;
    return LW__SPIN_YIELDED;
  }
  return LW__SPIN_BLOCK;
}

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_SPIN_H_
