// parent/fs_server.h — one fork server process: forks every child (chip or sub) of one worker's
// slots, at start and for respawn, reaps them and publishes their exits (docs/processes.md).
//
// A server is single-threaded and runs only plain syscalls (fs_server.c). It is made by one
// of: a zygote's fork (sub children: a copy of the program after its constructors, shares at
// the program's addresses), the exec'd helper lanework-forkserver (chip children: a process
// with none of the program's memory, shares wherever they land), or, for tests only, a direct
// fork of the calling process (lw__forkserver_start).
//
// Liveness (all three):
//   - The server holds a pidfd of the worker process; when it becomes readable (the worker
//     died, even by SIGKILL), or when the control socket hangs up (every copy of the program's
//     end closed; the only signal without pidfds), the server SIGKILLs every descendant,
//     reaps them and exits.
//   - It is a child subreaper: a process a kernel forks is re-parented to the server when its
//     parent dies, and the server kills it at STOP or at the worker's death.
//   - Each child has PR_SET_PDEATHSIG(SIGKILL) toward the server, re-checked with getppid().
#ifndef LANEWORK_PARENT_FS_SERVER_H_
#define LANEWORK_PARENT_FS_SERVER_H_

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "parent/forkserver.h"
#include "parent/fs_wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LW_FS_OUTQ_CAP = 4 * LW_FS_MAX_CHILDREN };  // EXITs the event socket refused, queued

typedef struct lw_fs_server {
  int ctl, ev, sigfd, ppidfd;
  pid_t self;
  uint32_t n_slots;
  lw_fs_child_status_t *table;
  size_t table_bytes;
  lw_child_main_fn main_fn;
  void *arg;
  int pass_fds[LW_FS_MAX_FDS];  // the spec's fds, as numbered in the server
  uint32_t n_pass;
  // The program's dispositions of the signals the server resets (see server_main); children
  // get them back. changed[sig] says which.
  struct sigaction app_action[NSIG];
  bool changed[NSIG];
  char comm[16];                 // the program's thread name, restored in children
  pid_t live[LW_FS_MAX_CHILDREN];  // 0: slot free
  uint32_t n_live;
  bool parent_gone;
  // A helper's server: the handlers it found are the helper's own runtime's (a sanitizer's),
  // not the program's; its children start with the defaults, as the program's chip children
  // would in a plain build (a crashing kernel dies by its signal).
  bool clean;
  uint32_t outq_head, outq_len;
  lw_fs_msg_t outq[LW_FS_OUTQ_CAP];
} lw_fs_server_t;

// Runs the server in this (new, single-threaded) process; never returns. parent is the worker
// process; parent_ctl / parent_ev (or -1) are the program's ends, inherited by a direct fork,
// closed here. s holds the server's ends, the table, the child main and its arg.
_Noreturn void lw__fs_server_main(lw_fs_server_t *s, pid_t parent, int parent_ctl,
                                  int parent_ev);

typedef enum lw_fs_where {
  LW_FS_MAP_SAME = 1,      // shares at the program's addresses (a zygote's server)
  LW_FS_MAP_ANYWHERE = 2,  // shares wherever they land, noted for lw__forkserver_local (helper)
} lw_fs_where_t;

// Maps what the request names (fds as lw__fs_req_recv returned them), then runs the server
// with main_fn as the children's main. handler_ok (NULL: none) says which of the program's
// signal handlers are code this process has; those dispositions are taken over. A failure
// goes to the program as READY(step, errno) and the process exits.
_Noreturn void lw__fs_server_from_request(const lw_fs_req_t *rq, const int *fds,
                                          lw_fs_where_t where, lw_child_main_fn main_fn,
                                          bool (*handler_ok)(const void *addr));

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FS_SERVER_H_
