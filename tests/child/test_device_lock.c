// tests/child/test_device_lock.c — the sim backend's device lock test hook (LW_SIM_DEVICE_LOCK,
// child/backend_sim.c), the stall `bench overlap --stall-control` makes on purpose: while a
// load is under way, a running kernel gets past at most the poll it was already beyond, and
// moves on once the load ends; without the hook, it keeps polling beside the load. Events
// only: the prepare_hold kernel says when its load holds the register lane (a file) and lets
// it go when the test says so (another file); poll_count counts the kernel's polls.
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lanework/chip.h"
#include "test_util.h"

#define LOCK_ENV "LW_SIM_DEVICE_LOCK"

typedef struct counted_run {
  _Atomic uint64_t polls;
  _Atomic uint32_t gate;
} counted_run_t;

static lw_chip_t *chip;
static char dir[64];
static int fds_before;

static void setup(void) {
  fds_before = lw_test_fd_count();
  snprintf(dir, sizeof(dir), "/tmp/lw-device-lock-XXXXXX");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void) {
  // A test that failed while a register was held must not hang in close: let it go first.
  char open_path[128];
  snprintf(open_path, sizeof(open_path), "%s/open", dir);
  FILE *f = fopen(open_path, "w");
  if (f) fclose(f);
  lw_chip_close(chip);
  chip = NULL;
  unsetenv(LOCK_ENV);
  char path[128];
  snprintf(path, sizeof(path), "%s/entered", dir);
  unlink(path);
  snprintf(path, sizeof(path), "%s/open", dir);
  unlink(path);
  rmdir(dir);
  cr_expect_eq(lw_test_fd_count(), fds_before, "the chip left fds open");
}

TestSuite(device_lock, .init = setup, .fini = teardown, .timeout = 60);

// A chip opened with the hook on or off (the variable is read when the chip opens).
static void open_chip(bool lock) {
  if (lock) {
    cr_assert_eq(setenv(LOCK_ENV, "1", 1), 0);
  } else {
    unsetenv(LOCK_ENV);
  }
  LW_ASSERT_OK(lw_chip_open(NULL, &chip));
  unsetenv(LOCK_ENV);
}

static lw_callable_handle_t reg(const char *name) {
  lw_callable_t c = lw_test_kernel(name);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

// Starts a poll_count run and waits until it polls.
static lw_handle_t *start_counted(counted_run_t *r) {
  lw_callable_handle_t h = reg("poll_count");
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)&r->polls, sizeof(r->polls), LW_TAG_NO_DEP));
  LW_ASSERT_OK(lw_args_add_tensor(&a, (void *)&r->gate, sizeof(r->gate), LW_TAG_NO_DEP));
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, h, &a, NULL, &run));
  while (atomic_load(&r->polls) == 0) lw_test_sleep_us(50);
  return run;
}

// Starts the register of prepare_hold on dir, and returns once its prepare (inside the load)
// runs. The caller frees c (lw_callable_free_loaded) once the register finished.
static lw_handle_t *start_held_register(lw_callable_t *c) {
  *c = lw_test_kernel("prepare_hold");
  free((void *)c->name);
  char *name = malloc(128);
  cr_assert_not_null(name);
  snprintf(name, 128, "prepare_hold:%s", dir);
  c->name = name;
  lw_handle_t *reg_h = NULL;
  LW_ASSERT_OK(lw_chip_register_async(chip, c, &reg_h));
  char entered[128];
  snprintf(entered, sizeof(entered), "%s/entered", dir);
  while (access(entered, F_OK) != 0) {
    cr_assert_not(lw_handle_done(reg_h), "the register finished before its prepare ran: %s",
                  lw_handle_error(reg_h) ? lw_handle_error(reg_h)->message : "");
    lw_test_sleep_us(100);
  }
  return reg_h;
}

static void let_register_go(void) {
  char path[128];
  snprintf(path, sizeof(path), "%s/open", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fclose(f);
}

Test(device_lock, holds_a_running_kernel_at_its_polls_until_the_load_ends) {
  open_chip(true);
  counted_run_t r = {0};
  lw_handle_t *run = start_counted(&r);
  lw_callable_t c;
  lw_handle_t *reg_h = start_held_register(&c);
  // The load holds the device lock now. The kernel may have been past its poll when the lock
  // was taken, and count that one; no poll after it returns while the load lasts. The pause
  // only gives a broken lock the time to show.
  uint64_t at_entry = atomic_load(&r.polls);
  lw_test_sleep_us(50000);
  uint64_t later = atomic_load(&r.polls);
  cr_assert_leq(later, at_entry + 1,
                "the kernel polled %llu times while a load held the device lock",
                (unsigned long long)(later - at_entry));
  cr_assert_not(lw_handle_done(reg_h), "the held register finished");
  cr_assert_not(lw_handle_done(run), "the held run finished");
  // Once the load ends, the kernel moves on.
  let_register_go();
  LW_ASSERT_OK(lw_handle_wait(reg_h, LW_WAIT_FOREVER));
  while (atomic_load(&r.polls) <= later + 2) lw_test_sleep_us(100);
  atomic_store(&r.gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  lw_handle_release(reg_h);
  lw_handle_release(run);
  lw_callable_free_loaded(&c);
}

Test(device_lock, off_a_load_leaves_the_running_kernel_polling) {
  open_chip(false);
  counted_run_t r = {0};
  lw_handle_t *run = start_counted(&r);
  lw_callable_t c;
  lw_handle_t *reg_h = start_held_register(&c);
  uint64_t at_entry = atomic_load(&r.polls);
  // The kernel polls on while the load is held (bounded by the test's timeout).
  while (atomic_load(&r.polls) <= at_entry + 10) lw_test_sleep_us(100);
  cr_assert_not(lw_handle_done(reg_h), "the held register finished");
  let_register_go();
  LW_ASSERT_OK(lw_handle_wait(reg_h, LW_WAIT_FOREVER));
  atomic_store(&r.gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  lw_handle_release(reg_h);
  lw_handle_release(run);
  lw_callable_free_loaded(&c);
}

Test(device_lock, a_cancel_still_stops_the_held_kernel_once_the_load_ends) {
  open_chip(true);
  counted_run_t r = {0};
  lw_handle_t *run = start_counted(&r);
  lw_callable_t c;
  lw_handle_t *reg_h = start_held_register(&c);
  LW_ASSERT_OK(lw_handle_cancel(run));
  let_register_go();
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  LW_ASSERT_OK(lw_handle_wait(reg_h, LW_WAIT_FOREVER));
  lw_handle_release(reg_h);
  lw_handle_release(run);
  lw_callable_free_loaded(&c);
}

Test(device_lock, a_value_other_than_0_or_1_fails_the_open_naming_the_variable) {
  cr_assert_eq(setenv(LOCK_ENV, "yes", 1), 0);
  lw_status_t st = lw_chip_open(NULL, &chip);
  unsetenv(LOCK_ENV);
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s", lw_status_name(st));
  cr_assert_null(chip);
  cr_assert_not_null(strstr(lw_last_error()->message, LOCK_ENV "=\"yes\""), "%s",
                     lw_last_error()->message);
}
