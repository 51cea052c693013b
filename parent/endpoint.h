// parent/endpoint.h — one endpoint per child: the parent's side of that child's mailbox.
// Owns: the child's pid and pidfd, the mailbox's sequence numbers (post_mu), the control
// round trip (ctl_mu), the exit and protocol-violation descriptions (desc_mu), the mark of a
// liveness kill, and the child's counters. What the scheduler remembers of a child (the task in
// each frame, the heartbeat it watches) is the scheduler's (lw_sched_child_t, parent/sched.h);
// the crash-loop record is the supervisor's (lw_sup_child_t, parent/supervise.h).
// Lifecycle: lw__ep_initialize (lw_worker_create, one per child: chips then subs in w->eps;
// everything the endpoint needs of the rest of the worker comes in its lw_ep_config_t, so it
// holds no pointer to the worker) -> lw__ep_spawn (a child through the fork server) ->
// lw__ep_wait_ready (its INIT_READY) -> ... -> lw__ep_deinitialize (lw_worker_destroy, once no
// thread uses it: closes the pidfd, destroys the locks; fine on a zeroed endpoint). Each
// endpoint goes STARTING -> READY, and after a death RESPAWNING -> READY (parent/supervise.h)
// or DEAD for good.
// Threads (what each field's comment below says in detail):
//   - the scheduler (parent/sched.h) posts tasks into frames it chose (lw__ep_post_task, in
//     its pass: the DAG owner's token and the callables' lock held), drains the completion
//     ring, checks death (lw__ep_check_dead: pidfd, scheduler only) and liveness;
//   - the supervisor (parent/supervise.h) respawns the child (lw__ep_spawn, lw__ep_wait_ready);
//   - any thread but one in a pass runs a control round trip (lw__ep_control*), kills the
//     child (lw__ep_kill) or reports a protocol violation (lw__ep_violation).
// Locks, in this order: the DAG owner's token -> the callables' lock (parent/worker_impl.h) ->
// ep->post_mu -> ep->desc_mu (a leaf). ep->ctl_mu (one control round trip at a time) is taken
// with neither of the first two held; post_mu may be taken under it.
#ifndef LANEWORK_PARENT_ENDPOINT_H_
#define LANEWORK_PARENT_ENDPOINT_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lanes/counter.h"
#include "lanes/trace.h"
#include "lanework/status.h"
#include "mailbox/mailbox.h"

typedef struct lw_forkserver lw_forkserver_t;


typedef enum lw_ep_state {
  LW_EP_STARTING = 0,
  LW_EP_READY = 1,
  LW_EP_DEAD = 2,        // failed for good: its tasks fail at once
  LW_EP_RESPAWNING = 3,  // died; a new child is being started and its callables replayed
} lw_ep_state_t;

// What happened on one child, for lw_worker_stats (parent/stats.c reads them from any thread at
// any time). Each is bumped once where its event happens: they order nothing and are only ever
// read as a snapshot. The task counters and posted are written in a pass, the DAG owner's token
// held (a post, the DAG's finish): one writer at a time, so a load and a store
// (lanes/counter.h), with no locked add in the pass; so is queue_depth_max, a plain maximum
// kept at each post. The others (deaths, escalations, ...) take a relaxed atomic add.
typedef struct lw_ep_stats {
  _Atomic uint64_t tasks_run, tasks_failed, tasks_cancelled;  // finished after a post here
  // Posted here and ended POISONED without starting (wait elision); they count as the
  // worker's poisoned tasks, this only keeps the queue depth right.
  _Atomic uint64_t tasks_poisoned;
  _Atomic uint64_t posted;          // tasks posted into this child's mailbox
  _Atomic uint32_t queue_depth_max; // the most posted and not finished at once
  _Atomic uint64_t deaths;          // deaths the scheduler handled (on_child_death)
  _Atomic uint64_t respawns;        // new children that took work again (the supervisor)
  _Atomic uint64_t escalations;     // kills for a kernel ignoring its cancel or timeout
  _Atomic uint64_t liveness_kills;  // kills for a heartbeat that stood still
} lw_ep_stats_t;

typedef struct lw_endpoint lw_endpoint_t;

// The endpoint interface: what the scheduler, the supervisor and the callables ask of a child,
// whatever carries it. The first implementation is the local child's shared-memory mailbox
// (lw__ep_local_ops, below); a remote rank's channel (DESIGN 11, the L4) is the second. Each
// entry has the contract of the lw__ep_* call of the same name below, which calls it (one
// indirect call; no lock or copy is added on the per-task path: post_task, pop_completion,
// take_result).
typedef struct lw_endpoint_ops {
  // A task into a free frame the caller chose (the owner's pass).
  lw_status_t (*post_task)(lw_endpoint_t *ep, uint32_t frame, lw_mb_task_post_t *p,
                           lw_error_t *err);
  // One control round trip, bound to a generation of the child (0: whichever is there).
  lw_status_t (*post_control)(lw_endpoint_t *ep, uint64_t generation,
                              const lw_mb_control_post_t *post, lw_mb_control_ack_t *out_ack,
                              lw_error_t *err);
  // The next completion the child reported: OK, NOT_FOUND (none), anything else a protocol
  // violation (err says what). The reader alone (a pass, or the replay of a new child). next:
  // an earlier pop of the same drain found one, so NOT_FOUND may be answered from the entry
  // alone, without the checks of the ring's head (lw__mailbox_pop_next_completion).
  lw_status_t (*pop_completion)(lw_endpoint_t *ep, bool next, lw_mb_completion_t *out,
                                lw_error_t *err);
  // The result of the task a popped TASK or TASK_OK completion c reported (in its frame, or
  // in c itself), checked against the identity it was posted with, and the frame freed; a
  // failure is a protocol violation.
  lw_status_t (*take_result)(lw_endpoint_t *ep, const lw_mb_completion_t *c,
                             const lw_mb_identity_t *expect, lw_mb_task_result_t *out,
                             lw_error_t *err);
  // Asks the child to stop the task in frame, the post dispatch_id (its identity's): its
  // cancel word, or its start if it has not started; true when a running kernel was hit.
  bool (*cancel_task)(lw_endpoint_t *ep, uint32_t frame, uint64_t dispatch_id);
  // Liveness: the child's heartbeat counter (only its movement means anything), and whether
  // the task in frame has started (a chip kernel stamped its start; a sub function was taken).
  uint64_t (*heartbeat)(const lw_endpoint_t *ep);
  bool (*task_started)(const lw_endpoint_t *ep, uint32_t frame);
  // Whether the child has ended the task in frame (its result is written; the completion that
  // says so may not be drained yet): nothing of it runs any more.
  bool (*task_ended)(const lw_endpoint_t *ep, uint32_t frame);
  // The last death of the child, described ("child pid 42 killed by SIGSEGV", ...).
  void (*describe_death)(lw_endpoint_t *ep, char *buf, size_t bytes);
} lw_endpoint_ops_t;

// The local child's mailbox (endpoint.c): the default of lw_ep_config_t.ops.
extern const lw_endpoint_ops_t lw__ep_local_ops;

// What an endpoint is given at initialize: where it is, and what it needs of the worker.
typedef struct lw_ep_config {
  const lw_endpoint_ops_t *ops;  // NULL: lw__ep_local_ops
  uint32_t slot;             // chips first, then subs
  lw_mb_child_kind_t kind;
  uint32_t index;            // chip index or sub index: the child's slot in its fork server
  lw_mailbox_t *mb;          // initialized by the caller
  lw_trace_area_t *trace;
  lw_forkserver_t *fs;       // the fork server of this kind of child
  int64_t liveness_timeout_ns;  // a control round trip's own liveness check (0: none)
  // Wakes the scheduler (a protocol violation found here: the scheduler owns the kill).
  void (*kick)(void *ctx);
  void *kick_ctx;
} lw_ep_config_t;

struct lw_endpoint {
  const lw_endpoint_ops_t *ops;  // set at initialize, never changed
  uint32_t slot;             // chips first, then subs
  lw_mb_child_kind_t kind;
  uint32_t index;            // chip index or sub index
  lw_mailbox_t *mb;
  lw_trace_area_t *trace;    // the child's trace rings (shared memory, drained by the session)
  lw_forkserver_t *fs;       // the server of this child (its slot there is index)
  int64_t liveness_timeout_ns;
  void (*kick)(void *ctx);
  void *kick_ctx;
  _Atomic pid_t pid;         // written by the scheduler at (re)spawn, read by any thread
  int pidfd;                 // scheduler thread only (and create/destroy)
  _Atomic uint32_t state;    // lw_ep_state_t
  // The CPU the child's ring_head said its pusher last ran on, copied by whoever drains the
  // ring (in a pass): a spin hint for a waiting caller (parent/sched.c drain_partner), read
  // without a lock. Never read from the mailbox itself outside a pass: a respawn resets it.
  _Atomic int32_t push_cpu;
  uint64_t generation;
  // Sub children: the generation whose function table matches w->calls.sub_fns (under w->calls.sub_mu).
  // A new child differs until its replay is complete; register_sub skips it meanwhile.
  uint64_t sub_synced_gen;
  pthread_mutex_t post_mu;   // next_seq and publishing a post
  uint64_t next_seq;
  uint64_t next_dispatch;
  pthread_mutex_t ctl_mu;    // one control round trip at a time
  // "child pid 42 killed by SIGSEGV" once dead; written by the scheduler, read by any thread:
  // only through lw__ep_set_exit_desc / lw__ep_exit_desc (desc_mu).
  pthread_mutex_t desc_mu;
  char exit_desc[192];
  // Takes tasks, and the scheduler may touch its mailbox: false from a death (or a protocol
  // violation) until the new child has every callable again. Written under the DAG owner's token;
  // atomic so the scheduler's sleep bookkeeping can read it without the lock.
  _Atomic bool accepting;
  // The child broke the protocol (garbage in its mailbox or completion ring): nothing reads
  // its mailbox again, it is killed, and the death path fails its work naming the violation
  // and respawns it. `violated` is set by whichever thread found it (lw__ep_violation) and
  // cleared by the supervisor when it resets the mailbox for a new child; the reason
  // (`violation`) is under desc_mu. (Who kills it is the scheduler's record:
  // lw_sched_child_t.broken.)
  _Atomic bool violated;
  char violation[160];
  // Milliseconds without a heartbeat when this child was killed for liveness (0: it was not):
  // set by the killer before the kill, read by lw__ep_describe_exit for every message about
  // the death (on_child_death's, a control's that sees the death first); cleared when the next
  // child is spawned (lw__ep_spawn, after the supervisor took ctl_mu: no control still waiting
  // on the old child reads it then).
  _Atomic int64_t hb_killed_ms;
  lw_ep_stats_t stats;
};

// Tasks posted to ep's child and not finished yet (any thread; a snapshot).
static inline uint32_t lw__ep_stats_queue_depth(const lw_endpoint_t *ep) {
  // Relaxed loads of counters that only grow, read without the lock their writers hold: the
  // two reads may see different moments, so a task finishing meanwhile could make the
  // difference negative; it is clamped at 0.
  uint64_t done = atomic_load_explicit(&ep->stats.tasks_run, memory_order_relaxed) +
                  atomic_load_explicit(&ep->stats.tasks_failed, memory_order_relaxed) +
                  atomic_load_explicit(&ep->stats.tasks_cancelled, memory_order_relaxed) +
                  atomic_load_explicit(&ep->stats.tasks_poisoned, memory_order_relaxed);
  uint64_t posted = atomic_load_explicit(&ep->stats.posted, memory_order_relaxed);
  return posted > done ? (uint32_t)(posted - done) : 0;
}
// Counts a task posted to ep's child and keeps the depth's maximum (in a pass: one writer).
static inline void lw__ep_stats_note_post(lw_endpoint_t *ep) {
  lw__counter_add_one_writer(&ep->stats.posted, 1);
  uint32_t depth = lw__ep_stats_queue_depth(ep);
  if (depth > atomic_load_explicit(&ep->stats.queue_depth_max, memory_order_relaxed)) {
    atomic_store_explicit(&ep->stats.queue_depth_max, depth, memory_order_relaxed);
  }
}

// Sets up ep from cfg (no child yet: pidfd -1, state STARTING) and its locks.
void lw__ep_initialize(lw_endpoint_t *ep, const lw_ep_config_t *cfg);
// Closes the pidfd and destroys the locks (no thread may use ep any more). A zeroed endpoint
// (never initialized) is left alone.
void lw__ep_deinitialize(lw_endpoint_t *ep);
// "chip 1" / "sub 0".
const char *lw__ep_name(const lw_endpoint_t *ep, char *buf, size_t bytes);
// Records an instant about this child (a death, a respawn, a kill) on the calling thread's
// track: "chip 0: <what>". No-op without a trace session.
void lw__ep_trace(const lw_endpoint_t *ep, lw_trace_kind_t kind, uint64_t run_id,
                  uint64_t task_id, const char *what);
// Starts a new child (STARTING). A child that failed its start and exited before the fork
// server's answer was read fails the spawn with its own reason (UNAVAILABLE "child failed to
// start: ..."), as lw__ep_wait_ready would have, not with its bare exit (CHILD_EXITED).
LW_MUST_USE lw_status_t lw__ep_spawn(lw_endpoint_t *ep, int64_t deadline_ns, lw_error_t *err);
// Waits for INIT_READY; CHILD_EXITED / UNAVAILABLE / DEADLINE_EXCEEDED with the reason.
LW_MUST_USE lw_status_t lw__ep_wait_ready(lw_endpoint_t *ep, int64_t deadline_ns,
                                          lw_error_t *err);
// One control round trip (post, wait for CONTROL_DONE, consume the ack). Any thread but one
// in a pass. The child's death while waiting gives CHILD_EXITED; so does a control
// frame or header the child corrupted (a protocol violation: lw__ep_violation).
LW_MUST_USE static inline lw_status_t lw__ep_control(lw_endpoint_t *ep,
                                                     const lw_mb_control_post_t *post,
                                                     lw_mb_control_ack_t *out_ack,
                                                     lw_error_t *err) {
  return ep->ops->post_control(ep, 0, post, out_ack, err);
}
// The same, posted only to the child of that generation (0: whichever child is there): a
// command naming a child's local ids gives CHILD_EXITED, unposted, once that child was
// replaced.
LW_MUST_USE static inline lw_status_t lw__ep_control_gen(lw_endpoint_t *ep, uint64_t generation,
                                                         const lw_mb_control_post_t *post,
                                                         lw_mb_control_ack_t *out_ack,
                                                         lw_error_t *err) {
  return ep->ops->post_control(ep, generation, post, out_ack, err);
}
// CHILD_EXITED "chip 0 is down (being respawned; retry later): <the last exit>" ("failed for
// good" once the endpoint is DEAD) in *err, for a control that is not posted because the
// chip's child does not take work now. No lock held.
LW_MUST_USE lw_status_t lw__ep_down_error(lw_endpoint_t *ep, lw_error_t *err);
// Posts a task into task frame `frame`, which the caller's record says is free (the
// scheduler's pass, the token held). The caller fills p (kind, callable word, timeout, args, and
// the identity's run_id and task_id); this fills p->seq and the identity's dispatch_id and
// generation, under post_mu, and counts the post (stats). A frame that is not IDLE, or a
// header the child overwrote, is a protocol violation: CHILD_EXITED (lw__ep_violation).
LW_MUST_USE static inline lw_status_t lw__ep_post_task(lw_endpoint_t *ep, uint32_t frame,
                                                       lw_mb_task_post_t *p, lw_error_t *err) {
  return ep->ops->post_task(ep, frame, p, err);
}
// The next completion of ep's child (see lw_endpoint_ops_t.pop_completion).
static inline lw_status_t lw__ep_pop_completion(lw_endpoint_t *ep, bool next,
                                                lw_mb_completion_t *out, lw_error_t *err) {
  return ep->ops->pop_completion(ep, next, out, err);
}
// The result of the task completion c reported (see lw_endpoint_ops_t.take_result).
static inline lw_status_t lw__ep_take_result(lw_endpoint_t *ep, const lw_mb_completion_t *c,
                                             const lw_mb_identity_t *expect,
                                             lw_mb_task_result_t *out, lw_error_t *err) {
  return ep->ops->take_result(ep, c, expect, out, err);
}
static inline bool lw__ep_cancel_task(lw_endpoint_t *ep, uint32_t frame, uint64_t dispatch_id) {
  return ep->ops->cancel_task(ep, frame, dispatch_id);
}
static inline uint64_t lw__ep_heartbeat(const lw_endpoint_t *ep) {
  return ep->ops->heartbeat(ep);
}
static inline bool lw__ep_task_started(const lw_endpoint_t *ep, uint32_t frame) {
  return ep->ops->task_started(ep, frame);
}
static inline bool lw__ep_task_ended(const lw_endpoint_t *ep, uint32_t frame) {
  return ep->ops->task_ended(ep, frame);
}
// True when the child died (pidfd readable). Marks it DEAD.
bool lw__ep_check_dead(lw_endpoint_t *ep);
// Kills ep's current child with SIGKILL from any thread (through a pidfd of its own, checked
// against the fork server's exit table so a reused pid is never hit). Its death is then
// handled as usual.
void lw__ep_kill(lw_endpoint_t *ep);
// Describes the last exit of ep's child from the fork server's table ("child pid 42 killed by
// SIGSEGV"; a status the child gave itself is named: "child pid 42 exited with status 3
// (completion ring stuck: ...)", child/child_exit.h), prefixed with "no heartbeat for N ms
// (stopped or wedged)" when it was a liveness kill (hb_killed_ms); waits briefly for the
// server to publish it. bytes: 192 fits it all.
static inline void lw__ep_describe_exit(lw_endpoint_t *ep, char *buf, size_t bytes) {
  ep->ops->describe_death(ep, buf, bytes);
}
void lw__ep_set_exit_desc(lw_endpoint_t *ep, const char *desc);
// Copies the last exit description ("" when none) into buf.
const char *lw__ep_exit_desc(lw_endpoint_t *ep, char *buf, size_t bytes);
// Records that ep's child broke the protocol (any thread; the first reason wins) and wakes the
// scheduler, which stops reading the mailbox, kills the child and lets the death path fail its
// work and respawn it. Fills err with CHILD_EXITED "chip 1: protocol violation: <what>; child
// killed", naming the child from the endpoint, never from the mailbox.
lw_status_t lw__ep_violation(lw_endpoint_t *ep, const char *what, lw_error_t *err);

#endif  // LANEWORK_PARENT_ENDPOINT_H_
