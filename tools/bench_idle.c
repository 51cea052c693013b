// tools/bench_idle.c — `lanework bench idle`: CPU used by an idle worker (parent threads, fork
// servers, zygote and children) once every spin phase has ended: the CPU time of this process's
// threads and of the lw-* threads of each process lanework runs for the worker and their
// descendants (tools/thread_times.h, with lw_worker_process_ids as roots: none of them is the
// program's child), two snapshots --seconds apart.
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "tools/bench_sim_only.h"
#include "tools/thread_times.h"

// A snapshot of the threads counted: this process's and the worker's processes'.
static bool snapshot(const lw_worker_t *w, bool caller_first, lw_bench_times_t *out) {
  int32_t ids[LW_MAX_CHIPS + LW_MAX_SUBS + 3];
  pid_t roots[LW_MAX_CHIPS + LW_MAX_SUBS + 3];
  uint32_t n = lw_worker_process_ids(w, ids, LW_MAX_CHIPS + LW_MAX_SUBS + 3);
  if (n > LW_MAX_CHIPS + LW_MAX_SUBS + 3) n = LW_MAX_CHIPS + LW_MAX_SUBS + 3;
  for (uint32_t i = 0; i < n; ++i) roots[i] = ids[i];
  return lw__bench_times_read_with(gettid(), caller_first, roots, n, out);
}

typedef struct idle_job {
  lw_callable_handle_t noop;
} idle_job_t;

static lw_status_t one_task(lw_orch_t *o, void *user) {
  idle_job_t *j = user;
  return lw_orch_submit_next_level(o, j->noop, NULL, NULL, LW_ANY_CHIP);
}

int lw__bench_idle(const lw_bench_opts_t *o) {
  long seconds = o->seconds > 0 ? o->seconds : 5;
  lw_callable_t noop;
  if (!lw__bench_load_kernel("noop", &noop)) return 1;
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 2;
  cfg.n_subs = 1;
  cfg.arena_bytes = 4ull << 20;
  lw_worker_t *w = NULL;
  idle_job_t j;
  lw_status_t st = lw_worker_create(&cfg, &w);
  if (st == LW_OK) st = lw_worker_register(w, &noop, &j.noop);
  for (int i = 0; st == LW_OK && i < 100; ++i) st = lw_worker_run(w, one_task, &j, NULL);
  if (st != LW_OK) {
    lw_worker_destroy(w);
    lw_callable_free_loaded(&noop);
    return lw__bench_fail("idle worker setup", st);
  }
  lw__bench_progress("letting the spin phases end (1 s), then sampling %ld s", seconds);
  // Let every spin phase run out.
  struct timespec settle = {1, 0};
  nanosleep(&settle, NULL);
  lw_bench_times_t before, after;
  bool ok = snapshot(w, false, &before);
  struct timespec span = {seconds, 0};
  nanosleep(&span, NULL);
  ok &= snapshot(w, true, &after);
  lw_bench_role_times_t spent;
  lw__bench_times_diff(&after, &before, &spent);
  lw__bench_times_free(&before);
  lw__bench_times_free(&after);
  if (!ok) {
    lw_worker_destroy(w);
    lw_callable_free_loaded(&noop);
    fprintf(stderr, "lanework bench idle: the threads' CPU times could not be read from /proc\n");
    return 1;
  }
  int64_t cpu_ns = 0;
  for (int r = 0; r < LW_BENCH_ROLE_COUNT; ++r) cpu_ns += spent.cpu_ns[r];
  double pct = 100.0 * (double)cpu_ns / 1e9 / (double)seconds;
  lw__bench_progress_end();
  printf(
      "idle worker (2 chips, 1 sub, after 100 runs): %.2f%% of one core over %ld s "
      "(parent threads, fork servers, zygote and children)\n",
      pct, seconds);
  int rc = 0;
  if (o->json) {
    lw_json_t json;
    lw__bench_json_begin(&json, "idle");
    lw__json_kv_int(&json, "seconds", seconds);
    lw__json_kv_fixed(&json, "idle_cpu_percent", pct, 3);
    rc = lw__bench_json_end(&json, "idle");
  }
  lw_worker_destroy(w);
  lw_callable_free_loaded(&noop);
  return rc;
}
