// sleep: waits scalar[0] microseconds of CLOCK_MONOTONIC, sleeping (no CPU used) but for the
// last SPIN_TAIL_NS, which it spins on the clock; it polls for cancellation at least every
// millisecond while it sleeps and at every clock read while it spins. A task of fixed length
// whose wall time does not depend on how many CPUs the machine has (`lanework bench
// parallel`). Its thread's timer slack is 1 ns while it sleeps (Linux's default, 50 us, would
// add up to that to every task: 2.5% of a 2 ms task) and goes back to what it was before the
// kernel returns. Why the spun tail: a timer's wake comes late by the machine's wake latency
// (on the 2-vCPU build VM, a Firecracker guest, 37-40 us at the median over 960 tasks of 2 ms:
// 2% of every task, which `bench parallel` would count as the runtime's); a sleep that ends
// that much early lets the spin end the task on time. The tail is 5% of a 2 ms task's time on
// a CPU; a task shorter than two tails is spun whole.
#include <errno.h>
#include <sys/prctl.h>
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

static int sleep_until(lw_kernel_ctx_t *ctx, struct timespec end) {
  struct timespec now;
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

#define SPIN_TAIL_NS 100000ull

// Polls the clock (and the cancel word) until end.
static int spin_until(lw_kernel_ctx_t *ctx, struct timespec end) {
  struct timespec now;
  for (;;) {
    if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!ts_before(now, end)) return 0;
  }
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  uint64_t us = args->n_scalars > 0 ? args->scalar[0] : 0;
  uint64_t ns = us * 1000ull;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int rc = 0;
  if (ns >= 2 * SPIN_TAIL_NS) {
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack > 1) (void)prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    rc = sleep_until(ctx, ts_add(start, ns - SPIN_TAIL_NS));
    if (slack > 1) (void)prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
  }
  return rc != 0 ? rc : spin_until(ctx, ts_add(start, ns));
}
