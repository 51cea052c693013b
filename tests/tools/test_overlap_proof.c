// tests/tools/test_overlap_proof.c — the overlap bench's proof from events (tools/overlap_proof.h)
// on hand-made captures: containment, run_stretch and hidden_by_events for an overlap, a stall
// (the run stretched over the whole register: containment 1, hidden 0), a partial stall, a
// serial register, a run faster beside the register, the clamp, the spans it picks by name,
// and the captures it refuses. No timing: every span is written by hand.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tools/overlap_proof.h"
#include "trace_capture_util.h"

#define C1 "repeat_vector_add"
#define C2 "big_vector_add"

typedef tc_hand_t hand_t;

// Track 0: the chip's run lane, track 1: its register lane, both in process 100, chip 0.
static void hand_init(hand_t *h) {
  static const lw_trace_track_t tracks[] = {{100, 101, 0, "run lane"},
                                            {100, 102, 0, "register lane"}};
  tc_hand_init(h, tracks, 2);
}

// A span of chip 0 on the register lane (a register) or the run lane (anything else).
static void span(hand_t *h, lw_trace_kind_t kind, const char *name, int64_t a, int64_t b) {
  (void)tc_hand_span(h, kind == LW_TRACE_REGISTER ? 1 : 0, kind, 0, a, b, name);
}

static void expect_near(double got, double want, const char *what) {
  cr_assert(fabs(got - want) < 1e-9, "%s: %.12g, expected %.12g", what, got, want);
}

// The serial arm: C1 alone for 1000 ns, then C2's register and run after it.
static void serial_arm(lw_overlap_arm_t *out) {
  hand_t h;
  hand_init(&h);
  span(&h, LW_TRACE_RUN, C1, 0, 1000);
  span(&h, LW_TRACE_REGISTER, C2, 1000, 1400);
  span(&h, LW_TRACE_RUN, C2, 1400, 1500);
  lw__overlap_arm_read(&h.c, C1, C2, out);
}

// The overlapped arm: C1's run [0, run_end), C2's register [reg_a, reg_b), C2's run after both.
static void overlapped_arm(int64_t run_end, int64_t reg_a, int64_t reg_b, lw_overlap_arm_t *out) {
  hand_t h;
  hand_init(&h);
  span(&h, LW_TRACE_RUN, C1, 0, run_end);
  span(&h, LW_TRACE_REGISTER, C2, reg_a, reg_b);
  int64_t after = run_end > reg_b ? run_end : reg_b;
  span(&h, LW_TRACE_RUN, C2, after, after + 100);
  lw__overlap_arm_read(&h.c, C1, C2, out);
}

static lw_overlap_proof_t prove(int64_t run_end, int64_t reg_a, int64_t reg_b) {
  lw_overlap_arm_t s, o;
  serial_arm(&s);
  overlapped_arm(run_end, reg_a, reg_b, &o);
  lw_overlap_proof_t p;
  cr_assert(lw__overlap_proof(&s, &o, &p), "no proof from complete arms");
  return p;
}

Test(overlap_proof, a_register_inside_an_unstretched_run_is_fully_hidden) {
  lw_overlap_proof_t p = prove(1000, 200, 600);
  expect_near(p.by_events, 1.0, "by_events");
  expect_near(p.run_stretch, 1.0, "run_stretch");
  expect_near(p.hidden_by_events, 1.0, "hidden_by_events");
}

Test(overlap_proof, a_stall_for_the_whole_register_is_contained_but_not_hidden) {
  // The run waited while the register ran: 400 ns longer, the register's whole length.
  lw_overlap_proof_t p = prove(1400, 200, 600);
  expect_near(p.by_events, 1.0, "by_events");
  expect_near(p.run_stretch, 1.4, "run_stretch");
  expect_near(p.hidden_by_events, 0.0, "hidden_by_events");
}

Test(overlap_proof, a_stall_for_half_the_register_hides_half) {
  lw_overlap_proof_t p = prove(1200, 200, 600);
  expect_near(p.by_events, 1.0, "by_events");
  expect_near(p.run_stretch, 1.2, "run_stretch");
  expect_near(p.hidden_by_events, 0.5, "hidden_by_events");
}

Test(overlap_proof, a_register_after_the_run_hides_nothing) {
  lw_overlap_proof_t p = prove(1000, 1100, 1500);
  expect_near(p.by_events, 0.0, "by_events");
  expect_near(p.run_stretch, 1.0, "run_stretch");
  expect_near(p.hidden_by_events, 0.0, "hidden_by_events");
}

Test(overlap_proof, a_run_faster_beside_the_register_takes_nothing_off) {
  // Shorter than alone (noise): no stretch to take back, containment stands.
  lw_overlap_proof_t p = prove(900, 600, 1100);
  expect_near(p.by_events, 0.6, "by_events");
  expect_near(p.run_stretch, 0.9, "run_stretch");
  expect_near(p.hidden_by_events, 0.6, "hidden_by_events");
}

Test(overlap_proof, a_stretch_longer_than_the_contained_part_clamps_to_zero) {
  // Half the register inside, and the run stretched by three quarters of it: 0.5 - 0.75.
  lw_overlap_proof_t p = prove(1300, 1100, 1500);
  expect_near(p.by_events, 0.5, "by_events");
  expect_near(p.hidden_by_events, 0.0, "hidden_by_events");
}

Test(overlap_proof, the_formula_clamps_and_needs_a_register) {
  expect_near(lw__overlap_hidden_by_events(1.0, 100, 100, 50), 1.0, "no stretch");
  expect_near(lw__overlap_hidden_by_events(1.0, 125, 100, 50), 0.5, "half");
  expect_near(lw__overlap_hidden_by_events(0.2, 150, 100, 50), 0.0, "clamped at 0");
  expect_near(lw__overlap_hidden_by_events(1.5, 100, 100, 50), 1.0, "clamped at 1");
  expect_near(lw__overlap_hidden_by_events(1.0, 100, 100, 0), 0.0, "no register");
}

Test(overlap_proof, the_arm_takes_c1s_first_run_and_c2s_register_by_name) {
  hand_t h;
  hand_init(&h);
  // Another callable's register and run come first; then C1's run, then C1's again.
  span(&h, LW_TRACE_REGISTER, "other", 0, 50);
  span(&h, LW_TRACE_RUN, C2, 0, 80);
  span(&h, LW_TRACE_RUN, C1, 100, 1100);
  span(&h, LW_TRACE_REGISTER, C2, 300, 700);
  span(&h, LW_TRACE_RUN, C1, 2000, 2500);
  lw_overlap_arm_t a;
  lw__overlap_arm_read(&h.c, C1, C2, &a);
  cr_assert_eq(a.run_t0_ns, 100);
  cr_assert_eq(a.run_t1_ns, 1100);
  cr_assert_eq(a.reg_t0_ns, 300);
  cr_assert_eq(a.reg_t1_ns, 700);
}

// The cuda backend's load of C2's module (a `load` span on the run lane, in C2's first run):
// the arm keeps C2's first one; another callable's load, or none, leaves it at -1.
Test(overlap_proof, the_arm_takes_c2s_first_module_load_and_none_is_minus_one) {
  hand_t h;
  hand_init(&h);
  span(&h, LW_TRACE_RUN, C1, 0, 1000);
  span(&h, LW_TRACE_REGISTER, C2, 100, 600);
  span(&h, LW_TRACE_LOAD, "other", 1000, 1100);
  span(&h, LW_TRACE_LOAD, C2, 1010, 1310);
  span(&h, LW_TRACE_RUN, C2, 1005, 1400);
  span(&h, LW_TRACE_LOAD, C2, 2000, 2900);
  lw_overlap_arm_t a;
  lw__overlap_arm_read(&h.c, C1, C2, &a);
  cr_assert_eq(a.load_ns, 300);
  lw_overlap_arm_t none;
  serial_arm(&none);
  cr_assert_eq(none.load_ns, -1, "no load span: -1");
}

Test(overlap_proof, a_name_longer_than_an_event_holds_still_matches) {
  char longname[100];
  memset(longname, 'k', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  hand_t h;
  hand_init(&h);
  span(&h, LW_TRACE_RUN, longname, 0, 1000);  // stored cut at LW_TRACE_NAME_BYTES - 1
  span(&h, LW_TRACE_REGISTER, C2, 100, 200);
  lw_overlap_arm_t a;
  lw__overlap_arm_read(&h.c, longname, C2, &a);
  cr_assert_eq(a.run_t1_ns, 1000);
}

Test(overlap_proof, arms_missing_a_span_prove_nothing) {
  lw_overlap_arm_t s, o, none;
  serial_arm(&s);
  overlapped_arm(1000, 200, 600, &o);
  hand_t h;
  hand_init(&h);
  lw__overlap_arm_read(&h.c, C1, C2, &none);
  cr_assert_eq(none.by_events, -1.0, "no register span: containment -1");
  lw_overlap_proof_t p = {7, 7, 7};
  cr_assert_not(lw__overlap_proof(&none, &o, &p), "no C1 run alone");
  cr_assert_not(lw__overlap_proof(&s, &none, &p), "no overlapped arm");
  // An overlapped arm with C1's run but no register of C2.
  hand_init(&h);
  span(&h, LW_TRACE_RUN, C1, 0, 1000);
  lw_overlap_arm_t no_reg;
  lw__overlap_arm_read(&h.c, C1, C2, &no_reg);
  cr_assert_not(lw__overlap_proof(&s, &no_reg, &p), "no register overlapped");
  cr_assert_eq(p.by_events, 7, "a refused proof wrote its figures");
}

Test(overlap_proof, containment_is_c2s_register_alone_and_stalls_are_counted) {
  hand_t h;
  hand_init(&h);
  span(&h, LW_TRACE_RUN, C1, 0, 1000);
  span(&h, LW_TRACE_REGISTER, C2, 200, 600);
  // Another register outside every run (a replay, another callable) does not dilute C2's.
  span(&h, LW_TRACE_REGISTER, "other", 2000, 2400);
  span(&h, LW_TRACE_STALL, C1, 200, 600);
  lw_overlap_arm_t a;
  lw__overlap_arm_read(&h.c, C1, C2, &a);
  expect_near(a.by_events, 1.0, "C2's register inside C1's run");
  cr_assert_eq(a.stalls, 1);
}

Test(overlap_proof, a_register_on_another_chip_than_the_run_proves_nothing) {
  lw_overlap_arm_t s, o;
  serial_arm(&s);
  hand_t h;
  hand_init(&h);
  span(&h, LW_TRACE_RUN, C1, 0, 1000);
  span(&h, LW_TRACE_REGISTER, C2, 200, 600);
  h.rec[1].ev.chip = 1;  // C2 registered on chip 1, C1 ran on chip 0
  lw__overlap_arm_read(&h.c, C1, C2, &o);
  expect_near(o.by_events, 0.0, "no run on chip 1");
  lw_overlap_proof_t p;
  cr_assert_not(lw__overlap_proof(&s, &o, &p), "a proof across chips");
}
