// hang: never returns and ignores cancellation (sleeping 100 us per loop so it does not burn a
// core). For tests of cancel escalation: only killing its process ends it. tensor[0],
// optional: a start mark (start_mark.h), set when it starts.
#include <time.h>

#include "lanework/kernel.h"
#include "start_mark.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  start_mark_set(args, 0);
  const struct timespec pause = {0, 100000};
  for (;;) nanosleep(&pause, NULL);
}
