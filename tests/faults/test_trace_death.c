// tests/faults/test_trace_death.c — the trace keeps the run that killed its child: a kernel
// that segfaults, a hung kernel killed at its timeout and a sub function whose child dies
// each leave a failed run span, ending at the death with the death on it, on the track where
// their child's own run spans go, in the JSON file and in `lanework trace svg`; a run that
// completed has exactly one span, even when its child is killed afterwards. Order and
// containment only, never durations.
#include "fault_util.h"
#include "lanework/trace.h"
#include "trace_test_util.h"

static fx_t f;
static char dir[64];
static char path[128];
static char svg[160];

static void dir_make(void) {
  snprintf(dir, sizeof(dir), "/tmp/lw_trace_death_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/trace.json", dir);
  snprintf(svg, sizeof(svg), "%s/trace.svg", dir);
}

static void dir_remove(void) {
  (void)unlink(svg);
  (void)unlink(path);
  (void)rmdir(dir);
}

TestSuite(trace_death, .init = dir_make, .fini = dir_remove);

static void trace_start(void) {
  cr_assert_eq(lw_trace_start(path), LW_OK, "%s", lw_last_error()->message);
}

static json_t *trace_stop_and_load(void) {
  lw_trace_summary_t sum;
  cr_assert_eq(lw_trace_stop(&sum), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(sum.dropped_events, 0);
  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  tt_assert_no_partial_overlap(doc);
  return doc;
}

static int64_t span_end(json_t *span) { return tt_ns(span, "ts") + tt_ns(span, "dur"); }

// The instant named name with args run and task (0: none) and args.chip chip: the only one.
static json_t *one_instant(json_t *doc, const char *name, int64_t chip, int64_t run,
                           int64_t task) {
  size_t i;
  json_t *ev, *found = NULL;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "i") || strcmp(tt_str(ev, "name"), name) != 0) continue;
    if (tt_arg_int(ev, "chip", -1) != chip || tt_arg_int(ev, "run", 0) != run ||
        tt_arg_int(ev, "task", 0) != task) {
      continue;
    }
    cr_assert_null(found, "two %s instants for chip %lld run %lld task %lld", name,
                   (long long)chip, (long long)run, (long long)task);
    found = ev;
  }
  cr_assert_not_null(found, "no %s instant for chip %lld run %lld task %lld", name,
                     (long long)chip, (long long)run, (long long)task);
  return found;
}

// The X span of cat with args run and task, or NULL.
static json_t *span_of(json_t *doc, const char *cat, int64_t run, int64_t task) {
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X") || strcmp(tt_str(ev, "cat"), cat) != 0) continue;
    if (tt_arg_int(ev, "run", 0) == run && tt_arg_int(ev, "task", 0) == task) return ev;
  }
  return NULL;
}

typedef struct dead_expect {
  const char *callable;
  int64_t chip;        // args.chip: chip or sub index
  pid_t pid;           // the child that died
  const char *track;   // its thread track: "run lane", "sub loop"
  const char *status;  // the task's final status
  const char *start;   // args.start_from: "kernel start", "dispatch"
  const char *died;    // args.child_died and the death instant's detail
} dead_expect_t;

// The run span of (run, task) that the dead child never ended: one span, as expected, and a
// death instant on its track that lies on it; after its dispatch, before the parent's
// instant of the child's death. Returns the span.
static json_t *expect_dead_run(json_t *doc, int64_t run, int64_t task, const dead_expect_t *x) {
  json_t *span = tt_run_span(doc, (uint64_t)run, (uint64_t)task);  // fails on a second one
  cr_assert_not_null(span, "no run span for run %lld task %lld (%s), whose child died",
                     (long long)run, (long long)task, x->callable);
  cr_assert_str_eq(tt_str(span, "name"), x->callable);
  cr_assert_str_eq(tt_arg_str(span, "callable"), x->callable);
  cr_assert_eq(tt_arg_int(span, "chip", -1), x->chip);
  cr_assert_eq(tt_int(span, "pid"), x->pid, "in the process of the child that died");
  int64_t tid = tt_int(span, "tid");
  cr_assert_str_eq(tt_thread_name(doc, x->pid, tid), x->track);
  cr_assert_str_eq(tt_arg_str(span, "status"), x->status);
  cr_assert_str_eq(tt_arg_str(span, "start_from"), x->start);
  cr_assert_str_eq(tt_arg_str(span, "child_died"), x->died);
  int64_t a = tt_ns(span, "ts"), b = span_end(span);
  cr_assert_leq(a, b, "the span ends at or after its start");

  json_t *death = one_instant(doc, "death", x->chip, run, task);
  cr_assert_eq(tt_int(death, "pid"), x->pid);
  cr_assert_eq(tt_int(death, "tid"), tid, "the death is on the span's track");
  cr_assert_str_eq(tt_arg_str(death, "detail"), x->died);
  int64_t d = tt_ns(death, "ts");
  cr_assert(a <= d && d <= b, "the death (%lld) lies on the span [%lld, %lld]", (long long)d,
            (long long)a, (long long)b);

  json_t *dispatch = span_of(doc, "dispatch", run, task);
  cr_assert_not_null(dispatch, "no dispatch span for run %lld task %lld", (long long)run,
                     (long long)task);
  if (strcmp(x->start, "kernel start") == 0) {
    cr_assert_leq(tt_ns(dispatch, "ts"), a, "the kernel starts after its dispatch began");
  } else {
    // The parent's dispatch: after the submit began, before the post was done.
    json_t *submit = span_of(doc, "submit", run, task);
    cr_assert_not_null(submit, "no submit span for run %lld task %lld", (long long)run,
                       (long long)task);
    cr_assert_leq(tt_ns(submit, "ts"), a, "the run starts after its submit began");
    cr_assert_leq(a, span_end(dispatch), "the run starts by the end of its post");
  }
  // The parent's own instant of the child's death (on its scheduler track, naming no task) is
  // recorded after the parent ended the span.
  if (strcmp(x->track, "run lane") == 0) {
    json_t *child_death = one_instant(doc, "death", x->chip, 0, 0);
    cr_assert_leq(b, tt_ns(child_death, "ts"), "the span ends before the child's death instant");
  }
  return span;
}

// The run spans recorded in process pid: how many.
static size_t runs_in(json_t *doc, pid_t pid) {
  size_t i, n = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X") || strcmp(tt_str(ev, "cat"), "run") != 0) continue;
    n += tt_int(ev, "pid") == pid;
  }
  return n;
}

// The picture of the trace: `lanework trace svg` draws the dead run like any run span (its
// hover text names the callable and the status) and the death on it (its detail).
static void expect_in_picture(const char *callable, const char *status, const char *died) {
  const char *draw[] = {lw_test_tool_path(), "trace", "svg", path, "-o", svg, NULL};
  cr_assert_eq(tt_run_quiet(draw), 0, "lanework trace svg %s", path);
  FILE *fp = fopen(svg, "r");
  cr_assert_not_null(fp);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof(text) - 1, fp);
  fclose(fp);
  text[n] = '\0';
  char span[160], death[160];
  snprintf(span, sizeof(span), "callable: %s", callable);
  snprintf(death, sizeof(death), "detail: %s", died);
  bool drawn = false;
  // A rectangle whose hover text names the callable and the status.
  for (const char *p = text; (p = strstr(p, "<rect")) != NULL; ++p) {
    const char *end = strstr(p, "</rect>");
    if (!end) break;
    const char *c = strstr(p, span), *s = strstr(p, status);
    if (c && s && c < end && s < end) drawn = true;
  }
  cr_assert(drawn, "%s: no span of %s with status %s", svg, callable, status);
  cr_assert_not_null(strstr(text, death), "%s: no instant with '%s'", svg, death);
}

// ---------------------------------------------------------------------------------------------

Test(trace_death, a_kernel_that_segfaults_keeps_its_run_span_on_the_chips_run_lane,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  lw_callable_handle_t crash = fx_reg(&f, "crash");
  shared_t *s = fx_shared(&f);
  pid_t chip0 = fx_pid(&f, 0);
  trace_start();
  fx_run_vadd_ok(&f, vadd, s, 0);  // run 1: a span the child records itself
  job_t j = {crash, s, JOB_NONE, 0, 0, 0, 1};
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, NULL), LW_CHILD_EXITED);  // run 2
  json_t *doc = trace_stop_and_load();
  fx_destroy(&f);

  json_t *own = tt_run_span(doc, 1, 1);
  cr_assert_not_null(own);
  cr_assert_eq(tt_int(own, "pid"), chip0);
  dead_expect_t x = {"crash",         0,        chip0, "run lane", "LW_CHILD_EXITED",
                     "kernel start", "child died: killed by SIGSEGV"};
  json_t *dead = expect_dead_run(doc, 2, 1, &x);
  cr_assert_eq(tt_int(dead, "tid"), tt_int(own, "tid"), "on the track of the child's own runs");
  cr_assert_leq(span_end(own), tt_ns(dead, "ts"), "after the run before it");
  cr_assert_eq(runs_in(doc, chip0), 2);
  json_decref(doc);
  expect_in_picture("crash", "status: LW_CHILD_EXITED", x.died);
}

Test(trace_death, a_hung_kernel_killed_at_its_timeout_keeps_its_run_span, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t hang = fx_reg(&f, "hang");
  pid_t chip0 = fx_pid(&f, 0);
  trace_start();
  job_t j = {hang, NULL, JOB_NONE, 0, 0, 20ll * 1000 * 1000, 1};
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, NULL), LW_DEADLINE_EXCEEDED);
  json_t *doc = trace_stop_and_load();
  fx_destroy(&f);

  dead_expect_t x = {"hang",          0,        chip0, "run lane", "LW_DEADLINE_EXCEEDED",
                     "kernel start", "child died: killed by SIGKILL"};
  json_t *dead = expect_dead_run(doc, 1, 1, &x);
  // The escalation that killed it lies on the run: after the kernel started, before the death.
  json_t *esc = one_instant(doc, "escalation", 0, 1, 1);
  int64_t e = tt_ns(esc, "ts");
  cr_assert(tt_ns(dead, "ts") <= e && e <= span_end(dead),
            "the escalation (%lld) lies on the span [%lld, %lld]", (long long)e,
            (long long)tt_ns(dead, "ts"), (long long)span_end(dead));
  json_decref(doc);
  expect_in_picture("hang", "status: LW_DEADLINE_EXCEEDED", x.died);
}

static lw_status_t sub_ok(const lw_kernel_args_t *args) {
  (void)args;
  return LW_OK;
}

static lw_status_t sub_dies(const lw_kernel_args_t *args) {
  (void)args;
  raise(SIGKILL);
  return LW_OK;
}

static lw_status_t sub_orch(lw_orch_t *o, void *user) {
  return lw_orch_submit_sub(o, *(lw_callable_handle_t *)user, NULL);
}

Test(trace_death, a_sub_function_whose_child_dies_keeps_its_run_span_on_the_sub_loop,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 1);
  fx_create(&f, &cfg);
  lw_callable_handle_t ok, dies;
  LW_ASSERT_OK(lw_worker_register_sub(f.w, sub_ok, "sub_ok", &ok));
  LW_ASSERT_OK(lw_worker_register_sub(f.w, sub_dies, "sub_dies", &dies));
  pid_t sub0 = fx_pid(&f, 1);
  trace_start();
  LW_ASSERT_OK(lw_worker_run(f.w, sub_orch, &ok, NULL));                 // run 1
  cr_assert_eq(lw_worker_run(f.w, sub_orch, &dies, NULL), LW_CHILD_EXITED);  // run 2
  json_t *doc = trace_stop_and_load();
  fx_destroy(&f);

  json_t *own = tt_run_span(doc, 1, 1);
  cr_assert_not_null(own);
  cr_assert_eq(tt_int(own, "pid"), sub0);
  // A sub child stamps its function's start as a chip child stamps its kernel's.
  dead_expect_t x = {"sub_dies", 0,          sub0, "sub loop", "LW_CHILD_EXITED",
                     "kernel start", "child died: killed by SIGKILL"};
  json_t *dead = expect_dead_run(doc, 2, 1, &x);
  cr_assert_eq(tt_int(dead, "tid"), tt_int(own, "tid"), "on the track of the child's own runs");
  json_decref(doc);
}

Test(trace_death, a_run_that_completed_has_one_span_even_when_its_child_is_killed_after,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  pid_t chip0 = fx_pid(&f, 0);
  trace_start();
  fx_run_vadd_ok(&f, vadd, s, 0);
  cr_assert_eq(kill(chip0, SIGKILL), 0);
  fx_wait_respawned(&f, 0, 1);
  json_t *doc = trace_stop_and_load();
  fx_destroy(&f);

  json_t *run = tt_run_span(doc, 1, 1);  // fails on a second span
  cr_assert_not_null(run);
  cr_assert_eq(tt_int(run, "pid"), chip0);
  cr_assert_str_eq(tt_arg_str(run, "status"), "LW_OK");
  cr_assert_null(tt_arg_str(run, "child_died"), "the child ended this run itself");
  cr_assert_eq(runs_in(doc, chip0), 1);
  // The death is there (the child's, on the parent's track), but on no run.
  json_t *death = one_instant(doc, "death", 0, 0, 0);
  cr_assert_leq(span_end(run), tt_ns(death, "ts"));
  size_t i, on_runs = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    on_runs += tt_is(ev, "i") && strcmp(tt_str(ev, "name"), "death") == 0 &&
               tt_arg_int(ev, "task", 0) != 0;
  }
  cr_assert_eq(on_runs, 0);
  json_decref(doc);
}
