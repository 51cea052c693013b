// parent/worker_impl.h — struct lw_worker, which wires the parent's components together, and
// the few calls of the worker itself (wake.c): waking the scheduler, notifying the user, the
// heartbeat period, a child's mailbox. Included by worker.c and wake.c only: the layering
// check (tests/layering) refuses any other parent file. Every component takes its own struct,
// and what it works with of the others comes in its links (lw_<component>_links_t, given at
// initialize by worker.c): pointers, configuration values and hooks, never the worker.
// Components, each with its own header stating its contract (what it owns, lifecycle, which
// thread calls what, which lock guards what):
//   arena.h       the shared-arena allocator (arena.c)
//   thread.h      the start/stop pair of the worker's threads (thread.c)
//   endpoint.h    one endpoint per child, the mailbox side: spawn, INIT wait, and the
//                 endpoint interface lw_endpoint_ops_t (task posts, control round trips,
//                 completions, cancel words, heartbeat, death) with the local mailbox as its
//                 implementation (endpoint.c); given what it needs at initialize, it holds no
//                 pointer to the worker
//   callables.h   the callable table, register/unregister broadcast with rollback,
//                 register_sub, pins and deferred unregisters (callables.c)
//   runs.h        runs, their handles and reports, the run queue, the orchestrator thread
//                 and inline runs (runs.c)
//   dag.h         the DAG with one owner: task ring, states, groups, ready queues, the
//                 tensor map, poisoning and retirement, the inbox of commands (dag.c)
//   orch.c        lw_orch_*: checks a submit, reserves a ring slot, pins the callable and
//                 posts the task to the DAG's inbox (no header: it implements orch.h)
//   tmap.h        the tensor map (hazard map) the DAG derives dependencies from (tmap.c)
//   sched.h       the scheduler thread: completions, dispatch, cancels, escalation, child
//                 death; its per-child records (lw_sched_child_t: frames, busy, heartbeat)
//                 (sched.c)
//   supervise.h   the supervisor thread: respawn with callable replay, crash-loop bound; its
//                 per-child records (lw_sup_child_t) (supervise.c)
//   stats.h       lw__stats_snapshot over the counters the components keep (stats.c)
//   forkserver.h  the fork server and the zygote (forkserver.c)
//   worker.c      lw_worker_create/destroy (each component initialized in order,
//                 deinitialized in reverse), configuration, alloc, events, stats, cancel_all
// The struct holds one struct per component (each defined and explained in its header):
// w->arena, w->eps[] (endpoints), w->calls (callables), w->dag (one owner), w->runs, w->sched,
// w->sup, w->fs; what is left here is the wiring they share: the configuration, the shared
// memory, the fds, and the counters destroy waits on (live_runs under idle_mu). The include
// graph is acyclic: a component header includes no other parent header (but dag.h, which
// includes tmap.h and runs.h); this one includes those the struct needs, and the .c files
// include the headers they call into.
//
// Threads:
//   - the orchestrator thread runs orch functions, one run at a time, in FIFO order; a sync
//     lw_worker_run runs its own inline on the caller's thread instead when nothing is queued
//     or running (lw__orch_try_inline); the orch_busy token keeps it one at a time;
//   - the scheduler thread is the single progress owner and the DAG's owner: it applies the
//     DAG's inbox, drains every child's completion ring, dispatches ready tasks into free task
//     frames and notices child death (pidfds); it sleeps in one epoll_wait over the wake
//     eventfd, the pidfds and the fork server. Each pass holds the DAG owner's token
//     (w->sched.pass_mu, parent/sched.h), which submitters and waiting callers take too for an
//     assist pass of their own when it is free; a thread holding it (a test) sees the DAG
//     between two changes.
//   - the supervisor thread (supervise.c) respawns children the scheduler found dead and replays
//     their callables, so the scheduler keeps serving the others meanwhile;
//   - user threads post controls (register/unregister) themselves, under the endpoint's
//     control mutex; submitting threads (the orchestrator token's holder) hand tasks, scopes
//     and a run's end to the DAG's inbox and never touch DAG state.
//
// Locks, each owned by one component (in this order; never the reverse):
//   sched.pass_mu (the DAG owner's token: the DAG, the scheduler's per-child records, the
//     endpoints' accepting flags; sched.h)  ->  calls.mu (the callable table and the ops;
//     callables.h; a pass takes it only when it needs the callables,
//     lw__sched_pass_hold_calls)  ->  ep->post_mu (sequence numbers)  ->  ep->desc_mu (exit
//     description, violation reason: a leaf)
//   calls.sub_mu (the sub children's tables) -> calls.mu, and -> ep->ctl_mu; the token is
//   never taken with sub_mu held.
//   ep->ctl_mu (a control round trip) is taken with neither the token nor calls.mu held.
//   runs.mu guards the run queue and the list of unfinished runs only; it may be taken in a
//   pass (cancel_all marks every unfinished run), never the reverse.
//   Leaves, taken with nothing taken under them: sup.mu (the supervisor's queue), idle_mu
//   (live_runs, idle_cv; an op's end broadcasts under calls.mu), the DAG's dag->space_mu
//   (back-pressure waiters: a submitter with no other lock held, the owner in its pass).
#ifndef LANEWORK_PARENT_WORKER_IMPL_H_
#define LANEWORK_PARENT_WORKER_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "child/child.h"
#include "lanework/callable.h"
#include "lanes/handle_impl.h"
#include "lanes/handle_table.h"
#include "lanework/orch.h"
#include "lanework/worker.h"
#include "mailbox/mailbox.h"
#include "parent/arena.h"
#include "parent/callables.h"
#include "parent/dag.h"
#include "parent/endpoint.h"
#include "parent/forkserver.h"
#include "parent/runs.h"
#include "parent/sched.h"
#include "parent/supervise.h"
#include "parent/worker_child.h"

typedef struct lw_worker lw_worker_t;

// ---------------------------------------------------------------------------------------------
// The worker

struct lw_worker {
  lw_worker_config_t cfg;
  uint32_t n_children;
  lw_arena_t arena;
  lw_mb_arena_t mb_arena;
  lw_mailbox_t *mailboxes;
  size_t mailboxes_bytes;
  int mailboxes_fd;
  // The children's trace areas (lanes/trace.h), one per child, shared like the mailboxes.
  uint8_t *traces;
  size_t traces_bytes;
  int traces_fd;
  uint32_t n_traces_attached;  // areas 0..n-1 joined the trace session (create; destroy detaches)
  lw_child_env_t *envs;
  lw_forkserver_t *fs;       // chip children's server (the exec'd helper's)
  lw_forkserver_t *fs_subs;  // sub children's server (the zygote's); NULL without subs
  lw_endpoint_t *eps;        // n_children: chips, then subs
  int wake_fd;               // eventfd: children and threads wake the scheduler
  int user_fd;               // eventfd: readable when a handle of this worker finished
  // The user's event fd is written only once somebody asked for it (lw_worker_event_fd):
  // a write is a system call per finished run. Until then a finish only marks it pending, and
  // the first lw_worker_event_fd writes once if anything finished. Dekker pair, both seq_cst:
  // a finish stores pending then loads armed; the arming stores armed then loads pending.
  _Atomic bool user_fd_armed;
  _Atomic bool user_fd_pending;

  // The DAG (parent/dag.h): its state is its owner's, the scheduler thread's (destroy's once
  // the scheduler stopped); other threads reach it through its inbox only.
  lw_dag_t dag;
  bool dag_ready;            // lw__dag_initialize succeeded

  // live_runs, and the condvar a run's or an op's end is broadcast on (destroy waits on it for
  // no live run and no live op): a leaf.
  pthread_mutex_t idle_mu;
  pthread_cond_t idle_cv;
  lw_callables_t calls;      // the callable table and its ops (parent/callables.h)
  uint32_t live_runs;

  lw_runs_t runs;            // the run queue, run ids, unfinished runs, the orchestrator
  lw_sched_t sched;          // the scheduler thread and its sleep handshake
  lw_supervisor_t sup;       // the supervisor thread and its queue of deaths
  _Atomic bool stopping;
  _Atomic uint32_t cancel_all_seq;  // bumped by lw_worker_cancel_all (async-signal-safe)
};


static inline lw_mailbox_t *lw__worker_mailbox(lw_worker_t *w, uint32_t slot) {
  return (lw_mailbox_t *)((uint8_t *)w->mailboxes + LW_MAILBOX_STRIDE * slot);
}

// The heartbeat period asked of every child (lw_mb_header_t.heartbeat_period_ns).
int64_t lw__heartbeat_period_ns(const lw_worker_t *w);
// Wakes the scheduler: new work, or something for it to look at. Any thread.
void lw__worker_kick(lw_worker_t *w);
// A handle of the worker finished: writes the user event fd once it is armed, else marks it
// pending (see user_fd_armed). Any thread.
void lw__worker_notify_user(void *ctx, lw_handle_t *h);
// Writes the user event fd (makes it readable). Any thread.
void lw__worker_write_user_fd(lw_worker_t *w);

#endif  // LANEWORK_PARENT_WORKER_IMPL_H_
