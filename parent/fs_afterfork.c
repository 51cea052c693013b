// parent/fs_afterfork.c — code that runs right after fork or vfork (fs_afterfork.h). Only
// async-signal-safe functions and raw syscalls here: check_afterfork.cmake lists the ones
// allowed.
#include "parent/fs_afterfork.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "parent/forkserver.h"

uint32_t lw__fs_stdio_closed;
static _Atomic int g_noted;

void lw__fs_note_closed_stdio(void) {
  if (atomic_exchange(&g_noted, 1) != 0) return;
  uint32_t closed = 0;
  for (int i = 0; i <= 2; ++i) {
    if (fcntl(i, F_GETFD) < 0 && errno == EBADF) closed |= 1u << i;
  }
  lw__fs_stdio_closed = closed;
}

void lw__fs_fill_closed_stdio(void) {
  for (int i = 0; i <= 2; ++i) {
    if ((lw__fs_stdio_closed & (1u << i)) == 0) continue;
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0) continue;  // no /dev/null (a bare chroot): the number keeps what it holds
    if (fd != i) {
      (void)dup2(fd, i);
      close(fd);
    }
  }
}

void lw__fs_keep_fds(const int *fds, uint32_t n) {
  int floor = LW_FS_CHILD_FD0 + (int)n;
  int tmp[LW_FS_MAX_FDS + 4];
  if (n > sizeof(tmp) / sizeof(tmp[0])) _exit(LW_CHILD_EXIT_START_FAILED);
  // Copies above the target range first, so that moving one fd cannot overwrite another.
  for (uint32_t i = 0; i < n; ++i) {
    tmp[i] = fcntl(fds[i], F_DUPFD, floor);
    if (tmp[i] < 0) _exit(LW_CHILD_EXIT_START_FAILED);
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (dup2(tmp[i], LW_FS_CHILD_FD0 + (int)i) < 0) _exit(LW_CHILD_EXIT_START_FAILED);
  }
  if (syscall(SYS_close_range, (unsigned)floor, ~0u, 0u) != 0) {
    // Kernels before 5.9: close one by one up to the fd limit.
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur
                   : 65536;
    for (long fd = floor; fd < max; ++fd) close((int)fd);
  }
}

// ---------------------------------------------------------------------------------------------
// vfork + exec. The child shares the caller's memory and runs on its own small stack until
// execve: raw syscalls only (no errno, no libc state, no sanitizer hooks).

typedef struct vfork_args {
  const char *path;
  char *const *argv;
  char *const *envp;
  int fd;
  volatile int err;  // the child's execve error, read by the caller after the vfork returns
} vfork_args_t;

__attribute__((no_sanitize("address", "thread", "undefined"))) static int vfork_child(
    void *p) {
  vfork_args_t *a = p;
  long rc;
  if (a->fd == LW_FS_CHILD_FD0) {
    rc = syscall(SYS_fcntl, a->fd, F_SETFD, 0);  // keep it across the exec
  } else {
    rc = syscall(SYS_dup3, a->fd, LW_FS_CHILD_FD0, 0);  // the copy is not close-on-exec
  }
  if (rc >= 0) {
    // Nothing else of the program's crosses the exec, close-on-exec or not.
    if (syscall(SYS_close_range, (unsigned)LW_FS_CHILD_FD0 + 1, ~0u, 0u) != 0) {
      for (long fd = LW_FS_CHILD_FD0 + 1; fd < 4096; ++fd) syscall(SYS_close, fd);
    }
    syscall(SYS_execve, a->path, a->argv, a->envp);
  }
  // syscall() set errno in the shared memory: the caller reads it from a->err instead.
  a->err = errno != 0 ? errno : ENOEXEC;
  syscall(SYS_exit, 127);
  return 127;
}

pid_t lw__fs_vfork_exec(const char *path, char *const argv[], char *const envp[], int fd) {
  enum { kStackBytes = 64 * 1024 };
  void *stack = mmap(NULL, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -errno;
  vfork_args_t a = {.path = path, .argv = argv, .envp = envp, .fd = fd, .err = 0};
  // syscall() is bound now, in the caller: a lazily bound first call in the vfork child would
  // run the loader's fixup there, on the caller's memory.
  (void)syscall(SYS_getppid);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer cannot follow a child that shares this memory (its view of every lock
  // breaks): under TSan the child is a plain fork, which it handles, and so not quiet.
  pid_t pid = fork();
  if (pid == 0) vfork_child(&a);
  int e = errno;
  if (pid > 0) {
    // The child's exec error lives in its own copy of a: a child that exits 127 at once
    // failed its exec.
    int ws = 0;
    pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 127) {
      munmap(stack, kStackBytes);
      return -ENOEXEC;
    }
  }
#else
  // CLONE_VFORK: this thread waits until the child execs or exits; exit signal 0: a quiet
  // child (see the header).
  pid_t pid = clone(vfork_child, (char *)stack + kStackBytes, CLONE_VM | CLONE_VFORK, &a);
  int e = errno;
#endif
  munmap(stack, kStackBytes);
  if (pid < 0) return -e;
  if (a.err != 0) {
    // The exec failed and the child exited: reap it here, its pid is nobody else's business.
    while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {
    }
    return -a.err;
  }
  return pid;
}
