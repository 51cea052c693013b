// tests/tools/test_bench_opencl.c — smoke runs of `lanework bench overlap|dispatch|cancel
// --backend opencl` with tiny iterations: each exits 0 and its last stdout line is one valid
// JSON object carrying the fields docs/benchmarks.md reports. Timings are never asserted;
// what is asserted is what the run must say whatever the machine: the backend and level, the
// counts asked for, cold builds, max_diff 0, every cancelled run CANCELLED.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

// Runs `lanework bench <args...>` (NULL-terminated) and returns its stdout; the exit status in
// *status. stderr goes to the test's, so ctest shows why a benchmark failed. lsan: the
// LSAN_OPTIONS the benchmark runs with (sanitizer builds only; ignored elsewhere).
static char *run_tool_lsan(const char *const *args, int *status, const char *lsan) {
  int out[2];
  cr_assert_eq(pipe(out), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    setenv("LSAN_OPTIONS", lsan, 1);
    char *argv[24] = {(char *)lw_test_tool_path(), (char *)"bench"};
    int n = 2;
    for (const char *const *a = args; *a && n < 23; ++a) argv[n++] = (char *)*a;
    argv[n] = NULL;
    execv(argv[0], argv);
    _exit(127);
  }
  close(out[1]);
  size_t cap = 1 << 16, len = 0;
  char *text = calloc(1, cap);
  cr_assert_not_null(text);
  for (;;) {
    ssize_t r = read(out[0], text + len, cap - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    cr_assert_lt(len, cap - 1, "the bench wrote more than expected");
  }
  close(out[0]);
  cr_assert_eq(waitpid(pid, status, 0), pid);
  return text;
}

// Sanitizer builds: PoCL and LLVM keep memory past exit after cold builds; only those leaks
// are suppressed.
#define LSAN_POCL "suppressions=" LW_POCL_LSAN_SUPP

static char *run_tool(const char *const *args, int *status) {
  return run_tool_lsan(args, status, LSAN_POCL);
}

static char *run_ok_lsan(const char *const *args, const char *lsan) {
  int status = 0;
  char *text = run_tool_lsan(args, &status, lsan);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "lanework bench %s failed (status 0x%x); its output:\n%s", args[0], status, text);
  return text;
}

static char *run_ok(const char *const *args) { return run_ok_lsan(args, LSAN_POCL); }

// A strict JSON reader that only checks the grammar (RFC 8259): true when p..end is one value.
static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
  return p;
}

static const char *json_value(const char *p);

static const char *json_string(const char *p) {
  if (*p++ != '"') return NULL;
  while (*p && *p != '"') {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      ++p;
      if (*p == 'u') {
        for (int i = 1; i <= 4; ++i) {
          if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
        }
        p += 4;
      } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
        return NULL;
      }
    }
    ++p;
  }
  return *p == '"' ? p + 1 : NULL;
}

static const char *json_number_text(const char *p) {
  if (*p == '-') ++p;
  if (*p == '0') {
    ++p;
  } else if (*p >= '1' && *p <= '9') {
    while (*p >= '0' && *p <= '9') ++p;
  } else {
    return NULL;
  }
  if (*p == '.') {
    ++p;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') ++p;
  }
  if (*p == 'e' || *p == 'E') {
    ++p;
    if (*p == '+' || *p == '-') ++p;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') ++p;
  }
  return p;
}

static const char *json_container(const char *p, char close, bool object) {
  p = skip_ws(p + 1);
  if (*p == close) return p + 1;
  for (;;) {
    if (object) {
      if (!(p = json_string(p))) return NULL;
      p = skip_ws(p);
      if (*p++ != ':') return NULL;
    }
    if (!(p = json_value(p))) return NULL;
    p = skip_ws(p);
    if (*p == close) return p + 1;
    if (*p++ != ',') return NULL;
    p = skip_ws(p);
  }
}

static const char *json_value(const char *p) {
  p = skip_ws(p);
  if (*p == '{') return json_container(p, '}', true);
  if (*p == '[') return json_container(p, ']', false);
  if (*p == '"') return json_string(p);
  if (strncmp(p, "true", 4) == 0) return p + 4;
  if (strncmp(p, "false", 5) == 0) return p + 5;
  if (strncmp(p, "null", 4) == 0) return p + 4;
  return json_number_text(p);
}

// The last non-empty line of text, checked to be one JSON object (the bench's --json contract).
static const char *json_line(char *text) {
  size_t n = strlen(text);
  while (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
  char *line = strrchr(text, '\n');
  line = line ? line + 1 : text;
  cr_assert_eq(*line, '{', "the last line is not a JSON object: %s", line);
  const char *end = json_value(line);
  cr_assert_not_null(end, "the last line is not valid JSON: %s", line);
  cr_assert_eq(*skip_ws(end), '\0', "text after the JSON object: %s", line);
  return line;
}

// The number after "key": in the JSON line; fails the test when missing or not a number.
static double json_num(const char *json, const char *key) {
  char needle[96];
  snprintf(needle, sizeof(needle), "\"%s\":", key);
  const char *p = strstr(json, needle);
  cr_assert_not_null(p, "no %s in: %s", key, json);
  p += strlen(needle);
  cr_assert_not_null(json_number_text(p), "%s is not a number in: %s", key, json);
  return strtod(p, NULL);
}

static void json_has(const char *json, const char *key_and_value) {
  cr_assert_not_null(strstr(json, key_and_value), "no %s in: %s", key_and_value, json);
}

static void check_overlap(const char *level) {
  const char *args[] = {"overlap", "--backend", "opencl", "--level", level, "--trials", "1",
                        "--stages", "4", "--repeat", "2000", "--json", NULL};
  char *text = run_ok(args);
  const char *j = json_line(text);
  json_has(j, "\"schema\":\"lanework.bench.overlap.opencl\",\"schema_version\":2");
  json_has(j, "\"bench\":\"overlap\"");
  json_has(j, "\"backend\":\"opencl\"");
  json_has(j, "\"builds\":\"cold\"");
  cr_assert_eq(json_num(j, "level"), atoi(level));
  cr_assert_eq(json_num(j, "trials"), 1);
  cr_assert_eq(json_num(j, "c2_stages"), 4);
  cr_assert_eq(json_num(j, "repeat_count"), 2000);
  cr_assert_eq(json_num(j, "pocl_kernel_cache"), 0);
  cr_assert_eq(json_num(j, "max_diff"), 0.0, "%s", j);
  static const char *const keys[] = {
      "run_c1_us", "register_c2_us", "register_c2_us_min", "register_c2_us_max", "run_c2_us",
      "serial_median_us", "overlap_median_us", "speedup", "hidden_fraction",
      "hidden_fraction_min", "hidden_fraction_max", "register_phase_serial_median_us",
      "register_phase_overlap_median_us", "hidden_fraction_register_phase",
      "hidden_fraction_register_phase_min", "hidden_fraction_register_phase_max",
      "overlap_c1_done_us", "overlap_register_done_us",
      "max_rel_err", "chip_open_ms", "overlap_by_events", "overlap_by_events_min",
      "overlap_by_events_max", "run_stretch", "run_stretch_min", "run_stretch_max",
      "hidden_by_events", "hidden_by_events_min", "hidden_by_events_max"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); ++i) (void)json_num(j, keys[i]);
  json_has(j, "\"rows\":[{\"delay_ms\":0,");
  free(text);
}

Test(bench_opencl, overlap_at_level_2_prints_its_table_as_json_with_max_diff_0, .timeout = 300) {
  check_overlap("2");
}

Test(bench_opencl, overlap_at_level_3_prints_its_table_as_json_with_max_diff_0, .timeout = 300) {
  check_overlap("3");
}

Test(bench_opencl, dispatch_prints_the_floor_l2_l3_l3_sim_and_their_ratios_as_json,
     .timeout = 300) {
  const char *args[] = {"dispatch", "--backend", "opencl", "--iters", "20", "--json", NULL};
  // In sanitizer builds LeakSanitizer's own tracer crashes at the exit of this process (three
  // OpenCL contexts and two workers' threads; "LeakSanitizer has encountered a fatal error"),
  // so leak checking is off here; AddressSanitizer's other checks stay on.
  char *text = run_ok_lsan(args, LSAN_POCL ":detect_leaks=0");
  const char *j = json_line(text);
  json_has(j, "\"schema\":\"lanework.bench.dispatch.opencl\",\"schema_version\":2");
  json_has(j, "\"bench\":\"dispatch\"");
  json_has(j, "\"backend\":\"opencl\"");
  cr_assert_eq(json_num(j, "iters"), 20);
  cr_assert_eq(json_num(j, "rounds"), 10);
  static const char *const keys[] = {
      "floor_p50_us", "floor_p99_us", "l2_empty_run_p50_us", "l2_empty_run_p99_us",
      "l3_empty_run_p50_us", "l3_empty_run_p99_us", "l3_sim_empty_run_p50_us",
      "l3_sim_empty_run_p99_us", "l2_over_floor", "l2_over_floor_round_min",
      "l2_over_floor_round_max", "l3_minus_l3_sim_us", "l3_minus_l3_sim_over_floor",
      "l3_minus_l3_sim_over_floor_round_min", "l3_minus_l3_sim_over_floor_round_max",
      "l3_target_us"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); ++i) (void)json_num(j, keys[i]);
  cr_assert(strstr(j, "\"l2_target_holds\":true") || strstr(j, "\"l2_target_holds\":false"),
            "%s", j);
  cr_assert(strstr(j, "\"l3_target_holds\":true") || strstr(j, "\"l3_target_holds\":false"),
            "%s", j);
  free(text);
}

static void check_cancel(const char *level) {
  const char *args[] = {"cancel", "--backend", "opencl", "--level", level, "--trials", "3",
                        "--json", NULL};
  char *text = run_ok(args);
  const char *j = json_line(text);
  json_has(j, "\"schema\":\"lanework.bench.cancel.opencl\",\"schema_version\":2");
  json_has(j, "\"bench\":\"cancel\"");
  json_has(j, "\"backend\":\"opencl\"");
  json_has(j, "\"status\":\"CANCELLED\"");
  cr_assert_eq(json_num(j, "level"), atoi(level));
  cr_assert_eq(json_num(j, "runs"), 3);
  double lo = json_num(j, "cancel_min_us"), p50 = json_num(j, "cancel_p50_us");
  double p99 = json_num(j, "cancel_p99_us"), hi = json_num(j, "cancel_max_us");
  // Order statistics of the same samples, whatever their values.
  cr_assert(lo <= p50 && p50 <= p99 && p99 <= hi, "%s", j);
  // The kernel was calibrated on this device, and each trial checked that it stopped it.
  cr_assert_gt(json_num(j, "steps"), 0);
  cr_assert_gt(json_num(j, "uncancelled_run_us"), 0);
  if (atoi(level) == 3) {
    // hang.cl ignores the cancel: its child is killed after the grace.
    cr_assert_geq(json_num(j, "escalation_ms"), json_num(j, "grace_ms"), "%s", j);
  } else {
    json_has(j, "\"escalation_ms\":null");
  }
  free(text);
}

Test(bench_opencl, cancel_at_level_2_reports_cancelled_runs_as_json, .timeout = 300) {
  check_cancel("2");
}

Test(bench_opencl, cancel_at_level_3_reports_cancelled_runs_as_json, .timeout = 300) {
  check_cancel("3");
}

Test(bench_opencl, a_bench_without_an_opencl_variant_refuses_the_backend, .timeout = 60) {
  const char *args[] = {"wait", "--backend", "opencl", "--json", NULL};
  int status = 0;
  char *text = run_tool(args, &status);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status 0x%x", status);
  cr_assert_eq(text[0], '\0', "wrote to stdout: %s", text);
  free(text);
}

Test(bench_opencl, an_unknown_backend_is_refused, .timeout = 60) {
  const char *args[] = {"overlap", "--backend", "hip", NULL};
  int status = 0;
  char *text = run_tool(args, &status);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status 0x%x", status);
  free(text);
}
