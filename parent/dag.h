// parent/dag.h — the DAG of the worker's runs (parent/dag.c): tasks, their dependencies and
// groups, the ready queues, and what a task's end does to the others.
//
// One owner. Every task state change, every ready queue, the tensor map and the counters of
// the runs in it are changed by one thread at a time, the DAG's owner, and only inside the
// owner's pass (lw__dag_step, lw__dag_sweep_stopped, the dispatch and finishing calls below).
// In the worker the owner is the thread running a pass of parent/sched.c, which holds the DAG
// owner's token (parent/sched.h, pass_mu) for it: the scheduler thread, or a submitter that found
// no pass under way right after it posted (lw__sched_assist, run from the doorbell), and the
// destroying thread at the end; the thread starting a pass declares itself with lw__dag_set_owner.
// Other threads never touch that state: they hand the owner work through the DAG's inbox (a
// lock-free list of commands: submit a task, submit a group, open or close a scope, "the orch
// function returned") and ring the doorbell (hooks.ring); the owner takes the inbox whole at the
// start of each pass (lw__dag_step) and applies it in order. This is libuv's model (the loop owns
// its state and uv_async_send is the one thread-safe door), with one addition: the thread ringing
// the door may run the loop's pass itself when the loop is between passes, which saves a thread
// hand-off when the scheduler is slow to get a CPU.
//
// What other threads may call: lw__dag_reserve / lw__dag_unreserve (task-ring back-pressure),
// lw__dag_post (the inbox), lw__dag_run_failed (an acquire read of a run's failure, for the
// early refusal of a submit). Everything else is the owner's.
//
// A task: FREE -> BUILDING (a submit command applied) -> PENDING (unmet dependencies) -> READY
// (in a queue) -> RUNNING (lw__dag_task_launch: posted to a child) -> COMPLETED or FAILED ->
// FREE again (retired: gen bumped, so a stale lw_task_ref_t no longer matches). A failed task
// poisons its PENDING consumers and, if it never launched, its group; a task of a stopped run
// is skipped (POISONED when the run failed, CANCELLED when it was cancelled) instead of
// dispatched. Dependencies come from the tensor map (parent/tmap.h): RAW, WAW, WAR.
//
// Back-pressure: the ring has a fixed number of slots. A submitter reserves slots before it
// posts (lw__dag_reserve: blocks until enough tasks retired, or fails RESOURCE_EXHAUSTED at
// its deadline, nothing dropped); the owner builds each task into a slot the reservation
// guaranteed, and a retirement gives the slot back.
//
// Runs: a task points at its lw_run_t (parent/runs.h). The run's DAG fields (n_tasks,
// n_terminal, n_completed, n_failed, failed, cancelled, orch_done, error) are the owner's.
// Functions that settle runs (every task terminal and the orch function returned) push them
// on *finished (linked by lw_run_t.next) for the caller to complete (lw__run_complete) after
// it has left its pass.
//
// Hooks: the DAG knows nothing of children or the callable table; what it needs from them
// comes through lw_dag_hooks_t, called on the owner thread (ring: any thread). A hook must not
// call back into the DAG.
//
// Lifecycle: lw__dag_initialize (worker create; the DAG lives in caller memory) ->
// lw__dag_set_owner (by the thread starting each pass; the destroying thread once the
// scheduler stopped) -> lw__dag_finish_all (destroy: every unfinished task ends with the given status)
// -> lw__dag_deinitialize (frees the ring, the tensor map and any unapplied command).
#ifndef LANEWORK_PARENT_DAG_H_
#define LANEWORK_PARENT_DAG_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanework/args.h"
#include "lanework/status.h"
#include "mailbox/mailbox.h"
#include "parent/runs.h"
#include "parent/tmap.h"

#define LW_MAX_SCOPES 16

typedef struct lw_task lw_task_t;
typedef struct lw_endpoint lw_endpoint_t;

typedef enum lw_task_state {
  LW_TS_FREE = 0,
  LW_TS_BUILDING = 1,
  LW_TS_PENDING = 2,
  LW_TS_READY = 3,
  LW_TS_RUNNING = 4,
  LW_TS_COMPLETED = 5,
  LW_TS_FAILED = 6,
} lw_task_state_t;

typedef struct lw_task_ref {
  uint32_t index;
  uint32_t gen;
} lw_task_ref_t;

typedef struct lw_group {
  uint32_t n;
  uint32_t n_ready;
  uint32_t n_open;       // members not yet terminal
  lw_task_t **members;
  struct lw_group *next_ready;
} lw_group_t;

struct lw_task {
  uint32_t index;
  uint32_t gen;
  lw_task_state_t state;
  lw_run_t *run;
  uint64_t task_id;
  lw_mb_task_kind_t kind;
  int32_t worker;          // chip index, LW_ANY_CHIP, or -1 for subs
  uint32_t wc;             // callable table index
  uint64_t wc_id;
  lw_mb_args_t args;
  int64_t timeout_ns;
  uint32_t n_pending;      // unmet dependencies
  lw_task_ref_t *consumers;
  uint32_t n_consumers, cap_consumers;
  lw_group_t *group;
  lw_task_t *next;         // ready queue link
  // Dispatch (the scheduler's, on the owner thread).
  lw_endpoint_t *ep;
  uint32_t frame;
  lw_mb_identity_t identity;
  int64_t cancel_at;       // when the scheduler cancelled it in its child (0: not)
  // When the scheduler first saw the kernel running (parent clock; 0: not yet): escalation
  // grace and timeouts count from here, never from a time the child wrote.
  int64_t seen_started_at;
  lw_status_t escalated;   // CANCELLED / DEADLINE_EXCEEDED: its child was killed for it
  // Wait elision (DESIGN 4.5). A kernel task whose unfinished producers are all posted to one
  // chip is made READY for that chip at once: the chip's run lane runs posts in order, so it
  // starts only after they finished, and the child never starts a task of a run that had a
  // task fail there (child/chip_child.c). The owner's.
  int32_t launched_chip;   // the chip it was posted to (-1: a sub child, or not posted)
  uint32_t n_unlaunched;   // producers (edges) not posted yet
  int32_t elide_chip;      // the chip of every posted producer (-1: none yet; -2: several, or a
                           // sub child, or unknown: no elision)
  bool elided;             // made READY before its producers finished
  uint64_t upstream_failed;  // elided, and this producer (task id) failed: it ends POISONED
};

typedef struct lw_task_queue {
  lw_task_t *head, *tail;
  uint32_t n;
} lw_task_queue_t;

// What the DAG needs from the worker (called on the owner thread; ring on any thread).
typedef struct lw_dag_hooks {
  void *ctx;
  // Drops the pin a submitter took on callable slot wc for a task (lw__dag_post's contract):
  // called when the task ends without having been launched, or when a task that keeps its
  // pin while it runs (keep_pin_while_running) ends.
  void (*unpin)(void *ctx, uint32_t wc, uint64_t wc_id);
  // The callable's name, for messages (valid until the hook is called again).
  const char *(*callable_name)(void *ctx, uint32_t wc, uint64_t wc_id);
  // Wakes the owner: there is work in the inbox (ring), or a run to sweep (stop: a stop
  // may start clocks, e.g. a cancel's grace, that only the scheduler watches). Any thread.
  // now_ns: lw__dag_post's (a clock read just before the post, or 0); a pass the ringing thread
  // runs itself may use it as its clock (lw__dag_set_owner) instead of reading the clock again.
  // Non-zero only for a post of tasks (a submit).
  void (*ring)(void *ctx, int64_t now_ns);
  void (*stop)(void *ctx);
  // Counts a task that reached a child (t->ep set) and is finishing with its final status st,
  // once per task (may be NULL: nothing counted).
  void (*task_done)(void *ctx, const lw_task_t *t, lw_status_t st);
  // Whether a chip other than chip could start a task now (it is up and holds none): a task
  // that names no chip is then not elided behind a busy producer on chip, it waits for its
  // producers and goes to the least busy chip (wait elision never costs parallelism). Called
  // by the owner (its lock held). May be NULL: elision as if every other chip were busy.
  bool (*other_chip_free)(void *ctx, int32_t chip);
} lw_dag_hooks_t;

// One task as a submitter describes it.
typedef struct lw_dag_task_desc {
  lw_mb_task_kind_t kind;
  int32_t worker;             // chip index or LW_ANY_CHIP (kernels); ignored for subs
  uint32_t wc;                // callable slot, pinned by the submitter
  uint64_t wc_id;
  int64_t timeout_ns;
  int64_t submit_ns;          // when it was submitted (lw__now_ns), for its task report
  lw_mb_args_t args;          // as they cross the mailbox
  uint32_t n_keys;            // the buffers the tensor map orders, in tensor order
  uintptr_t key[LW_MAX_TENSORS];
  lw_tag_t tag[LW_MAX_TENSORS];
} lw_dag_task_desc_t;

typedef enum lw_dag_cmd_kind {
  LW_DAG_CMD_SUBMIT = 1,       // one task (n_tasks == 1)
  LW_DAG_CMD_GROUP = 2,        // n_tasks that launch all-or-nothing
  LW_DAG_CMD_SCOPE_BEGIN = 3,
  LW_DAG_CMD_SCOPE_END = 4,
  LW_DAG_CMD_ORCH_DONE = 5,    // the run's orch function returned status (error if not OK)
} lw_dag_cmd_kind_t;

// A command for the owner. Made by lw__dag_cmd_new, owned by the DAG once posted (the owner
// frees it after applying it).
typedef struct lw_dag_cmd {
  struct lw_dag_cmd *next;
  lw_dag_cmd_kind_t kind;
  lw_run_t *run;
  lw_status_t status;          // ORCH_DONE
  lw_error_t error;            // ORCH_DONE with status != OK
  uint32_t n_tasks;            // SUBMIT: 1; GROUP: n
  lw_dag_task_desc_t task[];   // n_tasks entries
} lw_dag_cmd_t;

typedef struct lw_dag {
  lw_dag_hooks_t hooks;
  uint32_t n_chips;
  int64_t submit_timeout_ns;   // how long lw__dag_reserve waits for slots (< 0: forever)
  pthread_t owner;             // the thread allowed to change state (checked by lw__dag_step)
  bool has_owner;

  // The inbox: a lock-free stack of posted commands; the owner takes it whole and reverses it,
  // so commands apply in the order they were posted.
  _Atomic(lw_dag_cmd_t *) inbox;

  // Slots any thread may still reserve; the owner gives one back per retirement. Waiters sleep
  // on space_cv (space_mu); a retirement broadcasts only when space_waiters says one may wait.
  _Atomic int64_t slots_free;
  _Atomic uint32_t space_waiters;
  pthread_mutex_t space_mu;
  pthread_cond_t space_cv;

  // Bumped whenever a run stops (cancel requested, first failure, orch error): the owner then
  // takes the run's tasks out of the ready queues at once (lw__dag_sweep_stopped). Any thread.
  _Atomic uint32_t stop_seq;
  uint32_t stop_seen;

  // The owner's.
  // The reports' clock (lw__dag_now): the time last read and how many more uses it serves.
  int64_t clock_ns;
  uint32_t clock_uses;
  lw_task_t *tasks;            // the ring
  uint32_t n_tasks_cap;
  uint32_t *free_tasks;        // stack of free slot indices
  uint32_t n_free_tasks;
  uint32_t n_waiting;          // tasks PENDING: waiting for producers
  lw_task_queue_t chip_q[LW_MAX_CHIPS];
  lw_task_queue_t any_q;
  lw_task_queue_t sub_q;
  lw_group_t *groups_head, *groups_tail;  // groups whose members are all ready
  lw_tmap_t *tmap;
  // lw__task_finish's work list: the tasks a finish in progress also finishes.
  struct lw_finish_item *finish_stack;
  uint32_t n_finish, cap_finish;
  lw_task_t **mark_stack;  // mark_upstream_failed's worklist (dag.c)
  uint32_t cap_mark;
  bool finishing;

  // Counters for lw_worker_stats: written by the owner, read by any thread (relaxed; a
  // snapshot). built - retired is the number of tasks in the ring. A task that ends POISONED
  // (never started, posted or not) or otherwise without reaching a child (t->ep NULL) counts
  // here; one that reached a child counts through hooks.task_done instead.
  _Atomic uint64_t n_built, n_retired, n_poisoned, n_skipped;
  // Wait elision (see lw_task_t) on: the default; LW_WAIT_ELISION=0 in the environment turns
  // it off (for measuring what it saves). Set at initialize; tests may set it after.
  bool elision;
} lw_dag_t;

// Makes an empty DAG with a ring of n_tasks slots and n_chips chip queues. tmap_options may be
// NULL (the production map); its liveness callback is always the DAG's own.
LW_MUST_USE lw_status_t lw__dag_initialize(lw_dag_t *d, uint32_t n_tasks, uint32_t n_chips,
                                           int64_t submit_timeout_ns, const lw_dag_hooks_t *hooks,
                                           const lw_tmap_options_t *tmap_options, lw_error_t *err);
// Frees the ring, the tensor map and commands never applied (their pins are dropped through
// hooks.unpin). No thread may use the DAG any more.
void lw__dag_deinitialize(lw_dag_t *d);
// The calling thread becomes the owner (it must hold whatever serializes passes: in the
// worker, the DAG owner's token, parent/sched.h). lw__dag_step aborts on any other thread: a broken
// contract.
// now_ns: 0, or a read of the monotonic clock this thread made just before (see below).
void lw__dag_set_owner(lw_dag_t *d, int64_t now_ns);
// The next lw__dag_now reads the clock: a pass whose clock is a submit's time (read before the
// pass) does this before it drains, so a completion it finds is not stamped with a time from
// before the parent saw it (nor a task that ended that soon as ended when it was posted).
// The owner's.
void lw__dag_clock_expire(lw_dag_t *d);
// How many tasks wait (PENDING) for a producer to end: while none does, no completion can
// make a task ready (the owner's).
uint32_t lw__dag_n_waiting(const lw_dag_t *d);
// Whether a READY task or group is still queued (after a dispatch: one waiting for a task frame,
// which a completion may free). The owner's.
bool lw__dag_holds_ready(const lw_dag_t *d);

// The owner's clock for per-task reports (the time a task was posted, the time it ended): one
// read of the monotonic clock serves up to LW_DAG_CLOCK_USES uses, and every pass starts with
// a fresh read (lw__dag_set_owner), so a report's time is late by at most what the pass did
// since the read (a few tasks' handling, ~1 us) instead of costing a clock read per use. A pass
// that a submitter runs right after its post starts from the time of that submit (its
// lw_dag_task_desc_t.submit_ns, read a few hundred nanoseconds before; not when the submit
// waited for ring slots, parent/orch.c hand_over, nor when a pass since used a later time): the
// inline path reads the clock once per task, not twice. The passes' clock never goes back.
#define LW_DAG_CLOCK_USES 8u
int64_t lw__dag_now(lw_dag_t *d);

// ---------------------------------------------------------------------------------------------
// Any thread

// Reserves n task slots, waiting for retirements until the submit timeout; RESOURCE_EXHAUSTED
// (saying nothing was dropped) when they do not come. Every reserved slot must be handed to the
// owner in a command, or given back with lw__dag_unreserve.
LW_MUST_USE lw_status_t lw__dag_reserve(lw_dag_t *d, uint32_t n, lw_error_t *err);
// Takes n slots if they are free now, without waiting: true when it did.
bool lw__dag_try_reserve(lw_dag_t *d, uint32_t n);
void lw__dag_unreserve(lw_dag_t *d, uint32_t n);
// A command with room for n_tasks task descriptions, or NULL when out of memory. The header is
// zeroed; the descriptions are not (a submit's ~1 KB, zeroed for nothing on every submit): the
// maker fills each one whole (parent/orch.c describe) before the post.
lw_dag_cmd_t *lw__dag_cmd_new(lw_dag_cmd_kind_t kind, lw_run_t *run, uint32_t n_tasks);
// Hands cmd to the owner and rings the doorbell. SUBMIT/GROUP: the submitter reserved one slot
// per task and pinned each task's callable (the DAG drops the pins). The run stays alive at
// least until its ORCH_DONE is applied. now_ns: 0, or a read of the monotonic clock this
// thread made just before (a submit's own time, when nothing waited between it and the post),
// handed to the doorbell (hooks.ring) for a pass it runs.
void lw__dag_post(lw_dag_t *d, lw_dag_cmd_t *cmd, int64_t now_ns);
// Whether the run failed (acquire: run->error is then complete and never changes).
bool lw__dag_run_failed(const lw_run_t *run);
// Bumps stop_seq and rings: a run stopped (a cancel request); the owner sweeps its queued tasks.
void lw__dag_note_stop(lw_dag_t *d);

// ---------------------------------------------------------------------------------------------
// The owner

// Applies every posted command, in order. Returns true when there was one.
bool lw__dag_step(lw_dag_t *d, lw_run_t **finished);
// Takes every task of a stopped run out of the ready queues and the ready groups and skips it,
// when a run stopped since the last call (stop_seq moved). Returns true when it did something.
bool lw__dag_sweep_stopped(lw_dag_t *d, lw_run_t **finished);
// Pops the head of a ready queue (NULL when empty); the task is still READY.
lw_task_t *lw__dag_queue_pop(lw_task_queue_t *q);
// Pops the head ready group (all members READY), or NULL.
lw_group_t *lw__dag_group_pop(lw_dag_t *d);
// The task was posted to a child: READY -> RUNNING. lw__dag_task_launch_on names the chip
// (-1: a sub child), which lets the consumers of a task wait for it on that chip's run lane
// instead of in the parent (wait elision: each consumer whose unfinished producers are now all
// posted to that chip becomes READY for it, pushed on its queue; a stopped run's is skipped,
// which may settle runs on *finished). lw__dag_task_launch(d, t) is launch_on(d, t, -1, NULL)
// with no elision.
void lw__dag_task_launch(lw_dag_t *d, lw_task_t *t);
void lw__dag_task_launch_on(lw_dag_t *d, lw_task_t *t, int32_t chip, lw_run_t **finished);
// A task reached a terminal state: updates its run, its consumers, retires it. Runs that
// settled are appended to *finished. When it returns, t and every task it finished on the way
// (consumers, group members) are retired; called from inside such a finish, it only queues t
// (no recursion per dependency).
void lw__task_finish(lw_dag_t *d, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                     lw_run_t **finished);
// A task that can no longer run because its run failed or was cancelled: finished POISONED
// (the run failed) or CANCELLED (a run whose cancel was requested is marked cancelled here).
void lw__task_skip(lw_dag_t *d, lw_task_t *t, lw_run_t **finished);
// True when the run failed, was cancelled or has a cancel requested.
bool lw__run_stopped(const lw_run_t *run);
// Finishes every unfinished task with st, the message of each built by describe (destroy,
// once no other thread is left). Commands still in the inbox are applied first.
void lw__dag_finish_all(lw_dag_t *d, lw_status_t st,
                        void (*describe)(void *ctx, const lw_task_t *t, lw_error_t *out),
                        void *ctx, lw_run_t **finished);
// The number of tasks not FREE (the owner's view; for tests and destroy).
uint32_t lw__dag_live_tasks(const lw_dag_t *d);

#endif  // LANEWORK_PARENT_DAG_H_
