// parent/fs_wire.h — what the fork server's processes say to each other (private to the
// fs_*.c rooms and forkserver.c): the fixed-size messages on the control and event sockets,
// the start request that makes a process a server, and the fd helpers every role uses.
//
// Roles (docs/processes.md):
//   forkserver.c  the program's side: starts servers, asks for spawns, reads exits, stops.
//   fs_server.c   a fork server: forks and reaps one worker's children.
//   fs_zygote.c   the zygote: a copy of the program after its constructors that forks the
//                 servers of sub children; and the program's side of it.
//   fs_helper.c   the exec'd helper (lanework-forkserver) that becomes a clean server for
//                 chip children; and the program's side of starting it.
//   fs_shares.c   the shared mappings every server maps (addresses, rebasing).
//   fs_afterfork.c  the code that runs between a fork or vfork and the child's exec or main:
//                 async-signal-safe calls only, checked by tests/parent/check_afterfork.
//
// Messages (SOCK_SEQPACKET keeps the boundaries; a short read is a malformed peer):
//   control  program -> server  SPAWN(index, seq), KILL(index, pid), STOP(seq)
//            server -> program  READY(step, errno, pid), SPAWNED(index, seq, pid),
//                               SPAWN_FAILED(index, seq, errno), STOPPED(seq)
//   events   server -> program  EXIT(index, pid, wait_status, exit_seq)
//
// Thread/process safety: the helpers below are reentrant; send/recv never block.
#ifndef LANEWORK_PARENT_FS_WIRE_H_
#define LANEWORK_PARENT_FS_WIRE_H_

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "parent/forkserver.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lw_fs_msg_type {
  LW_FS_MSG_READY = 1,         // server -> program (control): setup done; value = 0 or errno
  LW_FS_MSG_SPAWN = 2,         // program -> server (control)
  LW_FS_MSG_SPAWNED = 3,       // server -> program (control): pid
  LW_FS_MSG_SPAWN_FAILED = 4,  // server -> program (control): value = errno
  LW_FS_MSG_STOP = 5,          // program -> server (control)
  LW_FS_MSG_STOPPED = 6,       // server -> program (control)
  LW_FS_MSG_EXIT = 7,          // server -> program (events): pid, value = raw wait status
  LW_FS_MSG_KILL = 8,          // program -> server (control): SIGKILL slot index if its live
                               // child is pid; no reply (without pidfds, e.g. under valgrind)
} lw_fs_msg_type_t;

typedef struct lw_fs_msg {
  uint32_t type;   // lw_fs_msg_type_t
  uint32_t index;  // slot (READY: the setup step that failed)
  uint32_t seq;    // control: request id echoed in the reply; EXIT: the slot's new exit_seq
  int32_t pid;     // READY: the server's pid
  int32_t value;   // errno or raw wait status
  uint32_t reserved;
} lw_fs_msg_t;
_Static_assert(sizeof(lw_fs_msg_t) == 24, "lw_fs_msg_t is the wire format");

// Setup steps of a server, reported in READY.index when one fails. A share's step is
// LW_FS_STEP_SHARE0 + its index.
enum {
  LW_FS_STEP_PIDFD = 1,
  LW_FS_STEP_SIGNALFD = 2,
  LW_FS_STEP_TABLE = 3,
  LW_FS_STEP_ARG = 4,
  LW_FS_STEP_REQUEST = 5,  // the helper got no valid start request (or another version's)
  LW_FS_STEP_FORK = 6,     // the helper could not fork the server
  LW_FS_STEP_SHARE0 = 16,
};

// The request that turns a process (a zygote's fork, or the exec'd helper's) into a server.
// Sent with its fds in SCM_RIGHTS, in this order: the server's ends of the control and event
// sockets, the status table's memfd, the arg memfd (when arg_bytes > 0), the shares, the fds
// to pass to children.
#define LW_FS_REQ_MAGIC 0x6c777a79u  // "lwzy"
#define LW_FS_REQ_VERSION 2u         // bumped whenever lw_fs_req_t or a message changes
#define LW_FS_REQ_MAX_FDS (4 + LW_FS_MAX_SHARES + LW_FS_MAX_FDS)

typedef struct lw_fs_req {
  uint32_t magic;
  uint32_t version;
  uint32_t seq;
  uint32_t n_slots;
  uint32_t n_shares;
  uint32_t n_fds;
  int32_t parent_pid;  // the worker process, which the server watches
  uint32_t reserved;
  uint64_t main_fn;    // zygote servers: the child main (code both processes have)
  uint64_t arg_bytes;
  uint64_t table_bytes;
  uint64_t share_addr[LW_FS_MAX_SHARES];  // where the program mapped each share
  uint64_t share_bytes[LW_FS_MAX_SHARES];
  char comm[16];  // the requesting thread's name, which children take
  // The program's signal dispositions now: a zygote's server starts from them (as a process
  // forked from the program now would) and children get them back. The helper ignores them.
  struct sigaction actions[NSIG];
} lw_fs_req_t;

// The zygote's answer to a request: the server's pid or -errno.
typedef struct lw_fs_rep {
  uint32_t magic;
  uint32_t seq;
  int32_t pid;
  uint32_t reserved;
} lw_fs_rep_t;

// Sends one message without blocking and without SIGPIPE. 0 or -errno.
int lw__fs_send(int fd, const lw_fs_msg_t *m);
// Receives one message without blocking: 1, 0 on EOF, -EAGAIN when none is queued, -EBADMSG
// for a message of the wrong size, or another -errno.
int lw__fs_recv(int fd, lw_fs_msg_t *m);
// Waits until fd is readable (or hung up) or deadline_ns (lw__now_ns; LW_DEADLINE_NEVER)
// passes: 1, 0 on timeout, or -errno.
int lw__fs_wait_readable(int fd, int64_t deadline_ns);
// The raw wait status (as waitpid reports it) of an exit that waitid described.
int lw__fs_status_from_siginfo(const siginfo_t *si);
// A SOCK_SEQPACKET socketpair, close-on-exec, above stdio. 0 or -errno.
int lw__fs_socketpair(int sv[2]);
// pidfd_open(pid) above stdio: >= 0, or -errno (-ENOSYS: no pidfds, e.g. under valgrind).
int lw__fs_pidfd_open(pid_t pid);
// An anonymous memfd of bytes (close-on-exec, above stdio) holding data when not NULL;
// -errno on failure.
int lw__fs_memfd_with(const char *name, const void *data, size_t bytes);
// Sends rq with fds[0..n) in SCM_RIGHTS, waiting for room until deadline_ns (lw__now_ns;
// LW_DEADLINE_NEVER). 0 or -errno (-ETIMEDOUT: the peer reads nothing).
int lw__fs_req_send(int sock, const lw_fs_req_t *rq, const int *fds, int n, int64_t deadline_ns);
// Receives one request and its fds (blocking). 1, 0 on EOF, or -errno (-EBADMSG: not a valid
// request of this version, -EPROTO: another version's). *n_fds fds are the caller's to close.
int lw__fs_req_recv(int sock, lw_fs_req_t *rq, int *fds, int *n_fds);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FS_WIRE_H_
