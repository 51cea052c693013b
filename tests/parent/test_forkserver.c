// tests/parent/test_forkserver.c — the fork server: spawn, exit reporting, stop, parent death.
//
// Children run child_main with a page of MAP_SHARED memory (shared_t) as arg: the test writes
// each slot's behaviour there before spawning, and the children report back through it.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/sys.h"
#include "parent/forkserver.h"
#include "test_util.h"

enum child_mode {
  MODE_WAIT_EXIT = 0,  // wait for go[index], then _exit(code[index])
  MODE_EXIT_NOW = 1,   // _exit(code[index]) at once
  MODE_SEGV = 2,       // wait for go[index], then die of SIGSEGV
  MODE_PAUSE = 3,      // pause() forever
  MODE_REPORT = 4,     // report what the child sees, then wait for go[index] and _exit(0)
};

typedef struct shared {
  uint64_t magic;  // written before lw__forkserver_start
  _Atomic uint32_t mode[LW_FS_MAX_CHILDREN];
  _Atomic uint32_t go[LW_FS_MAX_CHILDREN];
  _Atomic int32_t code[LW_FS_MAX_CHILDREN];
  _Atomic uint32_t reported[LW_FS_MAX_CHILDREN];
  _Atomic uint64_t seen_magic[LW_FS_MAX_CHILDREN];
  _Atomic int32_t seen_global[LW_FS_MAX_CHILDREN];
  _Atomic int32_t seen_threads[LW_FS_MAX_CHILDREN];
  _Atomic int32_t seen_ppid[LW_FS_MAX_CHILDREN];
  // Parent-death test: the intermediate process publishes its server and children here.
  _Atomic int32_t mid_pids[3];
  _Atomic uint32_t mid_ready;
  // Signal-handler test: how often the program's SIGWINCH handler ran, and in which process.
  _Atomic uint32_t winch_count;
  _Atomic int32_t winch_pid;
} shared_t;

// Private (not shared) memory: children see the value it had when the server was forked.
static int g_program_value;

// ThreadSanitizer starts its own background thread in every forked child (the fork server
// and its children alike); that thread is TSan's, not lanework's.
#if defined(__SANITIZE_THREAD__)
#define RUNTIME_THREADS 1
#else
#define RUNTIME_THREADS 0
#endif

static int thread_count(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int n = -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  }
  fclose(f);
  return n;
}

static void wait_go(shared_t *sh, uint32_t index) {
  while (atomic_load(&sh->go[index]) == 0) lw_test_sleep_us(500);
}

static void child_main(void *arg, uint32_t index) {
  shared_t *sh = arg;
  switch (atomic_load(&sh->mode[index])) {
    case MODE_WAIT_EXIT:
      wait_go(sh, index);
      _exit(atomic_load(&sh->code[index]));
    case MODE_EXIT_NOW:
      _exit(atomic_load(&sh->code[index]));
    case MODE_SEGV: {
      wait_go(sh, index);
      // No core file (keeps the status exactly "killed by SIGSEGV"), and the default action
      // even where a sanitizer installed a SIGSEGV handler.
      struct rlimit none = {0, 0};
      setrlimit(RLIMIT_CORE, &none);
      signal(SIGSEGV, SIG_DFL);
      raise(SIGSEGV);
      _exit(99);
    }
    case MODE_PAUSE:
      for (;;) pause();
    case MODE_REPORT:
      atomic_store(&sh->seen_magic[index], sh->magic);
      atomic_store(&sh->seen_global[index], g_program_value);
      atomic_store(&sh->seen_threads[index], thread_count(getpid()));
      atomic_store(&sh->seen_ppid[index], (int32_t)getppid());
      atomic_store(&sh->reported[index], 1);
      wait_go(sh, index);
      _exit(0);
    default:
      _exit(98);
  }
}

static shared_t *shared_new(void) {
  void *p = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
  return p;
}

static void shared_free(shared_t *sh) { munmap(sh, sizeof(*sh)); }

static lw_forkserver_t *start_fs(shared_t *sh, uint32_t n_slots) {
  lw_forkserver_t *fs = NULL;
  lw_error_t err;
  lw_status_t st = lw__forkserver_start(child_main, sh, n_slots, &fs, &err);
  cr_assert_eq(st, LW_OK, "start -> %s: %s", lw_status_name(st), err.message);
  cr_assert_not_null(fs);
  return fs;
}

static void spawn_ok(lw_forkserver_t *fs, uint32_t index, pid_t *pid, int *pidfd) {
  lw_error_t err;
  lw_status_t st =
      lw__forkserver_spawn(fs, index, lw__deadline_after(10000000000LL), pid, pidfd, &err);
  cr_assert_eq(st, LW_OK, "spawn(%u) -> %s: %s", index, lw_status_name(st), err.message);
  cr_assert_gt(*pid, 0);
  cr_assert_geq(*pidfd, 0);
}

// Waits until fd is readable; false after timeout_ms.
static bool readable_within(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int rc;
  while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  return rc == 1 && (p.revents & POLLIN) != 0;
}

typedef struct exit_rec {
  uint32_t index;
  pid_t pid;
  int wait_status;
} exit_rec_t;

typedef struct exits {
  int n;
  exit_rec_t r[1024];
} exits_t;

static void on_exit_cb(void *ctx, uint32_t index, pid_t pid, int wait_status) {
  exits_t *ex = ctx;
  if (ex->n < (int)(sizeof(ex->r) / sizeof(ex->r[0]))) {
    ex->r[ex->n++] = (exit_rec_t){index, pid, wait_status};
  }
}

// Drains EXITs until at least n were seen, waiting on lw__forkserver_fd as an event loop would.
static void collect_exits(lw_forkserver_t *fs, exits_t *ex, int n) {
  LW_ASSERT_OK(lw__forkserver_poll_exit(fs, on_exit_cb, ex, NULL));
  while (ex->n < n) {
    cr_assert(readable_within(lw__forkserver_fd(fs), 10000), "no EXIT within 10 s (%d of %d)",
              ex->n, n);
    LW_ASSERT_OK(lw__forkserver_poll_exit(fs, on_exit_cb, ex, NULL));
  }
}

static const char *describe(int wait_status, char *buf, size_t bytes) {
  lw__forkserver_describe_status(wait_status, buf, bytes);
  return buf;
}

// Gone: no such process, or a zombie of init or a subreaper (dead, not yet reaped there).
static bool pid_gone(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return true;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');  // the command name may contain spaces and parentheses
  return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static bool pid_strictly_gone(pid_t pid) { return kill(pid, 0) == -1 && errno == ESRCH; }

static shared_t *g_handler_shared;

static void on_winch(int sig) {
  (void)sig;
  atomic_fetch_add(&g_handler_shared->winch_count, 1);
  atomic_store(&g_handler_shared->winch_pid, (int32_t)getpid());
}

// --------------------------------------------------------------------------------------------

Test(forkserver, spawn_returns_pid_and_pidfd_readable_on_exit, .timeout = 30) {
  shared_t *sh = shared_new();
  atomic_store(&sh->mode[0], MODE_WAIT_EXIT);
  atomic_store(&sh->code[0], 3);
  int fds_before = lw_test_fd_count();
  lw_forkserver_t *fs = start_fs(sh, 2);
  cr_assert_gt(lw__forkserver_pid(fs), 0);
  cr_assert_geq(lw__forkserver_fd(fs), 0);

  pid_t pid;
  int pidfd;
  spawn_ok(fs, 0, &pid, &pidfd);
  cr_assert_neq(pid, lw__forkserver_pid(fs));
  cr_assert(fcntl(pidfd, F_GETFD) & FD_CLOEXEC, "pidfd must be close-on-exec");
  cr_assert_not(readable_within(pidfd, 0), "pidfd readable while the child runs");
  int ws = -1;
  cr_assert_not(lw__forkserver_exit_status(fs, 0, pid, &ws));

  atomic_store(&sh->go[0], 1);
  cr_assert(readable_within(pidfd, 10000), "pidfd not readable after the child exited");
  exits_t ex = {0};
  collect_exits(fs, &ex, 1);
  cr_assert_eq(ex.n, 1);
  cr_assert_eq(ex.r[0].index, 0);
  cr_assert_eq(ex.r[0].pid, pid);
  cr_assert(WIFEXITED(ex.r[0].wait_status) && WEXITSTATUS(ex.r[0].wait_status) == 3);
  cr_assert(lw__forkserver_exit_status(fs, 0, pid, &ws));
  cr_assert_eq(ws, ex.r[0].wait_status);
  char buf[64];
  cr_assert_str_eq(describe(ws, buf, sizeof(buf)), "exited with status 3");

  close(pidfd);
  lw__forkserver_stop(fs);
  cr_assert_eq(lw_test_fd_count(), fds_before, "fds leaked");
  cr_assert_eq(lw_test_child_count(), 0, "children left behind");
  shared_free(sh);
}

Test(forkserver, exit_statuses_are_published_and_described, .timeout = 30) {
  shared_t *sh = shared_new();
  for (uint32_t i = 0; i < 3; ++i) atomic_store(&sh->code[i], (int32_t)i + 3);
  atomic_store(&sh->mode[1], MODE_SEGV);
  lw_forkserver_t *fs = start_fs(sh, 3);
  pid_t pid[3];
  int pidfd[3];
  for (uint32_t i = 0; i < 3; ++i) spawn_ok(fs, i, &pid[i], &pidfd[i]);
  for (uint32_t i = 0; i < 3; ++i) atomic_store(&sh->go[i], 1);

  exits_t ex = {0};
  collect_exits(fs, &ex, 3);
  cr_assert_eq(ex.n, 3);
  const char *want[3] = {"exited with status 3", "killed by SIGSEGV", "exited with status 5"};
  bool seen[3] = {false, false, false};
  char buf[64];
  for (int k = 0; k < ex.n; ++k) {
    uint32_t i = ex.r[k].index;
    cr_assert_lt(i, 3);
    cr_assert_not(seen[i], "slot %u reported twice", i);
    seen[i] = true;
    cr_assert_eq(ex.r[k].pid, pid[i]);
    cr_assert_str_eq(describe(ex.r[k].wait_status, buf, sizeof(buf)), want[i]);
    int ws = -1;
    cr_assert(lw__forkserver_exit_status(fs, i, pid[i], &ws));
    cr_assert_eq(ws, ex.r[k].wait_status);
    cr_assert(readable_within(pidfd[i], 0));
    close(pidfd[i]);
  }
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, sigkill_from_outside_is_reported, .timeout = 30) {
  shared_t *sh = shared_new();
  atomic_store(&sh->mode[0], MODE_PAUSE);
  lw_forkserver_t *fs = start_fs(sh, 1);
  pid_t pid;
  int pidfd;
  spawn_ok(fs, 0, &pid, &pidfd);
  cr_assert_eq(kill(pid, SIGKILL), 0);
  cr_assert(readable_within(pidfd, 10000));
  exits_t ex = {0};
  collect_exits(fs, &ex, 1);
  char buf[64];
  cr_assert_eq(ex.r[0].pid, pid);
  cr_assert_str_eq(describe(ex.r[0].wait_status, buf, sizeof(buf)), "killed by SIGKILL");
  close(pidfd);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, respawn_gives_new_pid_and_both_exits_in_order, .timeout = 30) {
  shared_t *sh = shared_new();
  lw_forkserver_t *fs = start_fs(sh, 1);
  pid_t pid[2];
  int pidfd[2];
  for (int round = 0; round < 2; ++round) {
    atomic_store(&sh->go[0], 0);
    atomic_store(&sh->code[0], 5 + round);
    spawn_ok(fs, 0, &pid[round], &pidfd[round]);
    atomic_store(&sh->go[0], 1);
    // Respawn as soon as the pidfd says the child died, as the worker does; the server may
    // not have reaped it yet, and the spawn must still succeed.
    cr_assert(readable_within(pidfd[round], 10000));
    close(pidfd[round]);
  }
  cr_assert_neq(pid[0], pid[1]);
  exits_t ex = {0};
  collect_exits(fs, &ex, 2);
  cr_assert_eq(ex.n, 2);
  for (int k = 0; k < 2; ++k) {
    cr_assert_eq(ex.r[k].index, 0);
    cr_assert_eq(ex.r[k].pid, pid[k], "exit %d: pid %d, want %d", k, ex.r[k].pid, pid[k]);
    cr_assert_eq(WEXITSTATUS(ex.r[k].wait_status), 5 + k);
  }
  int ws = -1;
  cr_assert_not(lw__forkserver_exit_status(fs, 0, pid[0], &ws), "slot was respawned");
  cr_assert(lw__forkserver_exit_status(fs, 0, pid[1], &ws));
  cr_assert_eq(WEXITSTATUS(ws), 6);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, spawn_into_busy_slot_fails_precondition, .timeout = 30) {
  shared_t *sh = shared_new();
  atomic_store(&sh->mode[0], MODE_PAUSE);
  lw_forkserver_t *fs = start_fs(sh, 1);
  pid_t pid, pid2 = 123;
  int pidfd, pidfd2 = 123;
  spawn_ok(fs, 0, &pid, &pidfd);
  lw_error_t err;
  lw_status_t st =
      lw__forkserver_spawn(fs, 0, lw__deadline_after(10000000000LL), &pid2, &pidfd2, &err);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "%s", lw_status_name(st));
  cr_assert(strstr(err.message, "live child") != NULL, "%s", err.message);
  cr_assert_eq(err.worker_id, 0);
  cr_assert_eq(pid2, 0);
  cr_assert_eq(pidfd2, -1);

  kill(pid, SIGKILL);
  cr_assert(readable_within(pidfd, 10000));
  close(pidfd);
  // Drain without a callback, as an event loop that reads statuses from the table does.
  cr_assert(readable_within(lw__forkserver_fd(fs), 10000));
  LW_ASSERT_OK(lw__forkserver_poll_exit(fs, NULL, NULL, NULL));
  cr_assert_not(readable_within(lw__forkserver_fd(fs), 0));
  int ws = -1;
  cr_assert(lw__forkserver_exit_status(fs, 0, pid, &ws));
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  spawn_ok(fs, 0, &pid2, &pidfd2);
  close(pidfd2);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, children_see_memory_as_it_was_at_start, .timeout = 30) {
  shared_t *sh = shared_new();
  sh->magic = 0x6c616e65776f726bULL;
  g_program_value = 41;
  lw_forkserver_t *fs = start_fs(sh, 2);
  g_program_value = 42;  // private memory: the server's copy keeps 41
  atomic_store(&sh->mode[1], MODE_REPORT);  // shared memory: written after start, still seen
  pid_t pid;
  int pidfd;
  spawn_ok(fs, 1, &pid, &pidfd);
  while (atomic_load(&sh->reported[1]) == 0) lw_test_sleep_us(200);
  cr_assert_eq(atomic_load(&sh->seen_magic[1]), 0x6c616e65776f726bULL);
  cr_assert_eq(atomic_load(&sh->seen_global[1]), 41);
  cr_assert_eq(atomic_load(&sh->seen_ppid[1]), lw__forkserver_pid(fs));
  atomic_store(&sh->go[1], 1);
  exits_t ex = {0};
  collect_exits(fs, &ex, 1);
  cr_assert_eq(ex.r[0].wait_status, 0);
  close(pidfd);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, stop_kills_paused_children_and_leaves_nothing, .timeout = 30) {
  shared_t *sh = shared_new();
  int fds_before = lw_test_fd_count();
  lw_forkserver_t *fs = start_fs(sh, 4);
  pid_t pid[4];
  int pidfd[4];
  for (uint32_t i = 0; i < 4; ++i) {
    atomic_store(&sh->mode[i], MODE_PAUSE);
    spawn_ok(fs, i, &pid[i], &pidfd[i]);
  }
  pid_t server = lw__forkserver_pid(fs);
  cr_assert_eq(thread_count(server), 1 + RUNTIME_THREADS);
  lw__forkserver_stop(fs);

  // STOPPED comes after the server reaped every child, and stop reaps the server.
  for (int i = 0; i < 4; ++i) {
    cr_assert(readable_within(pidfd[i], 0), "child %d still running after stop", i);
    cr_assert(pid_strictly_gone(pid[i]), "child %d (pid %d) still exists", i, (int)pid[i]);
    close(pidfd[i]);
  }
  cr_assert(pid_strictly_gone(server), "server (pid %d) still exists", (int)server);
  cr_assert_eq(lw_test_child_count(), 0);
  cr_assert_eq(lw_test_fd_count(), fds_before, "fds leaked");
  lw__forkserver_stop(NULL);
  shared_free(sh);
}

Test(forkserver, parent_death_takes_server_and_children_down, .timeout = 60) {
  shared_t *sh = shared_new();
  atomic_store(&sh->mode[0], MODE_PAUSE);
  atomic_store(&sh->mode[1], MODE_PAUSE);
  // The "worker": an intermediate process that starts a server and two children, then waits
  // to be killed. It is not a subreaper, so the server's only death notice is its pidfd.
  pid_t mid = fork();
  cr_assert_geq(mid, 0);
  if (mid == 0) {
    lw_forkserver_t *fs = NULL;
    if (lw__forkserver_start(child_main, sh, 2, &fs, NULL) != LW_OK) _exit(2);
    atomic_store(&sh->mid_pids[0], lw__forkserver_pid(fs));
    for (uint32_t i = 0; i < 2; ++i) {
      pid_t pid;
      int pidfd;
      if (lw__forkserver_spawn(fs, i, LW_DEADLINE_NEVER, &pid, &pidfd, NULL) != LW_OK) _exit(3);
      atomic_store(&sh->mid_pids[1 + i], pid);
    }
    atomic_store(&sh->mid_ready, 1);
    for (;;) pause();
  }
  while (atomic_load(&sh->mid_ready) == 0) {
    int ws;
    cr_assert_eq(waitpid(mid, &ws, WNOHANG), 0, "intermediate died early (status 0x%x)", ws);
    lw_test_sleep_us(1000);
  }
  pid_t pids[3];
  for (int k = 0; k < 3; ++k) {
    pids[k] = atomic_load(&sh->mid_pids[k]);
    cr_assert_gt(pids[k], 0);
    cr_assert_not(pid_gone(pids[k]));
  }

  int64_t t0 = lw__now_ns();
  cr_assert_eq(kill(mid, SIGKILL), 0);
  int ws = 0;
  cr_assert_eq(waitpid(mid, &ws, 0), mid);
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  // Bounded by the test's timeout.
  for (;;) {
    bool all = true;
    for (int k = 0; k < 3; ++k) all = all && pid_gone(pids[k]);
    if (all) break;
    lw_test_sleep_us(5000);
  }
  double ms = (double)(lw__now_ns() - t0) / 1e6;
  fprintf(stderr, "forkserver: parent death -> server and 2 children gone in %.2f ms\n", ms);
  shared_free(sh);
}

static _Atomic uint32_t g_threads_release;

static void *idle_thread(void *arg) {
  (void)arg;
  while (atomic_load(&g_threads_release) == 0) lw_test_sleep_us(1000);
  return NULL;
}

Test(forkserver, server_is_single_threaded_after_parent_starts_threads, .timeout = 30) {
  shared_t *sh = shared_new();
  lw_forkserver_t *fs = start_fs(sh, 1);
  pthread_t th[3];
  atomic_store(&g_threads_release, 0);
  for (int i = 0; i < 3; ++i) cr_assert_eq(pthread_create(&th[i], NULL, idle_thread, NULL), 0);
  cr_assert_geq(thread_count(getpid()), 4);

  atomic_store(&sh->mode[0], MODE_REPORT);
  pid_t pid;
  int pidfd;
  spawn_ok(fs, 0, &pid, &pidfd);
  while (atomic_load(&sh->reported[0]) == 0) lw_test_sleep_us(200);
  cr_assert_eq(thread_count(lw__forkserver_pid(fs)), 1 + RUNTIME_THREADS);
  cr_assert_eq(atomic_load(&sh->seen_threads[0]), 1 + RUNTIME_THREADS);
  atomic_store(&sh->go[0], 1);

  atomic_store(&g_threads_release, 1);
  for (int i = 0; i < 3; ++i) pthread_join(th[i], NULL);
  close(pidfd);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, describe_status_formats, .timeout = 10) {
  char buf[64];
  cr_assert_str_eq(describe(0, buf, sizeof(buf)), "exited with status 0");
  cr_assert_str_eq(describe(3 << 8, buf, sizeof(buf)), "exited with status 3");
  cr_assert_str_eq(describe(255 << 8, buf, sizeof(buf)), "exited with status 255");
  const struct {
    int sig;
    const char *name;
  } sigs[] = {{SIGSEGV, "killed by SIGSEGV"}, {SIGABRT, "killed by SIGABRT"},
              {SIGKILL, "killed by SIGKILL"}, {SIGTERM, "killed by SIGTERM"},
              {SIGBUS, "killed by SIGBUS"},   {SIGILL, "killed by SIGILL"},
              {SIGFPE, "killed by SIGFPE"},   {SIGINT, "killed by SIGINT"}};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) {
    cr_assert_str_eq(describe(sigs[i].sig, buf, sizeof(buf)), sigs[i].name);
  }
  cr_assert_str_eq(describe(SIGSEGV | 0x80, buf, sizeof(buf)),
                   "killed by SIGSEGV (core dumped)");
  char want[64];
  snprintf(want, sizeof(want), "killed by signal %d", SIGRTMIN + 2);
  cr_assert_str_eq(describe(SIGRTMIN + 2, buf, sizeof(buf)), want);
  char small[8];
  cr_assert_str_eq(describe(3 << 8, small, sizeof(small)), "exited ");
  lw__forkserver_describe_status(0, NULL, 0);  // no crash
}

Test(forkserver, bad_arguments_get_clear_errors, .timeout = 10) {
  lw_forkserver_t *fs = (lw_forkserver_t *)(uintptr_t)1;
  cr_assert_eq(lw__forkserver_start(NULL, NULL, 1, &fs, NULL), LW_INVALID_ARGUMENT);
  cr_assert_null(fs);
  cr_assert_eq(lw__forkserver_start(child_main, NULL, 0, &fs, NULL), LW_INVALID_ARGUMENT);
  lw_error_t start_err;
  cr_assert_eq(lw__forkserver_start(child_main, NULL, LW_FS_MAX_CHILDREN + 1, &fs, &start_err),
               LW_INVALID_ARGUMENT);
  cr_assert(strstr(start_err.message, "n_slots") != NULL, "%s", start_err.message);
  cr_assert_eq(lw__forkserver_start(child_main, NULL, 1, NULL, NULL), LW_INVALID_ARGUMENT);

  shared_t *sh = shared_new();
  fs = start_fs(sh, 2);
  pid_t pid;
  int pidfd;
  lw_error_t err;
  cr_assert_eq(lw__forkserver_spawn(fs, 2, LW_DEADLINE_NEVER, &pid, &pidfd, &err),
               LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "out of range") != NULL, "%s", err.message);
  cr_assert_eq(lw__forkserver_spawn(NULL, 0, LW_DEADLINE_NEVER, &pid, &pidfd, NULL),
               LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__forkserver_spawn(fs, 0, LW_DEADLINE_NEVER, NULL, &pidfd, NULL),
               LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__forkserver_poll_exit(NULL, on_exit_cb, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__forkserver_poll_exit(fs, NULL, NULL, NULL), LW_OK);  // fn NULL: drain only
  int ws;
  cr_assert_not(lw__forkserver_exit_status(fs, 5, 1, &ws));
  cr_assert_not(lw__forkserver_exit_status(NULL, 0, 1, &ws));
  cr_assert_eq(lw__forkserver_fd(NULL), -1);
  lw__forkserver_stop(fs);
  lw__forkserver_stop(NULL);
  shared_free(sh);
}

// The fork server is below the public API: its failures come back in the caller's err, and a
// caller's thread-local last error (what its user reads after a public call) is never
// overwritten behind its back (lanes/error.h).
Test(forkserver, failures_fill_err_and_leave_the_last_error_alone, .timeout = 10) {
  lw__fail(LW_POISONED, "set by the test");
  lw_forkserver_t *fs = NULL;
  lw_error_t err;
  cr_assert_eq(lw__forkserver_start(child_main, NULL, 0, &fs, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(err.code, LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "n_slots 0") != NULL, "%s", err.message);
  cr_assert_eq(lw__forkserver_start_spec(NULL, &fs, &err), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "forkserver: spec is NULL");
  pid_t pid;
  int pidfd;
  cr_assert_eq(lw__forkserver_spawn(NULL, 0, LW_DEADLINE_NEVER, &pid, &pidfd, &err),
               LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "forkserver: fs is NULL");
  cr_assert_eq(lw__forkserver_poll_exit(NULL, NULL, NULL, &err), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "forkserver: poll_exit: fs is NULL");
  cr_assert_eq(lw_last_error()->code, LW_POISONED);
  cr_assert_str_eq(lw_last_error()->message, "set by the test");
}

Test(forkserver, server_death_is_unavailable_and_children_follow, .timeout = 30) {
  shared_t *sh = shared_new();
  int fds_before = lw_test_fd_count();
  lw_forkserver_t *fs = start_fs(sh, 2);
  pid_t pid[2];
  int pidfd[2];
  for (uint32_t i = 0; i < 2; ++i) {
    atomic_store(&sh->mode[i], MODE_PAUSE);
    spawn_ok(fs, i, &pid[i], &pidfd[i]);
  }
  pid_t server = lw__forkserver_pid(fs);
  cr_assert_eq(kill(server, SIGKILL), 0);

  cr_assert(readable_within(lw__forkserver_fd(fs), 10000), "no EOF on the event socket");
  exits_t ex = {0};
  lw_error_t poll_err;
  cr_assert_eq(lw__forkserver_poll_exit(fs, on_exit_cb, &ex, &poll_err), LW_UNAVAILABLE);
  cr_assert(strstr(poll_err.message, "killed by SIGKILL") != NULL, "%s", poll_err.message);
  pid_t p2;
  int fd2;
  lw_error_t err;
  cr_assert_eq(lw__forkserver_spawn(fs, 0, lw__deadline_after(1000000000), &p2, &fd2, &err),
               LW_UNAVAILABLE);
  cr_assert(strstr(err.message, "fork server") != NULL, "%s", err.message);
  // PR_SET_PDEATHSIG takes the children down with the server.
  for (int i = 0; i < 2; ++i) {
    cr_assert(readable_within(pidfd[i], 10000), "child %d outlived the server", i);
    close(pidfd[i]);
  }
  lw__forkserver_stop(fs);
  for (int i = 0; i < 2; ++i) {
    while (!pid_gone(pid[i])) lw_test_sleep_us(1000);
  }
  cr_assert(pid_strictly_gone(server));
  cr_assert_eq(lw_test_child_count(), 0);
  cr_assert_eq(lw_test_fd_count(), fds_before, "fds leaked");
  shared_free(sh);
}

Test(forkserver, child_dying_at_once_is_ok_or_child_exited, .timeout = 60) {
  shared_t *sh = shared_new();
  atomic_store(&sh->mode[0], MODE_EXIT_NOW);
  atomic_store(&sh->code[0], 7);
  lw_forkserver_t *fs = start_fs(sh, 1);
  int n_ok = 0, n_exited = 0;
  for (int k = 0; k < 30; ++k) {
    pid_t pid;
    int pidfd;
    lw_error_t err;
    lw_status_t st =
        lw__forkserver_spawn(fs, 0, lw__deadline_after(10000000000LL), &pid, &pidfd, &err);
    if (st == LW_OK) {
      n_ok++;
      cr_assert(readable_within(pidfd, 10000));
      close(pidfd);
    } else {
      n_exited++;
      cr_assert_eq(st, LW_CHILD_EXITED, "%s: %s", lw_status_name(st), err.message);
      cr_assert(strstr(err.message, "exited with status 7") != NULL, "%s", err.message);
      cr_assert_eq(pidfd, -1);
    }
  }
  exits_t ex = {0};
  collect_exits(fs, &ex, 30);
  cr_assert_eq(ex.n, 30);
  for (int k = 0; k < ex.n; ++k) cr_assert_eq(WEXITSTATUS(ex.r[k].wait_status), 7);
  fprintf(stderr, "forkserver: instant exits: %d spawns OK, %d CHILD_EXITED\n", n_ok, n_exited);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

Test(forkserver, late_reply_after_deadline_kills_the_orphan, .timeout = 30) {
  shared_t *sh = shared_new();
  atomic_store(&sh->mode[0], MODE_PAUSE);
  atomic_store(&sh->mode[1], MODE_PAUSE);
  lw_forkserver_t *fs = start_fs(sh, 2);
  pid_t server = lw__forkserver_pid(fs);
  cr_assert_eq(kill(server, SIGSTOP), 0);
  pid_t pid;
  int pidfd;
  lw_error_t err;
  lw_status_t st =
      lw__forkserver_spawn(fs, 0, lw__deadline_after(100000000), &pid, &pidfd, &err);
  cr_assert_eq(st, LW_DEADLINE_EXCEEDED, "%s", lw_status_name(st));
  cr_assert(strstr(err.message, "deadline") != NULL, "%s", err.message);
  cr_assert_eq(kill(server, SIGCONT), 0);

  // This spawn reads the late SPAWNED for slot 0 first and kills that unknown child.
  pid_t pid1;
  int pidfd1;
  spawn_ok(fs, 1, &pid1, &pidfd1);
  exits_t ex = {0};
  collect_exits(fs, &ex, 1);
  cr_assert_eq(ex.r[0].index, 0);
  char buf[64];
  cr_assert_str_eq(describe(ex.r[0].wait_status, buf, sizeof(buf)), "killed by SIGKILL");
  cr_assert(pid_strictly_gone(ex.r[0].pid));
  // The slot is free again.
  spawn_ok(fs, 0, &pid, &pidfd);
  cr_assert_neq(pid, ex.r[0].pid);
  close(pidfd);
  close(pidfd1);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

// More exits than the event socket holds, without a poll_exit in between: the server queues
// them (or refuses spawns until they are drained), and none is lost or reordered.
Test(forkserver, many_exits_without_polling_are_not_lost, .timeout = 120) {
  enum { kSlots = LW_FS_MAX_CHILDREN, kRounds = 10 };
  shared_t *sh = shared_new();
  lw_forkserver_t *fs = start_fs(sh, kSlots);
  static pid_t pids[kRounds][kSlots];
  exits_t *ex = calloc(1, sizeof(*ex));
  cr_assert_not_null(ex);
  int pushed_back = 0;
  for (int round = 0; round < kRounds; ++round) {
    int pidfd[kSlots];
    for (uint32_t i = 0; i < kSlots; ++i) {
      atomic_store(&sh->go[i], 0);
      atomic_store(&sh->code[i], (int32_t)((round * 7 + (int)i) % 250));
      for (;;) {
        lw_error_t err;
        lw_status_t st = lw__forkserver_spawn(fs, i, lw__deadline_after(10000000000LL),
                                             &pids[round][i], &pidfd[i], &err);
        if (st == LW_OK) break;
        cr_assert_eq(st, LW_RESOURCE_EXHAUSTED, "%s: %s", lw_status_name(st), err.message);
        pushed_back++;
        LW_ASSERT_OK(lw__forkserver_poll_exit(fs, on_exit_cb, ex, NULL));
      }
    }
    for (uint32_t i = 0; i < kSlots; ++i) atomic_store(&sh->go[i], 1);
    for (uint32_t i = 0; i < kSlots; ++i) {
      cr_assert(readable_within(pidfd[i], 10000));
      close(pidfd[i]);
    }
  }
  collect_exits(fs, ex, kRounds * kSlots);
  cr_assert_eq(ex->n, kRounds * kSlots);
  int next_round[kSlots] = {0};
  for (int k = 0; k < ex->n; ++k) {
    uint32_t i = ex->r[k].index;
    cr_assert_lt(i, kSlots);
    int round = next_round[i]++;
    cr_assert_lt(round, kRounds);
    cr_assert_eq(ex->r[k].pid, pids[round][i], "slot %u exit %d out of order", i, round);
    cr_assert_eq(WEXITSTATUS(ex->r[k].wait_status), (round * 7 + (int)i) % 250);
  }
  fprintf(stderr, "forkserver: %d exits delivered, %d spawns pushed back\n", ex->n,
          pushed_back);
  free(ex);
  lw__forkserver_stop(fs);
  shared_free(sh);
}

// The program's handlers do not run in the server (it is not the program), but children get
// them back; and a program that ignores SIGCHLD still gets every exit status.
Test(forkserver, program_signal_dispositions_skip_server_reach_children, .timeout = 30) {
  shared_t *sh = shared_new();
  g_handler_shared = sh;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_winch;
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGWINCH, &sa, NULL), 0);
  signal(SIGCHLD, SIG_IGN);
  lw_forkserver_t *fs = start_fs(sh, 1);
  atomic_store(&sh->mode[0], MODE_REPORT);
  pid_t pid;
  int pidfd;
  spawn_ok(fs, 0, &pid, &pidfd);
  while (atomic_load(&sh->reported[0]) == 0) lw_test_sleep_us(200);

  cr_assert_eq(kill(lw__forkserver_pid(fs), SIGWINCH), 0);  // default action there: ignored
  cr_assert_eq(kill(pid, SIGWINCH), 0);
  while (atomic_load(&sh->winch_count) == 0) lw_test_sleep_us(200);
  lw_test_sleep_us(20000);
  cr_assert_eq(atomic_load(&sh->winch_count), 1);
  cr_assert_eq(atomic_load(&sh->winch_pid), pid);
  cr_assert_not(pid_gone(lw__forkserver_pid(fs)));

  atomic_store(&sh->go[0], 1);
  exits_t ex = {0};
  collect_exits(fs, &ex, 1);
  cr_assert_eq(ex.r[0].pid, pid);
  cr_assert(WIFEXITED(ex.r[0].wait_status) && WEXITSTATUS(ex.r[0].wait_status) == 0);
  close(pidfd);
  pid_t server = lw__forkserver_pid(fs);
  lw__forkserver_stop(fs);  // the kernel reaps the server itself here (SIGCHLD ignored)
  while (!pid_strictly_gone(server)) lw_test_sleep_us(1000);
  shared_free(sh);
}
