// tests/child/test_cuda_l3.c — the cuda backend at L3 over the fake driver: a cuda chip child
// compiles, loads and runs a task on arena tensors while the parent never calls into CUDA (the
// fake records the process of every cuInit); a sticky error fails its task naming the error
// and ends the child, and a kernel that ignores its cancel is escalated (its child killed after
// the grace): either way the worker respawns the child with its callables replayed, and the
// next task on that chip runs.
#include "cuda_test_util.h"
#include "lanes/sys.h"
#include "lanework/orch.h"
#include "lanework/stats.h"
#include "parent/worker_test_util.h"

TestSuite(cuda_l3, .timeout = 120);

// A worker of one cuda chip over the fake driver; cancel_grace_ns 0 keeps the default grace.
static void make_cuda_worker_with_grace(int64_t cancel_grace_ns) {
  ct_use_fake(true);
  lw_worker_config_t cfg;
  wt_config(&cfg, 1, 0);
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "cuda");
  if (cancel_grace_ns > 0) cfg.cancel_grace_ns = cancel_grace_ns;
  wt_create(&cfg);
}

static void make_cuda_worker(void) { make_cuda_worker_with_grace(0); }

// The worker's stats once chip 0's child has been respawned (polls until it has).
static lw_worker_stats_t wait_chip0_respawned(void) {
  lw_worker_stats_t stats;
  do {
    memset(&stats, 0, sizeof(stats));
    stats.struct_size = sizeof(stats);
    LW_ASSERT_OK(lw_worker_stats(w, &stats));
    if (stats.child[0].respawns == 0) usleep(500);
  } while (stats.child[0].respawns == 0);
  return stats;
}

static lw_callable_handle_t wreg_cuda(const char *name, const char *entry, uint32_t n_params,
                                      const uint8_t *dirs) {
  lw_callable_t c = ct_cuda_c(name, CT_SOURCE_ALL, entry, n_params, dirs);
  lw_callable_handle_t h;
  lw_status_t st = lw_worker_register(w, &c, &h);
  cr_assert_eq(st, LW_OK, "register %s: %s", name, lw_last_error()->message);
  return h;
}

typedef struct job {
  lw_callable_handle_t k;
  float *a, *b, *c;
  uint64_t n;
} job_t;

static lw_status_t vadd_orch(lw_orch_t *o, void *user) {
  job_t *j = user;
  lw_args_t args;
  lw_args_init(&args);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->a, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->b, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->c, j->n * sizeof(float), LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&args, j->n));
  uint64_t global[3] = {j->n, 0, 0};
  LW_RETURN_IF_ERROR(lw_args_set_launch(&args, 1, global, NULL));
  return lw_orch_submit_next_level(o, j->k, &args, NULL, 0);
}

static lw_status_t bad_orch(lw_orch_t *o, void *user) {
  job_t *j = user;
  return lw_orch_submit_next_level(o, j->k, NULL, NULL, 0);
}

static void run_vadd_ok(job_t *j) {
  for (uint64_t i = 0; i < j->n; ++i) {
    j->a[i] = (float)i;
    j->b[i] = 2.0f;
    j->c[i] = 0.0f;
  }
  lw_run_report_t rep;
  lw_status_t st = lw_worker_run(w, vadd_orch, j, &rep);
  if (st != LW_OK) {
    char *log = ct_log();
    cr_assert_eq(st, LW_OK, "run: %s\nlog:\n%s", rep.error.message, log);
  }
  for (uint64_t i = 0; i < j->n; ++i) cr_assert_eq(j->c[i], (float)i + 2.0f, "c[%llu]", (unsigned long long)i);
}

static job_t new_vadd(lw_callable_handle_t k, uint64_t n) {
  job_t j = {k, lw_worker_alloc(w, n * sizeof(float)), lw_worker_alloc(w, n * sizeof(float)),
             lw_worker_alloc(w, n * sizeof(float)), n};
  cr_assert(j.a && j.b && j.c);
  return j;
}

// Every cuInit the fake saw came from a process other than this test's (the parent).
static int assert_init_never_in_parent(void) {
  char *log = ct_log();
  int n = 0;
  char me[32];
  snprintf(me, sizeof(me), "pid=%d ", (int)getpid());
  for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "init ", 5) != 0) continue;
    n++;
    cr_assert_null(strstr(line, me), "the parent called cuInit: %s", line);
  }
  free(log);
  return n;
}

Test(cuda_l3, a_cuda_chip_runs_a_task_and_the_parent_never_calls_cuda) {
  make_cuda_worker();
  lw_callable_handle_t k = wreg_cuda("vadd", "vector_add", 4, ct_vadd_dirs);
  job_t j = new_vadd(k, 3000);
  run_vadd_ok(&j);
  cr_assert_eq(assert_init_never_in_parent(), 1, "one chip child initialised CUDA once");
  cr_assert_geq(ct_find("compile", NULL, 0, "thread=lw-reg-0", "ctx=0", NULL), 0,
                "the child compiled on its register lane with no context current");
  int load = ct_find("module_load", NULL, 0, "thread=lw-run-0", "ctx=1", NULL);
  cr_assert_geq(load, 0, "the child loaded on its run lane");
  cr_assert_gt(ct_find("launch", NULL, 0, "vector_add", NULL), load);
  ct_assert_no_contextless_call();
  destroy_and_check();
  unlink(ct_log_path);
}

// Mapped tensors at L3 live in the worker's arena, which outlives the chip child: the child
// registers the arena once, at the first mapped tensor, not each tensor per run (and leaves
// it so until it closes, or dies: destroy may kill a child, so that is not asserted).
Test(cuda_l3, mapped_tensors_in_the_arena_register_it_once_and_not_per_run) {
  setenv("LW_CUDA_TENSORS", "mapped", 1);
  make_cuda_worker();
  unsetenv("LW_CUDA_TENSORS");
  lw_callable_handle_t k = wreg_cuda("vadd", "vector_add", 4, ct_vadd_dirs);
  job_t j = new_vadd(k, 3000);
  for (int i = 0; i < 3; ++i) run_vadd_ok(&j);
  cr_assert_eq(ct_count("host_register"), 1, "the arena, once");
  cr_assert_eq(ct_count("host_unregister"), 0, "nothing unregistered while the child runs");
  destroy_and_check();
  unlink(ct_log_path);
}

typedef struct sleep_job {
  lw_callable_handle_t k;
  uint64_t ms;
} sleep_job_t;

static lw_status_t sleep_orch(lw_orch_t *o, void *user) {
  const sleep_job_t *j = user;
  lw_args_t args;
  lw_args_init(&args);
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&args, j->ms));
  return lw_orch_submit_next_level(o, j->k, &args, NULL, 0);
}

// The fake's log has a launch of the named kernel ("launch pid=N thread=T ctx=1 <kernel>").
static bool launched(const char *kernel) {
  char *log = ct_log();
  bool found = false;
  for (char *line = strtok(log, "\n"); line && !found; line = strtok(NULL, "\n")) {
    size_t n = strlen(line), k = strlen(kernel);
    found = strncmp(line, "launch ", 7) == 0 && n > k && line[n - k - 1] == ' ' &&
            strcmp(line + n - k, kernel) == 0;
  }
  free(log);
  return found;
}

// A cuda kernel that never reads its stop word (the fake's sleep_ms, as hang.cu on a GPU): its
// cancel is escalated after the grace by killing the chip child, the run ends CANCELLED naming
// the kernel that ignored it, and the respawned child (callables registered again, a new
// context) runs the next task.
Test(cuda_l3, a_kernel_ignoring_its_cancel_is_escalated_and_the_chip_runs_again) {
  const int64_t grace_ns = 200ll * 1000 * 1000;
  make_cuda_worker_with_grace(grace_ns);
  static const uint8_t scalar[1] = {LW_PARAM_SCALAR};
  lw_callable_handle_t sleeper = wreg_cuda("sleeper", "sleep_ms", 1, scalar);
  lw_callable_handle_t k = wreg_cuda("vadd", "vector_add", 4, ct_vadd_dirs);
  sleep_job_t sj = {sleeper, 60ull * 1000};  // a minute unless killed
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, sleep_orch, &sj, &run));
  while (!launched("sleep_ms")) lw_test_sleep_us(500);
  int64_t t0 = lw__now_ns();
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  int64_t waited = lw__now_ns() - t0;
  cr_assert_geq(waited, grace_ns, "killed %lld ns after the cancel, within the grace",
                (long long)waited);
  const char *msg = lw_handle_error(run)->message;
  cr_assert_not_null(strstr(msg, "ignored cancellation"), "%s", msg);
  cr_assert_not_null(strstr(msg, "sleeper"), "the error names the callable: %s", msg);
  lw_handle_release(run);
  lw_worker_stats_t stats = wait_chip0_respawned();
  cr_assert_eq(stats.child[0].escalations, 1);
  cr_assert_eq(stats.child[0].deaths, 1);
  job_t j = new_vadd(k, 100);
  run_vadd_ok(&j);
  cr_assert_eq(assert_init_never_in_parent(), 2, "two chip processes, one cuInit each");
  ct_assert_no_contextless_call();
  destroy_and_check();
  unlink(ct_log_path);
}

Test(cuda_l3, a_sticky_error_ends_the_child_which_is_respawned_and_the_next_task_runs) {
  make_cuda_worker();
  lw_callable_handle_t bad = wreg_cuda("bad", "illegal_address", 0, NULL);
  lw_callable_handle_t k = wreg_cuda("vadd", "vector_add", 4, ct_vadd_dirs);
  job_t b = {bad, NULL, NULL, NULL, 0};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(w, bad_orch, &b, &rep), LW_TASK_FAILED, "%s", rep.error.message);
  cr_assert_not_null(strstr(rep.error.message, "CUDA_ERROR_ILLEGAL_ADDRESS"),
                     "the task's error names the CUDA error: %s", rep.error.message);
  cr_assert_not_null(strstr(rep.error.message, "illegal_address"), "%s", rep.error.message);
  // The child left once its task was reported. A task posted before the parent has handled
  // the death would go to the dead child (CHILD_EXITED, naming exit status 8, "device lost"),
  // so the test waits for the respawn: the worker starts a new child and replays both
  // callables (compiling again) before the chip takes work, and the next task on chip 0 runs
  // in the new process on a fresh context.
  lw_worker_stats_t stats = wait_chip0_respawned();
  cr_assert_eq(stats.child[0].deaths, 1);
  job_t j = new_vadd(k, 100);
  run_vadd_ok(&j);
  cr_assert_eq(assert_init_never_in_parent(), 2, "two chip processes, one cuInit each");
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  LW_ASSERT_OK(lw_worker_stats(w, &stats));
  cr_assert_eq(stats.child[0].respawns, 1);
  ct_assert_no_contextless_call();
  destroy_and_check();
  unlink(ct_log_path);
}
