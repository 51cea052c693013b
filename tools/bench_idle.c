// tools/bench_idle.c — `lanework bench idle`: CPU used by an idle worker (parent threads, fork
// servers, zygote and children) once every spin phase has ended. Reads utime + stime of this
// process and of each process lanework runs for the worker (lw_worker_process_ids: none of them
// is a child of the program, so a walk of this process's descendants finds none of them) and
// their descendants from /proc, twice, --seconds apart.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "tools/bench_sim_only.h"

// Clock ticks used by pid and every descendant (recursively).
static unsigned long long tree_ticks(pid_t pid) {
  unsigned long long total = 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f) {
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    // Fields after the command (which may hold spaces) start after the last ')'.
    char *p = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                    &stime) == 2) {
      total += utime + stime;
    }
  }
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
  f = fopen(path, "r");
  if (f) {
    int child;
    while (fscanf(f, "%d", &child) == 1) total += tree_ticks(child);
    fclose(f);
  }
  return total;
}

// Clock ticks used by this process and every process lanework runs for w (and theirs).
static unsigned long long worker_ticks(const lw_worker_t *w) {
  int32_t pids[LW_MAX_CHIPS + LW_MAX_SUBS + 3];
  uint32_t n = lw_worker_process_ids(w, pids, sizeof(pids) / sizeof(pids[0]));
  if (n > sizeof(pids) / sizeof(pids[0])) n = sizeof(pids) / sizeof(pids[0]);
  unsigned long long total = tree_ticks(getpid());
  for (uint32_t i = 0; i < n; ++i) {
    if (pids[i] > 0) total += tree_ticks(pids[i]);
  }
  return total;
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
  long hz = sysconf(_SC_CLK_TCK);
  unsigned long long t0 = worker_ticks(w);
  struct timespec span = {seconds, 0};
  nanosleep(&span, NULL);
  unsigned long long t1 = worker_ticks(w);
  double pct = 100.0 * (double)(t1 - t0) / (double)hz / (double)seconds;
  lw__bench_progress_end();
  printf(
      "idle worker (2 chips, 1 sub, after 100 runs): %.2f%% of one core over %ld s "
      "(parent threads, fork servers, zygote and children, from /proc/<pid>/stat)\n",
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
