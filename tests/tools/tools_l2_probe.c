// tests/tools/tools_l2_probe.c — an L2 program for the tools tests (run under valgrind's
// memcheck and gdb by run_under_tool.sh): opens a sim chip, registers the record kernel
// (tests/kernels/record.c), runs one task synchronously and four asynchronously, checks that
// each recorded its value in submission order, unregisters and closes. Exit 0 when every
// check held; 1 with a "FAIL:" line otherwise.
#include <stdint.h>
#include <string.h>

#include "tools_probe.h"

#define N_ASYNC 4

int main(void) {
  static int64_t log[64];
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  lw_chip_t *chip = NULL;
  tp_check(lw_chip_open(&cfg, &chip), "lw_chip_open (sim)");

  lw_callable_t c;
  tp_load_kernel("record", &c);
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, &c, &h);
  lw_callable_free_loaded(&c);
  tp_check(st, "lw_chip_register(record)");

  lw_args_t a;
  lw_args_init(&a);
  tp_check(lw_args_add_tensor(&a, log, sizeof(log), LW_TAG_NO_DEP), "lw_args_add_tensor");
  tp_check(lw_args_add_scalar(&a, 100), "lw_args_add_scalar");
  tp_check(lw_chip_run(chip, h, &a, NULL, NULL), "lw_chip_run");

  lw_handle_t *runs[N_ASYNC];
  for (int i = 0; i < N_ASYNC; ++i) {
    lw_args_t ai;
    lw_args_init(&ai);
    tp_check(lw_args_add_tensor(&ai, log, sizeof(log), LW_TAG_NO_DEP), "lw_args_add_tensor");
    tp_check(lw_args_add_scalar(&ai, (uint64_t)(101 + i)), "lw_args_add_scalar");
    tp_check(lw_chip_run_async(chip, h, &ai, NULL, &runs[i]), "lw_chip_run_async");
  }
  for (int i = 0; i < N_ASYNC; ++i) {
    lw_status_t rs = lw_handle_wait(runs[i], LW_WAIT_FOREVER);
    if (rs != LW_OK) {
      const lw_error_t *e = lw_handle_error(runs[i]);
      tp_fail("async run %d: %s: %s", i, lw_status_name(rs), e != NULL ? e->message : "");
    }
    lw_handle_release(runs[i]);
  }

  // The run lane is FIFO: 100, 101, ..., in submission order.
  if (log[0] != 1 + N_ASYNC) {
    tp_fail("the log holds %lld records, not %d", (long long)log[0], 1 + N_ASYNC);
  }
  for (int i = 0; i <= N_ASYNC; ++i) {
    if (log[1 + i] != 100 + i) {
      tp_fail("record %d is %lld, not %d", i, (long long)log[1 + i], 100 + i);
    }
  }

  tp_check(lw_chip_unregister(chip, h), "lw_chip_unregister");
  lw_chip_close(chip);
  printf("tools_l2_probe: ok (%d runs)\n", 1 + N_ASYNC);
  return 0;
}
