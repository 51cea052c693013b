// parent/fs_helper.h — the exec'd helper, lanework-forkserver: a fresh process with none of
// the program's memory that becomes the fork server of a worker's chip children
// (docs/processes.md).
//
// Process model:
//   program --vfork+exec (quiet: no exit signal)--> helper --fork--> server; the helper exits
//   as soon as it forked the server and the program reaps it (__WALL), so the server is
//   re-parented to init (or to the nearest subreaper) and is never the program's child. The
//   vfork child runs only raw syscalls until its exec (fs_afterfork.c), so this is safe from
//   any thread of a multi-threaded program, whatever locks other threads hold.
//
// Where the helper is: $LW_FORKSERVER_EXE when set; else next to the object that holds this
// code, then next to the running program's real file (/proc/self/exe: a static link whose
// argv[0] names no folder, e.g. a program that re-executed itself), each at
// <dir>/../libexec/lanework/, <dir>/../../libexec/lanework/ (a multiarch libdir),
// <dir>/libexec/lanework/ and <dir>/ (a relocated package or a bundle); else the build tree's
// copy; else the installed one (<libexecdir>/lanework/lanework-forkserver). The helper checks
// that the request is of its own
// protocol version (LW_FS_REQ_VERSION) and refuses another.
#ifndef LANEWORK_PARENT_FS_HELPER_H_
#define LANEWORK_PARENT_FS_HELPER_H_

#include <stddef.h>
#include <sys/types.h>

#include "lanework/status.h"
#include "parent/forkserver.h"

#ifdef __cplusplus
extern "C" {
#endif

// Starts the helper with req_fd (the helper's end of a SOCK_SEQPACKET socketpair) as its fd 3
// and returns its pid (a quiet child: reap it with waitpid(pid, .., __WALL)), or -errno with
// detail saying what failed (which paths were tried when none exists).
pid_t lw__fs_helper_spawn(int req_fd, char *detail, size_t detail_bytes);

// The helper this process starts, as found above (looked for once per process), or NULL when
// none was; *tried (when not NULL) gets the paths looked at, in order. Thread-safe.
const char *lw__fs_helper_path(const char **tried);

// The helper's main (parent/forkserver_exe.c): reads one request from fd 3, forks the server,
// exits. main_fn is the children's main. Returns the process exit status.
int lw__fs_helper_main(int argc, char **argv, lw_child_main_fn main_fn);

// The argument the program passes, so that running the helper by hand says what it is.
#define LW_FS_HELPER_ARG "--lanework-forkserver"

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FS_HELPER_H_
