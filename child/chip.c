// child/chip.c — the L2 chip worker: a run lane, a register lane, a registry and a backend.
//
// Operations are structs that embed their lw_handle_t first (lanes/handle_impl.h) and their
// lane item; each holds two handle references (caller + lane) and is freed by the last unref.
#include "lanework/chip.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "callables/digest.h"
#include "callables/image.h"
#include "callables/signature.h"
#include "child/chip_impl.h"
#include "child/config.h"
#include "lanes/args.h"
#include "lanes/error.h"
#include "lanes/handle_impl.h"
#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanes/trace.h"

#define REGISTRY_SLOTS 256
#define REGISTRY_HANDLES 4096
// How often a register waiting for room on a full register lane bumps its heartbeat.
#define REGISTER_BEAT_NS (20ll * 1000 * 1000)

#define CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static int64_t submit_deadline(const lw_chip_t *chip) {
  return lw__deadline_after(chip->cfg.submit_timeout_ns);
}

// ---------------------------------------------------------------------------------------------
// Watchdog

typedef struct watch_cond {
  lw_chip_watchdog_t *wd;
  uint64_t seen_generation;
} watch_cond_t;

static bool watch_changed(const void *ctx) {
  const watch_cond_t *c = ctx;
  return atomic_load(&c->wd->stop) || atomic_load(&c->wd->armed_generation) != c->seen_generation;
}

static void *watchdog_main(void *arg) {
  lw_chip_t *chip = arg;
  lw_chip_watchdog_t *wd = &chip->watchdog;
  while (!atomic_load(&wd->stop)) {
    uint64_t gen = atomic_load(&wd->armed_generation);
    int64_t deadline = gen ? atomic_load(&wd->deadline_ns) : LW_DEADLINE_NEVER;
    if (gen && lw__now_ns() >= deadline) {
      // A request against a generation that already ended misses by design (stale cancel).
      lw_cancel_word_t *word = atomic_load(&wd->armed_word);
      // Record the firing before the cancel lands: the run lane reads fired_generation as soon
      // as the kernel returns. A run that already ended ignores it (it checks its result
      // first).
      atomic_store(&wd->fired_generation, gen);
      if (word) (void)lw__cancel_request(word, gen);
      uint64_t expected = gen;
      atomic_compare_exchange_strong(&wd->armed_generation, &expected, 0);
      continue;
    }
    watch_cond_t c = {wd, gen};
    (void)lw__waitword_wait(&wd->word, watch_changed, &c, deadline, false);
  }
  return NULL;
}

static void watchdog_arm(lw_chip_t *chip, lw_cancel_word_t *word, uint64_t generation,
                         int64_t timeout_ns) {
  lw_chip_watchdog_t *wd = &chip->watchdog;
  // Saturating: a timeout of INT64_MAX means "never", not a deadline in the past.
  atomic_store(&wd->deadline_ns, lw__deadline_after(timeout_ns));
  atomic_store(&wd->armed_word, word);
  atomic_store(&wd->armed_generation, generation);
  lw__waitword_wake(&wd->word, false);
}

static void watchdog_disarm(lw_chip_t *chip) {
  // The watchdog may keep sleeping toward the old deadline; when it wakes it finds nothing
  // armed (or a newer run) and its cancel request against the old generation misses.
  atomic_store(&chip->watchdog.armed_generation, 0);
}

// ---------------------------------------------------------------------------------------------
// Runs

struct lw_chip_run {
  lw_handle_t handle;  // first: the op lives as long as its handle
  lw_lane_item_t item;
  lw_chip_t *chip;
  lw_cancel_word_t *cancel_word;
  const _Atomic uint64_t *cancel_mark;  // see lw_chip_submit_opts_t
  uint64_t cancel_mark_value;
  _Atomic uint64_t *started_ns;
  lw_status_t (*must_not_start)(void *ctx, lw_error_t *why);  // see lw_chip_submit_opts_t
  void *must_not_start_ctx;
  lw_registry_pin_t pin;
  lw_kernel_args_t args;
  int64_t timeout_ns;
  uint64_t run_id;
  uint64_t l3_run_id;  // the L3 run this task belongs to (0 at L2); for traces
  // When the run was accepted (CLOCK_MONOTONIC ns); 0 for a run that starts next
  // (lw_chip_submit_opts_t.starts_next): its start stands for its submit.
  int64_t t_submit;
  // RUN_QUEUED -> RUN_STARTING -> RUN_RUNNING -> RUN_FINISHED, or RUN_QUEUED -> RUN_WITHDRAWN
  // when a cancel finishes the run while it still waits on the lane.
  _Atomic uint32_t phase;
  _Atomic uint64_t generation;
};
typedef struct lw_chip_run run_op_t;

enum { RUN_QUEUED = 0, RUN_STARTING = 1, RUN_RUNNING = 2, RUN_FINISHED = 3, RUN_WITHDRAWN = 4 };

static void run_destroy(lw_handle_t *h) { free(h); }

// The trace's ids of a run: an L3 task is (its run, its task id); an L2 run is (its id, 0).
static void trace_ids(const run_op_t *op, uint64_t *run, uint64_t *task) {
  *run = op->l3_run_id ? op->l3_run_id : op->run_id;
  *task = op->l3_run_id ? op->run_id : 0;
}

static void post_free(lw_chip_t *chip, uint32_t slot, void *module,
                      lw_registry_waiter_t *carrier);
static void run_unpin(lw_chip_t *chip, uint32_t slot);

// Counts a run whose handle is about to finish with st (relaxed: a counter only). Before the
// finish, so a caller that waited for the handle sees it counted.
static void count_run(lw_chip_t *chip, lw_status_t st) {
  atomic_fetch_add_explicit(st == LW_OK          ? &chip->counters.runs_ok
                            : st == LW_CANCELLED ? &chip->counters.runs_cancelled
                                                 : &chip->counters.runs_failed,
                            1, memory_order_relaxed);
}

// Counts a run the run lane takes and keeps the deepest queue seen (any submitting thread).
static void count_accepted(lw_chip_t *chip) {
  atomic_fetch_add_explicit(&chip->counters.accepted, 1, memory_order_relaxed);
  uint32_t depth = lw__chip_queue_depth(chip);
  uint32_t max = atomic_load_explicit(&chip->counters.depth_max, memory_order_relaxed);
  while (depth > max && !atomic_compare_exchange_weak_explicit(&chip->counters.depth_max, &max,
                                                               depth, memory_order_relaxed,
                                                               memory_order_relaxed)) {
  }
}

// What messages call a run: "run 7" at L2, "task 3 of run 7" for an L3 task. Written only when
// a message needs it (formatting it for every run cost the run lane a few hundred ns a task).
typedef struct run_label {
  char text[64];
} run_label_t;

static run_label_t label_of(const run_op_t *op) {
  run_label_t l;
  if (op->l3_run_id) {
    snprintf(l.text, sizeof(l.text), "task %llu of run %llu", (unsigned long long)op->run_id,
             (unsigned long long)op->l3_run_id);
  } else {
    snprintf(l.text, sizeof(l.text), "run %llu", (unsigned long long)op->run_id);
  }
  return l;
}

// The run's submit time (op->t_submit, or now for a run that was to start next).
static int64_t submit_time(const run_op_t *op, int64_t now) {
  return op->t_submit ? op->t_submit : now;
}

static lw_status_t run_cancel(lw_handle_t *h) {
  run_op_t *op = (run_op_t *)h;
  // A run still waiting behind another run's kernel is finished right here, CANCELLED, so its
  // caller does not wait for the kernel ahead of it. The lane claims the run with the same
  // compare-and-swap, so exactly one of the two finishes it; the lane item stays queued (with
  // the lane's reference) and is dropped when the lane reaches it.
  uint32_t expected = RUN_QUEUED;
  if (lw__trace_on()) {
    uint64_t run, task;
    trace_ids(op, &run, &task);
    lw__trace_instant(LW_TRACE_CANCEL, op->chip->cfg.device_id, run, task, op->pin.name);
  }
  if (atomic_compare_exchange_strong(&op->phase, &expected, RUN_WITHDRAWN)) {
    int32_t dev = op->chip->cfg.device_id;
    lw_error_t err;
    lw__error_set(&err, LW_CANCELLED, dev, op->run_id,
                  "chip %d: %s of %s cancelled before it started", dev, label_of(op).text,
                  op->pin.name);
    int64_t now = lw__now_ns();
    op->handle.timing.host_wall_ns = (uint64_t)(now - submit_time(op, now));
    lw_chip_t *chip = op->chip;
    uint32_t slot = op->pin.slot;
    count_run(chip, LW_CANCELLED);
    (void)lw__handle_finish(&op->handle, LW_CANCELLED, &err);
    run_unpin(chip, slot);
    return LW_OK;
  }
  // cancel_requested was set (seq_cst) before this call. If the lane is starting the run it
  // sees the flag after it stored RUNNING; if it already did, we see RUNNING here and hit the
  // generation. The lane stores the generation before RUNNING, so a RUNNING phase implies a
  // valid generation.
  if (expected == RUN_RUNNING) {
    (void)lw__cancel_request(op->cancel_word, atomic_load(&op->generation));
  }
  return LW_OK;
}

static const lw_handle_ops_t run_ops = {.cancel = run_cancel, .destroy = run_destroy};

static void run_unpin(lw_chip_t *chip, uint32_t slot) {
  void *module = NULL;
  lw_registry_waiter_t *carrier = NULL;
  if (!lw__registry_unpin(chip->registry, slot, &module, &carrier)) return;
  // The last run of a tombstoned callable: free it on the register lane, not here on the run
  // lane, so the next run does not wait for an unload.
  post_free(chip, slot, module, carrier);
}

// end_ns: when the run ended if the backend read it (lw_backend_launch_result_t), else 0.
static void run_finish(run_op_t *op, lw_status_t st, const lw_error_t *err, int64_t t_start,
                       uint64_t kernel_ns, int64_t end_ns) {
  int64_t now = end_ns ? end_ns : lw__now_ns();
  op->t_submit = submit_time(op, t_start ? t_start : now);
  if (lw__trace_on() && t_start) {
    uint64_t run, task;
    trace_ids(op, &run, &task);
    lw__trace_role("run lane", op->chip->cfg.device_id);
    lw__trace_span(LW_TRACE_QUEUE, op->t_submit, t_start, run, task, op->chip->cfg.device_id,
                   LW_OK, op->pin.name);
    lw__trace_span(LW_TRACE_RUN, t_start, now, run, task, op->chip->cfg.device_id, st,
                   op->pin.name);
  }
  op->handle.timing.host_wall_ns = (uint64_t)(now - op->t_submit);
  op->handle.timing.queue_ns = t_start ? (uint64_t)(t_start - op->t_submit) : 0;
  op->handle.timing.kernel_wall_ns = kernel_ns;
  atomic_store(&op->phase, RUN_FINISHED);
  lw_chip_t *chip = op->chip;
  uint32_t slot = op->pin.slot;
  // Finish the run before dropping its pin, so an unregister waiting on this callable finishes
  // strictly after every run that pinned it.
  count_run(chip, st);
  (void)lw__handle_finish(&op->handle, st, err);
  lw__handle_unref(&op->handle);
  run_unpin(chip, slot);
}

// The run's post was cancelled through its frame (seq_cst: the Dekker pairs below).
static bool run_marked_cancelled(const run_op_t *op) {
  return op->cancel_mark && op->cancel_mark_value != 0 &&
         atomic_load(op->cancel_mark) == op->cancel_mark_value;
}

static void run_lane_fn(lw_lane_item_t *item, bool cancelled) {
  run_op_t *op = CONTAINER_OF(item, run_op_t, item);
  lw_chip_t *chip = op->chip;
  lw_error_t err;
  lw__error_clear(&err);
  int32_t dev = chip->cfg.device_id;

  // Claim the run; a cancel that withdrew it while queued already finished and unpinned it.
  uint32_t expected = RUN_QUEUED;
  if (!atomic_compare_exchange_strong(&op->phase, &expected, RUN_STARTING)) {
    lw__handle_unref(&op->handle);  // the lane's reference
    return;
  }
  if (cancelled || lw__handle_cancel_requested(&op->handle) || run_marked_cancelled(op)) {
    lw__error_set(&err, LW_CANCELLED, dev, op->run_id,
                  "chip %d: %s of %s cancelled before it started", dev, label_of(op).text,
                  op->pin.name);
    run_finish(op, LW_CANCELLED, &err, 0, 0, 0);
    return;
  }
  lw_status_t stop = op->must_not_start ? op->must_not_start(op->must_not_start_ctx, &err)
                                         : LW_OK;
  if (stop != LW_OK) {
    run_finish(op, stop, &err, 0, 0, 0);
    return;
  }

  int64_t t_start = lw__now_ns();
  uint64_t gen = lw__cancel_begin(op->cancel_word);
  atomic_store(&op->generation, gen);
  atomic_store(&op->phase, RUN_RUNNING);
  if (op->started_ns) atomic_store(op->started_ns, (uint64_t)t_start);
  // Dekker pairs with run_cancel and with lw__mailbox_cancel_task: either the canceller saw
  // RUNNING (or the fresh generation), or we see its flag (or the frame's mark) here.
  atomic_thread_fence(memory_order_seq_cst);
  if (lw__handle_cancel_requested(&op->handle) || run_marked_cancelled(op)) {
    (void)lw__cancel_request(op->cancel_word, gen);
  }
  if (op->timeout_ns > 0) watchdog_arm(chip, op->cancel_word, gen, op->timeout_ns);

  lw_backend_launch_result_t res = {.kernel_rc = 0, .end_ns = 0, .fail_text = ""};
  // The start stands for the kernel's only when nothing slow came since: a timed run's watchdog
  // arm may wake the watchdog's thread (the backend then reads its own).
  lw_backend_run_t brun = {.cancel_word = op->cancel_word,
                           .generation = gen,
                           .chip = dev,
                           .start_ns = op->timeout_ns > 0 ? 0 : t_start};
  trace_ids(op, &brun.trace_run, &brun.trace_task);
  // A backend may record slices or stalls during launch: name this thread's track the run
  // lane's before the first of them (run_finish names it too, for runs that record nothing).
  if (lw__trace_on()) lw__trace_role("run lane", dev);
  lw_status_t st = chip->backend->launch(chip->device, op->pin.module, &op->args, &brun, &res,
                                         &err);
  if (op->timeout_ns > 0) watchdog_disarm(chip);
  bool stop_requested = lw__cancel_is_requested(op->cancel_word, gen);
  bool deadline_hit = op->timeout_ns > 0 && atomic_load(&chip->watchdog.fired_generation) == gen;

  // A stop requested before the kernel returned wins over what it returned: a kernel that
  // bails out on lw_kernel_should_stop and returns 0 left partial outputs, which must never be
  // reported OK.
  if (st != LW_OK) {
    err.worker_id = dev;
    err.task_id = op->run_id;
  } else if (stop_requested && deadline_hit) {
    if (lw__trace_on()) {
      uint64_t run, task;
      trace_ids(op, &run, &task);
      lw__trace_instant(LW_TRACE_TIMEOUT, dev, run, task, op->pin.name);
    }
    st = lw__error_set(&err, LW_DEADLINE_EXCEEDED, dev, op->run_id,
                       "chip %d: %s of %s passed its %lld ns timeout and was cancelled "
                       "(kernel returned %d)",
                       dev, label_of(op).text, op->pin.name,
                       (long long)op->timeout_ns, res.kernel_rc);
  } else if (stop_requested) {
    st = lw__error_set(&err, LW_CANCELLED, dev, op->run_id,
                       "chip %d: %s of %s cancelled while running (kernel returned %d)",
                       dev, label_of(op).text, op->pin.name, res.kernel_rc);
  } else if (res.kernel_rc == 0) {
    st = LW_OK;
  } else if (res.fail_text[0] != '\0') {
    st = lw__error_set(&err, LW_TASK_FAILED, dev, op->run_id,
                       "chip %d: kernel %s failed: %s (returned %d)", dev, op->pin.name,
                       res.fail_text, res.kernel_rc);
  } else {
    st = lw__error_set(&err, LW_TASK_FAILED, dev, op->run_id,
                       "chip %d: kernel %s returned %d", dev, op->pin.name, res.kernel_rc);
  }
  run_finish(op, st, &err, t_start, res.kernel_wall_ns, res.end_ns);  // op may be gone
  if (chip->backend->after_run) chip->backend->after_run(chip->device);
}

lw_status_t lw__chip_run_prepare(lw_chip_t *chip, lw_callable_handle_t h,
                                 const lw_kernel_args_t *args, int64_t timeout_ns,
                                 const lw_chip_submit_opts_t *opts, lw_chip_run_t **out_run,
                                 lw_error_t *err) {
  *out_run = NULL;
  if (atomic_load(&chip->closing)) {
    return lw__error_set(err, LW_UNAVAILABLE, chip->cfg.device_id, 0, "chip %d: closing",
                         chip->cfg.device_id);
  }
  run_op_t *op = calloc(1, sizeof(*op));
  if (!op) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, chip->cfg.device_id, 0,
                         "chip %d: out of memory", chip->cfg.device_id);
  }
  lw__handle_initialize(&op->handle, LW_HANDLE_RUN, &run_ops);
  if (opts && opts->notify) lw__handle_set_notify(&op->handle, opts->notify, opts->notify_ctx);
  op->chip = chip;
  op->cancel_word = (opts && opts->cancel_word) ? opts->cancel_word : &chip->cancel_word;
  op->cancel_mark = opts ? opts->cancel_mark : NULL;
  op->cancel_mark_value = opts ? opts->cancel_mark_value : 0;
  op->started_ns = opts ? opts->started_ns : NULL;
  op->must_not_start = opts ? opts->must_not_start : NULL;
  op->must_not_start_ctx = opts ? opts->notify_ctx : NULL;
  op->t_submit = opts && opts->starts_next ? 0 : lw__now_ns();
  op->timeout_ns = timeout_ns;
  op->run_id = (opts && opts->task_id) ? opts->task_id
                                       : atomic_fetch_add(&chip->next_run_id, 1) + 1;
  op->l3_run_id = opts ? opts->l3_run_id : 0;
  op->item.fn = run_lane_fn;
  op->args = *args;
  // The pin is taken here, at acceptance: an unregister posted after this call returns sees
  // the run and defers its free.
  lw_status_t st = lw__registry_pin(chip->registry, h, &op->pin, err);
  if (st != LW_OK) {
    if (err) err->worker_id = chip->cfg.device_id;
    free(op);
    return st;
  }
  // Checked against the pinned slot's signature, so the check and the run see one callable. A
  // mismatch is refused here, before the run is queued: a kernel handed fewer tensors or
  // scalars than it reads would fault in this process. (At L3 the parent refuses it first, in
  // parent/dag.c; here it keeps the chip child from running what the parent let through.)
  st = lw__signature_check_counts(op->pin.name, op->pin.n_params, op->pin.param_dirs,
                                  args->n_tensors, args->n_scalars, err);
  if (st != LW_OK) {
    if (err) err->worker_id = chip->cfg.device_id;
    run_unpin(chip, op->pin.slot);
    free(op);
    return st;
  }
  *out_run = op;
  return LW_OK;
}

const char *lw__chip_run_name(const lw_chip_run_t *op) { return op->pin.name; }

lw_handle_t *lw__chip_run_enqueue(lw_chip_run_t *op) {
  count_accepted(op->chip);  // a failed submit below finishes it, so it counts either way
  if (lw__lane_submit_reserved(op->chip->run_lane, &op->item, NULL, NULL) != LW_OK) {
    // The lane is gone (closing): finish the run here, CANCELLED, so nothing hangs.
    run_lane_fn(&op->item, true);
  }
  return &op->handle;
}

// What lw_chip_run_async and lw_chip_run share: checks the call, pins the callable and makes
// the run (not yet queued, not yet counted). Errors fill *err.
static lw_status_t run_accept(lw_chip_t *chip, lw_callable_handle_t h, const lw_args_t *args,
                              const lw_run_config_t *cfg, const char *what,
                              lw_chip_run_t **out_op, lw_error_t *err) {
  *out_op = NULL;
  lw_args_t empty;
  if (!args) {
    lw_args_init(&empty);
    args = &empty;
  }
  LW_RETURN_IF_ERROR(lw__args_check(args, err));
  lw_run_config_t run_cfg;
  LW_RETURN_IF_ERROR(lw__run_config_read(cfg, &run_cfg, err));
  cfg = &run_cfg;
  if (cfg->timeout_ns < 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: timeout_ns %lld is negative",
                         what, (long long)cfg->timeout_ns);
  }
  lw_kernel_args_t kargs;
  memset(&kargs, 0, sizeof(kargs));
  kargs.n_tensors = args->n_tensors;
  kargs.n_scalars = args->n_scalars;
  for (uint32_t i = 0; i < args->n_tensors; ++i) {
    kargs.tensor[i].data = args->tensor[i].data;
    kargs.tensor[i].bytes = args->tensor[i].bytes;
  }
  memcpy(kargs.scalar, args->scalar, sizeof(uint64_t) * args->n_scalars);
  kargs.launch = args->launch;

  lw_status_t st = lw__chip_run_prepare(chip, h, &kargs, cfg->timeout_ns, NULL, out_op, err);
  if (st != LW_OK && err) err->worker_id = chip->cfg.device_id;
  return st;
}

// Queues an accepted run on the run lane; on failure the run is dropped (unpinned, freed) and
// *err says why.
static lw_status_t run_queue(lw_chip_t *chip, lw_chip_run_t *op, lw_error_t *err) {
  // Counted before the submit (the run may finish before the submit returns); a refused
  // submit takes it back.
  count_accepted(chip);
  lw_status_t st = lw__lane_submit(chip->run_lane, &op->item, submit_deadline(chip), NULL, err);
  if (st != LW_OK) {
    atomic_fetch_sub_explicit(&chip->counters.accepted, 1, memory_order_relaxed);
    run_unpin(chip, op->pin.slot);
    free(op);
    if (err) err->worker_id = chip->cfg.device_id;
  }
  return st;
}

// A synchronous run on an idle run lane: the lane would only take the run and hand it back,
// two thread hand-offs (on a CPU shared with the lane thread, two context switches). Runs it on
// this thread instead, as the lane's next item (lw__lane_run_here keeps the lane's order and
// timeline), and returns true with the run finished; false, doing nothing, when the lane is
// busy or the chip does not run here. Not while tracing: a trace shows runs on the run lane's
// track, and a thread's track is named by the first role it records.
static bool run_here(lw_chip_t *chip, lw_chip_run_t *op) {
  if (!chip->run_here || lw__trace_on()) return false;
  count_accepted(chip);  // before the run finishes, as run_queue does
  if (lw__lane_run_here(chip->run_lane, &op->item, NULL)) return true;
  atomic_fetch_sub_explicit(&chip->counters.accepted, 1, memory_order_relaxed);
  return false;
}

lw_status_t lw_chip_run_async(lw_chip_t *chip, lw_callable_handle_t h, const lw_args_t *args,
                              const lw_run_config_t *cfg, lw_handle_t **out) {
  if (out) *out = NULL;
  if (!chip || !out) return lw__fail(LW_INVALID_ARGUMENT, "run_async: chip and out must be set");
  lw_chip_run_t *op = NULL;
  lw_error_t err;
  if (run_accept(chip, h, args, cfg, "run_async", &op, &err) != LW_OK ||
      run_queue(chip, op, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  *out = &op->handle;
  return LW_OK;
}

lw_status_t lw_chip_run(lw_chip_t *chip, lw_callable_handle_t h, const lw_args_t *args,
                        const lw_run_config_t *cfg, lw_run_timing_t *out_timing) {
  if (!chip) return lw__fail(LW_INVALID_ARGUMENT, "run: chip must be set");
  lw_chip_run_t *op = NULL;
  lw_error_t err;
  if (run_accept(chip, h, args, cfg, "run", &op, &err) != LW_OK ||
      (!run_here(chip, op) && run_queue(chip, op, &err) != LW_OK)) {
    return lw__last_error_store(&err);
  }
  lw_handle_t *hd = &op->handle;
  lw_status_t st = lw_handle_wait(hd, LW_WAIT_FOREVER);
  if (out_timing) *out_timing = hd->timing;
  lw_handle_release(hd);
  return st;
}

// ---------------------------------------------------------------------------------------------
// Register

typedef struct register_op {
  lw_handle_t handle;
  lw_lane_item_t item;
  lw_chip_t *chip;
  const void *image;  // owned_image, or the caller's image for a sync register
  size_t image_bytes;
  void *owned_image;
  bool staged;        // owned_image is the chip's staging buffer
  char name[LW_REGISTRY_NAME_BYTES];
  char entry[128];
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
  lw_image_format_t format;  // as given (AUTO is resolved on the register lane)
  char build_options[LW_MAX_BUILD_OPTIONS_BYTES];
} register_op_t;

// Takes the chip's staging buffer for a copy of bytes, or NULL when it is in use.
static void *staging_take(lw_chip_t *chip, size_t bytes) {
  void *p = NULL;
  pthread_mutex_lock(&chip->staging_mu);
  if (!chip->staging_busy) {
    if (chip->staging_bytes < bytes) {
      void *grown = realloc(chip->staging, bytes);
      if (grown) {
        chip->staging = grown;
        chip->staging_bytes = bytes;
      }
    }
    if (chip->staging_bytes >= bytes) {
      chip->staging_busy = true;
      p = chip->staging;
    }
  }
  pthread_mutex_unlock(&chip->staging_mu);
  return p;
}

static void image_release(register_op_t *op) {
  if (op->staged) {
    pthread_mutex_lock(&op->chip->staging_mu);
    op->chip->staging_busy = false;
    pthread_mutex_unlock(&op->chip->staging_mu);
  } else {
    free(op->owned_image);
  }
  op->owned_image = NULL;
  op->staged = false;
  op->image = NULL;
}

static void register_destroy(lw_handle_t *h) {
  register_op_t *op = (register_op_t *)h;
  image_release(op);
  free(op);
}

// A queued register is withdrawn by its lane fn seeing cancel_requested; a running one
// finishes normally. Nothing to do here.
static const lw_handle_ops_t register_ops = {.cancel = NULL, .destroy = register_destroy};

static void register_lane_fn(lw_lane_item_t *item, bool cancelled) {
  register_op_t *op = CONTAINER_OF(item, register_op_t, item);
  lw_chip_t *chip = op->chip;
  int32_t dev = chip->cfg.device_id;
  lw_error_t err;
  lw__error_clear(&err);
  lw_status_t st = LW_OK;
  lw_image_bytes_t elf = {0};
  lw_callable_handle_t ch = {0};
  int64_t t_start = lw__now_ns();

  if (cancelled || lw__handle_cancel_requested(&op->handle)) {
    st = lw__error_set(&err, LW_CANCELLED, dev, 0,
                       "chip %d: register of %s withdrawn before it started", dev, op->name);
    goto done;
  }
  lw_image_format_t format = LW_IMAGE_AUTO;
  st = lw__image_decode_detect(op->image, op->image_bytes, op->name, op->format, &elf, &format,
                               &err);
  if (st != LW_OK) goto done;
  bool loadable = chip->backend->formats & LW_BACKEND_FORMAT_BIT(format);
  // Bytes that say by their magic what they are, in a format this backend does not load, are
  // refused as such ("sim cannot load SPIR-V") before their content is checked. Bytes given
  // as a format, or with no magic, are checked first: the format was the caller's word, or
  // garbage is better told as garbage than as "OpenCL C (detected)".
  bool by_magic = op->format == LW_IMAGE_AUTO && format != LW_IMAGE_OPENCL_C;
  if (loadable || !by_magic) {
    // Every image is checked here before the backend sees it (the check of its format: an ELF
    // image's segments inside its bytes, ...), and in the parent before that at L3.
    st = lw__image_check_format(elf.data, elf.bytes, op->name, format,
                                op->format == LW_IMAGE_AUTO, &err);
    if (st != LW_OK) goto done;
  }
  if (!loadable) {
    char loads[64] = "";
    for (int f = LW_IMAGE_ELF; f <= LW_IMAGE_FATBIN; ++f) {
      if (!(chip->backend->formats & LW_BACKEND_FORMAT_BIT(f))) continue;
      size_t used = strlen(loads);
      snprintf(loads + used, sizeof(loads) - used, "%s%s", used ? ", " : "",
               lw_image_format_name((lw_image_format_t)f));
    }
    st = lw__error_set(&err, LW_INVALID_ARGUMENT, dev, 0,
                       "chip %d: backend %s cannot load callable %s: its image format is %s%s "
                       "(%s loads: %s)",
                       dev, chip->backend->name, op->name, lw_image_format_name(format),
                       op->format == LW_IMAGE_AUTO ? " (detected)" : "", chip->backend->name,
                       loads);
    goto done;
  }
  lw_digest_t digest;
  lw__digest_compute_format(elf.data, elf.bytes, op->entry, op->n_params, op->param_dirs, format,
                            op->build_options, &digest);
  st = lw__registry_acquire(chip->registry, digest, &ch, &err);
  if (st == LW_NOT_FOUND) {
    void *module = NULL;
    lw_backend_image_t img = {
        .data = elf.data,
        .bytes = elf.bytes,
        .format = format,
        .entry = op->entry,
        .name = op->name,
        .build_options = op->build_options,
        .n_params = op->n_params,
        .param_dirs = op->param_dirs,
    };
    st = chip->backend->load(chip->device, &img, &module, &err);
    if (st == LW_OK) {
      st = lw__registry_insert(chip->registry, digest, op->name, op->n_params, op->param_dirs,
                               module, &ch, &err);
      if (st != LW_OK) chip->backend->unload(chip->device, module);
    }
  }
done:
  lw__image_bytes_release(&elf);
  if (lw__trace_on()) {
    lw__trace_role("register lane", dev);
    lw__trace_span(LW_TRACE_REGISTER, t_start, lw__now_ns(), 0, 0, dev, st, op->name);
  }
  if (st != LW_OK && err.worker_id < 0) err.worker_id = dev;
  // The image is no longer needed: drop the copy before finishing, so a big image does not
  // live as long as the caller keeps the handle.
  image_release(op);
  op->handle.callable = ch;
  // A register withdrawn before it started (CANCELLED) is neither done nor failed.
  if (st != LW_CANCELLED) {
    atomic_fetch_add_explicit(st == LW_OK ? &chip->counters.registers
                                          : &chip->counters.register_failures,
                              1, memory_order_relaxed);  // a counter only
  }
  (void)lw__handle_finish(&op->handle, st, st == LW_OK ? NULL : &err);
  lw__handle_unref(&op->handle);
}

// Fills err (may be NULL) on failure; the public callers store it as the last error.
static lw_status_t register_submit(lw_chip_t *chip, const lw_callable_t *c, bool copy_image,
                                   const lw_chip_submit_opts_t *opts, lw_handle_t **out,
                                   lw_error_t *err) {
  if (out) *out = NULL;
  if (!chip || !c || !out) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "register: chip, callable and out must be set");
  }
  if (atomic_load(&chip->closing)) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "chip %d: closing", chip->cfg.device_id);
  }
  lw_status_t st = lw__callable_validate(c, err);
  if (st != LW_OK) return st;
  register_op_t *op = calloc(1, sizeof(*op));
  if (!op) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "chip %d: out of memory",
                         chip->cfg.device_id);
  }
  lw__handle_initialize(&op->handle, LW_HANDLE_REGISTER, &register_ops);
  if (opts && opts->notify) lw__handle_set_notify(&op->handle, opts->notify, opts->notify_ctx);
  op->chip = chip;
  op->item.fn = register_lane_fn;
  snprintf(op->name, sizeof(op->name), "%s", c->name ? c->name : "callable");
  snprintf(op->entry, sizeof(op->entry), "%s", c->entry ? c->entry : LW_DEFAULT_ENTRY);
  op->n_params = c->n_params;
  if (c->n_params) memcpy(op->param_dirs, c->param_dirs, c->n_params);
  op->format = c->format;
  snprintf(op->build_options, sizeof(op->build_options), "%s",
           c->build_options ? c->build_options : "");
  op->image_bytes = c->image_bytes;
  if (copy_image) {
    op->owned_image = staging_take(chip, c->image_bytes);
    op->staged = op->owned_image != NULL;
    if (!op->owned_image) op->owned_image = malloc(c->image_bytes);
    if (!op->owned_image) {
      free(op);
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                           "register %s: cannot copy a %zu-byte image",
                           c->name ? c->name : "callable", c->image_bytes);
    }
    memcpy(op->owned_image, c->image, c->image_bytes);
    op->image = op->owned_image;
  } else {
    op->image = c->image;
  }
  int64_t deadline = submit_deadline(chip);
  for (;;) {
    // With a heartbeat to keep, wait for room in slices and beat between them: a full
    // register lane is progress elsewhere in this process, not a wedged mailbox loop.
    int64_t slice = deadline;
    if (opts && opts->heartbeat) {
      int64_t s = lw__deadline_after(REGISTER_BEAT_NS);
      if (s < slice) slice = s;
    }
    st = lw__lane_submit(chip->register_lane, &op->item, slice, NULL, err);
    if (st != LW_RESOURCE_EXHAUSTED || slice == deadline || lw__now_ns() >= deadline) break;
    atomic_fetch_add_explicit(opts->heartbeat, 1, memory_order_relaxed);
  }
  if (st != LW_OK) {
    image_release(op);
    free(op);
    if (err) err->worker_id = chip->cfg.device_id;
    return st;
  }
  *out = &op->handle;
  return LW_OK;
}

lw_status_t lw_chip_register_async(lw_chip_t *chip, const lw_callable_t *c, lw_handle_t **out) {
  lw_error_t err;
  lw_status_t st = register_submit(chip, c, true, NULL, out, &err);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

lw_status_t lw__chip_register_async_opts(lw_chip_t *chip, const lw_callable_t *c,
                                         const lw_chip_submit_opts_t *opts, lw_handle_t **out,
                                         lw_error_t *err) {
  return register_submit(chip, c, !(opts && opts->borrow_image), opts, out, err);
}

lw_status_t lw_chip_register(lw_chip_t *chip, const lw_callable_t *c, lw_callable_handle_t *out) {
  if (!out) return lw__fail(LW_INVALID_ARGUMENT, "register: out must be set");
  out->id = 0;
  lw_handle_t *h = NULL;
  // The caller blocks until the register finished, so its image can be borrowed.
  lw_error_t err;
  if (register_submit(chip, c, false, NULL, &h, &err) != LW_OK) return lw__last_error_store(&err);
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
  if (st == LW_OK) *out = h->callable;
  lw_handle_release(h);
  return st;
}

// ---------------------------------------------------------------------------------------------
// Unregister

typedef struct unregister_op {
  lw_handle_t handle;
  lw_lane_item_t item;
  lw_registry_waiter_t waiter;
  lw_chip_t *chip;
  lw_callable_handle_t target;
  // Set when this op carries a deferred free to the register lane.
  uint32_t free_slot;
  void *free_module;
} unregister_op_t;

static void unregister_destroy(lw_handle_t *h) { free(h); }
static const lw_handle_ops_t unregister_ops = {.cancel = NULL, .destroy = unregister_destroy};

static void unregister_finish(unregister_op_t *op) {
  atomic_fetch_add_explicit(&op->chip->counters.unregisters, 1, memory_order_relaxed);
  (void)lw__handle_finish(&op->handle, LW_OK, NULL);
  lw__handle_unref(&op->handle);
}

// Unloads a FREEING slot and finishes every unregister waiting on it. keep_last: a waiter
// whose op the caller still uses (it is finished last).
static void chip_free_slot(lw_chip_t *chip, uint32_t slot, void *module,
                           lw_registry_waiter_t *keep_last) {
  int64_t t0 = lw__now_ns();
  chip->backend->unload(chip->device, module);
  if (lw__trace_on()) {
    char name[LW_TRACE_NAME_BYTES];
    lw__registry_slot_name(chip->registry, slot, name, sizeof(name));
    if (lw__lane_is_current(chip->register_lane)) {
      lw__trace_role("register lane", chip->cfg.device_id);
    }
    lw__trace_span(LW_TRACE_UNREGISTER, t0, lw__now_ns(), 0, 0, chip->cfg.device_id, LW_OK,
                   name);
  }
  lw_registry_waiter_t *w = lw__registry_complete_free(chip->registry, slot);
  while (w) {
    lw_registry_waiter_t *next = w->next;
    if (w != keep_last) unregister_finish(CONTAINER_OF(w, unregister_op_t, waiter));
    w = next;
  }
  if (keep_last) unregister_finish(CONTAINER_OF(keep_last, unregister_op_t, waiter));
}

// Runs on the register lane, carried by a waiting unregister's op (see run_unpin). Runs even
// when the lane is draining with cancel: a free must never be lost.
static void unregister_free_fn(lw_lane_item_t *item, bool cancelled) {
  (void)cancelled;
  unregister_op_t *op = CONTAINER_OF(item, unregister_op_t, item);
  chip_free_slot(op->chip, op->free_slot, op->free_module, &op->waiter);
}

// Carries a deferred free to the register lane in the waiting unregister's own op: its lane
// item is idle (it ran once already) and stays alive until the op is finished.
static void post_free(lw_chip_t *chip, uint32_t slot, void *module,
                      lw_registry_waiter_t *carrier) {
  unregister_op_t *op = CONTAINER_OF(carrier, unregister_op_t, waiter);
  op->free_slot = slot;
  op->free_module = module;
  op->item.fn = unregister_free_fn;
  if (lw__lane_is_current(chip->register_lane) ||
      lw__lane_submit_reserved(chip->register_lane, &op->item, NULL, NULL) != LW_OK) {
    // Already on the register lane, or it is gone (closing): free right here.
    chip_free_slot(chip, slot, module, carrier);
  }
}

static void unregister_lane_fn(lw_lane_item_t *item, bool cancelled) {
  // An unregister whose first step already ran is applied even while the lane drains with
  // cancel: the callable is already tombstoned and must still be freed.
  (void)cancelled;
  unregister_op_t *op = CONTAINER_OF(item, unregister_op_t, item);
  lw_chip_t *chip = op->chip;
  uint32_t slot = 0;
  void *module = NULL;
  switch (lw__registry_apply_unregister(chip->registry, op->target, &op->waiter, &slot, &module)) {
    case LW_REGISTRY_UNREGISTER_DONE:
      unregister_finish(op);
      break;
    case LW_REGISTRY_UNREGISTER_FREE_NOW:
      // This op is not on the slot's waiter list; finish it after the free.
      chip_free_slot(chip, slot, module, NULL);
      unregister_finish(op);
      break;
    case LW_REGISTRY_UNREGISTER_DEFERRED:
      break;  // the last unpin frees the slot and finishes this op
  }
}

lw_status_t lw_chip_unregister_async(lw_chip_t *chip, lw_callable_handle_t h, lw_handle_t **out) {
  lw_error_t err;
  lw_status_t st = lw__chip_unregister_async_opts(chip, h, NULL, out, &err);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

lw_status_t lw__chip_unregister_async_opts(lw_chip_t *chip, lw_callable_handle_t h,
                                           const lw_chip_submit_opts_t *opts, lw_handle_t **out,
                                           lw_error_t *err) {
  if (out) *out = NULL;
  if (!chip || !out) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "unregister: chip and out must be set");
  }
  if (atomic_load(&chip->closing)) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "chip %d: closing", chip->cfg.device_id);
  }
  unregister_op_t *op = calloc(1, sizeof(*op));
  if (!op) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "chip %d: out of memory",
                         chip->cfg.device_id);
  }
  lw__handle_initialize(&op->handle, LW_HANDLE_UNREGISTER, &unregister_ops);
  if (opts && opts->notify) lw__handle_set_notify(&op->handle, opts->notify, opts->notify_ctx);
  op->chip = chip;
  op->target = h;
  op->item.fn = unregister_lane_fn;
  lw_status_t st = lw__registry_begin_unregister(chip->registry, h, err);
  if (st == LW_OK) {
    // Reserved: the first step already changed the registry, so the second must be queued.
    // Unregisters are bounded by the number of live callable handles.
    st = lw__lane_submit_reserved(chip->register_lane, &op->item, NULL, NULL);
    if (st != LW_OK) {
      lw__error_set(err, st, chip->cfg.device_id, 0, "chip %d: closing", chip->cfg.device_id);
    }
  }
  if (st != LW_OK) {
    free(op);
    if (err) err->worker_id = chip->cfg.device_id;
    return st;
  }
  *out = &op->handle;
  return LW_OK;
}

lw_status_t lw_chip_unregister(lw_chip_t *chip, lw_callable_handle_t h) {
  lw_handle_t *hd = NULL;
  LW_RETURN_IF_ERROR(lw_chip_unregister_async(chip, h, &hd));
  lw_status_t st = lw_handle_wait(hd, LW_WAIT_FOREVER);
  lw_handle_release(hd);
  return st;
}

// ---------------------------------------------------------------------------------------------
// Open / close

int32_t lw_chip_device_id(const lw_chip_t *chip) { return chip ? chip->cfg.device_id : -1; }

static void close_unload(void *ctx, void *module) {
  lw_chip_t *chip = ctx;
  chip->backend->unload(chip->device, module);
}

static void close_waiter(void *ctx, lw_registry_waiter_t *w) {
  (void)ctx;
  unregister_finish(CONTAINER_OF(w, unregister_op_t, waiter));
}

void lw_chip_close(lw_chip_t *chip) {
  if (!chip) return;
  atomic_store(&chip->closing, true);
  // Runs already accepted finish (their pins may queue frees on the register lane, which is
  // still open); then queued registers are withdrawn while unregisters and frees still run.
  if (chip->run_lane) lw__lane_destroy(chip->run_lane, LW_LANE_DRAIN_RUN);
  if (chip->register_lane) lw__lane_destroy(chip->register_lane, LW_LANE_DRAIN_CANCEL);
  if (chip->watchdog.started) {
    atomic_store(&chip->watchdog.stop, true);
    lw__waitword_wake(&chip->watchdog.word, false);
    pthread_join(chip->watchdog.thread, NULL);
  }
  if (chip->registry) lw__registry_destroy(chip->registry, close_unload, close_waiter, chip);
  if (chip->device) chip->backend->close(chip->device);
  free(chip->staging);
  pthread_mutex_destroy(&chip->staging_mu);
  free(chip);
}

lw_status_t lw_chip_open(const lw_chip_config_t *cfg, lw_chip_t **out_chip) {
  lw__trace_from_env();  // LW_TRACE=path starts a session with the first chip or worker
  (void)lw__spin_calibrate();  // the spin budget from a measured wake, once per process
  lw_error_t err;
  lw_status_t st = lw__chip_open(cfg, out_chip, &err);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

void lw__chip_set_host_region(lw_chip_t *chip, void *base, uint64_t bytes) {
  if (chip && chip->backend->host_region) chip->backend->host_region(chip->device, base, bytes);
}

lw_status_t lw__chip_open(const lw_chip_config_t *cfg, lw_chip_t **out_chip, lw_error_t *err) {
  return lw__chip_open_on(cfg, cfg ? cfg->device_id : 0, out_chip, err);
}

lw_status_t lw__chip_open_on(const lw_chip_config_t *cfg, int32_t device, lw_chip_t **out_chip,
                             lw_error_t *err) {
  if (!out_chip) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "chip_open: out_chip must be set");
  }
  *out_chip = NULL;
  // The caller's struct, of whatever version, read into this library's layout (NULL: defaults).
  lw_chip_config_t resolved;
  LW_RETURN_IF_ERROR(lw__chip_config_read(cfg, &resolved, err));
  cfg = &resolved;
  const lw_backend_ops_t *backend = lw__backend_find(cfg->backend);
  if (!backend) {
    const char *missing = lw__backend_missing_reason(cfg->backend);
    if (missing) {
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "chip_open: backend '%.*s': %s",
                           LW_BACKEND_NAME_BYTES, cfg->backend, missing);
    }
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "chip_open: unknown backend '%.*s' (known: %s)", LW_BACKEND_NAME_BYTES,
                         cfg->backend, lw__backend_names());
  }
  if (cfg->run_queue_depth == 0 || cfg->register_queue_depth == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "chip_open: queue depths must be > 0");
  }
  lw_chip_t *chip = calloc(1, sizeof(*chip));
  if (!chip) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "chip_open: out of memory");
  chip->cfg = *cfg;
  chip->backend = backend;
  pthread_mutex_init(&chip->staging_mu, NULL);
  lw__waitword_initialize(&chip->watchdog.word);

  lw__error_clear(err);
  // The backend sees the device it opens; the chip keeps its own index (cfg->device_id).
  lw_chip_config_t on_device = *cfg;
  on_device.device_id = device;
  lw_status_t st = backend->open(&on_device, &chip->device, err);
  if (st != LW_OK) goto fail;
  st = lw__registry_create(REGISTRY_SLOTS, REGISTRY_HANDLES, &chip->registry, err);
  if (st != LW_OK) goto fail;
  char name[16];
  snprintf(name, sizeof(name), "lw-run-%d", cfg->device_id);
  st = lw__lane_create(name, cfg->run_queue_depth, &chip->run_lane, err);
  if (st != LW_OK) goto fail;
  snprintf(name, sizeof(name), "lw-reg-%d", cfg->device_id);
  st = lw__lane_create(name, cfg->register_queue_depth, &chip->register_lane, err);
  if (st != LW_OK) goto fail;
  if (cfg->run_lane_cpu >= 0 &&
      (st = lw__lane_set_cpu(chip->run_lane, cfg->run_lane_cpu, err)) != LW_OK) {
    goto fail;
  }
  if (cfg->register_lane_cpu >= 0 &&
      (st = lw__lane_set_cpu(chip->register_lane, cfg->register_lane_cpu, err)) != LW_OK) {
    goto fail;
  }
  char wd_name[16];
  snprintf(wd_name, sizeof(wd_name), "lw-wd-%d", cfg->device_id);
  int trc = lw__sys_thread_start(&chip->watchdog.thread, wd_name, watchdog_main, chip);
  if (trc != 0) {
    // EAGAIN under a small RLIMIT_AS: a thread's stack is address space too.
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       "chip %d: cannot start the watchdog thread: %s%s", cfg->device_id,
                       strerror(trc),
                       trc == EAGAIN ? " (a thread stack did not fit RLIMIT_AS or the "
                                       "process's thread limit: raise ulimit -v / -u)"
                                     : "");
    goto fail;
  }
  chip->watchdog.started = true;
  const char *here = getenv("LW_L2_RUN_HERE");
  chip->run_here = cfg->run_lane_cpu < 0 && !(here && strcmp(here, "0") == 0);
  *out_chip = chip;
  return LW_OK;

fail:
  lw_chip_close(chip);
  return st;
}
