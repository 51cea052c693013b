// tests/parent/test_orch_exceptions.c — a C++ exception thrown out of an orch function
// (docs/api.md, "Exceptions and longjmp"): the run fails FAILED_PRECONDITION naming the
// exception, what it submitted ends once, and the worker runs again, whether the function ran
// inline (lw_worker_run) or on the orchestrator thread (lw_worker_run_async). The throwing
// program is C++ (orch_exceptions_probe.cpp); each test runs one of its scenarios and fails if
// it reports a failed check, dies (std::terminate) or hangs (killed after a deadline far above
// its few milliseconds of work). (A longjmp: test_orch_longjmp.c.)
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#define PROBE_DEADLINE_S 90

// Runs the probe's scenario; its stderr goes to out. Returns its wait status, or -1 when it
// was still running at the deadline (then killed).
static int run_probe(const char *scenario, char *out, size_t bytes) {
  int p[2];
  cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (dup2(p[1], 2) < 0) _exit(126);
    execl(LW_EXC_PROBE_PATH, LW_EXC_PROBE_PATH, scenario, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  int ws = 0;
  pid_t got = 0;
  for (int i = 0; i < PROBE_DEADLINE_S * 100 && got == 0; ++i) {
    got = waitpid(pid, &ws, WNOHANG);
    if (got < 0 && errno == EINTR) got = 0;
    if (got == 0) lw_test_sleep_us(10000);
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    ws = -1;
  }
  ssize_t n = read(p[0], out, bytes - 1);
  out[n > 0 ? n : 0] = '\0';
  close(p[0]);
  return ws;
}

static void expect_probe_passes(const char *scenario) {
  char out[8192];
  int ws = run_probe(scenario, out, sizeof(out));
  cr_assert_neq(ws, -1, "%s: still running after %d s (a hang), killed; it said:\n%s", scenario,
                PROBE_DEADLINE_S, out);
  cr_assert(!WIFSIGNALED(ws), "%s: killed by signal %d (std::terminate?); it said:\n%s", scenario,
            WTERMSIG(ws), out);
  cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%s: exit status %d:\n%s", scenario,
            WEXITSTATUS(ws), out);
}

Test(orch_exceptions, a_throw_from_an_inline_orch_function_fails_its_run_and_the_worker_runs_on,
     .timeout = 120) {
  expect_probe_passes("sync");
}

Test(orch_exceptions, a_throw_on_the_orchestrator_thread_fails_its_run_and_the_worker_runs_on,
     .timeout = 120) {
  expect_probe_passes("async");
}

Test(orch_exceptions, a_task_in_flight_when_its_orch_function_throws_is_cancelled_once,
     .timeout = 120) {
  expect_probe_passes("in_flight");
}

Test(orch_exceptions, a_thrown_int_is_caught_and_named_like_any_exception, .timeout = 120) {
  expect_probe_passes("not_std");
}
