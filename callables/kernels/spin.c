// spin: busy-waits scalar[0] microseconds on CLOCK_MONOTONIC, polling for cancellation on
// every clock read (about every microsecond or less).
#include <time.h>

#include "lanework/kernel.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  uint64_t us = args->n_scalars > 0 ? args->scalar[0] : 0;
  uint64_t end = now_ns() + us * 1000ull;
  for (;;) {
    if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    if (now_ns() >= end) return 0;
  }
}
