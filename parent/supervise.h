// parent/supervise.h — the supervisor: bringing a dead child back (parent/supervise.c).
// Owns: the supervisor thread and its per-child records (lw_supervisor_t: per slot, a
// death waiting for its respawn, the crash-loop record, the respawn count), and the replay of
// every live callable (chip images, the sub function table in order) into the new child before it takes
// work again.
// Not here yet: noticing a death (pidfd, liveness kills) and failing the dead child's work are
// the scheduler's (parent/sched.c on_child_death), which hands the endpoint over with
// lw__supervisor_queue.
// Lifecycle: lw__supervisor_initialize (lw_worker_create: the lock, the condvar, one record per
// child) -> lw__supervisor_start (after the children started) -> (lw__supervisor_queue)* ->
// lw__supervisor_stop (lw_worker_destroy, after the scheduler stopped: nothing queues a death
// then; it joins the thread, and a queued respawn that had not started is dropped) ->
// lw__supervisor_deinitialize (frees the records; fine on a zeroed supervisor).
// Threads: lw__supervisor_queue from the scheduler (any thread is safe); lw__ep_respawn only
// on the supervisor thread, with no lock held. While a respawn runs, the endpoint is
// RESPAWNING and not accepting: the scheduler neither posts to it nor drains its ring, so the
// replay reads the new child's completions itself (passing on those of unregisters posted to
// the new child for callables the replay gave it). A new child that dies before its replay is
// complete is never seen by the scheduler: the respawn answers the ops it held
// (lw__wop_fail_chip).
// Locks: sup->mu guards each record's pending flag and sup->exit only; it is a leaf (nothing is
// taken under it, and it is never taken under another lock). A respawn takes ep->ctl_mu ->
// ep->post_mu to reset the mailbox, then calls->sub_mu (sub replay) or calls->mu (chip replay),
// each in the worker's order (parent/worker_impl.h); it changes an endpoint's accepting flag
// under the DAG owner's token (parent/sched.h), with no other lock held.
#ifndef LANEWORK_PARENT_SUPERVISE_H_
#define LANEWORK_PARENT_SUPERVISE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanework/status.h"
#include "parent/thread.h"

typedef struct lw_endpoint lw_endpoint_t;
typedef struct lw_callables lw_callables_t;
typedef struct lw_arena lw_arena_t;

#define LW_SUP_DEATH_LOG 16

// The supervisor's record of one child (sup->child[slot], slots as in the worker's endpoints).
typedef struct lw_sup_child {
  bool pending;                       // a death waits for its respawn (under sup->mu)
  // The crash-loop bound: a ring of death times and how many deaths there were; the respawns
  // that took work again. Supervisor thread only.
  int64_t deaths[LW_SUP_DEATH_LOG];
  uint32_t n_deaths;
  uint32_t respawns;
} lw_sup_child_t;

// What the supervisor works with, given by the worker at initialize and fixed from then on
// (none of it is owned here).
typedef struct lw_supervisor_links {
  lw_callables_t *calls;     // replayed into a new child (under calls->mu)
  lw_endpoint_t *eps;        // n_children, slots as in the worker
  uint32_t n_children;
  const lw_arena_t *arena;   // a new child's mailbox names the arena's size; images are in it
  // The worker's configuration: respawn on/off, the crash-loop bound (respawn_max deaths in
  // respawn_window_ns), the start-up deadline, the heartbeat period asked of a new child.
  bool respawn;
  uint32_t respawn_max;
  int64_t respawn_window_ns, startup_timeout_ns, heartbeat_period_ns;
  const _Atomic bool *stopping;  // the worker is being destroyed: no respawn
  void (*kick)(void *ctx);       // wakes the scheduler (a child takes work again, or is gone)
  // The scheduler watches (on) or stops watching (off) the child's pidfd for its death;
  // false when it could not (on only).
  bool (*watch)(void *ctx, lw_endpoint_t *ep, bool on);
  // Take and give back the DAG owner's token (parent/sched.h), under which an endpoint's
  // accepting flag changes: the passes that read it see it settled.
  void (*pass_lock)(void *ctx);
  void (*pass_unlock)(void *ctx);
  void *ctx;                     // for every hook
} lw_supervisor_links_t;

// The supervisor's own state (the worker's sup): its thread, its per-child records, and under
// mu the exit request.
typedef struct lw_supervisor {
  lw_supervisor_links_t links;  // copied at initialize
  lw_thread_t thread;  // parent/thread.h
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lw_sup_child_t *child;  // links.n_children records (lw__supervisor_initialize)
  bool exit;
  bool initialized;       // the lock and condvar exist (create/destroy only)
} lw_supervisor_t;

LW_MUST_USE lw_status_t lw__supervisor_initialize(lw_supervisor_t *sup,
                                                  const lw_supervisor_links_t *links,
                                                  lw_error_t *err);
void lw__supervisor_deinitialize(lw_supervisor_t *sup);
// The supervisor thread, and how the scheduler hands it a dead child.
LW_MUST_USE lw_status_t lw__supervisor_start(lw_supervisor_t *sup, lw_error_t *err);
void lw__supervisor_stop(lw_supervisor_t *sup);
void lw__supervisor_queue(lw_supervisor_t *sup, lw_endpoint_t *ep);

// Restarts a dead child and replays its callables (supervisor thread, no lock held). On
// success the endpoint takes tasks again; on failure (crash loop, respawn off, start-up or
// replay failure) it is failed for good.
void lw__ep_respawn(lw_supervisor_t *sup, lw_endpoint_t *ep);

#endif  // LANEWORK_PARENT_SUPERVISE_H_
