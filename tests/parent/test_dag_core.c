// tests/parent/test_dag_core.c — the DAG (parent/dag.h) alone: no worker, no processes.
// The test thread is the DAG's owner and plays the scheduler: it posts commands (after
// reserving their slots), applies them (lw__dag_step), sweeps stopped runs, pops ready tasks
// and groups, launches them and finishes them with a status. The tests then check task
// states, the order of the ready queues, the runs' counters and first errors, which runs
// settled, the pins given back through hooks.unpin and the doorbell's rings.
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lanes/error.h"
#include "parent/dag.h"
#include "parent/task_reports.h"

// ---------------------------------------------------------------------------------------------
// Hooks: pins and rings are counted, callable names are "k<wc>".

#define N_WC 16

static _Atomic uint32_t unpins[N_WC];
static _Atomic uint32_t name_calls[N_WC];
static _Atomic uint32_t rings;
// A doorbell the owner thread of the two-thread test sleeps on.
static pthread_mutex_t bell_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bell_cv = PTHREAD_COND_INITIALIZER;
static uint64_t bell;

// Every task of wc carries wc_id = wc_id_of(wc), so a hook called with a mismatched pair fails.
static uint64_t wc_id_of(uint32_t wc) { return 1000u + wc; }

static void hook_unpin(void *ctx, uint32_t wc, uint64_t wc_id) {
  (void)ctx;
  cr_assert_lt(wc, N_WC, "unpin of callable slot %u, never pinned", wc);
  cr_assert_eq(wc_id, wc_id_of(wc), "unpin of slot %u with id %llu", wc,
               (unsigned long long)wc_id);
  atomic_fetch_add(&unpins[wc], 1);
}

static const char *hook_name(void *ctx, uint32_t wc, uint64_t wc_id) {
  (void)ctx;
  static char name[32];
  cr_assert_lt(wc, N_WC);
  cr_assert_eq(wc_id, wc_id_of(wc));
  atomic_fetch_add(&name_calls[wc], 1);
  snprintf(name, sizeof(name), "k%u", wc);
  return name;
}

static void hook_ring(void *ctx, int64_t now_ns) {
  (void)now_ns;
  (void)ctx;
  atomic_fetch_add(&rings, 1);
  pthread_mutex_lock(&bell_mu);
  bell++;
  pthread_cond_broadcast(&bell_cv);
  pthread_mutex_unlock(&bell_mu);
}

static const lw_dag_hooks_t hooks = {
    .ctx = NULL, .unpin = hook_unpin, .callable_name = hook_name, .ring = hook_ring};

// ---------------------------------------------------------------------------------------------
// The DAG under test, its runs and the runs it settled.

static lw_dag_t d;
static bool d_live;
static lw_run_t *finished;

#define MAX_RUNS 8
static lw_run_t *runs[MAX_RUNS];
static uint32_t n_runs;

// The test owns the runs' memory: their handles never free it.
static void run_destroy(lw_handle_t *h) { (void)h; }
static const lw_handle_ops_t run_ops = {.cancel = NULL, .destroy = run_destroy};

static lw_run_t *run_new(uint64_t run_id) {
  cr_assert_lt(n_runs, MAX_RUNS);
  lw_run_t *run = calloc(1, sizeof(*run));
  cr_assert_not_null(run);
  lw__handle_initialize(&run->handle, LW_HANDLE_WORKER_RUN, &run_ops);
  run->run_id = run_id;
  runs[n_runs++] = run;
  return run;
}

static void make_dag(uint32_t n_tasks, uint32_t n_chips, int64_t submit_timeout_ns) {
  lw_error_t err;
  cr_assert_eq(lw__dag_initialize(&d, n_tasks, n_chips, submit_timeout_ns, &hooks, NULL, &err),
               LW_OK, "%s", err.message);
  d_live = true;
  lw__dag_set_owner(&d, 0);
}

// The tensor map's allocations: the next one fails while fail_next_alloc is set.
static bool fail_next_alloc;

static bool alloc_gate(void *ctx) {
  (void)ctx;
  if (!fail_next_alloc) return true;
  fail_next_alloc = false;
  return false;
}

static void make_gated_dag(uint32_t n_tasks, uint32_t n_chips) {
  fail_next_alloc = false;
  lw_tmap_options_t o = {.alloc_gate = alloc_gate};
  lw_error_t err;
  cr_assert_eq(lw__dag_initialize(&d, n_tasks, n_chips, -1, &hooks, &o, &err), LW_OK, "%s",
               err.message);
  d_live = true;
  lw__dag_set_owner(&d, 0);
}

static void setup(void) {
  for (uint32_t i = 0; i < N_WC; ++i) {
    atomic_store(&unpins[i], 0);
    atomic_store(&name_calls[i], 0);
  }
  atomic_store(&rings, 0);
  bell = 0;
  finished = NULL;
  n_runs = 0;
}

static void check_waiting(void);

static void teardown(void) {
  if (d_live) check_waiting();  // after whatever the test did last
  if (d_live) lw__dag_deinitialize(&d);
  d_live = false;
  for (uint32_t i = 0; i < n_runs; ++i) {
    lw__task_reports_free(runs[i]);
    free(runs[i]);
  }
  n_runs = 0;
}

TestSuite(dag_core, .init = setup, .fini = teardown);

// ---------------------------------------------------------------------------------------------
// Commands

typedef struct acc {
  uintptr_t key;
  lw_tag_t tag;
} acc_t;

enum { X = 0x1000, Y = 0x2000, Z = 0x3000 };

// No buffer at all (the map skips a NULL address).
#define NONE ((acc_t){0, LW_TAG_NO_DEP})

// The submit time every test task carries (its report copies it).
#define SUBMIT_NS 12345

static void fill_desc(lw_dag_task_desc_t *t, lw_mb_task_kind_t kind, int32_t worker, uint32_t wc,
                      uint32_t n, const acc_t *a) {
  cr_assert_leq(n, LW_MAX_TENSORS);
  memset(t, 0, sizeof(*t));  // lw__dag_cmd_new leaves it to the maker
  t->kind = kind;
  t->worker = worker;
  t->wc = wc;
  t->wc_id = wc_id_of(wc);
  t->timeout_ns = -1;
  t->submit_ns = SUBMIT_NS;
  t->n_keys = n;
  for (uint32_t i = 0; i < n; ++i) {
    t->key[i] = a[i].key;
    t->tag[i] = a[i].tag;
  }
}

// Reserves one slot and posts one task of run (not applied until step()).
static void post_task(lw_run_t *run, lw_mb_task_kind_t kind, int32_t worker, uint32_t wc,
                      uint32_t n, const acc_t *a) {
  lw_error_t err;
  cr_assert_eq(lw__dag_reserve(&d, 1, &err), LW_OK, "%s", err.message);
  lw_dag_cmd_t *c = lw__dag_cmd_new(LW_DAG_CMD_SUBMIT, run, 1);
  cr_assert_not_null(c);
  fill_desc(&c->task[0], kind, worker, wc, n, a);
  lw__dag_post(&d, c, 0);
}

#define NACC(...) ((uint32_t)(sizeof((acc_t[]){__VA_ARGS__}) / sizeof(acc_t)))
// A kernel of callable wc on chip, accessing the buffers listed.
#define KERNEL(run, chip, wc, ...) \
  post_task((run), LW_MB_TASK_KERNEL, (chip), (wc), NACC(__VA_ARGS__), (acc_t[]){__VA_ARGS__})
#define SUB(run, wc, ...) \
  post_task((run), LW_MB_TASK_SUB, -1, (wc), NACC(__VA_ARGS__), (acc_t[]){__VA_ARGS__})

static void post_simple(lw_dag_cmd_kind_t kind, lw_run_t *run) {
  lw_dag_cmd_t *c = lw__dag_cmd_new(kind, run, 0);
  cr_assert_not_null(c);
  lw__dag_post(&d, c, 0);
}

// Reserves n slots and posts a group of n kernels (chips 0, 1, 0, ...), one buffer each.
static void post_group(lw_run_t *run, uint32_t n, const uint32_t *wc, const acc_t *acc) {
  lw_error_t err;
  cr_assert_eq(lw__dag_reserve(&d, n, &err), LW_OK, "%s", err.message);
  lw_dag_cmd_t *c = lw__dag_cmd_new(LW_DAG_CMD_GROUP, run, n);
  cr_assert_not_null(c);
  for (uint32_t i = 0; i < n; ++i) {
    fill_desc(&c->task[i], LW_MB_TASK_KERNEL, (int32_t)(i % 2), wc[i], 1, &acc[i]);
  }
  lw__dag_post(&d, c, 0);
}

static void post_orch_done(lw_run_t *run, lw_status_t st, const char *msg) {
  lw_dag_cmd_t *c = lw__dag_cmd_new(LW_DAG_CMD_ORCH_DONE, run, 0);
  cr_assert_not_null(c);
  c->status = st;
  if (st != LW_OK) lw__error_set(&c->error, st, -1, 0, "%s", msg);
  lw__dag_post(&d, c, 0);
}

// The DAG's count of waiting tasks (lw__dag_n_waiting: what lets a submitter's pass leave the
// completions for later, parent/sched.h) is the number of PENDING tasks in its ring.
static void check_waiting(void) {
  uint32_t pending = 0;
  for (uint32_t i = 0; i < d.n_tasks_cap; ++i) pending += d.tasks[i].state == LW_TS_PENDING;
  cr_assert_eq(lw__dag_n_waiting(&d), pending, "the DAG counts %u waiting tasks; %u are PENDING",
               lw__dag_n_waiting(&d), pending);
}

// Every step checks the waiting count after it (the tests' other owner calls: check_waiting).
static void step(void) {
  (void)lw__dag_step(&d, &finished);
  check_waiting();
}

// ---------------------------------------------------------------------------------------------
// Looking at tasks

// The unfinished task task_id of run, or NULL once it retired.
static lw_task_t *task_of(const lw_run_t *run, uint64_t task_id) {
  for (uint32_t i = 0; i < d.n_tasks_cap; ++i) {
    lw_task_t *t = &d.tasks[i];
    if (t->state != LW_TS_FREE && t->run == run && t->task_id == task_id) return t;
  }
  return NULL;
}

static lw_task_state_t state_of(const lw_run_t *run, uint64_t task_id) {
  lw_task_t *t = task_of(run, task_id);
  return t ? t->state : LW_TS_FREE;
}

// The queue holds exactly these tasks of run, in this order (nothing popped).
static void expect_queue(const lw_task_queue_t *q, const lw_run_t *const *who,
                         const uint64_t *ids, uint32_t n) {
  cr_assert_eq(q->n, n, "the queue holds %u tasks, expected %u", q->n, n);
  const lw_task_t *t = q->head;
  for (uint32_t i = 0; i < n; ++i, t = t->next) {
    cr_assert_not_null(t, "the queue ends after %u tasks, expected %u", i, n);
    cr_assert_eq(t->state, LW_TS_READY);
    cr_assert_eq(t->run, who[i], "queue entry %u: a task of run %llu, expected run %llu", i,
                 (unsigned long long)t->run->run_id, (unsigned long long)who[i]->run_id);
    cr_assert_eq(t->task_id, ids[i], "queue entry %u: task %llu, expected task %llu", i,
                 (unsigned long long)t->task_id, (unsigned long long)ids[i]);
  }
  cr_assert_null(t, "the queue holds more than %u tasks", n);
}

// The queue holds these tasks of one run, in order.
#define EXPECT_QUEUE(q, run, ...)                                                          \
  do {                                                                                     \
    const uint64_t ids_[] = {__VA_ARGS__};                                                 \
    const lw_run_t *who_[sizeof(ids_) / sizeof(ids_[0])];                                  \
    for (size_t i_ = 0; i_ < sizeof(ids_) / sizeof(ids_[0]); ++i_) who_[i_] = (run);       \
    expect_queue((q), who_, ids_, (uint32_t)(sizeof(ids_) / sizeof(ids_[0])));             \
  } while (0)
#define EXPECT_EMPTY(q) expect_queue((q), NULL, NULL, 0)

// Pops the head of q, which must be task task_id of run, and launches it.
static lw_task_t *pop_launch(lw_task_queue_t *q, const lw_run_t *run, uint64_t task_id) {
  lw_task_t *t = lw__dag_queue_pop(q);
  cr_assert_not_null(t, "expected task %llu at the head of the queue, it is empty",
                     (unsigned long long)task_id);
  cr_assert_eq(t->run, run);
  cr_assert_eq(t->task_id, task_id, "popped task %llu, expected task %llu",
               (unsigned long long)t->task_id, (unsigned long long)task_id);
  cr_assert_eq(t->state, LW_TS_READY);
  lw__dag_task_launch(&d, t);
  cr_assert_eq(t->state, LW_TS_RUNNING);
  return t;
}

static void finish_ok(lw_task_t *t) { lw__task_finish(&d, t, LW_OK, NULL, &finished); }

static void finish_failed(lw_task_t *t, const char *msg) {
  lw_error_t err;
  lw__error_set(&err, LW_TASK_FAILED, 0, t->task_id, "%s", msg);
  lw__task_finish(&d, t, LW_TASK_FAILED, &err, &finished);
}

// The runs settled since the last call, in settling order; clears the list.
static uint32_t take_finished(lw_run_t **out, uint32_t cap) {
  uint32_t n = 0;
  for (lw_run_t *r = finished; r; r = r->next) n++;
  cr_assert_leq(n, cap);
  uint32_t i = n;
  for (lw_run_t *r = finished; r; r = r->next) out[--i] = r;  // the list is newest first
  finished = NULL;
  return n;
}

static void expect_settled_once(const lw_run_t *run) {
  lw_run_t *got[MAX_RUNS];
  uint32_t n = take_finished(got, MAX_RUNS);
  cr_assert_eq(n, 1, "%u runs settled, expected run %llu alone", n,
               (unsigned long long)run->run_id);
  cr_assert_eq(got[0], run);
  cr_assert(run->settled_by_dag);
}

static void expect_none_settled(void) {
  cr_assert_null(finished, "run %llu settled too early",
                 finished ? (unsigned long long)finished->run_id : 0ull);
}

static void expect_counts(const lw_run_t *run, uint32_t n_tasks, uint32_t n_terminal,
                          uint32_t n_completed, uint32_t n_failed) {
  cr_assert_eq(run->n_tasks, n_tasks, "run %llu: n_tasks %u, expected %u",
               (unsigned long long)run->run_id, run->n_tasks, n_tasks);
  cr_assert_eq(run->n_terminal, n_terminal, "run %llu: n_terminal %u, expected %u",
               (unsigned long long)run->run_id, run->n_terminal, n_terminal);
  cr_assert_eq(run->n_completed, n_completed, "run %llu: n_completed %u, expected %u",
               (unsigned long long)run->run_id, run->n_completed, n_completed);
  cr_assert_eq(run->n_failed, n_failed, "run %llu: n_failed %u, expected %u",
               (unsigned long long)run->run_id, run->n_failed, n_failed);
}

static void expect_unpins(uint32_t wc, uint32_t n) {
  cr_assert_eq(atomic_load(&unpins[wc]), n, "callable slot %u: %u pins given back, expected %u",
               wc, atomic_load(&unpins[wc]), n);
}

static void expect_has(const char *haystack, const char *needle) {
  cr_assert_not_null(strstr(haystack, needle), "\"%s\" does not contain \"%s\"", haystack,
                     needle);
}

// ---------------------------------------------------------------------------------------------
// Dependencies

Test(dag_core, a_diamond_releases_each_task_when_its_producers_completed_and_settles_last) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});                            // A
  KERNEL(r, 0, 2, {X, LW_TAG_INPUT}, {Y, LW_TAG_OUTPUT});         // B
  KERNEL(r, 0, 3, {X, LW_TAG_INPUT}, {Z, LW_TAG_OUTPUT});         // C
  KERNEL(r, 0, 4, {Y, LW_TAG_INPUT}, {Z, LW_TAG_INPUT});          // D
  cr_assert_eq(atomic_load(&rings), 4, "every post rings the doorbell");
  cr_assert(lw__dag_step(&d, &finished));
  cr_assert_not(lw__dag_step(&d, &finished), "the inbox is empty after a step");

  EXPECT_QUEUE(&d.chip_q[0], r, 1);
  cr_assert_eq(state_of(r, 2), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 4), LW_TS_PENDING);
  expect_counts(r, 4, 0, 0, 0);

  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  cr_assert_eq(state_of(r, 1), LW_TS_FREE, "a finished task retires");
  EXPECT_QUEUE(&d.chip_q[0], r, 2, 3);
  cr_assert_eq(state_of(r, 4), LW_TS_PENDING);

  lw_task_t *b = pop_launch(&d.chip_q[0], r, 2);
  lw_task_t *c = pop_launch(&d.chip_q[0], r, 3);
  finish_ok(b);
  cr_assert_eq(state_of(r, 4), LW_TS_PENDING, "D still waits for C");
  EXPECT_EMPTY(&d.chip_q[0]);
  finish_ok(c);
  EXPECT_QUEUE(&d.chip_q[0], r, 4);

  lw_task_t *dd = pop_launch(&d.chip_q[0], r, 4);
  post_orch_done(r, LW_OK, NULL);
  step();
  cr_assert(r->orch_done);
  expect_none_settled();  // D is still running
  finish_ok(dd);
  expect_settled_once(r);
  expect_counts(r, 4, 4, 4, 0);
  cr_assert_not(r->failed);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  // Launched kernels took their pins to their chip: none comes back through the DAG.
  for (uint32_t wc = 1; wc <= 4; ++wc) expect_unpins(wc, 0);
}

Test(dag_core, a_run_whose_tasks_all_ended_settles_when_its_orch_done_is_applied) {
  make_dag(4, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  step();
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  expect_none_settled();  // the orch function may still submit
  post_orch_done(r, LW_OK, NULL);
  expect_none_settled();  // posted, not applied
  step();
  expect_settled_once(r);
  expect_counts(r, 1, 1, 1, 0);
}

Test(dag_core, a_run_without_tasks_settles_when_its_orch_done_is_applied) {
  make_dag(4, 1, -1);
  lw_run_t *r = run_new(1);
  post_orch_done(r, LW_OK, NULL);
  step();
  expect_settled_once(r);
  expect_counts(r, 0, 0, 0, 0);
  cr_assert_not(r->failed);
}

Test(dag_core, a_writer_waits_for_the_reader_before_it_and_writers_keep_their_order) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_INPUT});   // 1: R reads X (no writer yet)
  KERNEL(r, 1, 2, {X, LW_TAG_OUTPUT});  // 2: W writes X: write-after-read
  KERNEL(r, 0, 3, {Y, LW_TAG_OUTPUT});  // 3: W1 writes Y
  KERNEL(r, 1, 4, {Y, LW_TAG_OUTPUT});  // 4: W2 writes Y: write-after-write
  KERNEL(r, 1, 5, {Y, LW_TAG_INOUT});   // 5: W3 reads and writes Y after W2
  step();
  EXPECT_QUEUE(&d.chip_q[0], r, 1, 3);
  EXPECT_EMPTY(&d.chip_q[1]);
  cr_assert_eq(state_of(r, 2), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 4), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 5), LW_TS_PENDING);

  finish_ok(pop_launch(&d.chip_q[0], r, 1));  // R ends: W may write
  EXPECT_QUEUE(&d.chip_q[1], r, 2);
  finish_ok(pop_launch(&d.chip_q[1], r, 2));
  EXPECT_EMPTY(&d.chip_q[1]);

  finish_ok(pop_launch(&d.chip_q[0], r, 3));  // W1 ends: W2, not W3
  EXPECT_QUEUE(&d.chip_q[1], r, 4);
  cr_assert_eq(state_of(r, 5), LW_TS_PENDING);
  finish_ok(pop_launch(&d.chip_q[1], r, 4));
  EXPECT_QUEUE(&d.chip_q[1], r, 5);
  finish_ok(pop_launch(&d.chip_q[1], r, 5));
  post_orch_done(r, LW_OK, NULL);
  step();
  expect_settled_once(r);
  expect_counts(r, 5, 5, 5, 0);
}

Test(dag_core, tasks_go_to_the_queue_of_their_chip_any_chip_or_subs_in_submission_order) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 1, 1, NONE);
  KERNEL(r, LW_ANY_CHIP, 1, NONE);
  SUB(r, 2, NONE);
  KERNEL(r, 1, 1, NONE);
  SUB(r, 2, NONE);
  KERNEL(r, LW_ANY_CHIP, 1, NONE);
  step();
  EXPECT_EMPTY(&d.chip_q[0]);
  EXPECT_QUEUE(&d.chip_q[1], r, 1, 4);
  EXPECT_QUEUE(&d.any_q, r, 2, 6);
  EXPECT_QUEUE(&d.sub_q, r, 3, 5);
  // A sub keeps its pin while it runs and gives it back when it ends.
  lw_task_t *s = pop_launch(&d.sub_q, r, 3);
  expect_unpins(2, 0);
  finish_ok(s);
  expect_unpins(2, 1);
}

// ---------------------------------------------------------------------------------------------
// Failures

Test(dag_core, a_failed_task_poisons_its_pending_consumers_and_its_error_is_the_runs) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});                     // 1: A
  KERNEL(r, 0, 2, {X, LW_TAG_INPUT});                      // 2: B reads A's X
  KERNEL(r, 0, 3, {X, LW_TAG_INPUT}, {Y, LW_TAG_OUTPUT});  // 3: C reads X, writes Y
  KERNEL(r, 0, 4, {Y, LW_TAG_INPUT});                      // 4: D reads C's Y
  KERNEL(r, 0, 5, NONE);                                   // 5: E, independent
  step();
  EXPECT_QUEUE(&d.chip_q[0], r, 1, 5);

  lw_task_t *a = pop_launch(&d.chip_q[0], r, 1);
  finish_failed(a, "kernel k1 returned 3");
  for (uint64_t id = 1; id <= 4; ++id) {
    cr_assert_eq(state_of(r, id), LW_TS_FREE, "task %llu is finished and retired",
                 (unsigned long long)id);
  }
  cr_assert(r->failed);
  cr_assert(lw__dag_run_failed(r));
  cr_assert_eq(r->error.code, LW_TASK_FAILED);
  cr_assert_eq(r->error.task_id, 1);
  cr_assert_str_eq(r->error.message, "kernel k1 returned 3", "the first error wins");
  expect_counts(r, 5, 4, 0, 4);
  // The poisoned tasks never launched: their pins come back; A's went with its launch.
  expect_unpins(1, 0);
  expect_unpins(2, 1);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  cr_assert_geq(atomic_load(&name_calls[1]), 1, "the poison message names A's callable");

  // E is still queued: the failure stopped the run, so the sweep skips it.
  EXPECT_QUEUE(&d.chip_q[0], r, 5);
  cr_assert(lw__dag_sweep_stopped(&d, &finished));
  EXPECT_EMPTY(&d.chip_q[0]);
  expect_unpins(5, 1);
  expect_counts(r, 5, 5, 0, 5);
  cr_assert_str_eq(r->error.message, "kernel k1 returned 3");
  expect_none_settled();
  post_orch_done(r, LW_OK, NULL);
  step();
  expect_settled_once(r);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
}

// A poisoned task's message is a run's first error only where its run had none: here the
// consumer belongs to a second run posted before the first one's ORCH_DONE cleared the map.
Test(dag_core, a_poison_message_names_the_upstream_task_its_callable_and_its_error) {
  make_dag(16, 1, -1);
  lw_run_t *r1 = run_new(7);
  lw_run_t *r2 = run_new(8);
  KERNEL(r1, 0, 3, {X, LW_TAG_OUTPUT});
  KERNEL(r2, 0, 4, {X, LW_TAG_INPUT});
  step();
  finish_failed(pop_launch(&d.chip_q[0], r1, 1), "kernel returned 3");
  cr_assert(r2->failed);
  cr_assert_eq(r2->error.code, LW_POISONED);
  cr_assert_eq(r2->error.task_id, 1);
  cr_assert_str_eq(r2->error.message,
                   "task 1 of run 8 poisoned: upstream task 1 (k3) failed: kernel returned 3");
  expect_counts(r2, 1, 1, 0, 1);
  expect_unpins(4, 1);
}

Test(dag_core, a_consumer_of_one_producer_through_two_tensors_ends_once) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});                    // 1
  KERNEL(r, 0, 2, {X, LW_TAG_INPUT}, {X, LW_TAG_INPUT});  // 2: two edges from 1
  KERNEL(r, 0, 3, {Y, LW_TAG_OUTPUT});                    // 3
  KERNEL(r, 0, 4, {Y, LW_TAG_INPUT}, {Y, LW_TAG_INPUT});  // 4: two edges from 3
  step();
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  lw_task_t *t3 = pop_launch(&d.chip_q[0], r, 3);
  EXPECT_QUEUE(&d.chip_q[0], r, 2);  // queued once
  finish_failed(t3, "3 failed");
  expect_unpins(4, 1);  // poisoned once
  expect_counts(r, 4, 3, 1, 2);
  cr_assert_eq(lw__dag_live_tasks(&d), 1);
}

// A consumer finished early (poisoned by one producer) retires, and its slot goes to a new
// task; its other producer, ending later, must not count its end for the new task.
Test(dag_core, a_producer_ending_after_its_consumer_retired_leaves_the_slots_next_task_alone) {
  make_dag(8, 1, -1);
  lw_run_t *r1 = run_new(1);
  lw_run_t *r2 = run_new(2);
  KERNEL(r1, 0, 1, {X, LW_TAG_OUTPUT});                    // 1: A
  KERNEL(r1, 0, 2, {Y, LW_TAG_OUTPUT});                    // 2: B
  KERNEL(r1, 0, 3, {Z, LW_TAG_OUTPUT});                    // 3: W
  KERNEL(r1, 0, 4, {X, LW_TAG_INPUT}, {Y, LW_TAG_INPUT});  // 4: C waits for A and B
  step();
  uint32_t c_slot = task_of(r1, 4)->index;
  lw_task_t *a = pop_launch(&d.chip_q[0], r1, 1);
  lw_task_t *b = pop_launch(&d.chip_q[0], r1, 2);
  lw_task_t *w = pop_launch(&d.chip_q[0], r1, 3);
  finish_failed(b, "B failed");
  cr_assert_eq(state_of(r1, 4), LW_TS_FREE, "C was poisoned by B");
  // N (another run) waits for A and W, built into C's old slot.
  KERNEL(r2, 0, 5, {X, LW_TAG_INPUT}, {Z, LW_TAG_INPUT});
  step();
  lw_task_t *n = task_of(r2, 1);
  cr_assert_not_null(n);
  cr_assert_eq(n->index, c_slot, "the test needs N in C's old slot (slot %u, N got %u)", c_slot,
               n->index);
  cr_assert_eq(n->n_pending, 2);
  finish_ok(a);  // A still lists C as a consumer
  cr_assert_eq(n->state, LW_TS_PENDING, "N still waits for W");
  cr_assert_eq(n->n_pending, 1);
  EXPECT_EMPTY(&d.chip_q[0]);
  finish_ok(w);
  EXPECT_QUEUE(&d.chip_q[0], r2, 1);
}

Test(dag_core, a_task_whose_buffers_cannot_be_recorded_fails_its_run_naming_it) {
  make_gated_dag(16, 1);
  lw_run_t *r = run_new(4);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});  // 1: A
  step();
  lw_task_t *a = pop_launch(&d.chip_q[0], r, 1);
  // 2 waits for A (recorded), then its new buffer Y needs an entry: that allocation fails.
  KERNEL(r, 0, 2, {X, LW_TAG_INPUT}, {Y, LW_TAG_OUTPUT});
  fail_next_alloc = true;
  step();
  cr_assert_not(fail_next_alloc, "the map allocated nothing for Y");
  cr_assert(r->failed);
  cr_assert_eq(r->error.code, LW_RESOURCE_EXHAUSTED);
  cr_assert_eq(r->error.task_id, 2);
  cr_assert_str_eq(r->error.message, "orch: out of memory while building task 2 of run 4");
  cr_assert_eq(state_of(r, 2), LW_TS_FREE);
  expect_unpins(2, 1);
  expect_counts(r, 2, 1, 0, 1);
  // A still lists 2 as its consumer: its end must not touch the retired slot's next task.
  KERNEL(r, 0, 3, {Z, LW_TAG_OUTPUT});  // skipped at once: the run failed
  step();
  finish_ok(a);
  expect_counts(r, 3, 3, 1, 2);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  cr_assert_str_eq(r->error.message, "orch: out of memory while building task 2 of run 4");
}

Test(dag_core, a_group_member_that_cannot_be_built_takes_the_group_down) {
  make_gated_dag(16, 2);
  lw_run_t *r = run_new(1);
  post_group(r, 3, (const uint32_t[]){3, 4, 5},
             (const acc_t[]){NONE, {X, LW_TAG_OUTPUT}, NONE});  // member 2 needs an entry for X
  fail_next_alloc = true;
  step();
  cr_assert_not(fail_next_alloc);
  cr_assert_null(lw__dag_group_pop(&d));
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  expect_unpins(5, 1);
  expect_counts(r, 3, 3, 0, 3);
  cr_assert_eq(r->error.code, LW_RESOURCE_EXHAUSTED);
  cr_assert_eq(r->error.task_id, 2);
}

Test(dag_core, a_chain_of_100000_tasks_is_poisoned_by_its_head_without_recursion,
     .timeout = 60) {
  enum { N = 100000, BATCH = 4096 };
  make_dag(N, 1, -1);
  lw_run_t *r = run_new(1);
  for (uint32_t i = 0; i < N; ++i) {
    KERNEL(r, 0, i == 0 ? 1 : 2, {X, LW_TAG_INOUT});
    if (i % BATCH == BATCH - 1) step();  // keeps the unapplied commands few
  }
  step();
  cr_assert_eq(lw__dag_live_tasks(&d), N);
  EXPECT_QUEUE(&d.chip_q[0], r, 1);
  finish_failed(pop_launch(&d.chip_q[0], r, 1), "the head failed");
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  expect_counts(r, N, N, 0, N);
  expect_unpins(2, N - 1);
  cr_assert_str_eq(r->error.message, "the head failed");
  post_orch_done(r, LW_OK, NULL);
  step();
  expect_settled_once(r);
}

Test(dag_core, an_orch_error_fails_the_run_and_sweeps_its_ready_tasks_poisoned) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);                  // 1: completes before the error
  KERNEL(r, 0, 2, {X, LW_TAG_OUTPUT});    // 2: in flight when the error comes
  KERNEL(r, 0, 3, NONE);                  // 3: READY
  KERNEL(r, 0, 4, NONE);                  // 4: READY
  KERNEL(r, 0, 5, {X, LW_TAG_INPUT});     // 5: PENDING on 2
  step();
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  lw_task_t *t2 = pop_launch(&d.chip_q[0], r, 2);
  EXPECT_QUEUE(&d.chip_q[0], r, 3, 4);

  post_orch_done(r, LW_INVALID_ARGUMENT, "orch: buffer 0x1000 too small");
  step();
  cr_assert(r->failed);
  cr_assert_eq(r->error.code, LW_INVALID_ARGUMENT);
  cr_assert_str_eq(r->error.message, "orch: buffer 0x1000 too small");
  cr_assert(lw__dag_sweep_stopped(&d, &finished));
  EXPECT_EMPTY(&d.chip_q[0]);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  expect_counts(r, 5, 3, 1, 2);
  expect_none_settled();  // 2 is in flight, 5 waits for it

  // The scheduler cancels what is in flight in a stopped run; a kernel that returns 0 after
  // that still counts failed.
  t2->cancel_at = 1;
  finish_ok(t2);
  cr_assert_eq(state_of(r, 5), LW_TS_FREE, "5 is skipped, not queued, once 2 ended");
  EXPECT_EMPTY(&d.chip_q[0]);
  expect_unpins(5, 1);
  expect_counts(r, 5, 5, 1, 4);
  cr_assert_eq(r->error.code, LW_INVALID_ARGUMENT, "the orch error stays the first error");
  expect_settled_once(r);
}

Test(dag_core, a_task_failure_before_the_orch_error_stays_the_runs_error) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  step();
  finish_failed(pop_launch(&d.chip_q[0], r, 1), "kernel k1 returned 9");
  post_orch_done(r, LW_INVALID_ARGUMENT, "orch: too late to matter");
  step();
  expect_settled_once(r);
  cr_assert_eq(r->error.code, LW_TASK_FAILED);
  cr_assert_str_eq(r->error.message, "kernel k1 returned 9");
  expect_counts(r, 1, 1, 0, 1);
}

Test(dag_core, a_failure_without_an_error_record_is_named_by_its_task_and_status) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  KERNEL(r, 0, 1, NONE);
  step();
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  lw__task_finish(&d, pop_launch(&d.chip_q[0], r, 2), LW_DEADLINE_EXCEEDED, NULL, &finished);
  cr_assert_eq(r->error.code, LW_DEADLINE_EXCEEDED);
  cr_assert_eq(r->error.task_id, 2);
  cr_assert_str_eq(r->error.message, "task 2 failed: LW_DEADLINE_EXCEEDED");
}

Test(dag_core, a_task_submitted_to_a_failed_run_is_skipped_at_once) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  step();
  finish_failed(pop_launch(&d.chip_q[0], r, 1), "boom");
  KERNEL(r, 0, 2, NONE);
  step();
  EXPECT_EMPTY(&d.chip_q[0]);
  expect_unpins(2, 1);
  expect_counts(r, 2, 2, 0, 2);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
}

// ---------------------------------------------------------------------------------------------
// Cancellation

Test(dag_core, a_cancel_sweeps_the_runs_queued_tasks_and_keeps_the_others_in_order) {
  make_dag(16, 2, -1);
  lw_run_t *r1 = run_new(1);
  lw_run_t *r2 = run_new(2);
  KERNEL(r1, 0, 1, {X, LW_TAG_OUTPUT});  // r1 task 1: running at the cancel
  step();
  lw_task_t *t1 = pop_launch(&d.chip_q[0], r1, 1);
  KERNEL(r1, 0, 2, NONE);               // r1 task 2
  KERNEL(r2, 0, 5, NONE);               // r2 task 1
  KERNEL(r1, 0, 3, NONE);               // r1 task 3
  KERNEL(r2, 0, 5, NONE);               // r2 task 2
  KERNEL(r1, 1, 4, NONE);               // r1 task 4, on chip 1
  KERNEL(r1, 0, 6, {X, LW_TAG_INPUT});  // r1 task 5: PENDING on task 1
  step();
  expect_queue(&d.chip_q[0], (const lw_run_t *[]){r1, r2, r1, r2}, (const uint64_t[]){2, 1, 3, 2},
               4);
  cr_assert_not(lw__dag_sweep_stopped(&d, &finished), "no run stopped yet");

  uint32_t rings_before = atomic_load(&rings);
  atomic_store(&r1->handle.cancel_requested, 1);
  lw__dag_note_stop(&d);
  cr_assert_eq(atomic_load(&rings), rings_before + 1, "a stop rings the owner");
  cr_assert(lw__dag_sweep_stopped(&d, &finished));
  EXPECT_QUEUE(&d.chip_q[0], r2, 1, 2);
  EXPECT_EMPTY(&d.chip_q[1]);
  cr_assert(r1->cancelled);
  cr_assert_eq(r1->error.code, LW_CANCELLED);
  expect_unpins(2, 1);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  expect_counts(r1, 5, 3, 0, 3);
  cr_assert_eq(state_of(r1, 5), LW_TS_PENDING);
  cr_assert_not(lw__dag_sweep_stopped(&d, &finished), "nothing stopped since");

  // Task 1 ends: its consumer is skipped rather than queued.
  finish_ok(t1);
  EXPECT_QUEUE(&d.chip_q[0], r2, 1, 2);
  expect_unpins(6, 1);
  expect_counts(r1, 5, 5, 1, 4);
  post_orch_done(r1, LW_OK, NULL);
  step();
  expect_settled_once(r1);

  // The other run is untouched.
  cr_assert_not(r2->failed);
  cr_assert_not(r2->cancelled);
  expect_counts(r2, 2, 0, 0, 0);
  finish_ok(pop_launch(&d.chip_q[0], r2, 1));
  finish_ok(pop_launch(&d.chip_q[0], r2, 2));
  post_orch_done(r2, LW_OK, NULL);
  step();
  expect_settled_once(r2);
  expect_counts(r2, 2, 2, 2, 0);
  expect_unpins(5, 0);
}

Test(dag_core, a_cancel_sweeps_the_any_chip_and_sub_queues_too) {
  make_dag(16, 2, -1);
  lw_run_t *r1 = run_new(1);
  lw_run_t *r2 = run_new(2);
  KERNEL(r1, LW_ANY_CHIP, 1, NONE);
  SUB(r2, 2, NONE);
  SUB(r1, 3, NONE);
  KERNEL(r2, LW_ANY_CHIP, 4, NONE);
  step();
  atomic_store(&r1->handle.cancel_requested, 1);
  lw__dag_note_stop(&d);
  cr_assert(lw__dag_sweep_stopped(&d, &finished));
  EXPECT_QUEUE(&d.any_q, r2, 2);
  EXPECT_QUEUE(&d.sub_q, r2, 1);
  expect_unpins(1, 1);
  expect_unpins(3, 1);
  expect_counts(r1, 2, 2, 0, 2);
  expect_counts(r2, 2, 0, 0, 0);
  expect_has(r1->error.message, "run 1 cancelled");
}

// ---------------------------------------------------------------------------------------------
// Groups

Test(dag_core, a_group_is_ready_only_once_every_member_is) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {Y, LW_TAG_OUTPUT});                     // 1: Q
  KERNEL(r, 0, 2, {Y, LW_TAG_INPUT}, {X, LW_TAG_OUTPUT});  // 2: P, PENDING on Q
  post_group(r, 2, (const uint32_t[]){3, 4},
             (const acc_t[]){NONE, {X, LW_TAG_INPUT}});  // 3, 4: member 4 waits for P
  step();
  cr_assert_eq(state_of(r, 2), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 3), LW_TS_READY);
  cr_assert_eq(state_of(r, 4), LW_TS_PENDING);
  EXPECT_QUEUE(&d.chip_q[0], r, 1);
  EXPECT_EMPTY(&d.chip_q[1]);
  cr_assert_null(lw__dag_group_pop(&d));

  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  cr_assert_null(lw__dag_group_pop(&d), "member 4 still waits for P");
  finish_ok(pop_launch(&d.chip_q[0], r, 2));
  lw_group_t *g = lw__dag_group_pop(&d);
  cr_assert_not_null(g);
  cr_assert_null(lw__dag_group_pop(&d));
  cr_assert_eq(g->n, 2);
  lw_task_t *m0 = g->members[0], *m1 = g->members[1];
  cr_assert_eq(m0->task_id, 3);
  cr_assert_eq(m1->task_id, 4);
  cr_assert_eq(m0->state, LW_TS_READY);
  cr_assert_eq(m1->state, LW_TS_READY);
  // Group members never enter the chip queues.
  EXPECT_EMPTY(&d.chip_q[0]);
  EXPECT_EMPTY(&d.chip_q[1]);
  lw__dag_task_launch(&d, m0);
  lw__dag_task_launch(&d, m1);
  finish_ok(m0);
  finish_ok(m1);  // the last member frees the group
  post_orch_done(r, LW_OK, NULL);
  step();
  expect_settled_once(r);
  expect_counts(r, 4, 4, 4, 0);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
}

Test(dag_core, a_group_member_failing_before_launch_poisons_the_whole_group) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});  // 1: P
  post_group(r, 3, (const uint32_t[]){3, 4, 5},
             (const acc_t[]){NONE, {X, LW_TAG_INPUT}, NONE});  // 2, 3, 4: member 3 waits for P
  step();
  cr_assert_eq(state_of(r, 2), LW_TS_READY);
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 4), LW_TS_READY);
  cr_assert_null(lw__dag_group_pop(&d));

  finish_failed(pop_launch(&d.chip_q[0], r, 1), "P returned 1");
  // Member 3 is poisoned by P; all-or-nothing takes members 2 and 4 with it.
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  cr_assert_null(lw__dag_group_pop(&d));
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  expect_unpins(5, 1);
  expect_counts(r, 4, 4, 0, 4);
  cr_assert_str_eq(r->error.message, "P returned 1");
  post_orch_done(r, LW_OK, NULL);
  step();
  expect_settled_once(r);
}

Test(dag_core, a_ready_group_of_a_cancelled_run_is_swept_whole) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  post_group(r, 2, (const uint32_t[]){3, 4}, (const acc_t[]){NONE, NONE});
  step();
  cr_assert_not_null(d.groups_head);
  atomic_store(&r->handle.cancel_requested, 1);
  lw__dag_note_stop(&d);
  cr_assert(lw__dag_sweep_stopped(&d, &finished));
  cr_assert_null(lw__dag_group_pop(&d));
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  cr_assert(r->cancelled);
  expect_counts(r, 2, 2, 0, 2);
}

Test(dag_core, members_of_a_group_never_wait_for_each_other) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  // Member 2 reads what member 1 writes: an edge between them would keep the group from ever
  // launching, so there is none.
  post_group(r, 2, (const uint32_t[]){3, 4},
             (const acc_t[]){{X, LW_TAG_OUTPUT}, {X, LW_TAG_INPUT}});
  KERNEL(r, 0, 5, {X, LW_TAG_INPUT});  // 3: a reader after the group waits for member 1
  step();
  lw_group_t *g = lw__dag_group_pop(&d);
  cr_assert_not_null(g, "the group is ready at once");
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING);
  lw_task_t *m0 = g->members[0], *m1 = g->members[1];
  lw__dag_task_launch(&d, m0);
  lw__dag_task_launch(&d, m1);
  finish_ok(m1);
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING, "3 waits for the writer, member 1");
  finish_ok(m0);
  EXPECT_QUEUE(&d.chip_q[0], r, 3);
}

Test(dag_core, a_group_submitted_to_a_failed_run_is_skipped_whole) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  step();
  finish_failed(pop_launch(&d.chip_q[0], r, 1), "boom");
  post_group(r, 3, (const uint32_t[]){3, 4, 5}, (const acc_t[]){NONE, NONE, NONE});
  step();
  cr_assert_null(lw__dag_group_pop(&d));
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  expect_unpins(5, 1);
  expect_counts(r, 4, 4, 0, 4);
  cr_assert_str_eq(r->error.message, "boom");
}

Test(dag_core, a_partial_group_of_a_cancelled_run_ends_when_its_last_producer_ends) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});  // 1: P
  post_group(r, 2, (const uint32_t[]){3, 4},
             (const acc_t[]){NONE, {X, LW_TAG_INPUT}});  // 2 READY, 3 waits for P
  step();
  lw_task_t *p = pop_launch(&d.chip_q[0], r, 1);
  atomic_store(&r->handle.cancel_requested, 1);
  lw__dag_note_stop(&d);
  (void)lw__dag_sweep_stopped(&d, &finished);
  // The group is in no queue yet: its members wait where they are.
  cr_assert_eq(state_of(r, 2), LW_TS_READY);
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING);
  finish_ok(p);
  // 3 is skipped instead of made ready; the all-or-nothing rule takes 2 with it.
  cr_assert_null(lw__dag_group_pop(&d));
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  expect_unpins(3, 1);
  expect_unpins(4, 1);
  cr_assert(r->cancelled);
  cr_assert_eq(r->error.code, LW_CANCELLED);
  expect_counts(r, 3, 3, 1, 2);
}

// ---------------------------------------------------------------------------------------------
// Back-pressure

Test(dag_core, a_full_ring_refuses_a_reserve_at_the_submit_timeout_and_takes_one_after_a_retire,
     .timeout = 10) {
  make_dag(2, 1, 20 * 1000 * 1000);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  KERNEL(r, 0, 1, NONE);
  lw_error_t err;
  cr_assert_eq(lw__dag_reserve(&d, 1, &err), LW_RESOURCE_EXHAUSTED);
  cr_assert_eq(err.code, LW_RESOURCE_EXHAUSTED);
  expect_has(err.message, "task ring is full");
  expect_has(err.message, "2 of 2 slots taken");
  expect_has(err.message, "nothing was dropped");
  cr_assert_eq(lw__dag_reserve(&d, 3, &err), LW_INVALID_ARGUMENT, "3 can never fit 2 slots");
  expect_has(err.message, "task ring of 2 slots");

  step();
  cr_assert_eq(lw__dag_live_tasks(&d), 2, "both posted tasks were applied: nothing dropped");
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  cr_assert_eq(lw__dag_reserve(&d, 1, &err), LW_OK, "%s", err.message);
  cr_assert_eq(lw__dag_reserve(&d, 1, &err), LW_RESOURCE_EXHAUSTED);
  lw__dag_unreserve(&d, 1);
  cr_assert_eq(lw__dag_reserve(&d, 1, &err), LW_OK, "an unreserved slot can be taken again");
  lw__dag_unreserve(&d, 1);
}

// Events of the blocked-reserve test, in the order they happened.
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static char ev[4];
static uint32_t n_ev;

static void event(char e) {
  pthread_mutex_lock(&ev_mu);
  ev[n_ev++] = e;
  pthread_mutex_unlock(&ev_mu);
}

static void *blocked_reserve(void *arg) {
  lw_error_t *err = arg;
  lw_status_t st = lw__dag_reserve(&d, 1, err);
  event(st == LW_OK ? 'R' : 'E');
  return NULL;
}

Test(dag_core, a_reserve_blocked_on_a_full_ring_returns_after_the_owner_retires_a_task,
     .timeout = 10) {
  make_dag(1, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  step();
  n_ev = 0;
  lw_error_t err;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, blocked_reserve, &err), 0);
  // The other thread is inside its wait once it counts itself a waiter (a wait that never
  // blocks fails the test by its timeout instead).
  while (atomic_load(&d.space_waiters) == 0) {
    nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
  event('F');
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  cr_assert_eq(pthread_join(th, NULL), 0);
  cr_assert_eq(n_ev, 2);
  cr_assert_eq(ev[0], 'F', "the blocked reserve returned before the retire");
  cr_assert_eq(ev[1], 'R', "the blocked reserve failed: %s", err.message);
  lw__dag_unreserve(&d, 1);
}

// ---------------------------------------------------------------------------------------------
// Scopes

Test(dag_core, a_buffer_first_written_inside_a_scope_is_forgotten_when_it_ends) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {Y, LW_TAG_OUTPUT});  // 1: Y written before the scope
  post_simple(LW_DAG_CMD_SCOPE_BEGIN, r);
  KERNEL(r, 0, 2, {X, LW_TAG_OUTPUT});  // 2: X first written inside
  KERNEL(r, 0, 3, {Y, LW_TAG_INPUT});   // 3: reads Y inside
  post_simple(LW_DAG_CMD_SCOPE_END, r);
  KERNEL(r, 0, 4, {X, LW_TAG_OUTPUT});  // 4: no dependency on 2
  KERNEL(r, 0, 5, {Y, LW_TAG_OUTPUT});  // 5: waits for 1 and 3 (Y kept its entry)
  step();
  cr_assert_not(r->failed, "%s", r->error.message);
  EXPECT_QUEUE(&d.chip_q[0], r, 1, 2, 4);
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING);
  cr_assert_eq(state_of(r, 5), LW_TS_PENDING);
  finish_ok(pop_launch(&d.chip_q[0], r, 1));
  EXPECT_QUEUE(&d.chip_q[0], r, 2, 4, 3);
  cr_assert_eq(state_of(r, 5), LW_TS_PENDING, "5 still waits for the reader 3");
  finish_ok(pop_launch(&d.chip_q[0], r, 2));
  finish_ok(pop_launch(&d.chip_q[0], r, 4));
  finish_ok(pop_launch(&d.chip_q[0], r, 3));
  EXPECT_QUEUE(&d.chip_q[0], r, 5);
}

Test(dag_core, a_scope_end_without_a_begin_fails_the_run_naming_it) {
  make_dag(16, 1, -1);
  lw_run_t *r = run_new(3);
  post_simple(LW_DAG_CMD_SCOPE_END, r);
  step();
  cr_assert(r->failed);
  cr_assert_eq(r->error.code, LW_INTERNAL);
  expect_has(r->error.message, "run 3");
  expect_has(r->error.message, "scope end");
}

// ---------------------------------------------------------------------------------------------
// Two threads: a submitter and the owner

enum { N_SUBMIT = 20000, SUBMIT_RING = 64 };

static void *submitter(void *arg) {
  lw_run_t *run = arg;
  for (uint32_t i = 0; i < N_SUBMIT; ++i) {
    lw_error_t err;
    if (lw__dag_reserve(&d, 1, &err) != LW_OK) abort();  // cannot happen: no timeout
    lw_dag_cmd_t *c = lw__dag_cmd_new(LW_DAG_CMD_SUBMIT, run, 1);
    if (!c) abort();
    // Chip 0, chip 1 and subs in turn, each on a buffer of its own.
    bool sub = i % 3 == 2;
    acc_t a = {0x100000u + (uintptr_t)i * 64u, LW_TAG_OUTPUT};
    fill_desc(&c->task[0], sub ? LW_MB_TASK_SUB : LW_MB_TASK_KERNEL, sub ? -1 : (int32_t)(i % 3),
              1 + i % 3, 1, &a);
    lw__dag_post(&d, c, 0);
  }
  lw_dag_cmd_t *done = lw__dag_cmd_new(LW_DAG_CMD_ORCH_DONE, run, 0);
  if (!done) abort();
  lw__dag_post(&d, done, 0);
  return NULL;
}

Test(dag_core, a_submitter_thread_and_the_owner_run_20000_tasks_through_a_ring_of_64,
     .timeout = 60) {
  make_dag(SUBMIT_RING, 2, -1);
  lw_run_t *r = run_new(1);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, submitter, r), 0);
  lw_task_queue_t *qs[3] = {&d.chip_q[0], &d.chip_q[1], &d.sub_q};
  uint64_t last[3] = {0, 0, 0};
  uint32_t popped[3] = {0, 0, 0};
  while (!finished) {
    pthread_mutex_lock(&bell_mu);
    uint64_t seen = bell;
    pthread_mutex_unlock(&bell_mu);
    bool progress = lw__dag_step(&d, &finished);
    for (uint32_t qi = 0; qi < 3; ++qi) {
      lw_task_t *t;
      while ((t = lw__dag_queue_pop(qs[qi])) != NULL) {
        progress = true;
        cr_assert_gt(t->task_id, last[qi], "queue %u: task %llu after task %llu", qi,
                     (unsigned long long)t->task_id, (unsigned long long)last[qi]);
        cr_assert_eq((t->task_id - 1) % 3, qi, "task %llu in queue %u",
                     (unsigned long long)t->task_id, qi);
        last[qi] = t->task_id;
        popped[qi]++;
        lw__dag_task_launch(&d, t);
        finish_ok(t);
      }
    }
    if (!progress && !finished) {
      pthread_mutex_lock(&bell_mu);
      while (bell == seen) pthread_cond_wait(&bell_cv, &bell_mu);
      pthread_mutex_unlock(&bell_mu);
    }
  }
  cr_assert_eq(pthread_join(th, NULL), 0);
  expect_settled_once(r);
  expect_counts(r, N_SUBMIT, N_SUBMIT, N_SUBMIT, 0);
  for (uint32_t qi = 0; qi < 3; ++qi) {
    // Tasks of queue qi are qi+1, qi+4, ...: in order and none missing.
    uint32_t want = (N_SUBMIT - qi + 2) / 3;
    cr_assert_eq(popped[qi], want, "queue %u: %u tasks, expected %u", qi, popped[qi], want);
  }
  expect_unpins(1, 0);
  expect_unpins(2, 0);
  expect_unpins(3, (N_SUBMIT + 0) / 3);  // every sub's pin came back
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  cr_assert_eq(atomic_load(&d.slots_free), SUBMIT_RING, "every slot came back");
  cr_assert_geq(atomic_load(&rings), N_SUBMIT + 1, "every post rang");
}

// ---------------------------------------------------------------------------------------------
// Lifecycle and the owner contract

Test(dag_core, deinitialize_gives_back_the_pins_of_commands_never_applied) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  KERNEL(r, 1, 2, {X, LW_TAG_OUTPUT});
  post_group(r, 2, (const uint32_t[]){3, 3}, (const acc_t[]){NONE, NONE});
  post_simple(LW_DAG_CMD_SCOPE_BEGIN, r);
  post_orch_done(r, LW_OK, NULL);
  lw__dag_deinitialize(&d);
  d_live = false;
  expect_unpins(1, 1);
  expect_unpins(2, 1);
  expect_unpins(3, 2);
  expect_none_settled();
}

static void *become_owner(void *arg) {
  (void)arg;
  lw__dag_set_owner(&d, 0);
  return NULL;
}

// The abort happens in a child process (forked with the DAG in its memory), so the test
// reads its end from waitpid; the child has the forking thread only, which is not the owner.
Test(dag_core, a_step_on_a_thread_other_than_the_owner_aborts, .timeout = 10) {
  make_dag(4, 1, -1);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, become_owner, NULL), 0);
  cr_assert_eq(pthread_join(th, NULL), 0);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, NONE);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    step();
    _exit(0);  // the contract check did not fire
  }
  int ws = 0;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT,
            "the non-owner step ended the child with status 0x%x, expected SIGABRT", ws);
  // The owner (here: the thread that owned it is gone, so take it back) still applies it.
  lw__dag_set_owner(&d, 0);
  step();
  EXPECT_QUEUE(&d.chip_q[0], r, 1);
}

static uint32_t described;

static void describe(void *ctx, const lw_task_t *t, lw_error_t *out) {
  cr_assert_eq(ctx, &described);
  described++;
  lw__error_set(out, LW_CANCELLED, -1, t->task_id, "task %llu: the worker was destroyed",
                (unsigned long long)t->task_id);
}

Test(dag_core, finish_all_applies_the_inbox_then_ends_every_task_with_the_status) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});  // 1: RUNNING
  KERNEL(r, 0, 2, NONE);                // 2: READY
  step();
  lw__dag_task_launch(&d, lw__dag_queue_pop(&d.chip_q[0]));
  KERNEL(r, 1, 3, {X, LW_TAG_INPUT});   // 3: PENDING once applied
  post_orch_done(r, LW_OK, NULL);
  described = 0;
  lw__dag_finish_all(&d, LW_CANCELLED, describe, &described, &finished);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  // Slots are taken lowest first, so task 1 ends first and poisons 3 (its consumer) on the
  // way; 2 is still unfinished when the loop reaches it.
  cr_assert_eq(described, 2, "described %u tasks", described);
  cr_assert_eq(r->error.code, LW_CANCELLED);
  cr_assert_str_eq(r->error.message, "task 1: the worker was destroyed");
  expect_counts(r, 3, 3, 0, 3);
  expect_unpins(1, 0);  // launched
  expect_unpins(2, 1);
  expect_unpins(3, 1);
  expect_settled_once(r);
}

Test(dag_core, finish_all_ends_a_ready_group_whole) {
  make_dag(16, 2, -1);
  lw_run_t *r = run_new(1);
  post_group(r, 2, (const uint32_t[]){3, 4}, (const acc_t[]){NONE, NONE});
  post_group(r, 2, (const uint32_t[]){5, 6}, (const acc_t[]){NONE, NONE});
  step();
  cr_assert_not_null(d.groups_head);
  described = 0;
  lw__dag_finish_all(&d, LW_UNAVAILABLE, describe, &described, &finished);
  // One member of each group is described; all-or-nothing ends the other with it.
  cr_assert_eq(described, 2, "described %u tasks", described);
  cr_assert_eq(lw__dag_live_tasks(&d), 0);
  for (uint32_t wc = 3; wc <= 6; ++wc) expect_unpins(wc, 1);
  expect_counts(r, 4, 4, 0, 4);
}

// ---------------------------------------------------------------------------------------------
// Task reports (parent/task_reports.h): begun as the owner builds a task, ended as it finishes

Test(dag_core, task_reports_name_every_task_of_a_long_run_with_its_kind_callable_and_status) {
  enum { N_READERS = 40 };  // more than the array's first sizes: it grows twice on the way
  make_dag(64, 1, -1);
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});                                   // 1: fails
  for (int i = 0; i < N_READERS; ++i) KERNEL(r, 0, 2, {X, LW_TAG_INPUT});  // 2..41: poisoned
  SUB(r, 3, NONE);                                                       // 42: completes
  post_orch_done(r, LW_OK, NULL);
  step();
  finish_ok(pop_launch(&d.sub_q, r, N_READERS + 2));
  finish_failed(pop_launch(&d.chip_q[0], r, 1), "kernel k1 returned -3");
  expect_settled_once(r);
  cr_assert_geq(r->task_reports_cap, N_READERS + 2);
  cr_assert_not(r->task_reports_lost);
  const lw_task_report_t *rep = r->task_reports;
  for (uint32_t i = 0; i < N_READERS + 2; ++i) {
    cr_assert_eq(rep[i].task_id, i + 1, "report %u holds task %llu", i,
                 (unsigned long long)rep[i].task_id);
    cr_assert_eq(rep[i].submit_ns, SUBMIT_NS);
    cr_assert_gt(rep[i].wait_ns, 0, "never posted: its wait lasted until it ended");
    // No scheduler posts them here (it is the one that marks a task posted to a child).
    cr_assert_eq(rep[i].worker_id, -1);
    cr_assert_eq(rep[i].host_ns, 0);
  }
  cr_assert_eq(rep[0].status, LW_TASK_FAILED);
  cr_assert_str_eq(rep[0].callable, "k1");
  cr_assert_eq(rep[0].kind, LW_TASK_CHIP);
  for (uint32_t i = 1; i <= N_READERS; ++i) {
    cr_assert_eq(rep[i].status, LW_POISONED, "task %u: %s", i + 1, lw_status_name(rep[i].status));
    cr_assert_str_eq(rep[i].callable, "k2");
  }
  cr_assert_eq(rep[N_READERS + 1].status, LW_OK);
  cr_assert_eq(rep[N_READERS + 1].kind, LW_TASK_SUB);
  cr_assert_str_eq(rep[N_READERS + 1].callable, "k3");
}

// ---------------------------------------------------------------------------------------------
// Wait elision (parent/dag.h, lw_task_t): a task whose unfinished producers are all posted to
// one chip is READY for that chip at once; the chip's run lane orders it behind them.

// Pops the head of q (task task_id of run) and launches it on chip (-1: a sub child).
static lw_task_t *pop_launch_on(lw_task_queue_t *q, const lw_run_t *run, uint64_t task_id,
                                int32_t chip) {
  lw_task_t *t = lw__dag_queue_pop(q);
  cr_assert_not_null(t, "expected task %llu at the head of the queue, it is empty",
                     (unsigned long long)task_id);
  cr_assert_eq(t->run, run);
  cr_assert_eq(t->task_id, task_id, "popped task %llu, expected task %llu",
               (unsigned long long)t->task_id, (unsigned long long)task_id);
  lw__dag_task_launch_on(&d, t, chip, &finished);
  cr_assert_eq(t->state, LW_TS_RUNNING);
  return t;
}

static lw_status_t report_status(const lw_run_t *run, uint64_t task_id) {
  cr_assert_leq(task_id, run->n_tasks);
  return run->task_reports[task_id - 1].status;
}

// A DAG of 2 chips with elision on or off, and one run: task 1 on chip 0 writes X, task 2 on
// consumer_chip reads it. Both applied; task 1 is READY on chip 0.
static lw_run_t *producer_and_consumer(bool elision, int32_t consumer_chip) {
  make_dag(16, 2, -1);
  d.elision = elision;
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});
  KERNEL(r, consumer_chip, 2, {X, LW_TAG_INPUT});
  step();
  return r;
}

Test(dag_core, a_consumer_on_its_producers_chip_is_ready_while_the_producer_runs) {
  lw_run_t *r = producer_and_consumer(true, 0);
  EXPECT_QUEUE(&d.chip_q[0], r, 1);
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  EXPECT_QUEUE(&d.chip_q[0], r, 2);
  cr_assert(task_of(r, 2)->elided);
  finish_ok(a);
  // Its producer's end does not queue it a second time.
  EXPECT_QUEUE(&d.chip_q[0], r, 2);
  finish_ok(pop_launch_on(&d.chip_q[0], r, 2, 0));
  cr_assert_eq(r->n_completed, 2);
}

Test(dag_core, a_consumer_built_after_its_producer_was_posted_is_ready_at_once) {
  make_dag(16, 2, -1);
  d.elision = true;
  lw_run_t *r = run_new(1);
  KERNEL(r, 1, 1, {X, LW_TAG_OUTPUT});
  step();
  lw_task_t *a = pop_launch_on(&d.chip_q[1], r, 1, 1);
  KERNEL(r, LW_ANY_CHIP, 2, {X, LW_TAG_INOUT});
  step();
  EXPECT_QUEUE(&d.chip_q[1], r, 2);
  EXPECT_EMPTY(&d.any_q);
  cr_assert_eq(task_of(r, 2)->worker, 1, "an any-chip task follows its producer's chip");
  finish_ok(a);
}

Test(dag_core, a_consumer_pinned_to_another_chip_waits_for_its_producer) {
  lw_run_t *r = producer_and_consumer(true, 1);
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  EXPECT_EMPTY(&d.chip_q[0]);
  EXPECT_EMPTY(&d.chip_q[1]);
  cr_assert_eq(state_of(r, 2), LW_TS_PENDING);
  finish_ok(a);
  EXPECT_QUEUE(&d.chip_q[1], r, 2);
  cr_assert_not(task_of(r, 2)->elided);
}

Test(dag_core, producers_on_two_chips_or_a_sub_child_keep_the_consumer_waiting) {
  make_dag(16, 2, -1);
  d.elision = true;
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});
  KERNEL(r, 1, 1, {Y, LW_TAG_OUTPUT});
  KERNEL(r, LW_ANY_CHIP, 2, {X, LW_TAG_INPUT}, {Y, LW_TAG_INPUT});
  SUB(r, 3, {Z, LW_TAG_OUTPUT});
  KERNEL(r, 0, 2, {Z, LW_TAG_INPUT});
  step();
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  lw_task_t *b = pop_launch_on(&d.chip_q[1], r, 2, 1);
  lw_task_t *s = pop_launch_on(&d.sub_q, r, 4, -1);
  EXPECT_EMPTY(&d.chip_q[0]);
  EXPECT_EMPTY(&d.chip_q[1]);
  EXPECT_EMPTY(&d.any_q);
  cr_assert_eq(state_of(r, 3), LW_TS_PENDING, "producers on chips 0 and 1");
  cr_assert_eq(state_of(r, 5), LW_TS_PENDING, "a producer on a sub child");
  finish_ok(a);
  finish_ok(b);
  finish_ok(s);
  EXPECT_QUEUE(&d.any_q, r, 3);
  EXPECT_QUEUE(&d.chip_q[0], r, 5);
}

Test(dag_core, a_group_member_is_never_elided) {
  make_dag(16, 2, -1);
  d.elision = true;
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});
  uint32_t wc[2] = {2, 2};
  acc_t acc[2] = {{X, LW_TAG_INPUT}, {Y, LW_TAG_OUTPUT}};
  post_group(r, 2, wc, acc);
  step();
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  cr_assert_null(lw__dag_group_pop(&d), "the group waits for task 1 to finish");
  finish_ok(a);
  cr_assert_not_null(lw__dag_group_pop(&d));
}

Test(dag_core, an_elided_consumer_whose_producer_fails_ends_poisoned_whatever_it_reports) {
  lw_run_t *r = producer_and_consumer(true, 0);
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  lw_task_t *b = pop_launch_on(&d.chip_q[0], r, 2, 0);
  cr_assert(b->elided);
  finish_failed(a, "kernel returned 7");
  // Even an OK from its child (which does not start it: child/chip_child.c) is not a result.
  finish_ok(b);
  cr_assert_eq(report_status(r, 1), LW_TASK_FAILED);
  cr_assert_eq(report_status(r, 2), LW_POISONED);
  cr_assert_eq(r->n_completed, 0);
  cr_assert_eq(r->n_failed, 2);
  cr_assert_eq(r->error.code, LW_TASK_FAILED, "the first error stays the producer's");
}

// A chain 1 -> 2 -> 3 on chip 0, 2 and 3 elided behind 1. Task 1 fails; the child may report 3
// before 2 (a cancel withdraws queued task 3 while the run lane reports task 2): task 3 ends
// POISONED all the same, naming task 1, and so does task 2 after it.
Test(dag_core, an_elided_chain_behind_a_failed_producer_ends_poisoned_in_any_report_order) {
  make_dag(16, 1, -1);
  d.elision = true;
  lw_run_t *r = run_new(1);
  KERNEL(r, 0, 1, {X, LW_TAG_OUTPUT});
  KERNEL(r, 0, 2, {X, LW_TAG_INPUT}, {Y, LW_TAG_OUTPUT});
  KERNEL(r, 0, 3, {Y, LW_TAG_INPUT});
  step();
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  lw_task_t *b = pop_launch_on(&d.chip_q[0], r, 2, 0);
  lw_task_t *c = pop_launch_on(&d.chip_q[0], r, 3, 0);
  cr_assert(b->elided && c->elided);
  finish_failed(a, "kernel returned 7");
  lw_error_t err;
  lw__error_set(&err, LW_CANCELLED, 0, 3, "task 3 cancelled before it started");
  lw__task_finish(&d, c, LW_CANCELLED, &err, &finished);
  cr_assert_eq(report_status(r, 3), LW_POISONED, "%s", lw_status_name(report_status(r, 3)));
  finish_ok(b);
  cr_assert_eq(report_status(r, 1), LW_TASK_FAILED);
  cr_assert_eq(report_status(r, 2), LW_POISONED);
  cr_assert_eq(r->n_completed, 0);
  cr_assert_eq(r->n_failed, 3);
  cr_assert_eq(r->error.code, LW_TASK_FAILED, "the first error stays the producer's");
}

Test(dag_core, with_elision_off_a_consumer_waits_in_the_parent) {
  lw_run_t *r = producer_and_consumer(false, 0);
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  EXPECT_EMPTY(&d.chip_q[0]);
  finish_ok(a);
  EXPECT_QUEUE(&d.chip_q[0], r, 2);
}

Test(dag_core, an_elided_consumer_of_a_cancelled_producer_ends_cancelled) {
  lw_run_t *r = producer_and_consumer(true, 0);
  lw_task_t *a = pop_launch_on(&d.chip_q[0], r, 1, 0);
  lw_task_t *b = pop_launch_on(&d.chip_q[0], r, 2, 0);
  cr_assert(b->elided);
  lw_error_t err;
  lw__error_set(&err, LW_CANCELLED, 0, 1, "task 1 cancelled while running");
  lw__task_finish(&d, a, LW_CANCELLED, &err, &finished);
  finish_ok(b);
  cr_assert_eq(report_status(r, 1), LW_CANCELLED);
  cr_assert_eq(report_status(r, 2), LW_CANCELLED, "%s", lw_status_name(report_status(r, 2)));
  cr_assert_eq(r->n_completed, 0);
}

// The owner's clock (lw__dag_now) never goes back: a pass seeded with a time read before it took
// the token (a submit's) uses it only when no pass since used a later time.
Test(dag_core, the_owners_clock_never_goes_back_for_an_older_seed) {
  make_dag(8, 1, -1);
  lw__dag_set_owner(&d, 0);
  int64_t first = lw__dag_now(&d);
  cr_assert_gt(first, 0);
  lw__dag_set_owner(&d, first - 1000);  // read before the pass above: not taken
  int64_t second = lw__dag_now(&d);
  cr_assert_geq(second, first);
  lw__dag_set_owner(&d, second + 1);  // newer than any time used: taken as is
  cr_assert_eq(lw__dag_now(&d), second + 1);
}
