// tests/faults/test_soak.c — thousands of tasks over many DAG runs while a thread SIGKILLs
// random children. Asserts: every handle finished exactly once (the worker's event fd counts
// one notification per finished handle), every run that succeeded produced correct outputs,
// every failed run accounts for all its tasks, and nothing leaked.
//
// LW_SOAK_SECONDS sets the duration (default 3, for CI). The test's Criterion timeout is
// 2 x LW_SOAK_SECONDS + 60 s and its ctest timeout 2 x (LW_SOAK_SECONDS rounded up) + 120 s
// (see tests/faults/CMakeLists.txt), so any requested length can pass.
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "fault_util.h"

// The soak's length in seconds: LW_SOAK_SECONDS, 3 when unset, -1 when it is not a positive
// decimal number. Only digits with an optional fraction are accepted: ctest's timeout is
// derived from the leading digits, so "1e3" must not ask for more than ctest allows.
static double soak_seconds(void) {
  const char *env = getenv("LW_SOAK_SECONDS");
  if (env == NULL || env[0] == '\0') return 3.0;
  size_t digits = strspn(env, "0123456789");
  if (digits == 0) return -1;
  const char *p = env + digits;
  if (*p == '.') p += 1 + strspn(p + 1, "0123456789");
  if (*p != '\0') return -1;
  double seconds = strtod(env, NULL);
  return seconds > 0 ? seconds : -1;
}

// Twice the length plus a minute for the setup, the last respawns and the final clean run.
// An invalid length gets the default's bound: the test fails at once saying why.
static double soak_timeout_s(void) {
  double seconds = soak_seconds();
  return (seconds > 0 ? seconds : 3.0) * 2 + 60;
}

// Returns the soak test's timeout and records it in the environment for the check below:
// Criterion runs each test in a new process started from the runner (which applies the
// timeout), so memory would not carry it there, but the environment does.
static double soak_timeout_apply(void) {
  double timeout = soak_timeout_s();
  char text[32];
  snprintf(text, sizeof(text), "%.3f", timeout);
  setenv("LW_SOAK_TIMEOUT_APPLIED", text, 1);
  return timeout;
}

#ifdef LANEWORK_TESTS_TSAN_SHIM_CRITERION_H_
// The TSan shim evaluates a test's options at run time, when it registers the test.
#define SOAK_TIMEOUT soak_timeout_apply()
#else
#include <criterion/hooks.h>

// Criterion takes a test's options from a static initializer, so the soak starts with a
// placeholder, and this hook, which Criterion runs before it starts any test, replaces it
// with the bound derived from LW_SOAK_SECONDS.
#define SOAK_TIMEOUT 60
ReportHook(PRE_ALL)(struct criterion_test_set *set) {
  FOREACH_SET(struct criterion_suite_set *suite, set->suites) {
    if (strcmp(suite->suite.name, "soak") != 0) continue;
    for (struct criterion_ordered_set_node *node = suite->tests->first; node;
         node = node->next) {
      struct criterion_test *test = (void *)(node + 1);  // how FOREACH_SET finds the element
      if (strcmp(test->name, "random_child_kills_lose_no_handle_and_corrupt_no_result") == 0) {
        test->data->timeout = soak_timeout_apply();
      }
    }
  }
}
#endif

#define SLOTS 4
#define CHAIN 8  // tasks per chain; each run has 2 chains (chip 0, chip 1) joined by a sub task

typedef struct soak_slot {
  float *in, *buf[2][CHAIN], *join;  // 64 floats each
  lw_handle_t *h;
  int round;
} soak_slot_t;

typedef struct soak {
  lw_callable_handle_t vadd, sub;
  float *ones;
  soak_slot_t slot[SLOTS];
} soak_t;

static soak_t soak;

static lw_status_t add_into(lw_orch_t *o, float *a, float *b, float *out, int32_t chip) {
  lw_args_t args;
  lw_args_init(&args);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, a, 64 * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, b, 64 * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, out, 64 * sizeof(float), LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, soak.vadd, &args, NULL, chip);
}

// join = buf[0][last] + buf[1][last], computed by a sub function.
static lw_status_t sub_join(const lw_kernel_args_t *args) {
  if (args->n_tensors != 3) return LW_INVALID_ARGUMENT;
  const float *a = args->tensor[0].data, *b = args->tensor[1].data;
  float *out = args->tensor[2].data;
  for (int i = 0; i < 64; ++i) out[i] = a[i] + b[i];
  return LW_OK;
}

static lw_status_t soak_orch(lw_orch_t *o, void *user) {
  soak_slot_t *s = user;
  for (int c = 0; c < 2; ++c) {
    LW_RETURN_IF_ERROR(add_into(o, s->in, soak.ones, s->buf[c][0], c));
    for (int i = 1; i < CHAIN; ++i) {
      LW_RETURN_IF_ERROR(add_into(o, s->buf[c][i - 1], soak.ones, s->buf[c][i], c));
    }
  }
  lw_args_t args;
  lw_args_init(&args);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, s->buf[0][CHAIN - 1], 256, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, s->buf[1][CHAIN - 1], 256, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, s->join, 256, LW_TAG_OUTPUT));
  return lw_orch_submit_sub(o, soak.sub, &args);
}

static void check_outputs(const soak_slot_t *s) {
  for (int i = 0; i < 64; ++i) {
    float v = s->in[i];
    for (int k = 0; k < CHAIN; ++k) {
      cr_assert_eq(s->buf[0][k][i], v + (float)(k + 1), "chain 0 task %d element %d", k, i);
      cr_assert_eq(s->buf[1][k][i], v + (float)(k + 1), "chain 1 task %d element %d", k, i);
    }
    cr_assert_eq(s->join[i], 2.0f * (v + (float)CHAIN), "join element %d", i);
  }
}

typedef struct killer {
  fx_t *f;
  _Atomic bool stop;
  _Atomic int kills;
  pid_t last_killed[8];  // per slot; read after the killer thread was joined
} killer_t;

static void *killer_main(void *arg) {
  killer_t *k = arg;
  unsigned seed = 12345;
  while (!atomic_load(&k->stop)) {
    lw_test_sleep_us(20000 + rand_r(&seed) % 60000);
    uint32_t slot = (uint32_t)(rand_r(&seed) % k->f->w->n_children);
    pid_t pid = fx_pid(k->f, slot);
    if (fx_state(k->f, slot) == LW_EP_READY && pid > 0 && kill(pid, SIGKILL) == 0) {
      atomic_fetch_add(&k->kills, 1);
      k->last_killed[slot] = pid;
    }
  }
  return NULL;
}

// Run with LW_SOAK_SECONDS=600 and a filter by ctest (test_faults_soak_bounds): a fixed
// Criterion timeout (it was 600 s) would kill such a soak before it could finish.
Test(soak_bounds, criterion_timeout_is_twice_the_length_plus_a_minute, .timeout = 10) {
  double seconds = soak_seconds();
  cr_assert_gt(seconds, 0, "LW_SOAK_SECONDS='%s' is not a positive number of seconds",
               getenv("LW_SOAK_SECONDS"));
  const char *applied = getenv("LW_SOAK_TIMEOUT_APPLIED");
  cr_assert_not_null(applied, "the soak test's timeout was never set from LW_SOAK_SECONDS");
  double timeout = strtod(applied, NULL);
  cr_assert_eq(timeout, seconds * 2 + 60, "the soak got a %.0f s timeout for a %.0f s run",
               timeout, seconds);
}

Test(soak, random_child_kills_lose_no_handle_and_corrupt_no_result, .timeout = SOAK_TIMEOUT) {
  double seconds = soak_seconds();
  cr_assert_gt(seconds, 0, "LW_SOAK_SECONDS='%s' is not a positive number of seconds",
               getenv("LW_SOAK_SECONDS"));
  fx_t f;
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 1);
  cfg.respawn_max = 16;
  cfg.respawn_window_ns = 100ll * 1000 * 1000;  // only a real crash loop trips it
  fx_create(&f, &cfg);
  soak.vadd = fx_reg(&f, "vector_add");
  LW_ASSERT_OK(lw_worker_register_sub(f.w, sub_join, "sub_join", &soak.sub));
  soak.ones = lw_worker_alloc(f.w, 256);
  for (int i = 0; i < 64; ++i) soak.ones[i] = 1.0f;
  for (int s = 0; s < SLOTS; ++s) {
    soak_slot_t *sl = &soak.slot[s];
    sl->in = lw_worker_alloc(f.w, 256);
    sl->join = lw_worker_alloc(f.w, 256);
    for (int c = 0; c < 2; ++c) {
      for (int k = 0; k < CHAIN; ++k) sl->buf[c][k] = lw_worker_alloc(f.w, 256);
    }
    sl->h = NULL;
  }
  int efd = lw_worker_event_fd(f.w);
  uint64_t v;

  killer_t k = {&f, false, 0, {0}};
  pthread_t killer;
  cr_assert_eq(pthread_create(&killer, NULL, killer_main, &k), 0);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  // Handles created so far: the register of vector_add (register_sub makes none).
  uint64_t runs = 0, ok_runs = 0, tasks = 0, ok_tasks = 0, handles = 1;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    bool time_up = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds;
    bool any_live = false;
    for (int s = 0; s < SLOTS; ++s) {
      soak_slot_t *sl = &soak.slot[s];
      if (sl->h) {
        any_live = true;
        if (!lw_handle_done(sl->h)) continue;
        lw_status_t st = lw_handle_wait(sl->h, 0);
        cr_assert_eq(lw_handle_wait(sl->h, 0), st, "a finished handle changed its status");
        lw_run_report_t rep;
        LW_ASSERT_OK(lw_handle_run_report(sl->h, &rep));
        cr_assert_eq(rep.n_completed + rep.n_failed, rep.n_tasks, "a task was lost");
        cr_assert_eq(rep.status, st);
        runs++;
        tasks += rep.n_tasks;
        ok_tasks += rep.n_completed;
        if (st == LW_OK) {
          ok_runs++;
          check_outputs(sl);
        } else {
          cr_assert(st == LW_CHILD_EXITED || st == LW_POISONED, "unexpected %s: %s",
                    lw_status_name(st), rep.error.message);
        }
        lw_handle_release(sl->h);
        sl->h = NULL;
      }
      if (!sl->h && !time_up) {
        for (int i = 0; i < 64; ++i) sl->in[i] = (float)((sl->round * 7 + i) % 100);
        for (int c = 0; c < 2; ++c) {
          for (int kk = 0; kk < CHAIN; ++kk) memset(sl->buf[c][kk], 0, 256);
        }
        memset(sl->join, 0, 256);
        sl->round++;
        LW_ASSERT_OK(lw_worker_run_async(f.w, soak_orch, sl, &sl->h));
        handles++;
        any_live = true;
      }
    }
    if (time_up && !any_live) break;
    lw_test_sleep_us(200);
  }
  atomic_store(&k.stop, true);
  pthread_join(killer, NULL);

  // Every child comes back; then a clean run must succeed everywhere.
  for (uint32_t s = 0; s < f.w->n_children; ++s) {
    // The last kill may not have been seen yet: wait for a child other than the one killed
    // last, READY and taking work.
    while (!(fx_state(&f, s) == LW_EP_READY && fx_accepting(&f, s)) ||
           fx_pid(&f, s) == k.last_killed[s] || lw__ep_check_dead(&f.w->eps[s])) {
      char desc[192];
      cr_assert_neq(fx_state(&f, s), LW_EP_DEAD, "slot %u failed for good: %s", s,
                    lw__ep_exit_desc(&f.w->eps[s], desc, sizeof(desc)));
      lw_test_sleep_us(1000);
    }
  }
  soak_slot_t *sl = &soak.slot[0];
  for (int i = 0; i < 64; ++i) sl->in[i] = 1.0f;
  LW_ASSERT_OK(lw_worker_run(f.w, soak_orch, sl, NULL));
  check_outputs(sl);
  handles++;

  // A handle rings the fd right after it becomes done, so the last notification may still
  // be on its way when lw_worker_run returns: wait for it (bounded by the test's timeout).
  uint64_t notified = 0;
  while (notified < handles) {
    struct pollfd p = {.fd = efd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 30000), 1, "%llu of %llu handles notified",
                 (unsigned long long)notified, (unsigned long long)handles);
    while (read(efd, &v, sizeof(v)) == sizeof(v)) notified += v;
  }
  cr_assert_eq(notified, handles, "%llu handles finished %llu times",
               (unsigned long long)handles, (unsigned long long)notified);
  fprintf(stderr,
          "soak: %.1f s, %d kills, %llu runs (%llu ok), %llu tasks (%llu completed)\n", seconds,
          atomic_load(&k.kills), (unsigned long long)runs, (unsigned long long)ok_runs,
          (unsigned long long)tasks, (unsigned long long)ok_tasks);
  cr_assert_gt(atomic_load(&k.kills), 0, "the soak killed nothing");
  cr_assert_gt(ok_runs, 0, "no run succeeded");
  fx_destroy(&f);
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[512];
  while (fgets(line, sizeof(line), maps)) cr_assert_null(strstr(line, "lw-arena"), "%s", line);
  fclose(maps);
}
