// parent/fs_afterfork.h — the code that runs in a new process between fork (or vfork) and
// the moment it execs or starts its own main: in a server's child before its main, in the
// zygote before its loop, and in the vfork child that execs the helper. Such code may run in
// a copy of a process whose other threads held locks (malloc, stdio, the loader's) at the
// fork, or on the program's own memory (vfork), so it calls only async-signal-safe functions
// and raw syscalls. fs_afterfork.c holds all of it, and tests/parent/check_afterfork.cmake
// checks the undefined symbols of its object against a short list, so a call that is not
// safe fails the build's tests.
#ifndef LANEWORK_PARENT_FS_AFTERFORK_H_
#define LANEWORK_PARENT_FS_AFTERFORK_H_

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bit i: fd i was closed when lanework started its first process in this program (set by
// lw__fs_note_closed_stdio). Such a number is not the program's stdio: lanework's processes
// get /dev/null there, and lanework's own fds never take it.
extern uint32_t lw__fs_stdio_closed;

// Records which of fds 0..2 are closed now. Call before lanework opens any fd of its own (the
// first process start); later calls change nothing.
void lw__fs_note_closed_stdio(void);

// Puts /dev/null on every stdio number lw__fs_stdio_closed names, replacing whatever took it
// since (an fd of lanework's or of the program's that got the free number). Not
// close-on-exec, as stdio is.
void lw__fs_fill_closed_stdio(void);

// Closes every fd above 2 except fds[0..n), which move to LW_FS_CHILD_FD0 + i (not
// close-on-exec). Exits the process with LW_CHILD_EXIT_START_FAILED if it cannot.
void lw__fs_keep_fds(const int *fds, uint32_t n);

// Starts path as a "quiet" child of the caller (exit signal 0: wait() and SIGCHLD handlers of
// the program never see it; reap it with waitpid(pid, .., __WALL)) by vfork + execve, with
// fd as its fd 3 and no other fd above 2. Safe in a multi-threaded program: the child runs
// only raw syscalls on its own stack, with every signal blocked, until the exec. The caller
// blocks all signals around the call (lw__fs_helper_spawn does). Returns the pid, or -errno
// (an exec that failed: -errno of execve).
pid_t lw__fs_vfork_exec(const char *path, char *const argv[], char *const envp[], int fd);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FS_AFTERFORK_H_
