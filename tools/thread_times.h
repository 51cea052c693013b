// tools/thread_times.h — where a benchmark's threads spent their time: on a CPU, or runnable
// and waiting for one. The kernel keeps both per thread (schedstat: /proc/PID/task/TID/schedstat,
// "time on a CPU" and "time waiting on a run queue", in ns); lw__bench_times_read sums them by
// role over this process and its descendants (the chip children), so a benchmark can say how
// much of a figure was work and how much was waiting for a CPU that other programs held.
//
// Counted: every thread of this process and the threads named lw-* of its descendants (the
// fork server, the zygote and the children it forks; not, say, a benchmark's busy loops). Roles
// come from thread names: the measuring thread (the caller), lw-sched (the parent's scheduler),
// lw-run-N (a chip's run lane), lw-chip-N (a chip child's mailbox loop); every other thread
// (register lanes, the fork server, an orchestrator thread) counts as "other".
//
// Not thread-safe with itself (it allocates per call); reads /proc only, never the library's
// state. A kernel without schedstat (CONFIG_SCHED_INFO off) reads as not available (ok false).
#ifndef LANEWORK_TOOLS_THREAD_TIMES_H_
#define LANEWORK_TOOLS_THREAD_TIMES_H_

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum lw_bench_role {
  LW_BENCH_ROLE_CALLER = 0,
  LW_BENCH_ROLE_SCHEDULER,
  LW_BENCH_ROLE_RUN_LANE,
  LW_BENCH_ROLE_MAILBOX_LOOP,
  LW_BENCH_ROLE_OTHER,
  LW_BENCH_ROLE_COUNT,
} lw_bench_role_t;

typedef struct lw_bench_times {
  bool ok;                                   // false: schedstat could not be read
  int64_t cpu_ns[LW_BENCH_ROLE_COUNT];       // on a CPU
  int64_t wait_ns[LW_BENCH_ROLE_COUNT];      // runnable, waiting for a CPU (a woken thread
                                             // waits here until its CPU comes out of idle)
  int64_t sleeps[LW_BENCH_ROLE_COUNT];       // voluntary context switches: a futex, epoll or
                                             // nap that blocked (sched_yield is not one)
} lw_bench_times_t;

// The role's name as the JSON and the table print it ("caller", "scheduler", "run_lane",
// "mailbox_loop", "other").
const char *lw__bench_role_name(lw_bench_role_t role);

// Sums the times (and sleeps) of the counted threads; caller_tid is the measuring thread (gettid()). Reading
// /proc takes the caller a while: a read before the measured work passes caller_first false (the
// caller's own times are read last), a read after it true, so that time stays out.
// Returns out->ok.
bool lw__bench_times_read(pid_t caller_tid, bool caller_first, lw_bench_times_t *out);

// out = after - before, role by role (a thread that ended between the two reads can make a
// role's difference negative: it is clamped to 0). ok only if both were.
void lw__bench_times_diff(const lw_bench_times_t *after, const lw_bench_times_t *before,
                          lw_bench_times_t *out);

#endif  // LANEWORK_TOOLS_THREAD_TIMES_H_
