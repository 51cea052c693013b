// parent/dag.h — the DAG of the worker's runs (parent/dag.c): tasks, their dependencies and
// groups, the ready queues, and what a task's end does to the others.
// Owns (fields of struct lw_worker, parent/worker_impl.h, all under w->mu): the task ring
// (w->tasks, the stack of free slots w->free_tasks, space_cv for back-pressure), each task's
// state, its consumers (edges from the tensor map, parent/tmap.h, which the token holder of
// parent/runs.h uses under w->mu), groups (all-or-nothing launches), the ready queues
// (chip_q, any_q, sub_q, and the groups whose members are all ready: groups_head/tail) and
// lw__task_finish's work list (finish_stack, finishing).
// A task: FREE -> BUILDING (lw_orch_submit_*) -> PENDING (unmet dependencies) -> READY (in a
// queue) -> RUNNING (posted to a child, parent/sched.h) -> COMPLETED or FAILED -> FREE again
// (retired: gen bumped, so a stale lw_task_ref_t no longer matches). A failed task poisons
// its PENDING consumers and, if it never launched, its group; a task of a stopped run is
// skipped (lw__task_skip) instead of dispatched.
// Lifecycle: lw_worker_create allocates the ring; lw_worker_destroy finishes what is left once
// no thread of the worker is, then frees it.
// Threads: not one owner yet. The holder of the orchestrator token builds tasks and makes
// them ready; the scheduler dispatches and finishes them (completions, deaths, stops, the
// sweep of stopped runs); both do so under w->mu. Functions that settle runs push them on
// *finished (linked by lw_run_t.next), for the caller to complete with lw__run_complete
// (parent/runs.h) once w->mu is released.
// Locks: w->mu guards everything here. Taken under it: w->run_mu, ep->post_mu, ep->desc_mu;
// the task-slot wait releases it while it sleeps on space_cv.
#ifndef LANEWORK_PARENT_DAG_H_
#define LANEWORK_PARENT_DAG_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/status.h"
#include "mailbox/mailbox.h"
#include "parent/tmap.h"

#define LW_MAX_SCOPES 16

typedef struct lw_worker lw_worker_t;
typedef struct lw_task lw_task_t;
typedef struct lw_run lw_run_t;
typedef struct lw_endpoint lw_endpoint_t;

typedef enum lw_task_state {
  LW_TS_FREE = 0,
  LW_TS_BUILDING = 1,
  LW_TS_PENDING = 2,
  LW_TS_READY = 3,
  LW_TS_RUNNING = 4,
  LW_TS_COMPLETED = 5,
  LW_TS_FAILED = 6,
  LW_TS_CONSUMED = 7,
} lw_task_state_t;

typedef struct lw_task_ref {
  uint32_t index;
  uint32_t gen;
} lw_task_ref_t;

typedef struct lw_group {
  uint32_t n;
  uint32_t n_ready;
  uint32_t n_open;       // members not yet terminal
  lw_task_t **members;
  struct lw_group *next_ready;
} lw_group_t;

struct lw_task {
  uint32_t index;
  uint32_t gen;
  lw_task_state_t state;
  lw_run_t *run;
  uint64_t task_id;
  lw_mb_task_kind_t kind;
  int32_t worker;          // chip index, LW_ANY_CHIP, or -1 for subs
  uint32_t wc;             // callable table index
  uint64_t wc_id;
  lw_mb_args_t args;
  int64_t timeout_ns;
  uint32_t n_pending;      // unmet dependencies
  lw_task_ref_t *consumers;
  uint32_t n_consumers, cap_consumers;
  lw_group_t *group;
  lw_task_t *next;         // ready queue link
  // Dispatch.
  lw_endpoint_t *ep;
  uint32_t frame;
  lw_mb_identity_t identity;
  int64_t cancel_at;       // when the scheduler cancelled it in its child (0: not)
  // When the scheduler first saw the kernel running (parent clock; 0: not yet): escalation
  // grace and timeouts count from here, never from a time the child wrote.
  int64_t seen_started_at;
  lw_status_t escalated;   // CANCELLED / DEADLINE_EXCEEDED: its child was killed for it
};

typedef struct lw_task_queue {
  lw_task_t *head, *tail;
  uint32_t n;
} lw_task_queue_t;

// A task reached a terminal state (w->mu held): updates its run, its consumers, retires it.
// Runs that completed are appended to *finished (finish them after unlocking). When it
// returns, t and every task it finished on the way (consumers, group members) are retired;
// called from inside such a finish, it only queues t (no recursion per dependency).
void lw__task_finish(lw_worker_t *w, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                     lw_run_t **finished);
// A task that can no longer run because its run failed or was cancelled (w->mu held): it is
// finished POISONED (the run failed) or CANCELLED (a run whose cancel was requested is marked
// cancelled here).
void lw__task_skip(lw_worker_t *w, lw_task_t *t, lw_run_t **finished);
// The tensor map's liveness callback (ctx: the worker; w->mu held: it reads task state): true
// while the task behind r is unfinished.
bool lw__dag_tmap_live(void *ctx, lw_tmap_ref_t r);

#endif  // LANEWORK_PARENT_DAG_H_
