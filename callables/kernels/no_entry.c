// no_entry: a valid shared object without lw_kernel_main. For tests of the missing-entry error.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_not_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
