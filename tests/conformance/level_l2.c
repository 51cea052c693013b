// tests/conformance/level_l2.c — the conformance level driver for L2: one lw_chip_t of the
// backend under test, used in-process through the public chip API.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "child/chip_impl.h"
#include "conformance.h"
#include "fd_check.h"
#include "test_util.h"

static lw_chip_t *chip;
static const lw_test_fds_t *fds_base;

// conf_alloc's blocks, freed by conf_close (after the chip: no kernel runs then).
#define MAX_BLOCKS 64
static void *blocks[MAX_BLOCKS];
static int n_blocks;

int conf_level(void) { return 2; }

bool conf_level_has_dags(void) { return false; }

static void open_chip(lw_chip_t **out) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "%s", conf_backend());
  LW_ASSERT_OK(lw_chip_open(&cfg, out));
}

// One open/close of a chip that registers and runs the record kernel: the fd check's warm-up,
// so that fds a driver keeps for the life of the process once it has run a kernel (NVIDIA's
// /dev/nvidia*) are part of the baseline, not a leak (tests/fd_check.h).
static void chip_cycle(void *unused) {
  (void)unused;
  lw_chip_t *c = NULL;
  open_chip(&c);
  lw_callable_t k;
  conf_kernel_load(CONF_K_RECORD, NULL, &k);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(c, &k, &h));
  conf_kernel_free(&k);
  conf_log_t log;
  memset(&log, 0, sizeof(log));
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)log.v, sizeof(log.v), LW_TAG_INOUT));
  LW_ASSERT_OK(lw_args_add_scalar(&a, 1));
  LW_ASSERT_OK(lw_chip_run(c, h, &a, NULL, NULL));
  lw_chip_close(c);
}

void conf_open(void) {
  fds_base = lw_test_fds_warm_baseline(chip_cycle, NULL);
  open_chip(&chip);
}

void conf_close(void) {
  lw_chip_close(chip);
  chip = NULL;
  for (int i = 0; i < n_blocks; ++i) free(blocks[i]);
  n_blocks = 0;
  char extra[512];
  int n = lw_test_fds_excess(fds_base, extra, sizeof(extra));
  cr_expect_eq(n, 0, "the chip left %d fd%s open: %s", n, n == 1 ? "" : "s", extra);
}

void *conf_alloc(size_t bytes) {
  cr_assert(n_blocks < MAX_BLOCKS, "conf_alloc: more than %d blocks", MAX_BLOCKS);
  void *p = calloc(1, bytes);
  cr_assert_not_null(p);
  blocks[n_blocks++] = p;
  return p;
}

static void copy_error(lw_error_t *err, const lw_error_t *from) {
  if (err && from) *err = *from;
}

lw_status_t conf_register(const lw_callable_t *c, lw_callable_handle_t *out, lw_error_t *err) {
  lw_status_t st = lw_chip_register(chip, c, out);
  if (st != LW_OK) copy_error(err, lw_last_error());
  return st;
}

lw_status_t conf_register_async(const lw_callable_t *c, lw_handle_t **out) {
  return lw_chip_register_async(chip, c, out);
}

lw_status_t conf_unregister_async(lw_callable_handle_t h, lw_handle_t **out) {
  return lw_chip_unregister_async(chip, h, out);
}

static const lw_run_config_t *run_config(const conf_task_t *t, lw_run_config_t *cfg) {
  lw_run_config_default(cfg);
  cfg->timeout_ns = t->timeout_ns;
  return cfg;
}

lw_status_t conf_run_async(const conf_task_t *tasks, int n, lw_handle_t **out, lw_error_t *err) {
  cr_assert_eq(n, 1, "an L2 run is one kernel");
  lw_run_config_t cfg;
  lw_status_t st = lw_chip_run_async(chip, tasks[0].callable, &tasks[0].args,
                                     run_config(&tasks[0], &cfg), out);
  if (st != LW_OK) copy_error(err, lw_last_error());
  return st;
}

lw_status_t conf_run(const conf_task_t *task, lw_error_t *err) {
  lw_run_config_t cfg;
  lw_status_t st = lw_chip_run(chip, task->callable, &task->args, run_config(task, &cfg), NULL);
  if (st != LW_OK) copy_error(err, lw_last_error());
  return st;
}

lw_status_t conf_run_timed(const conf_task_t *task, uint64_t *out_kernel_ns, lw_error_t *err) {
  lw_run_config_t cfg;
  lw_run_timing_t timing;
  memset(&timing, 0, sizeof(timing));
  lw_status_t st = lw_chip_run(chip, task->callable, &task->args, run_config(task, &cfg), &timing);
  if (st != LW_OK) copy_error(err, lw_last_error());
  *out_kernel_ns = timing.kernel_wall_ns;
  return st;
}

bool conf_run_settled(lw_handle_t *run) { return lw_handle_done(run); }

void conf_run_counts(lw_handle_t *run, uint32_t *out_completed, uint32_t *out_failed) {
  cr_assert(lw_handle_done(run));
  bool ok = lw_handle_status(run) == LW_OK;
  *out_completed = ok ? 1 : 0;
  *out_failed = ok ? 0 : 1;
}

void conf_wait_in_flight(uint32_t n) {
  // Every accepted run holds one pin on its callable until it finished.
  for (;;) {
    lw_registry_stats_t stats;
    lw__registry_stats(chip->registry, &stats);
    if (stats.pins >= n) return;
    lw_test_sleep_us(100);
  }
}

