// lanes/lane.h — a lane: a FIFO of work served by one thread.
//
// Items are intrusive: the submitter embeds an lw_lane_item_t in its own operation struct and
// keeps it alive until the item's function has been called (the function usually finishes a
// handle and may free the item). The lane never allocates per item.
//
// Order: items run one at a time in submission order. Capacity bounds the number of items
// queued or running; lw__lane_submit blocks up to a deadline when the lane is full, then fails
// RESOURCE_EXHAUSTED with a message naming the lane and its capacity. lw__lane_submit_reserved
// ignores capacity: for follow-up work the lane's own machinery must never fail to queue
// (e.g. a deferred free), and for which the caller bounds the count itself.
//
// Timeline: every item gets a sequence number (1, 2, ...) at submit; after an item's function
// returns the lane signals its timeline to that number. lw__timeline_wait(lw__lane_timeline(l),
// seq, ...) therefore waits until item seq and everything before it has run.
//
// Idle: the lane thread spins briefly (pause, then yield; lanes/spin.h) and then sleeps on a
// futex, so an idle lane costs no CPU.
//
// Lifecycle: create -> submit* -> destroy. destroy(mode) stops accepting (submit then fails
// UNAVAILABLE), then either runs every queued item (LW_LANE_DRAIN_RUN) or calls each queued
// item's function with cancelled = true (LW_LANE_DRAIN_CANCEL), and joins the thread.
// Thread safety: submit from any thread, including the lane's own thread (an item may queue
// follow-ups); destroy from one thread that is not the lane thread, with no concurrent
// submit.
#ifndef LANEWORK_LANES_LANE_H_
#define LANEWORK_LANES_LANE_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanes/timeline.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_lane lw_lane_t;
typedef struct lw_lane_item lw_lane_item_t;

// Runs on the lane thread. cancelled is true only when the lane is destroyed with
// LW_LANE_DRAIN_CANCEL before the item started: finish the operation CANCELLED.
typedef void (*lw_lane_fn)(lw_lane_item_t *item, bool cancelled);

struct lw_lane_item {
  lw_lane_item_t *next;  // owned by the lane while queued
  lw_lane_fn fn;
  uint64_t seq;          // set by submit
};

typedef enum lw_lane_drain {
  LW_LANE_DRAIN_RUN = 0,
  LW_LANE_DRAIN_CANCEL = 1,
} lw_lane_drain_t;

// name: for thread names and messages (copied; at most 15 chars used for the thread name).
// Errors (also filled into err, which may be NULL): INVALID_ARGUMENT (out NULL, capacity 0),
// RESOURCE_EXHAUSTED (no memory, or the thread cannot start).
LW_MUST_USE lw_status_t lw__lane_create(const char *name, uint32_t capacity, lw_lane_t **out,
                                       lw_error_t *err);
void lw__lane_destroy(lw_lane_t *lane, lw_lane_drain_t mode);

// Queues item (item->fn must be set). deadline_ns: absolute (lw__now_ns clock); a deadline in
// the past fails at once when full. On success *out_seq (may be NULL) gets the item's number.
// Errors: RESOURCE_EXHAUSTED (full past the deadline), UNAVAILABLE (lane shutting down); the
// item is then not queued. Errors also go to err when err is not NULL.
LW_MUST_USE lw_status_t lw__lane_submit(lw_lane_t *lane, lw_lane_item_t *item, int64_t deadline_ns,
                                       uint64_t *out_seq, lw_error_t *err);

// Queues item past capacity. Fails only with UNAVAILABLE after destroy began (and
// INVALID_ARGUMENT for a NULL lane, item or fn), also filled into err when it is not NULL.
LW_MUST_USE lw_status_t lw__lane_submit_reserved(lw_lane_t *lane, lw_lane_item_t *item,
                                                uint64_t *out_seq, lw_error_t *err);

lw_timeline_t *lw__lane_timeline(lw_lane_t *lane);

// Pins the lane's thread to one CPU (sched affinity). INVALID_ARGUMENT when cpu is negative,
// not online or not allowed for this process, also filled into err (may be NULL). Any thread;
// typically right after create.
LW_MUST_USE lw_status_t lw__lane_set_cpu(lw_lane_t *lane, int cpu, lw_error_t *err);

// True when called on this lane's thread, or on a thread inside lw__lane_run_here(lane).
bool lw__lane_is_current(const lw_lane_t *lane);

// Runs item->fn(item, false) on the calling thread as the lane's next item, if the lane is
// idle: nothing queued or running and destroy not begun. The item gets the next sequence
// number (in *out_seq, may be NULL) and counts against capacity while it runs; items submitted
// meanwhile queue behind it and the lane thread starts them only after it returned; the
// timeline is signalled to its number afterwards, as for a queued item. Returns false, doing
// nothing, when the lane is not idle: the caller then submits as usual.
//
// What it is for: a synchronous caller that would only wait for an idle lane saves two thread
// hand-offs (on a CPU shared with the lane thread, two context switches). The item runs with
// the caller's signal mask and thread-locals; use it only for items that do not care which
// thread runs them. Any thread but the lane's own (false there).
bool lw__lane_run_here(lw_lane_t *lane, lw_lane_item_t *item, uint64_t *out_seq);

// An idle hook: lets the lane's own thread wait for work somewhere else than the lane's futex
// (a chip child's run lane takes task posts from its mailbox itself when idle, saving a thread
// hop; child/chip_child.c). The lane thread calls fn(ctx, lane) whenever it finds its queue
// empty. fn returns true after it waited for something (it may have queued work onto this
// lane itself: the lane thread may submit to its own lane); the lane then checks its queue
// again. It returns false to have the lane wait as usual on its futex, which submit and
// destroy wake. A hook that blocks must itself return once lw__lane_has_work_or_stop says
// true: submit and destroy call wake(ctx) (when set) after they woke the lane's futex, for
// the hook to wake whatever it sleeps on. A submit from the lane's own thread (or from inside
// lw__lane_run_here) wakes neither: the lane thread is awake and checks its queue next.
typedef struct lw_lane_idle {
  bool (*fn)(void *ctx, lw_lane_t *lane);
  void (*wake)(void *ctx);  // may be NULL: a hook that never blocks
  void *ctx;
} lw_lane_idle_t;

// Installs (or, with NULL, removes) the idle hook; *idle must stay valid until the lane is
// destroyed or the hook removed and the lane thread has left it. Any thread.
void lw__lane_set_idle(lw_lane_t *lane, const lw_lane_idle_t *idle);

// True when an item is queued or destroy began, and no lw__lane_run_here item is running (the
// lane thread cannot take anything before it returns). Acquire: a hook that sees true and then
// takes the lane's mutex finds the item.
bool lw__lane_has_work_or_stop(const lw_lane_t *lane);

const char *lw__lane_name(const lw_lane_t *lane);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_LANE_H_
