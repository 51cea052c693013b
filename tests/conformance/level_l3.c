// tests/conformance/level_l3.c — the conformance level driver for L3: a worker with one chip
// child on the backend under test. A run is a worker run whose orch function submits the
// run's tasks to chip 0.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "parent/runs.h"
#include "parent/worker_impl.h"
#include "test_util.h"

#define CONF_MAX_TASKS 8

static lw_worker_t *w;
static int fds_before;
static int children_before;

int conf_level(void) { return 3; }

bool conf_level_has_dags(void) { return true; }

void conf_open(void) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.n_subs = 0;
  cfg.arena_bytes = 64ull << 20;
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "%s", conf_backend());
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
}

void conf_close(void) {
  lw_test_procs_t procs;
  lw_test_procs_note(w, &procs);
  lw_worker_destroy(w);
  w = NULL;
  pid_t left = 0;
  cr_expect(lw_test_procs_gone(&procs, &left), "process %d of the worker outlived destroy",
            (int)left);
  cr_expect_eq(lw_test_child_count(), children_before, "a child process was left behind");
  cr_expect_eq(lw_test_fd_count(), fds_before, "an fd was left behind");
}

void *conf_alloc(size_t bytes) {
  void *p = lw_worker_alloc(w, bytes);
  cr_assert_not_null(p, "lw_worker_alloc(%zu): %s", bytes, lw_last_error()->message);
  memset(p, 0, bytes);
  return p;
}

static void copy_error(lw_error_t *err, const lw_error_t *from) {
  if (err && from) *err = *from;
}

lw_status_t conf_register(const lw_callable_t *c, lw_callable_handle_t *out, lw_error_t *err) {
  lw_status_t st = lw_worker_register(w, c, out);
  if (st != LW_OK) copy_error(err, lw_last_error());
  return st;
}

lw_status_t conf_register_async(const lw_callable_t *c, lw_handle_t **out) {
  return lw_worker_register_async(w, c, out);
}

lw_status_t conf_unregister_async(lw_callable_handle_t h, lw_handle_t **out) {
  return lw_worker_unregister_async(w, h, out);
}

// One run's orch function input, and what its submits said.
typedef struct l3_run {
  conf_task_t tasks[CONF_MAX_TASKS];
  int n;
  lw_status_t submit_st;
  lw_error_t submit_err;
  // Set (release) once the submits returned; the orch function never touches the struct
  // after it, so the waiter may free it.
  _Atomic uint32_t submitted;
} l3_run_t;

static lw_status_t l3_orch(lw_orch_t *o, void *user) {
  l3_run_t *r = user;
  lw_status_t st = LW_OK;
  lw_error_t err;
  memset(&err, 0, sizeof(err));
  for (int i = 0; i < r->n && st == LW_OK; ++i) {
    lw_run_config_t cfg;
    lw_run_config_default(&cfg);
    cfg.timeout_ns = r->tasks[i].timeout_ns;
    st = lw_orch_submit_next_level(o, r->tasks[i].callable, &r->tasks[i].args, &cfg, 0);
    if (st != LW_OK) err = *lw_last_error();
  }
  r->submit_st = st;
  r->submit_err = err;
  atomic_store_explicit(&r->submitted, 1, memory_order_release);
  // A refused submit fails the run with its error, as an orch function would.
  return st;
}

static l3_run_t *l3_run_new(const conf_task_t *tasks, int n) {
  cr_assert(n >= 1 && n <= CONF_MAX_TASKS, "conf_run_async: %d tasks", n);
  l3_run_t *r = calloc(1, sizeof(*r));
  cr_assert_not_null(r);
  memcpy(r->tasks, tasks, (size_t)n * sizeof(*tasks));
  r->n = n;
  return r;
}

lw_status_t conf_run_async(const conf_task_t *tasks, int n, lw_handle_t **out, lw_error_t *err) {
  *out = NULL;
  l3_run_t *r = l3_run_new(tasks, n);
  lw_handle_t *h = NULL;
  lw_status_t st = lw_worker_run_async(w, l3_orch, r, &h);
  if (st != LW_OK) {
    copy_error(err, lw_last_error());
    free(r);
    return st;
  }
  // Accepted means submitted: wait for the orch function's submits (earlier orch functions
  // only submit and return, so this is bounded). A handle that finished first never ran its
  // orch function (the run was cancelled before it started).
  while (!atomic_load_explicit(&r->submitted, memory_order_acquire) && !lw_handle_done(h)) {
    lw_test_sleep_us(50);
  }
  if (!atomic_load_explicit(&r->submitted, memory_order_acquire)) {
    st = lw_handle_status(h);
    copy_error(err, lw_handle_error(h));
    lw_handle_release(h);
    free(r);
    return st;
  }
  st = r->submit_st;
  if (st != LW_OK) {
    // Refused at submit: the run fails with that error, and its handle finishes once every
    // earlier run's has; the caller gets no handle, as at L2.
    copy_error(err, &r->submit_err);
    lw_handle_release(h);
    free(r);
    return st;
  }
  free(r);
  *out = h;
  return LW_OK;
}

lw_status_t conf_run(const conf_task_t *task, lw_error_t *err) {
  l3_run_t *r = l3_run_new(task, 1);
  lw_run_report_t rep;
  memset(&rep, 0, sizeof(rep));
  lw_status_t st = lw_worker_run(w, l3_orch, r, &rep);
  if (st != LW_OK) copy_error(err, rep.error.code != LW_OK ? &rep.error : lw_last_error());
  free(r);
  return st;
}

lw_status_t conf_run_timed(const conf_task_t *task, uint64_t *out_kernel_ns, lw_error_t *err) {
  *out_kernel_ns = 0;
  l3_run_t *r = l3_run_new(task, 1);
  lw_handle_t *h = NULL;
  lw_status_t st = lw_worker_run_async(w, l3_orch, r, &h);
  if (st != LW_OK) {
    copy_error(err, lw_last_error());
    free(r);
    return st;
  }
  st = lw_handle_wait(h, LW_WAIT_FOREVER);
  if (st != LW_OK) copy_error(err, lw_handle_error(h));
  lw_task_report_t rep[1];
  size_t n = 0;
  if (lw_handle_run_tasks(h, rep, 1, &n) == LW_OK && n == 1) *out_kernel_ns = rep[0].kernel_ns;
  lw_handle_release(h);
  free(r);  // the orch function returned before the handle finished
  return st;
}

bool conf_run_settled(lw_handle_t *run) {
  // A worker run handle is its lw_run_t (parent/runs.h); settled = every task terminal and
  // the orch function returned, before the handle waits for earlier runs.
  lw_run_t *r = (lw_run_t *)run;
  pthread_mutex_lock(&w->runs.mu);
  bool settled = r->settled;
  pthread_mutex_unlock(&w->runs.mu);
  return settled || lw_handle_done(run);
}

void conf_run_counts(lw_handle_t *run, uint32_t *out_completed, uint32_t *out_failed) {
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  *out_completed = rep.n_completed;
  *out_failed = rep.n_failed;
}

void conf_wait_in_flight(uint32_t n) {
  // A task reserves a ring slot when its submit is accepted and gives it back when it retires.
  for (;;) {
    uint32_t live = (uint32_t)(w->dag.n_tasks_cap - atomic_load(&w->dag.slots_free));
    if (live >= n) return;
    lw_test_sleep_us(100);
  }
}
