// tests/faults/fault_util.h — helpers for the fault-injection suite: a worker whose children
// the test can kill, a shared gate/log in the arena, and waits on events.
#ifndef LANEWORK_TESTS_FAULTS_FAULT_UTIL_H_
#define LANEWORK_TESTS_FAULTS_FAULT_UTIL_H_

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "test_util.h"

typedef struct fx {
  lw_worker_t *w;
  int fds_before;
  int children_before;
} fx_t;

static inline void fx_create(fx_t *f, const lw_worker_config_t *cfg) {
  f->fds_before = lw_test_fd_count();
  f->children_before = lw_test_child_count();
  LW_ASSERT_OK(lw_worker_create(cfg, &f->w));
}

static inline void fx_config(lw_worker_config_t *cfg, uint32_t chips, uint32_t subs) {
  lw_worker_config_default(cfg);
  cfg->n_chips = chips;
  cfg->n_subs = subs;
  cfg->arena_bytes = 64ull << 20;
  cfg->cancel_grace_ns = 200ll * 1000 * 1000;
}

// The worker's stats now (lw_worker_stats with this build's struct size).
static inline lw_worker_stats_t fx_stats(fx_t *f) {
  lw_worker_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  LW_ASSERT_OK(lw_worker_stats(f->w, &s));
  return s;
}

static inline void fx_destroy(fx_t *f) {
  lw_test_procs_t procs;
  lw_test_procs_note(f->w, &procs);
  lw_worker_destroy(f->w);
  f->w = NULL;
  pid_t left = 0;
  cr_expect(lw_test_procs_gone(&procs, &left), "process %d of the worker outlived destroy",
            (int)left);
  cr_expect_eq(lw_test_child_count(), f->children_before, "a child process was left behind");
  cr_expect_eq(lw_test_fd_count(), f->fds_before, "an fd was left behind");
}

static inline lw_callable_handle_t fx_reg(fx_t *f, const char *name) {
  lw_callable_t c = lw_test_kernel(name);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(f->w, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

static inline pid_t fx_pid(fx_t *f, uint32_t slot) { return atomic_load(&f->w->eps[slot].pid); }

static inline uint32_t fx_respawns(fx_t *f, uint32_t slot) {
  lw__sched_pass_lock(&f->w->sched);
  uint32_t n = (uint32_t)atomic_load(&f->w->eps[slot].stats.respawns);
  lw__sched_pass_unlock(&f->w->sched);
  return n;
}

// Waits until the child in slot was respawned at least n times and takes work again.
static inline void fx_wait_respawned(fx_t *f, uint32_t slot, uint32_t n) {
  for (;;) {
    lw__sched_pass_lock(&f->w->sched);
    bool ok = atomic_load(&f->w->eps[slot].stats.respawns) >= n && f->w->eps[slot].accepting;
    lw__sched_pass_unlock(&f->w->sched);
    if (ok) return;
    lw_test_sleep_us(500);
  }
}

static inline bool fx_accepting(fx_t *f, uint32_t slot) {
  lw__sched_pass_lock(&f->w->sched);
  bool ok = f->w->eps[slot].accepting;
  lw__sched_pass_unlock(&f->w->sched);
  return ok;
}

static inline lw_ep_state_t fx_state(fx_t *f, uint32_t slot) {
  return (lw_ep_state_t)atomic_load(&f->w->eps[slot].state);
}

// How many of a child's task frames it has taken (TASK_RUNNING: queued on its run lane or
// running). Under the endpoint's post lock, which the supervisor also holds when it resets
// the mailbox for a respawn, so the probe is ordered with that reset (TSan sees no race).
static inline int fx_frames_running(fx_t *fx, uint32_t slot) {
  lw_endpoint_t *ep = &fx->w->eps[slot];
  int n = 0;
  pthread_mutex_lock(&ep->post_mu);
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    if (atomic_load(&ep->mb->task[i].state) == LW_MB_TASK_RUNNING) n++;
  }
  pthread_mutex_unlock(&ep->post_mu);
  return n;
}

typedef struct shared {
  _Atomic uint32_t gate;
  _Atomic uint32_t entered;
  float a[256], b[256], c[256];
} shared_t;

static inline shared_t *fx_shared(fx_t *f) {
  shared_t *s = lw_worker_alloc(f->w, sizeof(shared_t));
  cr_assert_not_null(s);
  memset(s, 0, sizeof(*s));
  for (int i = 0; i < 256; ++i) {
    s->a[i] = (float)i;
    s->b[i] = 0.5f;
  }
  return s;
}

// One task of kernel k on chip, with args built by the job's kind.
typedef enum job_kind { JOB_GATE, JOB_VADD, JOB_SCALAR, JOB_NONE } job_kind_t;

typedef struct job {
  lw_callable_handle_t k;
  shared_t *s;
  job_kind_t kind;
  int32_t chip;
  uint64_t scalar;
  int64_t timeout_ns;
  int n;  // tasks (independent), default 1
  _Atomic uint32_t *submitted;  // optional: set to 1 once every task was submitted
} job_t;

static inline lw_status_t job_args(const job_t *j, lw_args_t *a) {
  lw_args_init(a);
  switch (j->kind) {
    case JOB_GATE:
      LW_RETURN_IF_ERROR(lw_args_add_tensor(a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
      LW_RETURN_IF_ERROR(lw_args_add_tensor(a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
      break;
    case JOB_VADD:
      LW_RETURN_IF_ERROR(lw_args_add_tensor(a, j->s->a, sizeof(j->s->a), LW_TAG_INPUT));
      LW_RETURN_IF_ERROR(lw_args_add_tensor(a, j->s->b, sizeof(j->s->b), LW_TAG_INPUT));
      LW_RETURN_IF_ERROR(lw_args_add_tensor(a, j->s->c, sizeof(j->s->c), LW_TAG_OUTPUT));
      break;
    case JOB_SCALAR:
      LW_RETURN_IF_ERROR(lw_args_add_scalar(a, j->scalar));
      break;
    case JOB_NONE:
      break;
  }
  return LW_OK;
}

static inline lw_status_t job_orch(lw_orch_t *o, void *user) {
  const job_t *j = user;
  lw_run_config_t cfg;
  lw_run_config_default(&cfg);
  cfg.timeout_ns = j->timeout_ns;
  for (int i = 0; i < (j->n ? j->n : 1); ++i) {
    lw_args_t a;
    LW_RETURN_IF_ERROR(job_args(j, &a));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->k, &a, &cfg, j->chip));
  }
  if (j->submitted) atomic_store(j->submitted, 1);
  return LW_OK;
}

// A job for tests/kernels/fork_sleeper on chip 0.
typedef struct fork_job {
  lw_callable_handle_t k;
  _Atomic int32_t *pid_out;  // in the arena
  uint64_t mode;             // fork_sleeper's scalar[0]: 0 own child, 1 double fork
} fork_job_t;

static inline lw_status_t fork_orch(lw_orch_t *o, void *user) {
  const fork_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)j->pid_out, sizeof(int32_t), LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->mode));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

static inline void fx_check_vadd(const shared_t *s) {
  for (int i = 0; i < 256; ++i) cr_assert_eq(s->c[i], s->a[i] + s->b[i], "index %d", i);
}

static inline void fx_run_vadd_ok(fx_t *f, lw_callable_handle_t vadd, shared_t *s, int32_t chip) {
  memset(s->c, 0, sizeof(s->c));
  job_t j = {vadd, s, JOB_VADD, chip, 0, 0, 1};
  LW_ASSERT_OK(lw_worker_run(f->w, job_orch, &j, NULL));
  fx_check_vadd(s);
}

// The start time of pid (field 22 of /proc/<pid>/stat, in clock ticks since boot), or -1 when
// it does not exist. Together with the pid it names one process: a reused pid has a later one.
static inline long long fx_proc_start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return -1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  p += 2;  // field 3, the state
  if (*p == 'Z' || *p == 'X') return -1;  // dead, waiting for its reaper: gone for our purpose
  for (int field = 3; field < 22 && p; ++field) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  return p ? strtoll(p, NULL, 10) : -1;
}

// Waits up to timeout_ms until the process (pid, start_time) no longer runs: no such pid, a
// zombie, or the pid now names a newer process. Returns whether it went.
static inline bool fx_wait_process_gone(pid_t pid, long long start_time, int timeout_ms) {
  for (int waited_ms = 0;; waited_ms++) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    if (fx_proc_start_time(pid) != start_time) return true;
    if (waited_ms >= timeout_ms) return false;
    lw_test_sleep_us(1000);
  }
}

#define ASSERT_MSG_HAS(msg, needle) \
  cr_assert(strstr((msg), (needle)), "message '%s' lacks '%s'", (msg), (needle))

#endif  // LANEWORK_TESTS_FAULTS_FAULT_UTIL_H_
