// tests/faults/test_dag_chaos.c — the DAG's one owner under every kind of disturbance at once:
// four user threads run orch functions (inline sync runs and async runs, so submitters keep
// running the doorbell's assist pass beside the scheduler) with random buffers, tags, chips and
// scopes; a quarter of the async runs are cancelled, a tenth of the orch functions return an
// error, lw_worker_cancel_all fires, and the chip children are killed one after the other.
// What must hold for every run: its handle finishes; every task it submitted is counted
// completed or failed; a run whose orch function failed is never OK. The worker is destroyed
// with nothing left behind. The length is a count of kills, not a time.
#include <criterion/criterion.h>

#include "fault_util.h"

#define CHAOS_THREADS 4
#define CHAOS_KILLS 20

typedef struct chaos {
  fx_t f;
  lw_callable_handle_t noop;
  uint8_t *bufs;  // 8 buffers of 64 bytes
  _Atomic int stop;
  _Atomic long runs, broken;
  char why[256];  // the first broken promise, for the message
  pthread_mutex_t why_mu;
} chaos_t;

static chaos_t cx;

typedef struct chaos_job {
  unsigned seed;
  int n;
  bool fail_orch;
} chaos_job_t;

static void broken(const char *what, unsigned a, unsigned b, unsigned c) {
  pthread_mutex_lock(&cx.why_mu);
  if (atomic_fetch_add(&cx.broken, 1) == 0) {
    snprintf(cx.why, sizeof(cx.why), "%s (%u, %u, %u)", what, a, b, c);
  }
  pthread_mutex_unlock(&cx.why_mu);
}

static lw_status_t chaos_orch(lw_orch_t *o, void *user) {
  chaos_job_t *j = user;
  for (int i = 0; i < j->n; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    uint8_t *buf = cx.bufs + 64 * (rand_r(&j->seed) % 8);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, buf, 64, (lw_tag_t)(rand_r(&j->seed) % 4)));
    // Either may be refused (the depth bound, none open): only what follows matters.
    if (rand_r(&j->seed) % 7 == 0 && lw_orch_scope_begin(o) != LW_OK) continue;
    if (rand_r(&j->seed) % 7 == 0 && lw_orch_scope_end(o) != LW_OK) continue;
    int32_t chip = (int32_t)(rand_r(&j->seed) % 3) - 1;          // LW_ANY_CHIP, 0 or 1
    lw_status_t st = lw_orch_submit_next_level(o, cx.noop, &a, NULL, chip);
    // A run that failed (a task on a killed chip) refuses more tasks: that is the only refusal.
    if (st != LW_OK && st != LW_POISONED) broken("a submit was refused", (unsigned)st, 0, 0);
  }
  return j->fail_orch ? LW_INTERNAL : LW_OK;
}

static void *chaos_user(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&cx.stop)) {
    chaos_job_t j = {seed++, 1 + (int)(rand_r(&seed) % 20), rand_r(&seed) % 10 == 0};
    lw_run_report_t r;
    memset(&r, 0, sizeof(r));
    if (rand_r(&seed) % 2) {
      lw_status_t st = lw_worker_run(cx.f.w, chaos_orch, &j, &r);
      if (st != r.status) broken("a sync run returned other than its report", st, r.status, 0);
    } else {
      lw_handle_t *h = NULL;
      if (lw_worker_run_async(cx.f.w, chaos_orch, &j, &h) != LW_OK) {
        broken("run_async was refused", 0, 0, 0);
        continue;
      }
      if (rand_r(&seed) % 4 == 0) (void)lw_handle_cancel(h);
      (void)lw_handle_wait(h, LW_WAIT_FOREVER);
      if (lw_handle_run_report(h, &r) != LW_OK) broken("no report after the wait", 0, 0, 0);
      lw_handle_release(h);
    }
    if (r.n_tasks != r.n_completed + r.n_failed) {
      broken("a task was neither completed nor failed", r.n_tasks, r.n_completed, r.n_failed);
    }
    if (j.fail_orch && r.status == LW_OK) broken("an orch error was reported OK", 0, 0, 0);
    atomic_fetch_add(&cx.runs, 1);
  }
  return NULL;
}

Test(dag_chaos, every_run_finishes_whole_under_kills_cancels_and_orch_errors, .timeout = 240) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  cfg.task_ring = 16;
  cfg.respawn_max = 0;  // killed on purpose, again and again: no crash-loop bound
  fx_create(&cx.f, &cfg);
  pthread_mutex_init(&cx.why_mu, NULL);
  cx.noop = fx_reg(&cx.f, "noop");
  cx.bufs = lw_worker_alloc(cx.f.w, 64 * 8);
  cr_assert_not_null(cx.bufs);
  pthread_t t[CHAOS_THREADS];
  for (uintptr_t i = 0; i < CHAOS_THREADS; ++i) {
    cr_assert_eq(pthread_create(&t[i], NULL, chaos_user, (void *)(i * 1000 + 1)), 0);
  }
  for (int k = 0; k < CHAOS_KILLS; ++k) {
    // Wait for some runs between kills (events, not time), then kill a chip's current child.
    long seen = atomic_load(&cx.runs);
    while (atomic_load(&cx.runs) < seen + 500) lw_test_sleep_us(1000);
    if (k % 3 == 2) lw_worker_cancel_all(cx.f.w);
    pid_t pid = fx_pid(&cx.f, (uint32_t)(k % 2));
    if (pid > 0) (void)kill(pid, SIGKILL);
  }
  long seen = atomic_load(&cx.runs);
  while (atomic_load(&cx.runs) < seen + 200) lw_test_sleep_us(1000);  // it keeps going
  atomic_store(&cx.stop, 1);
  for (int i = 0; i < CHAOS_THREADS; ++i) pthread_join(t[i], NULL);
  cr_assert_eq(atomic_load(&cx.broken), 0, "%ld broken promises, the first: %s",
               atomic_load(&cx.broken), cx.why);
  fx_destroy(&cx.f);
  pthread_mutex_destroy(&cx.why_mu);
}
