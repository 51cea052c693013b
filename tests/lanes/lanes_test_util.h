// tests/lanes/lanes_test_util.h — small helpers shared by the lanes tests.
//
// Criterion assertions must run on the test's main thread, so helper threads record what they
// saw and the main thread asserts afterwards.
#ifndef LANEWORK_TESTS_LANES_TEST_UTIL_H_
#define LANEWORK_TESTS_LANES_TEST_UTIL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
  lw__waitword_initialize(&g->word);
}

static inline bool test_gate_is_open(const void *ctx) {
  const test_gate_t *g = ctx;
  // Acquire: pairs with test_gate_open's release.
  return atomic_load_explicit(&g->open, memory_order_acquire) != 0;
}

static inline void test_gate_open(test_gate_t *g) {
  atomic_store_explicit(&g->open, 1, memory_order_release);
  lw__waitword_wake(&g->word, false);
}

static inline void test_gate_wait(test_gate_t *g) {
  (void)lw__waitword_wait(&g->word, test_gate_is_open, g, LW_DEADLINE_NEVER, false);
}

// Yields until *word != 0 (used to wait for events that have no waitword of their own).
static inline void test_wait_nonzero(const _Atomic uint32_t *word) {
  while (atomic_load_explicit(word, memory_order_acquire) == 0) sched_yield();
}

// Sets *flag to 1 when the calling thread exits, from a thread-specific-data destructor.
// glibc runs those destructors on the exiting thread before it terminates, and pthread_join
// returns only after that, so "joined" implies "flag set" with no race. (/proc/self/task/<tid>
// is not such a proof: the kernel removes it a little after the join has returned.)
static pthread_key_t test_exit_key;
static pthread_once_t test_exit_key_once = PTHREAD_ONCE_INIT;

static inline void test_exit_flag_set(void *flag) {
  // Release: pairs with the acquire load of whoever checks the flag after the join.
  atomic_store_explicit((_Atomic uint32_t *)flag, 1, memory_order_release);
}

static inline void test_exit_key_create(void) {
  if (pthread_key_create(&test_exit_key, test_exit_flag_set) != 0) abort();
}

// Arms *flag for the calling thread (call it on the thread to watch; again is harmless).
static inline void test_exit_flag_arm(_Atomic uint32_t *flag) {
  pthread_once(&test_exit_key_once, test_exit_key_create);
  if (pthread_setspecific(test_exit_key, (void *)flag) != 0) abort();
}

static inline bool test_exit_flag_is_set(const _Atomic uint32_t *flag) {
  return atomic_load_explicit(flag, memory_order_acquire) != 0;
}

#endif  // LANEWORK_TESTS_LANES_TEST_UTIL_H_
