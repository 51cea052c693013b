// bad_prepare: its prepare hook fails with -7. For tests of register errors.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_prepare(lw_kernel_ctx_t *ctx) {
  (void)ctx;
  return -7;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
