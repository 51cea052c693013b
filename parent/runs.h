// parent/runs.h — runs and the orchestrator (parent/runs.c).
// Owns: run objects (lw_run_t: the handle, its counters, its first error, its report); the
// run queue (runs->q_head/tail, run_cv), run ids (runs->next_id) and the list of unfinished
// runs (runs->unfinished_head/tail, finishing_runs), all under runs->mu; the orchestrator
// thread (runs->orch, parent/thread.h) and the token that keeps one orch function at a time
// (runs->orch_busy, under runs->mu). Between runs the orchestrator drains the children's rings
// while its last async run's tasks finish (the drain_until hook, until a run is queued), then
// spins for the next run (lanes/spin.h; n_queued is its hint), then blocks on cv.
// A run: lw_worker_run(_async) creates it (the worker counts it live through the live hook) -> it
// gets its id as it is queued, or as a sync run takes the token inline (lw__orch_try_inline) -> its
// orch function runs with the token -> settled once every task is terminal and the function
// returned (lw__run_complete) -> its handle finishes once every earlier run's has (run-id
// order) -> live_runs drops and idle_cv is broadcast.
// Lifecycle: lw__runs_initialize (lw_worker_create: the lock, the condvar, the scheduler's
// hooks) -> lw__orch_start -> lw__orch_stop (lw_worker_destroy, after `stopping` is set: runs
// still queued finish CANCELLED without running, then the thread is joined) ->
// lw__runs_deinitialize (once no thread of the worker is left).
// Orch functions that do not return (docs/api.md, "Exceptions and longjmp"): every orch
// function is called through one guard frame (parent/orch_guard.h). A C++ exception stops
// there and fails the run like an error status. A longjmp out of an inline one cannot be
// stopped: the token stays with the thread, and the next lw_worker_run / run_async on that
// thread, or lw_worker_destroy, finds the guard frame gone, ends the run failed and gives the
// token back (the call that found it fails FAILED_PRECONDITION saying so). The same check
// refuses an lw_worker_run made from inside an orch function of the same worker, which would
// wait for itself.
// Threads: the counters and the error of a run (n_tasks, n_terminal, failed, cancelled, ...)
// are the DAG owner's (parent/dag.h); a submitter reads only failed_pub. settled and
// next_unfinished are under runs->mu; the report is written by the thread that settles the
// run, before its handle may finish. The token holder hands the run's end to the DAG (an
// ORCH_DONE command behind the run's submits); cancelling a run handle (any thread) only bumps
// the DAG's stop_seq and rings its doorbell.
// Locks: the DAG owner's token (a pass, parent/sched.h) -> runs->mu, never the reverse;
// lw__run_complete is called with no lock held
// and finishes handles with none held.
#ifndef LANEWORK_PARENT_RUNS_H_
#define LANEWORK_PARENT_RUNS_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanes/handle_impl.h"
#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/thread.h"

typedef struct lw_run lw_run_t;
typedef struct lw_runs lw_runs_t;
typedef struct lw_dag lw_dag_t;
typedef struct lw_callables lw_callables_t;
typedef struct lw_mb_arena lw_mb_arena_t;
struct lw_dag_cmd;

struct lw_run {
  lw_handle_t handle;  // first
  lw_runs_t *runs;
  lw_orch_fn fn;
  void *user;
  uint64_t run_id;
  lw_run_t *next;      // run queue link
  // Run handles finish in run-id order (runs->mu): settled = every task is terminal and the
  // orch function returned; the handle finishes once every earlier run's handle has.
  lw_run_t *next_unfinished;
  bool settled;
  bool orch_done;
  bool failed;
  // failed, published (release) once error is complete, for submitters (lw__dag_run_failed).
  _Atomic bool failed_pub;
  bool settled_by_dag;  // the DAG reported it settled (once)
  bool cancelled;
  uint32_t n_tasks, n_terminal, n_completed, n_failed;
  int64_t t_start;
  lw_error_t error;    // first error
  lw_run_report_t report;
  // Per-task reports (lw_handle_run_tasks): task id i in task_reports[i - 1]. Written by the
  // DAG's owner from the task's build to its end (parent/task_reports.h), read only after the
  // run's handle finished; freed with the run. Grown by doubling; task_reports_lost when a
  // growth failed (out of memory): the reports are then incomplete and the query says so.
  lw_task_report_t *task_reports;
  uint32_t task_reports_cap;
  bool task_reports_lost;
  // The gate of waiters' drains (lw_handle_wait's wait_assist): a waiter holds it open (the
  // count, the low bits) only while it joins runs->waiters, which pins the worker; the run's
  // finish closes it (RUN_GATE_CLOSED) and waits for the count to drop, so a waiter that finds
  // it closed touches nothing of the worker, which may be gone.
  _Atomic uint32_t wait_gate;
};

struct lw_orch {
  lw_runs_t *runs;  // its worker's (the orch calls reach the DAG and the callables through it)
  lw_run_t *run;
  uint32_t scope_depth;  // scopes open (the DAG's tensor map applies them in order)
  // Tasks posted so far and the id of the last submit's (first) task: the owner numbers a
  // run's tasks in posting order (++run->n_tasks as it builds them), and only this orch
  // function posts the run's tasks, so the next id is known here before the owner builds it.
  uint64_t n_posted;
  uint64_t last_task;
};

// The worker's runs (the worker's runs), all under mu: the FIFO run queue (q_head/q_tail, linked by
// lw_run_t.next, cv signalled when a run is queued or the token is free), run ids, the list of
// runs whose handles have not finished (in id order; one thread at a time, `finishing`,
// finishes handles from its head), and the orchestrator thread with the token that keeps one
// orch function at a time (orch_busy).
// What the runs work with, given by the worker at initialize and fixed from then on (none of it
// is owned here). The scheduler's calls come as hooks, so that runs.c does not call into the
// scheduler, which calls back into runs.c; each hook may be NULL (nothing, false).
typedef struct lw_runs_links {
  lw_dag_t *dag;                  // the DAG: submits, scopes and a run's end are posted to it
  lw_callables_t *calls;          // submits pin callables (parent/callables.h)
  const lw_mb_arena_t *mb_arena;  // arguments are encoded against it
  uint32_t n_chips, n_subs, task_ring;  // the worker's configuration (submit checks)
  const _Atomic bool *stopping;   // the worker is being destroyed: no new run
  // A run was created (+1) or its handle finished (-1): the worker counts live runs (destroy
  // waits for none).
  void (*live)(void *ctx, int delta);
  void (*notify)(void *ctx, lw_handle_t *h);  // a run's handle finished (the user's event fd)
  // What a thread does before it waits for a run's handle (lw_handle_wait: the scheduler's
  // drain, lw__sched_wait_draining); true when it spun.
  bool (*before_wait)(void *ctx, lw_handle_t *h, int64_t deadline_ns, int64_t budget_ns);
  // Around an orch function (its thread drains the rings in a pass after each submit).
  void (*drainer_enter)(void *ctx);
  void (*drainer_leave)(void *ctx);
  // Drains until done(done_ctx) or it would wait long (then false).
  bool (*drain_until)(void *ctx, bool (*done)(void *done_ctx), void *done_ctx);
  void *ctx;                      // for every hook
} lw_runs_links_t;

struct lw_runs {
  bool initialized;  // lw__runs_initialize ran (create/destroy only)
  lw_runs_links_t links;  // copied at initialize
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lw_run_t *q_head, *q_tail;
  // Runs in the queue: changed under mu with the queue, read without it by the orchestrator's
  // spin and drain (a hint: the queue itself is decided under mu).
  _Atomic uint32_t n_queued;
  uint64_t next_id;
  lw_run_t *unfinished_head, *unfinished_tail;
  bool finishing;
  lw_thread_t orch;          // the orchestrator thread (lw__orch_start / lw__orch_stop)
  bool orch_busy;
  // The token holder's orch function holds a drainer role (lw__sched_drainer_enter) while it
  // runs; token holder only.
  bool orch_draining;
  // The orch function that holds the token (orch_busy), for a call made on the holding thread
  // itself (from inside the function, or after a longjmp left it). orch_holder (the holding
  // thread's pthread_t, 0 when the token is free; an atomic so that every run and run_async
  // can compare it with their own thread without the lock), orch_run and orch_inline are set
  // when the token is taken and cleared when it is given back, under mu. orch_done and
  // orch_frame are written by the holder alone, without the lock, and read on the holder's
  // thread or by lw_worker_destroy once nothing else runs on the worker.
  _Atomic uintptr_t orch_holder;
  lw_run_t *orch_run;
  bool orch_inline;               // called inline by lw_worker_run, not by the orchestrator
  struct lw_dag_cmd *orch_done;   // the run's ORCH_DONE, posted when the function returns
  uintptr_t orch_frame;           // the guard frame (lw__orch_call_guarded), 0 before the call
  // Counters for lw_worker_stats (relaxed atomics, read by any thread as a snapshot): orch
  // functions started, and run handles finished by their status.
  _Atomic uint64_t n_started, n_ok, n_failed, n_cancelled;
  // Threads draining for a run's handle in lw_handle_wait (they passed an open wait_gate):
  // lw_worker_destroy waits for none before it takes the scheduler apart
  // (lw__runs_wait_no_waiters).
  _Atomic uint32_t waiters;
};

// Sets up an empty run queue with its lock and condvar, and the hooks.
void lw__runs_initialize(lw_runs_t *runs, const lw_runs_links_t *links);
// Destroys the lock and the condvar (no thread uses runs any more; fine on a zeroed one).
void lw__runs_deinitialize(lw_runs_t *runs);

// The token holder's drainer role (lw__sched_drainer_enter): taken when its orch function
// starts, given back when it ends (or its frame is found gone), and given up around a sleep
// that needs the rings drained (a full task ring). drop returns whether it held the role (take
// it back only then). Token holder only, no lock held.
void lw__run_orch_drainer_take(lw_runs_t *runs);
bool lw__run_orch_drainer_drop(lw_runs_t *runs);

// Creates a run of fn(user) (lw_worker_run / lw_worker_run_async, worker.c): sync runs it
// inline when it can (lw__orch_try_inline), else queues it; *out is its handle, with the
// caller's reference, to wait on (lw_handle_wait does the before_wait hook). A call from the thread
// that holds the token is checked first (a sync run from inside an orch function is refused; an
// orch function left by a longjmp is ended, and the call fails saying so).
LW_MUST_USE lw_status_t lw__runs_start(lw_runs_t *runs, lw_orch_fn fn, void *user, bool sync,
                                       lw_handle_t **out, lw_error_t *err);
// Returns once no thread drains for a run's handle (runs->waiters is 0): lw_worker_destroy,
// after every run's handle finished, before the scheduler is taken apart. Such a drain ends
// within its spin once its handle is done.
void lw__runs_wait_no_waiters(lw_runs_t *runs);
// Starts the orchestrator thread (lw_worker_create).
LW_MUST_USE lw_status_t lw__orch_start(lw_runs_t *runs, lw_error_t *err);
// lw_worker_run's fast path: runs run's orch function on the caller's thread when no run is
// queued or holds the token (the token is taken under runs->mu, so FIFO order holds).
// Returns false, having done nothing, otherwise.
bool lw__orch_try_inline(lw_runs_t *runs, lw_run_t *run);
// Wakes and joins the orchestrator thread (lw_worker_destroy, with stopping set). Nothing
// when it never started. An inline orch function that still holds the token was left by a
// longjmp (destroy runs alone on the worker): its run is ended failed first.
void lw__orch_stop(lw_runs_t *runs);
// A run is settled: every task is terminal and its orch function returned (no lock held).
// Its handle finishes now if every earlier run's handle has finished, else right after the
// last of them: run handles finish in submission (run-id) order.
void lw__run_complete(lw_run_t *run);

#endif  // LANEWORK_PARENT_RUNS_H_
