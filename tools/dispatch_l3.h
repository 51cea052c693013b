// tools/dispatch_l3.h — the L3 DAG figures of `lanework bench dispatch` and `bench trace`.
#ifndef LANEWORK_TOOLS_DISPATCH_L3_H_
#define LANEWORK_TOOLS_DISPATCH_L3_H_

#include <stdbool.h>

#include "lanework/lanework.h"
#include "tools/thread_times.h"

// The layered DAG, the read-after-write-only DAG and the chain each run this many times; their
// figures are the medians.
#define LW_DISPATCH_L3_RUNS 9

typedef struct lw_dispatch_l3_result {
  double empty_p50_us;
  double empty_p99_us;
  double per_task_us;
  double chain_per_task_us;  // a chain of dag_tasks dependent tasks on chip 0
  // The layered DAG again, each task writing a buffer of its own: read-after-write edges only,
  // no write-after-read or write-after-write hazard to order (what per_task_us adds to it is
  // what ordering those hazards costs).
  double raw_only_per_task_us;
  int dag_tasks;
  // Where the layered DAG's time went, per task over the same runs as per_task_us (their mean,
  // where per_task_us is their median): each role's time on a CPU and waiting for one
  // (tools/thread_times.h). where_ok false: the kernel's schedstat could not be read.
  bool where_ok;
  double mean_per_task_us;
  double runs_per_task_us[LW_DISPATCH_L3_RUNS];  // each run's figure, in order
  double cpu_us_per_task[LW_BENCH_ROLE_COUNT];
  double wait_us_per_task[LW_BENCH_ROLE_COUNT];
  double sleeps_per_1000_tasks[LW_BENCH_ROLE_COUNT];
  const char *why;  // when not measured
} lw_dispatch_l3_result_t;

// What an L3 round trip runs on: a worker with one chip of a backend and its empty callable
// (no arguments) registered. Close with lw_worker_destroy(side.w) (NULL-safe).
typedef struct lw_dispatch_l3_side {
  lw_worker_t *w;
  lw_callable_handle_t empty;
} lw_dispatch_l3_side_t;

lw_status_t lw__dispatch_l3_open(const char *backend, const lw_callable_t *empty,
                                 lw_dispatch_l3_side_t *out);
// n round trips, each a whole lw_worker_run of one task of the empty callable; v[i] their
// microseconds (v NULL: not kept).
lw_status_t lw__dispatch_l3_sample(lw_dispatch_l3_side_t *s, long n, double *v);

// On a sim worker of its own: the empty round trip (iters runs) and the DAG figures. Returns 0
// and fills out, or non-zero with out->why set.
int lw__dispatch_l3(long iters, lw_dispatch_l3_result_t *out);
// The DAG figures only (empty_* untouched), on a side whose callable ignores its arguments.
int lw__dispatch_l3_dags(lw_dispatch_l3_side_t *s, lw_dispatch_l3_result_t *out);

#endif  // LANEWORK_TOOLS_DISPATCH_L3_H_
