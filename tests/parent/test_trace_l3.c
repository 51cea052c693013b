// tests/parent/test_trace_l3.c — trace sessions of a whole L3 worker: a traced run with two chip
// children and a sub child — a DAG across chips, a sub task, a failing task, a chip child
// killed mid-run and work after its respawn — read back with jansson: every process and track
// named, a run span for every task that ran (the killed one too), a flow for every dependency
// edge, the death and the respawn, register spans on the register lanes, and the track rule.
// And LW_TRACE=path: a program run with it writes the file at exit, from its own process only.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults/fault_util.h"
#include "lanework/trace.h"
#include "trace_test_util.h"

static fx_t f;
static char dir[64];
static char path[128];

static void dir_make(void) {
  snprintf(dir, sizeof(dir), "/tmp/lw_trace_l3_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/trace.json", dir);
}

static void dir_remove(void) {
  char p[160];
  snprintf(p, sizeof(p), "%s/trace.svg", dir);
  (void)unlink(p);
  snprintf(p, sizeof(p), "%s/trace.png", dir);
  (void)unlink(p);
  (void)unlink(path);
  (void)rmdir(dir);
}

TestSuite(trace_l3, .init = dir_make, .fini = dir_remove);

static lw_status_t trace_sub(const lw_kernel_args_t *args) {
  (void)args;
  return LW_OK;
}

typedef struct dag_job {
  lw_callable_handle_t gate, record, sub;
  shared_t *s;   // gate and entered of task a
  int64_t *log;  // the record kernel's log (64 slots)
  uint8_t *x, *y;
} dag_job_t;

// Run 1: a (gate, chip 0) writes x -> b (record, chip 1) reads x, writes y -> c (record, chip 0)
// reads y; and a sub task. a is held by its gate until every task is submitted, so b and c
// find their producers unfinished and both edges are made (an edge to a finished producer is
// not needed, hence not recorded).
static lw_status_t dag_orch(lw_orch_t *o, void *user) {
  dag_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * 8, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->y, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 2));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->record, &a, NULL, 1));
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * 8, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->y, 64, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 3));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->record, &a, NULL, 0));
  LW_RETURN_IF_ERROR(lw_orch_submit_sub(o, j->sub, NULL));
  atomic_store(&j->s->gate, 1);
  return LW_OK;
}

typedef struct one_job {
  lw_callable_handle_t k;
  int64_t *log;
  uint64_t scalar;
  int32_t chip;
} one_job_t;

static lw_status_t one_orch(lw_orch_t *o, void *user) {
  one_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  if (j->log) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * 8, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->scalar));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, j->chip);
}

// Run 4: one record task on each chip, after the respawn.
static lw_status_t after_orch(lw_orch_t *o, void *user) {
  one_job_t *j = user;
  for (int32_t chip = 1; chip >= 0; --chip) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * 8, LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 10 + (uint64_t)chip));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->k, &a, NULL, chip));
  }
  return LW_OK;
}

// The run span of (run, task): present, of callable on chip (its args) in process pid.
static json_t *expect_run(json_t *doc, uint64_t run, uint64_t task, const char *callable,
                          int64_t chip, int64_t pid, const char *status) {
  json_t *ev = tt_run_span(doc, run, task);
  cr_assert_not_null(ev, "no run span for run %llu task %llu (%s)", (unsigned long long)run,
                     (unsigned long long)task, callable);
  cr_assert_str_eq(tt_str(ev, "name"), callable, "run %llu task %llu", (unsigned long long)run,
                   (unsigned long long)task);
  cr_assert_str_eq(tt_arg_str(ev, "callable"), callable);
  cr_assert_eq(tt_arg_int(ev, "chip", -1), chip, "run %llu task %llu", (unsigned long long)run,
               (unsigned long long)task);
  cr_assert_eq(tt_int(ev, "pid"), pid, "run %llu task %llu ran in process %lld",
               (unsigned long long)run, (unsigned long long)task, (long long)pid);
  cr_assert_str_eq(tt_arg_str(ev, "status"), status, "run %llu task %llu",
                   (unsigned long long)run, (unsigned long long)task);
  return ev;
}

// The instants named name whose args.chip is chip and args.task is task (0: none): how many.
static size_t count_instants(json_t *doc, const char *name, int64_t chip, int64_t task) {
  size_t i, n = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "i") || strcmp(tt_str(ev, "name"), name) != 0) continue;
    n += tt_arg_int(ev, "chip", -1) == chip && tt_arg_int(ev, "task", 0) == task;
  }
  return n;
}

// Register spans in process pid, each on a track named "register lane".
static size_t count_registers(json_t *doc, int64_t pid) {
  size_t i, n = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X") || strcmp(tt_str(ev, "cat"), "register") != 0) continue;
    if (tt_int(ev, "pid") != pid) continue;
    cr_assert_str_eq(tt_thread_name(doc, pid, tt_int(ev, "tid")), "register lane",
                     "register of %s in process %lld", tt_str(ev, "name"), (long long)pid);
    ++n;
  }
  return n;
}

Test(trace_l3, a_traced_run_names_every_process_and_links_every_dependency, .timeout = 120) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 1);
  fx_create(&f, &cfg);
  cr_assert_eq(lw_trace_start(path), LW_OK, "%s", lw_last_error()->message);

  dag_job_t dj = {.gate = fx_reg(&f, "gate"), .record = fx_reg(&f, "record"),
                  .s = fx_shared(&f), .log = lw_worker_alloc(f.w, 64 * 8),
                  .x = lw_worker_alloc(f.w, 64), .y = lw_worker_alloc(f.w, 64)};
  cr_assert(dj.log && dj.x && dj.y);
  memset(dj.log, 0, 64 * 8);
  LW_ASSERT_OK(lw_worker_register_sub(f.w, trace_sub, "trace_sub", &dj.sub));
  lw_callable_handle_t fail = fx_reg(&f, "fail");
  pid_t chip0 = fx_pid(&f, 0), chip1_old = fx_pid(&f, 1), sub0 = fx_pid(&f, 2);

  // Run 1: the DAG and the sub task.
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(f.w, dag_orch, &dj, &rep));
  cr_assert_eq(rep.n_tasks, 4);
  cr_assert_eq(rep.n_completed, 4);
  cr_assert_eq(dj.log[0], 2);
  cr_assert_eq(dj.log[1], 2, "b ran before c");
  cr_assert_eq(dj.log[2], 3);

  // Run 2: a task whose kernel fails.
  one_job_t fj = {.k = fail, .scalar = (uint64_t)(int64_t)-3, .chip = 1};
  cr_assert_eq(lw_worker_run(f.w, one_orch, &fj, &rep), LW_TASK_FAILED);

  // Run 3: chip 1 is killed while its task runs (held by a gate that never opens).
  shared_t *held = fx_shared(&f);
  job_t doomed = {dj.gate, held, JOB_GATE, 1, 0, 0, 1};
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &doomed, &h));
  lw_test_wait_nonzero(&held->entered);
  cr_assert_eq(kill(chip1_old, SIGKILL), 0);
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  lw_handle_release(h);
  fx_wait_respawned(&f, 1, 1);
  pid_t chip1_new = fx_pid(&f, 1);
  cr_assert_neq(chip1_new, chip1_old);

  // Run 4: work on both chips after the respawn.
  one_job_t aj = {.k = dj.record, .log = dj.log};
  LW_ASSERT_OK(lw_worker_run(f.w, after_orch, &aj, &rep));

  lw_trace_summary_t sum;
  cr_assert_eq(lw_trace_stop(&sum), LW_OK, "%s", lw_last_error()->message);
  fx_destroy(&f);

  json_t *doc = tt_load(path);
  cr_assert_eq(tt_other_uint(doc, "events"), sum.events);
  cr_assert_eq(tt_other_uint(doc, "dropped_events"), 0);
  cr_assert_eq(sum.dropped_events, 0);

  // Processes and tracks.
  cr_assert_str_eq(tt_process_name(doc, getpid()), "lanework parent");
  cr_assert_str_eq(tt_process_name(doc, chip0), "chip 0 (sim)");
  cr_assert_str_eq(tt_process_name(doc, chip1_old), "chip 1 (sim)");
  cr_assert_str_eq(tt_process_name(doc, chip1_new), "chip 1 (sim)", "the respawned child too");
  cr_assert_str_eq(tt_process_name(doc, sub0), "sub 0");
  tt_assert_all_named(doc);
  tt_assert_no_partial_overlap(doc);

  // A run span for every task that ran, where it ran.
  json_t *a = expect_run(doc, 1, 1, "gate", 0, chip0, "LW_OK");
  json_t *b = expect_run(doc, 1, 2, "record", 1, chip1_old, "LW_OK");
  json_t *c = expect_run(doc, 1, 3, "record", 0, chip0, "LW_OK");
  expect_run(doc, 1, 4, "trace_sub", 0, sub0, "LW_OK");
  expect_run(doc, 2, 1, "fail", 1, chip1_old, "LW_TASK_FAILED");
  // The killed task's run, which its child never ended: recorded by the parent on the old
  // child's run lane, failed, the death on it.
  json_t *killed = expect_run(doc, 3, 1, "gate", 1, chip1_old, "LW_CHILD_EXITED");
  cr_assert_str_eq(tt_thread_name(doc, chip1_old, tt_int(killed, "tid")), "run lane");
  cr_assert_str_eq(tt_arg_str(killed, "child_died"), "child died: killed by SIGKILL");
  expect_run(doc, 4, 1, "record", 1, chip1_new, "LW_OK");
  expect_run(doc, 4, 2, "record", 0, chip0, "LW_OK");
  cr_assert_eq(tt_count(doc, "X", "orch") >= 4, true, "an orch span per run");

  // A dep flow for each edge (a -> b, b -> c), and no other.
  size_t i;
  json_t *ev;
  int ab = 0, bc = 0, flows = 0;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "s") || strcmp(tt_str(ev, "name"), "dep") != 0) continue;
    ++flows;
    int64_t id = tt_int(ev, "id");
    json_t *end = NULL, *e2;
    size_t k;
    json_array_foreach(tt_events(doc), k, e2) {
      if (tt_is(e2, "f") && strcmp(tt_str(e2, "name"), "dep") == 0 && tt_int(e2, "id") == id) {
        cr_assert_null(end, "two ends for dep flow %lld", (long long)id);
        end = e2;
      }
    }
    cr_assert_not_null(end, "dep flow %lld has no end", (long long)id);
    cr_assert_str_eq(tt_str(end, "bp"), "e");
    json_t *from = tt_run_span_at(doc, ev), *to = tt_run_span_at(doc, end);
    cr_assert_not_null(from, "dep flow %lld starts outside a run span", (long long)id);
    cr_assert_not_null(to, "dep flow %lld ends outside a run span", (long long)id);
    ab += from == a && to == b;
    bc += from == b && to == c;
  }
  cr_assert_eq(ab, 1, "a -> b");
  cr_assert_eq(bc, 1, "b -> c");
  cr_assert_eq(flows, 2);

  // The death and the respawn of chip 1, and the death on the run it cut; nothing of the kind
  // for chip 0.
  cr_assert_eq(count_instants(doc, "death", 1, 0), 1);
  cr_assert_eq(count_instants(doc, "death", 1, 1), 1, "on run 3's task 1");
  cr_assert_eq(count_instants(doc, "respawn", 1, 0), 1);
  cr_assert_eq(count_instants(doc, "death", 0, 0), 0);

  // Registers (gate, record, fail; replayed on the new chip 1) on the register lanes.
  cr_assert_geq(count_registers(doc, chip0), 3);
  cr_assert_geq(count_registers(doc, chip1_old), 3);
  cr_assert_geq(count_registers(doc, chip1_new), 3, "the replay is traced in the new child");

  // Each task that ran has its dispatch flow: s in its submit span, t in its dispatch span, f
  // in its run span.
  int dispatch_flows = 0;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "f") || strcmp(tt_str(ev, "name"), "dispatch") != 0) continue;
    ++dispatch_flows;
    cr_assert_not_null(tt_run_span_at(doc, ev), "a dispatch flow ends outside a run span");
    int64_t id = tt_int(ev, "id");
    int starts = 0, steps = 0;
    json_t *e2;
    size_t k;
    json_array_foreach(tt_events(doc), k, e2) {
      if (strcmp(tt_str(e2, "name"), "dispatch") != 0 || tt_int(e2, "id") != id) continue;
      starts += tt_is(e2, "s");
      steps += tt_is(e2, "t");
    }
    cr_assert_eq(starts, 1, "dispatch flow %lld: one start (in the submit span)", (long long)id);
    cr_assert_eq(steps, 1, "dispatch flow %lld: one step (in the dispatch span)", (long long)id);
  }
  cr_assert_geq(dispatch_flows, 8,
                "every task that ran (8, the killed one too) has its dispatch flow");
  json_decref(doc);

  // The picture of this trace: `lanework trace svg` draws it and rsvg-convert renders it.
  char svg[160], png[160];
  snprintf(svg, sizeof(svg), "%s/trace.svg", dir);
  snprintf(png, sizeof(png), "%s/trace.png", dir);
  const char *draw[] = {lw_test_tool_path(), "trace", "svg", path, "-o", svg, NULL};
  cr_assert_eq(tt_run_quiet(draw), 0, "lanework trace svg %s", path);
  const char *render[] = {"rsvg-convert", "-o", png, svg, NULL};
  cr_assert_eq(tt_run_quiet(render), 0, "rsvg-convert %s (librsvg2-bin, scripts/common.sh)", svg);
  FILE *pf = fopen(png, "rb");
  cr_assert_not_null(pf);
  unsigned char sig[8] = {0};
  cr_assert_eq(fread(sig, 1, sizeof(sig), pf), sizeof(sig));
  fclose(pf);
  cr_assert(memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0, "%s is not a PNG", png);
}

// ---------------------------------------------------------------------------------------------
// LW_TRACE

// How many inotify events of mask's kinds named name are queued on fd.
static void count_inotify(int fd, const char *name, int *opens, int *close_writes) {
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return;  // EAGAIN: all read
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *e = (const struct inotify_event *)p;
      if (e->len && strcmp(e->name, name) == 0) {
        *opens += (e->mask & IN_OPEN) != 0;
        *close_writes += (e->mask & IN_CLOSE_WRITE) != 0;
      }
      p += sizeof(*e) + e->len;
    }
  }
}

Test(trace_l3, lw_trace_makes_a_program_write_the_file_at_exit_from_its_own_process,
     .timeout = 120) {
  int children_before = lw_test_child_count();
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  cr_assert_geq(in, 0);
  cr_assert_geq(inotify_add_watch(in, dir, IN_OPEN | IN_CLOSE_WRITE), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    setenv("LW_TRACE", path, 1);
    execl(LW_PIPELINE_PATH, LW_PIPELINE_PATH, lw_test_kernel_dir(), (char *)NULL);
    _exit(127);
  }
  int wst = 0;
  cr_assert_eq(waitpid(pid, &wst, 0), pid);
  cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "pipeline exited with status %#x", wst);
  int opens = 0, close_writes = 0;
  count_inotify(in, "trace.json", &opens, &close_writes);
  close(in);
  cr_assert_eq(opens, 1, "only the program's own process opens the file");
  cr_assert_eq(close_writes, 1);

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  tt_assert_no_partial_overlap(doc);
  cr_assert_str_eq(tt_process_name(doc, pid), "lanework parent");
  // The example runs its 13-task DAG three times (runs 1..3).
  for (uint64_t run = 1; run <= 3; ++run) {
    for (uint64_t task = 1; task <= 13; ++task) {
      cr_assert_not_null(tt_run_span(doc, run, task), "run %llu task %llu",
                         (unsigned long long)run, (unsigned long long)task);
    }
  }
  // Exactly one parent process, and children named as such.
  size_t i, parents = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "M") || strcmp(tt_str(ev, "name"), "process_name") != 0) continue;
    const char *name = tt_arg_str(ev, "name");
    if (strcmp(name, "lanework parent") == 0) {
      ++parents;
    } else {
      cr_assert(strncmp(name, "chip ", 5) == 0 || strncmp(name, "sub ", 4) == 0, "%s", name);
      cr_assert_neq(tt_int(ev, "pid"), pid);
    }
  }
  cr_assert_eq(parents, 1);
  json_decref(doc);
  cr_assert_eq(lw_test_child_count(), children_before);
}

// A worker destroyed while the session runs: its children's events stay in the file, and its
// areas (unmapped with it) are no longer drained — the session, and the next one, go on.
Test(trace_l3, a_worker_destroyed_during_a_session_keeps_its_events_and_leaves_no_area,
     .timeout = 120) {
  // The session's file is open before either worker counts the fds it must leave behind.
  cr_assert_eq(lw_trace_start(path), LW_OK, "%s", lw_last_error()->message);
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  int64_t *log = lw_worker_alloc(f.w, 64 * 8);
  cr_assert_not_null(log);
  memset(log, 0, 64 * 8);
  one_job_t j = {.k = fx_reg(&f, "record"), .log = log, .scalar = 1, .chip = 0};
  LW_ASSERT_OK(lw_worker_run(f.w, one_orch, &j, NULL));
  pid_t chip0 = fx_pid(&f, 0);
  fx_destroy(&f);
  // A second worker in the same session.
  fx_create(&f, &cfg);
  log = lw_worker_alloc(f.w, 64 * 8);
  cr_assert_not_null(log);
  memset(log, 0, 64 * 8);
  j.k = fx_reg(&f, "record");
  j.log = log;
  LW_ASSERT_OK(lw_worker_run(f.w, one_orch, &j, NULL));
  pid_t chip0_second = fx_pid(&f, 0);
  fx_destroy(&f);
  cr_assert_eq(lw_trace_stop(NULL), LW_OK, "%s", lw_last_error()->message);

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  cr_assert_str_eq(tt_process_name(doc, chip0), "chip 0 (sim)");
  cr_assert_str_eq(tt_process_name(doc, chip0_second), "chip 0 (sim)");
  // Each worker's run 1 task 1, in its own chip child.
  int first = 0, second = 0;
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X") || strcmp(tt_str(ev, "cat"), "run") != 0) continue;
    cr_assert_str_eq(tt_str(ev, "name"), "record");
    cr_assert_eq(tt_arg_int(ev, "run", 0), 1);
    cr_assert_eq(tt_arg_int(ev, "task", 0), 1);
    first += tt_int(ev, "pid") == chip0;
    second += tt_int(ev, "pid") == chip0_second;
  }
  cr_assert_eq(first, 1);
  cr_assert_eq(second, 1);
  json_decref(doc);
  // The next session drains nothing of the workers that are gone.
  cr_assert_eq(lw_trace_start(path), LW_OK, "%s", lw_last_error()->message);
  lw_trace_summary_t sum;
  cr_assert_eq(lw_trace_stop(&sum), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(sum.events, 0);
}

typedef struct many_job {
  lw_callable_handle_t k;
  int n;
} many_job_t;

static lw_status_t many_orch(lw_orch_t *o, void *user) {
  many_job_t *j = user;
  for (int i = 0; i < j->n; ++i) {
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->k, NULL, NULL, 0));
  }
  return LW_OK;
}

// A chip child's run lane that may use one CPU, its poster's (the worker made by a thread
// allowed that CPU only, whose processes and threads inherit it): after 64 posts in a row on
// the poster's CPU it looks at where it runs and stays, a placement instant on its own track;
// none says it moved (child/placement.h).
Test(trace_l3, a_run_lane_allowed_one_cpu_looks_at_its_placement_and_stays, .timeout = 120) {
  cpu_set_t before, one;
  cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
  int cpu = sched_getcpu();
  cr_assert_geq(cpu, 0);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
  // The knobs that turn the looks off, or leave posts to the mailbox loop: the defaults here.
  unsetenv("LW_RUN_LANE_MOVE");
  unsetenv("LW_RUN_LANE_POSTS");
  cr_assert_eq(lw_trace_start(path), LW_OK, "%s", lw_last_error()->message);
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  many_job_t j = {.k = fx_reg(&f, "noop"), .n = 300};
  LW_ASSERT_OK(lw_worker_run(f.w, many_orch, &j, NULL));
  pid_t chip0 = fx_pid(&f, 0);
  fx_destroy(&f);
  cr_assert_eq(lw_trace_stop(NULL), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(sched_setaffinity(0, sizeof(before), &before), 0);

  json_t *doc = tt_load(path);
  tt_assert_all_named(doc);
  char want[64];
  snprintf(want, sizeof(want), "cpu %d: stays on (one cpu allowed), -1/1", cpu);
  int looks = 0;
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "i") || strcmp(tt_str(ev, "cat"), "placement") != 0) continue;
    cr_assert_eq(tt_int(ev, "pid"), chip0);
    cr_assert_str_eq(tt_thread_name(doc, chip0, tt_int(ev, "tid")), "run lane");
    cr_assert_str_eq(tt_str(ev, "name"), "placement");
    cr_assert_str_eq(tt_arg_str(ev, "detail"), want);
    cr_assert_eq(tt_arg_int(ev, "chip", -1), 0);
    looks++;
  }
  cr_assert_geq(looks, 1, "no placement look in 300 posts on the poster's CPU");
  json_decref(doc);
}
