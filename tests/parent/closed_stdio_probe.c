// tests/parent/closed_stdio_probe.c — a program started with stdio closed (by
// test_closed_stdio.c), so liblanework is loaded with fds 0..2 free. It creates a worker and
// checks that no fd of lanework's took a stdio number: not in this program (its own writes to
// "stdout" would land in a memfd or socket), not in the zygote, the fork server or a child (a
// kernel's printf would go to the server's control socket). Findings go to the fd named by
// argv[1]; the exit status is 0 when there were none.
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lanework/worker.h"
#include "parent/forkserver.h"
#include "parent/worker_impl.h"

static int g_report = -1;
static int g_problems;

static void problem(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof(buf) - 2) n = (int)sizeof(buf) - 2;
  buf[n++] = '\n';
  (void)!write(g_report, buf, (size_t)n);
  g_problems++;
}

// What fd i of pid is: "" when closed, else its /proc link target.
static void fd_target(pid_t pid, int i, char *out, size_t bytes) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, i);
  ssize_t n = readlink(path, out, bytes - 1);
  out[n < 0 ? 0 : n] = '\0';
}

// The program's own stdio numbers stay closed: lanework opened nothing there.
static void check_self(const char *when) {
  for (int i = 0; i <= 2; ++i) {
    char t[256];
    fd_target(getpid(), i, t, sizeof(t));
    if (t[0] != '\0') problem("program fd %d is %s %s", i, t, when);
  }
}

// A process of lanework's has /dev/null where the program had no stdio.
static void check_proc(const char *what, pid_t pid) {
  if (pid <= 0) {
    problem("%s: no pid", what);
    return;
  }
  for (int i = 0; i <= 2; ++i) {
    char t[256];
    fd_target(pid, i, t, sizeof(t));
    if (strcmp(t, "/dev/null") != 0) {
      problem("%s (pid %d) fd %d is '%s', not /dev/null", what, (int)pid, i, t);
    }
  }
}

static void *sleeper(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

// argv[2] "threaded": a thread exists before create, so there is no zygote and no sub child.
int main(int argc, char **argv) {
  if (argc < 2) return 2;
  g_report = atoi(argv[1]);
  bool threaded = argc > 2 && strcmp(argv[2], "threaded") == 0;
  check_self("before create");
  pthread_t t;
  if (threaded && pthread_create(&t, NULL, sleeper, NULL) != 0) return 3;
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.n_subs = threaded ? 0 : 1;
  cfg.arena_bytes = 4ull << 20;
  lw_worker_t *w = NULL;
  if (lw_worker_create(&cfg, &w) != LW_OK) {
    problem("create failed: %s", lw_last_error()->message);
    return 1;
  }
  check_self("after create");
  if (threaded) {
    if (lw__forkserver_zygote_pid() != 0) problem("a zygote was made in a threaded program");
  } else {
    check_proc("zygote", lw__forkserver_zygote_pid());
    check_proc("sub server", lw__forkserver_pid(w->fs_subs));
  }
  check_proc("chip server", lw__forkserver_pid(w->fs));
  for (uint32_t s = 0; s < w->n_children; ++s) {
    char what[32];
    snprintf(what, sizeof(what), "child %u", s);
    check_proc(what, atomic_load(&w->eps[s].pid));
  }
  lw_worker_destroy(w);
  return g_problems == 0 ? 0 : 1;
}
