// tests/child/chip_test_util.h — the fixture of the L2 chip tests: one chip opened per test
// (chip_setup / chip_teardown, which checks no fd was left open), reg_kernel, which registers a
// test kernel on it by name, and start_gate, a run that holds its run lane. Include once per
// test file.
#ifndef LANEWORK_TESTS_CHILD_CHIP_TEST_UTIL_H_
#define LANEWORK_TESTS_CHILD_CHIP_TEST_UTIL_H_

#include <stdatomic.h>

#include "lanework/chip.h"
#include "test_util.h"

static lw_chip_t *chip;
static int fds_before;

static void chip_setup(void) {
  fds_before = lw_test_fd_count();
  LW_ASSERT_OK(lw_chip_open(NULL, &chip));
}

static void chip_teardown(void) {
  lw_chip_close(chip);
  chip = NULL;
  cr_expect_eq(lw_test_fd_count(), fds_before, "the chip left fds open");
}

static inline lw_callable_handle_t reg_kernel(const char *name) {
  lw_callable_t c = lw_test_kernel(name);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

// The gate kernel's words (tests/kernels/gate.c).
typedef struct gate {
  _Atomic uint32_t open;
  _Atomic uint32_t entered;
} gate_t;

// Starts a gate run: it occupies the run lane until g->open is set.
static inline lw_handle_t *start_gate(lw_callable_handle_t hg, gate_t *g) {
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)&g->open, sizeof(g->open), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)&g->entered, sizeof(g->entered), LW_TAG_OUTPUT));
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, hg, &a, NULL, &h));
  return h;
}

#endif  // LANEWORK_TESTS_CHILD_CHIP_TEST_UTIL_H_
