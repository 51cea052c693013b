// tests/faults/test_bench_faults.c — `lanework bench cancel` and `lanework bench crash` run to
// the end and report only what they measured: each trial's own kernel started (its start
// mark) before the cancel or the kill, an escalation killed the child after the grace, and a
// kill was followed by a task on a new child. The benchmarks check this themselves and exit 1
// otherwise; here they must exit 0 with a report that agrees.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

// Runs `lanework bench NAME --json [extra]` and returns its stdout (stderr goes to the test's,
// so ctest shows why a benchmark failed). Fails the test unless it exits 0.
static char *run_bench(const char *name, const char *extra_flag, const char *extra_value) {
  int out[2];
  cr_assert_eq(pipe(out), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    char *argv[] = {(char *)lw_test_tool_path(), (char *)"bench", (char *)name, (char *)"--json",
                    (char *)extra_flag, (char *)extra_value, NULL};
    execv(argv[0], argv);
    _exit(127);
  }
  close(out[1]);
  size_t cap = 1 << 16, len = 0;
  char *text = calloc(1, cap);
  cr_assert_not_null(text);
  for (;;) {
    ssize_t n = read(out[0], text + len, cap - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    cr_assert_lt(len, cap - 1, "bench %s wrote more than expected", name);
  }
  close(out[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "lanework bench %s failed (status 0x%x); its output:\n%s", name, status, text);
  return text;
}

// The number after "key": in the JSON line of text; fails the test when it is missing.
static double json_number(const char *text, const char *key) {
  char needle[64];
  snprintf(needle, sizeof(needle), "\"%s\":", key);
  const char *p = strstr(text, needle);
  cr_assert_not_null(p, "no %s in: %s", key, text);
  return strtod(p + strlen(needle), NULL);
}

Test(bench_faults, cancel_reports_a_cooperative_cancel_and_an_escalation_past_the_grace,
     .timeout = 120) {
  char *text = run_bench("cancel", NULL, NULL);
  cr_assert_eq(json_number(text, "runs"), 20);
  double grace_ms = json_number(text, "grace_ms");
  cr_assert_eq(grace_ms, 1000);
  // The child is killed only once the grace has passed since the cancel: an escalation that
  // took less measured something else (a cancel before the kernel started).
  cr_assert_geq(json_number(text, "escalation_ms"), grace_ms, "%s", text);
  cr_assert_gt(json_number(text, "cancel_p50_us"), 0, "%s", text);
  free(text);
}

Test(bench_faults, crash_reports_detection_and_respawn_on_a_new_child, .timeout = 120) {
  char *text = run_bench("crash", "--trials", "2");
  cr_assert_eq(json_number(text, "trials"), 2);
  double detect = json_number(text, "detect_ms"), respawn = json_number(text, "respawn_ms");
  cr_assert_gt(detect, 0, "%s", text);
  // Both are measured from the same kill, and the respawned task runs after the failure.
  cr_assert_geq(respawn, detect, "%s", text);
  free(text);
}
