// parent/l4_runs.c — the L4's runs (lanework/l4.h): lw_l4_run_async queues a run and returns its
// handle; the L4's run thread ("lw-l4-run", started by the first run) runs them one at a time in
// submission order, each with state_mu held; lw_l4_run runs its run inline on the caller's
// thread when nothing is queued (after the run in progress; q_busy keeps the order), else it is
// a run_async and a wait. Cancel: a handle's cancel stops its run (or, queued, finishes it
// CANCELLED without running it); lw_l4_cancel stops every run submitted before it, through an
// epoch counter, so it takes no lock and is async-signal-safe.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/handle_impl.h"
#include "lanes/sys.h"
#include "parent/l4_impl.h"

typedef struct l4_op {
  lw_handle_t handle;  // first: the handle's lifetime is the op's
  lw_l4_t *l4;
  lw_l4_orch_fn fn;
  void *user;
  uint64_t epoch;  // cancel_epoch at submit
  lw_run_report_t report;
  struct l4_op *next;
} l4_op_t;

static void op_destroy(lw_handle_t *h) { free(h); }
static const lw_handle_ops_t g_op_ops = {.cancel = NULL, .destroy = op_destroy};

// The L4 whose run this thread is running (its orch function calls the tensor calls with
// state_mu already held by this thread).
static _Thread_local const lw_l4_t *tl_running;

bool lw__l4_state_lock(lw_l4_t *l4) {
  if (tl_running == l4) return false;
  pthread_mutex_lock(&l4->state_mu);
  return true;
}

void lw__l4_state_unlock(lw_l4_t *l4, bool locked) {
  if (locked) pthread_mutex_unlock(&l4->state_mu);
}

static void finish_op(l4_op_t *op, lw_status_t st, const lw_error_t *err) {
  op->report.status = st;
  if (err) op->report.error = *err;
  (void)lw__handle_finish(&op->handle, st, st == LW_OK ? NULL : err);
  lw__handle_unref(&op->handle);  // the producer's reference
}

// Runs op (or finishes it CANCELLED when it was cancelled before it started) on this thread,
// which holds the queue's busy mark (q_busy).
static void run_op(lw_l4_t *l4, l4_op_t *op, bool stopping) {
  lw_error_t err;
  if (stopping || lw__handle_cancel_requested(&op->handle) ||
      atomic_load_explicit(&l4->cancel_epoch, memory_order_relaxed) > op->epoch) {
    lw__error_set(&err, LW_CANCELLED, -1, 0, "l4: run cancelled before it started%s",
                  stopping ? " (the L4 was destroyed)" : "");
    finish_op(op, LW_CANCELLED, &err);
    return;
  }
  pthread_mutex_lock(&l4->state_mu);
  tl_running = l4;
  lw_run_report_t rep;
  lw_status_t st = lw__l4_run_one(l4, op->fn, op->user, op->epoch, &op->handle, &rep);
  tl_running = NULL;
  pthread_mutex_unlock(&l4->state_mu);
  op->report = rep;
  finish_op(op, st, &rep.error);
}

static void *runner_main(void *arg) {
  lw_l4_t *l4 = arg;
  pthread_mutex_lock(&l4->q_mu);
  for (;;) {
    // An inline run (lw_l4_run) may hold the busy mark: the next run waits for it. (q_cv also
    // wakes lw_l4_run callers waiting for the mark; a wake meant for them is checked again.)
    while ((!l4->q_head || l4->q_busy) && !l4->q_stopping) {
      pthread_cond_wait(&l4->q_cv, &l4->q_mu);
    }
    while (l4->q_busy) pthread_cond_wait(&l4->q_cv, &l4->q_mu);  // stopping: let it end
    l4_op_t *op = l4->q_head;
    if (!op) break;  // stopping, nothing queued
    l4->q_head = op->next;
    if (!l4->q_head) l4->q_tail = &l4->q_head;
    bool stopping = l4->q_stopping;
    l4->q_busy = true;
    pthread_mutex_unlock(&l4->q_mu);
    run_op(l4, op, stopping);
    pthread_mutex_lock(&l4->q_mu);
    l4->q_busy = false;
    pthread_cond_broadcast(&l4->q_cv);  // an lw_l4_run waiting to run inline goes on
  }
  pthread_mutex_unlock(&l4->q_mu);
  return NULL;
}

static void runner_wake(void *ctx) {
  lw_l4_t *l4 = ctx;
  pthread_mutex_lock(&l4->q_mu);
  l4->q_stopping = true;
  pthread_cond_broadcast(&l4->q_cv);
  pthread_mutex_unlock(&l4->q_mu);
  // The run in progress stops as a cancelled one (its tasks are cancelled on their ranks).
  atomic_fetch_add_explicit(&l4->cancel_epoch, 1, memory_order_relaxed);
}

lw_status_t lw__l4_runs_initialize(lw_l4_t *l4, lw_error_t *err) {
  l4->q_tail = &l4->q_head;
  if (pthread_mutex_init(&l4->state_mu, NULL) != 0 || pthread_mutex_init(&l4->q_mu, NULL) != 0 ||
      pthread_cond_init(&l4->q_cv, NULL) != 0) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: cannot make its locks");
  }
  return LW_OK;
}

void lw__l4_runs_deinitialize(lw_l4_t *l4) {
  lw__thread_stop(&l4->runner, runner_wake, l4);  // it drains the queue, cancelled, first
  pthread_cond_destroy(&l4->q_cv);
  pthread_mutex_destroy(&l4->q_mu);
  pthread_mutex_destroy(&l4->state_mu);
}

static l4_op_t *op_new(lw_l4_t *l4, lw_l4_orch_fn fn, void *user) {
  l4_op_t *op = calloc(1, sizeof(*op));
  if (!op) return NULL;
  lw__handle_initialize(&op->handle, LW_HANDLE_L4_RUN, &g_op_ops);
  op->l4 = l4;
  op->fn = fn;
  op->user = user;
  op->epoch = atomic_load_explicit(&l4->cancel_epoch, memory_order_relaxed);
  return op;
}

// lw_l4_run's fast path, as lw_worker_run's at L3: when nothing is queued the run is run right
// here on the caller's thread, after the run in progress if there is one (no hand-off to the
// runner, no wake of the caller afterwards; the order is the same). Returns op's handle
// (finished) then, or NULL having done nothing when runs are queued (the caller queues too).
static lw_handle_t *try_inline(lw_l4_t *l4, lw_l4_orch_fn fn, void *user) {
  pthread_mutex_lock(&l4->q_mu);
  while (l4->q_busy && !l4->q_head && !l4->q_stopping) pthread_cond_wait(&l4->q_cv, &l4->q_mu);
  bool mine = !l4->q_head && !l4->q_busy && !l4->q_stopping;
  if (mine) l4->q_busy = true;
  pthread_mutex_unlock(&l4->q_mu);
  if (!mine) return NULL;
  l4_op_t *op = op_new(l4, fn, user);
  if (op) run_op(l4, op, false);
  pthread_mutex_lock(&l4->q_mu);
  l4->q_busy = false;
  if (l4->q_head || l4->q_stopping) pthread_cond_broadcast(&l4->q_cv);  // the runner's turn
  pthread_mutex_unlock(&l4->q_mu);
  return op ? &op->handle : NULL;
}

lw_status_t lw_l4_run_async(lw_l4_t *l4, lw_l4_orch_fn fn, void *user, lw_handle_t **out) {
  if (!out) return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_run_async: out is NULL");
  *out = NULL;
  if (!l4 || !fn) return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_run_async: l4 or fn is NULL");
  if (l4->rank != 0) {
    return lw__fail(LW_FAILED_PRECONDITION, "lw_l4_run_async: rank 0 only (this is rank %d)",
                    (int)l4->rank);
  }
  l4_op_t *op = op_new(l4, fn, user);
  if (!op) return lw__fail(LW_RESOURCE_EXHAUSTED, "lw_l4_run_async: out of memory");
  lw_error_t err;
  pthread_mutex_lock(&l4->q_mu);
  lw_status_t st = LW_OK;
  if (l4->q_stopping) {
    st = lw__error_set(&err, LW_UNAVAILABLE, -1, 0, "lw_l4_run_async: the L4 is being destroyed");
  } else if (!l4->runner.started) {
    st = lw__thread_start(&l4->runner, "lw-l4-run", "L4 run", runner_main, l4, &err);
  }
  if (st == LW_OK) {
    *l4->q_tail = op;
    l4->q_tail = &op->next;
    pthread_cond_broadcast(&l4->q_cv);  // the runner (lw_l4_run callers share the condvar)
  }
  pthread_mutex_unlock(&l4->q_mu);
  if (st != LW_OK) {
    free(op);
    return lw__last_error_store(&err);
  }
  *out = &op->handle;
  return LW_OK;
}

lw_status_t lw_l4_run(lw_l4_t *l4, lw_l4_orch_fn fn, void *user, lw_run_report_t *out) {
  if (l4 && tl_running == l4) {
    return lw__fail(LW_FAILED_PRECONDITION,
                    "lw_l4_run: called from an L4 orch function (it would wait for itself; "
                    "lw_l4_run_async queues a run after this one)");
  }
  lw_handle_t *h = l4 && fn && l4->rank == 0 ? try_inline(l4, fn, user) : NULL;
  if (!h) LW_RETURN_IF_ERROR(lw_l4_run_async(l4, fn, user, &h));
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);  // the error goes to the last error
  if (out) (void)lw_l4_handle_report(h, out);
  lw_handle_release(h);
  return st;
}

lw_status_t lw_l4_handle_report(const lw_handle_t *h, lw_run_report_t *out) {
  if (!h || !out || h->kind != LW_HANDLE_L4_RUN) {
    return lw__fail(LW_INVALID_ARGUMENT,
                    "lw_l4_handle_report: not an L4 run handle (lw_l4_run_async), or out NULL");
  }
  if (!lw_handle_done(h)) {
    return lw__fail(LW_FAILED_PRECONDITION, "lw_l4_handle_report: the run has not finished");
  }
  *out = ((const l4_op_t *)h)->report;
  return LW_OK;
}

void lw_l4_cancel(lw_l4_t *l4) {
  if (l4) atomic_fetch_add_explicit(&l4->cancel_epoch, 1, memory_order_relaxed);
}
