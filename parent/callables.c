// parent/callables.c — the worker's callable table, register/unregister broadcast to every
// chip child (all-or-nothing with rollback), register_sub; contract in parent/callables.h.
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callables/digest.h"
#include "callables/image.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "parent/callables.h"
#include "parent/endpoint.h"
#include "parent/arena.h"
#include "parent/forkserver.h"

// ---------------------------------------------------------------------------------------------
// Callable table (calls->mu held)

static lw_wcallable_t *wc_lookup(lw_callables_t *calls, lw_callable_handle_t h) {
  uint32_t index;
  if (lw__handle_table_lookup(&calls->ids, h.id, &index) != LW_OK) return NULL;
  return &calls->table[index];
}

// A zeroed slot (state FREE until the caller sets it) with a fresh id, or NULL when the table
// is full.
static lw_wcallable_t *wc_alloc(lw_callables_t *calls) {
  uint32_t index;
  uint64_t id;
  if (lw__handle_table_alloc(&calls->ids, &index, &id) != LW_OK) return NULL;
  lw_wcallable_t *c = &calls->table[index];
  memset(c, 0, sizeof(*c));
  c->id = id;
  return c;
}

// A chip callable pending unregister whose image, entry, signature, format and build options
// are those of c (image: c's copy in the arena), or NULL (calls->mu held). Only an exact byte match
// counts: the same kernel compressed differently is left to the chip child's digest check.
static const lw_wcallable_t *wc_find_same_dying(lw_callables_t *calls, const lw_callable_t *c,
                                                const void *image) {
  const char *entry = c->entry ? c->entry : LW_DEFAULT_ENTRY;
  const char *options = c->build_options ? c->build_options : "";
  for (uint32_t i = 0; i < LW_MAX_CALLABLES; ++i) {
    const lw_wcallable_t *d = &calls->table[i];
    if (d->kind != LW_WC_CHIP || d->state != LW_WC_UNREGISTERING || !d->image) continue;
    if (d->image_bytes != c->image_bytes || d->n_params != c->n_params ||
        d->format != c->format || strcmp(d->entry, entry) != 0 ||
        strcmp(d->build_options, options) != 0) {
      continue;
    }
    if (c->n_params && memcmp(d->param_dirs, c->param_dirs, c->n_params) != 0) continue;
    if (memcmp(d->image, image, c->image_bytes) == 0) return d;
  }
  return NULL;
}

static void wc_release(lw_callables_t *calls, lw_wcallable_t *c) {
  if (c->image) lw__arena_free(calls->links.arena, c->image);
  lw__handle_table_release(&calls->ids, (uint32_t)(c - calls->table));
  memset(c, 0, sizeof(*c));
}

// ---------------------------------------------------------------------------------------------
// Register / unregister ops

static void wop_destroy(lw_handle_t *h) { free(h); }
static lw_status_t wop_cancel(lw_handle_t *h);
static const lw_handle_ops_t wop_ops = {.cancel = wop_cancel, .destroy = wop_destroy};

// calls->mu held (the serial comes from calls->next_control_id).
static lw_wop_t *wop_new(lw_callables_t *calls, lw_wop_kind_t kind, uint32_t wc) {
  lw_wop_t *op = calloc(1, sizeof(*op));
  if (!op) return NULL;
  op->serial = ++calls->next_control_id;
  lw__handle_initialize(&op->handle, kind == LW_WOP_REGISTER ? LW_HANDLE_REGISTER
                                                             : LW_HANDLE_UNREGISTER,
                        &wop_ops);
  if (calls->links.notify)
    lw__handle_set_notify(&op->handle, calls->links.notify, calls->links.ctx);
  op->calls = calls;
  op->kind = kind;
  op->wc = wc;
  op->pending = calls->links.n_chips;
  return op;
}

// (serial << 8) | chip: unique per op and chip for the worker's lifetime, so a report can only
// ever complete the op it was posted for. Serials stay far below 2^55, so these ids never meet
// the replay's (bit 63 set; see supervise.c).
static uint64_t op_control_id(const lw_wop_t *op, uint32_t chip) {
  return (op->serial << 8) | chip;
}

// The generation of the endpoint's current child (calls->mu held; post_mu nests inside it).
static uint64_t ep_generation(lw_endpoint_t *ep) {
  pthread_mutex_lock(&ep->post_mu);
  uint64_t g = ep->generation;
  pthread_mutex_unlock(&ep->post_mu);
  return g;
}

static void op_record(lw_wop_t *op, uint32_t chip, lw_status_t st, uint64_t value,
                      const lw_error_t *err) {
  if (chip >= LW_MAX_CHIPS || op->reported[chip]) return;
  op->reported[chip] = true;
  op->pending--;
  if (st == LW_OK) {
    op->ok[chip] = true;
    op->local[chip] = value;
    op->gen[chip] = ep_generation(&op->calls->links.eps[chip]);
  } else if (op->status == LW_OK) {
    op->status = st;
    const char *what = op->kind == LW_WOP_REGISTER ? "register" : "unregister";
    lw__error_set(&op->error, st, (int32_t)chip, 0, "chip %u: %s of %s failed: %s", chip, what,
                  op->calls->table[op->wc].name, err ? err->message : lw_status_name(st));
  }
}

static void ops_unlink(lw_callables_t *calls, lw_wop_t *op) {
  for (lw_wop_t **pp = &calls->ops; *pp; pp = &(*pp)->next_pending) {
    if (*pp == op) {
      *pp = op->next_pending;
      return;
    }
  }
}

bool lw__wop_report(lw_callables_t *calls, uint32_t chip, uint64_t control_id, lw_status_t st,
                    uint64_t value, const lw_error_t *err, lw_wop_t **out_op) {
  *out_op = NULL;
  // Matched against the id this op posted to *this* chip: a control id the child made up (or
  // one naming another chip) matches nothing.
  for (lw_wop_t *op = calls->ops; op; op = op->next_pending) {
    if (op->sub || op_control_id(op, chip) != control_id) continue;
    op_record(op, chip, st, value, err);
    if (op->pending == 0) {
      ops_unlink(calls, op);
      *out_op = op;
      return true;
    }
    return false;
  }
  return false;  // a completion for nothing we wait on: ignore (e.g. after destroy began)
}

// A deferred unregister is not posted yet (it stays deferred until the scheduler takes it off
// calls->due_unregisters to post it): the chips still have the callable (a respawned chip gets it
// in its replay) and are told once its last queued task was posted.
static bool op_deferred(const lw_callables_t *calls, const lw_wop_t *op) {
  return calls->table[op->wc].deferred_unregister == op;
}

void lw__wop_fail_chip(lw_callables_t *calls, uint32_t chip, const lw_error_t *err,
                       lw_wop_t **done) {
  lw_wop_t *op = calls->ops;
  while (op) {
    lw_wop_t *next = op->next_pending;
    if (op->kind == LW_WOP_REGISTER && op->reported[chip] && op->ok[chip]) {
      // The chip took the register but its child is gone, and the new child does not get the
      // callable (a respawn replays only live ones): the register cannot finish on every chip.
      // Nothing is left there to roll back.
      op->ok[chip] = false;
      if (op->status == LW_OK) {
        op->status = err->code;
        lw__error_set(&op->error, err->code, (int32_t)chip, 0,
                      "chip %u: register of %s failed: the child died after taking it, before "
                      "every chip had: %s",
                      chip, calls->table[op->wc].name, err->message);
      }
    }
    if (!op->sub && !op_deferred(calls, op) && !op->reported[chip]) {
      // An unregister is done on a chip that died: nothing of the callable is left there (the
      // replay skips callables being unregistered).
      bool gone_is_done = op->kind == LW_WOP_UNREGISTER || op->kind == LW_WOP_ROLLBACK;
      op_record(op, chip, gone_is_done ? LW_OK : err->code, 0, err);
      if (op->pending == 0) {
        ops_unlink(calls, op);
        op->next_done = *done;
        *done = op;
      }
    }
    op = next;
  }
}

// An op finished: one live op fewer, and destroy's wait (on the worker's idle condvar) hears
// of it. The count is stored before the broadcast under idle_mu, so a waiter that read it
// before is already waiting when the broadcast comes.
static void ops_gone(lw_callables_t *calls) {
  atomic_fetch_sub(&calls->live_ops, 1);
  pthread_mutex_lock(calls->links.idle_mu);
  pthread_cond_broadcast(calls->links.idle_cv);
  pthread_mutex_unlock(calls->links.idle_mu);
}

// A sub callable's unregister is done: no task references the callable any more (calls->mu held).
static void sub_unregister_done(lw_callables_t *calls, lw_wcallable_t *c, lw_wop_t *op) {
  atomic_fetch_add_explicit(&calls->sub_unregisters, 1, memory_order_relaxed);  // a counter
  ops_unlink(calls, op);
  wc_release(calls, c);
  ops_gone(calls);
  // Finishing only stores the result, wakes waiters and writes the event fd: fine under calls->mu.
  (void)lw__handle_finish(&op->handle, LW_OK, NULL);
  lw__handle_unref(&op->handle);
}

// Takes n pins from the token holder's credit for h, without calls->mu; false when there is no
// such credit or not n pins left in it (an unregister may have taken it back meanwhile).
static bool credit_take(lw_callables_t *calls, lw_callable_handle_t h, bool want_sub, uint32_t n,
                        uint32_t *out_wc, uint64_t *out_id) {
  for (uint32_t i = 0; i < LW_PIN_CREDITS; ++i) {
    lw_pin_credit_t *pc = &calls->credit[i];
    if (pc->id != h.id || pc->id == 0 || pc->sub != want_sub) continue;
    // Relaxed: the pins were counted under calls->mu, which this thread held when it filled the
    // entry; an unregister's exchange and these compare-and-swaps are on one atomic.
    uint32_t have = atomic_load_explicit(&pc->n, memory_order_relaxed);
    while (have >= n) {
      if (atomic_compare_exchange_weak_explicit(&pc->n, &have, have - n, memory_order_relaxed,
                                                memory_order_relaxed)) {
        *out_wc = pc->wc;
        *out_id = pc->id;
        return true;
      }
    }
    return false;
  }
  return false;
}

void lw__wc_unpin_n(lw_callables_t *calls, uint32_t wc, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) lw__wc_unpin(calls, wc);
}

// Empties credit entry pc, dropping the pins left in it (calls->mu held).
static void credit_drop(lw_callables_t *calls, lw_pin_credit_t *pc) {
  if (pc->id == 0) return;
  uint32_t left = atomic_exchange_explicit(&pc->n, 0, memory_order_relaxed);
  uint32_t wc = pc->wc;
  pc->id = 0;
  lw__wc_unpin_n(calls, wc, left);
}

// An unregister of table index wc begins (calls->mu held): the credit left for it goes back, so
// its pins count only tasks. The entry itself stays (only the token holder fills or empties
// entries); its n is 0, so the next submit of the callable takes the locked path and fails.
static void credit_take_back(lw_callables_t *calls, uint32_t wc) {
  for (uint32_t i = 0; i < LW_PIN_CREDITS; ++i) {
    lw_pin_credit_t *pc = &calls->credit[i];
    if (pc->id == 0 || pc->wc != wc) continue;
    uint32_t left = atomic_exchange_explicit(&pc->n, 0, memory_order_relaxed);
    calls->table[wc].pins -= left;  // the caller looks at pins == 0 next
  }
}

void lw__wc_credit_return_all(lw_callables_t *calls) {
  calls->credit_misses = 0;
  bool any = false;
  for (uint32_t i = 0; i < LW_PIN_CREDITS; ++i) any |= calls->credit[i].id != 0;
  if (!any) return;
  pthread_mutex_lock(&calls->mu);
  for (uint32_t i = 0; i < LW_PIN_CREDITS; ++i) credit_drop(calls, &calls->credit[i]);
  pthread_mutex_unlock(&calls->mu);
}

lw_status_t lw__wc_pin_for_tasks(lw_callables_t *calls, lw_callable_handle_t h, bool want_sub,
                                 uint32_t n, uint32_t *out_wc, uint64_t *out_id,
                                 lw_error_t *err) {
  if (credit_take(calls, h, want_sub, n, out_wc, out_id)) return LW_OK;
  lw_status_t st = LW_OK;
  pthread_mutex_lock(&calls->mu);
  lw_wcallable_t *c = wc_lookup(calls, h);
  if (!c) {
    st = lw__error_set(err, LW_NOT_FOUND, -1, 0, "orch: unknown or released callable handle 0x%llx",
                       (unsigned long long)h.id);
  } else if (c->state == LW_WC_UNREGISTERING) {
    st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                       "orch: callable %s is pending unregister", c->name);
  } else if (c->state != LW_WC_LIVE) {
    st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0, "orch: callable %s is still registering",
                       c->name);
  } else if (want_sub != (c->kind == LW_WC_SUB)) {
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "orch: %s is a %s callable; use %s", c->name,
                       c->kind == LW_WC_SUB ? "sub" : "chip",
                       c->kind == LW_WC_SUB ? "lw_orch_submit_sub" : "lw_orch_submit_next_level");
  } else if (calls->credit_misses++ == 0) {
    // The orch function's first pin under the lock: no credit yet. A run of one task (the
    // L3 round trip) then takes calls->mu once, as without credits, and has none to give back.
    c->pins += n;
    *out_wc = (uint32_t)(c - calls->table);
    *out_id = c->id;
  } else {
    uint32_t wc = (uint32_t)(c - calls->table);
    // Refill: this callable's entry if it has one, else an empty one, else the first (its
    // pins go back).
    lw_pin_credit_t *pc = NULL;
    for (uint32_t i = 0; i < LW_PIN_CREDITS && !pc; ++i) {
      if (calls->credit[i].id == c->id) pc = &calls->credit[i];
    }
    for (uint32_t i = 0; i < LW_PIN_CREDITS && !pc; ++i) {
      if (calls->credit[i].id == 0) pc = &calls->credit[i];
    }
    if (!pc) {
      pc = &calls->credit[calls->credit_victim];
      calls->credit_victim = (calls->credit_victim + 1) % LW_PIN_CREDITS;
    }
    credit_drop(calls, pc);
    c->pins += n + LW_PIN_CREDIT_BATCH;
    pc->id = c->id;
    pc->wc = wc;
    pc->sub = want_sub;
    atomic_store_explicit(&pc->n, LW_PIN_CREDIT_BATCH, memory_order_relaxed);
    *out_wc = wc;
    *out_id = c->id;
  }
  pthread_mutex_unlock(&calls->mu);
  return st;
}

void lw__wc_unpin(lw_callables_t *calls, uint32_t wc) {
  lw_wcallable_t *c = &calls->table[wc];
  if (c->pins == 0 || --c->pins > 0 || !c->deferred_unregister) return;
  lw_wop_t *op = c->deferred_unregister;
  if (c->kind == LW_WC_SUB) {
    c->deferred_unregister = NULL;
    sub_unregister_done(calls, c, op);
    return;
  }
  // Still deferred (see op_deferred) until the scheduler takes it to post it. Queued once.
  if (op->due) return;
  op->due = true;
  op->next_done = atomic_load_explicit(&calls->due_unregisters, memory_order_relaxed);
  atomic_store_explicit(&calls->due_unregisters, op, memory_order_relaxed);
  if (calls->links.kick) calls->links.kick(calls->links.ctx);
}

// Posts the op's command to every chip (no lock held). A chip that answers with a
// synchronous failure is recorded at once; the others report through their completion rings.
static void wop_post(lw_wop_t *op) {
  lw_callables_t *calls = op->calls;
  lw_wcallable_t *c = &calls->table[op->wc];
  // The op may complete (every chip reported, or died) while this loop still runs: keep it
  // alive until the loop is done with it.
  lw__handle_ref(&op->handle);
  for (uint32_t i = 0; i < calls->links.n_chips; ++i) {
    lw_endpoint_t *ep = &calls->links.eps[i];
    lw_mb_control_post_t p;
    memset(&p, 0, sizeof(p));
    char name[LW_CALLABLE_NAME_BYTES], entry[LW_CALLABLE_NAME_BYTES];
    char build_options[LW_MAX_BUILD_OPTIONS_BYTES];
    // Read under calls->mu while the op is still pending: the callable's slot is released only
    // when the op completes, so nothing read here can belong to another callable.
    pthread_mutex_lock(&calls->mu);
    if (op->pending == 0) {
      pthread_mutex_unlock(&calls->mu);
      break;  // completed meanwhile (every chip reported or died)
    }
    if (op->reported[i]) {
      pthread_mutex_unlock(&calls->mu);
      continue;  // this chip died before it was told: its report is in already
    }
    p.control_id = op_control_id(op, i);
    memcpy(name, c->name, sizeof(name));
    memcpy(entry, c->entry, sizeof(entry));
    p.name = name;
    p.entry = entry;
    lw_wop_t *skipped_last = NULL;
    bool skip = false;
    bool down = false;
    // Every command is bound to one child (lw__ep_control_gen): a register to the child that
    // takes work now, so that its death, whenever it comes, fails the register through
    // lw__wop_fail_chip; an unregister to the child that gave the local id it names.
    uint64_t generation = 0;
    if (op->kind == LW_WOP_REGISTER && !atomic_load(&ep->accepting)) {
      // Down, or being respawned: a child still taking its replay gets no register (its
      // replay may reach the callable's slot after the register completed and give it a second
      // copy); it gets the callable from a later replay if the register is live by then.
      down = true;
    } else if (op->kind == LW_WOP_REGISTER) {
      pthread_mutex_lock(&ep->post_mu);
      generation = ep->generation;
      pthread_mutex_unlock(&ep->post_mu);
      p.command = LW_MB_CMD_REGISTER;
      p.image_offset = (uint64_t)((uint8_t *)c->image - calls->links.arena->base);
      p.image_bytes = c->image_bytes;
      p.n_params = c->n_params;
      memcpy(p.param_dirs, c->param_dirs, sizeof(p.param_dirs));
      p.format = c->format;
      memcpy(build_options, c->build_options, sizeof(build_options));
      p.build_options = build_options;
    } else if (op->kind == LW_WOP_ROLLBACK && !op->ok[i]) {
      // Nothing to undo on this chip; this may be the last report the op waited for.
      op_record(op, i, LW_OK, 0, NULL);
      if (op->pending == 0) {
        ops_unlink(calls, op);
        skipped_last = op;
      }
      skip = true;
    } else {
      p.command = LW_MB_CMD_UNREGISTER;
      // Bound to the child that gave the local id: if that child died (before the post, or
      // before this op was even started), its successor never gets the id, which means
      // nothing there or another callable (fresh children hand out the same ids in order);
      // the control is refused unposted and the chip counts as done below. A successor gets
      // only callables that are live (or whose unregister is still deferred), and its replay
      // drops one whose unregister started while the replay waited for it. One the replay
      // gave it already carries its generation: that child is told even before it takes work
      // (the replay passes its report on, or it stays in the ring for the scheduler), so it
      // keeps no copy nobody knows of.
      p.target = op->kind == LW_WOP_ROLLBACK ? op->local[i] : c->local[i];
      generation = op->kind == LW_WOP_ROLLBACK ? op->gen[i] : c->gen[i];
    }
    pthread_mutex_unlock(&calls->mu);
    if (skip) {
      if (skipped_last) lw__wop_complete(skipped_last);
      continue;
    }
    lw_mb_control_ack_t ack = {0};
    lw_error_t err;
    lw_status_t st = down ? lw__ep_down_error(ep, &err)
                          : lw__ep_control_gen(ep, generation, &p, &ack, &err);
    if (st == LW_OK && ack.status != LW_OK) {
      st = ack.status;
      err = ack.error;
    } else if (st == LW_OK && !ack.async) {
      st = lw__error_set(&err, LW_INTERNAL, (int32_t)i, 0, "chip %u answered synchronously", i);
    }
    if (st == LW_CHILD_EXITED && op->kind != LW_WOP_REGISTER) {
      // As in lw__wop_fail_chip: a chip that is down has nothing of the callable left, and a
      // respawn replays only callables that are live.
      st = LW_OK;
      pthread_mutex_lock(&calls->mu);
      lw_wop_t *done = NULL;
      bool complete = lw__wop_report(calls, i, p.control_id, LW_OK, 0, NULL, &done);
      pthread_mutex_unlock(&calls->mu);
      if (complete) lw__wop_complete(done);
    }
    if (st != LW_OK) {
      lw_wop_t *done = NULL;
      pthread_mutex_lock(&calls->mu);
      bool complete = lw__wop_report(calls, i, p.control_id, st, 0, &err, &done);
      pthread_mutex_unlock(&calls->mu);
      if (complete) lw__wop_complete(done);
    }
  }
  lw__handle_unref(&op->handle);
}

void lw__wop_start_unregister(lw_wop_t *op) { wop_post(op); }

// Withdraws the op's command where it is still queued on a chip's register lane; where it
// already runs it finishes. The op then completes as usual: a register withdrawn on one chip
// fails CANCELLED and is rolled back on the chips where it had finished.
static lw_status_t wop_cancel(lw_handle_t *h) {
  lw_wop_t *op = (lw_wop_t *)h;
  lw_callables_t *calls = op->calls;
  for (uint32_t i = 0; i < calls->links.n_chips; ++i) {
    pthread_mutex_lock(&calls->mu);
    bool waiting = !op->reported[i] && !lw_handle_done(h);
    pthread_mutex_unlock(&calls->mu);
    if (!waiting) continue;
    lw_mb_control_post_t p;
    memset(&p, 0, sizeof(p));
    p.command = LW_MB_CMD_CANCEL;
    p.target = op_control_id(op, i);
    lw_mb_control_ack_t ack;
    lw_error_t err;
    // A chip that died reports on its own; a command already finished is simply not found.
    lw_status_t ignored = lw__ep_control(&calls->links.eps[i], &p, &ack, &err);
    (void)ignored;
  }
  return LW_OK;
}

// Counts a chip register op's outcome for lw_worker_stats (relaxed: counters only): a success
// once for the worker (every chip child has the callable), a failure on the chip its error
// names.
static void count_register(lw_callables_t *calls, const lw_wop_t *op) {
  if (op->status == LW_OK) {
    atomic_fetch_add_explicit(&calls->chip_registers, 1, memory_order_relaxed);
  } else if (op->error.worker_id >= 0 && (uint32_t)op->error.worker_id < calls->links.n_chips) {
    atomic_fetch_add_explicit(&calls->register_failures[op->error.worker_id], 1,
                              memory_order_relaxed);
  }
}

void lw__wop_complete(lw_wop_t *op) {
  lw_callables_t *calls = op->calls;
  if (op->kind == LW_WOP_ROLLBACK) {
    // The callable slot was kept until every chip undid its register.
    pthread_mutex_lock(&calls->mu);
    wc_release(calls, &calls->table[op->wc]);
    ops_gone(calls);
    pthread_mutex_unlock(&calls->mu);
    lw_wop_t *reg = op->undoes;
    if (reg) {
      // Whatever the rollback's own outcome (a chip that died meanwhile has nothing left): the
      // register's failure stands.
      (void)lw__handle_finish(&reg->handle, reg->status, &reg->error);
      lw__handle_unref(&reg->handle);
    }
    lw__handle_unref(&op->handle);
    return;
  }
  pthread_mutex_lock(&calls->mu);
  lw_wcallable_t *c = &calls->table[op->wc];
  lw_wop_t *rollback = NULL;
  if (op->kind == LW_WOP_REGISTER) {
    // A chip whose child took the register and was replaced before the register completes
    // (its death came after the last report, so lw__wop_fail_chip did not see the op pending):
    // the new child's replay skipped the callable, which was still registering, so it does
    // not have it. The register fails naming that chip and is rolled back on the others,
    // as when the chip dies while the register is pending.
    // Every chip is checked, also once the register failed: a rollback must not name, on a
    // chip, a local id of a child that is gone.
    for (uint32_t i = 0; i < calls->links.n_chips; ++i) {
      if (!op->ok[i] || op->gen[i] == ep_generation(&calls->links.eps[i])) continue;
      op->ok[i] = false;  // nothing of it is left on that chip
      if (op->status != LW_OK) continue;
      op->status = LW_CHILD_EXITED;
      lw__error_set(&op->error, LW_CHILD_EXITED, (int32_t)i, 0,
                    "chip %u: register of %s failed: the chip's child died before the register "
                    "completed; its new child does not have it",
                    i, c->name);
    }
    count_register(calls, op);
    if (op->status == LW_OK) {
      memcpy(c->local, op->local, sizeof(c->local));
      memcpy(c->gen, op->gen, sizeof(c->gen));
      c->state = LW_WC_LIVE;
      op->handle.callable.id = c->id;
    } else {
      bool any_ok = false;
      for (uint32_t i = 0; i < calls->links.n_chips; ++i) any_ok |= op->ok[i];
      if (any_ok && (rollback = wop_new(calls, LW_WOP_ROLLBACK, op->wc)) != NULL) {
        memcpy(rollback->ok, op->ok, sizeof(op->ok));
        memcpy(rollback->local, op->local, sizeof(op->local));
        memcpy(rollback->gen, op->gen, sizeof(op->gen));
        rollback->next_pending = calls->ops;
        calls->ops = rollback;
        rollback->undoes = op;  // finishes op's handle; takes op's producer reference
        atomic_fetch_add(&calls->live_ops, 1);
        // No caller holds a rollback's handle: the caller reference is dropped once it has
        // been posted, so that a chip death completing it meanwhile cannot free it under
        // wop_post.
      } else {
        wc_release(calls, c);
      }
    }
  } else {
    atomic_fetch_add_explicit(&calls->chip_unregisters, 1, memory_order_relaxed);
    wc_release(calls, c);
  }
  ops_gone(calls);
  pthread_mutex_unlock(&calls->mu);
  if (!rollback) {
    (void)lw__handle_finish(&op->handle, op->status, op->status == LW_OK ? NULL : &op->error);
    lw__handle_unref(&op->handle);
  } else {
    wop_post(rollback);
    lw__handle_unref(&rollback->handle);
  }
}

lw_status_t lw__callables_register_async(lw_callables_t *calls, const lw_callable_t *c,
                                        lw_handle_t **out, lw_error_t *err) {
  if (atomic_load(calls->links.stopping)) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "worker: shutting down");
  }
  LW_RETURN_IF_ERROR(lw__callable_validate(c, err));
  // The image's bytes are checked here, as the format they are (callables/image_check.h),
  // before anything is sent to a chip child: a bad image fails this call with the reason, and
  // no child ever maps it (a truncated ELF image would kill each child that did with SIGBUS).
  // The chip children check again before they load.
  lw_image_bytes_t plain;
  lw_image_format_t format;
  LW_RETURN_IF_ERROR(
      lw__image_decode_format(c->image, c->image_bytes, c->name, c->format, &plain, &format, err));
  lw__image_bytes_release(&plain);
  void *image = lw__arena_alloc(calls->links.arena, c->image_bytes);
  if (!image) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "worker_register %s: a %zu-byte image does not fit the shared arena",
                         c->name ? c->name : "callable", c->image_bytes);
  }
  memcpy(image, c->image, c->image_bytes);
  pthread_mutex_lock(&calls->mu);
  // The same image whose unregister waits for queued tasks: refused here, as the chip child
  // refuses it once that unregister reached it. Deciding in the parent makes the answer the
  // same whatever the scheduler has posted yet.
  const lw_wcallable_t *dying = wc_find_same_dying(calls, c, image);
  if (dying) {
    lw_status_t st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                                   "worker_register: callable %s: pending unregister (a "
                                   "same-image register must wait until its queued tasks ran "
                                   "and it is freed)",
                                   dying->name);
    pthread_mutex_unlock(&calls->mu);
    lw__arena_free(calls->links.arena, image);
    return st;
  }
  lw_wcallable_t *wc = wc_alloc(calls);
  lw_wop_t *op = wc ? wop_new(calls, LW_WOP_REGISTER, (uint32_t)(wc - calls->table)) : NULL;
  if (!op) {
    if (wc) wc_release(calls, wc);
    pthread_mutex_unlock(&calls->mu);
    lw__arena_free(calls->links.arena, image);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "worker_register: callable table is full (%d)", LW_MAX_CALLABLES);
  }
  wc->state = LW_WC_REGISTERING;
  wc->kind = LW_WC_CHIP;
  snprintf(wc->name, sizeof(wc->name), "%s", c->name ? c->name : "callable");
  snprintf(wc->entry, sizeof(wc->entry), "%s", c->entry ? c->entry : LW_DEFAULT_ENTRY);
  wc->n_params = c->n_params;
  if (c->n_params) memcpy(wc->param_dirs, c->param_dirs, c->n_params);
  wc->format = c->format;
  snprintf(wc->build_options, sizeof(wc->build_options), "%s",
           c->build_options ? c->build_options : "");
  wc->image = image;
  wc->image_bytes = c->image_bytes;
  // Listed before any post: a child may report before its ack is even read.
  op->next_pending = calls->ops;
  calls->ops = op;
  atomic_fetch_add(&calls->live_ops, 1);
  pthread_mutex_unlock(&calls->mu);
  wop_post(op);
  *out = &op->handle;
  return LW_OK;
}

// Unregisters a sub callable (calls->mu held; unlocks it). The same rule as for chip
// callables: the callable is tombstoned at once (tasks submitted from now on fail
// FAILED_PRECONDITION "pending unregister"), and its slot and id are freed only when no task
// that references it is queued, posted or running any more; the op finishes then. The function
// stays in every sub child's table (indices are never reused), but no task can name it again.
static lw_status_t sub_unregister(lw_callables_t *calls, lw_wcallable_t *c, lw_handle_t **out,
                                  lw_error_t *err) {
  if (c->state != LW_WC_LIVE) {
    lw_status_t st = lw__error_set(
        err, LW_FAILED_PRECONDITION, -1, 0, "worker_unregister: %s is %s", c->name,
        c->state == LW_WC_UNREGISTERING ? "already being unregistered" : "still registering");
    pthread_mutex_unlock(&calls->mu);
    return st;
  }
  lw_wop_t *op = wop_new(calls, LW_WOP_UNREGISTER, (uint32_t)(c - calls->table));
  if (!op) {
    pthread_mutex_unlock(&calls->mu);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_unregister: out of memory");
  }
  op->sub = true;
  op->pending = 0;  // no chip takes part
  c->state = LW_WC_UNREGISTERING;
  credit_take_back(calls, (uint32_t)(c - calls->table));
  op->next_pending = calls->ops;  // listed so that destroy finishes it if it is still waiting
  calls->ops = op;
  atomic_fetch_add(&calls->live_ops, 1);
  if (c->pins == 0) {
    sub_unregister_done(calls, c, op);
  } else {
    c->deferred_unregister = op;  // lw__wc_unpin finishes it
  }
  pthread_mutex_unlock(&calls->mu);
  *out = &op->handle;
  return LW_OK;
}

lw_status_t lw__callables_unregister_async(lw_callables_t *calls, lw_callable_handle_t h,
                                          bool subs_too, lw_handle_t **out, lw_error_t *err) {
  pthread_mutex_lock(&calls->mu);
  lw_wcallable_t *c = wc_lookup(calls, h);
  if (c && c->kind == LW_WC_SUB && subs_too) return sub_unregister(calls, c, out, err);
  lw_status_t st = LW_OK;
  if (!c) {
    st = lw__error_set(err, LW_NOT_FOUND, -1, 0,
                       "worker_unregister: unknown or released callable handle 0x%llx",
                       (unsigned long long)h.id);
  } else if (c->kind != LW_WC_CHIP) {
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       "worker_unregister_async: %s is a sub callable; register_async and "
                       "unregister_async accept chip callables only",
                       c->name);
  } else if (c->state != LW_WC_LIVE) {
    st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0, "worker_unregister: %s is %s",
                       c->name,
                       c->state == LW_WC_UNREGISTERING ? "already being unregistered"
                                                       : "still registering");
  }
  lw_wop_t *op = NULL;
  if (st == LW_OK) {
    op = wop_new(calls, LW_WOP_UNREGISTER, (uint32_t)(c - calls->table));
    if (!op) {
      st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_unregister: out of memory");
    }
  }
  if (st != LW_OK) {
    pthread_mutex_unlock(&calls->mu);
    return st;
  }
  // Tombstone: tasks submitted from now on fail "pending unregister". Tasks already accepted
  // but not dispatched hold pins; the children are told only once those are posted, so on
  // every child the unregister is applied after the runs that use the callable pinned it.
  c->state = LW_WC_UNREGISTERING;
  credit_take_back(calls, (uint32_t)(c - calls->table));
  op->next_pending = calls->ops;
  calls->ops = op;
  atomic_fetch_add(&calls->live_ops, 1);
  bool post_now = c->pins == 0;
  if (!post_now) c->deferred_unregister = op;
  pthread_mutex_unlock(&calls->mu);
  if (post_now) wop_post(op);
  *out = &op->handle;
  return LW_OK;
}

// Makes room for one more entry in the sub function table (calls->mu held).
static bool sub_table_reserve(lw_callables_t *calls) {
  if (calls->n_sub_fns % 16 != 0) return true;
  uint32_t cap = calls->n_sub_fns + 16;
  lw_sub_fn *fns = realloc(calls->sub_fns, cap * sizeof(*fns));
  if (fns) calls->sub_fns = fns;
  char(*names)[LW_CALLABLE_NAME_BYTES] = realloc(calls->sub_names, cap * sizeof(*names));
  if (names) calls->sub_names = names;
  uint32_t *tags = realloc(calls->sub_tags, cap * sizeof(*tags));
  if (tags) calls->sub_tags = tags;
  return fns && names && tags;
}

// Undoes REGISTER_SUB on the sub children that took it (calls->sub_mu held). Each took it as its
// last entry (sub_mu keeps every other table change out), which the sub child drops on
// UNREGISTER of that index. A child that cannot drop it is killed: its respawn replays
// calls->sub_fns, so its table comes back in step.
static void sub_rollback(lw_callables_t *calls, const bool *took, const uint64_t *index,
                         const uint64_t *gen) {
  for (uint32_t i = 0; i < calls->links.n_subs; ++i) {
    if (!took[i]) continue;
    lw_endpoint_t *ep = &calls->links.eps[calls->links.n_chips + i];
    lw_mb_control_post_t p;
    memset(&p, 0, sizeof(p));
    p.command = LW_MB_CMD_UNREGISTER;
    p.target = index[i];
    lw_mb_control_ack_t ack;
    lw_error_t err;
    // Only to the child that took it: a successor is brought in step by its replay.
    lw_status_t st = lw__ep_control_gen(ep, gen[i], &p, &ack, &err);
    if (st == LW_OK && ack.status == LW_OK) continue;
    if (st == LW_CHILD_EXITED) continue;  // the replay brings the new child in step
    lw__ep_kill(ep);
  }
}

lw_status_t lw__callables_register_sub(lw_callables_t *calls, lw_sub_fn fn, const char *name,
                                       lw_callable_handle_t *out, lw_error_t *err) {
  out->id = 0;
  // Sub children are copies of the zygote (docs/processes.md): only code it has is callable.
  if (calls->links.n_subs > 0 && !lw__forkserver_zygote_has_code((const void *)(uintptr_t)fn)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "worker_register_sub %s: function %p is not in code mapped when "
                         "lanework's zygote was made (lw_init or the first create): sub "
                         "children are copies of it, without libraries opened later",
                         name ? name : "sub", (void *)(uintptr_t)fn);
  }
  // One table change at a time: two broadcasts interleaving over the sub children would give
  // the functions different indices on different children. The replay of a respawned sub child
  // takes the same lock.
  pthread_mutex_lock(&calls->sub_mu);
  pthread_mutex_lock(&calls->mu);
  lw_wcallable_t *c = wc_alloc(calls);
  if (!c || !sub_table_reserve(calls)) {
    if (c) wc_release(calls, c);
    pthread_mutex_unlock(&calls->mu);
    pthread_mutex_unlock(&calls->sub_mu);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         c ? "worker_register_sub: out of memory"
                           : "worker_register_sub: callable table is full");
  }
  c->state = LW_WC_REGISTERING;
  c->kind = LW_WC_SUB;
  c->fn = fn;
  snprintf(c->name, sizeof(c->name), "%s", name ? name : "sub");
  uint64_t index = calls->n_sub_fns;
  // Never 0, and unique while fewer than 2^32 sub callables were registered (sub indices are
  // never reused, so the tables would run out of memory long before).
  uint32_t tag = ++calls->last_sub_tag;
  if (tag == 0) tag = ++calls->last_sub_tag;
  c->sub_tag = tag;
  pthread_mutex_unlock(&calls->mu);

  lw_status_t st = LW_OK;
  bool took[LW_MAX_SUBS] = {false};
  uint64_t took_index[LW_MAX_SUBS] = {0};
  uint64_t took_gen[LW_MAX_SUBS] = {0};
  uint32_t at = 0;  // the sub child being asked (the one that failed, when st is an error)
  for (uint32_t i = 0; i < calls->links.n_subs && st == LW_OK; ++i) {
    at = i;
    lw_endpoint_t *ep = &calls->links.eps[calls->links.n_chips + i];
    pthread_mutex_lock(&ep->post_mu);
    uint64_t gen = ep->generation;
    pthread_mutex_unlock(&ep->post_mu);
    // A child whose table is not in step (being respawned, or failed for good) is skipped: its
    // replay, which waits for sub_mu, replays calls->sub_fns with this function in it.
    if (atomic_load(&ep->state) != LW_EP_READY || gen != ep->sub_synced_gen) continue;
    lw_mb_control_post_t p;
    memset(&p, 0, sizeof(p));
    p.command = LW_MB_CMD_REGISTER_SUB;
    p.control_id = tag;
    p.target = (uint64_t)(uintptr_t)fn;
    p.name = c->name;
    lw_mb_control_ack_t ack;
    // Bound to the child checked above: a successor started meanwhile is not in step yet (its
    // replay waits for sub_mu) and must not take the function out of order.
    st = lw__ep_control_gen(ep, gen, &p, &ack, err);
    if (st == LW_CHILD_EXITED) {
      st = LW_OK;  // died meanwhile: its replay brings it in step, as above
      continue;
    }
    if (st == LW_OK && ack.status != LW_OK) {
      st = ack.status;
      if (err) *err = ack.error;
      continue;
    }
    if (st != LW_OK) continue;
    took[i] = true;
    took_index[i] = ack.value;
    took_gen[i] = gen;
    // Every sub child receives the same registrations in the same order, so the indices agree.
    if (ack.value != index) {
      st = lw__error_set(err, LW_INTERNAL, (int32_t)i, 0, "sub %u: gave index %llu, expected %llu",
                         i, (unsigned long long)ack.value, (unsigned long long)index);
    }
  }
  if (st != LW_OK) sub_rollback(calls, took, took_index, took_gen);
  pthread_mutex_lock(&calls->mu);
  if (st == LW_OK) {
    // Remembered in order for a respawned sub child; the index is the position.
    c->sub_index = index;
    calls->sub_fns[index] = fn;
    snprintf(calls->sub_names[index], LW_CALLABLE_NAME_BYTES, "%s", c->name);
    calls->sub_tags[index] = tag;
    calls->n_sub_fns++;
    c->state = LW_WC_LIVE;
    *out = (lw_callable_handle_t){c->id};
    atomic_fetch_add_explicit(&calls->sub_registers, 1, memory_order_relaxed);  // a counter
  } else {
    atomic_fetch_add_explicit(&calls->register_failures[calls->links.n_chips + at], 1,
                              memory_order_relaxed);  // a counter only
    wc_release(calls, c);
  }
  pthread_mutex_unlock(&calls->mu);
  pthread_mutex_unlock(&calls->sub_mu);
  return st;
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

lw_status_t lw__callables_initialize(lw_callables_t *calls, const lw_callables_links_t *links,
                                     lw_error_t *err) {
  // calls is zeroed already (the worker's calloc): the table is 1 MiB that a memset here would
  // make resident for nothing.
  pthread_mutex_init(&calls->mu, NULL);
  calls->links = *links;
  pthread_mutex_init(&calls->sub_mu, NULL);
  calls->initialized = true;
  if (lw__handle_table_initialize(&calls->ids, LW_MAX_CALLABLES) != LW_OK) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_create: out of memory");
  }
  return LW_OK;
}

void lw__callables_deinitialize(lw_callables_t *calls) {
  if (!calls->initialized) return;
  lw__handle_table_deinitialize(&calls->ids);
  free(calls->sub_fns);
  free(calls->sub_names);
  free(calls->sub_tags);
  calls->sub_fns = NULL;
  calls->sub_names = NULL;
  calls->sub_tags = NULL;
  calls->n_sub_fns = 0;
  pthread_mutex_destroy(&calls->sub_mu);
  pthread_mutex_destroy(&calls->mu);
  calls->initialized = false;
}

// ---------------------------------------------------------------------------------------------
// Teardown

void lw__callables_fail_ops(lw_callables_t *calls, const lw_error_t *error) {
  lw_error_t err = *error;
  // No thread of this worker is left: no lock needed.
  while (calls->ops) {
    lw_wop_t *op = calls->ops;
    calls->ops = op->next_pending;
    if (op->sub) {
      op->status = LW_UNAVAILABLE;
      op->error = err;
    } else {
      for (uint32_t i = 0; i < calls->links.n_chips; ++i) op_record(op, i, LW_UNAVAILABLE, 0, &err);
    }
    if (op->kind != LW_WOP_ROLLBACK) {
      (void)lw__handle_finish(&op->handle, op->status, &op->error);
    } else if (op->undoes) {
      // The failed register it was undoing ends with its own failure.
      (void)lw__handle_finish(&op->undoes->handle, op->undoes->status, &op->undoes->error);
      lw__handle_unref(&op->undoes->handle);
    }
    lw__handle_unref(&op->handle);
  }
}
