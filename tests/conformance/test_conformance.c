// tests/conformance/test_conformance.c — the behaviours of DESIGN §3.3–§4, written once and
// run on every backend at L2 and L3 (conformance.h says how). Every case asserts the order of
// events, never a time: the gate kernel holds the run lane and the hold kernel the register
// lane until the test lets them go, and the record kernel's log shows what ran and in which
// order.
//
// Where the levels differ by design (an L2 run is one kernel; an L3 run is a DAG whose handle
// also waits for earlier runs), the case says so and checks each level's rule.
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance.h"
#include "test_util.h"

TestSuite(conformance, .init = conf_open, .fini = conf_close, .timeout = 60);

#define MS (1000ll * 1000)

// ---------------------------------------------------------------------------------------------
// Helpers

void conf_wait_nonzero(_Atomic uint32_t *word) { lw_test_wait_nonzero(word); }

void conf_wait_settled(lw_handle_t *run) {
  while (!conf_run_settled(run)) lw_test_sleep_us(100);
}

static lw_callable_handle_t reg(conf_kernel_t k) {
  lw_callable_t c;
  conf_kernel_load(k, NULL, &c);
  lw_callable_handle_t h;
  lw_error_t err;
  lw_status_t st = conf_register(&c, &h, &err);
  cr_assert_eq(st, LW_OK, "register %s on %s at L%d: %s: %s", c.name, conf_backend(),
               conf_level(), lw_status_name(st), err.message);
  conf_kernel_free(&c);
  return h;
}

static conf_task_t record_task(lw_callable_handle_t h, conf_log_t *log, lw_tag_t tag,
                               int64_t value) {
  conf_task_t t;
  memset(&t, 0, sizeof(t));
  t.callable = h;
  lw_args_init(&t.args);
  cr_assert_eq(lw_args_add_tensor(&t.args, (void *)log->v, sizeof(log->v), tag), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&t.args, (uint64_t)value), LW_OK);
  return t;
}

static conf_task_t gate_task(lw_callable_handle_t h, conf_gate_t *g) {
  conf_task_t t;
  memset(&t, 0, sizeof(t));
  t.callable = h;
  lw_args_init(&t.args);
  cr_assert_eq(lw_args_add_tensor(&t.args, (void *)&g->open, sizeof(g->open), LW_TAG_NO_DEP),
               LW_OK);
  cr_assert_eq(
      lw_args_add_tensor(&t.args, (void *)&g->entered, sizeof(g->entered), LW_TAG_NO_DEP),
      LW_OK);
  conf_kernel_geometry(CONF_K_GATE, h, &t.args);
  return t;
}

static conf_task_t fail_task(lw_callable_handle_t h, conf_log_t *carrier, lw_tag_t tag,
                             int64_t code) {
  return record_task(h, carrier, tag, code);  // same shape: (INOUT tensor, SCALAR)
}

static lw_handle_t *submit(const conf_task_t *t) {
  lw_handle_t *h = NULL;
  lw_error_t err;
  lw_status_t st = conf_run_async(t, 1, &h, &err);
  cr_assert_eq(st, LW_OK, "run_async: %s: %s", lw_status_name(st), err.message);
  cr_assert_not_null(h);
  return h;
}

// Starts a gate run and waits until its kernel runs: from then on the run lane is held.
static lw_handle_t *start_gate(lw_callable_handle_t hg, conf_gate_t *g) {
  conf_task_t t = gate_task(hg, g);
  lw_handle_t *h = submit(&t);
  conf_wait_nonzero(&g->entered);
  return h;
}

static int64_t log_count(conf_log_t *log) { return atomic_load(&log->v[0]); }
static int64_t log_at(conf_log_t *log, int i) { return atomic_load(&log->v[1 + i]); }

static void expect_ok(lw_handle_t *h, const char *what) {
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
  cr_assert_eq(st, LW_OK, "%s: %s: %s", what, lw_status_name(st),
               lw_handle_error(h) ? lw_handle_error(h)->message : "");
}

static void expect_status(lw_handle_t *h, lw_status_t want, const char *what) {
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
  cr_assert_eq(st, want, "%s: %s, wanted %s: %s", what, lw_status_name(st),
               lw_status_name(want), lw_handle_error(h) ? lw_handle_error(h)->message : "");
}

// The chip still works: one record run of value finishes OK and is logged last.
static void expect_chip_usable(lw_callable_handle_t hr, conf_log_t *log, int64_t value) {
  conf_task_t t = record_task(hr, log, LW_TAG_NO_DEP, value);
  lw_error_t err;
  lw_status_t st = conf_run(&t, &err);
  cr_assert_eq(st, LW_OK, "the chip is not usable any more: %s: %s", lw_status_name(st),
               err.message);
  int64_t n = log_count(log);
  cr_assert(n >= 1 && log_at(log, (int)n - 1) == value, "the last record is not %lld",
            (long long)value);
}

// ---------------------------------------------------------------------------------------------
// §3.4 / §3.5: run order

Test(conformance, runs_on_one_chip_execute_in_submission_order) {
  lw_callable_handle_t hg = reg(CONF_K_GATE), hr = reg(CONF_K_RECORD);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  conf_log_t *log = conf_alloc(sizeof(*log));
  // The gate holds the run lane, so every record below is queued before any runs.
  lw_handle_t *gate = start_gate(hg, g);
  enum { N = 48 };
  lw_handle_t *hs[N];
  for (int i = 0; i < N; ++i) {
    conf_task_t t = record_task(hr, log, LW_TAG_NO_DEP, i + 1);
    hs[i] = submit(&t);
  }
  cr_assert_eq(log_count(log), 0, "a run overtook the gate run holding the lane");
  atomic_store(&g->open, 1);
  expect_ok(gate, "gate run");
  for (int i = N - 1; i >= 0; --i) {
    expect_ok(hs[i], "record run");
    // Handles finish in order too: once a later one is done, every earlier one is.
    for (int j = 0; j < i; ++j) cr_assert(lw_handle_done(hs[j]), "run %d done before run %d", i, j);
  }
  cr_assert_eq(log_count(log), N);
  for (int i = 0; i < N; ++i) {
    cr_assert_eq(log_at(log, i), i + 1, "position %d ran value %lld", i,
                 (long long)log_at(log, i));
  }
  for (int i = 0; i < N; ++i) lw_handle_release(hs[i]);
  lw_handle_release(gate);
}

typedef struct sync_ctx {
  conf_task_t task;
  lw_status_t st;
  lw_error_t err;
} sync_ctx_t;

static void *sync_run_thread(void *arg) {
  sync_ctx_t *c = arg;
  c->st = conf_run(&c->task, &c->err);
  return NULL;
}

Test(conformance, sync_run_never_overtakes_queued_async_runs) {
  lw_callable_handle_t hg = reg(CONF_K_GATE), hr = reg(CONF_K_RECORD);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  conf_log_t *log = conf_alloc(sizeof(*log));
  lw_handle_t *gate = start_gate(hg, g);
  conf_task_t first_task = record_task(hr, log, LW_TAG_NO_DEP, 1);
  lw_handle_t *first = submit(&first_task);
  sync_ctx_t c = {record_task(hr, log, LW_TAG_NO_DEP, 2), LW_INTERNAL, {0}};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, sync_run_thread, &c), 0);
  // The gate run, the async run and the sync run are all accepted before the lane moves.
  conf_wait_in_flight(3);
  cr_assert_eq(log_count(log), 0, "nothing may run while the gate run holds the lane");
  atomic_store(&g->open, 1);
  pthread_join(t, NULL);
  cr_assert_eq(c.st, LW_OK, "sync run: %s: %s", lw_status_name(c.st), c.err.message);
  cr_assert(lw_handle_done(gate), "the sync run returned before the earlier gate run");
  cr_assert(lw_handle_done(first), "the sync run returned before the earlier async run");
  cr_assert_eq(log_count(log), 2);
  cr_assert_eq(log_at(log, 0), 1, "the async run submitted first must run first");
  cr_assert_eq(log_at(log, 1), 2);
  expect_ok(gate, "gate run");
  expect_ok(first, "async run");
  lw_handle_release(gate);
  lw_handle_release(first);
}

// ---------------------------------------------------------------------------------------------
// §4.1: register and run overlap (by events)

Test(conformance, register_finishes_while_a_run_holds_the_run_lane) {
  lw_callable_handle_t hg = reg(CONF_K_GATE);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  lw_handle_t *run = start_gate(hg, g);
  lw_callable_t c;
  conf_kernel_load(CONF_K_RECORD, NULL, &c);
  lw_handle_t *r = NULL;
  cr_assert_eq(conf_register_async(&c, &r), LW_OK, "%s", lw_last_error()->message);
  conf_kernel_free(&c);  // an async register copies the image
  expect_ok(r, "register");
  cr_assert_not(lw_handle_done(run), "the register waited for the run lane");
  cr_assert_eq(atomic_load(&g->open), 0u);
  lw_callable_handle_t hr;
  cr_assert_eq(lw_handle_callable(r, &hr), LW_OK);
  cr_assert_neq(hr.id, 0);
  atomic_store(&g->open, 1);
  expect_ok(run, "gate run");
  // The callable registered beside the run is runnable.
  conf_log_t *log = conf_alloc(sizeof(*log));
  expect_chip_usable(hr, log, 5);
  lw_handle_release(r);
  lw_handle_release(run);
}

// Lets the register held on path go (conf_kernel_load, CONF_K_HOLD). The sim's hold waits for
// the file to exist. An OpenCL or CUDA compiler's read of the FIFO blocks in its open until a
// writer opens the path; and a compiler may open an include more than once (NVIDIA's OpenCL
// compiler does: its second open of a FIFO whose writer had come and gone blocked for good).
// So an empty regular file takes the FIFO's place while the writer still holds it open: an
// open that is waiting proceeds and reads an empty file when the writer closes, and every later
// open finds the regular file and reads nothing at once.
static void release_hold(const char *path) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "open %s for writing: %s", path, strerror(errno));
  char empty[96];
  snprintf(empty, sizeof(empty), "%s.empty", path);
  FILE *e = fopen(empty, "w");
  cr_assert_not_null(e, "create %s: %s", empty, strerror(errno));
  fclose(e);
  cr_assert_eq(rename(empty, path), 0, "rename %s over %s: %s", empty, path, strerror(errno));
  fclose(f);
}

Test(conformance, run_finishes_while_a_register_holds_the_register_lane) {
  lw_callable_handle_t hr = reg(CONF_K_RECORD);
  conf_log_t *log = conf_alloc(sizeof(*log));
  // The record kernel runs once first: a device compiler may finish a kernel's code at its
  // first run, under the same lock as its builds (PoCL does, docs/opencl.md), and that
  // compile would wait for the held build. The case is about a run beside a register.
  expect_chip_usable(hr, log, 6);
  char path[64];
  snprintf(path, sizeof(path), "/tmp/lw-conf-hold-%d-%d", (int)getpid(), conf_level());
  (void)unlink(path);
  char name[96];
  snprintf(name, sizeof(name), "conf_hold:%s", path);
  lw_callable_t c;
  conf_kernel_load(CONF_K_HOLD, name, &c);
  lw_handle_t *r = NULL;
  cr_assert_eq(conf_register_async(&c, &r), LW_OK, "%s", lw_last_error()->message);
  conf_kernel_free(&c);
  // The register cannot finish before the test opens the file; the run must not wait for it.
  expect_chip_usable(hr, log, 7);
  cr_assert_eq(log_count(log), 2);
  cr_assert_not(lw_handle_done(r), "the register finished before the test released it");
  release_hold(path);
  expect_ok(r, "held register");
  cr_assert_eq(unlink(path), 0);
  lw_handle_release(r);
}

// ---------------------------------------------------------------------------------------------
// §4.2 / §3.3: cancellation and handle rules

Test(conformance, cancel_of_a_queued_run_finishes_it_cancelled_and_it_never_runs) {
  lw_callable_handle_t hg = reg(CONF_K_GATE), hr = reg(CONF_K_RECORD);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  conf_log_t *log = conf_alloc(sizeof(*log));
  lw_handle_t *gate = start_gate(hg, g);
  conf_task_t t = record_task(hr, log, LW_TAG_NO_DEP, 1);
  lw_handle_t *queued = submit(&t);
  cr_assert_eq(lw_handle_cancel(queued), LW_OK);
  // Its task finishes while the gate run still holds the lane: it never waits for the kernel
  // ahead of it. (At L3 its handle then waits for the earlier run's handle.)
  conf_wait_settled(queued);
  cr_assert_eq(atomic_load(&g->open), 0u);
  cr_assert_not(lw_handle_done(gate), "the queued run's cancel touched the running one");
  atomic_store(&g->open, 1);
  expect_ok(gate, "the earlier run finishes normally");
  expect_status(queued, LW_CANCELLED, "cancelled queued run");
  uint32_t completed, failed;
  conf_run_counts(queued, &completed, &failed);
  cr_assert_eq(completed, 0);
  cr_assert_eq(failed, 1, "a cancelled task counts as failed");
  cr_assert_eq(log_count(log), 0, "the cancelled run's kernel ran");
  expect_chip_usable(hr, log, 2);
  cr_assert_eq(log_count(log), 1);
  lw_handle_release(queued);
  lw_handle_release(gate);
}

Test(conformance, cancel_of_a_running_run_finishes_it_cancelled_and_the_chip_stays_usable) {
  lw_callable_handle_t hg = reg(CONF_K_GATE), hr = reg(CONF_K_RECORD);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  conf_log_t *log = conf_alloc(sizeof(*log));
  lw_handle_t *gate = start_gate(hg, g);
  cr_assert_eq(lw_handle_cancel(gate), LW_OK);
  // The gate is never opened: only the cancel can end the kernel.
  expect_status(gate, LW_CANCELLED, "cancelled running run");
  cr_assert(strstr(lw_handle_error(gate)->message, "cancel"), "message: %s",
            lw_handle_error(gate)->message);
  // A second cancel, and a cancel after completion, change nothing.
  cr_assert_eq(lw_handle_cancel(gate), LW_NOT_FOUND);
  cr_assert_eq(lw_handle_wait(gate, 0), LW_CANCELLED, "a finished handle keeps its result");
  expect_chip_usable(hr, log, 3);
  lw_handle_release(gate);
}

Test(conformance, finished_handle_keeps_its_result_and_ignores_cancel) {
  lw_callable_handle_t hr = reg(CONF_K_RECORD);
  conf_log_t *log = conf_alloc(sizeof(*log));
  conf_task_t t = record_task(hr, log, LW_TAG_NO_DEP, 9);
  lw_handle_t *h = submit(&t);
  expect_ok(h, "record run");
  cr_assert(lw_handle_done(h));
  cr_assert_eq(lw_handle_cancel(h), LW_NOT_FOUND, "cancel after completion");
  cr_assert_eq(lw_handle_wait(h, 0), LW_OK, "waiting again returns the same result");
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_OK);
  cr_assert_null(lw_handle_error(h));
  cr_assert_eq(log_count(log), 1, "the run executed exactly once");
  lw_handle_release(h);
}

Test(conformance, timeout_finishes_a_run_deadline_exceeded_and_the_chip_stays_usable) {
  lw_callable_handle_t hg = reg(CONF_K_GATE), hr = reg(CONF_K_RECORD);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  conf_log_t *log = conf_alloc(sizeof(*log));
  conf_task_t t = gate_task(hg, g);
  // The gate never opens: only the timeout ends the run, whenever it passes.
  t.timeout_ns = 20 * MS;
  lw_handle_t *h = submit(&t);
  expect_status(h, LW_DEADLINE_EXCEEDED, "timed-out run");
  cr_assert_eq(atomic_load(&g->entered), 1u, "the kernel ran until the deadline stopped it");
  cr_assert(strstr(lw_handle_error(h)->message, "timeout"), "message: %s",
            lw_handle_error(h)->message);
  expect_chip_usable(hr, log, 4);
  lw_handle_release(h);
}

// ---------------------------------------------------------------------------------------------
// §3.4: tombstones and deferred free

Test(conformance, unregister_with_queued_work_tombstones_and_frees_after_the_last_run) {
  lw_callable_handle_t hg = reg(CONF_K_GATE);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  lw_handle_t *run1 = start_gate(hg, g);           // running
  conf_task_t t2 = gate_task(hg, g);
  lw_handle_t *run2 = submit(&t2);                  // accepted, queued behind run1
  // The unregister may still wait in the worker for run2 to be posted (L3): the same-image
  // register below is refused either way.
  lw_handle_t *unreg = NULL;
  cr_assert_eq(conf_unregister_async(hg, &unreg), LW_OK, "%s", lw_last_error()->message);

  // Tombstoned: new runs are refused at once.
  conf_task_t t3 = gate_task(hg, g);
  lw_handle_t *late = NULL;
  lw_error_t err;
  lw_status_t st = conf_run_async(&t3, 1, &late, &err);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "got %s: %s", lw_status_name(st), err.message);
  cr_assert(strstr(err.message, "pending unregister"), "message: %s", err.message);
  cr_assert_null(late);
  // So is a register of the same image (same digest) until the free.
  lw_callable_t same;
  conf_kernel_load(CONF_K_GATE, NULL, &same);
  lw_callable_handle_t dup = {0};
  st = conf_register(&same, &dup, &err);
  conf_kernel_free(&same);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "same-digest register: %s: %s", lw_status_name(st),
               err.message);
  cr_assert(strstr(err.message, "pending unregister"), "message: %s", err.message);
  cr_assert_eq(dup.id, 0);
  cr_assert_not(lw_handle_done(unreg), "the callable was freed while runs still pinned it");

  atomic_store(&g->open, 1);
  expect_ok(unreg, "unregister");
  cr_assert(conf_run_settled(run1) && conf_run_settled(run2),
            "the unregister finished before the runs that pinned its callable");
  expect_ok(run1, "run accepted before the unregister");
  expect_ok(run2, "run queued before the unregister");

  // The handle is released for good; the image registers again under a new handle.
  st = conf_run_async(&t3, 1, &late, &err);
  cr_assert_eq(st, LW_NOT_FOUND, "got %s: %s", lw_status_name(st), err.message);
  lw_callable_handle_t again = reg(CONF_K_GATE);
  cr_assert_neq(again.id, hg.id, "a released callable id came back");
  lw_handle_release(unreg);
  lw_handle_release(run1);
  lw_handle_release(run2);
}

// ---------------------------------------------------------------------------------------------
// §4.7: bad images

typedef struct bad_image {
  const char *what;
  lw_callable_t c;
  bool invalid_argument;  // the status is INVALID_ARGUMENT whatever the backend
} bad_image_t;

Test(conformance, bad_images_are_refused_with_a_clear_error_and_lose_nothing) {
  lw_callable_handle_t hr = reg(CONF_K_RECORD);
  conf_log_t *log = conf_alloc(sizeof(*log));
  // Bytes that are no image format at all.
  static const uint8_t garbage[64] = {0x00, 0x13, 0x37, 0xff, 0xfe, 0x01, 0x80, 0x7f};
  // A zstd frame header followed by junk: decoding fails before any backend sees it.
  static const uint8_t bad_zstd[16] = {0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58, 0xff, 0xff,
                                       0xff, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55};
  lw_callable_t no_entry;
  conf_kernel_load(CONF_K_RECORD, "conf_bad_entry", &no_entry);
  no_entry.entry = "lw_conf_no_such_entry";
  bad_image_t cases[] = {
      {"garbage bytes",
       {.name = "conf_bad_garbage", .image = garbage, .image_bytes = sizeof(garbage)},
       false},
      {"corrupt zstd frame",
       {.name = "conf_bad_zstd", .image = bad_zstd, .image_bytes = sizeof(bad_zstd)},
       true},
      {"missing entry point", no_entry, true},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    lw_callable_handle_t h = {0};
    lw_error_t err;
    memset(&err, 0, sizeof(err));
    lw_status_t st = conf_register(&cases[i].c, &h, &err);
    cr_assert_neq(st, LW_OK, "%s was registered", cases[i].what);
    if (cases[i].invalid_argument) {
      cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s: %s: %s", cases[i].what, lw_status_name(st),
                   err.message);
    }
    cr_assert(strstr(err.message, cases[i].c.name), "%s: the error does not name %s: %s",
              cases[i].what, cases[i].c.name, err.message);
    cr_assert_eq(h.id, 0, "%s: a refused register handed out a handle", cases[i].what);
    // Nothing was lost: the chip runs what it had.
    expect_chip_usable(hr, log, 10 + (int64_t)i);
  }
  conf_kernel_free(&no_entry);
}

// ---------------------------------------------------------------------------------------------
// §4.4: errors

Test(conformance, failed_run_reports_its_kernel_and_does_not_poison_the_next_run) {
  lw_callable_handle_t hf = reg(CONF_K_FAIL), hr = reg(CONF_K_RECORD);
  conf_log_t *log = conf_alloc(sizeof(*log));
  conf_log_t *carrier = conf_alloc(sizeof(*carrier));
  conf_task_t t = fail_task(hf, carrier, LW_TAG_NO_DEP, -5);
  lw_handle_t *h = submit(&t);
  expect_status(h, LW_TASK_FAILED, "failing run");
  cr_assert(strstr(lw_handle_error(h)->message, "conf_fail"), "the error does not name the kernel: %s",
            lw_handle_error(h)->message);
  cr_assert(strstr(lw_handle_error(h)->message, "-5"), "the error does not give the result: %s",
            lw_handle_error(h)->message);
  expect_chip_usable(hr, log, 6);
  lw_handle_release(h);
}

Test(conformance, failed_task_poisons_its_dependents_which_never_run) {
  if (!conf_level_has_dags()) {
    cr_skip("L%d runs hold one kernel and never depend on one another: error spread between "
            "dependent tasks is an L3 behaviour (L2 is covered by "
            "failed_run_reports_its_kernel_and_does_not_poison_the_next_run)",
            conf_level());
  }
  lw_callable_handle_t hg = reg(CONF_K_GATE), hf = reg(CONF_K_FAIL), hr = reg(CONF_K_RECORD);
  conf_gate_t *g = conf_alloc(sizeof(*g));
  conf_log_t *log = conf_alloc(sizeof(*log));
  // A gate holds the chip until every task is submitted: otherwise the failing task may fail
  // the run before its dependents are submitted, and a failed run refuses more tasks. Then
  // fail writes the log buffer (OUTPUT); record reads and writes it (INOUT): record depends on
  // fail, and a second record depends on the first.
  conf_task_t tasks[4] = {
      gate_task(hg, g),
      fail_task(hf, log, LW_TAG_OUTPUT, -7),
      record_task(hr, log, LW_TAG_INOUT, 1),
      record_task(hr, log, LW_TAG_INOUT, 2),
  };
  lw_handle_t *h = NULL;
  lw_error_t err;
  lw_status_t st = conf_run_async(tasks, 4, &h, &err);
  cr_assert_eq(st, LW_OK, "%s", err.message);
  atomic_store(&g->open, 1);
  expect_status(h, LW_TASK_FAILED, "run with a failing task");
  cr_assert(strstr(lw_handle_error(h)->message, "conf_fail"),
            "the first error does not name the failing kernel: %s",
            lw_handle_error(h)->message);
  uint32_t completed, failed;
  conf_run_counts(h, &completed, &failed);
  cr_assert_eq(completed, 1, "the gate");
  cr_assert_eq(failed, 3, "the failing task and its two dependents");
  cr_assert_eq(log_count(log), 0, "a dependent of the failed task ran");
  lw_handle_release(h);
  // One failed run does not poison the next.
  expect_chip_usable(hr, log, 8);
}

// ---------------------------------------------------------------------------------------------
// The level driver and the backend kernel table are compiled into this translation unit: the
// TSan build's Criterion stand-in (tests/tsan_shim) keeps main() and its test table in its
// header, so a test binary is one translation unit.

#include "backends.c"
#if LW_CONF_LEVEL == 2
#include "level_l2.c"
#elif LW_CONF_LEVEL == 3
#include "level_l3.c"
#else
#error "LW_CONF_LEVEL must be 2 or 3"
#endif
