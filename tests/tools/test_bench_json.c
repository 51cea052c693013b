// tests/tools/test_bench_json.c — every `lanework bench <name> --json` of the sim backend, with
// the smallest counts, ends its stdout with one line that jansson reads as one JSON object
// carrying its schema name and version and the keys docs/benchmarks.md reports, each a number
// (or the boolean or string it is). Values are never asserted beyond what the run must say
// whatever the machine: the counts asked for, how figures relate (a median of the runs it
// lists), that work which ran took CPU time. A bench whose stdout cannot be written fails and names the write error.
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"


// Runs `lanework bench <args...>` (NULL-terminated) with stdout on out_fd (a temporary file,
// or /dev/full) and returns its exit status; its stderr in *err_text. Files rather than pipes,
// so the test never waits on a bench blocked on a full pipe.
static int run_bench_to(const char *const *args, int out_fd, char **err_text) {
  FILE *err = tmpfile();
  cr_assert_not_null(err);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(fileno(err), 2);
    char *argv[24] = {(char *)lw_test_tool_path(), (char *)"bench"};
    int n = 2;
    for (const char *const *a = args; *a && n < 23; ++a) argv[n++] = (char *)*a;
    argv[n] = NULL;
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  *err_text = lw_test_read_all(err);
  fclose(err);
  return status;
}

// Runs the bench, expects exit 0, and returns its stdout's last line parsed by jansson as one
// object (the --json contract: the last stdout line is the JSON).
static json_t *run_json(const char *const *args) {
  FILE *out = tmpfile();
  cr_assert_not_null(out);
  char *err_text = NULL;
  int status = run_bench_to(args, fileno(out), &err_text);
  char *text = lw_test_read_all(out);
  fclose(out);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "lanework bench %s failed (status 0x%x); stdout:\n%s\nstderr:\n%s", args[0], status,
            text, err_text);
  size_t len = strlen(text);
  cr_assert_gt(len, 0);
  cr_assert_eq(text[len - 1], '\n', "the JSON line is not ended: %s", text);
  text[len - 1] = '\0';
  char *line = strrchr(text, '\n');
  line = line ? line + 1 : text;
  json_error_t e;
  json_t *v = json_loads(line, JSON_REJECT_DUPLICATES, &e);
  cr_assert_not_null(v, "jansson: %s at column %d of: %s", e.text, e.column, line);
  cr_assert(json_is_object(v), "not an object: %s", line);
  free(text);
  free(err_text);
  return v;
}

// Each key of keys (NULL-terminated) is in obj and is a number.
static void expect_numbers(const json_t *obj, const char *const *keys) {
  for (const char *const *k = keys; *k; ++k) {
    json_t *x = json_object_get(obj, *k);
    cr_assert_not_null(x, "no key %s", *k);
    cr_assert(json_is_number(x), "%s is not a number (json type %d)", *k, (int)json_typeof(x));
  }
}

static void expect_string(const json_t *obj, const char *key, const char *value) {
  const char *got = json_string_value(json_object_get(obj, key));
  cr_assert_not_null(got, "no string %s", key);
  cr_assert_str_eq(got, value, "%s", key);
}

static json_int_t integer(const json_t *obj, const char *key) {
  json_t *x = json_object_get(obj, key);
  cr_assert(json_is_integer(x), "%s is not an integer", key);
  return json_integer_value(x);
}

// The keys every bench's JSON starts with: its schema name, schema_version 2, its name.
static void expect_bench(const json_t *obj, const char *name) {
  char schema[64];
  snprintf(schema, sizeof(schema), "lanework.bench.%s", name);
  expect_string(obj, "schema", schema);
  cr_assert_eq(integer(obj, "schema_version"), 2);
  expect_string(obj, "bench", name);
}

static double number(const json_t *obj, const char *key) {
  json_t *x = json_object_get(obj, key);
  cr_assert(json_is_number(x), "%s is not a number", key);
  return json_number_value(x);
}

// key, key_min and key_max are numbers, min <= key <= max, all within [lo, hi].
static void expect_spread(const json_t *obj, const char *key, double lo, double hi) {
  char k[96];
  double m = number(obj, key);
  snprintf(k, sizeof(k), "%s_min", key);
  double a = number(obj, k);
  snprintf(k, sizeof(k), "%s_max", key);
  double b = number(obj, k);
  cr_assert(lo <= a && a <= m && m <= b && b <= hi, "%s: %g <= %g <= %g not within [%g, %g]",
            key, a, m, b, lo, hi);
}

// The overlap figures every row has, and what they must satisfy whatever the machine: the
// proofs from events are fractions, the stretch a ratio of two spans, holds their verdict.
static void expect_overlap_row(const json_t *row, int trials) {
  static const char *const keys[] = {"delay_ms", "serial_median_us", "overlap_median_us",
                                     "speedup", "hidden_fraction",
                                     "hidden_fraction_register_phase", NULL};
  expect_numbers(row, keys);
  expect_spread(row, "overlap_by_events", 0.0, 1.0);
  expect_spread(row, "hidden_by_events", 0.0, 1.0);
  expect_spread(row, "run_stretch", 0.0, 1e9);
  cr_assert(number(row, "hidden_by_events") <= number(row, "overlap_by_events") + 1e-9,
            "hidden_by_events above overlap_by_events");
  cr_assert_eq(json_is_true(json_object_get(row, "overlap_holds")),
               number(row, "hidden_by_events") >= 0.95, "overlap_holds is not its rule");
  cr_assert_eq(integer(row, "trials_proved"), trials, "a trial's events lack a span");
  cr_assert(json_is_integer(json_object_get(row, "trials_stalled")), "trials_stalled");
}

static json_t *run_overlap(const char *level, const char *control) {
  const char *args[] = {"overlap", "--level", level, "--trials", "1", "--repeat", "100",
                        "--delay-ms", "0,1", "--json", control, NULL};
  json_t *v = run_json(args);
  expect_bench(v, "overlap");
  expect_string(v, "backend", "sim");
  expect_string(v, "lanework_version", lw_version());
  cr_assert_eq(integer(v, "level"), atoi(level));
  cr_assert_eq(integer(v, "trials"), 1);
  cr_assert_eq(integer(v, "repeat_count"), 100);
  cr_assert_eq(integer(v, "delay_ms"), 0);
  cr_assert(json_is_boolean(json_object_get(v, "pinned")));
  static const char *const keys[] = {
      "run_c1_us", "register_c2_us", "run_c2_us", "serial_median_us", "overlap_median_us",
      "speedup", "hidden_fraction", "max_diff", "register_phase_serial_median_us",
      "register_phase_overlap_median_us", "overlap_c1_done_us", "overlap_register_done_us",
      NULL};
  expect_numbers(v, keys);
  expect_overlap_row(v, 1);
  cr_assert(json_number_value(json_object_get(v, "max_diff")) == 0.0);
  json_t *rows = json_object_get(v, "rows");
  cr_assert(json_is_array(rows));
  cr_assert_eq(json_array_size(rows), 2, "one row per delay");
  for (size_t i = 0; i < 2; ++i) expect_overlap_row(json_array_get(rows, i), 1);
  cr_assert_eq(integer(json_array_get(rows, 1), "delay_ms"), 1);
  cr_assert_eq(json_is_true(json_object_get(v, "serial_control")),
               control && strcmp(control, "--serial") == 0);
  cr_assert_eq(json_is_true(json_object_get(v, "stall_control")),
               control && strcmp(control, "--stall-control") == 0);
  return v;
}

static void check_overlap(const char *level) { json_decref(run_overlap(level, NULL)); }

// --serial registers C2 only once C1's run finished: no register span can lie inside a run
// span, so containment and the hidden share it bounds are 0 by the order of events alone.
static void check_serial_control(const char *level) {
  json_t *v = run_overlap(level, "--serial");
  json_t *rows = json_object_get(v, "rows");
  for (size_t i = 0; i < 2; ++i) {
    json_t *row = json_array_get(rows, i);
    cr_assert(number(row, "overlap_by_events_max") == 0.0, "a serial register inside a run");
    cr_assert(number(row, "hidden_by_events_max") == 0.0, "a serial register hidden");
    cr_assert(json_is_false(json_object_get(row, "overlap_holds")));
  }
  json_decref(v);
}

Test(bench_json, overlap_serial_control_at_level_2_reads_zero_from_events, .timeout = 120) {
  check_serial_control("2");
}

Test(bench_json, overlap_serial_control_at_level_3_reads_zero_from_events, .timeout = 120) {
  check_serial_control("3");
}

// --stall-control runs with the sim device lock on (the bench re-executes itself with
// LW_SIM_DEVICE_LOCK=1 and says so). C1 is calibrated here (twice the register, at least
// 25 ms), so a register starts while it runs; the bench exits 1 unless the lock held a run in
// at least one of the row's three trials, and the JSON says in how many. Its figures are
// timings, checked only for their form.
Test(bench_json, overlap_stall_control_holds_a_run_and_says_so, .timeout = 120) {
  const char *args[] = {"overlap", "--level", "3", "--trials", "3", "--delay-ms", "0",
                        "--stall-control", "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "overlap");
  cr_assert(json_is_true(json_object_get(v, "stall_control")));
  expect_overlap_row(v, 3);
  json_int_t stalled = integer(v, "trials_stalled");
  cr_assert(stalled >= 1 && stalled <= 3, "trials_stalled %lld", (long long)stalled);
  json_decref(v);
}

Test(bench_json, a_device_lock_in_the_environment_without_stall_control_is_refused,
     .timeout = 60) {
  setenv("LW_SIM_DEVICE_LOCK", "1", 1);
  const char *args[] = {"overlap", "--trials", "1", NULL};
  FILE *out = tmpfile();
  cr_assert_not_null(out);
  char *err_text = NULL;
  int status = run_bench_to(args, fileno(out), &err_text);
  unsetenv("LW_SIM_DEVICE_LOCK");
  fclose(out);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status 0x%x: %s", status, err_text);
  cr_assert_not_null(strstr(err_text, "LW_SIM_DEVICE_LOCK=1 is set"), "%s", err_text);
  free(err_text);
}

Test(bench_json, overlap_at_level_2_prints_one_json_object_with_its_rows, .timeout = 120) {
  check_overlap("2");
}

Test(bench_json, overlap_at_level_3_prints_one_json_object_with_its_rows, .timeout = 120) {
  check_overlap("3");
}

Test(bench_json, dispatch_prints_one_json_object_with_every_documented_key, .timeout = 120) {
  const char *args[] = {"dispatch", "--iters", "10", "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "dispatch");
  cr_assert_eq(integer(v, "iters"), 10);
  static const char *const keys[] = {
      "l2_empty_run_p50_us", "l2_empty_run_p99_us", "l3_empty_run_p50_us",
      "l3_empty_run_p99_us", "l3_per_task_us", "l3_chain_per_task_us",
      "l3_raw_only_per_task_us", "shm_spin_rtt_us", "futex_rtt_us", NULL};
  expect_numbers(v, keys);
  // Where the DAG's time went: null only where the kernel keeps no per-thread schedstat.
  json_t *where = json_object_get(v, "l3_per_task_where");
  cr_assert_not_null(where, "no l3_per_task_where");
  if (json_is_null(where)) {
    cr_assert_neq(access("/proc/thread-self/schedstat", R_OK), 0,
                  "l3_per_task_where is null though this kernel has schedstat");
  } else {
    static const char *const mean[] = {"mean_us", NULL};
    expect_numbers(where, mean);
    // runs_us: the nine runs whose median is l3_per_task_us and whose mean is mean_us (each
    // printed to 3 decimals; rounding keeps the order).
    json_t *runs = json_object_get(where, "runs_us");
    cr_assert(json_is_array(runs) && json_array_size(runs) == 9, "runs_us: nine runs");
    double sorted[9];
    for (size_t i = 0; i < 9; ++i) {
      json_t *x = json_array_get(runs, i);
      cr_assert(json_is_number(x), "runs_us[%zu] is not a number", i);
      sorted[i] = json_number_value(x);
      for (size_t k = i; k > 0 && sorted[k - 1] > sorted[k]; --k) {
        double t = sorted[k];
        sorted[k] = sorted[k - 1];
        sorted[k - 1] = t;
      }
    }
    double median = json_number_value(json_object_get(v, "l3_per_task_us"));
    cr_assert(sorted[4] == median, "l3_per_task_us %f is not the median of runs_us (%f)", median,
              sorted[4]);
    double mean_us = json_number_value(json_object_get(where, "mean_us"));
    cr_assert(sorted[0] <= mean_us && mean_us <= sorted[8], "mean_us %f outside runs_us [%f, %f]",
              mean_us, sorted[0], sorted[8]);
    static const char *const roles[] = {"caller", "scheduler", "run_lane", "mailbox_loop",
                                        "other", NULL};
    static const char *const times[] = {"cpu_us", "wait_us", "sleeps_per_1000_tasks", NULL};
    for (const char *const *r = roles; *r; ++r) {
      json_t *role = json_object_get(where, *r);
      cr_assert(json_is_object(role), "l3_per_task_where.%s is not an object", *r);
      expect_numbers(role, times);
    }
    // The caller submitted the tasks and the chip's run lane ran them: both spent time on a
    // CPU whatever the machine.
    cr_assert_gt(json_number_value(json_object_get(json_object_get(where, "caller"), "cpu_us")),
                 0, "caller cpu_us");
    cr_assert_gt(
        json_number_value(json_object_get(json_object_get(where, "run_lane"), "cpu_us")), 0,
        "run_lane cpu_us");
  }
  // Without --load: "load" is 0 and there is no "loaded" object.
  cr_assert_eq(integer(v, "load"), 0, "load");
  cr_assert_null(json_object_get(v, "loaded"), "a \"loaded\" object without --load");
  json_decref(v);
}

Test(bench_json, wait_prints_one_json_object_with_every_documented_key, .timeout = 120) {
  const char *args[] = {"wait", "--iters", "100", "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "wait");
  static const char *const keys[] = {"iters", "done_ns", "wait_finished_ns", "wait_done_ns",
                                     NULL};
  expect_numbers(v, keys);
  json_decref(v);
}

Test(bench_json, idle_prints_one_json_object_with_every_documented_key, .timeout = 120) {
  const char *args[] = {"idle", "--seconds", "1", "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "idle");
  cr_assert_eq(integer(v, "seconds"), 1);
  static const char *const keys[] = {"idle_cpu_percent", NULL};
  expect_numbers(v, keys);
  json_decref(v);
}

// At L3 (the default) with escalation; at L2 without (there is no child to kill: null).
static void check_cancel(const char *level) {
  const char *args[] = {"cancel", "--trials", "2", "--level", level, "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "cancel");
  cr_assert_eq(integer(v, "level"), atoi(level));
  cr_assert_eq(integer(v, "runs"), 2);
  expect_string(v, "status", "CANCELLED");
  static const char *const keys[] = {"cancel_p50_us",
                                     "cancel_p99_us",
                                     "cancel_min_us",
                                     "cancel_max_us",
                                     "cancel_to_end_p50_us",
                                     "cancel_after_end_p50_us",
                                     "grace_ms",
                                     "poll_us",
                                     NULL};
  expect_numbers(v, keys);
  cr_assert(number(v, "cancel_min_us") <= number(v, "cancel_p50_us") &&
            number(v, "cancel_p50_us") <= number(v, "cancel_max_us"));
  if (atoi(level) == 3) {
    // The split's point is the completion the parent took: after the cancel (the kernel was
    // running then) and before the waiter returned. (At L2 it is an estimate from the run's
    // times, which may fall a little before the cancel when the kernel stops at once.)
    cr_assert_geq(number(v, "cancel_to_end_p50_us"), 0);
    cr_assert_geq(number(v, "cancel_after_end_p50_us"), 0);
  }
  json_t *esc = json_object_get(v, "escalation_ms"),
         *back = json_object_get(v, "escalation_back_ms");
  if (atoi(level) == 3) {
    // Each escalation waits out the grace before the child is killed; the chip runs again on
    // its new child after the run ended.
    cr_assert(json_is_number(esc) && json_number_value(esc) >= number(v, "grace_ms"),
              "escalation_ms");
    cr_assert(json_is_number(back) && json_number_value(back) >= json_number_value(esc),
              "escalation_back_ms");
  } else {
    cr_assert(json_is_null(esc), "an escalation at L2");
    cr_assert(json_is_null(back), "a chip back after an escalation at L2");
  }
  json_decref(v);
}

Test(bench_json, cancel_prints_one_json_object_with_every_documented_key, .timeout = 120) {
  check_cancel("3");
}

Test(bench_json, cancel_at_level_2_prints_its_figures_without_escalation, .timeout = 120) {
  check_cancel("2");
}

Test(bench_json, crash_prints_one_json_object_with_every_documented_key, .timeout = 120) {
  const char *args[] = {"crash", "--trials", "1", "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "crash");
  cr_assert_eq(integer(v, "trials"), 1);
  static const char *const keys[] = {"detect_ms", "respawn_ms", NULL};
  expect_numbers(v, keys);
  json_decref(v);
}

Test(bench_json, trace_prints_one_json_object_with_every_documented_key, .timeout = 120) {
  const char *args[] = {"trace", "--trials", "1", "--iters", "10", "--json", NULL};
  json_t *v = run_json(args);
  expect_bench(v, "trace");
  cr_assert_eq(integer(v, "rounds"), 1);
  cr_assert_eq(integer(v, "iters"), 10);
  static const char *const keys[] = {"event_ns_p50", "event_ns_p90", "event_off_ns_p50",
                                     "l3_per_task_us_off", "l3_per_task_us_on",
                                     "l3_empty_run_p50_us_off", "l3_empty_run_p50_us_on",
                                     "events", "dropped_events", NULL};
  expect_numbers(v, keys);
  json_decref(v);
}

// One worker size and both: a row per shape and chip count asked for, each with its figures,
// efficiency within (0, 1.5], and tasks per chip (one entry per chip) that add up to its tasks.
static void expect_parallel(const char *chips, const int *want_chips, int n_chips) {
  const char *args[] = {"parallel", "--runs", "2", "--task-us", "500", "--json", NULL, NULL,
                        NULL};
  if (chips) {
    args[6] = "--chips";
    args[7] = chips;
  }
  json_t *v = run_json(args);
  expect_bench(v, "parallel");
  expect_string(v, "backend", "sim");
  cr_assert_eq(integer(v, "task_us"), 500);
  cr_assert_eq(integer(v, "runs"), 2);
  static const char *const shapes[] = {"independent", "layered", "fan-out", "chain"};
  json_t *rows = json_object_get(v, "rows");
  cr_assert(json_is_array(rows), "no rows");
  cr_assert_eq(json_array_size(rows), (size_t)(4 * n_chips));
  for (size_t i = 0; i < json_array_size(rows); ++i) {
    json_t *row = json_array_get(rows, i);
    expect_string(row, "shape", shapes[i % 4]);
    cr_assert_eq(integer(row, "chips"), want_chips[i / 4], "row %zu", i);
    static const char *const keys[] = {"tasks", "critical_path", "ideal_us", NULL};
    expect_numbers(row, keys);
    json_int_t tasks = integer(row, "tasks");
    json_int_t path = integer(row, "critical_path");
    cr_assert(path >= 1 && path <= tasks, "critical_path %lld of %lld tasks", (long long)path,
              (long long)tasks);
    json_int_t per = (tasks + want_chips[i / 4] - 1) / want_chips[i / 4];
    cr_assert_eq(number(row, "ideal_us"), (double)(path > per ? path : per) * 500.0, "ideal_us");
    expect_spread(row, "wall_us", 1.0, 1e9);
    expect_spread(row, "efficiency", 1e-9, 1.5);
    json_t *walls = json_object_get(row, "runs_wall_us");
    cr_assert(json_is_array(walls) && json_array_size(walls) == 2, "runs_wall_us");
    json_t *per_chip = json_object_get(row, "tasks_per_chip");
    cr_assert(json_is_array(per_chip), "tasks_per_chip");
    cr_assert_eq(json_array_size(per_chip), (size_t)want_chips[i / 4]);
    json_int_t sum = 0;
    for (size_t c = 0; c < json_array_size(per_chip); ++c) {
      json_t *x = json_array_get(per_chip, c);
      cr_assert(json_is_integer(x) && json_integer_value(x) >= 0, "tasks_per_chip[%zu]", c);
      sum += json_integer_value(x);
    }
    cr_assert_eq(sum, tasks, "row %zu: tasks per chip add up to %lld of %lld", i,
                 (long long)sum, (long long)tasks);
  }
  json_decref(v);
}

Test(bench_json, parallel_prints_a_row_per_shape_at_2_and_4_chips_with_every_task_placed,
     .timeout = 120) {
  static const int chips[] = {2, 4};
  expect_parallel(NULL, chips, 2);
}

Test(bench_json, parallel_with_chips_3_prints_rows_for_3_chips_only, .timeout = 120) {
  static const int chips[] = {3};
  expect_parallel("3", chips, 1);
}

Test(bench_json, a_bench_whose_stdout_cannot_be_written_fails_and_says_why, .timeout = 120) {
  int full = open("/dev/full", O_WRONLY);
  cr_assert_geq(full, 0, "/dev/full: %s", strerror(errno));
  const char *args[] = {"wait", "--iters", "100", "--json", NULL};
  char *err_text = NULL;
  int status = run_bench_to(args, full, &err_text);
  close(full);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status 0x%x; stderr: %s", status,
            err_text);
  cr_assert_not_null(strstr(err_text, "lanework bench wait: --json: json: write failed"), "%s",
                     err_text);
  free(err_text);
}
