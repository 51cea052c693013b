// parent/fs_zygote.h — the zygote: a copy of the program, made when the program first asks for
// a process (lw_init, or the first lw_worker_create) while it is single-threaded, from which
// the servers of sub children are forked (docs/processes.md).
//
// Process model:
//   program --quiet clone--> intermediate --fork--> zygote; the intermediate exits at once and
//   the program reaps it (__WALL), so the zygote is re-parented to init (or to the nearest
//   subreaper) and is never the program's child. The intermediate is a quiet clone (no exit
//   signal): the program's wait(), waitpid(-1) and SIGCHLD handler never see it.
//   The zygote never starts a thread. On request it forks a fork server (fs_server.h) that
//   maps the request's shares at the program's addresses; the zygote reaps its servers itself
//   (SIGCHLD ignored).
//   It exits when the program dies (pidfd; without pidfds when its socket hangs up).
//
// Why a zygote: a process forked from a multi-threaded program inherits every lock another
// thread held at the fork, held forever (glibc's dl_load_write_lock, which dl_iterate_phdr and
// every C++ throw take, is the known case). The zygote is forked while the program has one
// thread, and every later sub child is forked from it, so none inherits such a lock. Sub
// children see the program as it was when the zygote was made (after its static
// constructors), not later changes.
//
// The registry of loaded objects lives here too: the objects mapped when the zygote was made
// (base and path), which is the code a sub child can call (lw__forkserver_zygote_has_code).
//
// Thread safety: every function takes the zygote's mutex; a process forked from the program
// gets the mutex re-initialised (atfork) and makes a zygote of its own when it asks.
#ifndef LANEWORK_PARENT_FS_ZYGOTE_H_
#define LANEWORK_PARENT_FS_ZYGOTE_H_

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "parent/fs_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lw_zygote_state {
  LW_ZYGOTE_READY = 1,     // this process has a zygote (started now or before)
  LW_ZYGOTE_THREADED = 2,  // none, and the process has other threads: none can be made now
  LW_ZYGOTE_FAILED = 3,    // none: starting one failed (*detail says how)
} lw_zygote_state_t;

// Makes sure this process has a zygote. *n_threads (may be NULL) gets the thread count that
// refused it; detail (may be NULL) gets a failure's reason.
lw_zygote_state_t lw__fs_zygote_ensure(int *n_threads, char *detail, size_t detail_bytes);

// Asks the zygote for a server: sends rq with fds[0..n_fds) (fs_wire.h order). Returns the
// server's pid, or -errno (-ETIMEDOUT: no answer by deadline_ns; -ECONNRESET: the zygote is
// gone, and this process forgets it).
int lw__fs_zygote_request(lw_fs_req_t *rq, const int *fds, int n_fds, int64_t deadline_ns,
                          pid_t *out_zygote);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FS_ZYGOTE_H_
