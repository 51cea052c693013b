// tests/lanes/test_lane.c — lanes: FIFO order, capacity, follow-ups, drain modes, timeline.
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/lane.h"
#include "lanes/sys.h"
#include "lanes_test_util.h"

#define LOG_MAX 8192

typedef struct log_entry {
  int producer;
  int index;
  uint64_t seq;
  bool cancelled;
} log_entry_t;

// What ran on the lane, in order. Only the lane thread appends; the main thread reads after
// a timeline wait or destroy, which orders the reads after the writes.
typedef struct recorder {
  _Atomic uint32_t lane_exited;  // set as the lane thread exits, to check destroy joined it
  uint32_t n;
  log_entry_t log[LOG_MAX];
} recorder_t;

typedef struct rec_item {
  lw_lane_item_t item;  // first, so the fn can cast back
  recorder_t *rec;
  int producer;
  int index;
  test_gate_t *gate;           // when set, the fn announces it started and waits for the gate
  _Atomic uint32_t *started;
  void (*extra)(struct rec_item *self);  // optional: more work on the lane thread
  bool free_me;
} rec_item_t;

static void rec_fn(lw_lane_item_t *item, bool cancelled) {
  rec_item_t *r = (rec_item_t *)item;
  recorder_t *rec = r->rec;
  test_exit_flag_arm(&rec->lane_exited);
  if (rec->n >= LOG_MAX) abort();  // no cr_assert here: this runs on the lane thread
  rec->log[rec->n++] = (log_entry_t){r->producer, r->index, item->seq, cancelled};
  if (r->started != NULL) atomic_store(r->started, 1);
  if (r->gate != NULL) test_gate_wait(r->gate);
  if (r->extra != NULL) r->extra(r);
  if (r->free_me) free(r);  // allowed: the lane must not touch the item after fn
}

static void rec_item_init(rec_item_t *r, recorder_t *rec, int producer, int index) {
  memset(r, 0, sizeof(*r));
  r->item.fn = rec_fn;
  r->rec = rec;
  r->producer = producer;
  r->index = index;
}

static recorder_t *recorder_create(void) {
  recorder_t *rec = calloc(1, sizeof(*rec));
  cr_assert_not_null(rec);
  return rec;
}

Test(lane, create_rejects_zero_capacity_and_null_out) {
  lw_lane_t *lane = (lw_lane_t *)1;
  cr_assert_eq(lw__lane_create("x", 0, &lane, NULL), LW_INVALID_ARGUMENT);
  cr_assert_null(lane);
  cr_assert_eq(lw__lane_create("x", 1, NULL, NULL), LW_INVALID_ARGUMENT);
  lw__lane_destroy(NULL, LW_LANE_DRAIN_RUN);  // ignored
}

// DESIGN §9: below the public API an error travels in the caller's err only; the
// thread-local last error belongs to the public entry points.
Test(lane, failures_fill_err_and_leave_the_thread_local_last_error_alone, .timeout = 10) {
  (void)lw__fail(LW_POISONED, "set by the test");
  lw_error_t err;
  lw_lane_t *lane = NULL;
  cr_assert_eq(lw__lane_create("x", 0, &lane, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(err.code, LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "lane: capacity must be > 0");
  cr_assert_eq(lw__lane_create("x", 1, NULL, &err), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "lane: out is NULL");

  cr_assert_eq(lw__lane_create("cpu", 1, &lane, &err), LW_OK);
  cr_assert_eq(lw__lane_set_cpu(lane, -1, &err), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "lane cpu: cpu -1 is out of range");
  cr_assert_eq(lw__lane_submit_reserved(lane, NULL, NULL, &err), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "lane: NULL lane, item or item fn");
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);

  // A NULL err is allowed: the status alone comes back.
  cr_assert_eq(lw__lane_create("x", 0, &lane, NULL), LW_INVALID_ARGUMENT);

  cr_assert_eq(lw_last_error()->code, LW_POISONED);
  cr_assert_str_eq(lw_last_error()->message, "set by the test");
}

Test(lane, runs_items_in_submission_order_and_timeline_reaches_each_seq, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("order", 16, &lane, NULL), LW_OK);
  cr_assert_str_eq(lw__lane_name(lane), "order");
  recorder_t *rec = recorder_create();
  enum { N = 200 };
  rec_item_t *items = calloc(N, sizeof(*items));
  uint64_t last_seq = 0;
  for (int i = 0; i < N; ++i) {
    rec_item_init(&items[i], rec, 0, i);
    uint64_t seq = 0;
    cr_assert_eq(lw__lane_submit(lane, &items[i].item, LW_DEADLINE_NEVER, &seq, NULL), LW_OK);
    cr_assert_eq(seq, last_seq + 1, "seqs are 1, 2, ...");
    last_seq = seq;
  }
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), last_seq, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(rec->n, N);
  for (int i = 0; i < N; ++i) {
    cr_assert_eq(rec->log[i].index, i);
    cr_assert_eq(rec->log[i].seq, (uint64_t)i + 1);
    cr_assert_not(rec->log[i].cancelled);
  }
  cr_assert_not(test_exit_flag_is_set(&rec->lane_exited), "the lane thread lives until destroy");
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  cr_assert(test_exit_flag_is_set(&rec->lane_exited), "destroy joined the lane thread");
  free(items);
  free(rec);
}

#define N_PRODUCERS 4
#define ITEMS_EACH 1000

typedef struct producer {
  lw_lane_t *lane;
  recorder_t *rec;
  int id;
  rec_item_t *items;
  int submitted;
  uint64_t last_seq;
  bool seqs_increasing;
} producer_t;

static void *producer_main(void *p) {
  producer_t *pr = p;
  pr->seqs_increasing = true;
  for (int i = 0; i < ITEMS_EACH; ++i) {
    rec_item_init(&pr->items[i], pr->rec, pr->id, i);
    uint64_t seq = 0;
    // A small capacity makes producers block on a full lane now and then.
    if (lw__lane_submit(pr->lane, &pr->items[i].item, LW_DEADLINE_NEVER, &seq, NULL) != LW_OK) {
      break;
    }
    if (seq <= pr->last_seq) pr->seqs_increasing = false;
    pr->last_seq = seq;
    pr->submitted++;
  }
  return NULL;
}

Test(lane, keeps_each_submitters_order_and_runs_every_item_once, .timeout = 60) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("fifo-mt", 8, &lane, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  pthread_t th[N_PRODUCERS];
  producer_t pr[N_PRODUCERS];
  for (int i = 0; i < N_PRODUCERS; ++i) {
    pr[i] = (producer_t){lane, rec, i, calloc(ITEMS_EACH, sizeof(rec_item_t)), 0, 0, true};
    cr_assert_eq(pthread_create(&th[i], NULL, producer_main, &pr[i]), 0);
  }
  uint64_t max_seq = 0;
  for (int i = 0; i < N_PRODUCERS; ++i) {
    pthread_join(th[i], NULL);
    cr_assert_eq(pr[i].submitted, ITEMS_EACH);
    cr_assert(pr[i].seqs_increasing);
    if (pr[i].last_seq > max_seq) max_seq = pr[i].last_seq;
  }
  cr_assert_eq(max_seq, (uint64_t)N_PRODUCERS * ITEMS_EACH);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), max_seq, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(rec->n, N_PRODUCERS * ITEMS_EACH, "every item ran exactly once");
  int next[N_PRODUCERS] = {0};
  for (uint32_t k = 0; k < rec->n; ++k) {
    const log_entry_t *e = &rec->log[k];
    cr_assert_eq(e->seq, (uint64_t)k + 1, "items run in seq order");
    cr_assert_eq(e->index, next[e->producer], "producer %d: item %d ran out of order",
                 e->producer, e->index);
    next[e->producer]++;
  }
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  for (int i = 0; i < N_PRODUCERS; ++i) free(pr[i].items);
  free(rec);
}

Test(lane, full_lane_blocks_to_the_deadline_then_fails_resource_exhausted_naming_capacity,
     .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("small", 2, &lane, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  test_gate_t gate;
  test_gate_init(&gate);
  _Atomic uint32_t started = 0;
  rec_item_t a, b, c;
  rec_item_init(&a, rec, 0, 0);
  a.gate = &gate;
  a.started = &started;
  rec_item_init(&b, rec, 0, 1);
  rec_item_init(&c, rec, 0, 2);
  cr_assert_eq(lw__lane_submit(lane, &a.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  cr_assert_eq(lw__lane_submit(lane, &b.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  test_wait_nonzero(&started);  // a runs (and holds its slot), b is queued: the lane is full

  lw_error_t err;
  const int64_t timeout = 20 * 1000 * 1000;
  int64_t start = lw__now_ns();
  cr_assert_eq(lw__lane_submit(lane, &c.item, start + timeout, NULL, &err), LW_RESOURCE_EXHAUSTED);
  cr_assert_geq(lw__now_ns() - start, timeout, "it blocked until the deadline");
  cr_assert_eq(err.code, LW_RESOURCE_EXHAUSTED);
  cr_assert(strstr(err.message, "capacity 2") != NULL, "message: %s", err.message);
  cr_assert(strstr(err.message, "small") != NULL, "message names the lane: %s", err.message);

  cr_assert_eq(lw__lane_submit(lane, &c.item, 0, NULL, &err), LW_RESOURCE_EXHAUSTED,
               "a deadline in the past fails at once when full");

  test_gate_open(&gate);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), 2, LW_DEADLINE_NEVER), LW_OK);
  // The slots of finished items are free by the time the timeline says they ran.
  uint64_t seq = 0;
  cr_assert_eq(lw__lane_submit(lane, &c.item, 0, &seq, &err), LW_OK);
  cr_assert_eq(seq, 3, "failed submits consume no sequence number");
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  cr_assert_eq(rec->n, 3);
  cr_assert_eq(rec->log[2].index, 2);
  free(rec);
}

typedef struct blocked_submit {
  lw_lane_t *lane;
  rec_item_t *item;
  _Atomic uint32_t about_to_submit;
  lw_status_t result;
} blocked_submit_t;

static void *blocked_submit_main(void *p) {
  blocked_submit_t *bs = p;
  atomic_store(&bs->about_to_submit, 1);
  bs->result = lw__lane_submit(bs->lane, &bs->item->item, LW_DEADLINE_NEVER, NULL, NULL);
  return NULL;
}

Test(lane, submit_to_full_lane_proceeds_once_a_slot_frees, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("one", 1, &lane, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  test_gate_t gate;
  test_gate_init(&gate);
  _Atomic uint32_t started = 0;
  rec_item_t a, b;
  rec_item_init(&a, rec, 0, 0);
  a.gate = &gate;
  a.started = &started;
  rec_item_init(&b, rec, 0, 1);
  cr_assert_eq(lw__lane_submit(lane, &a.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  test_wait_nonzero(&started);
  blocked_submit_t bs = {lane, &b, 0, LW_INTERNAL};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, blocked_submit_main, &bs), 0);
  test_wait_nonzero(&bs.about_to_submit);
  test_gate_open(&gate);
  pthread_join(th, NULL);
  cr_assert_eq(bs.result, LW_OK);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), 2, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(rec->n, 2);
  cr_assert_eq(rec->log[0].index, 0);
  cr_assert_eq(rec->log[1].index, 1);
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  free(rec);
}

// ---- destroy ----------------------------------------------------------------------------

typedef struct drain_probe {
  lw_lane_t *lane;
  rec_item_t follow_up;
  lw_status_t reserved_result;
  lw_status_t normal_result;
  lw_error_t normal_err;
} drain_probe_t;

static drain_probe_t *g_probe;  // read by probe_follow_ups on the lane thread

static void probe_follow_ups(rec_item_t *self) {
  (void)self;
  g_probe->reserved_result =
      lw__lane_submit_reserved(g_probe->lane, &g_probe->follow_up.item, NULL, NULL);
  g_probe->normal_result = lw__lane_submit(g_probe->lane, &g_probe->follow_up.item, 0, NULL,
                                          &g_probe->normal_err);
}

typedef struct late_submitter {
  lw_lane_t *lane;
  rec_item_t *item;
  test_gate_t *gate;
  lw_status_t result;
  lw_error_t err;
} late_submitter_t;

// Submits to a full lane; destroy wakes it with UNAVAILABLE. Only then does it open the gate
// of the running item: so destroy has provably begun before the queued items are dequeued.
static void *late_submitter_main(void *p) {
  late_submitter_t *ls = p;
  ls->result = lw__lane_submit(ls->lane, &ls->item->item, LW_DEADLINE_NEVER, NULL, &ls->err);
  test_gate_open(ls->gate);
  return NULL;
}

static void check_destroy(lw_lane_drain_t mode) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("drain", 3, &lane, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  test_gate_t gate;
  test_gate_init(&gate);
  _Atomic uint32_t started = 0;
  rec_item_t a, b, c, d;
  rec_item_init(&a, rec, 0, 0);
  a.gate = &gate;
  a.started = &started;
  rec_item_init(&b, rec, 0, 1);
  b.extra = probe_follow_ups;
  rec_item_init(&c, rec, 0, 2);
  rec_item_init(&d, rec, 0, 3);
  drain_probe_t probe = {.lane = lane, .reserved_result = LW_INTERNAL,
                         .normal_result = LW_INTERNAL};
  rec_item_init(&probe.follow_up, rec, 1, 0);
  g_probe = &probe;

  cr_assert_eq(lw__lane_submit(lane, &a.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  cr_assert_eq(lw__lane_submit(lane, &b.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  cr_assert_eq(lw__lane_submit(lane, &c.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  test_wait_nonzero(&started);  // a running, b and c queued: full

  late_submitter_t ls = {lane, &d, &gate, LW_INTERNAL, {0}};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, late_submitter_main, &ls), 0);
  lw__lane_destroy(lane, mode);  // returns once everything queued was run or cancelled
  pthread_join(th, NULL);

  cr_assert_eq(ls.result, LW_UNAVAILABLE, "submit after destroy began");
  cr_assert(strstr(ls.err.message, "drain") != NULL, "message: %s", ls.err.message);
  cr_assert_eq(probe.reserved_result, LW_UNAVAILABLE, "follow-up (reserved) during destroy");
  cr_assert_eq(probe.normal_result, LW_UNAVAILABLE, "follow-up during destroy");
  cr_assert_eq(rec->n, 3, "a, b and c got their fn called once; d and the follow-up never");
  cr_assert_eq(rec->log[0].index, 0);
  cr_assert_not(rec->log[0].cancelled, "a had started before destroy");
  bool want = mode == LW_LANE_DRAIN_CANCEL;
  for (int i = 1; i < 3; ++i) {
    cr_assert_eq(rec->log[i].index, i);
    cr_assert_eq(rec->log[i].cancelled, want, "item %d: cancelled=%d", i, rec->log[i].cancelled);
  }
  cr_assert(test_exit_flag_is_set(&rec->lane_exited), "destroy joined the lane thread");
  free(rec);
}

Test(lane, destroy_drain_cancel_calls_queued_fns_with_cancelled_and_rejects_new_work,
     .timeout = 10) {
  check_destroy(LW_LANE_DRAIN_CANCEL);
}

Test(lane, destroy_drain_run_runs_queued_items_in_order_and_rejects_new_work, .timeout = 10) {
  check_destroy(LW_LANE_DRAIN_RUN);
}

Test(lane, destroy_of_an_idle_lane_wakes_and_joins_its_thread, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("idle", 4, &lane, NULL), LW_OK);
  lw__lane_destroy(lane, LW_LANE_DRAIN_CANCEL);
}

// ---- items on the lane thread ---------------------------------------------------------------

Test(lane, fn_may_free_its_item, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("free", 4, &lane, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  uint64_t seq = 0;
  for (int i = 0; i < 100; ++i) {
    rec_item_t *r = malloc(sizeof(*r));
    rec_item_init(r, rec, 0, i);
    r->free_me = true;
    cr_assert_eq(lw__lane_submit(lane, &r->item, LW_DEADLINE_NEVER, &seq, NULL), LW_OK);
  }
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), seq, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(rec->n, 100);
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  free(rec);
}

typedef struct follow_up_ctx {
  lw_lane_t *lane;
  rec_item_t reserved_item, normal_item, overflow_item;
  lw_status_t reserved_result, normal_result, overflow_result;
  lw_error_t overflow_err;
  bool is_current_here, is_current_other;
  lw_lane_t *other;
  char thread_name[32];
} follow_up_ctx_t;

static follow_up_ctx_t *g_fu;

static void queue_follow_ups(rec_item_t *self) {
  (void)self;
  follow_up_ctx_t *fu = g_fu;
  fu->is_current_here = lw__lane_is_current(fu->lane);
  fu->is_current_other = lw__lane_is_current(fu->other);
  pthread_getname_np(pthread_self(), fu->thread_name, sizeof(fu->thread_name));
  fu->reserved_result = lw__lane_submit_reserved(fu->lane, &fu->reserved_item.item, NULL, NULL);
  fu->normal_result = lw__lane_submit(fu->lane, &fu->normal_item.item, LW_DEADLINE_NEVER, NULL,
                                     NULL);
}

Test(lane, item_queues_follow_ups_on_its_own_lane_and_they_run_after_it, .timeout = 10) {
  lw_lane_t *lane, *other;
  cr_assert_eq(lw__lane_create("follow-up-lane-long-name", 4, &lane, NULL), LW_OK);
  cr_assert_eq(lw__lane_create("other", 1, &other, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  follow_up_ctx_t fu = {.lane = lane, .other = other};
  g_fu = &fu;
  rec_item_t a;
  rec_item_init(&a, rec, 0, 0);
  a.extra = queue_follow_ups;
  rec_item_init(&fu.reserved_item, rec, 0, 1);
  rec_item_init(&fu.normal_item, rec, 0, 2);
  cr_assert_eq(lw__lane_submit(lane, &a.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), 3, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(fu.reserved_result, LW_OK);
  cr_assert_eq(fu.normal_result, LW_OK);
  cr_assert_eq(rec->n, 3);
  for (int i = 0; i < 3; ++i) cr_assert_eq(rec->log[i].index, i);
  cr_assert(fu.is_current_here);
  cr_assert_not(fu.is_current_other);
  cr_assert_not(lw__lane_is_current(lane), "the test thread is not the lane thread");
  cr_assert_str_eq(fu.thread_name, "follow-up-lane-", "thread named after the lane (15 chars)");
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  lw__lane_destroy(other, LW_LANE_DRAIN_RUN);
  free(rec);
}

static void overflow_own_lane(rec_item_t *self) {
  (void)self;
  follow_up_ctx_t *fu = g_fu;
  // The lane is full (this item holds its only slot). Waiting here would deadlock.
  fu->overflow_result = lw__lane_submit(fu->lane, &fu->overflow_item.item, LW_DEADLINE_NEVER,
                                       NULL, &fu->overflow_err);
  fu->reserved_result = lw__lane_submit_reserved(fu->lane, &fu->reserved_item.item, NULL, NULL);
}

Test(lane, full_own_lane_fails_submit_from_its_thread_at_once_but_takes_reserved,
     .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("self", 1, &lane, NULL), LW_OK);
  recorder_t *rec = recorder_create();
  follow_up_ctx_t fu = {.lane = lane, .other = NULL};
  g_fu = &fu;
  rec_item_t a;
  rec_item_init(&a, rec, 0, 0);
  a.extra = overflow_own_lane;
  rec_item_init(&fu.overflow_item, rec, 0, 99);
  rec_item_init(&fu.reserved_item, rec, 0, 1);
  cr_assert_eq(lw__lane_submit(lane, &a.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), 2, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(fu.overflow_result, LW_RESOURCE_EXHAUSTED);
  cr_assert(strstr(fu.overflow_err.message, "capacity 1") != NULL, "message: %s",
            fu.overflow_err.message);
  cr_assert_eq(fu.reserved_result, LW_OK);
  cr_assert_eq(rec->n, 2);
  cr_assert_eq(rec->log[1].index, 1, "the reserved follow-up ran, the overflow did not");
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  free(rec);
}

// ---------------------------------------------------------------------------------------------
// Idle hook (lw__lane_set_idle): the lane thread waits elsewhere and may queue its own work.

typedef struct hook_ctx {
  recorder_t *rec;
  test_gate_t go;             // opened by the test: the hook queues its item
  rec_item_t item;            // queued by the hook, on the lane thread
  _Atomic uint32_t entered;   // the hook ran at least once
  _Atomic uint32_t on_lane;   // the hook ran on the lane's own thread
  _Atomic uint32_t queued;    // the hook queued its item
  _Atomic uint32_t decline;   // the hook returns false: the lane waits on its own futex
  _Atomic uint32_t wakes;     // calls of the hook's wake
  lw_lane_t *lane;
} hook_ctx_t;

static void count_wake(void *ctx) { atomic_fetch_add(&((hook_ctx_t *)ctx)->wakes, 1); }

static bool queue_when_told(void *ctx, lw_lane_t *lane) {
  hook_ctx_t *h = ctx;
  atomic_store(&h->entered, 1);
  if (atomic_load(&h->decline)) return false;
  if (lw__lane_is_current(lane)) atomic_store(&h->on_lane, 1);
  if (atomic_load(&h->queued)) {
    // Queued already: wait like a hook that has nothing to take, until work or stop.
    while (!lw__lane_has_work_or_stop(lane) && !atomic_load(&h->decline)) sched_yield();
    return true;
  }
  test_gate_wait(&h->go);
  rec_item_init(&h->item, h->rec, 7, 1);
  if (lw__lane_submit_reserved(lane, &h->item.item, NULL, NULL) == LW_OK) {
    atomic_store(&h->queued, 1);
  }
  return true;
}

Test(lane, idle_hook_runs_on_the_lane_thread_and_the_item_it_queues_runs_next, .timeout = 10) {
  hook_ctx_t *h = calloc(1, sizeof(*h));
  h->rec = recorder_create();
  test_gate_init(&h->go);
  cr_assert_eq(lw__lane_create("hook", 4, &h->lane, NULL), LW_OK);
  lw_lane_idle_t idle = {queue_when_told, count_wake, h};
  lw__lane_set_idle(h->lane, &idle);
  test_wait_nonzero(&h->entered);
  cr_assert_eq(h->rec->n, 0, "nothing runs before the hook queues it");
  test_gate_open(&h->go);
  // The hook's item is the lane's first: seq 1.
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(h->lane), 1, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(h->rec->n, 1);
  cr_assert_eq(h->rec->log[0].producer, 7);
  cr_assert(atomic_load(&h->on_lane), "the hook runs on the lane's thread");
  // The lane thread was awake when it queued: the hook's wake was not called for it.
  cr_assert_eq(atomic_load(&h->wakes), 0, "a submit from the lane's own thread woke its hook");
  // A submit from another thread still runs (the hook returns once the lane has work), and
  // it wakes the hook.
  rec_item_t other;
  rec_item_init(&other, h->rec, 0, 2);
  uint64_t seq = 0;
  cr_assert_eq(lw__lane_submit(h->lane, &other.item, LW_DEADLINE_NEVER, &seq, NULL), LW_OK);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(h->lane), seq, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_eq(h->rec->log[1].index, 2);
  cr_assert_geq(atomic_load(&h->wakes), 1, "a submit from another thread woke the hook");
  // A hook that declines leaves the lane to its futex: destroy still wakes and joins it.
  atomic_store(&h->decline, 1);
  lw__lane_destroy(h->lane, LW_LANE_DRAIN_RUN);
  cr_assert(test_exit_flag_is_set(&h->rec->lane_exited), "destroy joined the lane thread");
  free(h->rec);
  free(h);
}

static bool always_decline(void *ctx, lw_lane_t *lane) {
  (void)lane;
  atomic_fetch_add((_Atomic uint32_t *)ctx, 1);
  return false;
}

Test(lane, declining_idle_hook_leaves_submit_and_destroy_working_as_without_one, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("decline", 4, &lane, NULL), LW_OK);
  _Atomic uint32_t calls = 0;
  lw_lane_idle_t idle = {always_decline, NULL, &calls};
  lw__lane_set_idle(lane, &idle);
  recorder_t *rec = recorder_create();
  rec_item_t items[3];
  uint64_t seq = 0;
  for (int i = 0; i < 3; ++i) {
    rec_item_init(&items[i], rec, 0, i);
    cr_assert_eq(lw__lane_submit(lane, &items[i].item, LW_DEADLINE_NEVER, &seq, NULL), LW_OK);
    cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), seq, LW_DEADLINE_NEVER), LW_OK);
  }
  cr_assert_eq(rec->n, 3);
  cr_assert_gt(atomic_load(&calls), 0, "the lane asked its hook when it was idle");
  lw__lane_set_idle(lane, NULL);
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  cr_assert(test_exit_flag_is_set(&rec->lane_exited));
  free(rec);
}

// lw__lane_run_here: a caller that finds the lane idle runs its item itself, as the lane's
// next item.

typedef struct here_item {
  lw_lane_item_t item;  // first, so the fn can cast back
  lw_lane_t *lane;
  _Atomic uint32_t *clock;  // shared order counter: each event takes the next tick
  pthread_t ran_on;
  bool was_current;         // lw__lane_is_current(lane) inside fn
  uint32_t at_start, at_end;
  _Atomic uint32_t ran;
  _Atomic uint32_t started;
  test_gate_t *gate;                // when set: announce started, wait for it
  struct here_item *follow;         // when set: submitted from inside fn, before the gate
  uint64_t follow_seq;
  int yields_after;                 // sched_yield this often before the end tick
  struct here_item *nested;         // when set: lw__lane_run_here(lane, nested) from fn
  bool nested_ran_here;
} here_item_t;

static void here_fn(lw_lane_item_t *item, bool cancelled) {
  here_item_t *h = (here_item_t *)item;
  (void)cancelled;
  h->ran_on = pthread_self();
  h->was_current = lw__lane_is_current(h->lane);
  h->at_start = atomic_fetch_add(h->clock, 1);
  if (h->follow != NULL &&
      lw__lane_submit(h->lane, &h->follow->item, LW_DEADLINE_NEVER, &h->follow_seq, NULL) != LW_OK) {
    abort();
  }
  if (h->nested != NULL) h->nested_ran_here = lw__lane_run_here(h->lane, &h->nested->item, NULL);
  atomic_store(&h->started, 1);
  if (h->gate != NULL) test_gate_wait(h->gate);
  for (int i = 0; i < h->yields_after; ++i) sched_yield();
  h->at_end = atomic_fetch_add(h->clock, 1);
  atomic_store(&h->ran, 1);
}

static void here_init(here_item_t *h, lw_lane_t *lane, _Atomic uint32_t *clock) {
  memset(h, 0, sizeof(*h));
  h->item.fn = here_fn;
  h->lane = lane;
  h->clock = clock;
}

Test(lane, run_here_on_an_idle_lane_runs_on_the_caller_as_the_next_item, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("here", 4, &lane, NULL), LW_OK);
  _Atomic uint32_t clock = 1;
  here_item_t a, b;
  here_init(&a, lane, &clock);
  here_init(&b, lane, &clock);
  uint64_t seq = 0;
  cr_assert(lw__lane_run_here(lane, &a.item, &seq), "an idle lane takes the item here");
  cr_assert(atomic_load(&a.ran), "it has run when run_here returns");
  cr_assert(pthread_equal(a.ran_on, pthread_self()), "on the calling thread");
  cr_assert(a.was_current, "the lane counts the caller as its thread while the item runs");
  cr_assert_not(lw__lane_is_current(lane), "and no longer afterwards");
  cr_assert_eq(seq, 1);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), 1, 0), LW_OK,
               "the timeline reached its number when run_here returned");
  uint64_t seq_b = 0;
  cr_assert_eq(lw__lane_submit(lane, &b.item, LW_DEADLINE_NEVER, &seq_b, NULL), LW_OK);
  cr_assert_eq(seq_b, 2, "the next item takes the next number");
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), 2, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_not(pthread_equal(b.ran_on, pthread_self()), "a submitted item runs on the lane");
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
}

Test(lane, run_here_declines_while_the_lane_runs_or_holds_an_item_and_runs_nothing,
     .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("busy", 4, &lane, NULL), LW_OK);
  _Atomic uint32_t clock = 1;
  test_gate_t gate;
  test_gate_init(&gate);
  here_item_t running, queued, declined;
  here_init(&running, lane, &clock);
  here_init(&queued, lane, &clock);
  here_init(&declined, lane, &clock);
  running.gate = &gate;
  cr_assert_eq(lw__lane_submit(lane, &running.item, LW_DEADLINE_NEVER, NULL, NULL), LW_OK);
  test_wait_nonzero(&running.started);
  cr_assert_not(lw__lane_run_here(lane, &declined.item, NULL), "a running item: declined");
  uint64_t seq = 0;
  cr_assert_eq(lw__lane_submit(lane, &queued.item, LW_DEADLINE_NEVER, &seq, NULL), LW_OK);
  cr_assert_not(lw__lane_run_here(lane, &declined.item, NULL), "a queued item: declined");
  test_gate_open(&gate);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), seq, LW_DEADLINE_NEVER), LW_OK);
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
  cr_assert_not(atomic_load(&declined.ran), "a declined item never ran");
  cr_assert(atomic_load(&queued.ran));
}

Test(lane, an_item_queued_during_a_run_here_starts_only_after_it_returned, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("behind", 4, &lane, NULL), LW_OK);
  _Atomic uint32_t clock = 1;
  for (int round = 0; round < 50; ++round) {
    here_item_t a, f;
    here_init(&a, lane, &clock);
    here_init(&f, lane, &clock);
    a.follow = &f;
    a.yields_after = 200;  // time in which a lane thread that ignored `here` would start f
    cr_assert(lw__lane_run_here(lane, &a.item, NULL), "round %d", round);
    cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), a.follow_seq, LW_DEADLINE_NEVER),
                 LW_OK);
    cr_assert_eq(a.follow_seq, a.item.seq + 1);
    cr_assert_gt(f.at_start, a.at_end, "round %d: the item behind started after the end of the "
                                       "one run here (%u, %u)", round, f.at_start, a.at_end);
    cr_assert_not(pthread_equal(f.ran_on, pthread_self()));
  }
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
}

typedef struct here_runner {
  lw_lane_t *lane;
  here_item_t *item;
  bool took;
} here_runner_t;

static void *here_runner_main(void *p) {
  here_runner_t *r = p;
  r->took = lw__lane_run_here(r->lane, &r->item->item, NULL);
  return NULL;
}

typedef struct destroyer {
  lw_lane_t *lane;
  _Atomic uint32_t *clock;
  uint32_t returned_at;
} destroyer_t;

static void *destroyer_main(void *p) {
  destroyer_t *d = p;
  lw__lane_destroy(d->lane, LW_LANE_DRAIN_RUN);
  d->returned_at = atomic_fetch_add(d->clock, 1);
  return NULL;
}

Test(lane, destroy_waits_for_a_run_here_item_then_drains_what_queued_behind_it, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("drain", 4, &lane, NULL), LW_OK);
  _Atomic uint32_t clock = 1;
  test_gate_t gate;
  test_gate_init(&gate);
  here_item_t a, f;
  here_init(&a, lane, &clock);
  here_init(&f, lane, &clock);
  a.follow = &f;
  a.gate = &gate;
  here_runner_t r = {lane, &a, false};
  pthread_t runner, destroying;
  cr_assert_eq(pthread_create(&runner, NULL, here_runner_main, &r), 0);
  test_wait_nonzero(&a.started);  // f is queued behind a by now
  destroyer_t d = {lane, &clock, 0};
  cr_assert_eq(pthread_create(&destroying, NULL, destroyer_main, &d), 0);
  for (int i = 0; i < 200; ++i) sched_yield();  // let destroy reach its join
  test_gate_open(&gate);
  cr_assert_eq(pthread_join(runner, NULL), 0);
  cr_assert_eq(pthread_join(destroying, NULL), 0);
  cr_assert(r.took);
  cr_assert(atomic_load(&f.ran), "DRAIN_RUN ran the item queued behind the one run here");
  cr_assert_gt(f.at_start, a.at_end, "after it (%u, %u)", f.at_start, a.at_end);
  cr_assert_gt(d.returned_at, f.at_end, "destroy returned after both (%u, %u)", d.returned_at,
               f.at_end);
}

Test(lane, run_here_declines_on_the_lane_thread_and_inside_a_run_here_item, .timeout = 10) {
  lw_lane_t *lane;
  cr_assert_eq(lw__lane_create("nested", 4, &lane, NULL), LW_OK);
  _Atomic uint32_t clock = 1;
  here_item_t outer, inner, on_lane, inner2;
  here_init(&outer, lane, &clock);
  here_init(&inner, lane, &clock);
  outer.nested = &inner;
  cr_assert(lw__lane_run_here(lane, &outer.item, NULL));
  cr_assert_not(outer.nested_ran_here, "a run_here inside a run_here item declines");
  cr_assert_not(atomic_load(&inner.ran));
  here_init(&on_lane, lane, &clock);
  here_init(&inner2, lane, &clock);
  on_lane.nested = &inner2;
  uint64_t seq = 0;
  cr_assert_eq(lw__lane_submit(lane, &on_lane.item, LW_DEADLINE_NEVER, &seq, NULL), LW_OK);
  cr_assert_eq(lw__timeline_wait(lw__lane_timeline(lane), seq, LW_DEADLINE_NEVER), LW_OK);
  cr_assert_not(on_lane.nested_ran_here, "run_here on the lane thread declines");
  cr_assert_not(atomic_load(&inner2.ran));
  lw__lane_destroy(lane, LW_LANE_DRAIN_RUN);
}
