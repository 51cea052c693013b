// fail: returns scalar[0] when given and nonzero, else -3. For tests of kernel errors.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  if (args->n_scalars > 0 && (int)args->scalar[0] != 0) return (int)args->scalar[0];
  return -3;
}
