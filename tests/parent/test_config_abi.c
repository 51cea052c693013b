// tests/parent/test_config_abi.c — lw_worker_config_t as programs built against other versions
// of the headers hand it in (struct_size, see lanework/config.h "Growing structs"), and the run
// config of lw_orch_submit_next_level: a struct never set up or with a garbage size is refused
// naming it, before any child starts; a newer program's struct works while its unknown fields
// are 0; the embedded chip template must have its own size.
#include <string.h>

#include "parent/worker_test_util.h"

typedef struct {
  lw_worker_config_t known;
  uint64_t newer_field;
} newer_worker_config_t;

static void assert_create_refused(const lw_worker_config_t *cfg, const char *needle) {
  int children = lw_test_child_count(), fds = lw_test_fd_count();
  lw_worker_t *x = NULL;
  lw_status_t st = lw_worker_create(cfg, &x);
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "got %s", lw_status_name(st));
  cr_assert_null(x);
  cr_assert_not_null(strstr(lw_last_error()->message, needle), "message: %s",
                     lw_last_error()->message);
  cr_assert_eq(lw_test_child_count(), children, "a refused create started a child");
  cr_assert_eq(lw_test_fd_count(), fds, "a refused create left an fd");
}

Test(worker_config_abi, create_refuses_a_config_never_set_up_or_a_garbage_size,
     .timeout = 30) {
  lw_worker_config_t cfg;
  wt_config(&cfg, 1, 0);
  cfg.struct_size = 0;
  assert_create_refused(&cfg, "lw_worker_config_t: struct_size 0 is not the size");
  cfg.struct_size = 100000;
  assert_create_refused(&cfg, "lw_worker_config_t: struct_size 100000 is not the size");
  cfg.struct_size = 64;
  assert_create_refused(&cfg, "lw_worker_config_t: struct_size 64 is too small");
}

Test(worker_config_abi, create_refuses_a_chip_template_of_another_size, .timeout = 30) {
  lw_worker_config_t cfg;
  wt_config(&cfg, 1, 0);
  cfg.chip.struct_size = 8;
  assert_create_refused(&cfg, "lw_worker_config_t.chip: struct_size 8, want");
}

Test(worker_config_abi, create_refuses_a_reserved_field_that_is_not_0, .timeout = 30) {
  lw_worker_config_t cfg;
  wt_config(&cfg, 1, 0);
  cfg.reserved = 1;
  assert_create_refused(&cfg, "worker: reserved is 1, must be 0");
}

Test(worker_config_abi, create_refuses_a_newer_config_that_sets_an_unknown_field,
     .timeout = 30) {
  newer_worker_config_t cfg;
  lw_worker_config_default_sized(&cfg.known, (uint32_t)sizeof(cfg));
  cfg.newer_field = 3;
  char needle[96];
  snprintf(needle, sizeof(needle), "lw_worker_config_t: struct_size %zu is larger", sizeof(cfg));
  assert_create_refused(&cfg.known, needle);
}

static lw_status_t submit_with_unset_run_config(lw_orch_t *o, void *user) {
  const lw_callable_handle_t *noop = user;
  lw_run_config_t rc;
  lw_run_config_default(&rc);
  rc.struct_size = 0;
  return lw_orch_submit_next_level(o, *noop, NULL, &rc, 0);
}

static lw_status_t submit_with_newer_run_config(lw_orch_t *o, void *user) {
  const lw_callable_handle_t *noop = user;
  struct {
    lw_run_config_t known;
    uint64_t newer_field;
  } rc;
  lw_run_config_default_sized(&rc.known, (uint32_t)sizeof(rc));
  return lw_orch_submit_next_level(o, *noop, NULL, &rc.known, 0);
}

Test(worker_config_abi, newer_worker_config_with_unknown_fields_at_zero_runs_work,
     .timeout = 60) {
  newer_worker_config_t cfg;
  lw_worker_config_default_sized(&cfg.known, (uint32_t)sizeof(cfg));
  cr_assert_eq(cfg.newer_field, 0);
  cfg.known.n_chips = 1;
  cfg.known.arena_bytes = 64ull << 20;
  wt_create(&cfg.known);
  lw_callable_handle_t noop = wreg("noop");
  lw_run_report_t report;
  LW_ASSERT_OK(lw_worker_run(w, submit_with_newer_run_config, &noop, &report));
  cr_assert_eq(report.n_completed, 1);
  lw_status_t st = lw_worker_run(w, submit_with_unset_run_config, &noop, &report);
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "got %s", lw_status_name(st));
  cr_assert_not_null(strstr(report.error.message, "lw_run_config_t: struct_size 0"), "%s",
                     report.error.message);
  cr_assert_eq(report.n_tasks, 0, "the refused task was not submitted");
  destroy_and_check();
}
