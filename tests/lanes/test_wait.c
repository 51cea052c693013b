// tests/lanes/test_wait.c — lw_waitword_*: condition first, spin, yield, futex sleep.
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>

#include "lanes/sys.h"
#include "lanes/wait.h"
#include "lanes_test_util.h"

typedef struct flag_ctx {
  _Atomic uint32_t flag;
  _Atomic uint32_t cond_calls;
} flag_ctx_t;

static bool flag_set(const void *ctx) {
  flag_ctx_t *c = (flag_ctx_t *)ctx;
  atomic_fetch_add(&c->cond_calls, 1);
  return atomic_load_explicit(&c->flag, memory_order_acquire) != 0;
}

Test(wait, true_condition_returns_ok_after_one_check_without_sleeping, .timeout = 10) {
  lw_waitword_t w;
  lw__waitword_initialize(&w);
  flag_ctx_t c = {1, 0};
  cr_assert_eq(lw__waitword_wait(&w, flag_set, &c, LW_DEADLINE_NEVER, false), LW_OK);
  cr_assert_eq(atomic_load(&c.cond_calls), 1);
  cr_assert_eq(atomic_load(&w.sleepers), 0);
}

Test(wait, true_condition_wins_over_passed_deadline, .timeout = 10) {
  lw_waitword_t w;
  lw__waitword_initialize(&w);
  flag_ctx_t c = {1, 0};
  cr_assert_eq(lw__waitword_wait(&w, flag_set, &c, 0, false), LW_OK);
}

Test(wait, passed_deadline_returns_deadline_exceeded_at_once, .timeout = 10) {
  lw_waitword_t w;
  lw__waitword_initialize(&w);
  flag_ctx_t c = {0, 0};
  cr_assert_eq(lw__waitword_wait(&w, flag_set, &c, 0, false), LW_DEADLINE_EXCEEDED);
  cr_assert_eq(atomic_load(&c.cond_calls), 1);
}

Test(wait, deadline_returns_deadline_exceeded_after_at_least_the_timeout, .timeout = 10) {
  lw_waitword_t w;
  lw__waitword_initialize(&w);
  flag_ctx_t c = {0, 0};
  const int64_t timeout = 20 * 1000 * 1000;
  int64_t start = lw__now_ns();
  cr_assert_eq(lw__waitword_wait(&w, flag_set, &c, start + timeout, false), LW_DEADLINE_EXCEEDED);
  cr_assert_geq(lw__now_ns() - start, timeout);
  cr_assert_eq(atomic_load(&w.sleepers), 0, "a timed-out waiter must uncount itself");
}

Test(wait, wake_bumps_epoch_even_with_no_sleepers, .timeout = 10) {
  lw_waitword_t w;
  lw__waitword_initialize(&w);
  lw__waitword_wake(&w, false);
  lw__waitword_wake(&w, true);
  cr_assert_eq(atomic_load(&w.epoch), 2);
  cr_assert_eq(atomic_load(&w.sleepers), 0);
}

typedef struct waiter_arg {
  lw_waitword_t *w;
  flag_ctx_t *c;
  lw_status_t result;
} waiter_arg_t;

static void *waiter_main(void *p) {
  waiter_arg_t *a = p;
  a->result = lw__waitword_wait(a->w, flag_set, a->c, LW_DEADLINE_NEVER, false);
  return NULL;
}

#define N_WAITERS 6

Test(wait, wake_releases_every_sleeping_waiter, .timeout = 20) {
  lw_waitword_t w;
  lw__waitword_initialize(&w);
  flag_ctx_t c = {0, 0};
  pthread_t th[N_WAITERS];
  waiter_arg_t args[N_WAITERS];
  for (int i = 0; i < N_WAITERS; ++i) {
    args[i] = (waiter_arg_t){&w, &c, LW_INTERNAL};
    cr_assert_eq(pthread_create(&th[i], NULL, waiter_main, &args[i]), 0);
  }
  // Event, not time: wait until every waiter is counted as a sleeper (past the spin phase).
  while (atomic_load(&w.sleepers) != N_WAITERS) sched_yield();
  atomic_store_explicit(&c.flag, 1, memory_order_release);
  lw__waitword_wake(&w, false);
  for (int i = 0; i < N_WAITERS; ++i) {
    pthread_join(th[i], NULL);
    cr_assert_eq(args[i].result, LW_OK);
  }
  cr_assert_eq(atomic_load(&w.sleepers), 0);
}

// Two threads hand a token back and forth through two waitwords. A lost wake-up anywhere
// leaves both asleep and the test hits its timeout.
#define PING_ROUNDS 20000

typedef struct pingpong {
  _Atomic uint64_t turn;  // even: ping's turn, odd: pong's
  lw_waitword_t word[2];
} pingpong_t;

typedef struct turn_ctx {
  pingpong_t *p;
  uint64_t want;
} turn_ctx_t;

static bool is_turn(const void *ctx) {
  const turn_ctx_t *t = ctx;
  return atomic_load_explicit(&t->p->turn, memory_order_acquire) == t->want;
}

static void *pong_main(void *arg) {
  pingpong_t *p = arg;
  for (uint64_t i = 0; i < PING_ROUNDS; ++i) {
    turn_ctx_t t = {p, 2 * i + 1};
    (void)lw__waitword_wait(&p->word[1], is_turn, &t, LW_DEADLINE_NEVER, false);
    atomic_store_explicit(&p->turn, 2 * i + 2, memory_order_release);
    lw__waitword_wake(&p->word[0], false);
  }
  return NULL;
}

Test(wait, ping_pong_between_threads_loses_no_wake_up, .timeout = 60) {
  pingpong_t p;
  atomic_init(&p.turn, 0);
  lw__waitword_initialize(&p.word[0]);
  lw__waitword_initialize(&p.word[1]);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, pong_main, &p), 0);
  for (uint64_t i = 0; i < PING_ROUNDS; ++i) {
    turn_ctx_t t = {&p, 2 * i};
    cr_assert_eq(lw__waitword_wait(&p.word[0], is_turn, &t, LW_DEADLINE_NEVER, false), LW_OK);
    atomic_store_explicit(&p.turn, 2 * i + 1, memory_order_release);
    lw__waitword_wake(&p.word[1], false);
  }
  pthread_join(th, NULL);
  cr_assert_eq(atomic_load(&p.turn), 2 * PING_ROUNDS);
}

Test(wait, gate_opened_before_wait_is_seen_at_once, .timeout = 10) {
  test_gate_t g;
  test_gate_init(&g);
  test_gate_open(&g);
  test_gate_wait(&g);
  cr_assert(test_gate_is_open(&g));
}
