// tests/parent/test_shared_devices.c — lw_worker_config_t.n_devices: chips of one worker that
// share devices. Chip i opens device chip.device_id + i % n_devices in its own child process,
// and keeps its own index in errors and reports. The sim backend hands a kernel the device it
// opened (ctx->chip_id), which is how these tests see where each chip went; the opencl
// backend's two chips on one device are in test_opencl_worker.c.
#include <stdio.h>
#include <string.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "worker_test_util.h"

TestSuite(shared_devices, .timeout = 60);

typedef struct probe_job {
  lw_callable_handle_t probe;
  int64_t *out;  // two words per chip
  uint32_t chips;
} probe_job_t;

static lw_status_t probe_every_chip(lw_orch_t *o, void *user) {
  probe_job_t *j = user;
  for (uint32_t c = 0; c < j->chips; ++c) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(
        lw_args_add_tensor(&a, j->out + 2 * c, 2 * sizeof(int64_t), LW_TAG_OUTPUT));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->probe, &a, NULL, (int32_t)c));
  }
  return LW_OK;
}

// Creates a worker of `chips` sim chips over n_devices devices starting at device `first`,
// runs the probe on each chip and leaves in out[c] the device chip c opened.
static void devices_of_chips(uint32_t chips, uint32_t n_devices, int32_t first, int64_t *out) {
  lw_worker_config_t cfg;
  wt_config(&cfg, chips, 0);
  cfg.n_devices = n_devices;
  cfg.chip.device_id = first;
  wt_create(&cfg);
  probe_job_t j = {wreg("chip_probe"), lw_worker_alloc(w, 2 * chips * sizeof(int64_t)), chips};
  cr_assert_not_null(j.out);
  memset(j.out, 0, 2 * chips * sizeof(int64_t));
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, probe_every_chip, &j, &rep));
  cr_assert_eq(rep.n_completed, chips);
  for (uint32_t c = 0; c < chips; ++c) {
    cr_assert_eq(j.out[2 * c + 1], 1, "chip %u ran its probe", c);
    out[c] = j.out[2 * c];
  }
}

Test(shared_devices, by_default_every_chip_opens_a_device_of_its_own) {
  int64_t dev[3];
  devices_of_chips(3, 0, 0, dev);
  for (int c = 0; c < 3; ++c) {
    cr_assert_eq(dev[c], c, "chip %d opened device %lld", c, (long long)dev[c]);
  }
  destroy_and_check();
}

Test(shared_devices, n_devices_puts_chip_i_on_device_first_plus_i_modulo_n) {
  int64_t dev[5];
  devices_of_chips(5, 2, 3, dev);
  const int64_t want[5] = {3, 4, 3, 4, 3};
  for (int c = 0; c < 5; ++c) {
    cr_assert_eq(dev[c], want[c], "chip %d opened device %lld, want %lld", c, (long long)dev[c],
                 (long long)want[c]);
  }
  destroy_and_check();
}

typedef struct fail_job {
  lw_callable_handle_t fail;
  int64_t *carrier;
} fail_job_t;

static lw_status_t fail_on_chip_1(lw_orch_t *o, void *user) {
  fail_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->carrier, 8, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)(int64_t)-7));
  return lw_orch_submit_next_level(o, j->fail, &a, NULL, 1);
}

Test(shared_devices, a_chip_on_a_shared_device_keeps_its_own_index_in_errors_and_reports) {
  lw_worker_config_t cfg;
  wt_config(&cfg, 2, 0);
  cfg.n_devices = 1;  // both chips on device 0
  wt_create(&cfg);
  fail_job_t j = {wreg("fail"), lw_worker_alloc(w, 8)};
  cr_assert_not_null(j.carrier);
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, fail_on_chip_1, &j, &h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_TASK_FAILED);
  const char *msg = lw_handle_error(h)->message;
  cr_assert(strstr(msg, "chip 1: kernel fail returned -7"), "the error names chip 1: %s", msg);
  lw_task_report_t r[1];
  size_t n = 0;
  LW_ASSERT_OK(lw_handle_run_tasks(h, r, 1, &n));
  cr_assert_eq(n, 1);
  cr_assert_eq(r[0].worker_id, 1, "the task report names chip 1");
  lw_handle_release(h);
  destroy_and_check();
}

Test(shared_devices, more_devices_than_lw_max_chips_is_refused_naming_the_field) {
  lw_worker_config_t cfg;
  wt_config(&cfg, 1, 0);
  cfg.n_devices = LW_MAX_CHIPS + 1;
  int children = lw_test_child_count();
  lw_worker_t *x = NULL;
  cr_assert_eq(lw_worker_create(&cfg, &x), LW_INVALID_ARGUMENT);
  cr_assert_null(x);
  char want[64];
  snprintf(want, sizeof(want), "n_devices %u is more than %d", LW_MAX_CHIPS + 1, LW_MAX_CHIPS);
  cr_assert(strstr(lw_last_error()->message, want), "%s", lw_last_error()->message);
  cr_assert_eq(lw_test_child_count(), children);
}
