// parent/sched.h — the scheduler thread, the worker's progress loop (parent/sched.c).
// Owns: the scheduler thread and its handshake (w->sched, lw_sched_t below), its epoll set
// (w->epoll_fd: the wake eventfd, every child's pidfd, the fork server's socket), the sleep
// handshake with the children and the kicking threads (w->sched.kick_seq, w->sched.sleeping, the
// mailboxes' sleeping flags), and what its passes remember (cancel_all_seen). Its thread is
// the DAG's owner (parent/dag.h). Each pass drains every child's completion ring, applies the
// DAG's inbox (lw__dag_step), sweeps the queued tasks of stopped runs, dispatches ready tasks
// into free task frames (its per-child records, lw_sched_child_t), writes cancel
// words and escalates kernels that ignore them, watches heartbeats, and notices a child's
// death: it fails the dead child's work and hands the endpoint to the supervisor
// (parent/supervise.h). Work found under w->mu (settled runs, complete ops, due unregisters)
// is handed on once the lock is dropped.
// Lifecycle: lw__sched_start (lw_worker_create, once the children are READY) ->
// lw__sched_stop (lw_worker_destroy, after the children left or were killed: it sets
// sched_exit, wakes the thread and joins it; the epoll fd stays open for the supervisor and is
// closed by destroy).
// Threads: lw__sched_start and lw__sched_stop from create/destroy only. Any thread wakes the
// scheduler with lw__worker_kick (parent/worker_impl.h), which is also the DAG's doorbell.
// Locks: a pass takes w->mu (and under it ep->post_mu, ep->desc_mu, w->runs.mu); it takes
// w->sup.mu and posts controls (ep->ctl_mu) only with w->mu released.
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

typedef struct lw_worker lw_worker_t;
typedef struct lw_task lw_task_t;

// The scheduler's record of one child (w->sched.child[slot], slots as in w->eps: chips, then
// subs), beside the endpoint's mailbox side (parent/endpoint.h). Written only in an owner's
// pass (w->mu held): the scheduler's, a submitter's or a waiting caller's assist.
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

// The scheduler's own state (w->sched). thread: started by lw__sched_start and stopped by
// lw__sched_stop only (parent/thread.h). kick_seq and sleeping: the sleep handshake with kicking threads (any
// thread reads and bumps them, seq_cst). exit: set by lw__sched_stop. cancel_all_seen: the
// last lw_worker_cancel_all the passes acted on (w->mu held).
typedef struct lw_sched {
  lw_thread_t thread;
  _Atomic bool exit;
  _Atomic uint64_t kick_seq;
  _Atomic uint32_t sleeping;
  // 1 while the scheduler may be in a long sleep (no drainer when it went to sleep): a drainer
  // that arrives then kicks it (drainer_enter).
  _Atomic uint32_t long_sleep;
  uint32_t cancel_all_seen;
  // The DAG's stop_seq when the passes last looked for kernels to cancel (w->mu held).
  uint32_t cancel_stop_seen;
  // Dispatch's copy of a ready group's members (w->mu held): too large for a submitter's stack.
  lw_task_t *group_members[LW_MAX_CHIPS * LW_MB_TASK_FRAMES];
  // One record per child (n_children of them), made by lw__sched_initialize.
  lw_sched_child_t *child;
  uint32_t n_children;
  // Callers spinning in lw__sched_wait_draining: while there is one, the scheduler sleeps as
  // soon as a pass finds nothing to do instead of spinning beside it.
  _Atomic uint32_t drainers;
} lw_sched_t;

// The per-child records (lw_worker_create, before any child takes work); deinitialize frees
// them (lw_worker_destroy, once the scheduler stopped; a half-built scheduler is fine).
LW_MUST_USE lw_status_t lw__sched_initialize(lw_sched_t *sched, uint32_t n_children,
                                             lw_error_t *err);
void lw__sched_deinitialize(lw_sched_t *sched);
LW_MUST_USE lw_status_t lw__sched_start(lw_worker_t *w, lw_error_t *err);
// Whether a chip other than chip is up and holds no task (the DAG's owner asks, w->mu held).
bool lw__sched_other_chip_free(lw_worker_t *w, int32_t chip);
void lw__sched_stop(lw_worker_t *w);
// Runs one owner's pass on the calling thread (a submitter, right after posting to the DAG's
// inbox) when no pass is under way: applies the inbox, drains the children's completion
// rings, sweeps, dispatches. Saves the hand-off to the scheduler thread (and waking it) when
// the caller can do the work itself. Returns false, having done nothing, when a pass was under
// way (w->mu busy) or the scheduler is stopping: the caller then kicks the scheduler. No lock
// held on entry.
bool lw__sched_assist(lw_worker_t *w);

// A thread that will drain the children's rings itself for a while, in its own passes: a waiting
// caller (lw__sched_wait_draining) and an orch function's thread, which runs a pass after each
// submit (lw__sched_assist). While there is one, the scheduler does not spin beside it and the
// children do not ring the scheduler's eventfd (a ring per completion would wake it to compete
// with the drainer for w->mu and a CPU); the scheduler then looks at the rings once a
// millisecond, for what arrives while the drainer does something else (an orch function
// computing between submits). The last to leave hands the rings back (arms the children and
// kicks the scheduler for what arrived). Enter and leave in pairs, holding no worker lock; a
// no-op pair with LW_CALLER_DRAINS=0.
void lw__sched_drainer_enter(lw_worker_t *w);
void lw__sched_drainer_leave(lw_worker_t *w);

// Called by a thread about to wait for h (a sync lw_worker_run): while it would spin anyway
// (lanes/spin.h), it drains the children's completion rings itself and runs the owner's pass
// they lead to, so the run's end does not wait for the scheduler thread to get a CPU (one
// thread hop fewer per round trip). Returns when h is done or the spin budget is spent; the
// caller then waits for h as usual. Never blocks on w->mu (trylock). Any thread but the
// scheduler's, holding no worker lock.
void lw__sched_wait_draining(lw_worker_t *w, lw_handle_t *h);
// The same drain until done(ctx) returns true (it may take what it checks, e.g. task-ring
// slots) or the spin budget is spent; returns done's last answer. The orch function's wait
// for room in a full task ring.
bool lw__sched_drain_until(lw_worker_t *w, bool (*done)(void *ctx), void *ctx);

#endif  // LANEWORK_PARENT_SCHED_H_
