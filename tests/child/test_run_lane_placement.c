// tests/child/test_run_lane_placement.c — the chip child's run lane placement decision
// (child/placement.h): it looks at the machine only after move_after posts in a row on the
// poster's CPU, and acts on a verdict only when two looks in a row agree; it moves when some CPU
// has nothing to run, stays beside the poster when every other CPU runs a thread and theirs
// runs only the two of them (looking twice as seldom each time, up to the bound), moves when
// every CPU is crowded, moves as before the rule when the count cannot be told against its CPUs
// (unreadable, or a mask narrower than the machine), and stays when it may use one CPU.
#include <stdint.h>

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

Test(run_lane_placement, move_after_zero_never_looks_and_a_huge_one_is_bounded) {
  lw_placement_t p;
  lw__placement_init(&p, 0);
  cr_assert_eq(count_posts(&p, 1, 1, 10000), 0);
  lw__placement_init(&p, -5);
  cr_assert_eq(count_posts(&p, 1, 1, 10000), 0);
  lw__placement_init(&p, INT32_MAX);
  cr_assert_eq(p.move_after, LW_PLACEMENT_MOVE_AFTER_MAX);
  // The backoff's bound stays an int.
  for (int i = 0; i < 4; ++i) (void)lw__placement_decide(&p, 3, 2, 2);
  cr_assert_eq(p.due, LW_PLACEMENT_MOVE_AFTER_MAX * 8);
}

// Two looks in a row that agree: the verdict is acted on (the first one stays, to look again).
static lw_placement_verdict_t confirmed(lw_placement_t *p, int runnable, int allowed, int cpus) {
  cr_assert_eq(lw__placement_decide(p, runnable, allowed, cpus), LW_PLACEMENT_UNSURE);
  cr_assert_eq(p->due, p->move_after, "an unsure look looks again after move_after posts");
  return lw__placement_decide(p, runnable, allowed, cpus);
}

Test(run_lane_placement, it_moves_when_some_cpu_has_nothing_to_run) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // The run lane and its poster, alone on a 2-CPU machine: the other CPU is idle.
  cr_assert_eq(confirmed(&p, 2, 2, 2), LW_PLACEMENT_MOVE_IDLE);
  cr_assert(lw__placement_moves(LW_PLACEMENT_MOVE_IDLE));
  cr_assert_eq(p.due, 4);
  // Still so at the next look: moved at once.
  cr_assert_eq(lw__placement_decide(&p, 1, 2, 2), LW_PLACEMENT_MOVE_IDLE);
  // On 16 CPUs with 14 more runnable threads: one CPU still has nothing to run.
  lw__placement_init(&p, 4);
  cr_assert_eq(confirmed(&p, 16, 16, 16), LW_PLACEMENT_MOVE_IDLE);
}

Test(run_lane_placement, it_stays_beside_the_poster_when_every_other_cpu_runs_a_thread) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // One busy loop beside the run lane and its poster on 2 CPUs: a move would put the run lane
  // behind it.
  cr_assert_eq(confirmed(&p, 3, 2, 2), LW_PLACEMENT_STAY_BUSY);
  cr_assert(!lw__placement_moves(LW_PLACEMENT_STAY_BUSY));
  cr_assert(!lw__placement_moves(LW_PLACEMENT_UNSURE));
  cr_assert_eq(p.due, 8, "a confirmed stay doubles the posts before the next look");
  cr_assert_eq(count_posts(&p, 0, 0, 7), 0);
  cr_assert(lw__placement_count(&p, 0, 0, 1));
  // Doubling stops at LW_PLACEMENT_BACKOFF times move_after.
  for (int i = 0; i < 20; ++i) {
    cr_assert_eq(lw__placement_decide(&p, 17, 16, 16), LW_PLACEMENT_STAY_BUSY);
  }
  cr_assert_eq(p.due, 4 * LW_PLACEMENT_BACKOFF);
  // A CPU found idle in two looks: it moves, and starts over from move_after.
  cr_assert_eq(confirmed(&p, 1, 2, 2), LW_PLACEMENT_MOVE_IDLE);
  cr_assert_eq(p.due, 4);
}

Test(run_lane_placement, one_look_that_differs_moves_nothing) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  cr_assert_eq(confirmed(&p, 3, 2, 2), LW_PLACEMENT_STAY_BUSY);
  // A thread runnable for a moment: crowded once, then busy again. No move in between.
  cr_assert_eq(lw__placement_decide(&p, 4, 2, 2), LW_PLACEMENT_UNSURE);
  cr_assert_eq(lw__placement_decide(&p, 3, 2, 2), LW_PLACEMENT_UNSURE);
  cr_assert_eq(lw__placement_decide(&p, 3, 2, 2), LW_PLACEMENT_STAY_BUSY);
  // Quiet for a moment, then idle: the second idle look moves.
  cr_assert_eq(lw__placement_decide(&p, 2, 2, 2), LW_PLACEMENT_UNSURE);
  cr_assert_eq(lw__placement_decide(&p, 2, 2, 2), LW_PLACEMENT_MOVE_IDLE);
}

Test(run_lane_placement, it_moves_when_every_cpu_is_crowded) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // Two busy loops beside the pair on 2 CPUs: theirs is crowded too; a share of the other CPU.
  cr_assert_eq(confirmed(&p, 4, 2, 2), LW_PLACEMENT_MOVE_CROWDED);
  cr_assert(lw__placement_moves(LW_PLACEMENT_MOVE_CROWDED));
  cr_assert_eq(p.due, 4);
  lw__placement_init(&p, 4);
  cr_assert_eq(confirmed(&p, 40, 16, 16), LW_PLACEMENT_MOVE_CROWDED);
}

Test(run_lane_placement, it_moves_as_before_when_the_count_cannot_be_told_against_its_cpus) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  // The load unreadable: moved at once, as before the rule.
  cr_assert_eq(lw__placement_decide(&p, -1, 8, 8), LW_PLACEMENT_MOVE_UNKNOWN);
  cr_assert(lw__placement_moves(LW_PLACEMENT_MOVE_UNKNOWN));
  cr_assert_eq(p.due, 4);
  // Allowed 2 CPUs of 16 (a taskset): the machine's count says nothing about those two.
  cr_assert_eq(lw__placement_decide(&p, 3, 2, 16), LW_PLACEMENT_MOVE_UNKNOWN);
  cr_assert_eq(lw__placement_decide(&p, 3, 2, -1), LW_PLACEMENT_MOVE_UNKNOWN);
}

Test(run_lane_placement, it_stays_when_it_may_use_one_cpu) {
  lw_placement_t p;
  lw__placement_init(&p, 4);
  cr_assert_eq(lw__placement_decide(&p, -1, 1, 8), LW_PLACEMENT_STAY_PINNED);
  cr_assert_eq(p.due, 4 * LW_PLACEMENT_BACKOFF);
}

Test(run_lane_placement, every_verdict_has_a_short_name) {
  lw_placement_verdict_t all[] = {LW_PLACEMENT_MOVE_IDLE,    LW_PLACEMENT_MOVE_CROWDED,
                                  LW_PLACEMENT_MOVE_UNKNOWN, LW_PLACEMENT_STAY_BUSY,
                                  LW_PLACEMENT_STAY_PINNED,  LW_PLACEMENT_UNSURE};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) {
    const char *n = lw__placement_verdict_name(all[i]);
    // "cpu 1023: " + the name + ", 1025/1024" and its NUL fit a trace event's detail (48 bytes).
    cr_assert(strlen(n) > 0 && strlen(n) <= 26, "%s", n);
  }
}
