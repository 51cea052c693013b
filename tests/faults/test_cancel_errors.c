// tests/faults/test_cancel_errors.c — cancellation across processes (cooperative, queued,
// escalation), deadlines, async errors (first error wins, poisoning, the next run is clean),
// withdrawing a queued register, parent death, bad input at L3.
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "fault_util.h"

static fx_t f;

Test(cancel, cancel_of_a_running_kernel_stops_it_cooperatively, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  // A long grace: the child must survive because the kernel cooperates, not because it was
  // scheduled in time on a busy machine.
  cfg.cancel_grace_ns = 30ll * 1000 * 1000 * 1000;
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  shared_t *s = fx_shared(&f);
  _Atomic uint32_t submitted = 0;
  job_t j = {gate, s, JOB_GATE, 0, 0, 0, 3, &submitted};  // one running, two queued behind it
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  // The first kernel can start before the orch function has submitted the other two.
  lw_test_wait_nonzero(&submitted);
  lw_test_wait_nonzero(&s->entered);
  pid_t pid = fx_pid(&f, 0);
  LW_ASSERT_OK(lw_handle_cancel(run));
  // Harmless: OK while the run is still finishing, NOT_FOUND once it finished (the first
  // cancel may have ended it already: the gate stops at once, the queued two are withdrawn).
  lw_status_t again = lw_handle_cancel(run);
  cr_assert(again == LW_OK || again == LW_NOT_FOUND, "second cancel: %s",
            lw_status_name(again));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.n_tasks, 3);
  cr_assert_eq(rep.n_completed, 0);
  cr_assert_eq(fx_pid(&f, 0), pid, "a cooperative kernel must not cost its child");
  cr_assert_eq(lw_handle_cancel(run), LW_NOT_FOUND);
  // The worker is fine: the same callable runs to completion.
  atomic_store(&s->gate, 1);
  j.n = 1;
  j.submitted = NULL;
  LW_ASSERT_OK(lw_worker_run(f.w, job_orch, &j, NULL));
  lw_handle_release(run);
  fx_destroy(&f);
}

// A worker whose cancel grace is grace_ms runs hang and cancels it once it started: the run ends
// CANCELLED naming the kernel that ignored its cancel, no sooner than the grace after the cancel,
// with one escalation, and the chip comes back (a vector_add runs on its new child).
static void expect_escalation_after(int64_t grace_ms) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.cancel_grace_ns = grace_ms * 1000000;
  fx_create(&f, &cfg);
  lw_callable_handle_t hang = fx_reg(&f, "hang");
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  job_t j = {hang, s, JOB_NONE, 0, 0, 0, 1};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  // Wait for the kernel to start (its start time is stamped in the frame).
  while (atomic_load(&f.w->eps[0].mb->task[0].started_ns) == 0) lw_test_sleep_us(200);
  int64_t t0 = lw__now_ns();
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  int64_t waited = lw__now_ns() - t0;
  cr_assert_geq(waited, grace_ms * 1000000, "grace %lld ms: killed %lld ns after the cancel",
                (long long)grace_ms, (long long)waited);
  ASSERT_MSG_HAS(lw_handle_error(run)->message, "ignored cancellation");
  ASSERT_MSG_HAS(lw_handle_error(run)->message, "hang");
  cr_assert_eq(fx_stats(&f).child[0].escalations, 1);
  fx_wait_respawned(&f, 0, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  lw_handle_release(run);
  fx_destroy(&f);
}

Test(cancel, a_kernel_that_ignores_cancel_is_killed_after_the_grace, .timeout = 60) {
  expect_escalation_after(200);
}

// The grace counts from the cancel: the kill never comes sooner, with a grace shorter than the
// scheduler's longest sleep (100 ms) and with a longer one.
Test(cancel, a_kernel_that_ignores_cancel_is_killed_no_sooner_than_its_grace, .timeout = 60) {
  expect_escalation_after(50);
  expect_escalation_after(300);
}

Test(cancel, a_task_timeout_cancels_a_cooperative_kernel_with_deadline_exceeded, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  // A long grace: the child must survive because the kernel cooperates, not because it was
  // scheduled in time on a busy machine.
  cfg.cancel_grace_ns = 30ll * 1000 * 1000 * 1000;
  fx_create(&f, &cfg);
  lw_callable_handle_t spin = fx_reg(&f, "spin");
  job_t j = {spin, NULL, JOB_SCALAR, 0, 60ull * 1000 * 1000, 20ll * 1000 * 1000, 1};
  pid_t pid = fx_pid(&f, 0);
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_DEADLINE_EXCEEDED);
  ASSERT_MSG_HAS(rep.error.message, "timeout");
  cr_assert_eq(fx_pid(&f, 0), pid, "the kernel stopped by itself");
  j.scalar = 100;
  LW_ASSERT_OK(lw_worker_run(f.w, job_orch, &j, NULL));
  fx_destroy(&f);
}

Test(cancel, a_task_timeout_on_a_hung_kernel_escalates, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t hang = fx_reg(&f, "hang");
  job_t j = {hang, NULL, JOB_NONE, 0, 0, 20ll * 1000 * 1000, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_DEADLINE_EXCEEDED);
  ASSERT_MSG_HAS(rep.error.message, "ran past its 20 ms timeout");
  fx_wait_respawned(&f, 0, 1);
  fx_destroy(&f);
}

typedef struct sig_ctx {
  lw_worker_t *w;
} sig_ctx_t;

static lw_worker_t *volatile signal_worker;
static void on_sigusr1(int sig) {
  (void)sig;
  lw_worker_cancel_all(signal_worker);
}

Test(cancel, cancel_all_from_a_signal_handler_cancels_running_and_queued_runs, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  shared_t *s = fx_shared(&f);
  job_t j = {gate, s, JOB_GATE, 0, 0, 0, 1};
  lw_handle_t *h[3];
  for (int i = 0; i < 3; ++i) LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &h[i]));
  lw_test_wait_nonzero(&s->entered);
  signal_worker = f.w;
  struct sigaction sa = {.sa_handler = on_sigusr1};
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
  cr_assert_eq(raise(SIGUSR1), 0);
  for (int i = 0; i < 3; ++i) {
    cr_assert_eq(lw_handle_wait(h[i], LW_WAIT_FOREVER), LW_CANCELLED, "run %d", i);
    lw_handle_release(h[i]);
  }
  signal(SIGUSR1, SIG_DFL);
  atomic_store(&s->gate, 1);
  LW_ASSERT_OK(lw_worker_run(f.w, job_orch, &j, NULL));  // the next run is not cancelled
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------

typedef struct chain_job {
  lw_callable_handle_t fail, vadd, record, gate;
  shared_t *s;
  int64_t *log;
  uint8_t *x;
  _Atomic uint32_t submitted;  // the orch function submitted every task
} chain_job_t;

static lw_status_t failing_dag(lw_orch_t *o, void *user) {
  chain_job_t *j = user;
  // G (a gate the test holds, chip 0) before T1 on chip 0, so T1 cannot fail before every
  // task was submitted (a submit after a failure is refused, by design). Then T1 (fail,
  // writes X, chip 0) -> T2 (reads X, chip 1) -> T3 (reads T2's output, chip 1).
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)(int64_t)-3));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->fail, &a, NULL, 0));
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * 8, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x + 64, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 2));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->record, &a, NULL, 1));
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * 8, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x + 64, 64, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 3));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->record, &a, NULL, 1));
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

Test(errors, a_failed_task_poisons_its_dependents_and_names_itself, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  chain_job_t j = {fx_reg(&f, "fail"), fx_reg(&f, "vector_add"), fx_reg(&f, "record"),
                   fx_reg(&f, "gate"), fx_shared(&f), lw_worker_alloc(f.w, 64 * 8),
                   lw_worker_alloc(f.w, 128), 0};
  memset(j.log, 0, 64 * 8);
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, failing_dag, &j, &run));
  lw_test_wait_nonzero(&j.submitted);
  atomic_store(&j.s->gate, 1);  // G ends OK; T1 runs and fails
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_TASK_FAILED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  lw_handle_release(run);
  cr_assert_eq(rep.error.code, LW_TASK_FAILED);
  cr_assert_eq(rep.error.task_id, 2, "the first error names the failing task (T1, after G)");
  cr_assert_eq(rep.error.worker_id, 0, "and its chip");
  ASSERT_MSG_HAS(rep.error.message, "fail");
  ASSERT_MSG_HAS(rep.error.message, "returned -3");
  cr_assert_eq(rep.n_tasks, 4);
  cr_assert_eq(rep.n_failed, 3, "the failing task and its two dependents (poisoned)");
  cr_assert_eq(j.log[0], 0, "a poisoned task must never run");
  // One failed run does not poison the next.
  fx_run_vadd_ok(&f, j.vadd, j.s, 0);
  fx_destroy(&f);
}

typedef struct sub_fail_job {
  lw_callable_handle_t sub;
} sub_fail_job_t;

static lw_status_t refuse(const lw_kernel_args_t *args) {
  (void)args;
  return LW_INVALID_ARGUMENT;
}

static lw_status_t sub_fail_orch(lw_orch_t *o, void *user) {
  sub_fail_job_t *j = user;
  return lw_orch_submit_sub(o, j->sub, NULL);
}

Test(errors, a_sub_function_error_fails_the_run_with_its_name, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 1);
  fx_create(&f, &cfg);
  sub_fail_job_t j;
  LW_ASSERT_OK(lw_worker_register_sub(f.w, refuse, "refuse", &j.sub));
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, sub_fail_orch, &j, &rep), LW_TASK_FAILED);
  ASSERT_MSG_HAS(rep.error.message, "refuse");
  ASSERT_MSG_HAS(rep.error.message, "LW_INVALID_ARGUMENT");
  fx_destroy(&f);
}

static lw_status_t kill_sub(const lw_kernel_args_t *args) {
  (void)args;
  raise(SIGKILL);
  return LW_OK;
}

Test(errors, a_dead_sub_child_is_respawned_with_its_functions, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 1);
  fx_create(&f, &cfg);
  sub_fail_job_t dies, works;
  LW_ASSERT_OK(lw_worker_register_sub(f.w, kill_sub, "kill_sub", &dies.sub));
  LW_ASSERT_OK(lw_worker_register_sub(f.w, refuse, "refuse", &works.sub));
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, sub_fail_orch, &dies, &rep), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(rep.error.message, "killed by SIGKILL");
  fx_wait_respawned(&f, 1, 1);
  // The replayed table keeps indices: the second function is still the second.
  cr_assert_eq(lw_worker_run(f.w, sub_fail_orch, &works, &rep), LW_TASK_FAILED);
  ASSERT_MSG_HAS(rep.error.message, "refuse");
  fx_destroy(&f);
}

Test(errors, cancel_of_a_queued_register_withdraws_it, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_t big = lw_test_kernel("big_vector_add");
  lw_callable_t small = lw_test_kernel("vector_add");
  lw_handle_t *first = NULL, *queued = NULL;
  // The big register keeps the register lane busy (~15 ms); the small one waits behind it.
  LW_ASSERT_OK(lw_worker_register_async(f.w, &big, &first));
  LW_ASSERT_OK(lw_worker_register_async(f.w, &small, &queued));
  lw_status_t c = lw_handle_cancel(queued);
  cr_assert(c == LW_OK || c == LW_NOT_FOUND);
  lw_status_t st = lw_handle_wait(queued, LW_WAIT_FOREVER);
  LW_ASSERT_OK(lw_handle_wait(first, LW_WAIT_FOREVER));
  if (st == LW_CANCELLED) {
    // Withdrawn: nothing is left registered, and it can be registered again.
    lw_callable_handle_t h;
    cr_assert_eq(lw_handle_callable(queued, &h), LW_CANCELLED);
    LW_ASSERT_OK(lw_worker_register(f.w, &small, &h));
  } else {
    LW_ASSERT_OK(st);  // it had already started: a running register finishes
    cr_log_info("the queued register had started before the cancel arrived");
  }
  lw_handle_release(first);
  lw_handle_release(queued);
  lw_callable_free_loaded(&big);
  lw_callable_free_loaded(&small);
  fx_destroy(&f);
}

Test(errors, bad_input_at_l3_gives_clear_errors, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  // Double unregister and released handles.
  LW_ASSERT_OK(lw_worker_unregister(f.w, vadd));
  cr_assert_eq(lw_worker_unregister(f.w, vadd), LW_NOT_FOUND);
  ASSERT_MSG_HAS(lw_last_error()->message, "unknown or released");
  shared_t *s = fx_shared(&f);
  job_t j = {vadd, s, JOB_VADD, 0, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_NOT_FOUND);
  // A zstd frame that is corrupt, named in the error with the callable, and refused in the
  // program's process before any chip child saw it (so the error names no chip).
  static const unsigned char bad[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0xff, 0xff, 0x01, 0x02};
  lw_callable_t c = {.name = "bad_zstd", .image = bad, .image_bytes = sizeof(bad)};
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register(f.w, &c, &h), LW_INVALID_ARGUMENT);
  ASSERT_MSG_HAS(lw_last_error()->message, "callable bad_zstd");
  ASSERT_MSG_HAS(lw_last_error()->message, "zstd");
  cr_assert_eq(lw_last_error()->worker_id, -1, "%s", lw_last_error()->message);
  // A chip id that does not exist, and an invalid config.
  j.k = fx_reg(&f, "vector_add");
  j.chip = 5;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_INVALID_ARGUMENT);
  ASSERT_MSG_HAS(rep.error.message, "worker_id 5");
  lw_worker_config_t bad_cfg;
  lw_worker_config_default(&bad_cfg);
  bad_cfg.n_chips = 0;
  lw_worker_t *w2 = NULL;
  cr_assert_eq(lw_worker_create(&bad_cfg, &w2), LW_INVALID_ARGUMENT);
  ASSERT_MSG_HAS(lw_last_error()->message, "n_chips");
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------

static bool pid_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return true;
  size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  return p && p[2] == 'Z';  // a zombie waiting for its reaper is gone for our purpose
}

Test(parent_death, sigkill_of_the_parent_takes_the_fork_server_and_every_child_down,
     .timeout = 60) {
  pid_t *pids = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(pids, MAP_FAILED);
  memset(pids, 0, 4096);
  pid_t parent = fork();
  cr_assert_geq(parent, 0);
  if (parent == 0) {
    lw_worker_config_t cfg;
    fx_config(&cfg, 2, 1);
    lw_worker_t *w = NULL;
    if (lw_worker_create(&cfg, &w) != LW_OK) _exit(1);
    for (uint32_t i = 0; i < 3; ++i) pids[1 + i] = atomic_load(&w->eps[i].pid);
    pids[4] = lw__forkserver_pid(w->fs);
    // A kernel forks a child of its own and a double-forked daemon: they go down too.
    lw_callable_t c;
    lw_callable_handle_t k;
    char path[512];
    snprintf(path, sizeof(path), "%s/fork_sleeper.so", lw_test_kernel_dir());
    if (lw_callable_load_file(path, &c) != LW_OK) _exit(2);
    if (lw_worker_register(w, &c, &k) != LW_OK) _exit(3);
    _Atomic int32_t *out = lw_worker_alloc(w, 2 * sizeof(int32_t));
    if (!out) _exit(4);
    for (uint64_t mode = 0; mode < 2; ++mode) {
      fork_job_t j = {k, &out[mode], mode};
      if (lw_worker_run(w, fork_orch, &j, NULL) != LW_OK) _exit(5);
      pids[5 + mode] = atomic_load(&out[mode]);
    }
    __atomic_store_n(&pids[0], 6, __ATOMIC_RELEASE);
    for (;;) pause();
  }
  while (__atomic_load_n(&pids[0], __ATOMIC_ACQUIRE) == 0) {
    int st;
    cr_assert_eq(waitpid(parent, &st, WNOHANG), 0, "the worker process failed to start");
    lw_test_sleep_us(1000);
  }
  // Identify the kernel's processes while they surely run: their pids alone could be reused.
  long long start_time[2];
  for (int i = 0; i < 2; ++i) {
    start_time[i] = fx_proc_start_time(pids[5 + i]);
    cr_assert_geq(start_time[i], 0, "the kernel's process %d is not running", (int)pids[5 + i]);
  }
  int64_t t0 = 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t0 = ts.tv_sec * 1000000000ll + ts.tv_nsec;
  cr_assert_eq(kill(parent, SIGKILL), 0);
  int st;
  waitpid(parent, &st, 0);
  for (int i = 1; i <= 4; ++i) {
    while (!pid_gone(pids[i])) lw_test_sleep_us(1000);  // bounded by the test's timeout
  }
  for (int i = 0; i < 2; ++i) {
    bool gone = fx_wait_process_gone(pids[5 + i], start_time[i], 10000);
    // A survivor holds the test runner's pipes open: end it before failing.
    if (!gone && fx_proc_start_time(pids[5 + i]) == start_time[i]) kill(pids[5 + i], SIGKILL);
    cr_expect(gone, "the kernel's %s (pid %d) outlived the parent", i ? "daemon" : "child",
              (int)pids[5 + i]);
  }
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double ms = (double)(ts.tv_sec * 1000000000ll + ts.tv_nsec - t0) / 1e6;
  cr_log_info("fork server, 3 children and a kernel's 2 processes gone %.1f ms after the "
              "parent's SIGKILL",
              ms);
  fprintf(stderr, "parent death: everything gone %.1f ms after SIGKILL\n", ms);
  munmap(pids, 4096);
}
