// lanes/sys.h — raw syscall wrappers and the monotonic clock. Each wrapper returns 0 or
// -errno; nobody reads errno after these.
#ifndef LANEWORK_LANES_SYS_H_
#define LANEWORK_LANES_SYS_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_DEADLINE_NEVER INT64_MAX

// CLOCK_MONOTONIC in nanoseconds.
int64_t lw__now_ns(void);

// Converts a relative timeout (LW_WAIT_FOREVER / negative: never) to an absolute deadline.
int64_t lw__deadline_after(int64_t timeout_ns);

// a + b for non-negative nanosecond quantities, saturating at LW_DEADLINE_NEVER instead of
// overflowing (a timeout of INT64_MAX means "never"). A negative operand counts as 0.
static inline int64_t lw__add_ns_sat(int64_t a, int64_t b) {
  if (a < 0) a = 0;
  if (b < 0) b = 0;
  return b >= LW_DEADLINE_NEVER - a ? LW_DEADLINE_NEVER : a + b;
}

// One helper for condvar deadlines. Every condvar that waits with a timeout is initialized
// with lw__cond_init_monotonic (CLOCK_MONOTONIC) and waited on with lw__cond_wait_until and an
// absolute deadline from lw__now_ns / lw__deadline_after, so a step of the wall clock never
// stretches or cuts a wait and no caller needs to poll in slices. Both return 0 or an errno
// value (ETIMEDOUT once the deadline passed; LW_DEADLINE_NEVER waits without a timeout).
int lw__cond_init_monotonic(pthread_cond_t *cv);
int lw__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns);

// FUTEX_WAIT_BITSET on CLOCK_MONOTONIC with an absolute deadline (LW_DEADLINE_NEVER: none).
// shared: the word may live in memory shared between processes (no FUTEX_PRIVATE_FLAG).
// Returns 0 when woken (or spuriously), -EAGAIN when *addr != expected, -ETIMEDOUT, -EINTR.
int lw__sys_futex_wait(const _Atomic uint32_t *addr, uint32_t expected, int64_t deadline_ns,
                       bool shared);
// Wakes up to n waiters. Returns the number woken or -errno.
int lw__sys_futex_wake(const _Atomic uint32_t *addr, int n, bool shared);

// Process syscalls. Every raw syscall lanework makes is wrapped here once (sys_linux.c), and
// each wrapper reads errno right after its syscall, so no caller ever reads errno late.

// pidfd_open(pid, 0): a pidfd for pid (the kernel makes it close-on-exec), or -errno: -ESRCH
// when no process has that pid (a reaped child), -ENOSYS on kernels before 5.3, -EMFILE ...
int lw__sys_pidfd_open(pid_t pid);
// pidfd_send_signal(pidfd, sig, NULL, 0): 0 or -errno (-ESRCH: the process already exited,
// even if it is not reaped yet). A pidfd names one process, so a reused pid is never signalled.
int lw__sys_pidfd_send_signal(int pidfd, int sig);
// close_range(first, last, flags): 0 or -errno (-ENOSYS on kernels before 5.9).
int lw__sys_close_range(unsigned first, unsigned last, unsigned flags);
// clone() with no new stack and no exit signal: a fork whose child sends its parent no SIGCHLD
// when it exits and is a "clone child" (man waitpid, __WCLONE): wait(), waitpid(-1, ..) without
// __WALL/__WCLONE and a SIGCHLD handler of the caller never see it; only
// waitpid(pid, .., __WALL) reaps it. Returns the child's pid in the caller, 0 in the child, or
// -errno. Unlike glibc's fork() it runs no atfork handlers and resets no library state in the
// child: only for single-threaded callers, whose child does little before it exits.
pid_t lw__sys_clone_quiet(void);

// pthread_create(out, NULL, fn, arg) with every asynchronous signal blocked in the new thread
// (all but SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and SIGSYS, which a thread raises itself):
// a program's signals, its SIGCHLD handler included, never run on a thread of lanework's
// (DESIGN 5.1). Every thread lanework starts is started here. Returns pthread_create's result.
// name (cut to 15 characters) is the thread's name from before this returns, so a program that
// lists its threads right after a create finds every lanework thread named lw-*.
int lw__sys_thread_start(pthread_t *out, const char *name, void *(*fn)(void *), void *arg);

// Reads a small file (a /proc or /sys one) whole into buf, NUL-terminated: open, one read,
// close; no stdio, no allocation. Returns the bytes read (> 0), or -1 when it cannot be opened
// or read nothing. A file longer than bytes - 1 is cut there.
ssize_t lw__sys_read_small_file(const char *path, char *buf, size_t bytes);

// How many threads of the whole machine are runnable now (running or waiting for a CPU; the
// caller included): the fourth field of /proc/loadavg, "runnable/total". -1 when it cannot be
// read, or reads below 1 (a sandbox that prints 0/0). Three system calls (a few microseconds):
// for decisions taken now and then, not per task. Every CPU's run queue counts, those outside
// the caller's affinity mask too: compare it with the machine's CPUs, not the caller's.
int lw__sys_runnable_threads(void);

// The CPU the calling thread runs on now (sched_getcpu: a load from the thread's rseq area
// with a recent glibc), or -1. A hint: the thread may move at any time.
int lw__sys_cpu(void);

// One CPU relax instruction (pause on x86, yield on arm).
static inline void lw__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

// Asks for the cache line holding p in a state this CPU may write (a hint; no fault, no
// effect on the program's results). For a line of shared memory this thread will read and then
// write, e.g. a mailbox frame's state: a read alone fetches the line shared, and the write then
// needs a second round trip to the other process's CPU to take it over; asked for writing
// first, the line comes over once. x86: PREFETCHW (a NOP on CPUs without it).
static inline void lw__prefetch_for_write(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_SYS_H_
