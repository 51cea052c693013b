// tests/test_util.h — helpers shared by the Criterion tests.
#ifndef LANEWORK_TESTS_TEST_UTIL_H_
#define LANEWORK_TESTS_TEST_UTIL_H_

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/lanework.h"
#include "parent/forkserver.h"

// A Criterion test process has a thread of Criterion's before any test runs, like a program
// that starts threads before its first worker; so it does what such a program must
// (docs/processes.md): it makes lanework's zygote first thing, before main, with lw_init.
// Workers with sub children need it; tests of a program without it run probe programs.
__attribute__((constructor)) static void lw_test_make_zygote(void) {
  if (lw_init() != LW_OK) fprintf(stderr, "lw_init: %s\n", lw_last_error()->message);
}

// A path the build bakes into the tests (LW_KERNEL_DIR, LW_TOOL_PATH, LW_CONF_DIR), or the
// environment variable var when it is set and not empty. scripts/gpu-check runs the test
// binaries from a bundle on a machine without this build tree, and names its own copies with
// LW_TEST_KERNEL_DIR, LW_TEST_TOOL_PATH and LW_TEST_CONF_DIR. Those names are not
// LW_KERNEL_DIR itself, which the library's users set for their own programs: a developer's
// exported value must not move the tests off this build's kernels.
static inline const char *lw_test_path(const char *var, const char *baked) {
  const char *v = getenv(var);
  return v != NULL && v[0] != '\0' ? v : baked;
}

// The kernel folder and the `lanework` program the tests use: this build's unless the
// environment names others (lw_test_path). lw_add_test defines both macros.
static inline const char *lw_test_kernel_dir(void) {
  return lw_test_path("LW_TEST_KERNEL_DIR", LW_KERNEL_DIR);
}
static inline const char *lw_test_tool_path(void) {
  return lw_test_path("LW_TEST_TOOL_PATH", LW_TOOL_PATH);
}

// Loads <LW_KERNEL_DIR>/<name>.so; fails the test on error.
static inline lw_callable_t lw_test_kernel(const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s.so", lw_test_kernel_dir(), name);
  lw_callable_t c;
  lw_status_t st = lw_callable_load_file(path, &c);
  cr_assert_eq(st, LW_OK, "loading %s: %s", path, lw_last_error()->message);
  return c;
}

// Number of open fds of this process.
static inline int lw_test_fd_count(void) {
  // The zygote's socket lives as long as the program (docs/processes.md): a test process
  // forked from the runner makes its own zygote at its first create, so it is made first here,
  // before the count, and never counted as left behind.
  (void)lw__forkserver_zygote_ensure();
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n - 1;  // the DIR's own fd
}

// Number of live children of this process (from /proc/<pid>/task/*/children), not counting
// the zygote: liblanework forks it when the program loads and it lives as long as the program
// (docs/processes.md); lw__forkserver_zygote_pid() is the hook that tells it apart.
static inline int lw_test_child_count(void) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int n = 0, pid;
  while (fscanf(f, "%d", &pid) == 1) n++;
  fclose(f);
  return n;
}

// A process's state letter, parent and start time (clock ticks after boot) from
// /proc/<pid>/stat; false when it is gone.
static inline bool lw_test_proc_stat(pid_t pid, char *state, pid_t *ppid,
                                     unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');  // comm may hold spaces and parentheses
  if (!p) return false;
  // Fields after comm: state (3), ppid (4), then 17 more up to starttime (22).
  char st = 0;
  int pp = 0;
  unsigned long long v = 0;
  if (sscanf(p + 2, "%c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
             &st, &pp, &v) != 3) {
    return false;
  }
  *state = st;
  *ppid = (pid_t)pp;
  *start = v;
  return true;
}

// lanework's processes are not the program's children (docs/processes.md), so a test that
// wants to know none outlived a worker names them first: lw_test_procs_note before destroy,
// lw_test_procs_gone after. The zygote lives as long as the program and is not counted.
typedef struct lw_test_procs {
  uint32_t n;
  pid_t pid[80];
  unsigned long long start[80];
} lw_test_procs_t;

static inline void lw_test_procs_note(const lw_worker_t *w, lw_test_procs_t *p) {
  int32_t ids[80];
  uint32_t count = lw_worker_process_ids(w, ids, 80);
  p->n = 0;
  for (uint32_t i = 0; i + 1 < count && i < 80; ++i) {  // the last one is the zygote
    char st;
    pid_t ppid;
    unsigned long long start;
    if (ids[i] > 0 && lw_test_proc_stat(ids[i], &st, &ppid, &start)) {
      p->pid[p->n] = ids[i];
      p->start[p->n] = start;
      p->n++;
    }
  }
}

// True when every process noted is gone (reaped, a zombie waiting for init, or its pid now
// another process's); waits up to 10 s for the last ones to exit.
static inline bool lw_test_procs_gone(const lw_test_procs_t *p, pid_t *left) {
  for (int round = 0; round < 10000; ++round) {
    *left = 0;
    for (uint32_t i = 0; i < p->n && *left == 0; ++i) {
      char st;
      pid_t ppid;
      unsigned long long start;
      if (lw_test_proc_stat(p->pid[i], &st, &ppid, &start) && st != 'Z' &&
          start == p->start[i]) {
        *left = p->pid[i];
      }
    }
    if (*left == 0) return true;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return false;
}

static inline void lw_test_sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

// Spins (sleeping briefly) until *word != 0. Bounded by the test's .timeout.
static inline void lw_test_wait_nonzero(_Atomic uint32_t *word) {
  while (atomic_load(word) == 0) lw_test_sleep_us(50);
}

// The whole content of the file f (from its start), as a string the caller frees.
static inline char *lw_test_read_all(FILE *f) {
  cr_assert_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  cr_assert_geq(n, 0);
  rewind(f);
  char *text = (char *)calloc(1, (size_t)n + 1);
  cr_assert_not_null(text);
  cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  return text;
}

// True when every thread of pid is stopped (state T or t in /proc/pid/task/*/stat).
static inline bool lw_test_all_threads_stopped(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return false;
  bool all = true;
  int n = 0;
  for (struct dirent *e; all && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char stat_path[300], buf[512];
    snprintf(stat_path, sizeof(stat_path), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
    FILE *f = fopen(stat_path, "r");
    if (!f) continue;  // the thread exited
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *paren = strrchr(buf, ')');  // the name may hold spaces and parentheses
    char state = paren && paren[1] && paren[2] ? paren[2] : '?';
    all = state == 'T' || state == 't';
    ++n;
  }
  closedir(d);
  return all && n > 0;
}

// SIGSTOPs pid and returns once every thread of it has stopped: kill() only starts a group
// stop, and a thread spinning on another CPU runs on for a moment. Bounded by the .timeout.
static inline int lw_test_stop_process(pid_t pid) {
  int rc = kill(pid, SIGSTOP);
  if (rc != 0) return rc;
  while (!lw_test_all_threads_stopped(pid)) lw_test_sleep_us(100);
  return 0;
}

#define LW_ASSERT_OK(expr)                                                              \
  do {                                                                                  \
    lw_status_t lw_st_ = (expr);                                                        \
    cr_assert_eq(lw_st_, LW_OK, "%s -> %s: %s", #expr, lw_status_name(lw_st_),          \
                 lw_last_error()->message);                                             \
  } while (0)

// Submits the gate kernel (tests/kernels/gate.c) to chip: it holds its run lane until *word
// opens and sets *entered when it starts. out (may be NULL): a 64-byte buffer it writes
// (OUTPUT), so that tasks reading it wait for the gate.
static inline lw_status_t lw_test_submit_gate(lw_orch_t *o, lw_callable_handle_t gate,
                                              _Atomic uint32_t *word, _Atomic uint32_t *entered,
                                              void *out, int32_t chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)word, sizeof(*word), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)entered, sizeof(*entered), LW_TAG_NO_DEP));
  if (out) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, out, 64, LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, gate, &a, NULL, chip);
}

#endif  // LANEWORK_TESTS_TEST_UTIL_H_
