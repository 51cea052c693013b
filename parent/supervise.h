// parent/supervise.h — the supervisor: bringing a dead child back (parent/supervise.c).
// Owns: the supervisor thread and its per-child records (w->sup, lw_supervisor_t: per slot, a
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
// Locks: w->sup.mu guards each record's pending flag and w->sup.exit only; it is a leaf (nothing is taken
// under it, and it is never taken under another lock). A respawn takes ep->ctl_mu ->
// ep->post_mu to reset the mailbox, then w->calls.sub_mu (sub replay) or w->mu, each in the
// worker's order (parent/worker_impl.h).
#ifndef LANEWORK_PARENT_SUPERVISE_H_
#define LANEWORK_PARENT_SUPERVISE_H_

#include <pthread.h>
#include <stdbool.h>

#include "lanework/status.h"
#include "parent/thread.h"

typedef struct lw_worker lw_worker_t;
typedef struct lw_endpoint lw_endpoint_t;

#define LW_SUP_DEATH_LOG 16

// The supervisor's record of one child (w->sup.child[slot], slots as in w->eps).
typedef struct lw_sup_child {
  bool pending;                       // a death waits for its respawn (under w->sup.mu)
  // The crash-loop bound: a ring of death times and how many deaths there were; the respawns
  // that took work again. Supervisor thread only.
  int64_t deaths[LW_SUP_DEATH_LOG];
  uint32_t n_deaths;
  uint32_t respawns;
} lw_sup_child_t;

// The supervisor's own state (w->sup): its thread, its per-child records, and under mu the
// exit request.
typedef struct lw_supervisor {
  lw_thread_t thread;  // parent/thread.h
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lw_sup_child_t *child;  // n_children records (lw__supervisor_start)
  uint32_t n_children;
  bool exit;
  bool initialized;       // the lock and condvar exist (create/destroy only)
} lw_supervisor_t;

LW_MUST_USE lw_status_t lw__supervisor_initialize(lw_supervisor_t *sup, uint32_t n_children,
                                                  lw_error_t *err);
void lw__supervisor_deinitialize(lw_supervisor_t *sup);
// The supervisor thread, and how the scheduler hands it a dead child.
LW_MUST_USE lw_status_t lw__supervisor_start(lw_worker_t *w, lw_error_t *err);
void lw__supervisor_stop(lw_worker_t *w);
void lw__supervisor_queue(lw_worker_t *w, lw_endpoint_t *ep);

// Restarts a dead child and replays its callables (supervisor thread, no lock held). On
// success the endpoint takes tasks again; on failure (crash loop, respawn off, start-up or
// replay failure) it is failed for good.
void lw__ep_respawn(lw_worker_t *w, lw_endpoint_t *ep);

#endif  // LANEWORK_PARENT_SUPERVISE_H_
