// tests/parent/test_callable_ids.c — the worker's callable ids come from the generational
// handle table: a released id stays unknown to unregister and to submits, also once its slot
// has spent its generations and retired.
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "test_util.h"

typedef struct stale_job {
  lw_callable_handle_t h;
  lw_status_t submit_status;
  char message[LW_ERROR_MESSAGE_BYTES];
} stale_job_t;

// Submits one task with a handle that must be refused, and keeps what the submit said.
static lw_status_t stale_orch(lw_orch_t *o, void *user) {
  stale_job_t *j = user;
  lw_args_t args;
  memset(&args, 0, sizeof(args));
  j->submit_status = lw_orch_submit_next_level(o, j->h, &args, NULL, 0);
  snprintf(j->message, sizeof(j->message), "%s", lw_last_error()->message);
  return j->submit_status;
}

static lw_callable_handle_t register_kernel(lw_worker_t *w, const char *name) {
  lw_callable_t c = lw_test_kernel(name);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(w, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

Test(callable_ids, a_slot_at_its_last_generation_retires_and_its_ids_stay_unknown,
     .timeout = 60) {
  int fds_before = lw_test_fd_count();
  int children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.arena_bytes = 64ull << 20;
  lw_worker_t *w = NULL;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
  // 2^32 register/unregister cycles would take hours: slot 0 is moved to its last
  // generation by hand, and the worker's own code runs through the end of it.
  pthread_mutex_lock(&w->calls.mu);
  w->calls.ids.slots[0].generation = UINT32_MAX;
  pthread_mutex_unlock(&w->calls.mu);

  lw_callable_handle_t a = register_kernel(w, "vector_add");
  cr_assert_eq(a.id, ((uint64_t)UINT32_MAX << 32) | 1, "a = 0x%llx", (unsigned long long)a.id);
  LW_ASSERT_OK(lw_worker_unregister(w, a));

  // The next register does not wrap slot 0 back to generation 1: it takes slot 1.
  lw_callable_handle_t b = register_kernel(w, "vector_add");
  cr_assert_eq(b.id & 0xffffffffu, 2, "b = 0x%llx", (unsigned long long)b.id);
  cr_assert_neq(b.id, ((uint64_t)1 << 32) | 1);

  // The released id, and the first id slot 0 ever had, are unknown everywhere.
  lw_callable_handle_t first = {((uint64_t)1 << 32) | 1};
  lw_callable_handle_t stale[] = {a, first};
  for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); ++i) {
    cr_assert_eq(lw_worker_unregister(w, stale[i]), LW_NOT_FOUND);
    cr_assert(strstr(lw_last_error()->message, "unknown or released callable handle"),
              "message: %s", lw_last_error()->message);
    stale_job_t j = {.h = stale[i]};
    lw_run_report_t rep;
    cr_assert_eq(lw_worker_run(w, stale_orch, &j, &rep), LW_NOT_FOUND);
    cr_assert_eq(j.submit_status, LW_NOT_FOUND, "got %s: %s",
                 lw_status_name(j.submit_status), j.message);
    cr_assert(strstr(j.message, "unknown or released callable handle"), "message: %s",
              j.message);
  }
  LW_ASSERT_OK(lw_worker_unregister(w, b));
  lw_worker_destroy(w);
  cr_expect_eq(lw_test_child_count(), children_before, "a child process was left behind");
  cr_expect_eq(lw_test_fd_count(), fds_before, "an fd was left behind");
}
