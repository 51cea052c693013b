// spin: busy-waits scalar[0] microseconds on CLOCK_MONOTONIC. It polls for cancellation on
// every clock read (about every microsecond), or, when scalar[1] is given, only once every
// scalar[1] microseconds: a kernel whose blocks take that long (the cancel benchmark uses
// 100 us). tensor[0], optional: a start mark (start_mark.h), set before the first poll.
#include <time.h>

#include "lanework/kernel.h"
#include "start_mark.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  uint64_t us = args->n_scalars > 0 ? args->scalar[0] : 0;
  uint64_t poll_ns = args->n_scalars > 1 ? args->scalar[1] * 1000ull : 0;
  start_mark_set(args, 0);
  uint64_t t = now_ns();
  uint64_t end = t + us * 1000ull;
  uint64_t next_poll = t;
  for (;;) {
    t = now_ns();
    if (t >= next_poll) {
      if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
      next_poll = t + poll_ns;
    }
    if (t >= end) return 0;
  }
}
