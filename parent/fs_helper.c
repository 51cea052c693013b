// parent/fs_helper.c — the exec'd helper and the program's side of starting it (fs_helper.h).
#include "parent/fs_helper.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "parent/fs_afterfork.h"
#include "parent/fs_server.h"
#include "parent/fs_wire.h"

extern char **environ;

#ifndef LW_FORKSERVER_BUILD_PATH
#define LW_FORKSERVER_BUILD_PATH ""
#endif
#ifndef LW_FORKSERVER_INSTALL_PATH
#define LW_FORKSERVER_INSTALL_PATH ""
#endif
#define LW_FS_HELPER_NAME "lanework-forkserver"

static struct {
  pthread_once_t once;
  char path[PATH_MAX];  // "" when none was found
  char tried[2048];     // the paths looked at, for the error
} g_helper = {.once = PTHREAD_ONCE_INIT};

// Appends s to the string in dst (cap bytes), cut to fit.
static void append(char *dst, size_t cap, const char *s) {
  size_t n = strlen(dst), k = strlen(s);
  if (n + k >= cap) k = cap > n + 1 ? cap - n - 1 : 0;
  memcpy(dst + n, s, k);
  dst[n + k] = '\0';
}

static bool try_path(const char *p) {
  if (p == NULL || p[0] == '\0') return false;
  if (g_helper.tried[0] != '\0') append(g_helper.tried, sizeof(g_helper.tried), ", ");
  append(g_helper.tried, sizeof(g_helper.tried), p);
  if (strlen(p) >= sizeof(g_helper.path) || access(p, X_OK) != 0) return false;
  // The path without its "..": what `lanework info` and the errors show. A symlink stays one.
  char *dir = strdup(p), *slash = dir != NULL ? strrchr(dir, '/') : NULL;
  char real[PATH_MAX];
  g_helper.path[0] = '\0';
  if (slash != NULL && slash != dir && (*slash = '\0', realpath(dir, real) != NULL) &&
      strlen(real) + 1 + strlen(slash + 1) < sizeof(g_helper.path)) {
    append(g_helper.path, sizeof(g_helper.path), real);
    append(g_helper.path, sizeof(g_helper.path), "/");
    append(g_helper.path, sizeof(g_helper.path), slash + 1);
  } else {
    append(g_helper.path, sizeof(g_helper.path), p);
  }
  free(dir);
  return true;
}

// Tries the helper's places relative to the folder of file (a library or the program).
static bool try_beside(const char *file) {
  char dir[PATH_MAX] = "";
  append(dir, sizeof(dir), file);
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return false;
  *slash = '\0';
  // <prefix>/lib, <prefix>/lib/<multiarch>, a bundle's bin/ (and a build tree's root).
  const char *rel[] = {"/../libexec/lanework/", "/../../libexec/lanework/", "/libexec/lanework/",
                       "/"};
  for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); ++i) {
    char p[PATH_MAX] = "";
    append(p, sizeof(p), dir);
    append(p, sizeof(p), rel[i]);
    append(p, sizeof(p), LW_FS_HELPER_NAME);
    if (try_path(p)) return true;
  }
  return false;
}

static void find_helper(void) {
  const char *env = getenv("LW_FORKSERVER_EXE");
  if (env != NULL && env[0] != '\0') {
    (void)try_path(env);  // when set, nothing else is tried
    return;
  }
  // Beside the object this code is in: liblanework.so's file, or, linked statically, what the
  // loader names the program: its argv[0], which may hold no folder (a program exec'd through
  // /proc/self/exe under another name) or one relative to a folder since left.
  Dl_info info;
  if (dladdr((const void *)find_helper, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] == '/' && try_beside(info.dli_fname)) {
    return;
  }
  // Beside the running program's real file, whatever its argv[0] says.
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    if (try_beside(exe)) return;
  }
  if (try_path(LW_FORKSERVER_BUILD_PATH)) return;
  (void)try_path(LW_FORKSERVER_INSTALL_PATH);
}

const char *lw__fs_helper_path(const char **tried) {
  pthread_once(&g_helper.once, find_helper);
  if (tried != NULL) *tried = g_helper.tried;
  return g_helper.path[0] != '\0' ? g_helper.path : NULL;
}

pid_t lw__fs_helper_spawn(int req_fd, char *detail, size_t detail_bytes) {
  const char *tried = NULL;
  const char *path = lw__fs_helper_path(&tried);
  if (path == NULL) {
    snprintf(detail, detail_bytes,
             "the helper " LW_FS_HELPER_NAME " was not found (tried: %s); set "
             "LW_FORKSERVER_EXE to its path",
             tried);
    return -ENOENT;
  }
  char arg0[] = LW_FS_HELPER_NAME;
  char arg1[] = LW_FS_HELPER_ARG;
  char *argv[] = {arg0, arg1, NULL};
  // Every signal blocked across the vfork: no handler may run in the child, which shares this
  // memory. The helper sets its own mask.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = lw__fs_vfork_exec(path, argv, environ, req_fd);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    snprintf(detail, detail_bytes, "cannot start %s: %s", path, strerror(-pid));
  }
  return pid;
}

// ---------------------------------------------------------------------------------------------
// In the helper.

int lw__fs_helper_main(int argc, char **argv, lw_child_main_fn main_fn) {
  if (argc != 2 || strcmp(argv[1], LW_FS_HELPER_ARG) != 0) {
    fprintf(stderr,
            LW_FS_HELPER_NAME ": lanework's fork server for chip children; started by "
            "liblanework, not by hand (docs/processes.md)\n");
    return 2;
  }
  // What the program had: its stdio numbers it had closed are closed here too. /dev/null goes
  // there first, so the request's fds (received next) cannot take them.
  lw__fs_note_closed_stdio();
  lw__fs_fill_closed_stdio();
  // The server runs with SIGCHLD blocked (its signalfd takes it); nothing else stays blocked.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_SETMASK, &chld, NULL);
  static lw_fs_req_t rq;  // large (the signal table)
  int fds[LW_FS_REQ_MAX_FDS], n_fds = 0;
  struct pollfd p = {.fd = LW_FS_CHILD_FD0, .events = POLLIN};
  int rc = poll(&p, 1, 10000) == 1 ? lw__fs_req_recv(LW_FS_CHILD_FD0, &rq, fds, &n_fds) : -ETIMEDOUT;
  close(LW_FS_CHILD_FD0);
  if (rc != 1) {
    // The control socket comes first: tell the program there, when it came at all.
    if (n_fds > 0) {
      lw_fs_msg_t ready = {.type = LW_FS_MSG_READY, .index = LW_FS_STEP_REQUEST,
                           .pid = (int32_t)getpid(), .value = rc < 0 ? -rc : EBADMSG};
      (void)lw__fs_send(fds[0], &ready);
    }
    return LW_CHILD_EXIT_START_FAILED;
  }
  pid_t pid = fork();
  if (pid == 0) lw__fs_server_from_request(&rq, fds, LW_FS_MAP_ANYWHERE, main_fn, NULL);
  if (pid < 0) {
    lw_fs_msg_t ready = {.type = LW_FS_MSG_READY, .index = LW_FS_STEP_FORK,
                         .pid = (int32_t)getpid(), .value = errno};
    (void)lw__fs_send(fds[0], &ready);
    return LW_CHILD_EXIT_START_FAILED;
  }
  return LW_CHILD_EXIT_OK;
}
