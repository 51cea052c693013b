// tools/bench_crash.c — `lanework bench crash` (sim, L3): a chip child SIGKILLed mid-run.
//
//   detect_ms:  SIGKILL of a chip child mid-run to the run handle failing;
//   respawn_ms: SIGKILL to the chip running a task again, with its callables (including the
//               8 MB big_vector_add) replayed on the new child.
//
// Only the public API: the spin kernel leaves a start mark (pid, start time) in a tensor of the
// run (callables/kernels/start_mark.h). Each trial waits for its own run's mark before it
// kills, and checks that it measured what it names: the kernel ran, the kill failed the run
// naming the SIGKILL, and the next task ran on a new child. A trial that did not is an error:
// the benchmark prints why and exits 1 rather than report a number.
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "callables/kernels/start_mark.h"
#include "lanework/orch.h"
#include "lanework/worker.h"
#include "tools/bench_sim_only.h"

enum {
  kSpinUs = 60 * 1000 * 1000,  // long enough never to end by itself during a trial
};

// How long a trial waits for its kernel to start (a respawn and replay come first sometimes).
static const int64_t kStartTimeoutNs = 30ll * 1000 * 1000 * 1000;

typedef struct one_job {
  lw_callable_handle_t k;
  uint64_t s0, s1;
  uint32_t n_scalars;
  start_mark_t *mark;  // in the arena; passed as tensor[0] when set
} one_job_t;

static lw_status_t one_orch(lw_orch_t *o, void *user) {
  one_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  if (j->mark != NULL) {
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->mark, sizeof(*j->mark), LW_TAG_NO_DEP));
  }
  if (j->n_scalars > 0) LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->s0));
  if (j->n_scalars > 1) LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->s1));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

static lw_status_t make_worker(lw_worker_config_t *cfg, lw_worker_t **out) {
  lw_worker_config_default(cfg);
  cfg->arena_bytes = 64ull << 20;
  cfg->respawn_max = 0;  // the benchmark kills on purpose: no crash-loop bound
  return lw_worker_create(cfg, out);
}

static lw_status_t reg(lw_worker_t *w, const char *name, lw_callable_handle_t *out) {
  lw_callable_t c;
  if (!lw__bench_load_kernel(name, &c)) return LW_NOT_FOUND;
  lw_status_t st = lw_worker_register(w, &c, out);
  lw_callable_free_loaded(&c);
  return st;
}

// A fresh, zeroed mark for the next run: marks are never reused, so an earlier run cannot
// set the one a trial waits for.
static start_mark_t *next_mark(start_mark_t *marks, int n_marks, int *used) {
  if (*used >= n_marks) return NULL;
  start_mark_t *m = &marks[(*used)++];
  memset(m, 0, sizeof(*m));
  return m;
}

// Waits until the run's kernel set its mark: true. False when the run finished first or the
// kernel did not start within kStartTimeoutNs (*why says which).
static bool wait_started(lw_handle_t *h, const start_mark_t *m, char *why, size_t why_bytes) {
  double deadline = lw__bench_now_us() + (double)kStartTimeoutNs / 1000.0;
  for (;;) {
    // Acquire: pairs with the kernel's release store; pid and start_ns are valid after it.
    if (atomic_load_explicit(&m->started, memory_order_acquire) != 0) return true;
    if (lw_handle_done(h)) {
      lw_status_t st = lw_handle_wait(h, 0);
      const lw_error_t *e = lw_handle_error(h);
      snprintf(why, why_bytes, "the run finished (%s%s%s) before its kernel started",
               lw_status_name(st), e ? ": " : "", e ? e->message : "");
      return false;
    }
    if (lw__bench_now_us() > deadline) {
      snprintf(why, why_bytes, "its kernel did not start within %lld s",
               (long long)(kStartTimeoutNs / 1000000000));
      return false;
    }
    sched_yield();
  }
}

// Runs a short spin with a fresh mark and reports the pid it ran in: which child chip 0 is.
static int probe_pid(lw_worker_t *w, lw_callable_handle_t spin, start_mark_t *mark,
                     const char *bench, pid_t *out) {
  one_job_t probe = {spin, 0, 0, 1, mark};
  lw_status_t st = lw_worker_run(w, one_orch, &probe, NULL);
  if (st != LW_OK) return lw__bench_fail(bench, st);
  if (atomic_load_explicit(&mark->started, memory_order_acquire) == 0) {
    return lw__bench_invalid("a spin run succeeded without setting its start mark");
  }
  *out = mark->pid;
  return 0;
}

int lw__bench_crash(const lw_bench_opts_t *o) {
  lw_worker_config_t cfg;
  lw_worker_t *w = NULL;
  one_job_t spin = {{0}, kSpinUs, 0, 1, NULL};
  lw_callable_handle_t extra[3];
  int n = o->trials;  // 1..1000 (bench.c)
  int n_marks = 2 * n, used = 0;
  lw_status_t st = make_worker(&cfg, &w);
  if (st == LW_OK) st = reg(w, "spin", &spin.k);
  // Registered only to be replayed on every respawn: four callables in all.
  if (st == LW_OK) st = reg(w, "noop", &extra[0]);
  if (st == LW_OK) st = reg(w, "vector_add", &extra[1]);
  if (st == LW_OK) st = reg(w, "big_vector_add", &extra[2]);  // replayed too: ~15 ms
  start_mark_t *marks = NULL;
  if (st == LW_OK) {
    marks = lw_worker_alloc(w, (size_t)n_marks * sizeof(start_mark_t));
    if (marks == NULL) st = lw_last_error()->code;
  }
  if (st != LW_OK) {
    lw_worker_destroy(w);
    return lw__bench_fail("crash setup", st);
  }
  static double detect[1000], respawn[1000];
  int rc = 0;
  for (int i = 0; rc == 0 && i < n; ++i) {
    lw__bench_progress("child death %d/%d", i + 1, n);
    lw_handle_t *h = NULL;
    spin.mark = next_mark(marks, n_marks, &used);
    st = lw_worker_run_async(w, one_orch, &spin, &h);
    if (st != LW_OK) {
      rc = lw__bench_fail("crash", st);
      break;
    }
    char why[LW_ERROR_MESSAGE_BYTES + 64];
    if (!wait_started(h, spin.mark, why, sizeof(why))) {
      (void)lw_handle_cancel(h);
      (void)lw_handle_wait(h, LW_WAIT_FOREVER);
      lw_handle_release(h);
      rc = lw__bench_invalid("trial %d: %s", i, why);
      break;
    }
    // The mark names the process that runs this very kernel: the chip child to kill.
    pid_t victim = spin.mark->pid;
    double t0 = lw__bench_now_us();
    if (kill(victim, SIGKILL) != 0) {
      int e = errno;
      (void)lw_handle_cancel(h);
      (void)lw_handle_wait(h, LW_WAIT_FOREVER);
      lw_handle_release(h);
      rc = lw__bench_invalid("trial %d: kill(%d, SIGKILL): %s", i, (int)victim, strerror(e));
      break;
    }
    lw_status_t died = lw_handle_wait(h, LW_WAIT_FOREVER);
    detect[i] = (lw__bench_now_us() - t0) / 1000.0;
    const lw_error_t *e = lw_handle_error(h);
    char message[LW_ERROR_MESSAGE_BYTES];
    snprintf(message, sizeof(message), "%s", e ? e->message : "");
    lw_handle_release(h);
    if (died != LW_CHILD_EXITED || strstr(message, "killed by SIGKILL") == NULL) {
      rc = lw__bench_invalid("trial %d: after the SIGKILL the run finished %s, not CHILD_EXITED "
                   "naming the SIGKILL: %s", i, lw_status_name(died), message);
      break;
    }
    // A run submitted now waits for the respawned chip and its replayed callables; its
    // mark shows it ran in a new child.
    pid_t after = 0;
    rc = probe_pid(w, spin.k, next_mark(marks, n_marks, &used), "crash", &after);
    respawn[i] = (lw__bench_now_us() - t0) / 1000.0;
    if (rc == 0 && after == victim) {
      rc = lw__bench_invalid("trial %d: the task after the kill ran in pid %d, the killed child",
                   i, (int)victim);
    }
  }
  if (rc != 0) {
    lw_worker_destroy(w);
    return rc;
  }
  double d50 = lw__bench_median(detect, (size_t)n), r50 = lw__bench_median(respawn, (size_t)n);
  lw__bench_progress_end();
  printf("chip child SIGKILLed mid-run (L3, %d trials, 4 callables incl. an 8 MB image):\n", n);
  printf("  detect (kill to failed handle):              %.2f ms (median)\n", d50);
  printf("  respawn (kill to the chip running again):    %.2f ms (median)\n", r50);
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "crash");
    lw__json_kv_int(&j, "trials", n);
    lw__json_kv_fixed(&j, "detect_ms", d50, 3);
    lw__json_kv_fixed(&j, "respawn_ms", r50, 3);
    rc = lw__bench_json_end(&j, "crash");
  }
  lw_worker_destroy(w);
  return rc;
}
