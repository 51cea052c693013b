// tools/dispatch_l3.h — the L3 half of `lanework bench dispatch`.
#ifndef LANEWORK_TOOLS_DISPATCH_L3_H_
#define LANEWORK_TOOLS_DISPATCH_L3_H_

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
  const char *why;  // when not measured
} lw_dispatch_l3_result_t;

// Returns 0 and fills out, or non-zero with out->why set.
int lw__dispatch_l3(long iters, lw_dispatch_l3_result_t *out);

#endif  // LANEWORK_TOOLS_DISPATCH_L3_H_
