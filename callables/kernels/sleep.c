// sleep: sleeps scalar[0] microseconds of CLOCK_MONOTONIC without using a CPU, waking at least
// every millisecond to poll for cancellation. A task of fixed length whose wall time does not
// depend on how many CPUs the machine has (`lanework bench parallel`).
#include <errno.h>
#include <time.h>

#include "lanework/kernel.h"

// ts + ns, normalised.
static struct timespec ts_add(struct timespec ts, uint64_t ns) {
  ns += (uint64_t)ts.tv_nsec;
  ts.tv_sec += (time_t)(ns / 1000000000ull);
  ts.tv_nsec = (long)(ns % 1000000000ull);
  return ts;
}

static int ts_before(struct timespec a, struct timespec b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  uint64_t us = args->n_scalars > 0 ? args->scalar[0] : 0;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  struct timespec end = ts_add(now, us * 1000ull);
  for (;;) {
    if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!ts_before(now, end)) return 0;
    // Absolute deadlines: a slice's oversleep is not added to the next one.
    struct timespec wake = ts_add(now, 1000000ull);
    if (ts_before(end, wake)) wake = end;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL) == EINTR) {
    }
  }
}
