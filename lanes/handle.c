// lanes/handle.c — lw_handle_t: the caller's view of an async operation.
//
// A handle is done when its `done` timeline reaches 1. lw__handle_finish claims the handle
// with an atomic exchange, fills the result, then signals the timeline (release); readers
// check the timeline (acquire) before reading the result, so they never see it half written.
//
// Released or invalid handles: public functions check h->magic and fail INVALID_ARGUMENT
// ("released or invalid handle"). This is best effort only: a handle whose memory was freed
// may hold anything, so the check catches mistakes early but is not a safety guarantee.
#include "lanes/handle_impl.h"

#include <string.h>

#include "lanes/error.h"
#include "lanes/spin.h"
#include "lanes/sys.h"

static bool handle_ok(const lw_handle_t *h) { return h != NULL && h->magic == LW_HANDLE_MAGIC; }

// Fills err with why h is not a usable handle and returns err, for the public function fn
// to store as the thread-local last error.
static const lw_error_t *bad_handle(const lw_handle_t *h, const char *fn, lw_error_t *err) {
  if (h == NULL) {
    (void)lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: handle is NULL", fn);
  } else {
    (void)lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: released or invalid handle", fn);
  }
  return err;
}

void lw__handle_initialize(lw_handle_t *h, lw_handle_kind_t kind, const lw_handle_ops_t *ops) {
  // Plain stores: the handle is not yet shared with any other thread.
  h->magic = LW_HANDLE_MAGIC;
  h->kind = kind;
  h->ops = ops;
  atomic_init(&h->refs, 2);  // one for the caller, one for the producer
  atomic_init(&h->claimed, 0);
  atomic_init(&h->cancel_requested, 0);
  lw__timeline_initialize(&h->done, 0, 0);
  h->status = LW_OK;
  lw__error_clear(&h->error);
  memset(&h->callable, 0, sizeof(h->callable));
  memset(&h->timing, 0, sizeof(h->timing));
  h->notify = NULL;
  h->notify_ctx = NULL;
}

void lw__handle_set_notify(lw_handle_t *h, lw_handle_notify_fn fn, void *ctx) {
  h->notify = fn;
  h->notify_ctx = ctx;
}

bool lw__handle_finish(lw_handle_t *h, lw_status_t status, const lw_error_t *err) {
  // acq_rel exchange: exactly one finisher sees 0. Acquire so that the winner sees the
  // result fields the producer filled before calling finish on another thread.
  if (atomic_exchange_explicit(&h->claimed, 1, memory_order_acq_rel) != 0) return false;

  h->status = status;
  if (err != NULL) {
    h->error = *err;
    h->error.message[sizeof(h->error.message) - 1] = '\0';
  } else {
    lw__error_clear(&h->error);
    if (status != LW_OK) {
      (void)lw__error_set(&h->error, status, -1, 0, "%s", lw_status_name(status));
    }
  }
  h->error.code = status;  // the record always agrees with the status

  // Release (inside signal): readers that see done (acquire) see status, error and results.
  if (lw__timeline_signal(&h->done, 1) != LW_OK) {
    // Cannot happen: the exchange above lets one caller here, and nothing fails `done`.
    lw__timeline_fail(&h->done, LW_INTERNAL);
  }
  if (h->notify != NULL) h->notify(h->notify_ctx, h);
  return true;
}

void lw__handle_ref(lw_handle_t *h) {
  // Relaxed: the caller already holds a reference, so the handle cannot die meanwhile.
  atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

void lw__handle_unref(lw_handle_t *h) {
  // acq_rel: release our writes to whoever drops the last reference; the last one acquires
  // everyone else's before destroying.
  if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1) return;
  h->magic = LW_HANDLE_MAGIC_DEAD;  // best-effort detection of use after release
  h->ops->destroy(h);
}

bool lw_handle_done(const lw_handle_t *h) {
  if (!handle_ok(h)) return false;
  return lw__timeline_reached(&h->done, 1);  // one acquire load
}

lw_status_t lw_handle_wait(lw_handle_t *h, int64_t timeout_ns) {
  lw_error_t err;
  if (!handle_ok(h)) return lw__last_error_store(bad_handle(h, "lw_handle_wait", &err));
  // Fast path: a finished handle costs one acquire load and no syscall.
  if (!lw__timeline_reached(&h->done, 1)) {
    if (timeout_ns == 0) return LW_DEADLINE_EXCEEDED;  // poll
    int64_t deadline = lw__deadline_after(timeout_ns);
    // A cancelled run's end is due within its kernel's poll interval (lanes/spin.h,
    // LW_SPIN_CANCEL_BUDGET_NS); not a register's (a compile) nor an L4 run's (other hosts).
    bool run = h->kind == LW_HANDLE_RUN || h->kind == LW_HANDLE_WORKER_RUN;
    int64_t budget = run && atomic_load_explicit(&h->cancel_requested, memory_order_relaxed) != 0
                         ? LW_SPIN_CANCEL_BUDGET_NS
                         : 0;
    // An assist that spun leaves the wait to block at once: one spin per wait.
    if (h->ops->wait_assist != NULL && h->ops->wait_assist(h, deadline, budget)) budget = -1;
    lw_status_t st = lw__timeline_wait_spin(&h->done, 1, deadline, budget);
    if (st != LW_OK) {
      return lw__fail(LW_DEADLINE_EXCEEDED, "lw_handle_wait: not done after %lld ns",
                      (long long)timeout_ns);
    }
  }
  // A failed operation also leaves its error in the thread-local last error, so a sync call
  // built from async + wait reports like any other failing sync call.
  if (h->status != LW_OK) (void)lw__last_error_store(&h->error);
  return h->status;
}

lw_status_t lw_handle_cancel(lw_handle_t *h) {
  lw_error_t err;
  if (!handle_ok(h)) return lw__last_error_store(bad_handle(h, "lw_handle_cancel", &err));
  if (lw__timeline_reached(&h->done, 1)) return LW_NOT_FOUND;  // finished: nothing changes
  // The op may still finish between the check above and the hook below; ops->cancel must
  // accept an op that just finished (the caller's reference keeps the memory alive).
  // seq_cst pairs with lw__handle_cancel_requested in the op. The exchange makes the op's
  // cancel hook run once however many times the caller cancels.
  if (atomic_exchange_explicit(&h->cancel_requested, 1, memory_order_seq_cst) != 0) {
    return LW_OK;
  }
  if (h->ops->cancel != NULL) return h->ops->cancel(h);
  return LW_OK;
}

lw_status_t lw_handle_status(const lw_handle_t *h) {
  lw_error_t err;
  if (!handle_ok(h)) return lw__last_error_store(bad_handle(h, "lw_handle_status", &err));
  if (!lw__timeline_reached(&h->done, 1)) return LW_FAILED_PRECONDITION;
  return h->status;
}

const lw_error_t *lw_handle_error(const lw_handle_t *h) {
  if (!handle_ok(h)) return NULL;
  if (!lw__timeline_reached(&h->done, 1) || h->status == LW_OK) return NULL;
  return &h->error;
}

lw_handle_kind_t lw_handle_kind(const lw_handle_t *h) {
  if (!handle_ok(h)) return (lw_handle_kind_t)0;
  return h->kind;
}

// Shared checks of lw_handle_callable and lw_handle_timing. A bad argument fills err (the
// caller stores it as the last error); a handle not done, or done with an error, returns its
// status and leaves err clear. *done says whether the handle was found finished (one look: a
// caller that fills its out only then cannot fill it while reporting "still running").
static lw_status_t result_ready(const lw_handle_t *h, const void *out, lw_handle_kind_t kind,
                                const char *fn, lw_error_t *err, bool *done) {
  err->code = LW_OK;  // the caller reads only the code when nothing failed
  *done = false;
  if (!handle_ok(h)) return bad_handle(h, fn, err)->code;
  if (out == NULL) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: out is NULL", fn);
  if (h->kind != kind) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: wrong handle kind %d (want %d)",
                         fn, (int)h->kind, (int)kind);
  }
  if (!lw__timeline_reached(&h->done, 1)) return LW_FAILED_PRECONDITION;
  *done = true;
  return h->status;
}

lw_status_t lw_handle_callable(const lw_handle_t *h, lw_callable_handle_t *out) {
  lw_error_t err;
  bool done;
  lw_status_t st = result_ready(h, out, LW_HANDLE_REGISTER, "lw_handle_callable", &err, &done);
  if (err.code != LW_OK) return lw__last_error_store(&err);
  if (st == LW_OK) *out = h->callable;
  return st;
}

lw_status_t lw_handle_timing(const lw_handle_t *h, lw_run_timing_t *out) {
  lw_error_t err;
  bool done;
  lw_status_t st = result_ready(h, out, LW_HANDLE_RUN, "lw_handle_timing", &err, &done);
  if (err.code != LW_OK) return lw__last_error_store(&err);
  // A failed or cancelled run has times too (how long it waited, how long its kernel ran before
  // it stopped): filled for every finished run, as an L3 task's report is.
  if (done) *out = h->timing;
  return st;
}

void lw_handle_release(lw_handle_t *h) {
  if (!handle_ok(h)) return;  // NULL is ignored; a bad handle is best-effort ignored too
  lw__handle_unref(h);
}
