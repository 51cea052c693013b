// parent/forkserver.h — the fork server: a single-threaded process that lw_worker_create
// forks before starting any thread, and that forks every child (chip or sub), at start and
// for respawn. Every child is therefore a copy of the program as it was at create time
// (function pointers valid) forked from a single-threaded process (no fork-in-a-threaded-
// process hazard).
//
// Processes:
//   worker (parent) --fork--> fork server --fork--> child 0, child 1, ...
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
//     threaded), re-checked with getppid() right after the prctl.
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
//   event socket (lw_forkserver_fd; read only by lw_forkserver_poll_exit):
//     server -> parent  EXIT(index, pid, wait_status)   at any time, in reap order
//   Replies never share a socket with EXITs, so a spawn never has to read (and hide) an EXIT.
//   A slot holds at most one live child: SPAWN of a slot whose child is alive fails.
//
// Lifecycle:
//   - lw_forkserver_start -> any number of spawn / poll_exit -> lw_forkserver_stop (frees).
//   - The caller owns each child pidfd returned by spawn; the forkserver owns its sockets.
//   - The caller MUST NOT call anything on fs during or after lw_forkserver_stop.
//
// Thread safety: lw_forkserver_spawn/stop serialize on an internal mutex; call them from any
// parent thread. lw_forkserver_poll_exit is for the one thread that owns the event loop.
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

// Runs in the new child after fork; must not return (call _exit). index is the slot given to
// lw_forkserver_spawn; arg is the pointer given to lw_forkserver_start (valid in the child:
// it is a copy of the parent's memory at server start, plus any MAP_SHARED memory).
typedef void (*lw_child_main_fn)(void *arg, uint32_t index);

typedef struct lw_fs_child_status {
  _Atomic int32_t pid;          // last pid spawned in this slot (0: never)
  _Atomic int32_t wait_status;  // raw waitpid status of the last exit
  _Atomic uint32_t exit_seq;    // bumped after each exit of this slot is published
  _Atomic uint32_t spawn_seq;   // bumped after each spawn
} lw_fs_child_status_t;
_Static_assert(sizeof(lw_fs_child_status_t) == 16, "status table entry is shared memory");

typedef struct lw_forkserver lw_forkserver_t;

// Forks the server. Call before the calling process starts threads it cares about (the
// worker calls it first thing). n_slots <= LW_FS_MAX_CHILDREN.
LW_MUST_USE lw_status_t lw_forkserver_start(lw_child_main_fn main_fn, void *arg,
                                            uint32_t n_slots, lw_forkserver_t **out);

// Asks the server to fork the child of slot index. Waits up to deadline_ns (absolute,
// lw__now_ns; LW_DEADLINE_NEVER: no limit) for the answer. On success *out_pid is the child's
// pid and *out_pidfd a pidfd for it (close-on-exec; the caller closes it). Otherwise *out_pid
// is 0, *out_pidfd -1, and err (may be NULL; also copied to lw_last_error) says why:
//   UNAVAILABLE          the server is gone
//   CHILD_EXITED         the child died before its pidfd could be opened; the message has its
//                        status ("... killed by SIGSEGV"). Its EXIT still comes through poll_exit.
//   FAILED_PRECONDITION  the slot's previous child is still alive (wait for its pidfd first)
//   DEADLINE_EXCEEDED    no answer in time; a child forked after the deadline is killed when the
//                        late answer is read (its EXIT, with a pid never returned, comes through
//                        poll_exit)
//   RESOURCE_EXHAUSTED   fork failed, or too many EXITs wait undelivered (call poll_exit)
LW_MUST_USE lw_status_t lw_forkserver_spawn(lw_forkserver_t *fs, uint32_t index,
                                            int64_t deadline_ns, pid_t *out_pid,
                                            int *out_pidfd, lw_error_t *err);

// The socket fd to put in an epoll set: readable when an EXIT message (or server death) is
// pending. Owned by the forkserver.
int lw_forkserver_fd(const lw_forkserver_t *fs);

// Reads pending EXIT messages without blocking; for each calls fn(ctx, index, pid, status), in
// the order the server reaped them (for one slot: its spawn order). No exit is dropped: the server queues what the socket cannot
// take and refuses spawns before its queue could overflow. fn may call lw_forkserver_spawn.
// fn NULL: drain and drop the EXITs (lw_forkserver_exit_status still has each slot's last).
// fn may see a pid spawn never returned (see DEADLINE_EXCEEDED); compare pids before acting.
// Returns UNAVAILABLE (after delivering every queued EXIT) if the server itself died.
LW_MUST_USE lw_status_t lw_forkserver_poll_exit(lw_forkserver_t *fs,
                                                void (*fn)(void *ctx, uint32_t index, pid_t pid,
                                                           int wait_status),
                                                void *ctx);

// The published exit of slot index if pid is the slot's latest child and has exited: true and
// *out_wait_status. False while it runs, and once the slot was respawned (use poll_exit).
// Reads the table with acquire loads (pairs with the server's release stores).
bool lw_forkserver_exit_status(const lw_forkserver_t *fs, uint32_t index, pid_t pid,
                               int *out_wait_status);

// The server's pid (for tests).
pid_t lw_forkserver_pid(const lw_forkserver_t *fs);

// STOP: the server SIGKILLs and reaps every descendant (its children and what their kernels
// forked), exits; the parent reaps the server, closes the socket and unmaps the table. Accepts
// NULL and a server that already died.
void lw_forkserver_stop(lw_forkserver_t *fs);

// Formats a raw wait status: "killed by SIGSEGV", "exited with status 3".
void lw_forkserver_describe_status(int wait_status, char *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_FORKSERVER_H_
