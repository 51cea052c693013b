// parent/sched.h — the scheduler thread, the worker's progress loop (parent/sched.c).
// Owns: the scheduler thread and its handshake (lw_sched_t below), the DAG owner's token
// (pass_mu), its epoll set (epoll_fd: the wake eventfd, every child's pidfd, the fork servers'
// sockets), the sleep handshake with the children and the kicking threads (kick_seq, sleeping, the
// mailboxes' sleeping flags), and what its passes remember (cancel_all_seen). Its thread is
// the DAG's owner (parent/dag.h). Each pass drains every child's completion ring (a
// submitter's pass may leave them for later: LW_SCHED_DRAIN_EVERY), applies the DAG's inbox
// (lw__dag_step), sweeps the queued tasks of stopped runs, dispatches ready tasks into free task
// frames (its per-child records, lw_sched_child_t), writes cancel words and escalates kernels that
// ignore them, watches heartbeats, and notices a child's death: it fails the dead child's work and
// hands the endpoint to the supervisor (parent/supervise.h). Work found in a pass (settled runs,
// complete ops, due unregisters) is handed on once the lock is dropped.
// Lifecycle: lw__sched_initialize (lw_worker_create, before the DAG: the token, the records) ->
// lw__sched_start (once the children are READY) -> lw__sched_stop (lw_worker_destroy, after
// the children left or were killed: it sets exit, wakes the thread and joins it; the epoll fd
// stays open for the supervisor) -> lw__sched_deinitialize (closes the epoll fd, once the
// supervisor stopped too).
// Threads: lw__sched_start and lw__sched_stop from create/destroy only. Any thread wakes the
// scheduler with lw__sched_kick (the worker's kick, which is also the DAG's doorbell).
// Locks: a pass holds the token (pass_mu) and, when it needs the callables, calls->mu under
// it (and under those ep->post_mu, ep->desc_mu, runs->mu); it takes the supervisor's lock and
// posts controls (ep->ctl_mu) only with both released.
#ifndef LANEWORK_PARENT_SCHED_H_
#define LANEWORK_PARENT_SCHED_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanework/status.h"
#include "lanework/worker.h"
#include "mailbox/mailbox.h"
#include "parent/thread.h"

typedef struct lw_task lw_task_t;
typedef struct lw_dag lw_dag_t;
typedef struct lw_callables lw_callables_t;
typedef struct lw_runs lw_runs_t;
typedef struct lw_supervisor lw_supervisor_t;
typedef struct lw_endpoint lw_endpoint_t;
typedef struct lw_forkserver lw_forkserver_t;

// The scheduler's record of one child (sched->child[slot], slots as in the endpoints: chips, then
// subs), beside the endpoint's mailbox side (parent/endpoint.h). Written only in an owner's
// pass (the token held): the scheduler's, a submitter's or a waiting caller's assist.
typedef struct lw_sched_child {
  // The task in each task frame, NULL when free; busy counts the non-NULL ones.
  lw_task_t *frame_task[LW_MB_TASK_FRAMES];
  uint32_t busy;
  // Where the search for a free frame starts: the one after the last frame posted. Tasks
  // mostly end in the order they were posted, so the frame found there is usually free.
  // Always below LW_MB_TASK_FRAMES.
  uint32_t next_frame;
  // The child broke the protocol and the scheduler owns its kill (killed again each pass until
  // its death is seen): set with ep->accepting = false by the pass that found the violation,
  // or by the scheduler for one another thread found (ep->violated); cleared at the death.
  bool broken;
  // Liveness: while the child holds work, the heartbeat seen last and when the scheduler saw it
  // move (parent clock).
  bool hb_watching;
  uint64_t hb_seen;
  int64_t hb_seen_at;
} lw_sched_child_t;

// What the scheduler works with, given by the worker at initialize and fixed from then on (none
// of it is owned here).
typedef struct lw_sched_links {
  lw_dag_t *dag;              // the DAG whose owner's passes run here (parent/dag.h)
  lw_callables_t *calls;      // reports, pins, due unregisters
  lw_runs_t *runs;            // cancel_all marks every unfinished run
  lw_supervisor_t *sup;       // a dead child is handed to it
  lw_endpoint_t *eps;         // n_chips chip endpoints, then n_subs sub endpoints
  uint32_t n_chips, n_subs;
  // The worker's configuration: the cancel grace before an escalation, the liveness timeout
  // (0: off) and the heartbeat period asked of the children, respawn on/off (for the log).
  int64_t cancel_grace_ns, liveness_timeout_ns, heartbeat_period_ns;
  bool respawn;
  int wake_fd;                // eventfd: children and threads wake the scheduler
  const _Atomic uint32_t *cancel_all_seq;  // bumped by lw_worker_cancel_all
} lw_sched_links_t;

// The scheduler's own state (the worker's sched). thread: started by lw__sched_start and stopped by
// lw__sched_stop only (parent/thread.h). kick_seq and sleeping: the sleep handshake with kicking threads (any
// thread reads and bumps them, seq_cst). exit: set by lw__sched_stop. cancel_all_seen: the
// last lw_worker_cancel_all the passes acted on (the token held).
typedef struct lw_sched {
  bool initialized;  // lw__sched_initialize ran (create/destroy only)
  // The DAG owner's token (lw__sched_pass_lock / _try / _unlock): the thread that holds it is
  // the DAG's one owner for its pass (the scheduler, a submitter's or a waiting caller's
  // assist, destroy at the end). It guards the DAG's state, these per-child records, what the
  // passes remember (cancel_all_seen, cancel_stop_seen, group_members) and the changes of the
  // endpoints' accepting flags (the supervisor takes it for those).
  pthread_mutex_t pass_mu;
  // The holder took the callables' lock in this pass (lw__sched_pass_hold_calls; released with
  // the token). Token holder only.
  bool calls_held;
  lw_sched_links_t links;  // copied at initialize
  // The epoll set (lw__sched_start; closed by lw__sched_deinitialize): the wake eventfd, every
  // watched child's pidfd (tagged with its slot), the fork servers' sockets (fs, fs_subs).
  int epoll_fd;
  lw_forkserver_t *fs, *fs_subs;
  lw_thread_t thread;
  _Atomic bool exit;
  _Atomic uint64_t kick_seq;
  _Atomic uint32_t sleeping;
  // 1 while the scheduler may be in a long sleep (no drainer when it went to sleep): a drainer
  // that arrives then kicks it (drainer_enter).
  _Atomic uint32_t long_sleep;
  uint32_t cancel_all_seen;
  // Submitters' passes in a row that left the completion rings alone (may_defer_drain in
  // parent/sched.c; the token held). Below LW_SCHED_DRAIN_EVERY.
  uint32_t drains_deferred;
  // The DAG's stop_seq when the passes last looked for kernels to cancel (the token held).
  uint32_t cancel_stop_seen;
  // Dispatch's copy of a ready group's members (the token held): too large for a submitter's stack.
  lw_task_t *group_members[LW_MAX_CHIPS * LW_MB_TASK_FRAMES];
  // One record per child (n_children of them), made by lw__sched_initialize.
  lw_sched_child_t *child;
  uint32_t n_children;
  // Callers spinning in lw__sched_wait_draining: while there is one, the scheduler sleeps as
  // soon as a pass finds nothing to do instead of spinning beside it.
  _Atomic uint32_t drainers;
  // Sleeps the scheduler has come back from (epoll_wait returned), for tests and debugging;
  // written by the scheduler's thread alone.
  _Atomic uint64_t n_wakes;
} lw_sched_t;

// The links and the per-child records (lw_worker_create, before any child takes work);
// deinitialize frees them and closes the epoll set (lw_worker_destroy, once the scheduler and
// the supervisor stopped; fine on a zeroed or half-built scheduler).
LW_MUST_USE lw_status_t lw__sched_initialize(lw_sched_t *sched, const lw_sched_links_t *links,
                                             lw_error_t *err);
void lw__sched_deinitialize(lw_sched_t *sched);
// Makes the epoll set (the wake eventfd, the fork servers' sockets, the pidfd of every child
// that has one) and starts the thread (lw_worker_create, once the children are READY).
LW_MUST_USE lw_status_t lw__sched_start(lw_sched_t *sched, lw_forkserver_t *fs,
                                        lw_forkserver_t *fs_subs, lw_error_t *err);
// The DAG owner's token (pass_mu). lock waits for it (the scheduler's first pass after a sleep,
// the supervisor changing an endpoint's accepting flag, a drainer arriving or leaving,
// destroy); try takes it only when free (every assist, the scheduler's passes while it spins):
// false, having done nothing, otherwise. unlock gives it back, and the callables' lock with it
// when the pass took that. hold_calls takes the callables' lock (calls->mu) once per pass,
// before the holder reads a callable, reports an op or drops a pin; a pass that posts nothing
// and meets no control report or error never takes it. Order: the token, then calls->mu.
bool lw__sched_pass_try(lw_sched_t *sched);
void lw__sched_pass_lock(lw_sched_t *sched);
void lw__sched_pass_unlock(lw_sched_t *sched);
void lw__sched_pass_hold_calls(lw_sched_t *sched);
// Wakes the scheduler: new work, or something for it to look at (the DAG's doorbell, a kick
// from any component). Any thread; async-signal-safe (atomics and write(2)).
void lw__sched_kick(lw_sched_t *sched);
// The scheduler watches (on) or stops watching (off) ep's pidfd for the child's death: the
// supervisor's call for a respawned child that took its replay. False when epoll_ctl failed.
bool lw__sched_watch(lw_sched_t *sched, lw_endpoint_t *ep, bool on);
// Whether a chip other than chip is up and holds no task (the DAG's owner asks, the token held).
bool lw__sched_other_chip_free(lw_sched_t *sched, int32_t chip);
void lw__sched_stop(lw_sched_t *sched);
// Runs one owner's pass on the calling thread (a submitter, right after posting to the DAG's
// inbox) when no pass is under way: applies the inbox, drains the children's completion
// rings (with now_ns > 0 only when it must: LW_SCHED_DRAIN_EVERY), sweeps, dispatches. Saves the
// hand-off to the scheduler thread (and waking it) when the caller can do the work itself. Returns
// false, having done nothing, when a pass was under way (the token busy) or the scheduler is
// stopping: the caller then kicks the scheduler. No lock held on entry. now_ns: 0, or the submit's
// read of the monotonic clock (lw__dag_post's), the pass's clock (lw__dag_set_owner).
bool lw__sched_assist(lw_sched_t *sched, int64_t now_ns);

// A submitter's pass (lw__sched_assist with now_ns > 0) with no stop to act on dispatches what
// its post made ready, then leaves the children's completion rings to a later pass when no
// decision could depend on them: no task waits for a producer (lw__dag_n_waiting) and none that
// is ready waits for a frame (lw__dag_holds_ready), the worker has one chip and at most one sub
// child (no placement compares children's loads, and elision's "another chip is free" has no
// other chip to ask about), every child has more than a quarter of its task frames free, and
// fewer than LW_SCHED_DRAIN_EVERY - 1 passes in a row left them. A completion in a ring then
// waits for at most that many submits (or, when the orch function stops submitting, for the
// scheduler's look once a millisecond or the caller's wait, which always drain), and the entries
// are read together, their cache-line transfers overlapping, instead of one transfer waited
// for after every submit. A task's end is seen when it is drained: its report's host_ns counts
// up to then, and a failure stops the run (refusing further submits) from then.
#define LW_SCHED_DRAIN_EVERY 8u

// A thread that will drain the children's rings itself for a while, in its own passes: a waiting
// caller (lw__sched_wait_draining) and an orch function's thread, which runs a pass after each
// submit (lw__sched_assist). While there is one, the scheduler does not spin beside it and the
// children do not ring the scheduler's eventfd (a ring per completion would wake it to compete
// with the drainer for the token and a CPU); the scheduler then looks at the rings once a
// millisecond, for what arrives while the drainer does something else (an orch function
// computing between submits). The last to leave hands the rings back (arms the children and
// kicks the scheduler for what arrived). Enter and leave in pairs, holding no worker lock; a
// no-op pair with LW_CALLER_DRAINS=0.
void lw__sched_drainer_enter(lw_sched_t *sched);
void lw__sched_drainer_leave(lw_sched_t *sched);

// Called by a thread about to wait for h (lw_handle_wait on a run's handle, a sync
// lw_worker_run's included): while it would spin anyway (lanes/spin.h), it drains the
// children's completion rings itself and runs the owner's pass they lead to, so the run's end
// does not wait for the scheduler thread to get a CPU (one thread hop fewer per round trip).
// Returns when h is done, the spin is spent (its yields last budget_ns, 0: the process's
// budget) or the absolute deadline_ns passed (no pass starts after it; one under way and what
// it hands back are finished first); the caller then waits for h as usual, without a spin of
// its own when this returned true (it spun). Its passes try the token; arriving and leaving
// as a drainer take it (a short wait for a pass under way). On the scheduler's thread, or on
// a thread that holds the token (the token is not recursive), it does nothing and returns
// false. Hold no other worker lock (calls->mu comes after the token).
bool lw__sched_wait_draining(lw_sched_t *sched, lw_handle_t *h, int64_t deadline_ns,
                             int64_t budget_ns);
// The same drain until done(ctx) returns true (it may take what it checks, e.g. task-ring
// slots) or the spin budget is spent; returns done's last answer. The orch function's wait
// for room in a full task ring.
bool lw__sched_drain_until(lw_sched_t *sched, bool (*done)(void *ctx), void *ctx);

#endif  // LANEWORK_PARENT_SCHED_H_
