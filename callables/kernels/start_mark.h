// callables/kernels/start_mark.h — the start mark that the spin and hang kernels leave in an
// optional tensor, so that a host can tell that the kernel of this very run started, and in
// which process. Header-only (kernels link nothing); tools include it too.
//
// Protocol: the host allocates one zeroed mark per run in shared memory every child maps (the
// worker's arena, lw_worker_alloc) and passes it as a tensor of at least sizeof(start_mark_t)
// bytes, tagged LW_TAG_NO_DEP. The kernel writes pid and start_ns, then sets started with a
// release store; the host reads started with an acquire load and, once it is 1, the rest. Only
// the run given the mark writes it, so a mark left by an earlier run (in its own memory)
// cannot be mistaken for this run's.
#ifndef LANEWORK_KERNELS_START_MARK_H_
#define LANEWORK_KERNELS_START_MARK_H_

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "lanework/kernel.h"

typedef struct start_mark {
  _Atomic uint32_t started;  // 0; 1 once the kernel runs (release: pid and start_ns first)
  int32_t pid;               // the process the kernel runs in (its chip child)
  int64_t start_ns;          // CLOCK_MONOTONIC when the kernel started
} start_mark_t;

// Marks the start in args->tensor[index] when the run passed a mark there; otherwise does
// nothing (the mark is optional).
static inline void start_mark_set(const lw_kernel_args_t *args, uint32_t index) {
  if (args->n_tensors <= index || args->tensor[index].bytes < sizeof(start_mark_t)) return;
  start_mark_t *m = args->tensor[index].data;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  m->pid = (int32_t)getpid();
  m->start_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  // Release: pairs with the host's acquire load of started; pid and start_ns are then valid.
  atomic_store_explicit(&m->started, 1, memory_order_release);
}

#endif  // LANEWORK_KERNELS_START_MARK_H_
