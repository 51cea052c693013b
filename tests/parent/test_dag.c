// tests/parent/test_dag.c — the L3 DAG rules, asserted by events: every hazard on a buffer is
// ordered (RAW, WAW, WAR), an orch function that fails stops its run like a task failure, and
// run handles finish in submission order.
//
// The pattern: a task held by the gate kernel (or the latch kernel) on chip 0 keeps a buffer
// busy; a task that must wait for it is submitted for chip 1, followed by a marker task on
// chip 1 with no dependency. A chip runs its tasks in post order, so once the marker logged,
// a task that was (wrongly) free to run would have logged before it.
#include <pthread.h>
#include <stdlib.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "worker_test_util.h"

// A worker of `chips` chips whose cancel grace is grace_ns (a kernel that ignores its cancel
// word keeps its child that long).
static void make_grace_worker(uint32_t chips, int64_t grace_ns) {
  lw_worker_config_t cfg;
  wt_config(&cfg, chips, 0);
  cfg.cancel_grace_ns = grace_ns;
  wt_create(&cfg);
}


// ---------------------------------------------------------------------------------------------
// A shared log (record kernel), a gate (gate kernel) and a latch (latch kernel), in the
// worker's arena so the chip children write them.


typedef enum task_kind {
  K_RECORD = 0,
  K_GATE = 1,
  K_LATCH = 2,
  K_SCOPE_BEGIN = 3,  // not a task: lw_orch_scope_begin
  K_SCOPE_END = 4,    // not a task: lw_orch_scope_end
} task_kind_t;

// One task of a test DAG: a record of value (or the gate / latch) on chip, with at most one
// dependency carrier buf tagged tag (NULL: none).
typedef struct spec {
  task_kind_t kind;
  int64_t value;
  int32_t chip;
  void *buf;
  lw_tag_t tag;
} spec_t;

typedef struct dag {
  lw_callable_handle_t rec, gate, latch;
  shared_state_t *s;
  const spec_t *specs;
  int n;
} dag_t;

static lw_status_t submit_spec(lw_orch_t *o, const dag_t *d, const spec_t *sp) {
  if (sp->kind == K_SCOPE_BEGIN) return lw_orch_scope_begin(o);
  if (sp->kind == K_SCOPE_END) return lw_orch_scope_end(o);
  lw_args_t a;
  lw_args_init(&a);
  lw_callable_handle_t k = d->rec;
  if (sp->kind == K_RECORD) {
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, d->s->log, sizeof(d->s->log), LW_TAG_NO_DEP));
  } else {
    bool gate = sp->kind == K_GATE;
    k = gate ? d->gate : d->latch;
    void *word = gate ? (void *)&d->s->gate : (void *)&d->s->latch;
    void *entered = gate ? (void *)&d->s->entered : (void *)&d->s->latch_entered;
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, word, sizeof(uint32_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, entered, sizeof(uint32_t), LW_TAG_NO_DEP));
  }
  if (sp->buf) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, sp->buf, 64, sp->tag));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)sp->value));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 0));
  return lw_orch_submit_next_level(o, k, &a, NULL, sp->chip);
}

static lw_status_t dag_orch(lw_orch_t *o, void *user) {
  dag_t *d = user;
  for (int i = 0; i < d->n; ++i) LW_RETURN_IF_ERROR(submit_spec(o, d, &d->specs[i]));
  return LW_OK;
}

static dag_t new_dag(void) {
  dag_t d = {wreg("record"), wreg("gate"), wreg("latch"), new_shared(), NULL, 0};
  return d;
}

// ---------------------------------------------------------------------------------------------
// Hazards

enum { WRITER = 2, MARKER = 3 };

// A task on chip 0, held by the gate, uses X with held_tag; a later writer of X on chip 1
// (writer_tag) must not run before the held task finished.
static void expect_writer_waits_for_held_task(lw_tag_t held_tag, lw_tag_t writer_tag) {
  make_worker(2, 0);
  dag_t d = new_dag();
  void *X = lw_worker_alloc(w, 64);
  spec_t specs[] = {
      {K_GATE, 0, 0, X, held_tag},
      {K_RECORD, WRITER, 1, X, writer_tag},
      {K_RECORD, MARKER, 1, NULL, 0},
  };
  d.specs = specs;
  d.n = 3;
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &d, &run));
  lw_test_wait_nonzero(&d.s->entered);
  wait_logged(d.s, MARKER);
  cr_assert_eq(log_pos(d.s, WRITER), -1,
               "the writer of X ran on chip 1 while the held task on chip 0 still used X");
  atomic_store(&d.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  cr_assert_gt(log_pos(d.s, WRITER), log_pos(d.s, MARKER));
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.n_completed, 3);
  lw_handle_release(run);
  destroy_and_check();
}

Test(dag, an_output_writer_waits_for_a_reader_on_another_chip, .timeout = 60) {
  expect_writer_waits_for_held_task(LW_TAG_INPUT, LW_TAG_OUTPUT);
}

Test(dag, an_output_existing_writer_waits_for_a_reader_on_another_chip, .timeout = 60) {
  expect_writer_waits_for_held_task(LW_TAG_INPUT, LW_TAG_OUTPUT_EXISTING);
}

Test(dag, an_inout_writer_waits_for_a_reader_on_another_chip, .timeout = 60) {
  expect_writer_waits_for_held_task(LW_TAG_INPUT, LW_TAG_INOUT);
}

Test(dag, an_output_writer_waits_for_the_previous_output_writer, .timeout = 60) {
  expect_writer_waits_for_held_task(LW_TAG_OUTPUT, LW_TAG_OUTPUT);
}

Test(dag, an_inout_chain_waits_for_a_reader_between_its_links, .timeout = 60) {
  make_worker(2, 0);
  dag_t d = new_dag();
  void *X = lw_worker_alloc(w, 64);
  // 1 updates X; the gate reads 1's X on chip 0; 2 and then 4 update X on chip 1.
  spec_t specs[] = {
      {K_RECORD, 1, 1, X, LW_TAG_INOUT},
      {K_GATE, 0, 0, X, LW_TAG_INPUT},
      {K_RECORD, 2, 1, X, LW_TAG_INOUT},
      {K_RECORD, 4, 1, X, LW_TAG_INOUT},
      {K_RECORD, MARKER, 1, NULL, 0},
  };
  d.specs = specs;
  d.n = 5;
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &d, &run));
  lw_test_wait_nonzero(&d.s->entered);
  wait_logged(d.s, MARKER);
  cr_assert_eq(log_pos(d.s, 1), 0, "the gate read X before its writer finished");
  cr_assert_eq(log_pos(d.s, 2), -1, "an INOUT link ran while the reader before it still read X");
  cr_assert_eq(log_pos(d.s, 4), -1);
  atomic_store(&d.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  int m = log_pos(d.s, MARKER), a = log_pos(d.s, 2), b = log_pos(d.s, 4);
  cr_assert(m < a && a < b, "order: marker %d, link 2 at %d, link 4 at %d", m, a, b);
  lw_handle_release(run);
  destroy_and_check();
}

Test(dag, a_writer_waits_for_every_reader_since_the_last_write, .timeout = 60) {
  make_worker(2, 0);
  dag_t d = new_dag();
  void *X = lw_worker_alloc(w, 64);
  // 1 writes X; readers 100..109 (chip 1), the gate (chip 0) and readers 110..119 (chip 1)
  // read it; then the writer. More readers than fit in an entry's first list, finished ones
  // among them, and the one still reading sits in the middle.
  enum { N = 1 + 10 + 1 + 10 + 2 };
  spec_t specs[N];
  int k = 0;
  specs[k++] = (spec_t){K_RECORD, 1, 1, X, LW_TAG_OUTPUT};
  for (int i = 0; i < 10; ++i) specs[k++] = (spec_t){K_RECORD, 100 + i, 1, X, LW_TAG_INPUT};
  specs[k++] = (spec_t){K_GATE, 0, 0, X, LW_TAG_INPUT};
  for (int i = 10; i < 20; ++i) specs[k++] = (spec_t){K_RECORD, 100 + i, 1, X, LW_TAG_INPUT};
  specs[k++] = (spec_t){K_RECORD, WRITER, 1, X, LW_TAG_OUTPUT};
  specs[k++] = (spec_t){K_RECORD, MARKER, 1, NULL, 0};
  d.specs = specs;
  d.n = k;
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &d, &run));
  lw_test_wait_nonzero(&d.s->entered);
  wait_logged(d.s, MARKER);
  for (int i = 0; i < 20; ++i) {
    wait_logged(d.s, 100 + i);
    cr_assert_gt(log_pos(d.s, 100 + i), log_pos(d.s, 1), "reader %d ran before the write", i);
  }
  cr_assert_eq(log_pos(d.s, WRITER), -1, "the writer ran while the gate still read X");
  atomic_store(&d.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  int wpos = log_pos(d.s, WRITER);
  for (int i = 0; i < 20; ++i) cr_assert_gt(wpos, log_pos(d.s, 100 + i));
  lw_handle_release(run);
  destroy_and_check();
}

Test(dag, a_buffer_only_read_inside_a_scope_still_orders_a_later_writer, .timeout = 60) {
  make_worker(2, 0);
  dag_t d = new_dag();
  void *X = lw_worker_alloc(w, 64), *T = lw_worker_alloc(w, 64);
  // Inside the scope the gate reads X and writes the temporary T; the scope forgets T only.
  spec_t specs[] = {
      {K_SCOPE_BEGIN, 0, 0, NULL, 0},
      {K_GATE, 0, 0, X, LW_TAG_INPUT},
      {K_RECORD, 1, 0, T, LW_TAG_OUTPUT},
      {K_SCOPE_END, 0, 0, NULL, 0},
      {K_RECORD, 5, 1, T, LW_TAG_OUTPUT},  // T was forgotten: no wait for 1
      {K_RECORD, WRITER, 1, X, LW_TAG_OUTPUT},
      {K_RECORD, MARKER, 1, NULL, 0},
  };
  d.specs = specs;
  d.n = 7;
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &d, &run));
  lw_test_wait_nonzero(&d.s->entered);
  wait_logged(d.s, MARKER);
  cr_assert_geq(log_pos(d.s, 5), 0, "a buffer first written inside the scope was remembered");
  cr_assert_eq(log_pos(d.s, WRITER), -1, "the writer of X ran while the gate still read X");
  atomic_store(&d.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  cr_assert_gt(log_pos(d.s, WRITER), log_pos(d.s, MARKER));
  lw_handle_release(run);
  destroy_and_check();
}

typedef struct group_job {
  dag_t d;
  void *X;
} group_job_t;

static lw_status_t group_writes_orch(lw_orch_t *o, void *user) {
  group_job_t *j = user;
  lw_args_t a[2];
  for (int i = 0; i < 2; ++i) {
    lw_args_init(&a[i]);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a[i], j->d.s->log, sizeof(j->d.s->log), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a[i], j->X, 64, LW_TAG_OUTPUT));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a[i], (uint64_t)(10 + i)));
  }
  const lw_args_t *args[2] = {&a[0], &a[1]};
  int32_t chips[2] = {0, 1};
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level_group(o, j->d.rec, args, chips, 2));
  spec_t reader = {K_RECORD, 20, 0, j->X, LW_TAG_INPUT};
  return submit_spec(o, &j->d, &reader);
}

Test(dag, group_members_writing_one_buffer_launch_together_and_readers_follow_both,
     .timeout = 60) {
  make_worker(2, 0);
  group_job_t j = {new_dag(), lw_worker_alloc(w, 64)};
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, group_writes_orch, &j, &rep));
  cr_assert_eq(rep.n_completed, 3);
  int g0 = log_pos(j.d.s, 10), g1 = log_pos(j.d.s, 11), r = log_pos(j.d.s, 20);
  cr_assert(g0 >= 0 && g1 >= 0 && r > g0 && r > g1, "members at %d, %d, reader at %d", g0, g1, r);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// An orch function that returns an error after submitting tasks

typedef struct failing_orch_job {
  dag_t d;
  void *X;
} failing_orch_job_t;

// Waits until the parent has retired n completed tasks of this run (it counted them).
static void wait_completed(lw_orch_t *o, uint32_t n) {
  for (;;) {
    // The DAG changes only in a pass of its owner, which holds the token (parent/sched.h).
    lw__sched_pass_lock(&w->sched);
    uint32_t done = o->run->n_completed;
    lw__sched_pass_unlock(&w->sched);
    if (done >= n) return;
    lw_test_sleep_us(100);
  }
}

static lw_status_t failing_orch(lw_orch_t *o, void *user) {
  failing_orch_job_t *j = user;
  dag_t *d = &j->d;
  // 1 finishes OK before the orch function returns: it keeps its outcome.
  spec_t done = {K_RECORD, 1, 1, NULL, 0};
  LW_RETURN_IF_ERROR(submit_spec(o, d, &done));
  wait_completed(o, 1);
  // The gate runs on chip 0 and writes X; 20..22 are posted behind it on chip 0 (the chip has
  // four task frames), 23..24 wait in the parent's queue for a frame.
  spec_t gate = {K_GATE, 0, 0, j->X, LW_TAG_OUTPUT};
  LW_RETURN_IF_ERROR(submit_spec(o, d, &gate));
  lw_test_wait_nonzero(&d->s->entered);
  for (int i = 0; i < 5; ++i) {
    spec_t queued = {K_RECORD, 20 + i, 0, NULL, 0};
    LW_RETURN_IF_ERROR(submit_spec(o, d, &queued));
  }
  // 30 reads X: it waits for the gate.
  spec_t dependent = {K_RECORD, 30, 1, j->X, LW_TAG_INPUT};
  LW_RETURN_IF_ERROR(submit_spec(o, d, &dependent));
  // The latch runs on chip 1 and ignores its cancel word.
  spec_t latch = {K_LATCH, 0, 1, NULL, 0};
  LW_RETURN_IF_ERROR(submit_spec(o, d, &latch));
  lw_test_wait_nonzero(&d->s->latch_entered);
  return LW_FAILED_PRECONDITION;
}

static bool frame_cancel_requested(uint32_t chip) {
  for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) {
    if (atomic_load(&w->eps[chip].mb->task[f].cancel_dispatch)) return true;
  }
  return false;
}

Test(dag, orch_error_after_submits_fails_the_run_and_stops_every_unfinished_task,
     .timeout = 120) {
  // A long grace: the latch ignores its cancel word until the test opens it, and its child
  // must not be killed for that meanwhile.
  make_grace_worker(2, 60ll * 1000 * 1000 * 1000);
  failing_orch_job_t j = {new_dag(), lw_worker_alloc(w, 64)};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, failing_orch, &j, &run));
  // The run takes the orch function's error and cancels the latch in its frame; only then
  // does the latch return 0.
  while (!frame_cancel_requested(1)) lw_test_sleep_us(100);
  atomic_store(&j.d.s->latch, 1);
  // The gate is never opened: the run ends only because its in-flight tasks are cancelled.
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_FAILED_PRECONDITION);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.status, LW_FAILED_PRECONDITION);
  cr_assert(strstr(rep.error.message, "orch function returned"), "message: %s",
            rep.error.message);
  cr_assert_eq(rep.n_tasks, 9);
  cr_assert_eq(rep.n_completed, 1,
               "only the task that finished before the orch function returned completes; the "
               "latch returned 0 after the stop and must count failed");
  cr_assert_eq(rep.n_failed, 8);
  cr_assert_eq(log_count(j.d.s), 1, "a task of the failed run ran after the orch error");
  cr_assert_eq(log_pos(j.d.s, 1), 0);
  lw_handle_release(run);
  // The worker is still usable.
  spec_t ok = {K_RECORD, 2, 0, j.X, LW_TAG_OUTPUT};
  j.d.specs = &ok;
  j.d.n = 1;
  LW_ASSERT_OK(lw_worker_run(w, dag_orch, &j.d, NULL));
  cr_assert_eq(log_pos(j.d.s, 2), 1);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Run handles finish in submission order

typedef struct release_thread {
  shared_state_t *s;
  _Atomic int *sync_returned;
  int seen;  // what the thread saw of sync_returned just before it opened the gate
} release_thread_t;

static void *release_after_sync_task(void *arg) {
  release_thread_t *r = arg;
  // The sync run's task finished; give its lw_worker_run every chance to (wrongly) return.
  wait_logged(r->s, 7);
  lw_test_sleep_us(50 * 1000);
  r->seen = atomic_load(r->sync_returned);
  atomic_store(&r->s->gate, 1);
  return NULL;
}

Test(dag, sync_run_returns_only_after_an_earlier_async_run_finished, .timeout = 60) {
  make_worker(2, 0);
  dag_t held = new_dag();
  spec_t gate = {K_GATE, 0, 0, NULL, 0};
  held.specs = &gate;
  held.n = 1;
  lw_handle_t *a = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &held, &a));
  lw_test_wait_nonzero(&held.s->entered);
  _Atomic int sync_returned = 0;
  release_thread_t r = {held.s, &sync_returned, -1};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, release_after_sync_task, &r), 0);
  dag_t quick = held;
  spec_t rec = {K_RECORD, 7, 1, NULL, 0};
  quick.specs = &rec;
  quick.n = 1;
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, dag_orch, &quick, &rep));
  atomic_store(&sync_returned, 1);
  cr_assert(lw_handle_done(a), "lw_worker_run returned before an earlier run's handle finished");
  pthread_join(t, NULL);
  cr_assert_eq(r.seen, 0, "lw_worker_run returned while the earlier run was still held");
  cr_assert_eq(rep.n_completed, 1);
  LW_ASSERT_OK(lw_handle_wait(a, 0));
  lw_handle_release(a);
  destroy_and_check();
}

Test(dag, async_run_handles_finish_in_submission_order, .timeout = 60) {
  make_worker(2, 0);
  dag_t held = new_dag();
  spec_t gate = {K_GATE, 0, 0, NULL, 0};
  held.specs = &gate;
  held.n = 1;
  dag_t quick = held;
  spec_t rec = {K_RECORD, 7, 1, NULL, 0};
  quick.specs = &rec;
  quick.n = 1;
  lw_handle_t *a = NULL, *b = NULL, *c = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &held, &a));
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &quick, &b));
  wait_logged(held.s, 7);  // b's only task finished
  cr_assert_not(lw_handle_done(b), "a later run's handle finished before an earlier one's");
  atomic_store(&held.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(b, LW_WAIT_FOREVER));
  cr_assert(lw_handle_done(a));
  // A run submitted after both finished is not held by anything.
  LW_ASSERT_OK(lw_worker_run_async(w, dag_orch, &quick, &c));
  LW_ASSERT_OK(lw_handle_wait(c, LW_WAIT_FOREVER));
  lw_handle_release(a);
  lw_handle_release(b);
  lw_handle_release(c);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// A long chain: poisoning follows the edges without recursing once per task, so a chain far
// longer than a thread's stack allows finishes whole when its head fails.

#define LONG_CHAIN 40000

typedef struct chain_job {
  lw_callable_handle_t gate;
  shared_state_t *s;
  void *x;
  _Atomic uint32_t submitted;  // every link was accepted
} chain_job_t;

static lw_status_t chain_orch(lw_orch_t *o, void *user) {
  chain_job_t *j = user;
  for (uint32_t i = 0; i < LONG_CHAIN; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, sizeof(j->s->gate), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, sizeof(j->s->entered), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_INOUT));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  }
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

Test(dag, a_chain_longer_than_a_stack_is_poisoned_whole_when_its_head_is_cancelled,
     .timeout = 120) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.arena_bytes = 16ull << 20;
  cfg.task_ring = LONG_CHAIN + 16;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
  chain_job_t j = {wreg("gate"), new_shared(), lw_worker_alloc(w, 64), 0};
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, chain_orch, &j, &h));
  lw_test_wait_nonzero(&j.submitted);  // the head runs (gate closed); every link waits for it
  LW_ASSERT_OK(lw_handle_cancel(h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(h, &rep));
  cr_assert_eq(rep.n_tasks, LONG_CHAIN);
  cr_assert_eq(rep.n_failed, LONG_CHAIN, "every link ends failed (%u)", rep.n_failed);
  lw_handle_release(h);
  destroy_and_check();
}
