// tests/lanes/test_timeline.c — timeline semaphores: monotonic signal, sticky failure, waits
// in one process and across a fork through MAP_SHARED memory.
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "lanes/timeline.h"

Test(timeline, starts_at_initial_value_and_healthy) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 7, 0);
  cr_assert_eq(lw__timeline_value(&t), 7);
  cr_assert_eq(lw__timeline_failure(&t), LW_OK);
  cr_assert(lw__timeline_reached(&t, 7));
  cr_assert_not(lw__timeline_reached(&t, 8));
  lw__timeline_deinitialize(&t);
}

Test(timeline, signal_advances_value_and_satisfies_earlier_targets, .timeout = 10) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  cr_assert_eq(lw__timeline_signal(&t, 3), LW_OK);
  cr_assert_eq(lw__timeline_value(&t), 3);
  cr_assert_eq(lw__timeline_wait(&t, 1, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(lw__timeline_wait(&t, 3, LW_DEADLINE_NEVER), LW_OK);
}

Test(timeline, signal_not_greater_than_current_is_invalid_argument) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  cr_assert_eq(lw__timeline_signal(&t, 5), LW_OK);
  cr_assert_eq(lw__timeline_signal(&t, 5), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__timeline_signal(&t, 4), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__timeline_value(&t), 5, "a rejected signal must not move the value");
}

Test(timeline, wait_deadline_returns_deadline_exceeded_after_at_least_the_timeout,
     .timeout = 10) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  const int64_t timeout = 20 * 1000 * 1000;
  int64_t start = lw__now_ns();
  cr_assert_eq(lw__timeline_wait(&t, 1, lw__deadline_after(timeout)), LW_DEADLINE_EXCEEDED);
  cr_assert_geq(lw__now_ns() - start, timeout);
}

Test(timeline, failure_is_sticky_and_first_failure_wins, .timeout = 10) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  lw__timeline_fail(&t, LW_TASK_FAILED);
  lw__timeline_fail(&t, LW_CHILD_EXITED);
  cr_assert_eq(lw__timeline_failure(&t), LW_TASK_FAILED);
  cr_assert_eq(lw__timeline_signal(&t, 1), LW_TASK_FAILED, "a failed timeline stays failed");
  cr_assert_eq(lw__timeline_value(&t), 0);
  cr_assert_eq(lw__timeline_wait(&t, 1, LW_DEADLINE_NEVER), LW_TASK_FAILED);
  cr_assert_eq(lw__timeline_wait(&t, 1, LW_DEADLINE_NEVER), LW_TASK_FAILED, "future waiters too");
}

Test(timeline, reached_target_wins_over_later_failure, .timeout = 10) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  cr_assert_eq(lw__timeline_signal(&t, 3), LW_OK);
  lw__timeline_fail(&t, LW_CHILD_EXITED);
  cr_assert_eq(lw__timeline_wait(&t, 3, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(lw__timeline_wait(&t, 2, 0), LW_OK);
  cr_assert_eq(lw__timeline_wait(&t, 4, LW_DEADLINE_NEVER), LW_CHILD_EXITED);
}

typedef struct waiter {
  lw_timeline_t *t;
  uint64_t target;
  _Atomic uint32_t *started;
  lw_status_t result;
} waiter_t;

static void *waiter_main(void *p) {
  waiter_t *w = p;
  atomic_fetch_add(w->started, 1);
  w->result = lw__timeline_wait(w->t, w->target, LW_DEADLINE_NEVER);
  return NULL;
}

#define N_WAITERS 6

// Starts N_WAITERS threads waiting for target and returns once all of them sleep on the
// futex (the sleeper count says so), so the test exercises the wake path, not the spin path.
static void start_sleeping_waiters(lw_timeline_t *t, uint64_t target, pthread_t *th, waiter_t *w,
                                   _Atomic uint32_t *started) {
  for (int i = 0; i < N_WAITERS; ++i) {
    w[i] = (waiter_t){t, target, started, LW_INTERNAL};
    cr_assert_eq(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
  }
  while (atomic_load(&t->word.sleepers) != N_WAITERS) sched_yield();
}

Test(timeline, reaching_target_wakes_all_waiters, .timeout = 20) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  pthread_t th[N_WAITERS];
  waiter_t w[N_WAITERS];
  _Atomic uint32_t started = 0;
  start_sleeping_waiters(&t, 5, th, w, &started);
  cr_assert_eq(lw__timeline_signal(&t, 4), LW_OK);  // below target: nobody may return OK yet
  cr_assert_eq(lw__timeline_signal(&t, 5), LW_OK);
  for (int i = 0; i < N_WAITERS; ++i) {
    pthread_join(th[i], NULL);
    cr_assert_eq(w[i].result, LW_OK);
  }
}

Test(timeline, failure_wakes_all_waiters_with_the_failure_status, .timeout = 20) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  pthread_t th[N_WAITERS];
  waiter_t w[N_WAITERS];
  _Atomic uint32_t started = 0;
  start_sleeping_waiters(&t, 1, th, w, &started);
  lw__timeline_fail(&t, LW_POISONED);
  for (int i = 0; i < N_WAITERS; ++i) {
    pthread_join(th[i], NULL);
    cr_assert_eq(w[i].result, LW_POISONED);
  }
}

typedef struct signaller {
  lw_timeline_t *t;
  int id;
  int ok;
} signaller_t;

#define N_SIGNALLERS 4
#define SIGNALS_EACH 2000

static void *signaller_main(void *p) {
  signaller_t *s = p;
  for (int i = 1; i <= SIGNALS_EACH; ++i) {
    if (lw__timeline_signal(s->t, (uint64_t)(i * N_SIGNALLERS + s->id)) == LW_OK) s->ok++;
  }
  return NULL;
}

Test(timeline, racing_signallers_keep_the_value_monotonic, .timeout = 20) {
  lw_timeline_t t;
  lw__timeline_initialize(&t, 0, 0);
  pthread_t th[N_SIGNALLERS];
  signaller_t s[N_SIGNALLERS];
  for (int i = 0; i < N_SIGNALLERS; ++i) {
    s[i] = (signaller_t){&t, i, 0};
    cr_assert_eq(pthread_create(&th[i], NULL, signaller_main, &s[i]), 0);
  }
  uint64_t last = 0;
  for (int i = 0; i < 10000; ++i) {  // an observer never sees the value go back
    uint64_t v = lw__timeline_value(&t);
    cr_assert_geq(v, last);
    last = v;
  }
  for (int i = 0; i < N_SIGNALLERS; ++i) pthread_join(th[i], NULL);
  cr_assert_eq(lw__timeline_value(&t), (uint64_t)(SIGNALS_EACH * N_SIGNALLERS + N_SIGNALLERS - 1));
}

// ---- across processes -------------------------------------------------------------------

static lw_timeline_t *map_shared_timeline(void) {
  void *p = mmap(NULL, sizeof(lw_timeline_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  lw_timeline_t *t = p;
  lw__timeline_initialize(t, 0, LW_TIMELINE_SHARED);
  return t;
}

// The child's exit code says what its wait returned (the lw_status_t value).
static int wait_child(pid_t pid) {
  int wstatus = 0;
  cr_assert_eq(waitpid(pid, &wstatus, 0), pid);
  cr_assert(WIFEXITED(wstatus), "child did not exit normally (status 0x%x)", wstatus);
  return WEXITSTATUS(wstatus);
}

// Tests that fork end by checking they left no child behind.
static void assert_no_children_left(void) {
  cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1);
  cr_assert_eq(errno, ECHILD);
}

Test(timeline, shared_timeline_wakes_a_forked_child_and_back, .timeout = 20) {
  lw_timeline_t *t = map_shared_timeline();
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    lw_status_t st = lw__timeline_wait(t, 1, lw__deadline_after(10LL * 1000 * 1000 * 1000));
    if (st == LW_OK && lw__timeline_signal(t, 2) != LW_OK) st = LW_INTERNAL;
    _exit((int)st);
  }
  // Event, not time: signal only once the child sleeps on the (process-shared) futex.
  while (atomic_load(&t->word.sleepers) == 0) sched_yield();
  cr_assert_eq(lw__timeline_signal(t, 1), LW_OK);
  cr_assert_eq(lw__timeline_wait(t, 2, LW_DEADLINE_NEVER), LW_OK, "the child's signal arrives");
  cr_assert_eq(wait_child(pid), LW_OK);
  munmap(t, sizeof(*t));
  assert_no_children_left();
}

Test(timeline, shared_timeline_failure_reaches_a_forked_child, .timeout = 20) {
  lw_timeline_t *t = map_shared_timeline();
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    _exit((int)lw__timeline_wait(t, 1, lw__deadline_after(10LL * 1000 * 1000 * 1000)));
  }
  while (atomic_load(&t->word.sleepers) == 0) sched_yield();
  lw__timeline_fail(t, LW_CHILD_EXITED);
  cr_assert_eq(wait_child(pid), LW_CHILD_EXITED);
  munmap(t, sizeof(*t));
  assert_no_children_left();
}
