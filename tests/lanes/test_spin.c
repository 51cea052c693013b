// tests/lanes/test_spin.c — the one spin policy: pauses, then yields, then block, then reset.
#include "lanes/spin.h"
#include "test_util.h"

Test(spin, pauses_then_yields_then_blocks_until_reset) {
  lw__spin_t s = LW__SPIN_INIT;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < LW_SPIN_PAUSES; ++i) {
      cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED, "round %d step %d", round, i);
    }
    for (int i = 0; i < LW_SPIN_YIELDS; ++i) {
      cr_assert_eq(lw__spin_step(&s), LW__SPIN_YIELDED, "round %d step %d", round, i);
    }
    // Spent: it stays spent, doing nothing, until reset.
    for (int i = 0; i < 3; ++i) cr_assert_eq(lw__spin_step(&s), LW__SPIN_BLOCK);
    lw__spin_reset(&s);
  }
}

Test(spin, reset_mid_yield_starts_over_with_pauses) {
  lw__spin_t s = LW__SPIN_INIT;
  for (int i = 0; i < LW_SPIN_PAUSES + 5; ++i) (void)lw__spin_step(&s);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_YIELDED);
  lw__spin_reset(&s);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED);
}
