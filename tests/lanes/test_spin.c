// tests/lanes/test_spin.c — the one spin policy: pauses, then yields for a time budget, then
// block, then reset; the budget from a measured wake.
#include "lanes/spin.h"
#include "test_util.h"

Test(spin, pauses_then_yields_for_its_budget_then_blocks_until_reset, .timeout = 30) {
  lw__spin_t s = LW__SPIN_INIT;
  s.slow_yield_ns = INT64_MAX;  // no yield counts as slow, however busy the machine
  s.budget_ns = 2000000;        // 2 ms of yields
  s.pause_ns = 0;               // the pause phase: LW_SPIN_PAUSES pauses, no more
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < LW_SPIN_PAUSES; ++i) {
      cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED, "round %d step %d", round, i);
    }
    int64_t t0 = lw__now_ns();
    int yields = 0;
    while (lw__spin_step(&s) == LW__SPIN_YIELDED) yields++;
    // The clock is monotonic: the spin cannot have ended before its budget.
    cr_assert_geq(lw__now_ns() - t0, s.budget_ns, "round %d: blocked after %d yields", round,
                  yields);
    cr_assert_gt(yields, 0);
    // Spent: it stays spent, doing nothing, until reset.
    for (int i = 0; i < 3; ++i) cr_assert_eq(lw__spin_step(&s), LW__SPIN_BLOCK);
    lw__spin_reset(&s);
  }
}

Test(spin, reset_mid_yield_starts_over_with_pauses) {
  lw__spin_t s = LW__SPIN_INIT;
  s.slow_yield_ns = INT64_MAX;
  s.pause_ns = 0;
  s.budget_ns = INT64_MAX / 2;
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
  s.budget_ns = INT64_MAX / 2;
  s.pause_ns = 0;
  for (int i = 0; i < LW_SPIN_PAUSES; ++i) cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_YIELDED);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_BLOCK, "one slow yield, then block");
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_BLOCK);
  lw__spin_reset(&s);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED, "the threshold stays, the rounds start over");
}

Test(spin, an_idle_partner_blocks_right_after_the_pauses) {
  lw__spin_t s = LW__SPIN_INIT;
  s.slow_yield_ns = INT64_MAX;
  s.budget_ns = INT64_MAX / 2;
  for (int i = 0; i < LW_SPIN_PAUSES; ++i) {
    cr_assert_eq(lw__spin_step_for(&s, LW__PARTNER_IDLE), LW__SPIN_PAUSED);
  }
  cr_assert_eq(lw__spin_step_for(&s, LW__PARTNER_IDLE), LW__SPIN_BLOCK,
               "no yield at all, and no pause past the minimum (the pause time is the default)");
  lw__spin_reset(&s);
  s.pause_ns = 0;
  for (int i = 0; i < LW_SPIN_PAUSES; ++i) (void)lw__spin_step_for(&s, LW__PARTNER_WORKING);
  cr_assert_eq(lw__spin_step_for(&s, LW__PARTNER_WORKING), LW__SPIN_YIELDED,
               "a working partner: yield within the budget");
}

Test(spin, a_partner_on_this_cpu_skips_the_pauses_and_yields_for_the_budget) {
  lw__spin_t s = LW__SPIN_INIT;
  s.slow_yield_ns = INT64_MAX;
  s.budget_ns = INT64_MAX / 2;
  cr_assert_eq(lw__spin_step_for(&s, LW__PARTNER_SAME_CPU), LW__SPIN_YIELDED,
               "the first round yields: a pause would only keep the partner off the CPU");
  cr_assert_eq(lw__spin_step_for(&s, LW__PARTNER_UNKNOWN), LW__SPIN_YIELDED,
               "the pauses are behind it once skipped");
}

// The pause phase is time: with a window no test run reaches it pauses on past the minimum
// count; with none it yields right after the minimum; a reset starts its clock over.
Test(spin, the_pauses_last_their_time_not_a_count) {
  lw__spin_t s = LW__SPIN_INIT;
  cr_assert_eq(s.pause_ns, LW_SPIN_PAUSE_NS);
  s.slow_yield_ns = INT64_MAX;
  s.budget_ns = INT64_MAX / 2;
  s.pause_ns = INT64_MAX / 2;
  for (int i = 0; i < 20 * LW_SPIN_PAUSES; ++i) {
    cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED, "step %d", i);
  }
  cr_assert_gt(s.pause_start_ns, 0, "the clock was read");
  lw__spin_reset(&s);
  cr_assert_eq(s.pause_start_ns, 0, "a reset starts the pause clock over");
  s.pause_ns = 0;
  for (int i = 0; i < LW_SPIN_PAUSES; ++i) cr_assert_eq(lw__spin_step(&s), LW__SPIN_PAUSED);
  cr_assert_eq(lw__spin_step(&s), LW__SPIN_YIELDED, "no pause time: yields after the minimum");
}

// The budget comes from a measured futex wake, within its bounds, and stays put afterwards.
Test(spin, calibration_measures_a_wake_and_bounds_the_budget, .timeout = 30) {
  int64_t b = lw__spin_calibrate();
  cr_assert_geq(b, LW_SPIN_MIN_BUDGET_NS);
  cr_assert_leq(b, LW_SPIN_MAX_BUDGET_NS);
  if (getenv("LW_SPIN_BUDGET_NS") == NULL) {
    cr_assert_gt(lw__spin_wake_ns(), 0, "a wake was measured");
    int64_t want = LW_SPIN_WAKE_FACTOR * lw__spin_wake_ns();
    if (want < LW_SPIN_MIN_BUDGET_NS) want = LW_SPIN_MIN_BUDGET_NS;
    if (want > LW_SPIN_MAX_BUDGET_NS) want = LW_SPIN_MAX_BUDGET_NS;
    cr_assert_eq(b, want);
  }
  cr_assert_eq(lw__spin_calibrate(), b, "measured once per process");
  cr_assert_eq(lw__spin_set_budget_ns(1), LW_SPIN_MIN_BUDGET_NS, "bounded below");
  cr_assert_eq(lw__spin_set_budget_ns(INT64_MAX), LW_SPIN_MAX_BUDGET_NS, "bounded above");
  cr_assert_eq(lw__spin_budget_ns(), LW_SPIN_MAX_BUDGET_NS);
  (void)lw__spin_set_budget_ns(b);
}

// LW_SPIN_PAUSE_NS in the environment sets the pause phase of the spins that start after it was
// read (a chip child reads it when it takes its parent's budget), for comparisons.
Test(spin, the_environment_sets_the_pause_phase_for_comparisons) {
  setenv("LW_SPIN_PAUSE_NS", "1234", 1);
  (void)lw__spin_set_budget_ns(LW_SPIN_MIN_BUDGET_NS);
  lw__spin_t s = LW__SPIN_INIT;
  cr_assert_eq(s.pause_ns, 1234);
  setenv("LW_SPIN_PAUSE_NS", "not a number", 1);
  (void)lw__spin_set_budget_ns(LW_SPIN_MIN_BUDGET_NS);
  lw__spin_t t = LW__SPIN_INIT;
  cr_assert_eq(t.pause_ns, 1234, "a bad value changes nothing");
  unsetenv("LW_SPIN_PAUSE_NS");
  atomic_store(&lw__spin_pause_value, LW_SPIN_PAUSE_NS);  // for tests run without a fork
}
