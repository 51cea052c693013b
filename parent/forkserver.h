// parent/forkserver.h — the program's side of the fork servers: a server is a single-threaded
// process that forks every child of one worker's slots (chip or sub), at start and for
// respawn, reaps them and publishes their exits. The processes themselves are in fs_server.h
// (a server), fs_zygote.h (the zygote) and fs_helper.h (the exec'd helper); docs/processes.md
// tells the whole model.
//
// Processes (none of them is ever the program's child):
//   program ..> helper lanework-forkserver (exec'd, quiet, exits at once)
//                 └─> chip server ──fork──> chip child 0, 1, ...   (no program memory)
//   program ..> zygote (a copy of the program made at lw_init / first create)
//                 └─> sub server ──fork──> sub child 0, ...        (program after constructors)
//   lw__forkserver_start (tests only): program ──fork──> server ──fork──> children.
//
// Liveness: see fs_server.h. The program holds a pidfd per child (pidfd_open works on any
// process) for prompt death notice; where pidfd_open is refused (valgrind) a spawn returns an
// eventfd instead that lw__forkserver_poll_exit signals when it reads the child's EXIT, and
// kills go through the server (lw__forkserver_kill).
//
// Protocol (two SOCK_SEQPACKET socketpairs; lw_fs_msg_t, fs_wire.h):
//   control socket (request/reply, used under the mutex):
//     server -> parent  READY(errno, pid)   once, after the server's setup
//     parent -> server  SPAWN(index)        server -> parent  SPAWNED(index, pid) or
//                                                             SPAWN_FAILED(index, errno)
//     parent -> server  KILL(index, pid)    no reply
//     parent -> server  STOP                server kills + reaps every descendant (children and
//                                           adopted orphans), replies STOPPED, exits 0
//   event socket (lw__forkserver_fd; read only by lw__forkserver_poll_exit):
//     server -> parent  EXIT(index, pid, wait_status)   at any time, in reap order
//   Replies never share a socket with EXITs, so a spawn never has to read (and hide) an EXIT.
//   A slot holds at most one live child: SPAWN of a slot whose child is alive fails.
//
// Lifecycle:
//   - lw__forkserver_start(_spec) -> any number of spawn / poll_exit -> lw__forkserver_stop.
//   - The caller owns each child fd returned by spawn; the forkserver owns its sockets.
//   - The caller MUST NOT call anything on fs during or after lw__forkserver_stop.
//
// Thread safety: lw__forkserver_spawn/kill/stop serialize on an internal mutex; call them from
// any parent thread. lw__forkserver_poll_exit is for the one thread that owns the event loop.
#ifndef LANEWORK_PARENT_FORKSERVER_H_
#define LANEWORK_PARENT_FORKSERVER_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_FS_MAX_CHILDREN 64

// Runs in the new child after fork. If it returns, the child exits with LW_CHILD_EXIT_OK (0;
// child/child_exit.h); a child that cannot be set up before it runs exits
// LW_CHILD_EXIT_START_FAILED (1). index is the slot given to
// lw__forkserver_spawn; arg is the pointer given to lw__forkserver_start (valid in the child:
// it is a copy of the parent's memory at server start, plus any MAP_SHARED memory), or with
// lw__forkserver_start_spec a pointer to the server's copy of the spec's arg bytes.
typedef void (*lw_child_main_fn)(void *arg, uint32_t index);

typedef struct lw_fs_child_status {
  _Atomic int32_t pid;          // last pid spawned in this slot (0: never)
  _Atomic int32_t wait_status;  // raw waitpid status of the last exit
  _Atomic uint32_t exit_seq;    // bumped after each exit of this slot is published
  _Atomic uint32_t spawn_seq;   // bumped after each spawn
} lw_fs_child_status_t;
_Static_assert(sizeof(lw_fs_child_status_t) == 16, "status table entry is shared memory");

typedef struct lw_forkserver lw_forkserver_t;

// Forks the server directly from the calling process, so the server and every child are
// copies of the caller at this moment: arg may point anywhere in the caller's memory. The
// server is the caller's child. Unsafe in a multi-threaded process (a lock another thread
// holds at the fork, e.g. glibc's loader lock, stays held forever in the copies): for tests
// only; the worker uses lw__forkserver_start_spec. Children get no fd above 2. n_slots <=
// LW_FS_MAX_CHILDREN.
// On failure err (may be NULL) says why; like every function here it leaves the thread-local
// last error alone (lanes/error.h).
LW_MUST_USE lw_status_t lw__forkserver_start(lw_child_main_fn main_fn, void *arg,
                                            uint32_t n_slots, lw_forkserver_t **out,
                                            lw_error_t *err);

// --------------------------------------------------------------------------------------------
// Starting a server for a worker (DESIGN 5.1): from the exec'd helper (chip children) or from
// the zygote (sub children). Whatever the children need travels explicitly in the spec: arg
// bytes (copied), the MAP_SHARED memfds (at the program's addresses in a zygote's server,
// wherever they land in a helper's, see lw__forkserver_local) and the fds to pass.

#define LW_FS_MAX_SHARES 4
#define LW_FS_MAX_FDS 4
// A child finds the spec's fds[i] at LW_FS_CHILD_FD0 + i; every other fd above 2 is closed.
// Its fds 0..2 are the program's stdio, except that one the program did not have open when
// liblanework was loaded is /dev/null (never an fd of lanework's that took the free number).
#define LW_FS_CHILD_FD0 3

// Moves an fd lanework created in the program above 2, close-on-exec: in a program started
// with stdio closed a new fd takes number 0, 1 or 2, and the program's own writes to "stdout"
// would then land in lanework's memfd or socket. Returns the new fd (fd itself when it is
// above 2 or negative), or -errno (fd is closed then).
int lw__forkserver_fd_above_stdio(int fd);

typedef struct lw_fs_share {
  int fd;        // a memfd (or any mappable fd), mapped MAP_SHARED from offset 0
  void *addr;    // where the caller mapped it: the server maps it at the same address
  size_t bytes;
} lw_fs_share_t;

typedef enum lw_fs_origin {
  LW_FS_FROM_HELPER = 1,  // the exec'd helper; its children run lw__worker_child_entry
  LW_FS_FROM_ZYGOTE = 2,  // the zygote; its children run main_fn
} lw_fs_origin_t;

typedef struct lw_fs_spec {
  lw_fs_origin_t origin;
  lw_child_main_fn main_fn;  // LW_FS_FROM_ZYGOTE: code the zygote has
  const void *arg;           // children get a pointer to a copy of these arg_bytes bytes
  size_t arg_bytes;
  const lw_fs_share_t *shares;
  uint32_t n_shares;         // <= LW_FS_MAX_SHARES
  const int *fds;
  uint32_t n_fds;            // <= LW_FS_MAX_FDS
  uint32_t n_slots;
} lw_fs_spec_t;

// Maps bytes of fd (MAP_SHARED, read-write) for use as a share: inside the range reserved
// for shares when the zygote was made, so that a zygote's server can map it at the same
// address; elsewhere when there is no range or it is full. NULL on failure (errno). Undo with
// lw__forkserver_share_unmap. Thread-safe.
void *lw__forkserver_share_map(int fd, size_t bytes);
void lw__forkserver_share_unmap(void *addr, size_t bytes);

// In a child (or its server): the address in this process of program_addr, an address in
// one of the program's shares. The same address in a zygote's server and its children; in a
// helper's, where the share landed. An address in no share is returned unchanged.
void *lw__forkserver_local(const void *program_addr);

// Starts a server for spec. LW_FS_FROM_HELPER works from any program, threaded or not.
// LW_FS_FROM_ZYGOTE needs the zygote: started here if the process is single-threaded;
// otherwise FAILED_PRECONDITION saying to call lw_init() before the program starts threads.
// UNAVAILABLE names the step that failed, e.g. a share whose address is taken in the zygote,
// or the helper that cannot be found. err (may be NULL) says why.
LW_MUST_USE lw_status_t lw__forkserver_start_spec(const lw_fs_spec_t *spec, lw_forkserver_t **out,
                                                 lw_error_t *err);

// Makes sure this process has a zygote (see fs_zygote.h): true when it has one or could make
// one now (the process has a single thread). Call it before mapping anything a zygote's
// server maps at the same address (the zygote would hold a copy of that mapping);
// lw_worker_create and lw_init call it first thing. Thread-safe.
bool lw__forkserver_zygote_ensure(void);

// The zygote's pid, or 0 when this process has none.
pid_t lw__forkserver_zygote_pid(void);

// True when fs was started by the zygote.
bool lw__forkserver_from_zygote(const lw_forkserver_t *fs);

// True when addr lies in an object that was loaded when the zygote was made (same base and
// path), so a function pointer to it is valid in a sub child. Without a zygote: false.
bool lw__forkserver_zygote_has_code(const void *addr);

// Asks the server to fork the child of slot index. Waits up to deadline_ns (absolute,
// lw__now_ns; LW_DEADLINE_NEVER: no limit) for the answer. On success *out_pid is the child's
// pid and *out_pidfd its death fd (close-on-exec; the caller closes it): a pidfd, or where
// pidfd_open is refused an eventfd that poll_exit makes readable when the child's EXIT
// arrives. Either is readable once the child is dead; kill with lw__forkserver_kill. Otherwise *out_pid
// is 0, *out_pidfd -1, and err (may be NULL) says why:
//   UNAVAILABLE          the server is gone
//   CHILD_EXITED         the child died before its pidfd could be opened; the message has its
//                        status ("... killed by SIGSEGV"). Its EXIT still comes through poll_exit.
//   FAILED_PRECONDITION  the slot's previous child is still alive (wait for its pidfd first)
//   DEADLINE_EXCEEDED    no answer in time; a child forked after the deadline is killed when the
//                        late answer is read (its EXIT, with a pid never returned, comes through
//                        poll_exit)
//   RESOURCE_EXHAUSTED   fork failed, or too many EXITs wait undelivered (call poll_exit)
LW_MUST_USE lw_status_t lw__forkserver_spawn(lw_forkserver_t *fs, uint32_t index,
                                            int64_t deadline_ns, pid_t *out_pid,
                                            int *out_pidfd, lw_error_t *err);

// SIGKILLs the child of slot index if pid is still its live child; fd is the death fd spawn
// returned (-1: none). Safe against pid reuse: through the pidfd, or through the server,
// whose unreaped child the pid names.
void lw__forkserver_kill(lw_forkserver_t *fs, uint32_t index, pid_t pid, int fd);

// The socket fd to put in an epoll set: readable when an EXIT message (or server death) is
// pending. Owned by the forkserver.
int lw__forkserver_fd(const lw_forkserver_t *fs);

// Reads pending EXIT messages without blocking; for each calls fn(ctx, index, pid, status), in
// the order the server reaped them (for one slot: its spawn order). No exit is dropped: the server queues what the socket cannot
// take and refuses spawns before its queue could overflow. fn may call lw__forkserver_spawn.
// fn NULL: drain and drop the EXITs (lw__forkserver_exit_status still has each slot's last).
// fn may see a pid spawn never returned (see DEADLINE_EXCEEDED); compare pids before acting.
// Returns UNAVAILABLE (after delivering every queued EXIT) if the server itself died; err (may
// be NULL) says how it died.
LW_MUST_USE lw_status_t lw__forkserver_poll_exit(lw_forkserver_t *fs,
                                                void (*fn)(void *ctx, uint32_t index, pid_t pid,
                                                           int wait_status),
                                                void *ctx, lw_error_t *err);

// The published exit of slot index if pid is the slot's latest child and has exited: true and
// *out_wait_status. False while it runs, and once the slot was respawned (use poll_exit).
// Reads the table with acquire loads (pairs with the server's release stores).
bool lw__forkserver_exit_status(const lw_forkserver_t *fs, uint32_t index, pid_t pid,
                               int *out_wait_status);

// The server's pid (for tests).
pid_t lw__forkserver_pid(const lw_forkserver_t *fs);

// STOP: the server SIGKILLs and reaps every descendant (its children and what their kernels
// forked), exits; the parent reaps the server, closes the socket and unmaps the table. Accepts
// NULL and a server that already died.
void lw__forkserver_stop(lw_forkserver_t *fs);

// Formats a raw wait status: "killed by SIGSEGV", "exited with status 3".
void lw__forkserver_describe_status(int wait_status, char *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FORKSERVER_H_
