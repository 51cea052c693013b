// tests/kernels/poll_count.c — counts its cancel polls until the test opens its gate.
//   tensor[0]: uint64 polls, incremented after each lw_kernel_should_stop that returned false
//   tensor[1]: uint32 gate (0 closed, non-zero open)
// Returns 0 when the gate opens, LW_KERNEL_CANCELLED when the run is cancelled first. Lets
// tests see whether a running kernel gets past its polls (the sim device lock holds it there).
#include <stdatomic.h>
#include <time.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 2) return -22;
  _Atomic uint64_t *polls = args->tensor[0].data;
  _Atomic uint32_t *gate = args->tensor[1].data;
  const struct timespec pause = {0, 20000};
  while (atomic_load(gate) == 0) {
    if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    atomic_fetch_add(polls, 1);
    nanosleep(&pause, NULL);
  }
  return 0;
}
