// tests/faults/test_teardown.c — what lw_worker_destroy leaves behind: nothing. Processes a
// kernel forked (its own children, and daemons that double-forked away) die with the worker,
// also after the chip child that forked them died; destroy of a hung kernel follows the
// configured grace; a fork server that is gone is named in full in the errors it causes.
#include <time.h>

#include "fault_util.h"

static fx_t f;

typedef struct sleeper {
  pid_t pid;
  long long start_time;
} sleeper_t;

// Runs fork_sleeper on chip 0 and returns the process it forked, checked to be running.
static sleeper_t fork_a_sleeper(lw_callable_handle_t k, uint64_t mode) {
  _Atomic int32_t *out = lw_worker_alloc(f.w, sizeof(int32_t));
  cr_assert_not_null(out);
  atomic_store(out, 0);
  fork_job_t j = {k, out, mode};
  LW_ASSERT_OK(lw_worker_run(f.w, fork_orch, &j, NULL));
  sleeper_t s = {atomic_load(out), -1};
  cr_assert_gt(s.pid, 0, "the kernel reported no pid");
  s.start_time = fx_proc_start_time(s.pid);
  cr_assert_geq(s.start_time, 0, "the kernel's process %d is not running", (int)s.pid);
  lw_worker_free(f.w, (void *)out);
  return s;
}

static void expect_gone(sleeper_t s, const char *what) {
  // Generous: the fork server kills and reaps it before destroy returns, so this normally
  // succeeds on the first look; the bound only keeps a regression from hanging the test.
  bool gone = fx_wait_process_gone(s.pid, s.start_time, 10000);
  // A survivor holds the test runner's pipes open: end it (it is still the same process: the
  // start time matched a moment ago) before failing.
  if (!gone && fx_proc_start_time(s.pid) == s.start_time) kill(s.pid, SIGKILL);
  cr_expect(gone, "%s (pid %d) outlived lw_worker_destroy", what, (int)s.pid);
}

Test(teardown, destroy_kills_the_processes_a_kernel_forked, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t k = fx_reg(&f, "fork_sleeper");
  sleeper_t child = fork_a_sleeper(k, 0);
  sleeper_t daemon = fork_a_sleeper(k, 1);
  fx_destroy(&f);
  expect_gone(child, "the kernel's child");
  expect_gone(daemon, "the kernel's double-forked daemon");
}

Test(teardown, destroy_kills_what_a_dead_chips_kernel_forked, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t k = fx_reg(&f, "fork_sleeper");
  sleeper_t child = fork_a_sleeper(k, 0);
  // The chip child dies: its sleeper is orphaned while the worker lives on.
  cr_assert_eq(kill(fx_pid(&f, 0), SIGKILL), 0);
  fx_wait_respawned(&f, 0, 1);
  sleeper_t second = fork_a_sleeper(k, 0);  // the new chip works
  fx_destroy(&f);
  expect_gone(child, "the dead chip's kernel's child");
  expect_gone(second, "the respawned chip's kernel's child");
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

Test(teardown, destroy_of_a_hung_kernel_finishes_its_run_cancelled, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.cancel_grace_ns = 300ll * 1000 * 1000;
  fx_create(&f, &cfg);
  lw_callable_handle_t hang = fx_reg(&f, "hang");
  job_t j = {hang, NULL, JOB_NONE, 0, 0, 0, 1};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  while (atomic_load(&f.w->eps[0].mb->task[0].started_ns) == 0) lw_test_sleep_us(200);
  double t0 = now_ms();
  fx_destroy(&f);
  double ms = now_ms() - t0;
  cr_assert(lw_handle_done(run));
  cr_assert_eq(lw_handle_status(run), LW_CANCELLED, "got %s: %s",
               lw_status_name(lw_handle_status(run)), lw_handle_error(run)->message);
  ASSERT_MSG_HAS(lw_handle_error(run)->message, "ignored cancellation for 300 ms");
  cr_log_info("destroy with a hung kernel and a 300 ms grace took %.0f ms", ms);
  fprintf(stderr, "teardown: destroy with a hung kernel, 300 ms grace: %.0f ms\n", ms);
  lw_handle_release(run);
}

Test(teardown, destroy_lets_a_hung_kernel_run_out_its_whole_grace, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  // Longer than destroy's old fixed waits (2 s + 2 s): destroy must not kill the child before
  // the grace the program configured has passed; the scheduler's escalation does, and says so.
  cfg.cancel_grace_ns = 5000ll * 1000 * 1000;
  fx_create(&f, &cfg);
  lw_callable_handle_t hang = fx_reg(&f, "hang");
  job_t j = {hang, NULL, JOB_NONE, 0, 0, 0, 1};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  while (atomic_load(&f.w->eps[0].mb->task[0].started_ns) == 0) lw_test_sleep_us(200);
  fx_destroy(&f);
  cr_assert(lw_handle_done(run));
  cr_assert_eq(lw_handle_status(run), LW_CANCELLED, "got %s: %s",
               lw_status_name(lw_handle_status(run)), lw_handle_error(run)->message);
  ASSERT_MSG_HAS(lw_handle_error(run)->message, "ignored cancellation for 5000 ms");
  lw_handle_release(run);
}

Test(teardown, a_dead_fork_server_is_named_in_full_in_the_chips_error, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  cr_assert_eq(kill(lw__forkserver_pid(f.w->fs), SIGKILL), 0);
  // The chip child follows the server (PR_SET_PDEATHSIG); its respawn finds no server.
  while (fx_state(&f, 0) != LW_EP_DEAD) lw_test_sleep_us(500);
  job_t j = {vadd, s, JOB_VADD, 0, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(rep.error.message, "respawn failed");
  // The server is not this process's child (docs/processes.md): its socket tells, not a status.
  ASSERT_MSG_HAS(rep.error.message, "is gone (its socket closed)");
  fx_destroy(&f);
}
