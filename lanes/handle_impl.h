// lanes/handle_impl.h — how operations implement lw_handle_t.
//
// An operation (an L2 run, a register, an L3 run...) embeds an lw_handle_t as the FIRST field
// of its own struct, so the handle's lifetime is the operation's lifetime and a cancel through
// the handle can never reach freed memory.
//
// Lifecycle:
//   lw__handle_initialize(h, kind, ops) with refs = 2: one for the caller (dropped by
//   lw_handle_release), one for the producer (dropped by lw__handle_unref once the producer
//   no longer touches the op). When refs reach 0, ops->destroy(h) frees the containing struct.
//
// Finishing: lw__handle_finish claims the handle exactly once (atomic exchange on `claimed`):
// the first call stores status/error/timing, then signals the done timeline (release), then
// calls the notify hook if set; later calls change nothing and return false. Fill result
// fields (callable, timing) BEFORE finish; they are read after lw_handle_done (acquire).
//
// Cancel: lw_handle_cancel returns NOT_FOUND when already done; otherwise sets
// cancel_requested (seq_cst) and calls ops->cancel(h) (may be NULL: nothing to do), which
// returns OK. The op checks lw__handle_cancel_requested at its own safe points.
#ifndef LANEWORK_LANES_HANDLE_IMPL_H_
#define LANEWORK_LANES_HANDLE_IMPL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanes/timeline.h"
#include "lanework/handle.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_HANDLE_MAGIC 0x4c57484eu     // "LWHN" while alive
#define LW_HANDLE_MAGIC_DEAD 0x44454144u // "DEAD" after destroy

typedef struct lw_handle_ops {
  // Called by lw_handle_cancel on an unfinished handle, after cancel_requested was set.
  lw_status_t (*cancel)(lw_handle_t *h);
  // Frees the containing struct. Required.
  void (*destroy)(lw_handle_t *h);
  // May be NULL. Called by lw_handle_wait on the waiting thread, on a handle not finished yet,
  // before it spins and blocks on the done timeline: an op whose finish needs work that a
  // thread would otherwise be woken for (an L3 run's completions, which the scheduler takes)
  // does that work here while it spins, for at most budget_ns of yields (0: the process's
  // budget, lanes/spin.h) and until the absolute deadline_ns. It may return with the handle
  // unfinished (the wait then goes on as usual: true says it spun, and the wait blocks at
  // once; false, that it did not, and the wait spins first), and must cope with the op
  // finishing, and the object behind it going away, meanwhile (the caller's reference keeps
  // only the handle).
  bool (*wait_assist)(lw_handle_t *h, int64_t deadline_ns, int64_t budget_ns);
} lw_handle_ops_t;

// Called once, on the finishing thread, right after the handle became done.
typedef void (*lw_handle_notify_fn)(void *ctx, lw_handle_t *h);

struct lw_handle {
  uint32_t magic;
  lw_handle_kind_t kind;
  const lw_handle_ops_t *ops;
  _Atomic uint32_t refs;
  _Atomic uint32_t claimed;          // 0 -> 1 by the one finish that wins
  _Atomic uint32_t cancel_requested; // set by lw_handle_cancel
  lw_timeline_t done;                // 0 -> 1 when finished
  lw_status_t status;                // valid once done
  lw_error_t error;                  // valid once done (code == status)
  lw_callable_handle_t callable;     // register handles
  lw_run_timing_t timing;            // run handles
  lw_handle_notify_fn notify;
  void *notify_ctx;
};

void lw__handle_initialize(lw_handle_t *h, lw_handle_kind_t kind, const lw_handle_ops_t *ops);

// Sets a notify hook; only before the handle is given to anyone else.
void lw__handle_set_notify(lw_handle_t *h, lw_handle_notify_fn fn, void *ctx);

// Finishes h. err may be NULL (then the error record gets status and an empty message, or for
// a non-OK status the status name). Returns true if this call finished it.
bool lw__handle_finish(lw_handle_t *h, lw_status_t status, const lw_error_t *err);

// Takes / drops a reference.
void lw__handle_ref(lw_handle_t *h);
void lw__handle_unref(lw_handle_t *h);

static inline bool lw__handle_cancel_requested(const lw_handle_t *h) {
  return atomic_load_explicit(&h->cancel_requested, memory_order_seq_cst) != 0;
}

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_HANDLE_IMPL_H_
