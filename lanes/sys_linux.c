// lanes/sys_linux.c — the raw syscalls lanes/ needs, each wrapped once. Every wrapper returns
// 0 (or a count) or -errno; errno is read right after the syscall and nowhere else.
#include "lanes/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// pidfd_open and pidfd_send_signal are called as raw syscalls even where glibc wraps them
// (<sys/pidfd.h>, glibc 2.36): the wrappers add nothing, and without them a build needs only
// glibc 2.34, so one made on Debian 12 also runs on Ubuntu 22.04 (glibc 2.35), e.g. a
// scripts/gpu-check bundle. The numbers are the same on every architecture since Linux 5.3.
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int64_t lw__now_ns(void) {
  struct timespec ts;
  // CLOCK_MONOTONIC is the clock FUTEX_WAIT_BITSET uses for absolute deadlines, so deadlines
  // computed here can be handed to the kernel unchanged.
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

int64_t lw__deadline_after(int64_t timeout_ns) {
  if (timeout_ns < 0) return LW_DEADLINE_NEVER;  // LW_WAIT_FOREVER and any other negative
  int64_t now = lw__now_ns();
  // Saturate instead of overflowing: a huge timeout means "never" in practice.
  if (timeout_ns >= LW_DEADLINE_NEVER - now) return LW_DEADLINE_NEVER;
  return now + timeout_ns;
}

static long sys_futex(const _Atomic uint32_t *addr, int op, uint32_t val,
                      const struct timespec *ts, uint32_t val3) {
  // The futex syscall wants a plain int pointer; a lock-free _Atomic uint32_t has the same
  // size and representation, and the kernel accesses it atomically.
  return syscall(SYS_futex, (uint32_t *)(uintptr_t)addr, op, val, ts, NULL, val3);
}

int lw__sys_futex_wait(const _Atomic uint32_t *addr, uint32_t expected, int64_t deadline_ns,
                       bool shared) {
  struct timespec ts;
  const struct timespec *tsp = NULL;
  if (deadline_ns != LW_DEADLINE_NEVER) {
    if (deadline_ns < 0) deadline_ns = 0;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000LL);
    ts.tv_nsec = (long)(deadline_ns % 1000000000LL);
    tsp = &ts;
  }
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout (plain FUTEX_WAIT takes a
  // relative one), so a loop around spurious wake-ups never stretches the deadline.
  int op = FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG);
  long rc = sys_futex(addr, op, expected, tsp, FUTEX_BITSET_MATCH_ANY);
  if (rc < 0) return -errno;
  return 0;
}

int lw__sys_futex_wake(const _Atomic uint32_t *addr, int n, bool shared) {
  int op = FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG);
  long rc = sys_futex(addr, op, (uint32_t)n, NULL, 0);
  if (rc < 0) return -errno;
  return (int)rc;
}

int lw__cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc != 0) return rc;
  rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
  return rc;
}

int lw__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns) {
  if (deadline_ns == LW_DEADLINE_NEVER) return pthread_cond_wait(cv, mu);
  if (deadline_ns < 0) deadline_ns = 0;
  struct timespec ts = {(time_t)(deadline_ns / 1000000000LL), (long)(deadline_ns % 1000000000LL)};
  return pthread_cond_timedwait(cv, mu, &ts);
}

int lw__sys_pidfd_open(pid_t pid) {
  // Once refused as unknown (a kernel before 5.3, or valgrind, which warns at every call), it
  // is not asked again: the answer cannot change while the process runs.
  static _Atomic int refused;
  if (atomic_load_explicit(&refused, memory_order_relaxed)) return -ENOSYS;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0 && errno == ENOSYS) atomic_store_explicit(&refused, 1, memory_order_relaxed);
  return fd < 0 ? -errno : fd;
}

int lw__sys_pidfd_send_signal(int pidfd, int sig) {
  int rc = (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
  return rc < 0 ? -errno : 0;
}

int lw__sys_close_range(unsigned first, unsigned last, unsigned flags) {
  // glibc 2.34 and later wrap close_range; -ENOSYS comes back on older kernels.
  return close_range(first, last, (int)flags) < 0 ? -errno : 0;
}

pid_t lw__sys_clone_quiet(void) {
  // The raw syscall, not clone(3): glibc's wrapper wants a new stack and a function; with a
  // NULL stack the child returns here on a copy of the caller's stack, exactly as from fork.
  // Every pointer argument is NULL, so the architectures' different argument orders agree.
  // Flags 0: no CLONE_* sharing and exit signal 0.
  long pid = syscall(SYS_clone, 0UL, NULL, NULL, NULL, NULL);
  return pid < 0 ? -errno : (pid_t)pid;
}

int lw__sys_thread_start(pthread_t *out, const char *name, void *(*fn)(void *), void *arg) {
  sigset_t async, old;
  sigfillset(&async);
  const int sync[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
  for (size_t i = 0; i < sizeof(sync) / sizeof(sync[0]); ++i) sigdelset(&async, sync[i]);
  // The new thread inherits the mask of the creating one, which then gets its own back.
  pthread_sigmask(SIG_SETMASK, &async, &old);
  int rc = pthread_create(out, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0 && name != NULL) {
    // Linux thread names hold 15 characters plus the terminator; longer names are cut.
    char cut[16];
    snprintf(cut, sizeof(cut), "%s", name);
    (void)pthread_setname_np(*out, cut);  // cosmetic: ignore failure
  }
  return rc;
}

int lw__sys_cpu(void) { return sched_getcpu(); }

ssize_t lw__sys_read_small_file(const char *path, char *buf, size_t bytes) {
  if (bytes < 2) return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, bytes - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return n;
}

int lw__sys_runnable_threads(void) {
  // "0.52 0.58 0.59 3/412 12345": the runnable count is the number before the '/'.
  char buf[128];
  if (lw__sys_read_small_file("/proc/loadavg", buf, sizeof(buf)) < 0) return -1;
  // The load averages are skipped as words, not read as numbers (%lf follows LC_NUMERIC). A
  // count below 1 is none (the caller is runnable): some sandboxes (gVisor) print 0/0.
  int runnable, total;
  if (sscanf(buf, "%*s %*s %*s %d/%d", &runnable, &total) != 2 || runnable < 1) return -1;
  return runnable;
}
