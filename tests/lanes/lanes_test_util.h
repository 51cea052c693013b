// tests/lanes/lanes_test_util.h — small helpers shared by the lanes tests.
//
// Criterion assertions must run on the test's main thread, so helper threads record what they
// saw and the main thread asserts afterwards.
#ifndef LANEWORK_TESTS_LANES_TEST_UTIL_H_
#define LANEWORK_TESTS_LANES_TEST_UTIL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "lanes/wait.h"

// A one-shot gate: threads wait until it opens. Built on the waitword under test, so a test
// that hangs here points at lanes/wait.c as much as at the code it tests.
typedef struct test_gate {
  _Atomic uint32_t open;
  lw_waitword_t word;
} test_gate_t;

static inline void test_gate_init(test_gate_t *g) {
  atomic_init(&g->open, 0);
  lw_waitword_initialize(&g->word);
}

static inline bool test_gate_is_open(const void *ctx) {
  const test_gate_t *g = ctx;
  // Acquire: pairs with test_gate_open's release.
  return atomic_load_explicit(&g->open, memory_order_acquire) != 0;
}

static inline void test_gate_open(test_gate_t *g) {
  atomic_store_explicit(&g->open, 1, memory_order_release);
  lw_waitword_wake(&g->word, false);
}

static inline void test_gate_wait(test_gate_t *g) {
  (void)lw_waitword_wait(&g->word, test_gate_is_open, g, LW_DEADLINE_NEVER, false);
}

// Yields until *word != 0 (used to wait for events that have no waitword of their own).
static inline void test_wait_nonzero(const _Atomic uint32_t *word) {
  while (atomic_load_explicit(word, memory_order_acquire) == 0) sched_yield();
}

// True while thread tid of this process exists (used to check a lane joined its thread).
static inline bool test_thread_alive(pid_t tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
  return access(path, F_OK) == 0;
}

#endif  // LANEWORK_TESTS_LANES_TEST_UTIL_H_
