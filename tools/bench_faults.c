// tools/bench_faults.c — `lanework bench cancel` and `lanework bench crash`, at L3 (a worker
// with forked chip children: cancellation and death cross the process boundary).
//
// cancel:  cancel_p50_us — lw_handle_cancel on a run whose kernel polls its cancel word every
//          100 us, to the run handle finishing; escalation_ms — the same for a kernel that
//          ignores cancellation (the child is killed after the worker's cancel grace, 1 s).
// crash:   detect_ms — SIGKILL of a chip child mid-run to the run handle failing;
//          respawn_ms — SIGKILL to the chip running a task again, with its callables (including
//          the 8 MB big_vector_add) replayed on the new child.
#include <signal.h>
#include <stdlib.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "tools/bench.h"

typedef struct one_job {
  lw_callable_handle_t k;
  uint64_t s0, s1;
  uint32_t n_scalars;
} one_job_t;

static lw_status_t one_orch(lw_orch_t *o, void *user) {
  one_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  if (j->n_scalars > 0) LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->s0));
  if (j->n_scalars > 1) LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->s1));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

static lw_status_t make_worker(lw_worker_t **out) {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 64ull << 20;
  cfg.respawn_max = 0;  // the benchmark kills on purpose: no crash-loop bound
  return lw_worker_create(&cfg, out);
}

static lw_status_t reg(lw_worker_t *w, const char *name, lw_callable_handle_t *out) {
  lw_callable_t c;
  if (!lw__bench_load_kernel(name, &c)) return LW_NOT_FOUND;
  lw_status_t st = lw_worker_register(w, &c, out);
  lw_callable_free_loaded(&c);
  return st;
}

// Waits until the kernel in chip 0's frames has started.
static void wait_started(lw_worker_t *w) {
  for (;;) {
    for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) {
      if (atomic_load(&w->eps[0].mb->task[f].started_ns) != 0) return;
    }
    sched_yield();
  }
}

// Starts a run of job and measures lw_handle_cancel to the handle finishing, in us.
static lw_status_t cancel_once(lw_worker_t *w, one_job_t *job, double *out_us) {
  lw_handle_t *h = NULL;
  LW_RETURN_IF_ERROR(lw_worker_run_async(w, one_orch, job, &h));
  wait_started(w);
  double t0 = lw__bench_now_us();
  lw_status_t st = lw_handle_cancel(h);
  if (st == LW_OK) st = lw_handle_wait(h, LW_WAIT_FOREVER) == LW_CANCELLED ? LW_OK : LW_INTERNAL;
  *out_us = lw__bench_now_us() - t0;
  lw_handle_release(h);
  return st;
}

static bool chip_ready(lw_worker_t *w) {
  pthread_mutex_lock(&w->mu);
  bool ok = atomic_load(&w->eps[0].state) == LW_EP_READY && w->eps[0].accepting;
  pthread_mutex_unlock(&w->mu);
  return ok;
}

int lw__bench_cancel(const lw_bench_opts_t *o) {
  lw_worker_t *w = NULL;
  one_job_t spin = {{0}, 60ull * 1000 * 1000, 100, 2};  // 60 s, polls every 100 us
  one_job_t hang = {{0}, 0, 0, 0};
  lw_status_t st = make_worker(&w);
  if (st == LW_OK) st = reg(w, "spin", &spin.k);
  if (st == LW_OK) st = reg(w, "hang", &hang.k);
  if (st != LW_OK) {
    lw_worker_destroy(w);
    return lw__bench_fail("cancel setup", st);
  }
  int n = o->trials > 5 ? o->trials * 4 : 20;
  double *v = calloc((size_t)n, sizeof(double));
  for (int i = 0; st == LW_OK && i < n; ++i) st = cancel_once(w, &spin, &v[i]);
  double esc[3];
  for (int i = 0; st == LW_OK && i < 3; ++i) {
    st = cancel_once(w, &hang, &esc[i]);
    while (st == LW_OK && !chip_ready(w)) sched_yield();  // the respawn before the next one
  }
  if (st != LW_OK) {
    free(v);
    lw_worker_destroy(w);
    return lw__bench_fail("cancel", st);
  }
  double p50 = lw__bench_quantile(v, (size_t)n, 0.5), p99 = lw__bench_quantile(v, (size_t)n, 0.99);
  double esc_ms = lw__bench_median(esc, 3) / 1000.0;
  printf("cancel of a running kernel polling every 100 us (L3, %d runs): p50 %.1f us, p99 %.1f us\n",
         n, p50, p99);
  printf("cancel of a kernel that ignores it (grace %lld ms, child killed): %.1f ms (median of 3)\n",
         (long long)(w->cfg.cancel_grace_ns / 1000000), esc_ms);
  if (o->json) {
    printf("{\"bench\":\"cancel\",\"runs\":%d,\"cancel_p50_us\":%.1f,\"cancel_p99_us\":%.1f,"
           "\"grace_ms\":%lld,\"escalation_ms\":%.1f}\n",
           n, p50, p99, (long long)(w->cfg.cancel_grace_ns / 1000000), esc_ms);
  }
  free(v);
  lw_worker_destroy(w);
  return 0;
}

int lw__bench_crash(const lw_bench_opts_t *o) {
  lw_worker_t *w = NULL;
  one_job_t spin = {{0}, 60ull * 1000 * 1000, 0, 1};
  one_job_t noop = {{0}, 0, 0, 0};
  lw_callable_handle_t extra[2];
  lw_status_t st = make_worker(&w);
  if (st == LW_OK) st = reg(w, "spin", &spin.k);
  if (st == LW_OK) st = reg(w, "noop", &noop.k);
  if (st == LW_OK) st = reg(w, "vector_add", &extra[0]);
  if (st == LW_OK) st = reg(w, "big_vector_add", &extra[1]);  // replayed too: ~15 ms
  if (st != LW_OK) {
    lw_worker_destroy(w);
    return lw__bench_fail("crash setup", st);
  }
  int n = o->trials;
  double detect[1000], respawn[1000];
  for (int i = 0; st == LW_OK && i < n; ++i) {
    lw_handle_t *h = NULL;
    st = lw_worker_run_async(w, one_orch, &spin, &h);
    if (st != LW_OK) break;
    wait_started(w);
    pid_t pid = atomic_load(&w->eps[0].pid);
    double t0 = lw__bench_now_us();
    kill(pid, SIGKILL);
    lw_status_t died = lw_handle_wait(h, LW_WAIT_FOREVER);
    detect[i] = (lw__bench_now_us() - t0) / 1000.0;
    lw_handle_release(h);
    if (died != LW_CHILD_EXITED) {
      st = LW_INTERNAL;
      break;
    }
    // A run submitted now waits for the respawned chip and its replayed callables.
    st = lw_worker_run(w, one_orch, &noop, NULL);
    respawn[i] = (lw__bench_now_us() - t0) / 1000.0;
  }
  if (st != LW_OK) {
    lw_worker_destroy(w);
    return lw__bench_fail("crash", st);
  }
  double d50 = lw__bench_median(detect, (size_t)n), r50 = lw__bench_median(respawn, (size_t)n);
  printf("chip child SIGKILLed mid-run (L3, %d trials, 4 callables incl. an 8 MB image):\n", n);
  printf("  detect (kill to failed handle):              %.2f ms (median)\n", d50);
  printf("  respawn (kill to the chip running again):    %.2f ms (median)\n", r50);
  if (o->json) {
    printf("{\"bench\":\"crash\",\"trials\":%d,\"detect_ms\":%.3f,\"respawn_ms\":%.3f}\n", n, d50,
           r50);
  }
  lw_worker_destroy(w);
  return 0;
}
