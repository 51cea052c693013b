// tests/parent/test_wait_elision.c — wait elision at L3 (parent/dag.h, DESIGN 4.5): a task whose
// producers all sit on the same chip is posted behind them before they finish, runs after
// them in order, and never runs when one of them failed (it ends POISONED). A chip holds
// LW_MB_TASK_FRAMES such posts; a task that names no chip is posted only to a chip holding
// fewer than 16 (parent/sched.c).
#include "faults/fault_util.h"
#include "lanework/stats.h"

static fx_t f;

typedef struct elide_job {
  lw_callable_handle_t gate, rec;
  shared_t *s;
  int64_t *log;  // the record kernel's log
  void *buf;     // the buffer every task reads and writes (INOUT): a chain
  int n_records;
  _Atomic uint32_t submitted;  // gated_chain submitted every task
} elide_job_t;

static lw_status_t add_record(lw_orch_t *o, const elide_job_t *j, uint64_t value) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 512 * sizeof(int64_t), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->buf, 64, LW_TAG_INOUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, value));
  return lw_orch_submit_next_level(o, j->rec, &a, NULL, 0);
}

// The gate (held by the test) then records 1..n, every task reading and writing buf.
static lw_status_t gated_chain(lw_orch_t *o, void *user) {
  elide_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->buf, 64, LW_TAG_INOUT));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  for (int i = 1; i <= j->n_records; ++i) LW_RETURN_IF_ERROR(add_record(o, j, (uint64_t)i));
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

static uint32_t chip0_queue_depth(void) { return fx_stats(&f).child[0].queue_depth; }

// Waits (bounded: the test fails rather than hang) until chip 0 holds want posted tasks.
static void wait_queue_depth(uint32_t want) {
  for (int i = 0; i < 100000 && chip0_queue_depth() < want; ++i) usleep(100);
  cr_assert_geq(chip0_queue_depth(), want,
                "the tasks behind the running gate were not posted to chip 0 while it ran");
}

static elide_job_t make_job(int n_records) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  elide_job_t j = {fx_reg(&f, "gate"), fx_reg(&f, "record"), fx_shared(&f), NULL, NULL,
                   n_records};
  j.log = lw_worker_alloc(f.w, 512 * sizeof(int64_t));
  j.buf = lw_worker_alloc(f.w, 64);
  cr_assert(j.log && j.buf);
  memset(j.log, 0, 512 * sizeof(int64_t));
  return j;
}


Test(wait_elision, tasks_behind_a_running_producer_on_its_chip_are_posted_and_run_in_order,
     .timeout = 60) {
  elide_job_t j = make_job(3);
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gated_chain, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  // The gate holds chip 0's run lane; its dependents are posted behind it (a frame each, up
  // to the mailbox's frames: the gate and three records).
  wait_queue_depth(4);
  atomic_store(&j.s->gate, 1);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_OK);
  lw_handle_release(run);
  cr_assert_eq(j.log[0], 3);
  for (int i = 1; i <= 3; ++i) cr_assert_eq(j.log[i], i, "record %d ran out of order", i);
  fx_destroy(&f);
}

Test(wait_elision, a_task_posted_behind_a_producer_that_fails_never_runs_and_ends_poisoned,
     .timeout = 60) {
  elide_job_t j = make_job(2);
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gated_chain, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  wait_queue_depth(3);
  atomic_store(&j.s->gate, 3);  // the gate's kernel returns 2: task 1 fails
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_TASK_FAILED);
  cr_assert_eq(j.log[0], 0, "a record ran after the task it depends on failed");
  lw_task_report_t r[3];
  size_t n = 0;
  LW_ASSERT_OK(lw_handle_run_tasks(run, r, 3, &n));
  cr_assert_eq(n, 3);
  cr_assert_eq(r[0].status, LW_TASK_FAILED);
  for (int i = 1; i < 3; ++i) {
    cr_assert_eq(r[i].status, LW_POISONED, "task %d: %s", i + 1, lw_status_name(r[i].status));
    cr_assert_eq(r[i].worker_id, 0, "task %d was posted to chip 0 behind task 1", i + 1);
    cr_assert_eq(r[i].kernel_ns, 0, "task %d never started", i + 1);
  }
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.n_failed, 3);
  cr_assert_eq(rep.error.code, LW_TASK_FAILED, "the first error is the producer's: %s",
               rep.error.message);
  lw_handle_release(run);
  // Each task counted once: the failed one on chip 0, the two others as poisoned.
  lw_worker_stats_t s = fx_stats(&f);
  cr_assert_eq(s.child[0].tasks_failed, 1u);
  cr_assert_eq(s.tasks_poisoned, 2u);
  cr_assert_eq(s.child[0].queue_depth, 0u);
  // The next run is not harmed: the chip runs a chain of it.
  memset(j.log, 0, 512 * sizeof(int64_t));
  atomic_store(&j.s->gate, 1);
  atomic_store(&j.s->entered, 0);
  LW_ASSERT_OK(lw_worker_run(f.w, gated_chain, &j, NULL));
  cr_assert_eq(j.log[0], 2);
  fx_destroy(&f);
}

// A long chain through the mailbox's frames: every record in order, none lost or repeated.
Test(wait_elision, a_long_chain_on_one_chip_runs_every_task_once_in_order, .timeout = 120) {
  elide_job_t j = make_job(400);
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_worker_run(f.w, gated_chain, &j, NULL));
  cr_assert_eq(j.log[0], 400);
  for (int i = 1; i <= 400; ++i) cr_assert_eq(j.log[i], i, "record %d ran out of order", i);
  fx_destroy(&f);
}

// Every frame of the chip fills behind the held gate (far more than the 16 a task with no chip
// named may wait behind); once it opens, every record runs once, in order.
Test(wait_elision, every_frame_of_a_chip_fills_behind_a_running_producer_and_drains_in_order,
     .timeout = 120) {
  enum { N = LW_MB_TASK_FRAMES + 20 };
  _Static_assert(N < 512, "the record log holds 511 values");
  elide_job_t j = make_job(N);
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gated_chain, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  wait_queue_depth(LW_MB_TASK_FRAMES);
  cr_assert_eq(chip0_queue_depth(), LW_MB_TASK_FRAMES, "a chip holds at most its frames");
  cr_assert_eq(j.log[0], 0, "a record ran before the gate opened");
  atomic_store(&j.s->gate, 1);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_OK);
  lw_handle_release(run);
  cr_assert_eq(j.log[0], N);
  for (int i = 1; i <= N; ++i) cr_assert_eq(j.log[i], i, "record %d ran out of order", i);
  fx_destroy(&f);
}

// Cancelling a run whose tasks fill every frame: the running gate sees its cancel word, and no
// record behind it starts.
Test(wait_elision, cancelling_a_run_that_fills_every_frame_stops_the_kernel_and_runs_no_record,
     .timeout = 120) {
  elide_job_t j = make_job(LW_MB_TASK_FRAMES + 20);
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gated_chain, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  // Every task submitted (the last 20 wait in the parent for a frame), every frame posted.
  lw_test_wait_nonzero(&j.submitted);
  wait_queue_depth(LW_MB_TASK_FRAMES);
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED, "%s",
               lw_handle_error(run) ? lw_handle_error(run)->message : "");
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.n_tasks, LW_MB_TASK_FRAMES + 21);
  cr_assert_eq(rep.n_completed, 0);
  cr_assert_eq(rep.n_failed, rep.n_tasks);
  lw_handle_release(run);
  cr_assert_eq(j.log[0], 0, "a record behind the cancelled gate ran");
  cr_assert_eq(chip0_queue_depth(), 0u);
  // The chip is not harmed: the next run goes through.
  atomic_store(&j.s->gate, 1);
  atomic_store(&j.s->entered, 0);
  j.n_records = 3;
  LW_ASSERT_OK(lw_worker_run(f.w, gated_chain, &j, NULL));
  cr_assert_eq(j.log[0], 3);
  fx_destroy(&f);
}

// The gate on chip 0, then records that name no chip and depend on nothing: they are ready at
// once, but the parent posts them only while the chip holds fewer than 16 tasks.
typedef struct any_job {
  elide_job_t e;
  int n;
  _Atomic uint32_t submitted;
} any_job_t;

static lw_status_t gate_then_unpinned(lw_orch_t *o, void *user) {
  any_job_t *j = user;
  LW_RETURN_IF_ERROR(lw_test_submit_gate(o, j->e.gate, &j->e.s->gate, &j->e.s->entered, NULL, 0));
  for (int i = 1; i <= j->n; ++i) {
    lw_args_t r;
    lw_args_init(&r);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&r, j->e.log, 512 * sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&r, (uint64_t)i));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->e.rec, &r, NULL, LW_ANY_CHIP));
  }
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

Test(wait_elision, tasks_that_name_no_chip_wait_in_the_parent_behind_16_posted_tasks,
     .timeout = 120) {
  any_job_t j = {make_job(0), 40, 0};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gate_then_unpinned, &j, &run));
  lw_test_wait_nonzero(&j.e.s->entered);
  lw_test_wait_nonzero(&j.submitted);
  wait_queue_depth(16);
  atomic_store(&j.e.s->gate, 1);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_OK);
  lw_handle_release(run);
  cr_assert_eq(j.e.log[0], 40);
  lw_worker_stats_t s = fx_stats(&f);
  // Every submit ran a pass that could have posted more; none posted past the 16th.
  cr_assert_eq(s.child[0].queue_depth_max, 16u, "chip 0 held %u posted tasks at most",
               s.child[0].queue_depth_max);
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------
// A failed producer's note in its chip child outlives the failures of other runs that end
// between it and its consumer (child/chip_child.c, FAILED_RUNS).

enum { OTHER_RUNS = 24 };  // more than the 16 notes the child kept before 128 frames

typedef struct late_job {
  lw_callable_handle_t gate, rec;
  // [0] P1's gate, [1] P1 entered, [2] Z's gate, [3] Z entered, [4] the failing gate (3: its
  // kernel returns 2 at once), [5] its entered
  _Atomic uint32_t *words;
  int64_t *log;
  void *x, *z, *w;
} late_job_t;

static lw_status_t add_gate(lw_orch_t *o, const late_job_t *j, int word, void *out,
                            int32_t chip) {
  return lw_test_submit_gate(o, j->gate, &j->words[word], &j->words[word + 1], out, chip);
}

static lw_status_t add_rec(lw_orch_t *o, const late_job_t *j, void *in1, void *in2, void *out,
                           uint64_t value) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 512 * sizeof(int64_t), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, in1, 64, LW_TAG_INPUT));
  if (in2) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, in2, 64, LW_TAG_INPUT));
  if (out) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, out, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, value));
  return lw_orch_submit_next_level(o, j->rec, &a, NULL, 0);
}

// P1 (chip 0, held) writes x. Z (chip 1, held) writes z. P2 (chip 0) reads z and writes w: it
// waits in the parent for Z. C (chip 0) reads x and w: once P2 is posted, C's producers are
// all posted to chip 0, and C is posted behind P2, while P1 still runs, after whatever other
// runs posted to chip 0 meanwhile.
static lw_status_t producer_and_late_consumer(lw_orch_t *o, void *user) {
  late_job_t *j = user;
  LW_RETURN_IF_ERROR(add_gate(o, j, 0, j->x, 0));
  LW_RETURN_IF_ERROR(add_gate(o, j, 2, j->z, 1));
  LW_RETURN_IF_ERROR(add_rec(o, j, j->z, NULL, j->w, 66));
  return add_rec(o, j, j->x, j->w, NULL, 77);
}

// One task on chip 0 that fails as soon as it starts (a gate opened with 3).
static lw_status_t one_failing_task(lw_orch_t *o, void *user) {
  return add_gate(o, user, 4, NULL, 0);
}

Test(wait_elision, a_consumer_behind_a_failed_producer_never_runs_after_other_runs_failed_between,
     .timeout = 120) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  late_job_t j = {fx_reg(&f, "gate"), fx_reg(&f, "record"), NULL, NULL, NULL, NULL, NULL};
  j.words = lw_worker_alloc(f.w, 6 * sizeof(uint32_t));
  j.log = lw_worker_alloc(f.w, 512 * sizeof(int64_t));
  j.x = lw_worker_alloc(f.w, 64);
  j.z = lw_worker_alloc(f.w, 64);
  j.w = lw_worker_alloc(f.w, 64);
  cr_assert(j.words && j.log && j.x && j.z && j.w);
  memset((void *)j.words, 0, 6 * sizeof(uint32_t));
  memset(j.log, 0, 512 * sizeof(int64_t));
  atomic_store(&j.words[4], 3);
  lw_handle_t *a = NULL, *other[OTHER_RUNS];
  LW_ASSERT_OK(lw_worker_run_async(f.w, producer_and_late_consumer, &j, &a));
  lw_test_wait_nonzero(&j.words[1]);
  lw_test_wait_nonzero(&j.words[3]);
  for (int i = 0; i < OTHER_RUNS; ++i) {
    LW_ASSERT_OK(lw_worker_run_async(f.w, one_failing_task, &j, &other[i]));
  }
  wait_queue_depth(1 + OTHER_RUNS);  // P1, then every other run's task behind it
  atomic_store(&j.words[2], 1);      // Z ends: P2, then C, are posted behind them
  wait_queue_depth(3 + OTHER_RUNS);
  atomic_store(&j.words[0], 3);      // P1 fails; every other run's task fails; then P2 and C
  cr_assert_eq(lw_handle_wait(a, LW_WAIT_FOREVER), LW_TASK_FAILED);
  for (int i = 0; i < OTHER_RUNS; ++i) {
    cr_assert_eq(lw_handle_wait(other[i], LW_WAIT_FOREVER), LW_TASK_FAILED, "run %d", i);
    lw_handle_release(other[i]);
  }
  lw_task_report_t r[4];
  size_t n = 0;
  LW_ASSERT_OK(lw_handle_run_tasks(a, r, 4, &n));
  lw_handle_release(a);
  cr_assert_eq(n, 4);
  cr_assert_eq(r[3].status, LW_POISONED, "C: %s", lw_status_name(r[3].status));
  cr_assert_eq(r[3].worker_id, 0, "C was posted behind P1");
  for (int64_t i = 0; i < j.log[0] && i < 511; ++i) {
    cr_assert_neq(j.log[1 + i], 77, "C ran after its producer failed");
  }
  cr_assert_eq(r[3].kernel_ns, 0, "C started after its producer failed");
  fx_destroy(&f);
}

// A fan-out on two chips: the producer (a gate the test holds) runs on one chip while the
// other is free, so its readers, which name no chip, are not elided behind it; once it ends
// they spread over both chips. Placement by events: which chip ran each reader.
typedef struct fanout_job {
  lw_callable_handle_t gate, rec;
  shared_t *s;
  int64_t *log;
  void *x;
} fanout_job_t;

enum { kFanoutReaders = 8 };

static lw_status_t gate_then_readers(lw_orch_t *o, void *user) {
  fanout_job_t *j = user;
  LW_RETURN_IF_ERROR(lw_test_submit_gate(o, j->gate, &j->s->gate, &j->s->entered, j->x,
                                         LW_ANY_CHIP));
  for (int i = 1; i <= kFanoutReaders; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 512 * sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_INPUT));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)i));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->rec, &a, NULL, LW_ANY_CHIP));
  }
  return LW_OK;
}

Test(wait_elision, readers_of_one_producer_that_name_no_chip_spread_over_the_free_chips,
     .timeout = 120) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  fanout_job_t j = {fx_reg(&f, "gate"), fx_reg(&f, "record"), fx_shared(&f), NULL, NULL};
  j.log = lw_worker_alloc(f.w, 512 * sizeof(int64_t));
  j.x = lw_worker_alloc(f.w, 64);
  cr_assert(j.log && j.x);
  memset(j.log, 0, 512 * sizeof(int64_t));
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gate_then_readers, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  atomic_store(&j.s->gate, 1);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_OK, "%s",
               lw_handle_error(run)->message);
  lw_task_report_t r[1 + kFanoutReaders];
  size_t n = 0;
  LW_ASSERT_OK(lw_handle_run_tasks(run, r, 1 + kFanoutReaders, &n));
  lw_handle_release(run);
  cr_assert_eq(n, 1 + kFanoutReaders);
  uint32_t per_chip[2] = {0, 0};
  for (size_t i = 1; i < n; ++i) {
    cr_assert(r[i].worker_id == 0 || r[i].worker_id == 1, "reader %zu ran on %d", i,
              r[i].worker_id);
    per_chip[r[i].worker_id]++;
  }
  cr_assert_gt(per_chip[0], 0, "no reader ran on chip 0 (chip 0 %u, chip 1 %u)", per_chip[0],
               per_chip[1]);
  cr_assert_gt(per_chip[1], 0, "no reader ran on chip 1 (chip 0 %u, chip 1 %u)", per_chip[0],
               per_chip[1]);
  cr_assert_eq(j.log[0], kFanoutReaders, "every reader ran once");
  fx_destroy(&f);
}
