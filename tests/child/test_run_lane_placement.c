// tests/child/test_run_lane_placement.c — the chip child's run lane placement decision
// (child/placement.h): it looks at the machine only after move_after posts in a row on the
// poster's CPU; it moves when some CPU has nothing to run, stays beside the poster when every
// other CPU runs a thread and theirs runs only the two of them (looking twice as seldom each
// time, up to the bound), moves again when every CPU is crowded, and stays when it may use one
// CPU or the load is unknown.
#include "child/placement.h"
#include "test_util.h"

// Counts n posts one at a time; returns how many of them asked for a look.
static int count_posts(lw_placement_t *p, int me, int poster, int n) {
  int looks = 0;
  for (int i = 0; i < n; ++i) looks += lw__placement_count(p, me, poster, 1);
  return looks;
}

Test(run_lane_placement, a_look_comes_after_move_after_posts_in_a_row_on_the_posters_cpu) {
  lw_placement_t p;
  lw__placement_init(&p, 8);
  cr_assert_eq(count_posts(&p, 3, 3, 7), 0);
  cr_assert(lw__placement_count(&p, 3, 3, 1), "the 8th post on the poster's CPU asks for a look");
  // The count starts over after a look.
  cr_assert_eq(count_posts(&p, 3, 3, 7), 0);
  // A post on another CPU than the poster's starts it over too.
  cr_assert_not(lw__placement_count(&p, 2, 3, 1));
  cr_assert_eq(count_posts(&p, 3, 3, 7), 0);
  cr_assert(lw__placement_count(&p, 3, 3, 1));
  // Posts counted in a batch (taken without a wait) count for as many.
  cr_assert_not(lw__placement_count(&p, 3, 3, 7));
  cr_assert(lw__placement_count(&p, 3, 3, 1));
  // An unknown CPU is never the poster's.
  cr_assert_eq(count_posts(&p, -1, -1, 100), 0);
}

Test(run_lane_placement, move_after_zero_never_looks) {
  lw_placement_t p;
  lw__placement_init(&p, 0);
  cr_assert_eq(count_posts(&p, 1, 1, 10000), 0);
  lw__placement_init(&p, -5);
  cr_assert_eq(count_posts(&p, 1, 1, 10000), 0);
}

Test(run_lane_placement, it_moves_when_some_cpu_has_nothing_to_run) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // The run lane and its poster, alone on a 2-CPU machine: the other CPU is idle.
  cr_assert_eq(lw__placement_decide(&p, 2, 2), LW_PLACEMENT_MOVE_IDLE);
  // The same on 16 CPUs with 14 more runnable threads: one CPU still has nothing to run.
  cr_assert_eq(lw__placement_decide(&p, 16, 16), LW_PLACEMENT_MOVE_IDLE);
  cr_assert_eq(p.due, 4);
}

Test(run_lane_placement, it_stays_beside_the_poster_when_every_other_cpu_runs_a_thread) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // One busy loop beside the run lane and its poster on 2 CPUs: a move would put the run lane
  // behind it.
  cr_assert_eq(lw__placement_decide(&p, 3, 2), LW_PLACEMENT_STAY_BUSY);
  cr_assert(!lw__placement_moves(LW_PLACEMENT_STAY_BUSY));
  cr_assert_eq(p.due, 8, "a look that stays doubles the posts before the next one");
  cr_assert_eq(count_posts(&p, 0, 0, 7), 0);
  cr_assert(lw__placement_count(&p, 0, 0, 1));
  // Doubling stops at LW_PLACEMENT_BACKOFF times move_after.
  for (int i = 0; i < 20; ++i) {
    cr_assert_eq(lw__placement_decide(&p, 17, 16), LW_PLACEMENT_STAY_BUSY);
  }
  cr_assert_eq(p.due, 4 * LW_PLACEMENT_BACKOFF);
  // A look that finds a CPU idle moves, and starts over from move_after.
  cr_assert_eq(lw__placement_decide(&p, 1, 2), LW_PLACEMENT_MOVE_IDLE);
  cr_assert(lw__placement_moves(LW_PLACEMENT_MOVE_IDLE));
  cr_assert_eq(p.due, 4);
}

Test(run_lane_placement, it_moves_when_every_cpu_is_crowded) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // Two busy loops beside the pair on 2 CPUs: theirs is crowded too; a share of the other CPU.
  cr_assert_eq(lw__placement_decide(&p, 4, 2), LW_PLACEMENT_MOVE_CROWDED);
  cr_assert(lw__placement_moves(LW_PLACEMENT_MOVE_CROWDED));
  cr_assert_eq(p.due, 4);
  cr_assert_eq(lw__placement_decide(&p, 40, 16), LW_PLACEMENT_MOVE_CROWDED);
}

Test(run_lane_placement, it_stays_when_it_may_use_one_cpu_or_the_load_is_unknown) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  cr_assert_eq(lw__placement_decide(&p, 1, 1), LW_PLACEMENT_STAY_PINNED);
  cr_assert_eq(p.due, 4 * LW_PLACEMENT_BACKOFF);
  lw__placement_init(&p, 4);
  cr_assert_eq(lw__placement_decide(&p, -1, 8), LW_PLACEMENT_STAY_UNKNOWN);
  cr_assert_eq(p.due, 8, "an unreadable load is looked at as seldom as a busy machine");
}

Test(run_lane_placement, every_verdict_has_a_short_name) {
  lw_placement_verdict_t all[] = {LW_PLACEMENT_MOVE_IDLE, LW_PLACEMENT_MOVE_CROWDED,
                                  LW_PLACEMENT_STAY_BUSY, LW_PLACEMENT_STAY_PINNED,
                                  LW_PLACEMENT_STAY_UNKNOWN};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) {
    const char *n = lw__placement_verdict_name(all[i]);
    // "cpu NNNN: " + the name + ", NNNNN/NNNN" fits a trace event's detail (48 bytes).
    cr_assert(strlen(n) > 0 && strlen(n) <= 26, "%s", n);
  }
}
