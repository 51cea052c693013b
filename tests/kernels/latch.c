// tests/kernels/latch.c — holds the run lane until the test opens the latch, and ignores
// cancellation while it waits: a kernel that does not cooperate, released only by the test.
//   tensor[0]: uint32 latch (0 closed, non-zero open)
//   tensor[1]: uint32 entered, set to 1 when the kernel starts (optional)
// Returns 0 when the latch opens, whatever the cancel word says. Lets tests decide when a
// cancelled kernel returns OK ("the run stopped, then the kernel returned 0").
#include <stdatomic.h>
#include <time.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  if (args->n_tensors < 1) return -22;
  _Atomic uint32_t *latch = args->tensor[0].data;
  if (args->n_tensors > 1) atomic_store((_Atomic uint32_t *)args->tensor[1].data, 1u);
  struct timespec pause = {0, 20000};
  while (atomic_load(latch) == 0) nanosleep(&pause, NULL);
  return 0;
}
