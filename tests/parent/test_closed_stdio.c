// tests/parent/test_closed_stdio.c — a program started with stdio closed: no fd of lanework's
// may take number 0, 1 or 2, in the program or in its zygote, fork server or children. The
// program is closed_stdio_probe, exec'd with fds 0..2 closed (so liblanework is loaded that
// way); it reports what it found through a pipe.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

enum { kReportFd = 9 };

static void run_probe(const char *mode, char *out, size_t bytes, int *out_status) {
  int p[2];
  cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (dup2(p[1], kReportFd) < 0) _exit(126);
    close(0);
    close(1);
    close(2);
    char fd_arg[16];
    snprintf(fd_arg, sizeof(fd_arg), "%d", kReportFd);
    execl(LW_PROBE_PATH, LW_PROBE_PATH, fd_arg, mode, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  size_t len = 0;
  for (;;) {
    ssize_t n = read(p[0], out + len, bytes - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    if (len == bytes - 1) break;
  }
  out[len] = '\0';
  close(p[0]);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  *out_status = ws;
}

Test(closed_stdio, no_fd_of_lanework_takes_a_free_stdio_number, .timeout = 60) {
  char out[4096];
  int ws = 0;
  run_probe(NULL, out, sizeof(out), &ws);
  cr_assert(WIFEXITED(ws), "probe died: wait status 0x%x; %s", (unsigned)ws, out);
  cr_assert_eq(WEXITSTATUS(ws), 0, "probe found:\n%s", out);
}

// A threaded program gets no zygote: its chip children's server is the exec'd helper, which
// starts with the program's stdio numbers closed and must not let its fds take them.
Test(closed_stdio, no_fd_of_lanework_takes_a_free_stdio_number_in_a_threaded_program,
     .timeout = 60) {
  char out[4096];
  int ws = 0;
  run_probe("threaded", out, sizeof(out), &ws);
  cr_assert(WIFEXITED(ws), "probe died: wait status 0x%x; %s", (unsigned)ws, out);
  cr_assert_eq(WEXITSTATUS(ws), 0, "probe found:\n%s", out);
}
