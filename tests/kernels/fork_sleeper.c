// tests/kernels/fork_sleeper.c — forks a process that sleeps until it is killed, and returns.
//   tensor[0]: int32 pid out: the sleeper's pid, stored once it exists
//   scalar[0] (optional): 0 the sleeper is the kernel's own child; 1 double fork: an
//             intermediate calls setsid, forks the sleeper and exits at once, so the sleeper is
//             an orphan from the start (a daemon)
// The sleeper never asks for a death signal and ignores its parent: only a kill ends it. Lets
// tests check that lw_worker_destroy and the parent's death take down what a kernel forked.
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanework/kernel.h"

static _Noreturn void sleep_forever(void) {
  for (;;) pause();
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  if (args->n_tensors < 1 || args->tensor[0].bytes < sizeof(int32_t)) return -22;
  _Atomic int32_t *out = args->tensor[0].data;
  bool daemon = args->n_scalars > 0 && args->scalar[0] == 1;
  // The pipe carries the sleeper's pid from the intermediate (double fork) or is unused.
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -2;
  if (pid == 0) {
    close(fds[0]);
    if (!daemon) sleep_forever();
    (void)setsid();
    pid_t sleeper = fork();
    if (sleeper == 0) {
      close(fds[1]);
      sleep_forever();
    }
    int32_t v = (int32_t)sleeper;
    ssize_t n = write(fds[1], &v, sizeof(v));
    _exit(n == (ssize_t)sizeof(v) && sleeper > 0 ? 0 : 1);
  }
  close(fds[1]);
  int32_t sleeper = (int32_t)pid;
  int rc = 0;
  if (daemon) {
    ssize_t n = read(fds[0], &sleeper, sizeof(sleeper));
    int ws = 0;
    pid_t r;
    while ((r = waitpid(pid, &ws, 0)) < 0 && errno == EINTR) {
    }
    if (n != (ssize_t)sizeof(sleeper) || r != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
      rc = -3;
    }
  }
  close(fds[0]);
  if (rc == 0) atomic_store(out, sleeper);
  return rc;
}
