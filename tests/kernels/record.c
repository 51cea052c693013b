// tests/kernels/record.c — appends scalar[0] to the log in tensor[0]:
//   int64 log[]: log[0] = count, log[1 + i] = the i-th recorded value.
// Lets tests assert the order in which runs executed.
#include <stdatomic.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  if (args->n_tensors < 1 || args->n_scalars < 1) return -22;
  _Atomic int64_t *log = args->tensor[0].data;
  int64_t n = atomic_load(&log[0]);
  if ((uint64_t)(n + 2) * sizeof(int64_t) > args->tensor[0].bytes) return -28;
  atomic_store(&log[1 + n], (int64_t)args->scalar[0]);
  atomic_store(&log[0], n + 1);
  return 0;
}
