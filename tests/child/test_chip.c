// tests/child/test_chip.c — the L2 chip worker: lanes, overlap, pins and tombstones,
// cancellation, errors, results.
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "child/chip_impl.h"
#include "lanework/kernel.h"
#include "lanes/error.h"
#include "child/chip_test_util.h"
#include "test_util.h"

TestSuite(chip, .init = chip_setup, .fini = chip_teardown, .timeout = 60);

static void record_args(lw_args_t *a, int64_t *log, size_t log_len, uint64_t value) {
  lw_args_init(a);
  cr_assert_eq(lw_args_add_tensor(a, log, log_len * sizeof(int64_t), LW_TAG_INOUT), LW_OK);
  cr_assert_eq(lw_args_add_scalar(a, value), LW_OK);
}

Test(chip, run_async_executes_fifo_on_one_run_lane) {
  lw_callable_handle_t hr = reg_kernel("record");
  enum { N = 64 };
  int64_t log[N + 1] = {0};
  lw_handle_t *hs[N];
  for (int i = 0; i < N; ++i) {
    lw_args_t a;
    record_args(&a, log, N + 1, (uint64_t)i + 1);
    LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &hs[i]));
  }
  for (int i = N - 1; i >= 0; --i) {
    LW_ASSERT_OK(lw_handle_wait(hs[i], LW_WAIT_FOREVER));
    // Handles finish in order too: when a later one is done, every earlier one is.
    for (int j = 0; j < i; ++j) cr_assert(lw_handle_done(hs[j]));
  }
  cr_assert_eq(log[0], N);
  for (int i = 0; i < N; ++i) cr_assert_eq(log[1 + i], i + 1, "position %d ran %ld", i, log[1 + i]);
  for (int i = 0; i < N; ++i) lw_handle_release(hs[i]);
}

typedef struct sync_ctx {
  lw_callable_handle_t hr;
  int64_t *log;
  lw_status_t st;
} sync_ctx_t;

static void *sync_run_thread(void *arg) {
  sync_ctx_t *c = arg;
  lw_args_t a;
  record_args(&a, c->log, 8, 2);
  c->st = lw_chip_run(chip, c->hr, &a, NULL, NULL);
  return NULL;
}

Test(chip, sync_run_waits_behind_prior_async_run) {
  lw_callable_handle_t hg = reg_kernel("gate");
  lw_callable_handle_t hr = reg_kernel("record");
  gate_t g = {0, 0};
  int64_t log[8] = {0};
  lw_handle_t *gate_run = start_gate(hg, &g);
  lw_args_t a;
  record_args(&a, log, 8, 1);
  lw_handle_t *first = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &first));
  sync_ctx_t c = {hr, log, LW_INTERNAL};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, sync_run_thread, &c), 0);
  lw_test_wait_nonzero(&g.entered);
  cr_assert_eq(log[0], 0, "nothing may run while the gate run holds the lane");
  atomic_store(&g.open, 1);
  pthread_join(t, NULL);
  LW_ASSERT_OK(c.st);
  cr_assert(lw_handle_done(gate_run), "the sync run returned before the earlier gate run");
  cr_assert(lw_handle_done(first), "the sync run returned before the earlier async run");
  cr_assert_eq(log[0], 2);
  cr_assert_eq(log[1], 1, "the async run submitted first must run first");
  cr_assert_eq(log[2], 2);
  lw_handle_release(gate_run);
  lw_handle_release(first);
}

Test(chip, register_async_completes_while_a_run_is_still_running) {
  lw_callable_handle_t hg = reg_kernel("gate");
  gate_t g = {0, 0};
  lw_handle_t *run = start_gate(hg, &g);
  lw_test_wait_nonzero(&g.entered);

  lw_callable_t big = lw_test_kernel("big_vector_add");
  lw_handle_t *reg = NULL;
  LW_ASSERT_OK(lw_chip_register_async(chip, &big, &reg));
  lw_callable_free_loaded(&big);  // the async register copied the image
  LW_ASSERT_OK(lw_handle_wait(reg, LW_WAIT_FOREVER));
  cr_assert_not(lw_handle_done(run), "the register must not wait for the run lane");
  lw_callable_handle_t h2;
  LW_ASSERT_OK(lw_handle_callable(reg, &h2));
  cr_assert_neq(h2.id, 0);

  atomic_store(&g.open, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  lw_handle_release(run);
  lw_handle_release(reg);
  LW_ASSERT_OK(lw_chip_unregister(chip, h2));
}

Test(chip, unregister_with_runs_in_flight_tombstones_and_defers_the_free) {
  lw_callable_handle_t hg = reg_kernel("gate");
  gate_t g = {0, 0};
  lw_handle_t *run1 = start_gate(hg, &g);
  lw_handle_t *run2 = start_gate(hg, &g);
  lw_test_wait_nonzero(&g.entered);

  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_chip_unregister_async(chip, hg, &unreg));

  // New runs are refused while the callable waits for its runs.
  lw_handle_t *late = NULL;
  lw_status_t st = lw_chip_run_async(chip, hg, NULL, NULL, &late);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "got %s", lw_status_name(st));
  cr_assert(strstr(lw_last_error()->message, "pending unregister"), "message: %s",
            lw_last_error()->message);
  cr_assert_null(late);

  // So is a register of the same image, until the free.
  lw_callable_t gate_img = lw_test_kernel("gate");
  lw_handle_t *rereg = NULL;
  LW_ASSERT_OK(lw_chip_register_async(chip, &gate_img, &rereg));
  cr_assert_eq(lw_handle_wait(rereg, LW_WAIT_FOREVER), LW_FAILED_PRECONDITION);
  cr_assert(strstr(lw_handle_error(rereg)->message, "pending unregister"), "message: %s",
            lw_handle_error(rereg)->message);
  lw_handle_release(rereg);

  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.tombstoned, 1);
  cr_assert_eq(stats.pins, 2);
  cr_assert_not(lw_handle_done(unreg), "the unregister finished while runs were pinned");

  atomic_store(&g.open, 1);
  LW_ASSERT_OK(lw_handle_wait(unreg, LW_WAIT_FOREVER));
  cr_assert(lw_handle_done(run1) && lw_handle_done(run2),
            "the unregister finished before the runs that pinned its callable");
  LW_ASSERT_OK(lw_handle_wait(run1, 0));
  LW_ASSERT_OK(lw_handle_wait(run2, 0));
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 0, "the slot was not freed");
  cr_assert_eq(stats.handles_live, 0);

  // The handle is gone now, and the image can be registered again.
  st = lw_chip_run_async(chip, hg, NULL, NULL, &late);
  cr_assert_eq(st, LW_NOT_FOUND, "got %s", lw_status_name(st));
  lw_callable_handle_t again;
  LW_ASSERT_OK(lw_chip_register(chip, &gate_img, &again));
  cr_assert_neq(again.id, hg.id, "a released id must never come back");
  lw_callable_free_loaded(&gate_img);
  lw_handle_release(unreg);
  lw_handle_release(run1);
  lw_handle_release(run2);
}

Test(chip, unpinned_count_reaching_zero_frees_nothing_while_registered) {
  lw_callable_handle_t hr = reg_kernel("record");
  int64_t log[4] = {0};
  lw_args_t a;
  record_args(&a, log, 4, 7);
  LW_ASSERT_OK(lw_chip_run(chip, hr, &a, NULL, NULL));
  // The run finishes its handle, then drops its pin: wait for the pin to go.
  lw_registry_stats_t stats;
  do {
    lw__registry_stats(chip->registry, &stats);
  } while (stats.pins != 0);
  cr_assert_eq(stats.slots_used, 1, "the callable was freed when its last pin went");
  LW_ASSERT_OK(lw_chip_run(chip, hr, &a, NULL, NULL));
  cr_assert_eq(log[0], 2);
}

Test(chip, same_digest_registered_twice_shares_one_refcounted_slot) {
  lw_callable_handle_t h1 = reg_kernel("vector_add");
  lw_callable_handle_t h2 = reg_kernel("vector_add");
  cr_assert_neq(h1.id, h2.id);
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 1);
  cr_assert_eq(stats.handles_live, 2);

  LW_ASSERT_OK(lw_chip_unregister(chip, h1));
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 1, "the other handle still holds the slot");
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {0};
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, sizeof(a), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, sizeof(b), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, sizeof(c), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_chip_run(chip, h2, &args, NULL, NULL));
  cr_assert_eq(c[3], 44.0f);
  cr_assert_eq(lw_chip_run(chip, h1, &args, NULL, NULL), LW_NOT_FOUND);
  LW_ASSERT_OK(lw_chip_unregister(chip, h2));
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 0);
}

Test(chip, double_unregister_and_released_handles_give_not_found) {
  lw_callable_handle_t h = reg_kernel("noop");
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
  cr_assert_eq(lw_chip_unregister(chip, h), LW_NOT_FOUND);
  cr_assert(strstr(lw_last_error()->message, "unknown or released"), "message: %s",
            lw_last_error()->message);
  lw_callable_handle_t bogus = {0xdeadbeef00000001ull};
  cr_assert_eq(lw_chip_run(chip, bogus, NULL, NULL, NULL), LW_NOT_FOUND);
  lw_callable_handle_t zero = {0};
  cr_assert_eq(lw_chip_run(chip, zero, NULL, NULL, NULL), LW_NOT_FOUND);
}

Test(chip, cancel_of_running_repeat_vector_add_finishes_cancelled_and_chip_stays_usable) {
  lw_callable_handle_t hv = reg_kernel("repeat_vector_add");
  enum { N = 1 << 16 };
  float *a = calloc(N, sizeof(float)), *b = calloc(N, sizeof(float));
  float *c = calloc(N, sizeof(float));
  for (int i = 0; i < N; ++i) {
    a[i] = (float)i + 1.0f;
    b[i] = 2.0f;
  }
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, N * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, N * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, N * sizeof(float), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, 100000000));  // minutes if never cancelled
  uint64_t idle_generation = atomic_load(&chip->cancel_word);
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hv, &args, NULL, &h));
  // The run lane stores a fresh generation when the kernel starts.
  while (atomic_load(&chip->cancel_word) == idle_generation) lw_test_sleep_us(50);
  LW_ASSERT_OK(lw_handle_cancel(h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CANCELLED);
  cr_assert(strstr(lw_handle_error(h)->message, "while running"), "message: %s",
            lw_handle_error(h)->message);
  cr_assert_eq(lw_handle_cancel(h), LW_NOT_FOUND, "cancel after completion must be NOT_FOUND");
  cr_assert_eq(lw_handle_wait(h, 0), LW_CANCELLED, "a finished handle keeps its status");
  // A cancelled run has its times: the kernel ran until it saw the stop.
  lw_run_timing_t t = {0};
  cr_assert_eq(lw_handle_timing(h, &t), LW_CANCELLED, "the timing call returns the run's status");
  cr_assert_gt(t.kernel_wall_ns, 0, "the kernel ran before it stopped");
  cr_assert_geq(t.host_wall_ns, t.queue_ns + t.kernel_wall_ns);
  lw_handle_release(h);

  // The next run is correct: exact results.
  lw_args_t once = args;
  once.scalar[0] = 3;
  memset(c, 0, N * sizeof(float));
  LW_ASSERT_OK(lw_chip_run(chip, hv, &once, NULL, NULL));
  for (int i = 0; i < N; ++i) cr_assert_eq(c[i], a[i] + b[i], "index %d", i);
  free(a);
  free(b);
  free(c);
}

Test(chip, cancel_of_queued_run_finishes_cancelled_without_running) {
  lw_callable_handle_t hg = reg_kernel("gate");
  lw_callable_handle_t hr = reg_kernel("record");
  gate_t g = {0, 0};
  int64_t log[4] = {0};
  lw_handle_t *gate_run = start_gate(hg, &g);
  lw_args_t a;
  record_args(&a, log, 4, 9);
  lw_handle_t *queued = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &queued));
  LW_ASSERT_OK(lw_handle_cancel(queued));
  // Finished by the cancel itself, while the gate run still holds the lane: the caller does
  // not wait for the kernel ahead of it.
  cr_assert_eq(lw_handle_wait(queued, LW_WAIT_FOREVER), LW_CANCELLED);
  cr_assert(strstr(lw_handle_error(queued)->message, "before it started"), "message: %s",
            lw_handle_error(queued)->message);
  cr_assert_not(lw_handle_done(gate_run), "the gate run is still running");
  cr_assert_eq(lw_handle_cancel(queued), LW_NOT_FOUND, "a second cancel finds it finished");
  lw_run_timing_t t = {.queue_ns = 1, .kernel_wall_ns = 1};
  cr_assert_eq(lw_handle_timing(queued, &t), LW_CANCELLED);
  cr_assert_eq(t.queue_ns, 0, "it never started");
  cr_assert_eq(t.kernel_wall_ns, 0, "it never ran");
  atomic_store(&g.open, 1);
  LW_ASSERT_OK(lw_handle_wait(gate_run, LW_WAIT_FOREVER));
  cr_assert_eq(log[0], 0, "a cancelled queued run must not execute");
  lw_handle_release(queued);
  lw_handle_release(gate_run);
}

// A gate run whose kernel returns `rc_when_stopped` when it sees the stop.
static lw_handle_t *start_bailing_gate(lw_callable_handle_t hg, gate_t *g, uint64_t rc_when_stopped,
                                       int64_t timeout_ns) {
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)&g->open, sizeof(g->open), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)&g->entered, sizeof(g->entered), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&a, rc_when_stopped));
  lw_run_config_t cfg;
  lw_run_config_default(&cfg);
  cfg.timeout_ns = timeout_ns;
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hg, &a, &cfg, &h));
  return h;
}

Test(chip, a_cancelled_kernel_that_returns_0_finishes_cancelled_not_ok) {
  lw_callable_handle_t hg = reg_kernel("gate");
  gate_t g = {0, 0};
  lw_handle_t *h = start_bailing_gate(hg, &g, 0, 0);
  lw_test_wait_nonzero(&g.entered);
  LW_ASSERT_OK(lw_handle_cancel(h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CANCELLED,
               "a kernel that bailed out on the stop and returned 0 left partial outputs");
  cr_assert(strstr(lw_handle_error(h)->message, "kernel returned 0"), "message: %s",
            lw_handle_error(h)->message);
  lw_handle_release(h);
  // The chip stays usable: the same kernel runs to completion.
  atomic_store(&g.open, 1);
  h = start_bailing_gate(hg, &g, 0, 0);
  LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
  lw_handle_release(h);
}

Test(chip, a_timed_out_kernel_that_returns_0_finishes_deadline_exceeded) {
  lw_callable_handle_t hg = reg_kernel("gate");
  gate_t g = {0, 0};
  lw_handle_t *h = start_bailing_gate(hg, &g, 0, 20ll * 1000 * 1000);
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_DEADLINE_EXCEEDED);
  cr_assert(strstr(lw_handle_error(h)->message, "timeout"), "message: %s",
            lw_handle_error(h)->message);
  lw_handle_release(h);
}

Test(chip, a_timeout_of_int64_max_does_not_overflow_and_the_run_completes) {
  lw_callable_handle_t hs = reg_kernel("spin");
  lw_args_t a;
  lw_args_init(&a);
  // 20 ms: long enough for the watchdog to fire on an overflowed (past) deadline.
  LW_ASSERT_OK(lw_args_add_scalar(&a, 20000));
  lw_run_config_t cfg;
  lw_run_config_default(&cfg);
  cfg.timeout_ns = INT64_MAX;
  LW_ASSERT_OK(lw_chip_run(chip, hs, &a, &cfg, NULL));
}

Test(chip, cancels_racing_the_lane_finish_every_run_once_and_ok_runs_all_ran) {
  lw_callable_handle_t hr = reg_kernel("record");
  enum { N = 128 };
  int64_t *log = calloc(N + 1, sizeof(int64_t));
  lw_handle_t *h[N];
  for (int i = 0; i < N; ++i) {
    lw_args_t a;
    record_args(&a, log, N + 1, (uint64_t)i);
    LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &h[i]));
    // Every other run is cancelled while the lane may be starting it: the lane and the cancel
    // race for the run's phase, and exactly one of them finishes it.
    if (i % 2) (void)lw_handle_cancel(h[i]);
  }
  bool ran[N] = {false};
  int n_ok = 0;
  for (int i = 0; i < N; ++i) {
    lw_status_t st = lw_handle_wait(h[i], LW_WAIT_FOREVER);
    cr_assert(st == LW_OK || (i % 2 && st == LW_CANCELLED), "run %d: %s", i, lw_status_name(st));
    if (st == LW_OK) n_ok++;
  }
  for (int64_t k = 0; k < log[0]; ++k) ran[log[1 + k]] = true;
  for (int i = 0; i < N; ++i) {
    if (lw_handle_status(h[i]) == LW_OK) cr_assert(ran[i], "run %d finished OK without running", i);
    lw_handle_release(h[i]);
  }
  cr_assert_geq(log[0], n_ok);
  free(log);
}

Test(chip, stale_cancel_does_not_hit_the_next_run) {
  lw_callable_handle_t hr = reg_kernel("record");
  int64_t log[8] = {0};
  lw_args_t a;
  record_args(&a, log, 8, 1);
  lw_handle_t *first = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &first));
  LW_ASSERT_OK(lw_handle_wait(first, LW_WAIT_FOREVER));
  uint64_t stale_generation = atomic_load(&chip->cancel_word);
  // A canceller that loaded the first run's generation fires after it finished.
  record_args(&a, log, 8, 2);
  LW_ASSERT_OK(lw_chip_run(chip, hr, &a, NULL, NULL));
  cr_assert_not(lw__cancel_request(&chip->cancel_word, stale_generation),
                "a stale generation must not match a later run");
  cr_assert_eq(lw_handle_cancel(first), LW_NOT_FOUND);
  cr_assert_eq(log[0], 2);
  lw_handle_release(first);
}

Test(chip, fail_kernel_surfaces_task_failed_with_its_code) {
  lw_callable_handle_t hf = reg_kernel("fail");
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_scalar(&a, (uint64_t)(int64_t)-3));
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hf, &a, NULL, &h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_TASK_FAILED);
  const lw_error_t *e = lw_handle_error(h);
  cr_assert_not_null(e);
  cr_assert_eq(e->code, LW_TASK_FAILED);
  cr_assert(strstr(e->message, "returned -3"), "message: %s", e->message);
  cr_assert(strstr(e->message, "fail"), "the message names the kernel: %s", e->message);
  lw_handle_release(h);
  // Sync form: the thread's last error says the same.
  cr_assert_eq(lw_chip_run(chip, hf, &a, NULL, NULL), LW_TASK_FAILED);
  cr_assert(strstr(lw_last_error()->message, "returned -3"));
}

Test(chip, run_timeout_cancels_and_reports_deadline_exceeded) {
  lw_callable_handle_t hs = reg_kernel("spin");
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_scalar(&a, 60ull * 1000 * 1000));  // a minute
  lw_run_config_t cfg;
  lw_run_config_default(&cfg);
  cfg.timeout_ns = 20ll * 1000 * 1000;
  lw_status_t st = lw_chip_run(chip, hs, &a, &cfg, NULL);
  cr_assert_eq(st, LW_DEADLINE_EXCEEDED, "got %s: %s", lw_status_name(st), lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "timeout"), "message: %s", lw_last_error()->message);
  // The next run without a timeout is unaffected.
  a.scalar[0] = 10;
  LW_ASSERT_OK(lw_chip_run(chip, hs, &a, NULL, NULL));
}

Test(chip, vector_add_matches_reference_exactly) {
  lw_callable_handle_t hv = reg_kernel("vector_add");
  enum { N = 100003 };
  float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
  float *c = calloc(N, sizeof(float));
  for (int i = 0; i < N; ++i) {
    a[i] = sinf((float)i);
    b[i] = (float)(i % 97) * 0.125f;
  }
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, N * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, N * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, N * sizeof(float), LW_TAG_OUTPUT));
  lw_run_timing_t t;
  LW_ASSERT_OK(lw_chip_run(chip, hv, &args, NULL, &t));
  float max_diff = 0;
  for (int i = 0; i < N; ++i) max_diff = fmaxf(max_diff, fabsf(c[i] - (a[i] + b[i])));
  cr_assert_eq(max_diff, 0.0f);
  cr_assert_geq(t.host_wall_ns, t.kernel_wall_ns);
  free(a);
  free(b);
  free(c);
}

Test(chip, big_vector_add_with_prepare_matches_reference_exactly) {
  lw_callable_handle_t hv = reg_kernel("big_vector_add");
  enum { N = 4097 };
  float a[N], b[N], c[N];
  for (int i = 0; i < N; ++i) {
    a[i] = (float)i * 0.5f;
    b[i] = (float)(N - i);
    c[i] = -1;
  }
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, sizeof(a), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, sizeof(b), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, sizeof(c), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_chip_run(chip, hv, &args, NULL, NULL));
  for (int i = 0; i < N; ++i) cr_assert_eq(c[i], a[i] + b[i], "index %d", i);
}

Test(chip, gemm_matches_reference) {
  lw_callable_handle_t hg = reg_kernel("gemm");
  enum { M = 67, K = 45, NN = 71 };
  float *A = malloc(M * K * sizeof(float)), *B = malloc(K * NN * sizeof(float));
  float *C = calloc(M * NN, sizeof(float));
  // Small integers: every partial sum is exact in float, so any summation order must agree.
  for (int i = 0; i < M * K; ++i) A[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < K * NN; ++i) B[i] = (float)(i % 7) - 3.0f;
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, A, M * K * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, B, K * NN * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, C, M * NN * sizeof(float), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, M));
  LW_ASSERT_OK(lw_args_add_scalar(&args, NN));
  LW_ASSERT_OK(lw_args_add_scalar(&args, K));
  LW_ASSERT_OK(lw_chip_run(chip, hg, &args, NULL, NULL));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < NN; ++j) {
      float ref = 0;
      for (int k = 0; k < K; ++k) ref += A[i * K + k] * B[k * NN + j];
      cr_assert_eq(C[i * NN + j], ref, "C[%d][%d] = %f, want %f", i, j, C[i * NN + j], ref);
    }
  }
  free(A);
  free(B);
  free(C);
}

static void expect_register_error(const lw_callable_t *c, lw_status_t want, const char *needle) {
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, c, &h);
  cr_assert_eq(st, want, "got %s (%s)", lw_status_name(st), lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, needle), "message '%s' lacks '%s'",
            lw_last_error()->message, needle);
}

Test(chip, corrupt_images_and_failing_prepare_give_clear_errors) {
  static const unsigned char bad_zstd[] = {0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0x00, 0x13, 0x37};
  lw_callable_t c = {.name = "bad_zstd", .image = bad_zstd, .image_bytes = sizeof(bad_zstd)};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "zstd");

  static const char text[] = "this is not an ELF image at all, just text";
  c = (lw_callable_t){.name = "text", .image = text, .image_bytes = sizeof(text)};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "ELF");

  lw_callable_t no_entry = lw_test_kernel("no_entry");
  expect_register_error(&no_entry, LW_INVALID_ARGUMENT, "lw_kernel_main");
  lw_callable_free_loaded(&no_entry);

  lw_callable_t bad_prep = lw_test_kernel("bad_prepare");
  expect_register_error(&bad_prep, LW_TASK_FAILED, "prepare");
  cr_assert(strstr(lw_last_error()->message, "-7"), "message: %s", lw_last_error()->message);
  lw_callable_free_loaded(&bad_prep);

  // Nothing was left behind, and the chip still works.
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 0);
  lw_callable_handle_t h = reg_kernel("noop");
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
}

Test(chip, sim_refuses_opencl_and_spirv_images_naming_backend_callable_and_format) {
  static const char src[] = "__kernel void k(__global int *a) { a[0] = 1; }";
  lw_callable_t c = {.name = "src_kernel", .image = src, .image_bytes = sizeof(src)};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "backend sim cannot load callable src_kernel");
  cr_assert(strstr(lw_last_error()->message, "OpenCL C (detected)"), "%s",
            lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "sim loads: ELF"), "%s", lw_last_error()->message);

  static const unsigned char spirv[8] = {0x03, 0x02, 0x23, 0x07, 0, 0, 1, 0};
  c = (lw_callable_t){.name = "il", .image = spirv, .image_bytes = sizeof(spirv)};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "image format is SPIR-V (detected)");

  c = (lw_callable_t){.name = "src_kernel", .image = src, .image_bytes = sizeof(src),
                      .format = LW_IMAGE_OPENCL_C, .build_options = "-DN=4"};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "image format is OpenCL C (sim loads");

  // An ELF image given as another format is checked as that format.
  lw_callable_t elf_as_spirv = lw_test_kernel("noop");
  elf_as_spirv.format = LW_IMAGE_SPIRV;
  expect_register_error(&elf_as_spirv, LW_INVALID_ARGUMENT, "not a SPIR-V module");
  elf_as_spirv.format = LW_IMAGE_ELF;
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &elf_as_spirv, &h));
  lw_callable_free_loaded(&elf_as_spirv);
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 1, "only the ELF register loaded anything");
}

Test(chip, launch_geometry_reaches_the_sim_kernel_in_its_context_and_args) {
  lw_callable_handle_t h = reg_kernel("launch_probe");
  uint64_t out[16] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  const uint64_t g[3] = {4096, 32, 0};
  const uint64_t l[3] = {256, 8, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 2, g, l));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  const uint64_t want[16] = {2, 4096, 32, 0, 256, 8, 0, LW_KERNEL_ABI_VERSION,
                             2, 4096, 32, 0, 256, 8, 0, 1};
  for (int i = 0; i < 16; ++i) cr_assert_eq(out[i], want[i], "out[%d] = %lu", i, out[i]);

  // Without geometry the kernel sees dims 0.
  memset(out, 0, sizeof(out));
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  cr_assert_eq(out[15], 1u, "the kernel ran");
  cr_assert_eq(out[0], 0u);
  cr_assert_eq(out[8], 0u);

  // A hand-filled bad geometry is refused at submit.
  a.launch.dims = 1;
  a.launch.global[0] = 0;
  cr_assert_eq(lw_chip_run(chip, h, &a, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "global[0] is 0"), "%s", lw_last_error()->message);
}

Test(chip, opening_a_backend_this_build_lacks_says_unavailable_and_what_to_install) {
  lw_chip_config_t cc;
  lw_chip_config_default(&cc);
  strcpy(cc.backend, "opencl");
  lw_chip_t *other = NULL;
  lw_error_t err;
  lw_status_t st = lw__chip_open(&cc, &other, &err);
  if (lw__backend_find("opencl") != NULL) {
    // Built with OpenCL: the backend opens, or says why the machine cannot (no platform).
    cr_assert(st == LW_OK || st == LW_UNAVAILABLE, "%s", err.message);
    if (st == LW_UNAVAILABLE) cr_assert(strstr(err.message, "install"), "%s", err.message);
    lw_chip_close(other);
    return;
  }
  cr_assert_eq(st, LW_UNAVAILABLE, "%s", err.message);
  cr_assert_null(other);
  cr_assert(strstr(err.message, "ocl-icd-opencl-dev"), "%s", err.message);
}

Test(chip, bad_arguments_are_rejected_with_messages) {
  lw_callable_handle_t h = reg_kernel("noop");
  lw_handle_t *out = NULL;
  cr_assert_eq(lw_chip_run_async(NULL, h, NULL, NULL, &out), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_chip_run_async(chip, h, NULL, NULL, NULL), LW_INVALID_ARGUMENT);
  lw_args_t a;
  lw_args_init(&a);
  a.n_tensors = LW_MAX_TENSORS + 1;  // filled by hand, wrongly
  cr_assert_eq(lw_chip_run_async(chip, h, &a, NULL, &out), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "16"), "the limit is named: %s",
            lw_last_error()->message);
  lw_run_config_t cfg;
  lw_run_config_default(&cfg);
  cfg.timeout_ns = -5;
  cr_assert_eq(lw_chip_run_async(chip, h, NULL, &cfg, &out), LW_INVALID_ARGUMENT);
  lw_chip_config_t cc;
  lw_chip_config_default(&cc);
  strcpy(cc.backend, "cuda9");
  lw_chip_t *other = NULL;
  cr_assert_eq(lw_chip_open(&cc, &other), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "cuda9"));
  cr_assert_null(other);
}

// DESIGN §9: the chip's internal entry points (used by the chip child) fill the caller's
// err and leave the thread-local last error alone; the public ones set it, with the same
// message, exactly when they fail.
Test(chip, internal_calls_fill_err_and_public_calls_set_the_last_error) {
  lw_chip_config_t cc;
  lw_chip_config_default(&cc);
  strcpy(cc.backend, "cuda9");
  lw_chip_t *other = NULL;
  lw_error_t err;
  (void)lw__fail(LW_POISONED, "set by the test");
  cr_assert_eq(lw__chip_open(&cc, &other, &err), LW_INVALID_ARGUMENT);
  cr_assert_null(other);
  char want[128];
  snprintf(want, sizeof(want), "chip_open: unknown backend 'cuda9' (known: %s)",
           lw__backend_names());
  cr_assert_str_eq(err.message, want);
  cr_assert(strncmp(lw__backend_names(), "sim", 3) == 0);
  lw_chip_submit_opts_t opts = {0};
  lw_handle_t *h = NULL;
  cr_assert_eq(lw__chip_register_async_opts(chip, NULL, &opts, &h, &err), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(err.message, "register: chip, callable and out must be set");
  lw_callable_handle_t bogus = {0xdeadbeef00000001ull};
  cr_assert_eq(lw__chip_unregister_async_opts(chip, bogus, &opts, &h, &err), LW_NOT_FOUND);
  cr_assert(strstr(err.message, "unknown or released"), "message: %s", err.message);
  cr_assert_eq(err.worker_id, lw_chip_device_id(chip));
  cr_assert_null(h);
  cr_assert_eq(lw_last_error()->code, LW_POISONED);
  cr_assert_str_eq(lw_last_error()->message, "set by the test");

  cr_assert_eq(lw_chip_open(&cc, &other), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message, want);
  cr_assert_eq(lw_chip_register_async(chip, NULL, &h), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message, "register: chip, callable and out must be set");
  cr_assert_eq(lw_chip_unregister_async(chip, bogus, &h), LW_NOT_FOUND);
  cr_assert(strstr(lw_last_error()->message, "unknown or released"), "message: %s",
            lw_last_error()->message);
}

Test(chip, handles_outlive_the_chip_and_close_finishes_queued_runs) {
  lw_callable_handle_t hr = reg_kernel("record");
  int64_t log[40] = {0};
  lw_handle_t *hs[32];
  for (int i = 0; i < 32; ++i) {
    lw_args_t a;
    record_args(&a, log, 40, (uint64_t)i);
    LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &hs[i]));
  }
  lw_chip_close(chip);
  chip = NULL;
  for (int i = 0; i < 32; ++i) {
    cr_assert(lw_handle_done(hs[i]));
    LW_ASSERT_OK(lw_handle_wait(hs[i], 0));
    lw_handle_release(hs[i]);
  }
  cr_assert_eq(log[0], 32);
  LW_ASSERT_OK(lw_chip_open(NULL, &chip));  // for the fixture's close
}
