// tests/kernels/gate.c — holds the run lane until the test opens the gate.
//   tensor[0]: uint32 gate (0 closed, non-zero open)
//   tensor[1]: uint32 entered, set to 1 when the kernel starts (optional)
//   scalar[0] (optional): what to return when the run is cancelled first (default
//   LW_KERNEL_CANCELLED); 0 makes a kernel that bails out early and claims success.
// Returns 0 when the gate opens with 1; opened with a larger value v it returns v - 1 (a failed
// task whose end the test chooses).
// Lets tests assert events ("the register finished while this run was still running").
#include <stdatomic.h>
#include <time.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 1) return -22;
  _Atomic uint32_t *gate = args->tensor[0].data;
  if (args->n_tensors > 1) atomic_store((_Atomic uint32_t *)args->tensor[1].data, 1u);
  struct timespec pause = {0, 20000};
  while (atomic_load(gate) == 0) {
    if (lw_kernel_should_stop(ctx)) {
      return args->n_scalars > 0 ? (int)(int64_t)args->scalar[0] : LW_KERNEL_CANCELLED;
    }
    nanosleep(&pause, NULL);
  }
  uint32_t v = atomic_load(gate);
  return v > 1 ? (int)(v - 1) : 0;
}
