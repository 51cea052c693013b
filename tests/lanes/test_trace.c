// tests/lanes/test_trace.c — trace sessions in one process, without children: starting and
// stopping (and the errors that name what was wrong), events of several threads reaching the
// file with their tracks named, full rings counted as dropped (in a child's area, filled by a
// forked process while nothing drains it, and in the parent's heap rings), the track rule
// (partly overlapping spans never share a track), the register/run overlap measured from
// hand-made captures, a child's area full of garbage, and events recorded after a stop. Files
// are read back with jansson (tests/trace_test_util.h).
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
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
#include "trace_capture_util.h"
#include "trace_test_util.h"

#define US 1000ll  // nanoseconds

#define LW_TEST_OK(expr)                                                                       \
  do {                                                                                         \
    lw_status_t st_ = (expr);                                                                  \
    cr_assert_eq(st_, LW_OK, "%s -> %s: %s", #expr, lw_status_name(st_),                       \
                 lw_last_error()->message);                                                    \
  } while (0)

// A fresh directory per test for the trace files; removed with what is in it.
static char dir[64];
static char path[128];

static void dir_make(void) {
  snprintf(dir, sizeof(dir), "/tmp/lw_trace_test_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/trace.json", dir);
}

static void dir_remove(void) {
  char p[160];
  for (int i = 0; i < 4; ++i) {
    snprintf(p, sizeof(p), "%s/trace%s.json", dir, i == 0 ? "" : (i == 1 ? "2" : "3"));
    (void)unlink(p);
  }
  (void)rmdir(dir);
}

TestSuite(trace, .init = dir_make, .fini = dir_remove);

#define ASSERT_ERR(expr, code_, needle)                                                        \
  do {                                                                                         \
    lw_status_t st_ = (expr);                                                                  \
    cr_assert_eq(st_, code_, "%s -> %s, expected %s", #expr, lw_status_name(st_),              \
                 lw_status_name(code_));                                                       \
    cr_assert_eq(lw_last_error()->code, code_);                                                \
    cr_assert_not_null(strstr(lw_last_error()->message, (needle)), "message '%s' lacks '%s'",  \
                       lw_last_error()->message, (needle));                                    \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Starting and stopping

Test(trace, a_second_start_fails_naming_the_running_sessions_path, .timeout = 30) {
  cr_assert_not(lw_trace_active());
  LW_TEST_OK(lw_trace_start(path));
  cr_assert(lw_trace_active());
  char other[160];
  snprintf(other, sizeof(other), "%s/trace2.json", dir);
  ASSERT_ERR(lw_trace_start(other), LW_FAILED_PRECONDITION, path);
  cr_assert(lw_trace_active(), "the refused start leaves the session running");
  lw_trace_summary_t s;
  LW_TEST_OK(lw_trace_stop(&s));
  cr_assert_not(lw_trace_active());
  json_t *doc = tt_load(path);
  json_decref(doc);
}

Test(trace, stop_without_a_session_fails_precondition, .timeout = 30) {
  ASSERT_ERR(lw_trace_stop(NULL), LW_FAILED_PRECONDITION, "no session");
  LW_TEST_OK(lw_trace_start(path));
  LW_TEST_OK(lw_trace_stop(NULL));
  ASSERT_ERR(lw_trace_stop(NULL), LW_FAILED_PRECONDITION, "no session");
  cr_assert_not(lw_trace_active());
}

Test(trace, an_unwritable_path_fails_at_start_naming_it, .timeout = 30) {
  char bad[160];
  snprintf(bad, sizeof(bad), "%s/no-such-dir/trace.json", dir);
  ASSERT_ERR(lw_trace_start(bad), LW_UNAVAILABLE, bad);
  cr_assert_not(lw_trace_active(), "no session after a failed start");
  // And a later start still works.
  LW_TEST_OK(lw_trace_start(path));
  LW_TEST_OK(lw_trace_stop(NULL));
}

Test(trace, a_null_or_empty_path_is_an_invalid_argument, .timeout = 30) {
  ASSERT_ERR(lw_trace_start(NULL), LW_INVALID_ARGUMENT, "NULL");
  ASSERT_ERR(lw_trace_start(""), LW_INVALID_ARGUMENT, "empty");
  cr_assert_not(lw_trace_active());
}

// ---------------------------------------------------------------------------------------------
// Several threads

#define THREADS 4
#define SPANS_PER_THREAD 50

static const char *const roles[THREADS] = {"probe a", "probe b", "probe c", "probe d"};

typedef struct thread_arg {
  int index;
  _Atomic int32_t tid;
} thread_arg_t;

static void *recorder(void *p) {
  thread_arg_t *a = p;
  lw__trace_role(roles[a->index], -1);
  atomic_store(&a->tid, (int32_t)gettid());
  // Back to back, 1 us each, so they stay on the thread's own track.
  int64_t base = lw__now_ns();
  for (int i = 0; i < SPANS_PER_THREAD; ++i) {
    int64_t t = base + 2 * i * US;
    lw__trace_span(LW_TRACE_RUN, t, t + 1 * US, (uint64_t)a->index + 1, (uint64_t)i + 1, -1,
                   LW_OK, "probe");
  }
  lw__trace_instant(LW_TRACE_CANCEL, -1, (uint64_t)a->index + 1, 0, "probe instant");
  return NULL;
}

Test(trace, events_of_several_threads_reach_the_file_on_named_tracks, .timeout = 30) {
  LW_TEST_OK(lw_trace_start(path));
  pthread_t th[THREADS];
  thread_arg_t args[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    args[i].index = i;
    atomic_store(&args[i].tid, 0);
    cr_assert_eq(pthread_create(&th[i], NULL, recorder, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; ++i) cr_assert_eq(pthread_join(th[i], NULL), 0);
  // This thread has no role: its track is named after its tid.
  int64_t t = lw__now_ns();
  lw__trace_span(LW_TRACE_ORCH, t, t + 2 * US, 9, 0, -1, LW_OK, "orch");
  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  cr_assert_eq(sum.dropped_events, 0);
  cr_assert_eq(sum.events, THREADS * (SPANS_PER_THREAD + 1) + 1);

  json_t *doc = tt_load(path);
  cr_assert_str_eq(json_string_value(json_object_get(doc, "schema")), "lanework.trace");
  cr_assert_eq(json_integer_value(json_object_get(doc, "schema_version")), 1);
  cr_assert_eq(tt_other_uint(doc, "events"), sum.events);
  cr_assert_eq(tt_other_uint(doc, "dropped_events"), 0);
  tt_assert_all_named(doc);
  int64_t me = getpid();
  cr_assert_str_eq(tt_process_name(doc, me), "lanework parent");
  int per_thread[THREADS] = {0};
  int instants[THREADS] = {0};
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (tt_is(ev, "M")) continue;
    cr_assert_eq(tt_int(ev, "pid"), me);
    int64_t run = tt_arg_int(ev, "run", 0);
    if (run < 1 || run > THREADS) continue;
    int k = (int)run - 1;
    cr_assert_eq(tt_int(ev, "tid"), atomic_load(&args[k].tid), "event of thread %d on its track",
                 k);
    if (tt_is(ev, "X")) {
      cr_assert_str_eq(tt_str(ev, "cat"), "run");
      cr_assert_str_eq(tt_str(ev, "name"), "probe");
      cr_assert_str_eq(tt_arg_str(ev, "callable"), "probe");
      cr_assert_str_eq(tt_arg_str(ev, "status"), "LW_OK");
      cr_assert_eq(tt_ns(ev, "dur"), 1 * US);
      cr_assert_eq(tt_arg_int(ev, "task", 0), per_thread[k] + 1, "a thread's spans in order");
      per_thread[k]++;
    } else if (tt_is(ev, "i")) {
      cr_assert_str_eq(tt_str(ev, "name"), "cancel");
      cr_assert_str_eq(tt_arg_str(ev, "detail"), "probe instant");
      instants[k]++;
    }
  }
  for (int k = 0; k < THREADS; ++k) {
    cr_assert_eq(per_thread[k], SPANS_PER_THREAD, "thread %d", k);
    cr_assert_eq(instants[k], 1, "thread %d", k);
    cr_assert_str_eq(tt_thread_name(doc, me, atomic_load(&args[k].tid)), roles[k]);
  }
  char caller[32];
  snprintf(caller, sizeof(caller), "caller %d", (int)gettid());
  cr_assert_str_eq(tt_thread_name(doc, me, gettid()), caller);
  cr_assert_eq(tt_count(doc, "X", "orch"), 1);
  json_decref(doc);
}

// ---------------------------------------------------------------------------------------------
// Full rings

// A child's area in shared memory (the parent maps it; a forked process records into it).
static lw_trace_area_t *area_map(void) {
  void *p = mmap(NULL, LW_TRACE_AREA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  lw__trace_area_initialize(p);
  return p;
}

static lw_trace_area_header_t *area_header(lw_trace_area_t *a) {
  return (lw_trace_area_header_t *)a;
}

static lw_trace_ring_header_t *area_ring_at(lw_trace_area_t *a, uint32_t i) {
  return (lw_trace_ring_header_t *)((uint8_t *)a + sizeof(lw_trace_area_header_t) +
                                    (size_t)i * LW_TRACE_RING_BYTES);
}

#define OVERFILL 1808

Test(trace, a_full_child_ring_drops_and_counts_what_did_not_fit, .timeout = 30) {
  lw_trace_area_t *a = area_map();
  LW_TEST_OK(lw_trace_start(path));
  // The area is not attached yet, so nothing drains it while the child records: its ring holds
  // exactly LW_TRACE_RING_EVENTS events and drops the rest. The flag is what the parent would
  // set for an attached area.
  atomic_store(&area_header(a)->on, 1u);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    lw__trace_child_attach(a);
    lw__trace_role("run lane", 0);
    for (uint64_t i = 0; i < LW_TRACE_RING_EVENTS + OVERFILL; ++i) {
      int64_t t = lw__now_ns();
      lw__trace_span(LW_TRACE_RUN, t, t + 1, 1, i + 1, 0, LW_OK, "k");
    }
    _exit(0);
  }
  int wst = 0;
  cr_assert_eq(waitpid(child, &wst, 0), child);
  cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  lw_trace_ring_header_t *r = area_ring_at(a, 0);
  cr_assert_eq(atomic_load(&r->head), LW_TRACE_RING_EVENTS);
  cr_assert_eq(atomic_load(&r->dropped), OVERFILL);
  lw__trace_area_attach(a, "chip 0 (sim)");
  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  lw__trace_area_detach(a);
  cr_assert_eq(sum.events, LW_TRACE_RING_EVENTS);
  cr_assert_eq(sum.dropped_events, OVERFILL);

  json_t *doc = tt_load(path);
  cr_assert_eq(tt_other_uint(doc, "dropped_events"), OVERFILL);
  cr_assert_eq(tt_other_uint(doc, "events"), LW_TRACE_RING_EVENTS);
  cr_assert_eq(tt_count(doc, "X", "k"), LW_TRACE_RING_EVENTS);
  cr_assert_str_eq(tt_process_name(doc, child), "chip 0 (sim)");
  tt_assert_all_named(doc);
  // The first events are the ones kept (a full ring drops the newest).
  json_t *first = tt_run_span(doc, 1, 1), *last = tt_run_span(doc, 1, LW_TRACE_RING_EVENTS);
  cr_assert_not_null(first);
  cr_assert_not_null(last);
  cr_assert_null(tt_run_span(doc, 1, LW_TRACE_RING_EVENTS + 1));
  cr_assert_eq(tt_int(first, "pid"), child);
  cr_assert_str_eq(tt_thread_name(doc, child, tt_int(first, "tid")), "run lane");
  json_decref(doc);
  cr_assert_eq(munmap(a, LW_TRACE_AREA_BYTES), 0);
}

#define TIGHT_LOOP 100000

Test(trace, every_event_of_a_tight_loop_is_written_or_counted_as_dropped, .timeout = 60) {
  LW_TEST_OK(lw_trace_start(path));
  lw__trace_role("tight loop", -1);
  // More than a heap ring holds (16384), faster than the drainer empties it, most of the time;
  // how many are dropped depends on the drainer, but none is lost uncounted.
  for (uint64_t i = 0; i < TIGHT_LOOP; ++i) {
    int64_t t = lw__now_ns();
    lw__trace_span(LW_TRACE_RUN, t, t + 1, 1, i + 1, -1, LW_OK, "tight");
  }
  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  cr_assert_eq(sum.events + sum.dropped_events, TIGHT_LOOP, "%llu written + %llu dropped",
               (unsigned long long)sum.events, (unsigned long long)sum.dropped_events);
  cr_log_info("tight loop: %llu written, %llu dropped", (unsigned long long)sum.events,
              (unsigned long long)sum.dropped_events);
  json_t *doc = tt_load(path);
  cr_assert_eq(tt_other_uint(doc, "dropped_events"), sum.dropped_events);
  cr_assert_eq(tt_other_uint(doc, "events"), sum.events);
  cr_assert_eq(tt_count(doc, "X", "tight"), sum.events);
  json_decref(doc);
}

// ---------------------------------------------------------------------------------------------
// The track rule

// Finds the X span named name; fails when there is none or several.
static json_t *span_named(json_t *doc, const char *name) {
  size_t i;
  json_t *ev, *found = NULL;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X") || strcmp(tt_str(ev, "name"), name) != 0) continue;
    cr_assert_null(found, "two spans named %s", name);
    found = ev;
  }
  cr_assert_not_null(found, "no span named %s", name);
  return found;
}

Test(trace, partly_overlapping_spans_never_share_a_track, .timeout = 30) {
  LW_TEST_OK(lw_trace_start(path));
  lw__trace_role("overlap probe", -1);
  int64_t b = lw__now_ns();
  // A and B partly overlap; C contains D; the queue waits Q1 and Q2 partly overlap; E starts
  // where A ends (disjoint, so it may share A's track).
  lw__trace_span(LW_TRACE_RUN, b + 0 * US, b + 10 * US, 1, 1, -1, LW_OK, "A");
  lw__trace_span(LW_TRACE_RUN, b + 5 * US, b + 15 * US, 1, 2, -1, LW_OK, "B");
  lw__trace_span(LW_TRACE_RUN, b + 20 * US, b + 40 * US, 1, 3, -1, LW_OK, "C");
  lw__trace_span(LW_TRACE_REGISTER, b + 25 * US, b + 30 * US, 0, 0, -1, LW_OK, "D");
  lw__trace_span(LW_TRACE_QUEUE, b + 50 * US, b + 60 * US, 1, 4, -1, LW_OK, "Q1");
  lw__trace_span(LW_TRACE_QUEUE, b + 55 * US, b + 65 * US, 1, 5, -1, LW_OK, "Q2");
  lw__trace_span(LW_TRACE_RUN, b + 10 * US, b + 12 * US, 1, 6, -1, LW_OK, "E");
  LW_TEST_OK(lw_trace_stop(NULL));

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  tt_assert_no_partial_overlap(doc);
  json_t *A = span_named(doc, "A"), *B = span_named(doc, "B"), *C = span_named(doc, "C");
  json_t *D = span_named(doc, "D"), *E = span_named(doc, "E");
  json_t *Q1 = span_named(doc, "Q1"), *Q2 = span_named(doc, "Q2");
  int64_t me = getpid(), tid = gettid();
  cr_assert_eq(tt_int(A, "pid"), me);
  cr_assert_eq(tt_int(B, "pid"), me);
  cr_assert_eq(tt_int(A, "tid"), tid, "the first span keeps the thread's own track");
  cr_assert_neq(tt_int(B, "tid"), tt_int(A, "tid"), "B partly overlaps A: another track");
  cr_assert_str_eq(tt_thread_name(doc, me, tt_int(A, "tid")), "overlap probe");
  cr_assert_str_eq(tt_thread_name(doc, me, tt_int(B, "tid")), "overlap probe (overlap 1)");
  cr_assert_eq(tt_int(C, "tid"), tid, "nested spans stay on the thread's track");
  cr_assert_eq(tt_int(D, "tid"), tid);
  cr_assert_eq(tt_int(E, "tid"), tid, "a span that starts where another ends is disjoint");
  cr_assert_neq(tt_int(Q1, "tid"), tt_int(Q2, "tid"));
  cr_assert_eq(tt_int(Q1, "pid"), me);
  cr_assert_str_eq(tt_thread_name(doc, me, tt_int(Q1, "tid")), "queue 1");
  cr_assert_str_eq(tt_thread_name(doc, me, tt_int(Q2, "tid")), "queue 2");
  cr_assert_str_eq(tt_str(Q1, "cat"), "queue");
  cr_assert_str_eq(tt_str(D, "cat"), "register");
  json_decref(doc);
}

// The checker itself finds a partial overlap (so the tests that rely on it can fail), and
// accepts nesting and spans on different tracks.
Test(trace, the_track_checker_finds_a_partial_overlap, .timeout = 10) {
  const char *bad =
      "{\"otherData\":{},\"traceEvents\":["
      "{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":0.000,\"dur\":10.000},"
      "{\"ph\":\"X\",\"name\":\"n\",\"pid\":1,\"tid\":2,\"ts\":1.000,\"dur\":2.000},"
      "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":2,\"ts\":5.000,\"dur\":10.000},"
      "{\"ph\":\"X\",\"name\":\"c\",\"pid\":1,\"tid\":3,\"ts\":5.000,\"dur\":10.000}]}";
  json_error_t e;
  json_t *doc = json_loads(bad, 0, &e);
  cr_assert_not_null(doc, "%s", e.text);
  char why[256];
  cr_assert_eq(tt_partial_overlaps(doc, why, sizeof(why)), 1);
  cr_assert_not_null(strstr(why, "track 1/2"), "%s", why);
  json_decref(doc);
  const char *good =
      "{\"otherData\":{},\"traceEvents\":["
      "{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":0.000,\"dur\":10.000},"
      "{\"ph\":\"X\",\"name\":\"n\",\"pid\":1,\"tid\":2,\"ts\":1.000,\"dur\":9.000},"
      "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":2,\"ts\":10.000,\"dur\":10.000},"
      "{\"ph\":\"X\",\"name\":\"c\",\"pid\":1,\"tid\":3,\"ts\":5.000,\"dur\":10.000}]}";
  doc = json_loads(good, 0, &e);
  cr_assert_not_null(doc, "%s", e.text);
  cr_assert_eq(tt_partial_overlaps(doc, why, sizeof(why)), 0, "%s", why);
  json_decref(doc);
}

// ---------------------------------------------------------------------------------------------
// Overlap from events (hand-made captures)

typedef tc_hand_t hand_t;

// Tracks: 0 register lane and 1 run lane of chip 0 in process 100; 2 run lane of chip 0 in
// process 200.
static void hand_init(hand_t *h) {
  static const lw_trace_track_t tracks[] = {{100, 101, 0, "register lane"},
                                            {100, 102, 0, "run lane"},
                                            {200, 201, 0, "run lane"}};
  tc_hand_init(h, tracks, 3);
}

static void hand_span(hand_t *h, uint32_t track, lw_trace_kind_t kind, int16_t chip, int64_t a,
                      int64_t b) {
  (void)tc_hand_span(h, track, kind, chip, a, b, NULL);
}

static void expect_overlap(double got, double want) {
  cr_assert(fabs(got - want) < 1e-12, "overlap %g, expected %g", got, want);
}

Test(trace, overlap_by_events_is_one_for_a_register_inside_a_run, .timeout = 10) {
  hand_t h;
  hand_init(&h);
  hand_span(&h, 1, LW_TRACE_RUN, 0, 0, 1000);
  hand_span(&h, 0, LW_TRACE_REGISTER, 0, 200, 600);
  size_t n = 99;
  expect_overlap(lw__trace_overlap_by_events(&h.c, &n), 1.0);
  cr_assert_eq(n, 1);
}

Test(trace, overlap_by_events_is_half_for_a_register_half_inside_a_run, .timeout = 10) {
  hand_t h;
  hand_init(&h);
  hand_span(&h, 1, LW_TRACE_RUN, 0, 0, 400);
  hand_span(&h, 0, LW_TRACE_REGISTER, 0, 200, 600);
  // A run of another process (another chip child) does not count.
  hand_span(&h, 2, LW_TRACE_RUN, 0, 0, 1000);
  size_t n = 99;
  expect_overlap(lw__trace_overlap_by_events(&h.c, &n), 0.5);
  cr_assert_eq(n, 1);
}

Test(trace, overlap_by_events_is_zero_for_a_run_on_another_chip, .timeout = 10) {
  hand_t h;
  hand_init(&h);
  hand_span(&h, 1, LW_TRACE_RUN, 1, 0, 1000);
  hand_span(&h, 0, LW_TRACE_REGISTER, 0, 200, 600);
  size_t n = 99;
  expect_overlap(lw__trace_overlap_by_events(&h.c, &n), 0.0);
  cr_assert_eq(n, 1);
}

Test(trace, overlap_by_events_is_minus_one_without_a_register, .timeout = 10) {
  hand_t h;
  hand_init(&h);
  hand_span(&h, 1, LW_TRACE_RUN, 0, 0, 1000);
  size_t n = 99;
  expect_overlap(lw__trace_overlap_by_events(&h.c, &n), -1.0);
  cr_assert_eq(n, 0);
  h.c.n = 0;
  expect_overlap(lw__trace_overlap_by_events(&h.c, &n), -1.0);
  cr_assert_eq(n, 0);
}

// ---------------------------------------------------------------------------------------------
// A child's area is untrusted

static void fill(char *p, char c, size_t n) { memset(p, c, n); }

Test(trace, garbage_in_a_childs_area_is_dropped_and_counted_without_a_hang, .timeout = 30) {
  lw_trace_area_t *a = aligned_alloc(64, LW_TRACE_AREA_BYTES);
  cr_assert_not_null(a);
  memset(a, 0, LW_TRACE_AREA_BYTES);
  lw__trace_area_initialize(a);
  lw__trace_area_attach(a, "chip 7 (sim)");
  // The child's plain fields are written before the session starts (its drainer thread starts
  // after them); its counters and states after, as a child publishes them. Event times are a
  // second ahead, so they fall inside the session that starts next.
  int64_t now = lw__now_ns() + 1000 * 1000 * 1000;
  // The child scribbles over what the parent wrote: a ring count past the area.
  area_header(a)->n_rings = 1000;
  lw_trace_ring_header_t *r0 = area_ring_at(a, 0), *r1 = area_ring_at(a, 1);
  lw_trace_ring_header_t *r2 = area_ring_at(a, 2), *r3 = area_ring_at(a, 3);
  lw_trace_ring_header_t *r4 = area_ring_at(a, 4);
  r0->pid = r1->pid = r2->pid = r3->pid = r4->pid = 4242;
  r0->tid = 4243;
  r1->tid = 4244;

  // Ring 2: a kind out of range, kind 0, and one good event whose name and role lack a NUL.
  lw_trace_event_t *ev2 = (lw_trace_event_t *)(r2 + 1);
  memset(ev2, 0, 3 * sizeof(*ev2));
  ev2[0].kind = 999;
  ev2[0].ts_ns = now;
  ev2[1].kind = 0;
  ev2[1].ts_ns = now;
  ev2[2].kind = LW_TRACE_RUN;
  ev2[2].ts_ns = now;
  ev2[2].dur_ns = 5 * US;
  ev2[2].chip = 7;
  ev2[2].run_id = 3;
  ev2[2].task_id = 1;
  fill(ev2[2].name, 'x', LW_TRACE_NAME_BYTES);
  fill(r2->role, 'r', LW_TRACE_ROLE_BYTES);
  r2->tid = 4245;

  // Ring 3: its capacity overwritten with 0 (the drainer must use the one the parent knows),
  // one good event.
  lw_trace_event_t *ev3 = (lw_trace_event_t *)(r3 + 1);
  memset(ev3, 0, sizeof(*ev3));
  ev3->kind = LW_TRACE_REGISTER;
  ev3->ts_ns = now;
  ev3->dur_ns = 2 * US;
  ev3->chip = 7;
  snprintf(ev3->name, sizeof(ev3->name), "good");
  snprintf(r3->role, sizeof(r3->role), "register lane");
  r3->tid = 4246;
  r3->capacity = 0;

  // Ring 4: spans whose times make no sense: a negative duration, and one whose end is past
  // what int64 nanoseconds hold.
  lw_trace_event_t *ev4 = (lw_trace_event_t *)(r4 + 1);
  memset(ev4, 0, 2 * sizeof(*ev4));
  for (int k = 0; k < 2; ++k) {
    ev4[k].kind = LW_TRACE_RUN;
    ev4[k].ts_ns = now;
    ev4[k].chip = 7;
    snprintf(ev4[k].name, sizeof(ev4[k].name), "bad time");
  }
  ev4[0].dur_ns = -5 * US;
  ev4[1].dur_ns = INT64_MAX;
  r4->tid = 4247;

  LW_TEST_OK(lw_trace_start(path));
  cr_assert_eq(atomic_load(&area_header(a)->on), 1u, "an attached area's flag follows the session");
  // Ring 0: head behind tail.
  atomic_store(&r0->tail, 10);
  atomic_store(&r0->state, LW_TRACE_RING_CLAIMED);
  atomic_store(&r0->head, 5);
  // Ring 1: more published than the ring holds.
  atomic_store(&r1->state, LW_TRACE_RING_CLAIMED);
  atomic_store(&r1->head, 100000);
  // Ring 2: three events, a dropped counter of 7, a state no one defined.
  atomic_store(&r2->dropped, 7);
  atomic_store(&r2->state, 77u);
  atomic_store(&r2->head, 3);
  // Rings 3 and 4.
  atomic_store(&r3->state, LW_TRACE_RING_CLAIMED);
  atomic_store(&r3->head, 1);
  atomic_store(&r4->state, LW_TRACE_RING_CLAIMED);
  atomic_store(&r4->head, 2);
  // Events lost because no ring was free.
  atomic_store(&area_header(a)->no_ring, 5u);

  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  cr_assert_eq(atomic_load(&area_header(a)->on), 0u);
  lw__trace_area_detach(a);
  cr_assert_eq(sum.events, 2, "the good event of ring 2 and the one of ring 3");
  cr_assert_eq(sum.dropped_events, LW_TRACE_RING_EVENTS + 7 + 5,
               "ring 1's impossible gap (one ring's worth), ring 2's counter, no_ring");

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  tt_assert_no_partial_overlap(doc);
  cr_assert_eq(tt_other_uint(doc, "dropped_events"), sum.dropped_events);
  char x47[LW_TRACE_NAME_BYTES];
  fill(x47, 'x', LW_TRACE_NAME_BYTES - 1);
  x47[LW_TRACE_NAME_BYTES - 1] = '\0';
  json_t *run = tt_run_span(doc, 3, 1);
  cr_assert_not_null(run);
  cr_assert_str_eq(tt_str(run, "name"), x47, "the name is cut at its bound");
  cr_assert_eq(tt_int(run, "pid"), 4242);
  cr_assert_str_eq(tt_process_name(doc, 4242), "chip 7 (sim)");
  char r23[LW_TRACE_ROLE_BYTES];
  fill(r23, 'r', LW_TRACE_ROLE_BYTES - 1);
  r23[LW_TRACE_ROLE_BYTES - 1] = '\0';
  cr_assert_str_eq(tt_thread_name(doc, 4242, 4245), r23, "the role is cut at its bound");
  json_t *good = span_named(doc, "good");
  cr_assert_str_eq(tt_thread_name(doc, 4242, tt_int(good, "tid")), "register lane");
  cr_assert_eq(tt_count(doc, "X", NULL) + tt_count(doc, "i", NULL), 2);
  cr_assert_eq(tt_count(doc, "X", "bad time"), 0);
  json_decref(doc);
  free(a);
}

// ---------------------------------------------------------------------------------------------
// Sessions do not leak into each other

Test(trace, events_recorded_after_a_stop_are_not_in_the_next_session, .timeout = 30) {
  char second[160];
  snprintf(second, sizeof(second), "%s/trace2.json", dir);
  LW_TEST_OK(lw_trace_start(path));
  lw__trace_role("sessions", -1);
  int64_t t = lw__now_ns();
  lw__trace_span(LW_TRACE_RUN, t, t + US, 1, 1, -1, LW_OK, "in first");
  LW_TEST_OK(lw_trace_stop(NULL));
  cr_assert_not(lw__trace_on());
  // Recording points check the flag: nothing is recorded now.
  t = lw__now_ns();
  lw__trace_span(LW_TRACE_RUN, t, t + US, 1, 2, -1, LW_OK, "after stop");
  // A thread that saw the flag just before the stop still writes its event into its ring
  // after the last drain.
  lw_trace_event_t late;
  memset(&late, 0, sizeof(late));
  late.kind = LW_TRACE_RUN;
  late.ts_ns = lw__now_ns();
  late.dur_ns = US;
  late.chip = -1;
  snprintf(late.name, sizeof(late.name), "late");
  lw__trace_emit(&late);
  int64_t before_second = lw__now_ns();

  LW_TEST_OK(lw_trace_start(second));
  // One recorded as the first session stopped, landing in the ring after the second began.
  lw_trace_event_t later = late;
  later.ts_ns = before_second;
  snprintf(later.name, sizeof(later.name), "later");
  lw__trace_emit(&later);
  t = lw__now_ns();
  lw__trace_span(LW_TRACE_RUN, t, t + US, 2, 1, -1, LW_OK, "in second");
  lw_trace_summary_t sum;
  LW_TEST_OK(lw_trace_stop(&sum));
  cr_assert_eq(sum.events, 1);

  json_t *doc = tt_load(path);
  cr_assert_eq(tt_count(doc, "X", "in first"), 1);
  cr_assert_eq(tt_count(doc, "X", NULL), 1);
  json_decref(doc);
  doc = tt_load(second);
  cr_assert_eq(tt_count(doc, "X", "in second"), 1);
  cr_assert_eq(tt_count(doc, "X", "after stop"), 0);
  cr_assert_eq(tt_count(doc, "X", "late"), 0);
  cr_assert_eq(tt_count(doc, "X", "later"), 0);
  cr_assert_eq(tt_count(doc, "X", NULL), 1);
  json_decref(doc);
}
