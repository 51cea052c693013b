// child/chip_impl.h — internals of lw_chip_t shared with the chip-child loop.
#ifndef LANEWORK_CHILD_CHIP_IMPL_H_
#define LANEWORK_CHILD_CHIP_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "callables/registry.h"
#include "child/backend.h"
#include "lanes/cancel.h"
#include "lanes/handle_impl.h"
#include "lanes/lane.h"
#include "lanes/wait.h"
#include "lanework/chip.h"

#ifdef __cplusplus
extern "C" {
#endif

// Cancels the running kernel when its run's timeout passes. One thread per chip, asleep on a
// futex unless a run with a timeout is in flight.
typedef struct lw_chip_watchdog {
  pthread_t thread;
  bool started;
  _Atomic uint64_t armed_generation;  // the run being watched; 0: none
  lw_cancel_word_t *_Atomic armed_word;  // that run's cancel word
  _Atomic int64_t deadline_ns;        // absolute, for armed_generation
  _Atomic uint64_t fired_generation;  // the last run the watchdog cancelled
  _Atomic bool stop;
  lw_waitword_t word;
} lw_chip_watchdog_t;

// Counters for lw_chip_stats (child/chip_stats.c), read by any thread without a lock as a
// snapshot: each is bumped once where its event happens with a relaxed atomic (they order
// nothing). A run counts once, when its handle finishes (run_finish, or a cancel that withdrew
// it from the queue), by its final status; accepted counts runs taken by the run lane, so
// accepted minus the finished ones is the queue depth.
typedef struct lw_chip_counters {
  _Atomic uint64_t runs_ok, runs_failed, runs_cancelled, accepted;
  _Atomic uint32_t depth_max;
  _Atomic uint64_t registers, register_failures, unregisters;
} lw_chip_counters_t;

struct lw_chip {
  lw_chip_config_t cfg;
  const lw_backend_ops_t *backend;
  void *device;
  lw_registry_t *registry;
  lw_lane_t *run_lane;
  lw_lane_t *register_lane;
  // The run lane's cancel word: a fresh even generation per run (lanes/cancel.h). A chip
  // child gives each run the task frame's word in the mailbox instead (lw__chip_run_prepare).
  lw_cancel_word_t cancel_word;
  lw_chip_watchdog_t watchdog;
  // A staging buffer reused by register_async's image copy: a fresh malloc of a multi-MB image
  // page-faults on every register, which costs more than the copy itself. One register at a
  // time uses it; others fall back to malloc.
  pthread_mutex_t staging_mu;
  void *staging;
  size_t staging_bytes;
  bool staging_busy;
  _Atomic bool closing;
  // lw_chip_run runs on the caller's thread when the run lane is idle (chip.c run_here). Off
  // when the run lane is pinned to a CPU (cfg.run_lane_cpu: the user wants runs there) and
  // with LW_L2_RUN_HERE=0 (for comparisons). Set at open.
  bool run_here;
  _Atomic uint64_t next_run_id;
  lw_chip_counters_t counters;
};

// Runs the run lane took and that have not finished, now (any thread; a snapshot).
static inline uint32_t lw__chip_queue_depth(lw_chip_t *chip) {
  // Counters that only grow, read without a lock: the reads may see different moments, so
  // the difference is clamped at 0.
  uint64_t done =
      atomic_load_explicit(&chip->counters.runs_ok, memory_order_relaxed) +
      atomic_load_explicit(&chip->counters.runs_failed, memory_order_relaxed) +
      atomic_load_explicit(&chip->counters.runs_cancelled, memory_order_relaxed);
  uint64_t accepted = atomic_load_explicit(&chip->counters.accepted, memory_order_relaxed);
  return accepted > done ? (uint32_t)(accepted - done) : 0;
}

// Options of the internal submit paths used by the chip child.
typedef struct lw_chip_submit_opts {
  lw_cancel_word_t *cancel_word;  // the run's cancel word; NULL: the chip's own
  // A second cancel signal in shared memory (the task frame's cancel_dispatch): the run is
  // cancelled when it holds cancel_mark_value (nonzero: the run's post), checked when the run
  // starts, so a cancel that arrived while it was queued still stops it. May be NULL.
  const _Atomic uint64_t *cancel_mark;
  uint64_t cancel_mark_value;
  // Receives CLOCK_MONOTONIC ns when the kernel starts (the parent's escalation clock).
  _Atomic uint64_t *started_ns;
  lw_handle_notify_fn notify;     // called once when the handle finishes (finishing thread)
  void *notify_ctx;
  // Asked on the run lane just before the run starts (after the cancel checks): a status other
  // than LW_OK (POISONED or CANCELLED), with *why filled, finishes the run with it without
  // starting it. May be NULL. notify_ctx is its argument too.
  lw_status_t (*must_not_start)(void *ctx, lw_error_t *why);
  uint64_t task_id;               // for messages
  uint64_t l3_run_id;             // for messages: non-zero when the run is an L3 task
  // run: the caller is the run lane's own thread and the lane holds nothing queued, so the run
  // starts next: its start stands for its submit time (one clock read fewer; queue_ns 0).
  bool starts_next;
  bool borrow_image;              // register: the image outlives the register (no copy)
  // register: bumped while the submit waits for room on a full register lane, so a mailbox
  // loop waiting there still shows its liveness heartbeat (mailbox.h). May be NULL.
  _Atomic uint64_t *heartbeat;
} lw_chip_submit_opts_t;

// A run split in two steps: prepare validates and pins (the callable can no longer be freed),
// enqueue puts it on the run lane. Between the two the caller publishes TASK_RUNNING, so the
// run cannot finish before its frame says it runs. On prepare failure nothing is pinned.
typedef struct lw_chip_run lw_chip_run_t;
LW_MUST_USE lw_status_t lw__chip_run_prepare(lw_chip_t *chip, lw_callable_handle_t h,
                                             const lw_kernel_args_t *args, int64_t timeout_ns,
                                             const lw_chip_submit_opts_t *opts,
                                             lw_chip_run_t **out_run, lw_error_t *err);
// Queues a prepared run and returns its handle (the caller owns one reference). Reserved
// submit: a chip child bounds its runs by its task frames.
lw_handle_t *lw__chip_run_enqueue(lw_chip_run_t *run);
// The name of the callable a prepared run pinned (valid until the run finishes).
const char *lw__chip_run_name(const lw_chip_run_t *run);

// lw_chip_register_async / lw_chip_unregister_async with options. Errors fill err (may be
// NULL) and leave the thread-local last error alone.
LW_MUST_USE lw_status_t lw__chip_register_async_opts(lw_chip_t *chip, const lw_callable_t *c,
                                                     const lw_chip_submit_opts_t *opts,
                                                     lw_handle_t **out, lw_error_t *err);
LW_MUST_USE lw_status_t lw__chip_unregister_async_opts(lw_chip_t *chip, lw_callable_handle_t h,
                                                       const lw_chip_submit_opts_t *opts,
                                                       lw_handle_t **out, lw_error_t *err);

// lw_chip_open, filling err (may be NULL) instead of the thread-local last error: for the
// chip child, which reports the error to its parent.
LW_MUST_USE lw_status_t lw__chip_open(const lw_chip_config_t *cfg, lw_chip_t **out_chip,
                                      lw_error_t *err);

// lw__chip_open for a chip whose backend device differs from its index: the chip is
// cfg->device_id in messages, traces and stats, and the backend opens device `device` (the chip
// child of a worker whose chips share devices, lw_worker_config_t.n_devices).
LW_MUST_USE lw_status_t lw__chip_open_on(const lw_chip_config_t *cfg, int32_t device,
                                         lw_chip_t **out_chip, lw_error_t *err);

// Tells the chip's backend that [base, base + bytes) outlives the chip and holds its runs'
// tensors (lw_backend_ops_t.host_region): the chip child passes the worker's arena. Once, right
// after the open, before any run.
void lw__chip_set_host_region(lw_chip_t *chip, void *base, uint64_t bytes);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_CHIP_IMPL_H_
