// tests/parent/worker_test_util.h — the worker fixture of the tests in tests/parent/ that run
// a whole L3 worker: one worker per test (`w`), created with wt_create and destroyed with
// destroy_and_check, which also checks that no child process and no fd was left behind; kernel
// registration; and the event log the record kernel writes (tests/kernels/record.c), with the
// gate and latch words of tests/kernels/gate.c and latch.c, all in the worker's arena so the
// chip children write them. Include once per test file.
#ifndef LANEWORK_TESTS_PARENT_WORKER_TEST_UTIL_H_
#define LANEWORK_TESTS_PARENT_WORKER_TEST_UTIL_H_

#include <stdatomic.h>
#include <string.h>

#include "lanework/worker.h"
#include "test_util.h"

static lw_worker_t *w;
static int fds_before;
static int children_before;

// A worker config for tests: chips, subs and a 64 MiB arena; the rest as lanework's defaults.
static inline void wt_config(lw_worker_config_t *cfg, uint32_t chips, uint32_t subs) {
  lw_worker_config_default(cfg);
  cfg->n_chips = chips;
  cfg->n_subs = subs;
  cfg->arena_bytes = 64ull << 20;
}

// Counts fds and children first, so destroy_and_check can tell what the worker left behind.
static inline void wt_create(const lw_worker_config_t *cfg) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  LW_ASSERT_OK(lw_worker_create(cfg, &w));
}

static inline void make_worker(uint32_t chips, uint32_t subs) {
  lw_worker_config_t cfg;
  wt_config(&cfg, chips, subs);
  wt_create(&cfg);
}

static inline void destroy_and_check(void) {
  lw_test_procs_t procs;
  lw_test_procs_note(w, &procs);
  cr_expect_gt(procs.n, 0, "the worker names no process of its own");
  lw_worker_destroy(w);
  w = NULL;
  pid_t left = 0;
  cr_expect(lw_test_procs_gone(&procs, &left), "process %d of the worker outlived destroy",
            (int)left);
  cr_expect_eq(lw_test_child_count(), children_before, "a child process was left behind");
  cr_expect_eq(lw_test_fd_count(), fds_before, "an fd was left behind");
}

// Registers the test or example kernel `name` on every chip of w.
static inline lw_callable_handle_t wreg(const char *name) {
  lw_callable_t c = lw_test_kernel(name);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(w, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

typedef struct shared_state {
  _Atomic uint32_t gate;
  _Atomic uint32_t entered;
  _Atomic uint32_t latch;
  _Atomic uint32_t latch_entered;
  int64_t log[256];  // record kernel: log[0] = count, log[1 + i] = the i-th value
} shared_state_t;

static inline shared_state_t *new_shared(void) {
  shared_state_t *s = lw_worker_alloc(w, sizeof(shared_state_t));
  cr_assert_not_null(s);
  memset(s, 0, sizeof(*s));
  return s;
}

static inline int64_t log_count(const shared_state_t *s) {
  return atomic_load((_Atomic int64_t *)&s->log[0]);
}

// The position of value in the log, or -1. The record kernel claims its slot, then writes the
// value: a slot still 0 is not yet written.
static inline int log_pos(const shared_state_t *s, int64_t value) {
  int64_t n = log_count(s);
  for (int64_t i = 0; i < n && i < 255; ++i) {
    if (atomic_load((_Atomic int64_t *)&s->log[1 + i]) == value) return (int)i;
  }
  return -1;
}

// Waits until the record kernel logged value (bounded by the test's .timeout).
static inline void wait_logged(const shared_state_t *s, int64_t value) {
  while (log_pos(s, value) < 0) lw_test_sleep_us(100);
}

#endif  // LANEWORK_TESTS_PARENT_WORKER_TEST_UTIL_H_
