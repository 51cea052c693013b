// tests/lanes/test_sys.c — the condvar deadline helper (condvars wait on CLOCK_MONOTONIC) and
// the process syscall wrappers (each returns -errno).
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "test_util.h"

// The deadline is a CLOCK_MONOTONIC value (seconds since boot). A condvar on the default
// CLOCK_REALTIME would read it as a moment decades ago and time out at once.
Test(sys, cond_wait_until_honours_a_monotonic_deadline, .timeout = 30) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  cr_assert_eq(lw__cond_init_monotonic(&cv), 0);
  pthread_mutex_lock(&mu);
  int64_t deadline = lw__now_ns() + 20ll * 1000 * 1000;
  int rc = 0;
  while (rc != ETIMEDOUT) {
    rc = lw__cond_wait_until(&cv, &mu, deadline);
    cr_assert(rc == 0 || rc == ETIMEDOUT, "rc %d", rc);
  }
  cr_assert_geq(lw__now_ns(), deadline, "timed out before the deadline");
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&cv);
}

Test(sys, cond_wait_until_in_the_past_times_out_at_once, .timeout = 30) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  cr_assert_eq(lw__cond_init_monotonic(&cv), 0);
  pthread_mutex_lock(&mu);
  cr_assert_eq(lw__cond_wait_until(&cv, &mu, lw__now_ns() - 1), ETIMEDOUT);
  cr_assert_eq(lw__cond_wait_until(&cv, &mu, 0), ETIMEDOUT);
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&cv);
}

// The process wrappers return -errno, never -1 with errno to read later.
Test(sys, pidfd_wrappers_kill_a_child_and_report_errors_as_negative_errno, .timeout = 30) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    for (;;) pause();
  }
  int fd = lw__sys_pidfd_open(pid);
  cr_assert_geq(fd, 0, "pidfd_open: %d", fd);
  cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "a pidfd must be close-on-exec");
  cr_assert_eq(lw__sys_pidfd_send_signal(fd, SIGKILL), 0);
  int ws = 0;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "status 0x%x", ws);
  // The pidfd still names the reaped process: signalling it fails, with ESRCH in the result.
  cr_assert_eq(lw__sys_pidfd_send_signal(fd, SIGKILL), -ESRCH);
  close(fd);
  // (Not pidfd_open of the reaped pid: another process may have been given it by now.)
  cr_assert_eq(lw__sys_pidfd_open(-1), -EINVAL);
  cr_assert_eq(lw__sys_pidfd_send_signal(-1, SIGKILL), -EBADF);
}

Test(sys, close_range_closes_the_range_and_reports_bad_arguments, .timeout = 30) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  int lo = fds[0] < fds[1] ? fds[0] : fds[1];
  int hi = fds[0] < fds[1] ? fds[1] : fds[0];
  cr_assert_eq(lw__sys_close_range((unsigned)lo, (unsigned)hi, 0), 0);
  cr_assert_eq(fcntl(fds[0], F_GETFD), -1, "fd %d still open", fds[0]);
  cr_assert_eq(fcntl(fds[1], F_GETFD), -1, "fd %d still open", fds[1]);
  cr_assert_eq(lw__sys_close_range(10, 5, 0), -EINVAL, "first > last must be refused");
}

// A quiet clone is the caller's child, but one that wait() and waitpid(-1) do not see and
// that sends no SIGCHLD: only waitpid(pid, __WALL) reaps it.
static volatile sig_atomic_t g_sigchld_seen;
static void on_sigchld(int sig) {
  (void)sig;
  g_sigchld_seen = 1;
}

Test(sys, clone_quiet_child_is_invisible_to_wait_and_sends_no_sigchld, .timeout = 30) {
  struct sigaction sa = {.sa_handler = on_sigchld}, old;
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGCHLD, &sa, &old), 0);
  g_sigchld_seen = 0;
  pid_t kid = lw__sys_clone_quiet();
  if (kid == 0) _exit(42);
  cr_assert_gt(kid, 0, "clone: %s", strerror(-kid));
  // Not waitable without __WALL: wait() finds no child at all.
  int ws = 0;
  errno = 0;
  cr_assert_eq(wait(&ws), -1);
  cr_assert_eq(errno, ECHILD);
  cr_assert_eq(waitpid(-1, &ws, WNOHANG), -1);
  cr_assert_eq(waitpid(kid, &ws, __WALL), kid);
  cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 42, "status 0x%x", ws);
  cr_assert_eq(g_sigchld_seen, 0, "a quiet clone must send no SIGCHLD");
  sigaction(SIGCHLD, &old, NULL);
}

// A thread that spins until told to stop: runnable all the time (running or waiting for a CPU).
typedef struct spinner {
  _Atomic int started;
  _Atomic int stop;
} spinner_t;

static void *spin_until_stopped(void *arg) {
  spinner_t *s = arg;
  atomic_fetch_add(&s->started, 1);
  while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
  }
  return NULL;
}

// The count is the machine's runnable threads: the caller and three threads that never stop
// running are among them, whatever else the machine runs. The most of reads spread over 200 ms:
// a CPU quota (a CI container's) takes throttled threads off the run queues for part of each
// period, never for all of it.
Test(sys, runnable_threads_counts_the_caller_and_busy_threads, .timeout = 30) {
  spinner_t s = {0, 0};
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) cr_assert_eq(pthread_create(&t[i], NULL, spin_until_stopped, &s), 0);
  while (atomic_load(&s.started) < 3) sched_yield();
  int most = -1;
  for (int i = 0; i < 40; ++i) {
    int n = lw__sys_runnable_threads();
    if (n > most) most = n;
    usleep(5000);
  }
  atomic_store(&s.stop, 1);
  for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
  cr_assert_geq(most, 4, "runnable threads at most %d: the caller and 3 spinners at least", most);
}
