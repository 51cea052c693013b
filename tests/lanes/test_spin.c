// tests/lanes/test_spin.c — the one spin policy: pauses, then yields, then block, then reset.
#include "lanes/spin.h"
#include "test_util.h"

Test(spin, pauses_then_yields_then_blocks_until_reset) {
  lw__spin_t s = LW__SPIN_INIT;
  s.slow_yield_ns = INT64_MAX;  // no yield counts as slow, however busy the machine
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
  s.slow_yield_ns = INT64_MAX;
  for (int i = 0; i < LW_SPIN_PAUSES + 5; ++i) (void)lw__spin_step(&s);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_YIELDED);
  lw__spin_reset(&s);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED);
}

// A yield that took at least slow_yield_ns (here 0: every yield) means the CPU is busy with
// other work: the very next step blocks instead of yielding on, and a reset spins again.
Test(spin, a_slow_yield_ends_the_spin_at_once_and_reset_spins_again) {
  lw__spin_t s = LW__SPIN_INIT;
  cr_assert_eq(s.slow_yield_ns, LW_SPIN_SLOW_YIELD_NS);
  s.slow_yield_ns = 0;
  for (int i = 0; i < LW_SPIN_PAUSES; ++i) cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_YIELDED);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_BLOCK, "one slow yield, then block");
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_BLOCK);
  lw__spin_reset(&s);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED, "the threshold stays, the rounds start over");
  cr_assert_eq(s.slow_yield_ns, 0);
}
