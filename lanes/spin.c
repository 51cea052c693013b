// lanes/spin.c — the spin policy's budget: measured once per process (lanes/spin.h).
#include "lanes/spin.h"

#include <pthread.h>
#include <stdlib.h>

#include "lanes/sys.h"
#include "lanes/wait.h"

// 0 until set: lw__spin_budget_ns then answers the minimum.
static _Atomic int64_t budget_ns;
static _Atomic int64_t wake_ns;
_Atomic int64_t lw__spin_pause_value = LW_SPIN_PAUSE_NS;

// A non-negative count of ns from the environment variable name, or -1 (unset or not one).
static int64_t env_ns(const char *name) {
  const char *env = getenv(name);
  if (!env || !*env) return -1;
  char *end = NULL;
  long long v = strtoll(env, &end, 10);
  return end && *end == '\0' && v >= 0 ? v : -1;
}

// The environment's LW_SPIN_PAUSE_NS, where set (comparisons).
static void read_knobs(void) {
  int64_t v = env_ns("LW_SPIN_PAUSE_NS");
  if (v >= 0) atomic_store_explicit(&lw__spin_pause_value, v, memory_order_relaxed);
}

int64_t lw__spin_budget_ns(void) {
  int64_t b = atomic_load_explicit(&budget_ns, memory_order_relaxed);
  return b > 0 ? b : LW_SPIN_MIN_BUDGET_NS;
}

int64_t lw__spin_wake_ns(void) { return atomic_load_explicit(&wake_ns, memory_order_relaxed); }

static int64_t bounded(int64_t ns) {
  if (ns < LW_SPIN_MIN_BUDGET_NS) return LW_SPIN_MIN_BUDGET_NS;
  if (ns > LW_SPIN_MAX_BUDGET_NS) return LW_SPIN_MAX_BUDGET_NS;
  return ns;
}

int64_t lw__spin_set_budget_ns(int64_t ns) {
  read_knobs();
  int64_t b = bounded(ns);
  atomic_store_explicit(&budget_ns, b, memory_order_relaxed);
  return b;
}

// The ping-pong: the measuring thread sets step to 2k+1 and wakes the partner, which sleeps
// until then, sets 2k+2 and wakes it back. Neither spins (lw__waitword_block): each hand-off is
// a futex wake of a sleeping thread, what a waiter that blocked pays.
#define ROUNDS 24

typedef struct pingpong {
  lw_waitword_t word;     // both sleep here (lw__waitword_block: no spin)
  _Atomic uint32_t step;  // 2k+1: the partner's turn; 2k+2: the measuring thread's
} pingpong_t;

typedef struct turn {
  pingpong_t *p;
  uint32_t want;
} turn_t;

static bool is_turn(const void *ctx) {
  const turn_t *t = ctx;
  return atomic_load_explicit(&t->p->step, memory_order_acquire) == t->want;
}

static void sleep_until(pingpong_t *p, uint32_t want) {
  turn_t t = {p, want};
  (void)lw__waitword_block(&p->word, is_turn, &t, LW_DEADLINE_NEVER, false);
}

static void hand_over(pingpong_t *p, uint32_t step) {
  atomic_store_explicit(&p->step, step, memory_order_release);
  lw__waitword_wake(&p->word, false);
}

static void *partner_main(void *arg) {
  pingpong_t *p = arg;
  for (uint32_t k = 0; k < ROUNDS; ++k) {
    sleep_until(p, 2 * k + 1);
    hand_over(p, 2 * k + 2);
  }
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void calibrate_once(void) {
  read_knobs();
  int64_t v = env_ns("LW_SPIN_BUDGET_NS");
  if (v > 0) {
    atomic_store_explicit(&budget_ns, v, memory_order_relaxed);  // as given: a comparison
    return;
  }
  pingpong_t p;
  lw__waitword_initialize(&p.word);
  atomic_init(&p.step, 0);
  pthread_t t;
  if (lw__sys_thread_start(&t, "lw-spin-probe", partner_main, &p) != 0) return;
  int64_t rtt[ROUNDS];
  for (uint32_t k = 0; k < ROUNDS; ++k) {
    // Let the partner fall asleep first: a partner still running would make it a spin.
    for (int i = 0; i < 4; ++i) sched_yield();
    int64_t t0 = lw__now_ns();
    hand_over(&p, 2 * k + 1);
    sleep_until(&p, 2 * k + 2);
    rtt[k] = lw__now_ns() - t0;
  }
  pthread_join(t, NULL);
  qsort(rtt, ROUNDS, sizeof(rtt[0]), cmp_i64);
  int64_t one_way = rtt[ROUNDS / 2] / 2;  // the median round trip, one way
  atomic_store_explicit(&wake_ns, one_way, memory_order_relaxed);
  (void)lw__spin_set_budget_ns(LW_SPIN_WAKE_FACTOR * one_way);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

int64_t lw__spin_calibrate(void) {
  (void)pthread_once(&once, calibrate_once);
  return lw__spin_budget_ns();
}
