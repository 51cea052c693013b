// tests/faults/test_cancel_liveness.c — the cancel rules of DESIGN 4.2 at L3 (a stop requested
// before the kernel returned wins; cancelling a queued task never escalates) and the liveness
// check of 4.6 (a stopped child holding work is killed and respawned; nothing waits forever).
#include <signal.h>
#include <stdio.h>

#include "fault_util.h"

static fx_t f;

#define MS (1000ll * 1000)

// One gate task whose kernel returns `rc` when it sees the stop (0: it bails out and claims
// success), on chip 0.
typedef struct bail_job {
  lw_callable_handle_t gate;
  shared_t *s;
  uint64_t rc;
} bail_job_t;

static lw_status_t bail_orch(lw_orch_t *o, void *user) {
  const bail_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->rc));
  return lw_orch_submit_next_level(o, j->gate, &a, NULL, 0);
}

Test(cancel, a_cancelled_kernel_that_returns_0_counts_as_failed, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.cancel_grace_ns = 30000 * MS;  // the kernel cooperates; no escalation is involved
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  shared_t *s = fx_shared(&f);
  bail_job_t j = {gate, s, 0};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, bail_orch, &j, &run));
  lw_test_wait_nonzero(&s->entered);
  pid_t pid = fx_pid(&f, 0);
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.status, LW_CANCELLED);
  cr_assert_eq(rep.n_tasks, 1);
  cr_assert_eq(rep.n_completed, 0, "a task stopped before it returned did not complete");
  cr_assert_eq(rep.n_failed, 1);
  ASSERT_MSG_HAS(rep.error.message, "kernel returned 0");
  cr_assert_eq(fx_pid(&f, 0), pid, "a cooperative kernel must not cost its child");
  lw_handle_release(run);
  fx_destroy(&f);
}

// Run A: one gate task on chip 0 that holds the run lane until the test opens the gate.
// Run B: one record task on chip 0, queued on the child's run lane behind A.
typedef struct two_runs {
  lw_callable_handle_t gate, record;
  shared_t *s;
  int64_t *log;
} two_runs_t;

static lw_status_t gate_orch(lw_orch_t *o, void *user) {
  const two_runs_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  return lw_orch_submit_next_level(o, j->gate, &a, NULL, 0);
}

static lw_status_t record_orch(lw_orch_t *o, void *user) {
  const two_runs_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 8 * sizeof(int64_t), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 7));
  return lw_orch_submit_next_level(o, j->record, &a, NULL, 0);
}

Test(cancel, cancel_of_a_task_queued_behind_a_running_kernel_finishes_it_without_escalation,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  // A long grace: if the cancel of B escalated, B would take 30 s and A would die with the
  // child; the assertions below do not depend on how fast anything is scheduled.
  cfg.cancel_grace_ns = 30000 * MS;
  fx_create(&f, &cfg);
  two_runs_t j = {fx_reg(&f, "gate"), fx_reg(&f, "record"), fx_shared(&f), NULL};
  j.log = lw_worker_alloc(f.w, 8 * sizeof(int64_t));
  cr_assert_not_null(j.log);
  memset(j.log, 0, 8 * sizeof(int64_t));
  lw_handle_t *a = NULL, *b = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gate_orch, &j, &a));
  lw_test_wait_nonzero(&j.s->entered);
  LW_ASSERT_OK(lw_worker_run_async(f.w, record_orch, &j, &b));
  // B is in the child, queued on the run lane behind A's kernel.
  while (fx_frames_running(&f, 0) < 2) lw_test_sleep_us(200);
  pid_t pid = fx_pid(&f, 0);
  LW_ASSERT_OK(lw_handle_cancel(b));
  // Run handles finish in submission order, so B's handle waits for A's. B's task itself
  // finishes while A's kernel still holds the gate: the child withdraws it and the parent
  // consumes its frame (only A's frame stays RUNNING).
  while (fx_frames_running(&f, 0) > 1) lw_test_sleep_us(200);
  cr_assert_eq(j.s->gate, 0, "A is still held");
  cr_assert_not(lw_handle_done(a));
  cr_assert_eq(fx_pid(&f, 0), pid, "cancelling a queued task must not kill its child");
  atomic_store(&j.s->gate, 1);
  cr_assert_eq(lw_handle_wait(a, LW_WAIT_FOREVER), LW_OK, "A finishes normally: %s",
               lw_handle_error(a) ? lw_handle_error(a)->message : "");
  cr_assert_eq(lw_handle_wait(b, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(b, &rep));
  cr_assert_eq(rep.n_failed, 1);
  ASSERT_MSG_HAS(rep.error.message, "before it started");
  LW_ASSERT_OK(lw_handle_run_report(a, &rep));
  cr_assert_eq(rep.n_completed, 1);
  cr_assert_eq(j.log[0], 0, "the cancelled task never ran");
  cr_assert_eq(fx_pid(&f, 0), pid);
  lw_handle_release(a);
  lw_handle_release(b);
  fx_destroy(&f);
}

static void stop_child(pid_t pid);

Test(cancel, cancel_of_a_task_the_child_has_not_taken_never_escalates, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);  // grace 200 ms
  cfg.liveness_timeout_ns = 0;  // the child is stopped on purpose; only the cancel rules count
  fx_create(&f, &cfg);
  two_runs_t j = {fx_reg(&f, "gate"), fx_reg(&f, "record"), fx_shared(&f), NULL};
  j.log = lw_worker_alloc(f.w, 8 * sizeof(int64_t));
  cr_assert_not_null(j.log);
  memset(j.log, 0, 8 * sizeof(int64_t));
  pid_t pid = fx_pid(&f, 0);
  stop_child(pid);
  lw_handle_t *b = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, record_orch, &j, &b));
  // Posted (TASK_READY) but not taken: the child is stopped.
  lw_mb_task_t *frame = &f.w->eps[0].mb->task[0];
  while (atomic_load(&frame->state) != LW_MB_TASK_READY) lw_test_sleep_us(200);
  LW_ASSERT_OK(lw_handle_cancel(b));
  while (atomic_load(&frame->cancel_dispatch) == 0) lw_test_sleep_us(200);
  // Well past the grace: a task that never started must not be escalated however long it
  // waits (the old rule counted the grace from the cancel and killed the child here).
  lw_test_sleep_us(3 * 200 * 1000);
  cr_assert_eq(kill(pid, SIGCONT), 0);
  cr_assert_eq(lw_handle_wait(b, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(b, &rep));
  ASSERT_MSG_HAS(rep.error.message, "before it started");
  cr_assert_eq(j.log[0], 0, "the cancelled task never ran");
  cr_assert_eq(fx_pid(&f, 0), pid, "cancelling a task that never started must not kill its child");
  lw_handle_release(b);
  fx_destroy(&f);
}

Test(cancel, a_timeout_of_int64_max_does_not_overflow_and_the_task_runs, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t spin = fx_reg(&f, "spin");
  job_t j = {spin, NULL, JOB_SCALAR, 0, 1000 /* 1 ms */, INT64_MAX, 1};
  pid_t pid = fx_pid(&f, 0);
  lw_run_report_t rep;
  lw_status_t st = lw_worker_run(f.w, job_orch, &j, &rep);
  cr_assert_eq(st, LW_OK, "%s: %s", lw_status_name(st), rep.error.message);
  cr_assert_eq(rep.n_completed, 1);
  cr_assert_eq(fx_pid(&f, 0), pid);
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------
// Liveness

// Stops pid and waits until the kernel says it is stopped ('T' in /proc/<pid>/stat).
static void stop_child(pid_t pid) {
  cr_assert_eq(lw_test_stop_process(pid), 0);
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  for (;;) {
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp);
    char state = 0;
    int n = fscanf(fp, "%*d (%*[^)]) %c", &state);
    fclose(fp);
    if (n == 1 && state == 'T') return;
    lw_test_sleep_us(200);
  }
}

static void liveness_config(lw_worker_config_t *cfg) {
  fx_config(cfg, 1, 0);
  cfg->liveness_timeout_ns = 200 * MS;
}

Test(liveness, a_task_posted_to_a_stopped_child_fails_and_the_child_is_replaced, .timeout = 60) {
  lw_worker_config_t cfg;
  liveness_config(&cfg);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  pid_t pid = fx_pid(&f, 0);
  stop_child(pid);
  job_t j = {vadd, s, JOB_VADD, 0, 0, 1000 * MS, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED, "%s",
               rep.error.message);
  ASSERT_MSG_HAS(rep.error.message, "no heartbeat");
  ASSERT_MSG_HAS(rep.error.message, "stopped or wedged");
  ASSERT_MSG_HAS(rep.error.message, "vector_add");
  cr_assert_eq(rep.n_failed, 1);
  fx_wait_respawned(&f, 0, 1);
  cr_assert_neq(fx_pid(&f, 0), pid);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

Test(liveness, a_register_on_a_stopped_child_fails_instead_of_hanging, .timeout = 60) {
  lw_worker_config_t cfg;
  liveness_config(&cfg);
  fx_create(&f, &cfg);
  pid_t pid = fx_pid(&f, 0);
  stop_child(pid);
  lw_callable_t c = lw_test_kernel("vector_add");
  lw_callable_handle_t h;
  lw_status_t st = lw_worker_register(f.w, &c, &h);
  cr_assert_eq(st, LW_CHILD_EXITED, "got %s: %s", lw_status_name(st), lw_last_error()->message);
  ASSERT_MSG_HAS(lw_last_error()->message, "no heartbeat");
  // The worker keeps working once the child is replaced.
  fx_wait_respawned(&f, 0, 1);
  LW_ASSERT_OK(lw_worker_register(f.w, &c, &h));
  lw_callable_free_loaded(&c);
  shared_t *s = fx_shared(&f);
  fx_run_vadd_ok(&f, h, s, 0);
  fx_destroy(&f);
}

Test(liveness, a_kernel_running_longer_than_the_liveness_timeout_is_not_killed, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.liveness_timeout_ns = 300 * MS;
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  shared_t *s = fx_shared(&f);
  job_t j = {gate, s, JOB_GATE, 0, 0, 0, 1};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  lw_test_wait_nonzero(&s->entered);
  pid_t pid = fx_pid(&f, 0);
  // The kernel holds the run lane for several liveness periods; the mailbox loop beats.
  lw_test_sleep_us(1500 * 1000);
  atomic_store(&s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  cr_assert_eq(fx_pid(&f, 0), pid, "a long kernel is legal");
  lw_handle_release(run);
  fx_destroy(&f);
}

Test(liveness, a_child_stopped_while_its_kernel_runs_fails_its_work_in_finite_time,
     .timeout = 60) {
  lw_worker_config_t cfg;
  liveness_config(&cfg);
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  job_t j = {gate, s, JOB_GATE, 0, 0, 0, 1};  // no timeout: only liveness can end it
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  lw_test_wait_nonzero(&s->entered);
  // An unregister that waits in the child for the running kernel's pin.
  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_worker_unregister_async(f.w, gate, &unreg));
  stop_child(fx_pid(&f, 0));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(lw_handle_error(run)->message, "no heartbeat");
  ASSERT_MSG_HAS(lw_handle_error(run)->message, "gate");
  // The unregister ends too: nothing of the callable is left on a dead chip.
  LW_ASSERT_OK(lw_handle_wait(unreg, LW_WAIT_FOREVER));
  lw_handle_release(unreg);
  lw_handle_release(run);
  fx_wait_respawned(&f, 0, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

// Run A fills every task frame of chip 0 with gate tasks; run B's task waits in the parent's
// ready queue for a frame. lw_worker_cancel_all must reach B too, although none of its tasks
// sits in a frame: B's task is skipped, never run.
typedef struct full_job {
  two_runs_t j;
  _Atomic int b_submitted;
} full_job_t;

static lw_status_t fill_orch(lw_orch_t *o, void *user) {
  full_job_t *fj = user;
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) LW_RETURN_IF_ERROR(gate_orch(o, &fj->j));
  return LW_OK;
}

static lw_status_t queued_record_orch(lw_orch_t *o, void *user) {
  full_job_t *fj = user;
  lw_status_t st = record_orch(o, &fj->j);
  atomic_store(&fj->b_submitted, 1);
  return st;
}

Test(cancel, cancel_all_reaches_a_run_whose_tasks_wait_for_a_frame, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.cancel_grace_ns = 30000 * MS;  // the gates cooperate; no escalation is involved
  fx_create(&f, &cfg);
  full_job_t fj = {{fx_reg(&f, "gate"), fx_reg(&f, "record"), fx_shared(&f), NULL}, 0};
  fj.j.log = lw_worker_alloc(f.w, 8 * sizeof(int64_t));
  cr_assert_not_null(fj.j.log);
  memset(fj.j.log, 0, 8 * sizeof(int64_t));
  lw_handle_t *a = NULL, *b = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, fill_orch, &fj, &a));
  lw_test_wait_nonzero(&fj.j.s->entered);
  LW_ASSERT_OK(lw_worker_run_async(f.w, queued_record_orch, &fj, &b));
  while (!atomic_load(&fj.b_submitted)) lw_test_sleep_us(200);
  lw_worker_cancel_all(f.w);
  cr_assert_eq(lw_handle_wait(a, LW_WAIT_FOREVER), LW_CANCELLED);
  cr_assert_eq(lw_handle_wait(b, LW_WAIT_FOREVER), LW_CANCELLED, "B: %s",
               lw_handle_error(b) ? lw_handle_error(b)->message : "OK");
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(b, &rep));
  cr_assert_eq(rep.n_tasks, 1);
  cr_assert_eq(rep.n_failed, 1);
  cr_assert_eq(fj.j.log[0], 0, "B's task never ran");
  lw_handle_release(a);
  lw_handle_release(b);
  fx_destroy(&f);
}

// Run A: a1 (gate g1, chip 1) writes X; a2 (record, chip 0) reads X. Run B: one gate task (g0)
// per task frame of chip 0. Once B holds every frame of chip 0, g1 opens: a2 becomes ready and
// waits in the parent's queue for a frame B holds. Cancelling A finishes it now, while B's
// kernels still hold chip 0: a stopped run's queued tasks are swept out, not left waiting.
typedef struct sweep_job {
  lw_callable_handle_t gate, record;
  _Atomic uint32_t *g0, *e0, *g1, *e1;
  int64_t *x, *log;
} sweep_job_t;

static lw_status_t sweep_a_orch(lw_orch_t *o, void *user) {
  const sweep_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)j->g1, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)j->e1, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, sizeof(int64_t), LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 1));
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 8 * sizeof(int64_t), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, sizeof(int64_t), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 5));
  return lw_orch_submit_next_level(o, j->record, &a, NULL, 0);
}

static lw_status_t sweep_b_orch(lw_orch_t *o, void *user) {
  const sweep_job_t *j = user;
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)j->g0, 4, LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)j->e0, 4, LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  }
  return LW_OK;
}

static uint32_t chip_queue_len(fx_t *fx, uint32_t chip) {
  lw__sched_pass_lock(&fx->w->sched);
  uint32_t n = fx->w->dag.chip_q[chip].n;
  lw__sched_pass_unlock(&fx->w->sched);
  return n;
}

Test(cancel, cancel_of_a_run_whose_task_waits_for_a_busy_chip_finishes_it_at_once,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  cfg.cancel_grace_ns = 30000 * MS;  // nothing here ignores its cancel word
  fx_create(&f, &cfg);
  _Atomic uint32_t *words = lw_worker_alloc(f.w, 4 * sizeof(uint32_t));
  int64_t *data = lw_worker_alloc(f.w, 9 * sizeof(int64_t));
  cr_assert(words && data);
  memset((void *)words, 0, 4 * sizeof(uint32_t));
  memset(data, 0, 9 * sizeof(int64_t));
  sweep_job_t j = {fx_reg(&f, "gate"), fx_reg(&f, "record"), &words[0], &words[1], &words[2],
                   &words[3], &data[0], &data[1]};
  lw_handle_t *a = NULL, *b = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, sweep_a_orch, &j, &a));
  lw_test_wait_nonzero(j.e1);
  LW_ASSERT_OK(lw_worker_run_async(f.w, sweep_b_orch, &j, &b));
  lw_test_wait_nonzero(j.e0);
  while (fx_frames_running(&f, 0) < (int)LW_MB_TASK_FRAMES) lw_test_sleep_us(200);
  atomic_store(j.g1, 1);  // a1 finishes; a2 becomes ready and queues behind B's frames
  while (chip_queue_len(&f, 0) == 0) lw_test_sleep_us(200);
  LW_ASSERT_OK(lw_handle_cancel(a));
  lw_status_t st = lw_handle_wait(a, 20000 * MS);
  cr_assert_eq(st, LW_CANCELLED, "A: %s (it must not wait for B's kernels)", lw_status_name(st));
  cr_assert_eq(atomic_load(j.g0), 0u, "B still holds chip 0");
  cr_assert_eq(j.log[0], 0, "a2 never ran");
  atomic_store(j.g0, 1);
  LW_ASSERT_OK(lw_handle_wait(b, LW_WAIT_FOREVER));
  lw_handle_release(a);
  lw_handle_release(b);
  fx_destroy(&f);
}

// A child killed for its silent heartbeat dies by SIGKILL; whoever notices the death first (the
// scheduler's pidfd, or a control waiting for its answer, which reads the fork server's exit
// table) must name the reason, not only the signal. Here the death is described while the
// scheduler is held off the token, so it cannot have handled the death yet.
Test(liveness, a_death_from_a_liveness_kill_is_described_as_such_by_any_observer,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.liveness_timeout_ns = 0;  // the test plays the liveness killer itself
  fx_create(&f, &cfg);
  lw_endpoint_t *ep = &f.w->eps[0];
  lw__sched_pass_lock(&f.w->sched);
  atomic_store(&ep->hb_killed_ms, 777);
  lw__ep_kill(ep);
  while (!lw__ep_check_dead(ep)) lw_test_sleep_us(200);
  char desc[192];
  lw__ep_describe_exit(ep, desc, sizeof(desc));
  lw__sched_pass_unlock(&f.w->sched);
  ASSERT_MSG_HAS(desc, "no heartbeat for 777 ms");
  ASSERT_MSG_HAS(desc, "killed by SIGKILL");
  fx_wait_respawned(&f, 0, 1);
  fx_destroy(&f);
}
