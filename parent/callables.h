// parent/callables.h — the worker's callable table and the register/unregister op machine
// (parent/callables.c).
// Owns (lw_callables_t, the worker's calls): the table and its handle ids, the pins and the
// deferred unregisters that wait for them (a slot is a tombstone, unregistering, until its last pin
// goes), the register/unregister ops in flight (ops, due_unregisters, the serials from
// next_control_id, live_ops), the sub function table every sub child keeps in step (sub_fns,
// sub_names, sub_tags, n_sub_fns, the tags from last_sub_tag). register_sub checks functions
// against the zygote's registry of loaded objects (parent/fs_zygote.h).
// It does the work of lw_worker_register(_async), lw_worker_unregister(_async) and
// lw_worker_register_sub (whose bodies in worker.c call lw__callables_*): a chip callable is
// broadcast to every chip child, all or nothing (a partial register is rolled back with an
// unregister, LW_WOP_ROLLBACK); a sub function is registered on every sub child in the same order
// (rolled back the same way). Lifecycle: lw__callables_initialize (lw_worker_create, on zeroed
// memory: sub_mu, the handle ids) -> ... ->
// lw__callables_fail_ops (lw_worker_destroy, once no thread of the worker is left: finishes
// every op still waiting) -> lw__callables_deinitialize (frees the ids and the sub function
// table; fine on a zeroed table).
// Threads:
//   - user threads register and unregister; they post the controls themselves
//     (lw__ep_control_gen) with no lock held, taking calls->mu only to change the table;
//   - the scheduler (parent/sched.h) hands chip reports to lw__wop_report (calls->mu held),
//     finishes complete ops with lw__wop_complete (no lock), posts the unregisters that became
//     due with lw__wop_start_unregister (no lock), and fails a dead chip's reports with
//     lw__wop_fail_chip (calls->mu held);
//   - a submitter (parent/orch.c, the token holder) pins a callable per task with
//     lw__wc_pin_for_tasks, from its credit without calls->mu when it can (lw_pin_credit_t); the
//     DAG's owner drops the pin with lw__wc_unpin (calls->mu held) through the DAG's unpin hook;
//   - the supervisor (parent/supervise.h) reads the table and the sub function table to
//     replay them into a new child (recording the local ids it gets with that child's
//     generation), reports the completions of unregisters posted to the new child meanwhile
//     (for a callable it gave that child), and fails the ops of a new child that died in its
//     replay with lw__wop_fail_chip.
// Local ids: c->local[chip] and op->local[chip] are valid only for the child of generation
// c->gen[chip] / op->gen[chip], and are posted only bound to it (docs/faults.md, "A
// child-local callable id belongs to the child that gave it").
// Locks, in this order: calls->sub_mu (every change of the sub children's tables: register_sub,
// a sub replay) -> calls->mu (the table, the ops) -> ep->post_mu; the DAG owner's token
// (parent/sched.h) comes before calls->mu and is never taken with it or sub_mu held. ep->ctl_mu
// (one control round trip) is taken under sub_mu but never under calls->mu.
#ifndef LANEWORK_PARENT_CALLABLES_H_
#define LANEWORK_PARENT_CALLABLES_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanes/handle_impl.h"
#include "lanes/handle_table.h"
#include "lanework/callable.h"
#include "lanework/worker.h"

#define LW_CALLABLE_NAME_BYTES 128
#define LW_MAX_CALLABLES 1024

typedef struct lw_wop lw_wop_t;
typedef struct lw_callables lw_callables_t;
typedef struct lw_endpoint lw_endpoint_t;
typedef struct lw_arena lw_arena_t;


typedef enum lw_wc_state {
  LW_WC_FREE = 0,
  LW_WC_REGISTERING = 1,
  LW_WC_LIVE = 2,
  LW_WC_UNREGISTERING = 3,
} lw_wc_state_t;

typedef enum lw_wc_kind {
  LW_WC_CHIP = 1,
  LW_WC_SUB = 2,
} lw_wc_kind_t;

typedef struct lw_wcallable {
  lw_wc_state_t state;
  lw_wc_kind_t kind;
  // The handle id of this slot (calls->ids decides which ids are valid; this copy, 0
  // while the slot is free, lets a task check that its slot still holds its callable).
  uint64_t id;
  char name[LW_CALLABLE_NAME_BYTES];
  char entry[LW_CALLABLE_NAME_BYTES];
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
  lw_image_format_t format;    // chip: as registered (AUTO is resolved by each child)
  char build_options[LW_MAX_BUILD_OPTIONS_BYTES];  // chip: "" for none
  void *image;                 // arena copy (chip): replayed to a respawned child
  uint64_t image_bytes;
  uint64_t local[LW_MAX_CHIPS];  // child-local callable ids
  // The endpoint generation of the child that gave local[chip] (its register's report, or the
  // replay into that child). A local id means something only to that child: an unregister is
  // posted bound to this generation (lw__ep_control_gen), never to a successor.
  uint64_t gen[LW_MAX_CHIPS];
  uint64_t sub_index;          // sub callables: index in every sub child's table
  // Sub callables: the tag every sub child keeps at sub_index. Unique per worker (from
  // calls->last_sub_tag), so a task naming one index with another function's tag is refused.
  uint32_t sub_tag;
  lw_sub_fn fn;
  // Tasks that reference this callable and may still need it on the parent's side: for a
  // chip callable, tasks accepted but not yet posted (once posted, the chip child holds its
  // own pin until the run finished); for a sub callable, tasks not yet terminal (a sub child
  // keeps no pins). The slot, and with it the id, is freed only when pins is 0.
  uint32_t pins;
  // An unregister not posted yet: it waits for pins == 0 (a chip callable's stays set while
  // it waits on calls->due_unregisters, until the scheduler posts it).
  lw_wop_t *deferred_unregister;
} lw_wcallable_t;
_Static_assert(sizeof(((lw_wcallable_t *)0)->param_dirs) == LW_MAX_PARAMS,
               "a callable's param_dirs holds LW_MAX_PARAMS entries");

// A worker-level register or unregister, broadcast to every chip child.
typedef enum lw_wop_kind {
  LW_WOP_REGISTER = 1,
  LW_WOP_UNREGISTER = 2,
  LW_WOP_ROLLBACK = 3,  // an unregister undoing a partial register: no handle is waiting
} lw_wop_kind_t;

struct lw_wop {
  lw_handle_t handle;  // first
  lw_callables_t *calls;
  lw_wop_kind_t kind;
  uint32_t wc;         // callable table index
  // From calls->next_control_id, never reused: a chip's report names (serial << 8 | chip), so a
  // late report can never complete a later op that happens to live at the same address.
  uint64_t serial;
  bool sub;            // a sub callable's unregister: no chip takes part, pins gate it
  uint32_t pending;    // chips that have not reported
  bool reported[LW_MAX_CHIPS];
  bool ok[LW_MAX_CHIPS];
  uint64_t local[LW_MAX_CHIPS];
  // The endpoint generation of the child that reported OK on each chip: a register whose child
  // was replaced before the register completed is not in the new child (callables.c), and a
  // rollback names local[chip] only to that child.
  uint64_t gen[LW_MAX_CHIPS];
  lw_status_t status;  // first failure
  lw_error_t error;
  lw_wop_t *next_pending;  // in calls->ops (under calls->mu)
  // In a pending_work_t list of the scheduler (ops to complete, deferred unregisters to post).
  // An op is on at most one such list at a time.
  lw_wop_t *next_done;
  // A deferred unregister whose callable's last pin went: it is on calls->due_unregisters, or
  // taken from it to be posted (under calls->mu). From then on its callable has no task left to
  // run anywhere, so a replay does not give it to a new child (and takes no pin on it), and it
  // is never queued twice.
  bool due;
  // A rollback: the failed register it undoes, whose handle it finishes when it completes (its
  // producer reference held until then), so the register's caller sees the failure only once
  // nothing of it is left on any chip (a same-digest register right after it is not refused
  // "pending unregister"). NULL otherwise.
  lw_wop_t *undoes;
};

// Pins taken ahead for the orch function that holds the worker's orchestrator token
// (parent/orch.c): a submit that takes calls->mu (all but the function's first) pins its
// callable for LW_PIN_CREDIT_BATCH more tasks than it needs; the next submits of it take their
// pins from `n` with a compare-and-swap, without calls->mu, which the scheduler's passes take
// whenever they post (on a many-core host a lock per task made the caller and the scheduler
// sleep on it a quarter of the time). An unregister takes what is left back (an exchange,
// under calls->mu) before it counts the pins, so a tombstoned callable has no credit and the
// next submit fails "pending unregister" as before; the token holder gives every credit back
// when its orch function ends (lw__wc_credit_return_all). id, wc and sub are written under
// calls->mu by the token holder only, which alone reads them without the lock.
#define LW_PIN_CREDITS 4
#define LW_PIN_CREDIT_BATCH 64
typedef struct lw_pin_credit {
  uint64_t id;       // the callable handle's id; 0: the entry is empty
  uint32_t wc;       // its table index
  bool sub;
  _Atomic uint32_t n;  // pins held and not yet handed to a task
} lw_pin_credit_t;

// What the callables work with, given by the worker at initialize (lw_worker_create) and
// fixed from then on. None of it is owned here.
typedef struct lw_callables_links {
  // The worker's idle lock and condvar: broadcast when an op finishes (destroy waits on them
  // for no live op); idle_mu is a leaf, taken under mu.
  pthread_mutex_t *idle_mu;
  pthread_cond_t *idle_cv;
  lw_endpoint_t *eps;       // n_chips chip endpoints, then n_subs sub endpoints
  uint32_t n_chips, n_subs;
  lw_arena_t *arena;        // chip images are copied here (the children map it)
  const _Atomic bool *stopping;  // the worker is being destroyed: no new register
  void (*kick)(void *ctx);       // wakes the scheduler (an unregister became due)
  void (*notify)(void *ctx, lw_handle_t *h);  // an op's handle finished (the user's event fd)
  void *ctx;                     // for kick and notify
} lw_callables_links_t;

// The worker's callables. Guarded by mu unless said otherwise.
struct lw_callables {
  bool initialized;          // sub_mu and ids exist (create/destroy only)
  // The table's lock: it guards the table, the ops and the sub function table (with sub_mu);
  // the DAG's owner takes it inside its pass (parent/sched.h, lw__sched_pass_hold_calls)
  // before it reads a callable, reports an op or drops a pin.
  pthread_mutex_t mu;
  lw_callables_links_t links;  // copied at initialize
  lw_wcallable_t table[LW_MAX_CALLABLES];
  // Handle ids of the table: index i of ids is table[i].
  lw_handle_table_t ids;
  uint32_t last_sub_tag;     // the last sub callable tag handed out
  lw_wop_t *ops;             // register/unregister ops waiting for chip reports
  // Deferred chip unregisters whose pins dropped to 0, linked by next_done: the scheduler
  // takes them (under mu) and posts them to the chips (without mu). Changed under mu only; an
  // atomic so that a pass may look whether there is any without the lock (relaxed: a push
  // kicks the scheduler, so one a pass misses brings another pass).
  lw_wop_t *_Atomic due_unregisters;
  uint64_t next_control_id;  // the last op serial handed out
  // Ops not finished (destroy waits for 0 on idle_cv): changed under mu, read by destroy's
  // wait under idle_mu (an atomic for that read).
  _Atomic uint32_t live_ops;
  // Every sub function ever registered, in order: replayed to a respawned sub child so its
  // table indices match. sub_mu serializes every change of the sub children's tables (a
  // register_sub broadcast, a replay), so each sub child gets the same functions in the same
  // order; it is taken before calls->mu and ep->ctl_mu. The arrays change under both sub_mu and
  // calls->mu, so either lock is enough to read them.
  pthread_mutex_t sub_mu;
  lw_sub_fn *sub_fns;
  char (*sub_names)[LW_CALLABLE_NAME_BYTES];
  uint32_t *sub_tags;        // the tag every task for that function carries (see sub_child.c)
  uint32_t n_sub_fns;
  lw_pin_credit_t credit[LW_PIN_CREDITS];  // see lw_pin_credit_t
  uint32_t credit_victim;    // the entry a refill empties when none is free (token holder)
  // Pins the token holder's orch function took under calls->mu (reset when it ends): the first
  // takes no credit (token holder).
  uint32_t credit_misses;

  // Counters for lw_worker_stats (relaxed atomics, read by any thread as a snapshot), bumped
  // once per op the caller sees end, never by a replay into a respawned child: registers that
  // succeeded and unregisters done, of chip callables and of sub functions, and failed
  // registers by the child their error names (chips first, then subs).
  _Atomic uint64_t chip_registers, chip_unregisters, sub_registers, sub_unregisters;
  _Atomic uint64_t register_failures[LW_MAX_CHIPS + LW_MAX_SUBS];
};

// ---------------------------------------------------------------------------------------------
// Calls between the components

// A chip reported on a register/unregister op (calls->mu held). Returns true when the
// op has every report and must be completed with lw__wop_complete (without calls->mu).
// chip is the parent's own record of where the completion came from (the endpoint whose ring
// held it), never a value the child wrote: a child cannot report for another chip.
bool lw__wop_report(lw_callables_t *calls, uint32_t chip, uint64_t control_id, lw_status_t st,
                    uint64_t value, const lw_error_t *err, lw_wop_t **out_op);
void lw__wop_complete(lw_wop_t *op);
// A chip died: every op posted to it that it has not answered gets its report now (calls->mu
// held): a register fails with err, an unregister counts as done (nothing of the callable is
// left on that chip). A register that chip had already taken, still waiting on other chips,
// fails too: the new child will not have the callable (the replay takes live ones only). Ops
// that became complete are pushed onto *done (linked by next_done; no bound) for
// lw__wop_complete without calls->mu.
void lw__wop_fail_chip(lw_callables_t *calls, uint32_t chip, const lw_error_t *err,
                       lw_wop_t **done);
// Pins the callable behind h n times for tasks about to be submitted: it must be live, and a
// sub callable exactly when want_sub. Out: its slot and id. Errors name the callable: unknown
// or released handle (NOT_FOUND), still registering or pending unregister
// (FAILED_PRECONDITION), the wrong kind for the submit (INVALID_ARGUMENT). The holder of the
// worker's orchestrator token only: the pins come from its credit (lw_pin_credit_t) without
// calls->mu when it has them, else under calls->mu with a refill of the credit.
LW_MUST_USE lw_status_t lw__wc_pin_for_tasks(lw_callables_t *calls, lw_callable_handle_t h,
                                             bool want_sub, uint32_t n, uint32_t *out_wc,
                                             uint64_t *out_id, lw_error_t *err);
// Gives back every pin left in the token holder's credit (takes calls->mu when there is any): its
// orch function ended (returned, or its frame went with a longjmp).
void lw__wc_credit_return_all(lw_callables_t *calls);
// Drops one pin of a task's callable (calls->mu held). When the last pin goes and an unregister
// waits for it: a sub callable's slot is freed and its unregister finishes now; a chip
// callable's unregister is queued on calls->due_unregisters and the scheduler is woken to post it.
void lw__wc_unpin(lw_callables_t *calls, uint32_t wc);
// Drops n pins of callable wc, one lw__wc_unpin each (calls->mu held).
void lw__wc_unpin_n(lw_callables_t *calls, uint32_t wc, uint32_t n);
// The task-frame `callable` word of a sub task: (tag << 32) | sub index. The sub child
// refuses a task whose tag is not the one it registered at that index.
static inline uint64_t lw__sub_task_callable(uint32_t tag, uint64_t sub_index) {
  return ((uint64_t)tag << 32) | (sub_index & 0xffffffffu);
}
// Starts posting a deferred unregister taken from calls->due_unregisters (no lock held).
void lw__wop_start_unregister(lw_wop_t *op);

LW_MUST_USE lw_status_t lw__callables_initialize(lw_callables_t *calls,
                                                 const lw_callables_links_t *links,
                                                 lw_error_t *err);
void lw__callables_deinitialize(lw_callables_t *calls);

// The calls behind the public API (worker.c implements lw_worker_register(_async),
// lw_worker_unregister(_async) and lw_worker_register_sub on them). Each returns its status and
// fills err; a started op's handle is in *out, with the caller's reference.
// Starts a chip callable's register, broadcast to every chip child (all or nothing).
LW_MUST_USE lw_status_t lw__callables_register_async(lw_callables_t *calls,
                                                     const lw_callable_t *c, lw_handle_t **out,
                                                     lw_error_t *err);
// Starts an unregister of the callable behind h: a chip callable's is posted once its pins are
// gone; with subs_too a sub callable's too (its op finishes once no task references it),
// without it a sub callable is refused (INVALID_ARGUMENT).
LW_MUST_USE lw_status_t lw__callables_unregister_async(lw_callables_t *calls,
                                                       lw_callable_handle_t h, bool subs_too,
                                                       lw_handle_t **out, lw_error_t *err);
// Registers fn on every sub child, in the same order on each (rolled back on a failure); the
// sub function table is kept for replays. Returns once every sub child answered.
LW_MUST_USE lw_status_t lw__callables_register_sub(lw_callables_t *calls, lw_sub_fn fn,
                                                   const char *name, lw_callable_handle_t *out,
                                                   lw_error_t *err);

// Finishes every op still waiting, UNAVAILABLE with *error (lw_worker_destroy, once no thread
// of the worker is left: no lock is taken). A deferred unregister is on calls->ops too.
void lw__callables_fail_ops(lw_callables_t *calls, const lw_error_t *error);

#endif  // LANEWORK_PARENT_CALLABLES_H_
