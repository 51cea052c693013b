// parent/stats.c — lw_worker_stats: one snapshot of the counters the worker's components keep
// (contract in include/lanework/stats.h, ownership in parent/stats.h).
#include <stddef.h>
#include <string.h>

#include "lanework/stats.h"
#include "parent/dag.h"
#include "parent/endpoint.h"
#include "parent/stats.h"
#include "parent/arena.h"
#include "parent/callables.h"
#include "parent/runs.h"

// Relaxed everywhere below: each value is a counter read on its own, for a snapshot; none of
// them publishes other data.
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void lw__stats_task_done(void *ctx, const lw_task_t *t, lw_status_t st) {
  (void)ctx;
  lw_endpoint_t *ep = t->ep;
  _Atomic uint64_t *c = st == LW_OK          ? &ep->stats.tasks_run
                        : st == LW_CANCELLED ? &ep->stats.tasks_cancelled
                        : st == LW_POISONED  ? &ep->stats.tasks_poisoned
                                             : &ep->stats.tasks_failed;
  lw__counter_add_one_writer(c, 1);  // in a pass: one writer (parent/endpoint.h)
}

static void child_stats(const lw_stats_sources_t *src, const lw_endpoint_t *ep,
                        lw_chip_stats_t *out) {
  const lw_callables_t *calls = src->calls;
  memset(out, 0, sizeof(*out));
  out->struct_size = (uint32_t)sizeof(*out);
  out->tasks_run = LOAD(ep->stats.tasks_run);
  out->tasks_failed = LOAD(ep->stats.tasks_failed);
  out->tasks_cancelled = LOAD(ep->stats.tasks_cancelled);
  bool chip = ep->kind == LW_MB_CHILD_CHIP;
  // Every chip child holds every chip callable, every sub child every sub function.
  out->registers = chip ? LOAD(calls->chip_registers) : LOAD(calls->sub_registers);
  out->unregisters = chip ? LOAD(calls->chip_unregisters) : LOAD(calls->sub_unregisters);
  out->register_failures = LOAD(calls->register_failures[ep->slot]);
  out->respawns = LOAD(ep->stats.respawns);
  out->escalations = LOAD(ep->stats.escalations);
  out->liveness_kills = LOAD(ep->stats.liveness_kills);
  out->deaths = LOAD(ep->stats.deaths);
  out->queue_depth = lw__ep_stats_queue_depth(ep);
  out->queue_depth_max = LOAD(ep->stats.queue_depth_max);
  // An unregister is counted only for a callable whose register was: never negative, but the
  // two reads may see different moments.
  out->callables = out->registers > out->unregisters
                       ? (uint32_t)(out->registers - out->unregisters)
                       : 0;
}

void lw__stats_snapshot(const lw_stats_sources_t *src, lw_worker_stats_t *out) {
  lw_worker_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = (uint32_t)sizeof(s);
  s.n_chips = src->n_chips;
  s.n_subs = src->n_subs;
  s.runs_started = LOAD(src->runs->n_started);
  s.runs_ok = LOAD(src->runs->n_ok);
  s.runs_failed = LOAD(src->runs->n_failed);
  s.runs_cancelled = LOAD(src->runs->n_cancelled);
  uint64_t retired = LOAD(src->dag->n_retired);
  s.tasks_submitted = LOAD(src->dag->n_built);
  s.tasks_poisoned = LOAD(src->dag->n_poisoned);
  s.tasks_skipped = LOAD(src->dag->n_skipped);
  s.arena_bytes = src->arena->bytes;
  s.arena_bytes_in_use = LOAD(src->arena->bytes_in_use);
  s.arena_bytes_peak = LOAD(src->arena->bytes_peak);
  // Clamped: the two reads may see different moments.
  s.dag_tasks_alive = s.tasks_submitted > retired ? (uint32_t)(s.tasks_submitted - retired) : 0;
  s.dag_ring = src->dag->n_tasks_cap;  // fixed at create
  for (uint32_t i = 0; i < src->n_chips + src->n_subs; ++i) {
    child_stats(src, &src->eps[i], &s.child[i]);
  }
  *out = s;
}
