// parent/stats.h — lw_worker_stats (parent/stats.c): gathers the counters the components keep
// where their events happen into one snapshot. Owns nothing: each counter lives in the struct
// of the component it describes (w->eps[i].stats, w->dag, w->runs, w->calls, w->arena) and is
// written there with one relaxed atomic; this file only reads them, from any thread, without a
// lock (the arena's and the chip registry's own leaf locks are not on any dispatch path).
// The one thing it adds is the DAG's task_done hook, which the worker wires at create time: it
// counts a task that reached a child on that child's endpoint (called by the DAG's owner in its
// pass, once per task, with the task's final status).
#ifndef LANEWORK_PARENT_STATS_H_
#define LANEWORK_PARENT_STATS_H_

#include <stdint.h>

#include "lanework/stats.h"
#include "lanework/status.h"

typedef struct lw_task lw_task_t;
typedef struct lw_runs lw_runs_t;
typedef struct lw_dag lw_dag_t;
typedef struct lw_arena lw_arena_t;
typedef struct lw_callables lw_callables_t;
typedef struct lw_endpoint lw_endpoint_t;

// Where the counters live (lw_worker_stats in worker.c fills it from the worker).
typedef struct lw_stats_sources {
  uint32_t n_chips, n_subs;
  const lw_runs_t *runs;
  const lw_dag_t *dag;
  const lw_arena_t *arena;
  const lw_callables_t *calls;
  const lw_endpoint_t *eps;  // n_chips + n_subs
} lw_stats_sources_t;

// One snapshot of every counter into *out (the library's layout; the caller checked the user's
// struct_size and copies it out). Any thread, no lock.
void lw__stats_snapshot(const lw_stats_sources_t *src, lw_worker_stats_t *out);

// lw_dag_hooks_t.task_done: t->ep is the child it was posted to.
void lw__stats_task_done(void *ctx, const lw_task_t *t, lw_status_t st);

#endif  // LANEWORK_PARENT_STATS_H_
