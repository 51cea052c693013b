// tools/thread_times.h — where a benchmark's threads spent their time: on a CPU, or runnable
// and waiting for one. The kernel keeps both per thread (/proc/PID/task/TID/schedstat: time on a
// CPU and time waiting on a run queue, in ns; and "voluntary_ctxt_switches" in .../status, the
// times the thread blocked). A benchmark takes a snapshot before and after what it measures
// and sums the difference by role, so it can say how much of a figure was work and how much was
// waiting for a CPU that other threads or programs held.
//
// Counted: every thread of this process and the threads named lw-* of its descendants (the
// fork server, the zygote and the children it forks; not, say, a benchmark's busy loops). Roles
// come from thread names: the measuring thread (the caller), lw-sched (the parent's scheduler),
// lw-run-N (a chip's run lane), lw-chip-N when it is a chip child's main thread (its mailbox
// loop); every other thread (register lanes, watchdogs, the fork server, an orchestrator
// thread) counts as "other".
//
// Precision: the CPU time of a thread of this process is read from its CPU clock, which is
// exact. For a thread of a child the kernel's schedstat is only brought up to date when the
// thread is switched or at a timer tick, so a busy thread's figure may lag by up to one tick (1
// to 4 ms) at each snapshot; a thread that yields or sleeps often is current. Time a thread
// spends waiting right now is counted once it gets a CPU. Threads are matched by pid and tid: a
// thread that starts between the snapshots counts whole, one that ends between them is lost.
//
// Reads /proc and thread CPU clocks only, never the library's state. Snapshots are plain data
// owned by the caller (lw__bench_times_free). A kernel without schedstat (CONFIG_SCHED_INFO off)
// reads as not available (ok false).
#ifndef LANEWORK_TOOLS_THREAD_TIMES_H_
#define LANEWORK_TOOLS_THREAD_TIMES_H_

#include <stdbool.h>
#include <stddef.h>
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

// One thread in a snapshot.
typedef struct lw_bench_thread_time {
  pid_t pid, tid;
  lw_bench_role_t role;
  int64_t cpu_ns;   // on a CPU
  int64_t wait_ns;  // runnable, waiting for a CPU (a woken thread can wait here until its CPU
                    // comes out of idle)
  int64_t sleeps;   // voluntary context switches: a futex, epoll or nap that blocked
                    // (sched_yield is not one)
} lw_bench_thread_time_t;

typedef struct lw_bench_times {
  bool ok;  // false: a counted thread's schedstat could not be read, or /proc could not be
  size_t n;
  lw_bench_thread_time_t *thread;  // n entries, malloc'd
} lw_bench_times_t;

// What the counted threads spent between two snapshots, summed by role.
typedef struct lw_bench_role_times {
  bool ok;  // both snapshots were
  int64_t cpu_ns[LW_BENCH_ROLE_COUNT];
  int64_t wait_ns[LW_BENCH_ROLE_COUNT];
  int64_t sleeps[LW_BENCH_ROLE_COUNT];
} lw_bench_role_times_t;

// The role's name in the JSON: "caller", "scheduler", "run_lane", "mailbox_loop", "other".
const char *lw__bench_role_name(lw_bench_role_t role);

// Takes a snapshot of the counted threads; caller_tid is the measuring thread (gettid()).
// Reading /proc takes the caller a while: a snapshot before the measured work passes
// caller_first false (the caller's own time is read last), one after it true, so that time
// stays out. Returns out->ok; release out with lw__bench_times_free either way.
bool lw__bench_times_read(pid_t caller_tid, bool caller_first, lw_bench_times_t *out);
// The same, counting also the threads of roots[0..n_roots) and of their descendants: a
// worker's processes are not this process's descendants (lw_worker_process_ids).
bool lw__bench_times_read_with(pid_t caller_tid, bool caller_first, const pid_t *roots,
                               size_t n_roots, lw_bench_times_t *out);

void lw__bench_times_free(lw_bench_times_t *t);

// out = after - before, thread by thread (a difference below 0, which a tid reused between the
// snapshots could give, counts as 0), summed by role.
void lw__bench_times_diff(const lw_bench_times_t *after, const lw_bench_times_t *before,
                          lw_bench_role_times_t *out);

#endif  // LANEWORK_TOOLS_THREAD_TIMES_H_
