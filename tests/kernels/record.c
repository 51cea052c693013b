// tests/kernels/record.c — appends scalar[0] to the log in tensor[0]:
//   int64 log[]: log[0] = count, log[1 + i] = the i-th recorded value.
// scalar[1] (optional): microseconds to spin before recording (cancellable).
// Slots are claimed with an atomic add, so chips in different processes can share one log in
// the worker's arena. Lets tests assert the order in which tasks executed. Further tensors are
// ignored by the kernel: tests use their tags to create dependencies.
#include <stdatomic.h>
#include <time.h>

#include "lanework/kernel.h"

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 1 || args->n_scalars < 1) return -22;
  if (args->n_scalars > 1) {
    int64_t end = now_us() + (int64_t)args->scalar[1];
    while (now_us() < end) {
      if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    }
  }
  _Atomic int64_t *log = args->tensor[0].data;
  int64_t cap = (int64_t)(args->tensor[0].bytes / sizeof(int64_t)) - 1;
  int64_t n = atomic_fetch_add(&log[0], 1);
  if (n >= cap) return -28;
  atomic_store(&log[1 + n], (int64_t)args->scalar[0]);
  return 0;
}
