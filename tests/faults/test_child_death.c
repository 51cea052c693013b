// tests/faults/test_child_death.c — SIGKILL a chip child while idle, during a run, during a
// register, during an unregister and while a control waits; crashing kernels; respawn off;
// crash loops.
#include <pthread.h>

#include "fault_util.h"
#include "lanework/log.h"

static fx_t f;

Test(child_death, idle_chip_child_is_respawned_with_its_callables, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  pid_t old = fx_pid(&f, 0);
  cr_assert_eq(kill(old, SIGKILL), 0);
  fx_wait_respawned(&f, 0, 1);
  cr_assert_neq(fx_pid(&f, 0), old, "the chip runs in a new process");
  // The callable was replayed: the same handle works on the new child.
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_destroy(&f);
}

Test(child_death, kill_during_a_run_fails_its_task_and_other_chips_keep_working, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  shared_t *s1 = fx_shared(&f);
  job_t doomed = {gate, s, JOB_GATE, 0, 0, 0, 1};
  job_t other = {gate, s1, JOB_GATE, 1, 0, 0, 1};
  lw_handle_t *h0 = NULL, *h1 = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &doomed, &h0));
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &other, &h1));
  lw_test_wait_nonzero(&s->entered);
  lw_test_wait_nonzero(&s1->entered);
  pid_t victim = fx_pid(&f, 0);
  cr_assert_eq(kill(victim, SIGKILL), 0);
  cr_assert_eq(lw_handle_wait(h0, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  const lw_error_t *e = lw_handle_error(h0);
  ASSERT_MSG_HAS(e->message, "killed by SIGKILL");
  ASSERT_MSG_HAS(e->message, "chip 0");
  ASSERT_MSG_HAS(e->message, "gate");
  cr_assert_eq(e->worker_id, 0);
  cr_assert_eq(e->task_id, 1);
  // Chip 1 never noticed.
  cr_assert_not(lw_handle_done(h1));
  atomic_store(&s1->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(h1, LW_WAIT_FOREVER));
  fx_wait_respawned(&f, 0, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  lw_handle_release(h0);
  lw_handle_release(h1);
  fx_destroy(&f);
}

Test(child_death, kill_during_a_register_fails_it_naming_the_chip, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_t big = lw_test_kernel("big_vector_add");
  lw_handle_t *reg = NULL;
  // The register costs ~15 ms in the child (image copy, dlopen, prepare): kill it right after
  // the post, most likely inside that window.
  pid_t victim = fx_pid(&f, 1);
  LW_ASSERT_OK(lw_worker_register_async(f.w, &big, &reg));
  cr_assert_eq(kill(victim, SIGKILL), 0);
  lw_status_t st = lw_handle_wait(reg, LW_WAIT_FOREVER);
  if (st == LW_OK) {
    // The register finished before the kill landed: the respawn replays it.
    cr_log_info("register finished before the kill; checked the replay instead");
  } else {
    cr_assert_eq(st, LW_CHILD_EXITED, "got %s: %s", lw_status_name(st), lw_handle_error(reg)->message);
    ASSERT_MSG_HAS(lw_handle_error(reg)->message, "chip 1");
  }
  fx_wait_respawned(&f, 1, 1);
  // Either way the worker is whole: the image registers (again) and runs on both chips.
  lw_callable_handle_t h;
  if (st == LW_OK) {
    LW_ASSERT_OK(lw_handle_callable(reg, &h));
  } else {
    LW_ASSERT_OK(lw_worker_register(f.w, &big, &h));
  }
  shared_t *s = fx_shared(&f);
  fx_run_vadd_ok(&f, h, s, 0);
  fx_run_vadd_ok(&f, h, s, 1);
  lw_handle_release(reg);
  lw_callable_free_loaded(&big);
  fx_destroy(&f);
}

// A register that failed on one chip (its child killed while the register's prepare is held)
// and succeeded on another is rolled back there; its handle finishes with the failure only once
// the rollback is done (no op of the worker's is left when the wait returns), so the same image
// registers again at once: not refused "pending unregister" by a chip that has tombstoned the
// callable and not yet freed it (kill_during_a_register_fails_it_naming_the_chip met that now
// and then).
Test(child_death, a_failed_register_is_rolled_back_before_its_handle_finishes, .timeout = 60) {
  char dir[] = "/tmp/lw-rollback-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char entered[64], open_path[64], name[64];
  snprintf(entered, sizeof(entered), "%s/entered", dir);
  snprintf(open_path, sizeof(open_path), "%s/open", dir);
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  for (int round = 0; round < 3; ++round) {
    // Held on both chips until open exists (a name of its own each round: a new callable).
    unlink(entered);
    unlink(open_path);
    lw_callable_t held = lw_test_kernel("prepare_hold");
    free((void *)held.name);
    snprintf(name, sizeof(name), "prepare_hold:%s", dir);
    held.name = strdup(name);
    cr_assert_not_null(held.name);
    lw_handle_t *reg = NULL;
    LW_ASSERT_OK(lw_worker_register_async(f.w, &held, &reg));
    while (access(entered, F_OK) != 0) lw_test_sleep_us(100);
    cr_assert_eq(kill(fx_pid(&f, 1), SIGKILL), 0);
    fx_wait_respawned(&f, 1, (uint32_t)round + 1);
    cr_assert_not(lw_handle_done(reg), "round %d: chip 0 still holds the register", round);
    FILE *o = fopen(open_path, "w");
    cr_assert_not_null(o);
    fclose(o);
    lw_status_t st = lw_handle_wait(reg, LW_WAIT_FOREVER);
    cr_assert_eq(st, LW_CHILD_EXITED, "round %d: %s: %s", round, lw_status_name(st),
                 lw_handle_error(reg)->message);
    ASSERT_MSG_HAS(lw_handle_error(reg)->message, "chip 1");
    // The rollback on chip 0 was an op of the worker's: none is left.
    cr_assert_eq(atomic_load(&f.w->calls.live_ops), 0,
                 "round %d: the register finished while its rollback was still under way", round);
    lw_handle_release(reg);
    // Right away: nothing of the failed register is left on chip 0.
    lw_callable_handle_t h;
    LW_ASSERT_OK(lw_worker_register(f.w, &held, &h));
    LW_ASSERT_OK(lw_worker_unregister(f.w, h));
    lw_callable_free_loaded(&held);
  }
  fx_destroy(&f);
  unlink(entered);
  unlink(open_path);
  rmdir(dir);
}

Test(child_death, kill_during_a_deferred_unregister_finishes_it, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  shared_t *s = fx_shared(&f);
  job_t j = {gate, s, JOB_GATE, 0, 0, 0, 1};
  lw_handle_t *run = NULL, *unreg = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  lw_test_wait_nonzero(&s->entered);
  LW_ASSERT_OK(lw_worker_unregister_async(f.w, gate, &unreg));  // deferred: the run pins it
  cr_assert_eq(kill(fx_pid(&f, 0), SIGKILL), 0);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  // Nothing of the callable is left on the dead chip: the unregister is complete.
  LW_ASSERT_OK(lw_handle_wait(unreg, LW_WAIT_FOREVER));
  fx_wait_respawned(&f, 0, 1);
  lw_run_report_t rep;
  cr_assert_neq(lw_worker_run(f.w, job_orch, &j, &rep), LW_OK);
  cr_assert_eq(rep.error.code, LW_NOT_FOUND, "got %s", lw_status_name(rep.error.code));
  lw_handle_release(run);
  lw_handle_release(unreg);
  fx_destroy(&f);
}

typedef struct reg_thread {
  fx_t *f;
  lw_callable_t *c;
  lw_status_t st;
  char message[LW_ERROR_MESSAGE_BYTES];
} reg_thread_t;

static void *register_in_thread(void *arg) {
  reg_thread_t *r = arg;
  lw_callable_handle_t h;
  r->st = lw_worker_register(r->f->w, r->c, &h);
  snprintf(r->message, sizeof(r->message), "%s", lw_last_error()->message);
  return NULL;
}

Test(child_death, kill_while_a_control_waits_for_its_answer_fails_the_control, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_t noop = lw_test_kernel("noop");
  pid_t victim = fx_pid(&f, 0);
  // A stopped child never answers: the register's control round trip waits on it.
  cr_assert_eq(lw_test_stop_process(victim), 0);
  reg_thread_t r = {&f, &noop, LW_OK, ""};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, register_in_thread, &r), 0);
  // Wait until the request is posted (the control frame leaves IDLE).
  while (atomic_load(&f.w->eps[0].mb->control.state) != LW_MB_CONTROL_REQUEST) lw_test_sleep_us(200);
  // Order this probe of the mailbox before the respawn that resets it (the scheduler takes
  // the DAG owner's token when it handles the death).
  lw__sched_pass_lock(&f.w->sched);
  lw__sched_pass_unlock(&f.w->sched);
  cr_assert_eq(kill(victim, SIGKILL), 0);
  pthread_join(t, NULL);
  cr_assert_eq(r.st, LW_CHILD_EXITED, "got %s: %s", lw_status_name(r.st), r.message);
  ASSERT_MSG_HAS(r.message, "chip 0");
  fx_wait_respawned(&f, 0, 1);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(f.w, &noop, &h));
  lw_callable_free_loaded(&noop);
  fx_destroy(&f);
}

// Whether chip's report on the pending register op is in (under the callables' lock).
static bool register_reported_by(fx_t *fx, uint32_t chip) {
  bool in = false;
  pthread_mutex_lock(&fx->w->calls.mu);
  for (lw_wop_t *op = fx->w->calls.ops; op; op = op->next_pending) {
    if (op->kind == LW_WOP_REGISTER && op->reported[chip]) in = true;
  }
  pthread_mutex_unlock(&fx->w->calls.mu);
  return in;
}

// A chip that took a register dies while the register still waits on another chip: its new
// child never got the callable (the replay takes only live callables), so the register fails
// naming that chip instead of finishing with the dead child's local id for it.
Test(child_death, chip_that_took_a_register_dies_before_the_register_completes_fails_it,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  cfg.liveness_timeout_ns = 0;  // chip 1 is stopped on purpose below
  fx_create(&f, &cfg);
  lw_callable_t vadd = lw_test_kernel("vector_add");
  pid_t slow = fx_pid(&f, 1);
  cr_assert_eq(lw_test_stop_process(slow), 0);
  reg_thread_t r = {&f, &vadd, LW_OK, ""};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, register_in_thread, &r), 0);
  while (!register_reported_by(&f, 0)) lw_test_sleep_us(200);
  cr_assert_eq(kill(fx_pid(&f, 0), SIGKILL), 0);
  fx_wait_respawned(&f, 0, 1);
  cr_assert_eq(kill(slow, SIGCONT), 0);
  pthread_join(t, NULL);
  cr_assert_eq(r.st, LW_CHILD_EXITED, "got %s: %s", lw_status_name(r.st), r.message);
  ASSERT_MSG_HAS(r.message, "chip 0");
  // Rolled back on chip 1: the callable registers again and runs on both chips.
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(f.w, &vadd, &h));
  shared_t *s = fx_shared(&f);
  fx_run_vadd_ok(&f, h, s, 0);
  fx_run_vadd_ok(&f, h, s, 1);
  lw_callable_free_loaded(&vadd);
  fx_destroy(&f);
}

static void expect_kernel_death(const char *kernel, const char *signal_name) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t k = fx_reg(&f, kernel);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  job_t j = {k, s, JOB_NONE, 0, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(rep.error.message, signal_name);
  ASSERT_MSG_HAS(rep.error.message, kernel);
  ASSERT_MSG_HAS(rep.error.message, "chip 0");
  cr_assert_eq(rep.n_failed, 1);
  fx_run_vadd_ok(&f, vadd, s, 1);  // the other chip works throughout
  fx_wait_respawned(&f, 0, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

Test(child_death, crash_kernel_reports_sigsegv_and_the_chip_comes_back, .timeout = 60) {
  expect_kernel_death("crash", "SIGSEGV");
}

Test(child_death, abort_kernel_reports_sigabrt_and_the_chip_comes_back, .timeout = 60) {
  expect_kernel_death("abort", "SIGABRT");
}

Test(child_death, with_respawn_off_a_dead_chip_fails_its_tasks_at_once, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  cfg.respawn = 0;
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  cr_assert_eq(kill(fx_pid(&f, 0), SIGKILL), 0);
  while (fx_state(&f, 0) != LW_EP_DEAD) lw_test_sleep_us(500);
  job_t j = {vadd, s, JOB_VADD, 0, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(rep.error.message, "respawn is off");
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_destroy(&f);
}

Test(child_death, a_crash_loop_fails_the_chip_for_good, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.respawn_max = 3;
  cfg.respawn_window_ns = 60ll * 1000 * 1000 * 1000;
  fx_create(&f, &cfg);
  lw_callable_handle_t crash = fx_reg(&f, "crash");
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  job_t j = {crash, NULL, JOB_NONE, 0, 0, 0, 1};
  for (uint32_t i = 0; i < 3; ++i) {
    cr_assert_eq(lw_worker_run(f.w, job_orch, &j, NULL), LW_CHILD_EXITED);
    if (i < 2) fx_wait_respawned(&f, 0, i + 1);
  }
  while (fx_state(&f, 0) != LW_EP_DEAD) lw_test_sleep_us(500);
  cr_assert_eq(fx_respawns(&f, 0), 2);
  shared_t *s = fx_shared(&f);
  job_t v = {vadd, s, JOB_VADD, 0, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &v, &rep), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(rep.error.message, "crash loop");
  fx_destroy(&f);
}

// Run A: a gate task, then a crash task, on chip 0. Run B: vector_add on chip 0, queued in the
// child behind them. When the crash takes the child down, B's task fails CHILD_EXITED, and its
// message says it never started rather than naming vector_add as the run the child died in.
static lw_status_t gate_then_crash_orch(lw_orch_t *o, void *user) {
  const job_t *j = user;  // j[0]: the gate job, j[1]: the crash job
  LW_RETURN_IF_ERROR(job_orch(o, (void *)&j[0]));
  return job_orch(o, (void *)&j[1]);
}

Test(child_death, a_task_queued_behind_the_crash_is_not_named_as_the_run_that_died,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  lw_callable_handle_t crash = fx_reg(&f, "crash");
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  job_t a[2] = {{gate, s, JOB_GATE, 0, 0, 0, 1}, {crash, s, JOB_NONE, 0, 0, 0, 1}};
  job_t b = {vadd, s, JOB_VADD, 0, 0, 0, 1};
  lw_handle_t *ha = NULL, *hb = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gate_then_crash_orch, a, &ha));
  lw_test_wait_nonzero(&s->entered);
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &b, &hb));
  // All three tasks are in the child, on its run lane: the gate running, crash and vector_add
  // queued behind it.
  while (fx_frames_running(&f, 0) < 3) lw_test_sleep_us(200);
  atomic_store(&s->gate, 1);
  cr_assert_eq(lw_handle_wait(ha, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  ASSERT_MSG_HAS(lw_handle_error(ha)->message, "during run of crash");
  cr_assert_eq(lw_handle_wait(hb, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  const char *msg = lw_handle_error(hb)->message;
  cr_assert(!strstr(msg, "during run of vector_add"), "blames vector_add: %s", msg);
  ASSERT_MSG_HAS(msg, "before task 1 of run 2 (vector_add) started");
  ASSERT_MSG_HAS(msg, "killed by SIGSEGV");
  lw_handle_release(ha);
  lw_handle_release(hb);
  fx_wait_respawned(&f, 0, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

// What no handle reports reaches the log function: the death (WARN, naming the chip and how it
// died) and then the respawn (INFO). Events, not times: the respawn count says when to look.
typedef struct log_seen {
  pthread_mutex_t mu;
  int n;
  lw_log_level_t level[16];
  char message[16][512];
} log_seen_t;

static void log_record(lw_log_level_t level, const char *message, void *user) {
  log_seen_t *s = user;
  pthread_mutex_lock(&s->mu);
  if (s->n < 16) {
    s->level[s->n] = level;
    snprintf(s->message[s->n], sizeof(s->message[0]), "%s", message);
  }
  s->n++;
  pthread_mutex_unlock(&s->mu);
}

Test(child_death, a_death_and_its_respawn_reach_the_log_function_in_order, .timeout = 60) {
  static log_seen_t s = {.mu = PTHREAD_MUTEX_INITIALIZER};
  lw_set_log_fn(log_record, &s, LW_LOG_INFO);
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  cr_assert_eq(kill(fx_pid(&f, 1), SIGKILL), 0);
  fx_wait_respawned(&f, 1, 1);
  fx_destroy(&f);
  lw_set_log_fn(NULL, NULL, LW_LOG_OFF);
  pthread_mutex_lock(&s.mu);
  int died = -1, respawned = -1;
  for (int i = 0; i < s.n && i < 16; ++i) {
    if (died < 0 && strstr(s.message[i], "chip 1: the child died") &&
        strstr(s.message[i], "SIGKILL")) {
      died = i;
      cr_assert_eq(s.level[i], LW_LOG_WARN, "%s", s.message[i]);
    }
    if (respawned < 0 && strstr(s.message[i], "chip 1: respawned")) {
      respawned = i;
      cr_assert_eq(s.level[i], LW_LOG_INFO, "%s", s.message[i]);
    }
  }
  pthread_mutex_unlock(&s.mu);
  cr_assert_geq(died, 0, "no death event (%d events, first: %s)", s.n, s.n ? s.message[0] : "");
  cr_assert_gt(respawned, died, "the respawn was not logged after the death");
}
