// tests/child/test_signature.c — L2: a run whose argument counts differ from its callable's
// signature is refused by the submit call itself (INVALID_ARGUMENT naming the callable, the
// expected and the given counts), and its kernel never runs. A callable without a signature
// stays unchecked.
//
// "Never ran" is shown by order, not by time: the refused runs come first, then one valid run
// of the record kernel; the run lane is FIFO, so had a refused run been queued it would have
// logged before the valid one.
#include <string.h>

#include "child/chip_impl.h"
#include "lanes/error.h"
#include "child/chip_test_util.h"
#include "test_util.h"

TestSuite(chip_signature, .init = chip_setup, .fini = chip_teardown, .timeout = 60);

// The record kernel (tests/kernels/record.c) reads tensor[0] and scalar[0].
static const uint8_t k_record_sig[2] = {LW_PARAM_INOUT, LW_PARAM_SCALAR};

static lw_callable_handle_t reg_record(bool with_signature) {
  lw_callable_t c = lw_test_kernel("record");
  if (with_signature) {
    c.n_params = 2;
    c.param_dirs = k_record_sig;
  }
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

// args: `tensors` tensors (the first is the log), `scalars` scalars (the first is value).
static void make_args(lw_args_t *a, int64_t *log, size_t log_len, int tensors, int scalars,
                      uint64_t value) {
  static int64_t spare[4];
  lw_args_init(a);
  for (int i = 0; i < tensors; ++i) {
    void *p = i == 0 ? (void *)log : (void *)spare;
    uint64_t bytes = i == 0 ? log_len * sizeof(int64_t) : sizeof(spare);
    cr_assert_eq(lw_args_add_tensor(a, p, bytes, LW_TAG_INOUT), LW_OK);
  }
  for (int i = 0; i < scalars; ++i) cr_assert_eq(lw_args_add_scalar(a, i == 0 ? value : 0), LW_OK);
}

// Runs one valid record of value and checks it is the only thing the kernel ever logged.
static void expect_only_valid_run_logged(lw_callable_handle_t h, int64_t *log, size_t log_len) {
  lw_args_t ok;
  make_args(&ok, log, log_len, 1, 1, 77);
  LW_ASSERT_OK(lw_chip_run(chip, h, &ok, NULL, NULL));
  cr_assert_eq(log[0], 1, "a refused run reached the kernel (%ld records)", (long)log[0]);
  cr_assert_eq(log[1], 77);
}

typedef struct count_case {
  int tensors, scalars;
  const char *given;
} count_case_t;

static const count_case_t k_cases[] = {
    {2, 1, "given 2 tensors and 1 scalar"},  // too many tensors
    {0, 1, "given 0 tensors and 1 scalar"},  // too few tensors
    {1, 2, "given 1 tensor and 2 scalars"},  // too many scalars
    {1, 0, "given 1 tensor and 0 scalars"},  // too few scalars
};
enum { N_CASES = sizeof(k_cases) / sizeof(k_cases[0]) };

static void expect_refused(lw_status_t st, const char *what, const count_case_t *c) {
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s (%s): %s", what, c->given, lw_status_name(st));
  const char *msg = lw_last_error()->message;
  cr_assert(strstr(msg, "callable record expects 1 tensor and 1 scalar"), "%s: %s", what, msg);
  cr_assert(strstr(msg, c->given), "%s: %s", what, msg);
  cr_assert_eq(lw_last_error()->worker_id, lw_chip_device_id(chip));
}

Test(chip_signature, run_async_with_wrong_counts_is_refused_and_never_runs) {
  lw_callable_handle_t h = reg_record(true);
  int64_t log[8] = {0};
  for (int i = 0; i < N_CASES; ++i) {
    lw_args_t a;
    make_args(&a, log, 8, k_cases[i].tensors, k_cases[i].scalars, 100 + (uint64_t)i);
    lw_handle_t *hd = (lw_handle_t *)0x1;
    expect_refused(lw_chip_run_async(chip, h, &a, NULL, &hd), "run_async", &k_cases[i]);
    cr_assert_null(hd, "a refused submit hands out no handle");
  }
  // No pin was left behind by the refused runs.
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.pins, 0);
  expect_only_valid_run_logged(h, log, 8);
}

Test(chip_signature, sync_run_with_wrong_counts_is_refused_and_never_runs) {
  lw_callable_handle_t h = reg_record(true);
  int64_t log[8] = {0};
  for (int i = 0; i < N_CASES; ++i) {
    lw_args_t a;
    make_args(&a, log, 8, k_cases[i].tensors, k_cases[i].scalars, 100 + (uint64_t)i);
    expect_refused(lw_chip_run(chip, h, &a, NULL, NULL), "run", &k_cases[i]);
  }
  // NULL args are no tensors and no scalars.
  cr_assert_eq(lw_chip_run(chip, h, NULL, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "given 0 tensors and 0 scalars"), "%s",
            lw_last_error()->message);
  expect_only_valid_run_logged(h, log, 8);
}

Test(chip_signature, refused_run_leaves_unregister_free_to_proceed) {
  // The check runs on a pinned slot: the pin a refused run took must not keep the callable.
  lw_callable_handle_t h = reg_record(true);
  int64_t log[8] = {0};
  lw_args_t a;
  make_args(&a, log, 8, 2, 1, 1);
  cr_assert_eq(lw_chip_run(chip, h, &a, NULL, NULL), LW_INVALID_ARGUMENT);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 0, "the slot was not freed");
}

Test(chip_signature, callable_without_signature_is_not_checked) {
  lw_callable_handle_t h = reg_record(false);
  int64_t log[8] = {0};
  lw_args_t a;
  // Extra tensors and scalars: the record kernel ignores them (tests use them for tags).
  make_args(&a, log, 8, 3, 2, 5);
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  cr_assert_eq(log[0], 1);
  cr_assert_eq(log[1], 5);
}

Test(chip_signature, same_image_with_and_without_signature_are_two_callables) {
  // The signature is part of the digest: each registration keeps its own, and checks its own.
  lw_callable_handle_t checked = reg_record(true);
  lw_callable_handle_t unchecked = reg_record(false);
  int64_t log[8] = {0};
  lw_args_t a;
  make_args(&a, log, 8, 2, 1, 9);
  cr_assert_eq(lw_chip_run(chip, checked, &a, NULL, NULL), LW_INVALID_ARGUMENT);
  LW_ASSERT_OK(lw_chip_run(chip, unchecked, &a, NULL, NULL));
  cr_assert_eq(log[0], 1);
  cr_assert_eq(log[1], 9);
}
