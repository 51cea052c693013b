// parent/forkserver.h — the fork server: a single-threaded process that forks every child
// (chip or sub) of one worker, at start and for respawn. lw_worker_create has it cloned by the
// zygote (lw__forkserver_start_spec, below; docs/processes.md), so every child is a copy of the
// program as it was loaded (function pointers into code loaded then are valid), forked from a
// process that never had a second thread (no fork-in-a-threaded-process hazard).
//
// Processes:
//   program --fork (at load)--> zygote --clone(CLONE_PARENT)--> fork server (the program's
//   child) --fork--> child 0, child 1, ...
//   Without a zygote: program --fork--> fork server --fork--> children.
//
// Liveness:
//   - The server holds a pidfd of the worker process; when it becomes readable (the worker
//     died, even by SIGKILL) the server SIGKILLs every descendant, reaps them and exits.
//   - The server is a child subreaper (PR_SET_CHILD_SUBREAPER): a process a kernel forked is
//     re-parented to it, not to init, when its parent dies (a double-forked daemon at once, a
//     kernel's child when its chip child dies). The server reaps such orphans silently (no
//     EXIT, no slot). They live on until STOP or the worker's death, when the server kills
//     every descendant in rounds (list its children in /proc, SIGKILL, reap) until none is
//     left; a respawned child may therefore share the machine with what its predecessor's
//     kernels forked. Killing the server itself (SIGKILL) leaves such orphans to init.
//   - Each child has PR_SET_PDEATHSIG(SIGKILL) toward the server (safe: the server is single-
//     threaded), re-checked with getppid() right after the prctl (a child whose server is
//     already gone exits LW_CHILD_EXIT_START_FAILED).
//   - The server reaps children (waitpid) and publishes each exit in the shared status table
//     (pid, raw wait status, a sequence number), release-ordered, then sends an EXIT message
//     on its socket so the parent's event loop can wake on it.
//   - The parent opens a pidfd per child (pidfd_open works on grandchildren) for prompt death
//     notice in its epoll set.
//
// Protocol (two SOCK_SEQPACKET socketpairs; fixed-size lw_fs_msg_t messages, private to
// forkserver.c):
//   control socket (request/reply, used under the mutex):
//     server -> parent  READY(errno)        once, after the server's setup
//     parent -> server  SPAWN(index)        server -> parent  SPAWNED(index, pid) or
//                                                             SPAWN_FAILED(index, errno)
//     parent -> server  STOP                server kills + reaps every descendant (children and
//                                           adopted orphans), replies STOPPED, exits 0
//   event socket (lw__forkserver_fd; read only by lw__forkserver_poll_exit):
//     server -> parent  EXIT(index, pid, wait_status)   at any time, in reap order
//   Replies never share a socket with EXITs, so a spawn never has to read (and hide) an EXIT.
//   A slot holds at most one live child: SPAWN of a slot whose child is alive fails.
//
// Lifecycle:
//   - lw__forkserver_start -> any number of spawn / poll_exit -> lw__forkserver_stop (frees).
//   - The caller owns each child pidfd returned by spawn; the forkserver owns its sockets.
//   - The caller MUST NOT call anything on fs during or after lw__forkserver_stop.
//
// Thread safety: lw__forkserver_spawn/stop serialize on an internal mutex; call them from any
// parent thread. lw__forkserver_poll_exit is for the one thread that owns the event loop.
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
// copies of the caller at this moment: arg may point anywhere in the caller's memory. Unsafe
// in a multi-threaded process (a lock another thread holds at the fork, e.g. glibc's loader
// lock, stays held forever in the copies): for tests and single-threaded programs; the worker
// uses lw__forkserver_start_spec. Children get no fd above 2. n_slots <= LW_FS_MAX_CHILDREN.
// On failure err (may be NULL) says why; like every function here it leaves the thread-local
// last error alone (lanes/error.h).
LW_MUST_USE lw_status_t lw__forkserver_start(lw_child_main_fn main_fn, void *arg,
                                            uint32_t n_slots, lw_forkserver_t **out,
                                            lw_error_t *err);

// --------------------------------------------------------------------------------------------
// Starting the server from the zygote (fork safety, DESIGN 5.1).
//
// A constructor of liblanework forks a zygote while the program is still single-threaded
// (before main, when /proc/self/status says "Threads: 1"). The zygote never starts a thread;
// on request it clones a fork server (CLONE_PARENT: the server is the program's child, as if
// the program had forked it), which then works as above. Because the zygote is a copy of the
// program as it was when liblanework was loaded, the server and its children inherit no lock
// any thread of the program takes later, and code mapped at load time has the same addresses.
// Whatever was set up after load reaches them only through the spec: arg bytes (copied), the
// MAP_SHARED memfds (mapped at the caller's addresses) and the fds to pass.
//
// The zygote serves the process that started it. A process without one (forked from the
// program, or multi-threaded when liblanework was loaded) starts its own at its first
// lw__forkserver_zygote_ensure if it is single-threaded then. No zygote at all when LW_ZYGOTE=0
// is set, when pidfd_open is missing, or when the process had threads both at load and at
// that call: then start_spec forks directly (lw__forkserver_start's hazard applies).

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

typedef struct lw_fs_spec {
  lw_child_main_fn main_fn;  // code mapped when the program was loaded
  const void *arg;           // children get a pointer to a copy of these arg_bytes bytes
  size_t arg_bytes;
  const lw_fs_share_t *shares;
  uint32_t n_shares;         // <= LW_FS_MAX_SHARES
  const int *fds;
  uint32_t n_fds;            // <= LW_FS_MAX_FDS
  uint32_t n_slots;
} lw_fs_spec_t;

// Maps bytes of fd (MAP_SHARED, read-write) for use as a share: at an address from a range
// reserved before the zygote was forked, so that every server can map it at the same address;
// elsewhere when that range is full. NULL on failure (errno). Undo with
// lw__forkserver_share_unmap. Thread-safe.
void *lw__forkserver_share_map(int fd, size_t bytes);
void lw__forkserver_share_unmap(void *addr, size_t bytes);

// Starts a server for spec through the zygote, or directly when there is none (see above).
// UNAVAILABLE names the step that failed, e.g. a share whose address is taken in the zygote
// ("cannot map share 0 at 0x7f..: File exists"). err (may be NULL) says why.
LW_MUST_USE lw_status_t lw__forkserver_start_spec(const lw_fs_spec_t *spec, lw_forkserver_t **out,
                                                 lw_error_t *err);

// Makes sure this process has a zygote: true when it has one, or when it could start one now
// (the process has a single thread: a process forked from the program, or a program that had
// not started threads when liblanework was loaded). Call it before mapping anything the
// server will map at the same address (the zygote would hold a copy of that mapping);
// lw_worker_create calls it first thing. Thread-safe.
bool lw__forkserver_zygote_ensure(void);

// The zygote's pid, or 0 when this process has none. Tests use it to tell the zygote (a
// long-lived child of the program) from leaked children.
pid_t lw__forkserver_zygote_pid(void);

// True when fs was started by the zygote (lw__forkserver_start_spec with a zygote).
bool lw__forkserver_from_zygote(const lw_forkserver_t *fs);

// True when addr lies in an object that was loaded when the zygote was forked (same base
// and path), so a function pointer to it is valid in the children. Without a zygote: false.
bool lw__forkserver_zygote_has_code(const void *addr);

// Asks the server to fork the child of slot index. Waits up to deadline_ns (absolute,
// lw__now_ns; LW_DEADLINE_NEVER: no limit) for the answer. On success *out_pid is the child's
// pid and *out_pidfd a pidfd for it (close-on-exec; the caller closes it). Otherwise *out_pid
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
