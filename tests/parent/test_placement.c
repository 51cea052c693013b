// tests/parent/test_placement.c — a chip child's run lane that keeps taking posts on its
// poster's CPU moves off it (child/chip_child.c, place_run_lane) and takes its whole CPU mask
// back: no move leaves it pinned, and a chip pinned to one CPU stays on it.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/orch.h"
#include "parent/worker_impl.h"
#include "worker_test_util.h"

// The Cpus_allowed_list value of a /proc status file ("" when it has none).
static void status_cpus_allowed(const char *status, char *out, size_t bytes) {
  out[0] = '\0';
  FILE *f = fopen(status, "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "Cpus_allowed_list:", 18) != 0) continue;
    char *v = line + 18;
    v += strspn(v, " \t");
    v[strcspn(v, "\n")] = '\0';
    snprintf(out, bytes, "%s", v);
  }
  fclose(f);
}

// The CPUs allowed to the thread of pid named comm ("" when there is none).
static void cpus_allowed(pid_t pid, const char *comm, char *out, size_t bytes) {
  out[0] = '\0';
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "cannot list %s", dir);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[384], name[64] = "";
    snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(name, sizeof(name), f)) name[0] = '\0';
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    if (strcmp(name, comm) != 0) continue;
    snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
    status_cpus_allowed(path, out, bytes);
  }
  closedir(d);
}

// The CPUs allowed to the process pid (its main thread).
static void process_cpus_allowed(pid_t pid, char *out, size_t bytes) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  status_cpus_allowed(path, out, bytes);
  cr_assert_str_neq(out, "", "no Cpus_allowed_list in %s", path);
}

typedef struct chain_job {
  lw_callable_handle_t noop;
  uint8_t *buf;
  int n;
} chain_job_t;

// A chain on chip 0: each task a post the run lane takes, one after the other.
static lw_status_t chain_orch(lw_orch_t *o, void *user) {
  chain_job_t *j = user;
  for (int i = 0; i < j->n; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->buf, 64, LW_TAG_INOUT));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->noop, &a, NULL, 0));
  }
  return LW_OK;
}

static void run_posts(int runs) {
  chain_job_t j = {.noop = wreg("noop"), .n = 200};
  j.buf = lw_worker_alloc(w, 64);
  cr_assert_not_null(j.buf);
  for (int r = 0; r < runs; ++r) LW_ASSERT_OK(lw_worker_run(w, chain_orch, &j, NULL));
  // And round trips of one task: the run lane sleeps and is woken between some of them.
  j.n = 1;
  for (int r = 0; r < 200; ++r) LW_ASSERT_OK(lw_worker_run(w, chain_orch, &j, NULL));
  lw_worker_free(w, j.buf);
}

static pid_t chip_pid(void) {
  int32_t ids[LW_MAX_CHIPS + LW_MAX_SUBS + 3];
  cr_assert_geq(lw_worker_process_ids(w, ids, LW_MAX_CHIPS + LW_MAX_SUBS + 3), 1u);
  return (pid_t)ids[0];
}

Test(placement, a_run_lane_that_moves_off_its_posters_cpu_keeps_its_whole_cpu_mask,
     .timeout = 120) {
  // Move on every post taken on the poster's CPU: as many moves as this machine gives.
  setenv("LW_RUN_LANE_MOVE", "1", 1);
  make_worker(1, 0);
  unsetenv("LW_RUN_LANE_MOVE");
  run_posts(20);
  pid_t pid = chip_pid();
  char lane[256], process[256];
  cpus_allowed(pid, "lw-run-0", lane, sizeof(lane));
  process_cpus_allowed(pid, process, sizeof(process));
  cr_assert_str_neq(lane, "", "no lw-run-0 thread in chip child %d", (int)pid);
  cr_assert_str_eq(lane, process, "the run lane is left on CPUs %s of the child's %s", lane,
                   process);
  destroy_and_check();
}

Test(placement, a_run_lane_pinned_to_one_cpu_stays_there, .timeout = 120) {
  setenv("LW_RUN_LANE_MOVE", "1", 1);
  lw_worker_config_t cfg;
  wt_config(&cfg, 1, 0);
  cfg.chip.run_lane_cpu = 0;
  wt_create(&cfg);
  unsetenv("LW_RUN_LANE_MOVE");
  run_posts(5);
  char lane[256];
  cpus_allowed(chip_pid(), "lw-run-0", lane, sizeof(lane));
  cr_assert_str_eq(lane, "0", "the pinned run lane is on CPUs %s", lane);
  destroy_and_check();
}
