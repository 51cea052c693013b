// tests/lanes/test_trace_dead_run.c — the run span the parent records for a child that died
// while it ran (lw__trace_area_record_dead_run), on hand-made areas that a forked process
// records into as a chip child would: the span and its death instant land on the child's run
// lane track beside its own spans, a run the child recorded itself is never recorded twice, a
// child whose run lane recorded nothing still gets a "run lane" track in its process, and
// nothing is recorded without a session or for an area the session does not drain. Files are
// read back with jansson (tests/trace_test_util.h).
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "lanes/trace.h"
#include "lanework/status.h"
#include "lanework/trace.h"
#include "trace_test_util.h"

#define LW_TEST_OK(expr)                                                                       \
  do {                                                                                         \
    lw_status_t st_ = (expr);                                                                  \
    cr_assert_eq(st_, LW_OK, "%s -> %s: %s", #expr, lw_status_name(st_),                       \
                 lw_last_error()->message);                                                    \
  } while (0)

static char dir[64];
static char path[128];

static void dir_make(void) {
  snprintf(dir, sizeof(dir), "/tmp/lw_trace_dead_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/trace.json", dir);
}

static void dir_remove(void) {
  (void)unlink(path);
  (void)rmdir(dir);
}

TestSuite(trace_dead_run, .init = dir_make, .fini = dir_remove);

// A child's area in shared memory (the parent maps it; a forked process records into it).
static lw_trace_area_t *area_map(void) {
  void *p = mmap(NULL, LW_TRACE_AREA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  lw__trace_area_initialize(p);
  return p;
}

static void area_unmap(lw_trace_area_t *a) { munmap(a, LW_TRACE_AREA_BYTES); }

// What the forked "child" records before it exits.
typedef enum child_does {
  CHILD_RUNS_TASK_1,      // its run lane records the run span of run 1, task 1
  CHILD_ONLY_HANDS_OFF,   // only its mailbox loop records (a handoff of run 1, task 2)
} child_does_t;

// Forks a process that records into a as a chip child, then exits; returns its pid once it
// is gone (its events stay in the area, as a dead child's do).
static pid_t child_records(lw_trace_area_t *a, child_does_t what) {
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    lw__trace_child_attach(a);
    int64_t t = lw__now_ns();
    if (what == CHILD_RUNS_TASK_1) {
      lw__trace_role("run lane", 0);
      lw__trace_span(LW_TRACE_RUN, t, t + 1000, 1, 1, 0, LW_OK, "k");
    } else {
      lw__trace_role("mailbox loop", 0);
      lw__trace_span(LW_TRACE_HANDOFF, t, t + 1000, 1, 2, 0, LW_OK, "k");
    }
    _exit(0);
  }
  int wst = 0;
  cr_assert_eq(waitpid(child, &wst, 0), child);
  cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  return child;
}

static lw_trace_dead_run_t dead_run(uint64_t task, uint32_t start_from) {
  int64_t now = lw__now_ns();
  return (lw_trace_dead_run_t){.t0_ns = now - 2000, .t1_ns = now, .run_id = 1, .task_id = task,
                               .chip = 0, .status = LW_CHILD_EXITED, .start_from = start_from,
                               .callable = "k", .death = "child died: killed by SIGSEGV"};
}

// The death instants of (run 1, task), how many; *out the last one.
static size_t death_instants(json_t *doc, int64_t task, json_t **out) {
  size_t i, n = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "i") || strcmp(tt_str(ev, "name"), "death") != 0) continue;
    if (tt_arg_int(ev, "run", 0) != 1 || tt_arg_int(ev, "task", 0) != task) continue;
    if (out) *out = ev;
    ++n;
  }
  return n;
}

Test(trace_dead_run, the_span_and_its_death_go_on_the_childs_run_lane_and_a_recorded_run_is_kept,
     .timeout = 30) {
  lw_trace_area_t *a = area_map();
  LW_TEST_OK(lw_trace_start(path));
  lw__trace_area_attach(a, "chip 0 (sim)");
  pid_t child = child_records(a, CHILD_RUNS_TASK_1);
  // Task 1's run the child recorded itself (it died after the run): nothing more. Task 2's it
  // never ended.
  lw_trace_dead_run_t done = dead_run(1, LW_TRACE_START_KERNEL);
  lw__trace_area_record_dead_run(a, child, "run lane", &done);
  lw_trace_dead_run_t cut = dead_run(2, LW_TRACE_START_KERNEL);
  lw__trace_area_record_dead_run(a, child, "run lane", &cut);
  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  lw__trace_area_detach(a);
  area_unmap(a);
  cr_assert_eq(sum.dropped_events, 0);

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  json_t *own = tt_run_span(doc, 1, 1);  // fails on a second span of task 1
  cr_assert_not_null(own);
  cr_assert_str_eq(tt_arg_str(own, "status"), "LW_OK");
  cr_assert_null(tt_arg_str(own, "child_died"), "the child's own span is left as it was");
  cr_assert_null(tt_arg_str(own, "start_from"));
  cr_assert_eq(death_instants(doc, 1, NULL), 0, "no death on a run the child ended");

  json_t *span = tt_run_span(doc, 1, 2);
  cr_assert_not_null(span, "no run span for the run the child never ended");
  cr_assert_eq(tt_int(span, "pid"), child);
  cr_assert_eq(tt_int(span, "tid"), tt_int(own, "tid"), "on the track of the child's own runs");
  cr_assert_str_eq(tt_thread_name(doc, child, tt_int(span, "tid")), "run lane");
  cr_assert_str_eq(tt_str(span, "name"), "k");
  cr_assert_str_eq(tt_arg_str(span, "callable"), "k");
  cr_assert_eq(tt_arg_int(span, "chip", -1), 0);
  cr_assert_str_eq(tt_arg_str(span, "status"), "LW_CHILD_EXITED");
  cr_assert_str_eq(tt_arg_str(span, "start_from"), "kernel start");
  cr_assert_str_eq(tt_arg_str(span, "child_died"), "child died: killed by SIGSEGV");
  json_t *death = NULL;
  cr_assert_eq(death_instants(doc, 2, &death), 1);
  cr_assert_eq(tt_int(death, "pid"), child);
  cr_assert_eq(tt_int(death, "tid"), tt_int(span, "tid"));
  cr_assert_str_eq(tt_arg_str(death, "detail"), "child died: killed by SIGSEGV");
  int64_t a0 = tt_ns(span, "ts"), a1 = a0 + tt_ns(span, "dur"), d = tt_ns(death, "ts");
  cr_assert(a0 <= d && d <= a1, "the death [%lld] lies on the span [%lld, %lld]", (long long)d,
            (long long)a0, (long long)a1);
  json_decref(doc);
}

Test(trace_dead_run, a_child_whose_run_lane_recorded_nothing_gets_a_run_lane_track,
     .timeout = 30) {
  lw_trace_area_t *a = area_map();
  LW_TEST_OK(lw_trace_start(path));
  lw__trace_area_attach(a, "chip 0 (sim)");
  pid_t child = child_records(a, CHILD_ONLY_HANDS_OFF);
  // Started before the session did: the session shows the part it saw.
  lw_trace_dead_run_t cut = dead_run(2, LW_TRACE_START_DISPATCH);
  cut.t0_ns -= 10ll * 1000 * 1000 * 1000;
  lw__trace_area_record_dead_run(a, child, "run lane", &cut);
  LW_TEST_OK(lw_trace_stop(NULL));
  lw__trace_area_detach(a);
  area_unmap(a);

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  json_t *span = tt_run_span(doc, 1, 2);
  cr_assert_not_null(span);
  cr_assert_eq(tt_int(span, "pid"), child);
  cr_assert_str_eq(tt_process_name(doc, child), "chip 0 (sim)");
  cr_assert_str_eq(tt_thread_name(doc, child, tt_int(span, "tid")), "run lane");
  cr_assert_eq(tt_count(doc, "X", "k"), 2, "the handoff and the run");
  cr_assert_geq(tt_ns(span, "ts"), 0, "not before the session's start");
  cr_assert_str_eq(tt_arg_str(span, "start_from"), "dispatch");
  json_t *death = NULL;
  cr_assert_eq(death_instants(doc, 2, &death), 1);
  cr_assert_eq(tt_int(death, "tid"), tt_int(span, "tid"));
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X") || strcmp(tt_str(ev, "cat"), "handoff") != 0) continue;
    cr_assert_neq(tt_int(ev, "tid"), tt_int(span, "tid"), "the mailbox loop keeps its track");
  }
  json_decref(doc);
}

Test(trace_dead_run, nothing_is_recorded_without_a_session_or_for_an_area_not_drained,
     .timeout = 30) {
  lw_trace_area_t *a = area_map();
  lw_trace_dead_run_t cut = dead_run(2, LW_TRACE_START_KERNEL);
  lw__trace_area_attach(a, "chip 0 (sim)");
  lw__trace_area_record_dead_run(a, 12345, "run lane", &cut);  // no session: nothing to do
  lw__trace_area_detach(a);
  LW_TEST_OK(lw_trace_start(path));
  lw__trace_area_record_dead_run(a, 12345, "run lane", &cut);  // not attached
  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  area_unmap(a);
  cr_assert_eq(sum.events, 0);
  cr_assert_eq(sum.dropped_events, 0);
}
