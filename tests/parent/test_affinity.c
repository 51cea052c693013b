// tests/parent/test_affinity.c — a worker's chip children run within the CPUs the thread that
// created the worker may use (a program run under `taskset`, or one that set its own affinity):
// binding a chip child to its NUMA node never widens that mask (child/chip_child.c,
// run_on_node_within_mask). Every thread of every chip child is checked, the run lane included.
// Where libnuma finds no NUMA support the child binds nothing and the inherited mask is what
// is checked; on a machine of one CPU the mask checked is that CPU.
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>

#include "faults/fault_util.h"

static fx_t f;

// Every thread of process pid is allowed a non-empty subset of within (and, on a machine of one
// NUMA node, exactly within). Returns the number of threads checked.
static int assert_threads_within(pid_t pid, const cpu_set_t *within) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  cr_assert_not_null(d, "%s", path);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    pid_t tid = (pid_t)atoi(e->d_name);
    cpu_set_t mask, outside;
    if (sched_getaffinity(tid, sizeof(mask), &mask) != 0) continue;  // ended meanwhile
    CPU_XOR(&outside, &mask, within);
    CPU_AND(&outside, &outside, &mask);
    cr_assert_eq(CPU_COUNT(&outside), 0,
                 "thread %d of chip child %d may run on %d CPUs outside the creator's mask",
                 (int)tid, (int)pid, CPU_COUNT(&outside));
    cr_assert_gt(CPU_COUNT(&mask), 0);
    n++;
  }
  closedir(d);
  return n;
}

static lw_status_t one_on_each_chip(lw_orch_t *o, void *user) {
  lw_callable_handle_t *k = user;
  for (int32_t chip = 0; chip < 2; ++chip) {
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, *k, NULL, NULL, chip));
  }
  return LW_OK;
}

Test(affinity, chip_children_stay_within_the_cpus_of_the_thread_that_made_the_worker,
     .timeout = 120) {
  cpu_set_t before, within;
  cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
  // Every allowed CPU but the lowest (the only one, on a machine of one CPU).
  within = before;
  if (CPU_COUNT(&before) > 1) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &before)) {
        CPU_CLR(c, &within);
        break;
      }
    }
  }
  cr_assert_eq(sched_setaffinity(0, sizeof(within), &within), 0);
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t k = fx_reg(&f, "noop");
  LW_ASSERT_OK(lw_worker_run(f.w, one_on_each_chip, &k, NULL));
  for (uint32_t chip = 0; chip < 2; ++chip) {
    // The mailbox loop, the run lane, the register lane and the watchdog at least.
    cr_assert_geq(assert_threads_within(fx_pid(&f, chip), &within), 3);
  }
  fx_destroy(&f);
  cr_assert_eq(sched_setaffinity(0, sizeof(before), &before), 0);
}
