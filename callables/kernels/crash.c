// crash: dies with SIGSEGV by writing through a null pointer. For fault tests.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  // volatile keeps the compiler from proving the store undefined and dropping or replacing it.
  volatile int *volatile p = 0;
  *p = 42;
  return 0;
}
