// tools/bench_chip.h — a bench's view of "a chip": L2 (an lw_chip_t in this process) or L3 (an
// lw_worker_t with one chip child, running one-task orch functions), on any backend. The
// overlap and cancel drivers run the same trial code at both levels through it.
//
// Lifecycle: lw__bench_chip_open, any calls, then close (which also frees what alloc gave).
// Threads: one thread at a time, except that handles it returned may be waited and cancelled
// from anywhere. At L3 at most LW_BENCH_CHIP_JOBS runs may be in flight at once.
#ifndef LANEWORK_TOOLS_BENCH_CHIP_H_
#define LANEWORK_TOOLS_BENCH_CHIP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/lanework.h"

#define LW_BENCH_CHIP_JOBS 8

typedef struct lw_bench_chip lw_bench_chip_t;
struct lw_bench_chip {
  int level;
  int64_t cancel_grace_ns;  // L3: the worker's escalation grace; L2: 0 (no escalation)
  lw_status_t (*register_sync)(lw_bench_chip_t *d, const lw_callable_t *c,
                               lw_callable_handle_t *out);
  lw_status_t (*register_async)(lw_bench_chip_t *d, const lw_callable_t *c,
                                lw_handle_t **out);
  lw_status_t (*unregister)(lw_bench_chip_t *d, lw_callable_handle_t h);
  lw_status_t (*run)(lw_bench_chip_t *d, lw_callable_handle_t h, const lw_args_t *a);
  lw_status_t (*run_async)(lw_bench_chip_t *d, lw_callable_handle_t h, const lw_args_t *a,
                           lw_handle_t **out);
  // The chip's counters (L3: its child's entry of the worker's stats).
  lw_status_t (*stats)(lw_bench_chip_t *d, lw_chip_stats_t *out);
  // Memory a run's tensors may use (L2: page-aligned heap; L3: the worker's arena).
  void *(*alloc)(lw_bench_chip_t *d, size_t bytes);
  void (*free)(lw_bench_chip_t *d, void *p);
  void (*close)(lw_bench_chip_t *d);
};

typedef struct lw_bench_chip_opts {
  int level;              // 2 or 3
  const char *backend;    // "sim", "opencl"; device 0
  size_t arena_bytes;     // the tensor memory the bench needs
  bool pin;               // run lane on CPU 0, register lane on CPU 1
  bool respawn_unbounded; // L3: no crash-loop bound (a bench that kills children on purpose)
} lw_bench_chip_opts_t;

lw_status_t lw__bench_chip_open(const lw_bench_chip_opts_t *o, lw_bench_chip_t **out);

#endif  // LANEWORK_TOOLS_BENCH_CHIP_H_
