// lanes/spin.h — the one spin policy: how a thread that waits for another thread or process
// spends the time before it blocks. Every spin -> yield -> block loop in lanework uses it:
// lw__waitword_wait (then a futex), the parent's scheduler loop (then epoll_wait), a waiting
// caller's drain (lw__sched_wait_draining), a chip child's run lane waiting for posts, and a
// child pushing into a full completion ring (then short naps).
//
// The shape (after seed 001 and CUDA.jl's spinning synchronization): rounds of one cpu pause
// for about LW_SPIN_PAUSE_NS (at least LW_SPIN_PAUSES of them; the clock is read every 16),
// for hand-offs that complete within microseconds, a process round trip included and an L3
// round trip to a GPU (an empty CUDA kernel's, ~12 us on an H100's host); then
// rounds of sched_yield, which let the thread we wait for run on a busy CPU while staying ready
// to go on at once, for as long as the spin's time budget; then block. The caller checks its
// condition after each round. The pause phase is time, not a count: a pause
// takes 25 ns on one CPU (AMD EPYC) and 40-70 ns on another (recent Intel Xeons), and 32 of
// them, the count this policy once used, ended the pauses 0.8 us into a wait, before an L3
// round trip's completion could come back, so the waiter paid a sched_yield system call (and
// noticed the completion only when it returned) in most round trips. The same at 4 us for a
// CUDA kernel's round trip: on an H100's host an L3 empty run took 0.2-1.6 us more than the L3
// sim run plus the driver's launch+sync floor in each of 6 runs with 4 us of pauses, and
// 0.3-0.8 us less in 2 of 2 with 20 us (issue 22's target, bench dispatch --backend cuda).
//
// The budget is time, not a count of yields (a yield takes 0.2 us on one machine and 2 us on
// another): what a block costs, measured where it runs. lw__spin_calibrate times futex wakes
// between two threads of the process (lw_init, the first worker or chip); the budget is
// LW_SPIN_WAKE_FACTOR times that wake, at least LW_SPIN_MIN_BUDGET_NS and at most
// LW_SPIN_MAX_BUDGET_NS. A waiter that spins that long before it blocks never pays more than a
// few wakes' worth of CPU for a wait that a block would have cost it anyway, and gaps shorter
// than the budget (most of a DAG's hand-offs) cost no sleep at all. A worker hands its figure
// to its chip children (mailbox header spin_budget_ns), so they spin as long as the parent.
//
// What the awaited side is doing (lw__spin_step_for): a waiter that knows its partner is idle
// (asleep, or not working toward what it waits for) blocks after the pauses, since no spin
// would see it move; one whose partner works for it spins its budget; one whose partner last
// ran on its own CPU yields from the first round, since a pause only keeps the partner off
// the CPU (the two ends of a mailbox publish their CPU: doorbell.poster_cpu, the ring
// cursors' cpu). A waiter that cannot tell passes LW__PARTNER_UNKNOWN (the budget).
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
#include <stdatomic.h>
#include <stdint.h>

#include "lanes/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

// The pause phase: at least LW_SPIN_PAUSES rounds of one cpu pause, and until LW_SPIN_PAUSE_NS
// have passed since round LW_SPIN_PAUSE_CLOCK_AT (its first clock read; the first few rounds,
// where most waits end, read no clock), looked at every LW_SPIN_PAUSE_CLOCK_EVERY rounds.
#define LW_SPIN_PAUSES 32
#define LW_SPIN_PAUSE_NS 20000
#define LW_SPIN_PAUSE_CLOCK_AT 8
#define LW_SPIN_PAUSE_CLOCK_EVERY 16
// The yield phase's budget: LW_SPIN_WAKE_FACTOR x the measured wake, within these bounds.
#define LW_SPIN_WAKE_FACTOR 4
#define LW_SPIN_MIN_BUDGET_NS 50000
#define LW_SPIN_MAX_BUDGET_NS 1000000
// A yield slower than this ends the spin (see above).
#define LW_SPIN_SLOW_YIELD_NS 50000
// The yield budget of a wait for an operation whose cancel was requested (lw_handle_wait):
// its end is due within the kernel's poll interval (tens of microseconds on a GPU; DESIGN
// §4.2), not at an unknown time, so the waiter spins up to a millisecond rather than block
// after a few wakes' worth and pay the wakes of the completion's way back (two at L3: the
// scheduler's, then the waiter's). Bounded: a wait for a kernel that ignores the cancel
// spins 1 ms, then blocks (each such wait: a caller polling with short timeouts pays it per
// call). Runs only (an L2 run, an L3 run): not a register, not an L4 run.
#define LW_SPIN_CANCEL_BUDGET_NS 1000000

typedef enum lw__spin_step {
  LW__SPIN_PAUSED = 0,   // this round paused the cpu once; check the condition again
  LW__SPIN_YIELDED = 1,  // this round called sched_yield; check the condition (and deadline)
  LW__SPIN_BLOCK = 2,    // the spin budget is spent: block until woken (nothing was done)
} lw__spin_step_t;

// What the awaited side is doing, as far as the waiter can tell.
typedef enum lw__partner {
  LW__PARTNER_UNKNOWN = 0,  // spin the budget
  LW__PARTNER_WORKING = 1,  // it works toward what we wait for: spin the budget
  LW__PARTNER_IDLE = 2,     // asleep or busy elsewhere: block after the pauses
  // It last ran on this thread's CPU: it cannot move while this thread holds the CPU, so
  // pausing only delays it; yield at once (for the budget, as UNKNOWN).
  LW__PARTNER_SAME_CPU = 3,
} lw__partner_t;

// One waiter's progress through the policy. Plain data, owned by the waiting thread.
typedef struct lw__spin {
  uint32_t round;
  int64_t yield_start_ns;  // when the yield phase began; 0 before it
  int64_t budget_ns;       // the yield phase's length; 0: lw__spin_budget_ns() (tests set it)
  int64_t slow_yield_ns;   // LW_SPIN_SLOW_YIELD_NS; tests change it
  int64_t pause_start_ns;  // the pause phase's clock read at round LW_SPIN_PAUSE_CLOCK_AT
  int64_t pause_ns;        // lw__spin_pause_ns(): LW_SPIN_PAUSE_NS; tests change it
} lw__spin_t;

#define LW__SPIN_INIT {0, 0, 0, LW_SPIN_SLOW_YIELD_NS, 0, lw__spin_pause_ns()}
// The round number that means "spent".
#define LW__SPIN_SPENT UINT32_MAX

// The process's yield budget in ns (LW_SPIN_MIN_BUDGET_NS until calibrated or set).
int64_t lw__spin_budget_ns(void);
// Sets the budget from a wake cost in ns (bounded as above); what a chip child does with its
// parent's figure. Returns the budget.
int64_t lw__spin_set_budget_ns(int64_t ns);
// Measures the cost of a futex wake between two threads of this process once (a few dozen
// round trips, under a millisecond on a quiet machine) and sets the budget from it; later
// calls return at once. Returns the budget. LW_SPIN_BUDGET_NS=<ns> in the environment sets
// the budget instead (for comparisons); a thread that cannot start leaves the minimum.
int64_t lw__spin_calibrate(void);
// The wake cost the calibration measured, in ns (0: not measured).
int64_t lw__spin_wake_ns(void);

// The pause phase's length for this process: LW_SPIN_PAUSE_NS, or, for comparisons, the
// environment's LW_SPIN_PAUSE_NS=<ns>, read by lw__spin_calibrate and lw__spin_set_budget_ns
// (a chip child inherits its parent's environment).
extern _Atomic int64_t lw__spin_pause_value;
static inline int64_t lw__spin_pause_ns(void) {
  return atomic_load_explicit(&lw__spin_pause_value, memory_order_relaxed);
}

static inline void lw__spin_reset(lw__spin_t *s) {
  s->round = 0;
  s->yield_start_ns = 0;
  s->pause_start_ns = 0;
}

// Whether this round still pauses: the pause phase has not reached LW_SPIN_PAUSES rounds, or
// its time (pause_ns, counted from the clock read at round LW_SPIN_PAUSE_CLOCK_AT) has not
// passed. An idle partner gets the minimum: no pause would see it move.
static inline bool lw__spin_pausing(lw__spin_t *s, lw__partner_t partner) {
  if (s->round == LW_SPIN_PAUSE_CLOCK_AT) s->pause_start_ns = lw__now_ns();
  if (s->round < LW_SPIN_PAUSES) return true;
  if (partner == LW__PARTNER_IDLE) return false;
  if (s->round % LW_SPIN_PAUSE_CLOCK_EVERY != 0) return true;
  return lw__now_ns() - s->pause_start_ns < s->pause_ns;
}

// Performs this round's pause or yield and says which it was, or returns LW__SPIN_BLOCK
// (doing nothing) once the budget is spent, a yield was slow, or the partner is idle (after
// the pauses); it keeps returning LW__SPIN_BLOCK until lw__spin_reset.
static inline lw__spin_step_t lw__spin_step_for(lw__spin_t *s, lw__partner_t partner) {
  if (s->round == LW__SPIN_SPENT) return LW__SPIN_BLOCK;
  if (s->yield_start_ns == 0 && partner != LW__PARTNER_SAME_CPU && lw__spin_pausing(s, partner)) {
    s->round++;
    lw__cpu_relax();
    return LW__SPIN_PAUSED;
  }
  int64_t t0 = lw__now_ns();
  if (s->yield_start_ns == 0) s->yield_start_ns = t0;
  int64_t budget = s->budget_ns > 0 ? s->budget_ns : lw__spin_budget_ns();
  if (partner == LW__PARTNER_IDLE || t0 - s->yield_start_ns >= budget) {
    s->round = LW__SPIN_SPENT;
    return LW__SPIN_BLOCK;
  }
  s->round++;
  sched_yield();
  // The CPU is busy with other work: block from the next round on.
  if (lw__now_ns() - t0 >= s->slow_yield_ns) s->round = LW__SPIN_SPENT;
  return LW__SPIN_YIELDED;
}

static inline lw__spin_step_t lw__spin_step(lw__spin_t *s) {
  return lw__spin_step_for(s, LW__PARTNER_UNKNOWN);
}

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_SPIN_H_
