// tools/bench_dispatch.h — `lanework bench dispatch`: one driver (bench_dispatch.c) over a
// small per-backend workload: the backend's empty kernel and its floors, what a dispatch on it
// costs at least, measured in the same run.
//
// The driver measures, in interleaved rounds (each round a slice of every kind in turn,
// starting with the next kind each round, so a noisy neighbour moves all of them alike), the
// floors, the empty kernel's L2 round trip (lw_chip_run), its L3 round trip (lw_worker_run of
// one task) and, on a backend other than sim, the same L3 round trip on a sim chip (lanework's
// own L3 cost, the reference). Then, where the workload says so, the L3 DAG figures
// (tools/dispatch_l3.h); with --load, all of it again beside busy-loop processes.
#ifndef LANEWORK_TOOLS_BENCH_DISPATCH_H_
#define LANEWORK_TOOLS_BENCH_DISPATCH_H_

#include <stdbool.h>

#include "tools/bench.h"

typedef struct lw_dispatch_floor {
  const char *name;      // its label in the table: "floor", "shm spin"
  const char *what;      // what it is, for the table
  const char *json_p50;  // its keys in the JSON ("floor_p50_us"); json_p99 may be NULL
  const char *json_p99;
  // open returns the floor's state, or NULL after printing why; sample measures n round trips
  // into v (microseconds), false after printing why; describe (may be NULL) names the device.
  void *(*open)(void);
  bool (*sample)(void *f, long n, double *v);
  const char *(*describe)(void *f);
  void (*close)(void *f);
} lw_dispatch_floor_t;

#define LW_DISPATCH_MAX_FLOORS 3

typedef struct lw_dispatch_workload {
  const char *backend;
  long default_iters;
  const char *empty_name;  // the empty kernel, for the table
  bool (*load_empty)(lw_callable_t *out);  // prints why and returns false when it cannot
  lw_dispatch_floor_t floors[LW_DISPATCH_MAX_FLOORS];
  int n_floors;
  // The floor an empty launch is held against (L2 / it, and L3's extra cost over the sim
  // reference in units of it; issue 9's targets); -1: none.
  int launch_floor;
  // The target of L2 / that floor (issue 9: 1.5; 0 means 1.5).
  double l2_target;
  bool dag;   // the L3 DAG figures: a 1000-task layered DAG, RAW edges only, a chain, where
  bool load;  // --load is measured (busy loops beside the run)
} lw_dispatch_workload_t;

// ref: the sim workload (the L3 reference) when w is another backend's; NULL for sim itself.
int lw__bench_dispatch(const lw_bench_opts_t *o, const lw_dispatch_workload_t *w,
                       const lw_dispatch_workload_t *ref);

#endif  // LANEWORK_TOOLS_BENCH_DISPATCH_H_
