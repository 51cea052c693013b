// parent/runs.c — runs: run handles and their reports, the FIFO run queue, the list of
// unfinished runs whose handles finish in submission order, and the orchestrator thread that
// calls orch functions (or a sync lw_worker_run inline); contract in parent/runs.h.
#include "parent/runs.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/log.h"
#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "parent/callables.h"
#include "parent/dag.h"
#include "parent/orch_guard.h"
#include "parent/task_reports.h"
#include "parent/thread.h"

// ---------------------------------------------------------------------------------------------
// Lifecycle

void lw__runs_initialize(lw_runs_t *runs, const lw_runs_links_t *links) {
  memset(runs, 0, sizeof(*runs));
  pthread_mutex_init(&runs->mu, NULL);
  // Monotonic: deadlines come from lw__now_ns, and a wall-clock step must not move a wait.
  lw__cond_init_monotonic(&runs->cv);
  runs->links = *links;
  runs->initialized = true;
}

void lw__runs_wait_no_waiters(lw_runs_t *runs) {
  while (atomic_load(&runs->waiters) != 0) sched_yield();
}

void lw__runs_deinitialize(lw_runs_t *runs) {
  if (!runs->initialized) return;
  pthread_mutex_destroy(&runs->mu);
  pthread_cond_destroy(&runs->cv);
  runs->initialized = false;
}

// ---------------------------------------------------------------------------------------------
// Runs

static lw_status_t run_cancel(lw_handle_t *h) {
  lw_run_t *run = (lw_run_t *)h;
  // The flag (set by lw_handle_cancel before this call) is read by the orchestrator before it
  // starts the run and by the DAG's owner, which sweeps the run's queued tasks out at once.
  lw__dag_note_stop(run->runs->links.dag);
  return LW_OK;
}

static void run_destroy(lw_handle_t *h) {
  lw__task_reports_free((lw_run_t *)h);
  free(h);
}

#define RUN_GATE_CLOSED 0x80000000u

// lw_handle_wait's assist: the waiter drains the children's rings while it spins (the
// before_wait hook), so the run's last completion need not wake the scheduler and then the
// scheduler this thread. True when it spun (the wait then blocks without a second spin). Only
// through the open gate (lw_run_t.wait_gate): once the run's handle finished, the worker may be
// destroyed under this thread, and only run memory (the caller's reference) may be touched.
static bool run_wait_assist(lw_handle_t *h, int64_t deadline_ns, int64_t budget_ns) {
  lw_run_t *run = (lw_run_t *)h;
  // seq_cst: pairs with the finish's closing exchange (either it sees this count and waits for
  // it, or this sees the gate closed).
  if (atomic_fetch_add(&run->wait_gate, 1) & RUN_GATE_CLOSED) {
    atomic_fetch_sub(&run->wait_gate, 1);
    return false;
  }
  lw_runs_t *runs = run->runs;
  atomic_fetch_add(&runs->waiters, 1);
  atomic_fetch_sub(&run->wait_gate, 1);
  bool spun = runs->links.before_wait &&
              runs->links.before_wait(runs->links.ctx, h, deadline_ns, budget_ns);
  atomic_fetch_sub(&runs->waiters, 1);
  return spun;
}

// Closes the gate after the handle finished: a waiter caught between its count and joining
// runs->waiters holds the gate for two atomic operations, never across a drain.
static void run_close_wait_gate(lw_run_t *run) {
  uint32_t g = atomic_fetch_or(&run->wait_gate, RUN_GATE_CLOSED);
  while ((g & ~RUN_GATE_CLOSED) != 0) {
    sched_yield();
    g = atomic_load(&run->wait_gate);
  }
}

static const lw_handle_ops_t run_ops = {
    .cancel = run_cancel, .destroy = run_destroy, .wait_assist = run_wait_assist};

// Builds the report of a run that just settled (its last task ended now), before its handle
// may have to wait for earlier runs: wall_ns stays the run's own time.
static void run_build_report(lw_run_t *run) {
  lw_run_report_t *r = &run->report;
  memset(r, 0, sizeof(*r));
  r->n_tasks = run->n_tasks;
  r->n_completed = run->n_completed;
  r->n_failed = run->n_failed;
  r->wall_ns = run->t_start ? (uint64_t)(lw__now_ns() - run->t_start) : 0;
  r->status = run->failed ? run->error.code : (run->cancelled ? LW_CANCELLED : LW_OK);
  if (run->failed) {
    r->error = run->error;
  } else if (run->cancelled) {
    lw__error_set(&r->error, LW_CANCELLED, -1, 0, "run %llu cancelled",
                  (unsigned long long)run->run_id);
  } else {
    lw__error_clear(&r->error);
  }
  run->handle.timing.host_wall_ns = r->wall_ns;
}

// Finishes the handle of a settled run whose predecessors' handles all finished (no lock
// held).
static void run_finish_handle(lw_run_t *run) {
  lw_runs_t *runs = run->runs;
  lw_run_report_t *r = &run->report;
  // Counted before the handle finishes, so a caller that waited for it sees the count.
  atomic_fetch_add_explicit(r->status == LW_OK          ? &runs->n_ok
                            : r->status == LW_CANCELLED ? &runs->n_cancelled
                                                        : &runs->n_failed,
                            1, memory_order_relaxed);
  (void)lw__handle_finish(&run->handle, r->status, r->status == LW_OK ? NULL : &r->error);
  run_close_wait_gate(run);
  if (runs->links.live) runs->links.live(runs->links.ctx, -1);
  lw__handle_unref(&run->handle);
}

// Every run gets its id and its place in the unfinished list together (runs->mu held), so
// the list is in id order, which is submission order.
static void run_take_id(lw_runs_t *runs, lw_run_t *run) {
  run->run_id = ++runs->next_id;
  run->next_unfinished = NULL;
  if (runs->unfinished_tail) {
    runs->unfinished_tail->next_unfinished = run;
  } else {
    runs->unfinished_head = run;
  }
  runs->unfinished_tail = run;
}

void lw__run_complete(lw_run_t *run) {
  lw_runs_t *runs = run->runs;
  // Run handles finish in submission order, so a sync lw_worker_run (which waits for its own
  // handle) never returns before an earlier run_async handle has finished. One thread at a
  // time finishes handles from the head of the list; a run settling while another thread does
  // so is left to that thread, which looks at the head again after each handle.
  run_build_report(run);
  pthread_mutex_lock(&runs->mu);
  run->settled = true;
  if (runs->finishing) {
    pthread_mutex_unlock(&runs->mu);
    return;
  }
  runs->finishing = true;
  while (runs->unfinished_head && runs->unfinished_head->settled) {
    lw_run_t *r = runs->unfinished_head;
    runs->unfinished_head = r->next_unfinished;
    if (!runs->unfinished_head) runs->unfinished_tail = NULL;
    pthread_mutex_unlock(&runs->mu);
    run_finish_handle(r);  // may free r
    pthread_mutex_lock(&runs->mu);
  }
  runs->finishing = false;
  pthread_mutex_unlock(&runs->mu);
}

lw_status_t lw_handle_run_report(const lw_handle_t *h, lw_run_report_t *out) {
  if (!h || !out) return lw__fail(LW_INVALID_ARGUMENT, "handle_run_report: handle and out must be set");
  if (h->kind != LW_HANDLE_WORKER_RUN) {
    return lw__fail(LW_INVALID_ARGUMENT, "handle_run_report: not a worker run handle");
  }
  if (!lw_handle_done(h)) {
    return lw__fail(LW_FAILED_PRECONDITION, "handle_run_report: the run is still going");
  }
  *out = ((const lw_run_t *)h)->report;
  return LW_OK;
}

static lw_status_t run_create(lw_runs_t *runs, lw_orch_fn fn, void *user, lw_run_t **out,
                              lw_error_t *err) {
  *out = NULL;
  if (!runs || !fn) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "worker_run: worker and orch function must be set");
  }
  if (atomic_load(runs->links.stopping)) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "worker: shutting down");
  }
  lw_run_t *run = calloc(1, sizeof(*run));
  if (!run) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_run: out of memory");
  lw__handle_initialize(&run->handle, LW_HANDLE_WORKER_RUN, &run_ops);
  if (runs->links.notify) lw__handle_set_notify(&run->handle, runs->links.notify, runs->links.ctx);
  run->runs = runs;
  run->fn = fn;
  run->user = user;
  lw__error_clear(&run->error);
  if (runs->links.live) runs->links.live(runs->links.ctx, +1);
  *out = run;
  return LW_OK;
}

static void run_enqueue(lw_runs_t *runs, lw_run_t *run) {
  pthread_mutex_lock(&runs->mu);
  run_take_id(runs, run);
  if (runs->q_tail) {
    runs->q_tail->next = run;
  } else {
    runs->q_head = run;
  }
  runs->q_tail = run;
  atomic_fetch_add_explicit(&runs->n_queued, 1, memory_order_relaxed);
  pthread_cond_broadcast(&runs->cv);
  pthread_mutex_unlock(&runs->mu);
}

// Whether this thread holds w's orchestrator token: it runs an orch function of w further up
// its stack, or it did and that function never returned (one relaxed load: only this thread
// stores its own id there, and clears it before it moves on).
static bool token_is_mine(const lw_runs_t *runs) {
  return runs && atomic_load_explicit(&runs->orch_holder, memory_order_relaxed) ==
                  (uintptr_t)pthread_self();
}

static lw_status_t check_own_token(lw_runs_t *runs, bool sync, lw_error_t *err);

lw_status_t lw__runs_start(lw_runs_t *runs, lw_orch_fn fn, void *user, bool sync,
                           lw_handle_t **out, lw_error_t *err) {
  *out = NULL;
  if (token_is_mine(runs)) LW_RETURN_IF_ERROR(check_own_token(runs, sync, err));
  lw_run_t *run = NULL;
  LW_RETURN_IF_ERROR(run_create(runs, fn, user, &run, err));
  if (!sync || !lw__orch_try_inline(runs, run)) run_enqueue(runs, run);
  *out = &run->handle;
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// The orchestrator thread

static void run_not_started(lw_run_t *run, const char *why) {
  run->cancelled = true;
  run->orch_done = true;
  lw__error_set(&run->error, LW_CANCELLED, -1, 0, "run %llu %s", (unsigned long long)run->run_id,
                why);
  lw__run_complete(run);
}

void lw__run_orch_drainer_take(lw_runs_t *runs) {
  if (!runs->links.drainer_enter) return;
  runs->links.drainer_enter(runs->links.ctx);
  runs->orch_draining = true;
}

bool lw__run_orch_drainer_drop(lw_runs_t *runs) {
  if (!runs->orch_draining) return false;
  runs->orch_draining = false;
  runs->links.drainer_leave(runs->links.ctx);
  return true;
}

// Calls the run's orch function and settles the run. Whoever holds the orchestrator token
// (runs->orch_busy) calls this: the orchestrator thread, or a sync lw_worker_run inline.
static void execute_run(lw_runs_t *runs, lw_run_t *run) {
  if (atomic_load(runs->links.stopping)) {
    run_not_started(run, "cancelled: the worker was destroyed before it started");
    return;
  }
  if (lw__handle_cancel_requested(&run->handle)) {
    run_not_started(run, "cancelled before it started");
    return;
  }
  lw_dag_cmd_t *done = lw__dag_cmd_new(LW_DAG_CMD_ORCH_DONE, run, 0);
  if (!done) {
    // Nothing of the run reached the DAG yet: it ends here, failed, without running.
    run->orch_done = true;
    run->failed = true;
    lw__error_set(&run->error, LW_RESOURCE_EXHAUSTED, -1, 0,
                  "run %llu: out of memory before its orch function ran",
                  (unsigned long long)run->run_id);
    lw__run_complete(run);
    return;
  }
  lw_orch_t o = {runs, run, 0, 0, 0};
  run->t_start = lw__now_ns();
  atomic_fetch_add_explicit(&runs->n_started, 1, memory_order_relaxed);  // a counter only
  // The token holder's own fields: should the function never return (a longjmp), whoever
  // finds its frame gone posts `done` (orch_frame_gone).
  runs->orch_done = done;
  lw__orch_call_t call = {.fn = run->fn, .o = &o, .user = run->user};
  // The function's thread drains the rings in a pass after each submit: the scheduler need
  // not spin beside it, nor the children ring it (lw__sched_drainer_enter).
  lw__run_orch_drainer_take(runs);
  lw__orch_call_guarded(&call, &runs->orch_frame);
  (void)lw__run_orch_drainer_drop(runs);
  runs->orch_done = NULL;
  // Before `done`: an unregister waiting on the pins proceeds.
  lw__wc_credit_return_all(runs->links.calls);
  lw_status_t st = call.threw ? LW_FAILED_PRECONDITION : call.status;
  if (lw__trace_on()) {
    lw__trace_span(LW_TRACE_ORCH, run->t_start, lw__now_ns(), run->run_id, 0, -1, st, "orch");
  }
  lw_error_t last = *lw_last_error();
  // The run's end goes to the DAG's owner behind every task the function submitted (the
  // inbox keeps order): it clears the tensor map, records an orch error as the run's failure
  // (first error wins; the run stops, what is in flight is cancelled) and settles the run once
  // its last task is terminal.
  done->status = st;
  if (call.threw) {
    // Caught by the guard: the run fails as if the function had returned an error.
    lw__error_set(&done->error, st, -1, 0,
                  "run %llu: its orch function threw %s%s%s; exceptions must not leave an orch "
                  "function (docs/api.md, \"Exceptions and longjmp\")",
                  (unsigned long long)run->run_id,
                  call.exception_type[0] ? "a C++ exception (" : "an exception",
                  call.exception_type, call.exception_type[0] ? ")" : "");
  } else if (st != LW_OK) {
    lw__error_set(&done->error, st, last.worker_id, last.task_id,
                  "run %llu: orch function returned %s: %s", (unsigned long long)run->run_id,
                  lw_status_name(st), last.code == st ? last.message : "");
  }
  lw__dag_post(runs->links.dag, done, 0);
}

// Takes the token for run (runs->mu held) on this thread.
static void take_token(lw_runs_t *runs, lw_run_t *run, bool inline_run) {
  runs->orch_busy = true;
  runs->orch_run = run;
  runs->orch_inline = inline_run;
  runs->orch_done = NULL;
  runs->orch_frame = 0;
  atomic_store_explicit(&runs->orch_holder, (uintptr_t)pthread_self(), memory_order_relaxed);
}

static void release_token(lw_runs_t *runs) {
  pthread_mutex_lock(&runs->mu);
  runs->orch_busy = false;
  runs->orch_run = NULL;
  runs->orch_done = NULL;
  runs->orch_frame = 0;
  atomic_store_explicit(&runs->orch_holder, 0, memory_order_relaxed);
  // Wake the orchestrator only when a run waits for the token (or destroy waits for it):
  // waking it after every inline run would cost a futex round trip per run for nothing.
  if (runs->q_head || atomic_load(runs->links.stopping)) pthread_cond_broadcast(&runs->cv);
  pthread_mutex_unlock(&runs->mu);
}

typedef struct orch_drain {
  lw_runs_t *runs;
  lw_handle_t *h;
} orch_drain_t;

// The drain's condition: the run ended, or another run waits for the orchestrator.
static bool run_over_or_queued(void *ctx) {
  orch_drain_t *d = ctx;
  return lw_handle_done(d->h) ||
         atomic_load_explicit(&d->runs->n_queued, memory_order_relaxed) > 0 ||
         atomic_load(d->runs->links.stopping);
}

// After an async run's orch function returned, the orchestrator has nothing to do until the
// next run: it drains the children's rings itself while the run's tasks finish, as a sync
// caller does before it waits (lw__sched_drain_until: within the spin budget, then it gives
// up), so the run's end does not wait for the scheduler to be woken. It stops as soon as a run
// is queued. The caller holds a reference on the handle.
static void orch_drain(lw_runs_t *runs, lw_run_t *run) {
  if (!runs->links.drain_until) return;
  orch_drain_t d = {runs, &run->handle};
  (void)runs->links.drain_until(runs->links.ctx, run_over_or_queued, &d);
}

// Spins for the next run before the orchestrator blocks on its condvar (lanes/spin.h): runs
// that come one after another are taken without a futex wake each. n_queued is a hint read
// without the lock; the wait below decides under it.
static void orch_spin(lw_runs_t *runs) {
  lw__spin_t spin = LW__SPIN_INIT;
  while (atomic_load_explicit(&runs->n_queued, memory_order_relaxed) == 0 &&
         !atomic_load(runs->links.stopping)) {
    if (lw__spin_step(&spin) == LW__SPIN_BLOCK) return;
  }
}

static void *orch_main(void *arg) {
  lw_runs_t *runs = arg;
  lw__trace_role("orchestrator", -1);
  for (;;) {
    orch_spin(runs);
    pthread_mutex_lock(&runs->mu);
    // The token keeps one orch function at a time: an inline sync run may hold it.
    while ((!runs->q_head || runs->orch_busy) &&
           !(atomic_load(runs->links.stopping) && !runs->orch_busy)) {
      pthread_cond_wait(&runs->cv, &runs->mu);
    }
    lw_run_t *run = runs->q_head;
    if (run) {
      runs->q_head = run->next;
      if (!runs->q_head) runs->q_tail = NULL;
      run->next = NULL;
      atomic_fetch_sub_explicit(&runs->n_queued, 1, memory_order_relaxed);
      take_token(runs, run, false);
    }
    pthread_mutex_unlock(&runs->mu);
    if (!run) break;
    lw__handle_ref(&run->handle);  // the drain reads it after the user may have released it
    execute_run(runs, run);
    release_token(runs);
    orch_drain(runs, run);
    lw__handle_unref(&run->handle);
  }
  return NULL;
}

// lw_worker_run's fast path: when no earlier run is queued or running, the orch function runs
// right here on the caller's thread (no hand-off to the orchestrator thread). FIFO order
// holds: the token is taken under the run-queue lock, only when the queue is empty. Returns
// false (nothing done) otherwise.
bool lw__orch_try_inline(lw_runs_t *runs, lw_run_t *run) {
  pthread_mutex_lock(&runs->mu);
  bool mine = !runs->q_head && !runs->orch_busy && !atomic_load(runs->links.stopping);
  if (mine) {
    take_token(runs, run, true);
    run_take_id(runs, run);
  }
  pthread_mutex_unlock(&runs->mu);
  if (!mine) return false;
  execute_run(runs, run);
  release_token(runs);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Orch functions that did not return
//
// A C++ exception never leaves the guard (execute_run fails the run with it). A longjmp out of
// an inline orch function skips every frame up to the program's setjmp: the function's run
// never ends, and this thread keeps the token, so every later run would wait behind it. The
// thread's next run or run_async on the worker (or destroy) finds the token still its own;
// the guard frame then tells whether the call comes from inside the function (the frame is
// still below) or after a longjmp (it is gone).

// The orch function of the token's run will never return: its run ends as if the function had
// returned FAILED_PRECONDITION (what it submitted is stopped, each task ends once), the
// token is given back, and the reference of the lw_worker_run whose frame went with it is
// dropped. The caller holds no lock.
static void orch_frame_gone(lw_runs_t *runs) {
  pthread_mutex_lock(&runs->mu);
  lw_run_t *run = runs->orch_run;
  lw_dag_cmd_t *done = runs->orch_done;
  runs->orch_done = NULL;
  pthread_mutex_unlock(&runs->mu);
  // The function's credit: this thread holds the token.
  lw__wc_credit_return_all(runs->links.calls);
  (void)lw__run_orch_drainer_drop(runs);  // its drainer role went with the frame too
  if (done) {
    done->status = LW_FAILED_PRECONDITION;
    lw__error_set(&done->error, LW_FAILED_PRECONDITION, -1, 0,
                  "run %llu: its orch function never returned (a longjmp out of it?); the run "
                  "was stopped (docs/api.md, \"Exceptions and longjmp\")",
                  (unsigned long long)run->run_id);
    lw__dag_post(runs->links.dag, done, 0);
  }
  release_token(runs);
  lw__handle_unref(&run->handle);
}

// A run or run_async on a thread that holds w's token itself (token_is_mine). On the
// orchestrator thread, or with the inline guard frame still below, the call comes from inside
// the orch function: a sync run would wait for itself and is refused; run_async queues as
// usual. With the frame gone, the function was left by a longjmp: its run is ended, the token
// given back, and this call fails saying so (the next one runs). When the frame cannot be
// found either way (orch_guard.h), a sync run is refused as well (it would wait forever in
// both cases); run_async queues.
static lw_status_t check_own_token(lw_runs_t *runs, bool sync, lw_error_t *err) {
  pthread_mutex_lock(&runs->mu);
  bool inline_run = runs->orch_inline;
  uint64_t run_id = runs->orch_run ? runs->orch_run->run_id : 0;
  pthread_mutex_unlock(&runs->mu);
  const char *what = sync ? "worker_run" : "worker_run_async";
  lw__orch_frame_state_t frame =
      inline_run ? lw__orch_frame_state(runs->orch_frame) : LW__ORCH_FRAME_LIVE;
  if (frame == LW__ORCH_FRAME_GONE) {
    orch_frame_gone(runs);
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "%s: the orch function of run %llu, called on this thread, never "
                         "returned (a longjmp out of it?); that run was stopped, so nothing was "
                         "run now (docs/api.md, \"Exceptions and longjmp\")",
                         what, (unsigned long long)run_id);
  }
  if (!sync) return LW_OK;
  if (frame == LW__ORCH_FRAME_LIVE) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "worker_run: called from inside the orch function of run %llu on the "
                         "same worker, it would wait for itself; submit the tasks from that orch "
                         "function, or use lw_worker_run_async",
                         (unsigned long long)run_id);
  }
  return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                       "worker_run: the orch function of run %llu, called on this thread, has "
                       "not returned: this call comes from inside it or after a longjmp out of "
                       "it, and lanework cannot tell which here (docs/api.md, \"Exceptions and "
                       "longjmp\")",
                       (unsigned long long)run_id);
}

lw_status_t lw__orch_start(lw_runs_t *runs, lw_error_t *err) {
  return lw__thread_start(&runs->orch, "lw-orch", "orchestrator", orch_main, runs, err);
}

// Wakes the orchestrator to see `stopping` (set by destroy before lw__orch_stop).
static void orch_wake(void *ctx) {
  lw_runs_t *runs = ctx;
  pthread_mutex_lock(&runs->mu);
  pthread_cond_broadcast(&runs->cv);
  pthread_mutex_unlock(&runs->mu);
}

void lw__orch_stop(lw_runs_t *runs) {
  if (!runs->orch.started) return;
  // Destroy runs alone on the worker, so an inline orch function that still holds the token
  // was left without returning: on another thread, or on this one with its frame gone (a
  // destroy from inside the function itself cannot work either way; only a frame seen live
  // is left alone).
  pthread_mutex_lock(&runs->mu);
  bool left = runs->orch_busy && runs->orch_inline;
  uint64_t run_id = left ? runs->orch_run->run_id : 0;
  pthread_mutex_unlock(&runs->mu);
  if (left && (!token_is_mine(runs) ||
               lw__orch_frame_state(runs->orch_frame) != LW__ORCH_FRAME_LIVE)) {
    lw__log(LW_LOG_WARN,
            "worker_destroy: the orch function of run %llu never returned (a longjmp out of "
            "it?); the run ends FAILED_PRECONDITION (docs/api.md, \"Exceptions and longjmp\")",
            (unsigned long long)run_id);
    orch_frame_gone(runs);
  }
  lw__thread_stop(&runs->orch, orch_wake, runs);
}
