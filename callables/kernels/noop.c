// noop: returns at once. For dispatch benchmarks.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
