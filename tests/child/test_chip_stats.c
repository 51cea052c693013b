// tests/child/test_chip_stats.c — lw_chip_stats at L2: runs counted once by outcome (OK, a
// failing kernel, a run cancelled while queued, one cancelled while running), registers and
// unregisters, the run lane's queue depth, and the struct_size contract.
#include <stddef.h>

#include "child/chip_impl.h"
#include "lanework/kernel.h"
#include "lanework/stats.h"
#include "child/chip_test_util.h"
#include "test_util.h"

TestSuite(chip_stats, .init = chip_setup, .fini = chip_teardown, .timeout = 60);

static lw_chip_stats_t stats_now(void) {
  lw_chip_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  LW_ASSERT_OK(lw_chip_stats(chip, &s));
  return s;
}

// A record run; without its scalar the record kernel returns -22 (the run fails).
static lw_handle_t *start_record(lw_callable_handle_t hr, int64_t *log, bool with_scalar) {
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, log, 8 * sizeof(int64_t), LW_TAG_INOUT));
  if (with_scalar) LW_ASSERT_OK(lw_args_add_scalar(&a, 7));
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hr, &a, NULL, &h));
  return h;
}

Test(chip_stats, each_run_counts_once_by_outcome_and_the_queue_drains_to_zero) {
  lw_callable_handle_t hg = reg_kernel("gate");
  lw_callable_handle_t hr = reg_kernel("record");
  int64_t log[8] = {0};
  gate_t g = {0, 0};
  // The gate holds the lane: three records and a failing one queue behind it, and one of the
  // queued records is cancelled (withdrawn without running).
  lw_handle_t *gate_run = start_gate(hg, &g);
  lw_handle_t *ok[3];
  for (int i = 0; i < 3; ++i) ok[i] = start_record(hr, log, true);
  lw_handle_t *bad = start_record(hr, log, false);
  lw_handle_t *withdrawn = start_record(hr, log, true);
  lw_test_wait_nonzero(&g.entered);
  LW_ASSERT_OK(lw_handle_cancel(withdrawn));
  cr_assert_eq(lw_handle_wait(withdrawn, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_chip_stats_t s = stats_now();
  cr_assert_eq(s.queue_depth, 5u, "the gate and four queued runs");
  cr_assert_eq(s.queue_depth_max, 6u);
  cr_assert_eq(s.tasks_cancelled, 1u);
  cr_assert_eq(s.tasks_run, 0u);

  atomic_store(&g.open, 1);
  LW_ASSERT_OK(lw_handle_wait(gate_run, LW_WAIT_FOREVER));
  for (int i = 0; i < 3; ++i) LW_ASSERT_OK(lw_handle_wait(ok[i], LW_WAIT_FOREVER));
  cr_assert_eq(lw_handle_wait(bad, LW_WAIT_FOREVER), LW_TASK_FAILED);

  // A running gate cancelled: it sees the stop and returns.
  gate_t g2 = {0, 0};
  lw_handle_t *running = start_gate(hg, &g2);
  lw_test_wait_nonzero(&g2.entered);
  LW_ASSERT_OK(lw_handle_cancel(running));
  cr_assert_eq(lw_handle_wait(running, LW_WAIT_FOREVER), LW_CANCELLED);

  s = stats_now();
  cr_assert_eq(s.tasks_run, 4u, "the gate and three records");
  cr_assert_eq(s.tasks_failed, 1u);
  cr_assert_eq(s.tasks_cancelled, 2u);
  cr_assert_eq(s.queue_depth, 0u);
  cr_assert_eq(s.queue_depth_max, 6u);
  cr_assert_eq(log[0], 3, "the withdrawn record never ran");
  // The L3-only counters stay 0 at L2.
  cr_assert_eq(s.respawns + s.escalations + s.liveness_kills + s.deaths, 0u);
  lw_handle_t *all[] = {gate_run, ok[0], ok[1], ok[2], bad, withdrawn, running};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) lw_handle_release(all[i]);
}

Test(chip_stats, registers_unregisters_and_failures_are_counted) {
  lw_chip_stats_t s = stats_now();
  cr_assert_eq(s.registers, 0u);
  cr_assert_eq(s.callables, 0u);
  lw_callable_handle_t a = reg_kernel("record");
  lw_callable_handle_t b = reg_kernel("gate");
  s = stats_now();
  cr_assert_eq(s.registers, 2u);
  cr_assert_eq(s.callables, 2u);
  LW_ASSERT_OK(lw_chip_unregister(chip, a));
  static const char text[] = "definitely not an ELF image";
  lw_callable_t bad = {.name = "text", .image = text, .image_bytes = sizeof(text)};
  lw_callable_handle_t h;
  cr_assert_neq(lw_chip_register(chip, &bad, &h), LW_OK);
  s = stats_now();
  cr_assert_eq(s.registers, 2u);
  cr_assert_eq(s.register_failures, 1u);
  cr_assert_eq(s.unregisters, 1u);
  cr_assert_eq(s.callables, 1u);
  LW_ASSERT_OK(lw_chip_unregister(chip, b));
  s = stats_now();
  cr_assert_eq(s.unregisters, 2u);
  cr_assert_eq(s.callables, 0u);
}

Test(chip_stats, a_shorter_struct_gets_its_prefix_and_zero_is_invalid_argument) {
  (void)reg_kernel("record");
  size_t older = offsetof(lw_chip_stats_t, registers) + sizeof(uint64_t);
  unsigned char buf[sizeof(lw_chip_stats_t)];
  memset(buf, 0xab, sizeof(buf));
  lw_chip_stats_t *s = (lw_chip_stats_t *)buf;
  s->struct_size = (uint32_t)older;
  LW_ASSERT_OK(lw_chip_stats(chip, s));
  cr_assert_eq(s->struct_size, (uint32_t)older);
  cr_assert_eq(s->registers, 1u);
  cr_assert_eq(s->tasks_run, 0u);
  for (size_t i = older; i < sizeof(buf); ++i) {
    cr_assert_eq(buf[i], 0xab, "byte %zu past the caller's struct was written", i);
  }
  lw_chip_stats_t z;
  memset(&z, 0, sizeof(z));
  cr_assert_eq(lw_chip_stats(chip, &z), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "struct_size 0"), "%s", lw_last_error()->message);
  z.struct_size = 8;  // struct_size and padding, no counter
  cr_assert_eq(lw_chip_stats(chip, &z), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_chip_stats(NULL, &z), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_chip_stats(chip, NULL), LW_INVALID_ARGUMENT);
}
