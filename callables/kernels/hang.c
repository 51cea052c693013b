// hang: never returns and ignores cancellation (sleeping 100 us per loop so it does not burn a
// core). For tests of cancel escalation: only killing its process ends it.
#include <time.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  const struct timespec pause = {0, 100000};
  for (;;) nanosleep(&pause, NULL);
}
