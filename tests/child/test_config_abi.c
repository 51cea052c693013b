// tests/child/test_config_abi.c — lw_chip_config_t and lw_run_config_t as programs built
// against other versions of the headers hand them in: the struct_size field set by the
// _default functions is checked by lw_chip_open, lw_chip_run(_async); a newer program's struct
// works while its unknown fields are 0; a struct never set up (size 0) or a garbage size is
// refused with the struct's name; and the _default functions write only the caller's size.
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

// A newer program's chip config: this library's struct followed by a field it does not know.
typedef struct {
  lw_chip_config_t known;
  int64_t newer_field;
} newer_chip_config_t;

static void assert_refused(lw_status_t st, const char *needle) {
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "got %s", lw_status_name(st));
  cr_assert_not_null(strstr(lw_last_error()->message, needle), "message: %s",
                     lw_last_error()->message);
}

Test(config_abi, chip_open_refuses_a_config_never_set_up_naming_the_struct, .timeout = 30) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  cfg.struct_size = 0;
  lw_chip_t *chip = NULL;
  assert_refused(lw_chip_open(&cfg, &chip), "lw_chip_config_t: struct_size 0");
  cr_assert_null(chip);
}

Test(config_abi, chip_open_refuses_a_garbage_struct_size, .timeout = 30) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  cfg.struct_size = 0x7fffffffu;
  lw_chip_t *chip = NULL;
  assert_refused(lw_chip_open(&cfg, &chip), "lw_chip_config_t: struct_size 2147483647");
  cfg.struct_size = 12;  // smaller than any version
  assert_refused(lw_chip_open(&cfg, &chip), "lw_chip_config_t: struct_size 12 is too small");
}

Test(config_abi, chip_open_takes_a_newer_programs_config_with_unknown_fields_at_zero,
     .timeout = 30) {
  newer_chip_config_t cfg;
  lw_chip_config_default_sized(&cfg.known, (uint32_t)sizeof(cfg));
  cr_assert_eq(cfg.known.struct_size, sizeof(cfg));
  cr_assert_eq(cfg.newer_field, 0, "the default function zeroes the fields it does not know");
  cfg.known.run_queue_depth = 3;
  lw_chip_t *chip = NULL;
  LW_ASSERT_OK(lw_chip_open(&cfg.known, &chip));
  lw_callable_t k = lw_test_kernel("noop");
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &k, &h));
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
  lw_chip_close(chip);
  lw_callable_free_loaded(&k);
}

Test(config_abi, chip_open_refuses_a_newer_config_that_sets_an_unknown_field, .timeout = 30) {
  newer_chip_config_t cfg;
  lw_chip_config_default_sized(&cfg.known, (uint32_t)sizeof(cfg));
  cfg.newer_field = 1;
  lw_chip_t *chip = NULL;
  assert_refused(lw_chip_open(&cfg.known, &chip), "lw_chip_config_t: struct_size 64 is larger");
  cr_assert_null(chip);
}

Test(config_abi, run_config_struct_size_is_checked_and_a_newer_one_runs, .timeout = 30) {
  lw_chip_t *chip = NULL;
  LW_ASSERT_OK(lw_chip_open(NULL, &chip));
  lw_callable_t k = lw_test_kernel("noop");
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &k, &h));
  lw_run_config_t rc;
  lw_run_config_default(&rc);
  cr_assert_eq(rc.struct_size, sizeof(rc));
  rc.struct_size = 0;
  assert_refused(lw_chip_run(chip, h, NULL, &rc, NULL), "lw_run_config_t: struct_size 0");
  struct {
    lw_run_config_t known;
    uint64_t newer_field;
  } newer;
  lw_run_config_default_sized(&newer.known, (uint32_t)sizeof(newer));
  newer.known.timeout_ns = 10ll * 1000 * 1000 * 1000;
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, &newer.known, NULL));
  newer.newer_field = 9;
  assert_refused(lw_chip_run(chip, h, NULL, &newer.known, NULL),
                 "lw_run_config_t: struct_size 24 is larger than this library's 16");
  lw_chip_close(chip);
  lw_callable_free_loaded(&k);
}

Test(config_abi, default_functions_write_only_the_callers_struct) {
  // An older program's struct is a prefix of ours: pretend it is one field shorter and check
  // that the bytes after it are left alone.
  unsigned char mem[sizeof(lw_chip_config_t)];
  memset(mem, 0xab, sizeof(mem));
  uint32_t older = (uint32_t)offsetof(lw_chip_config_t, register_lane_cpu);
  lw_chip_config_default_sized((lw_chip_config_t *)(void *)mem, older);
  lw_chip_config_t seen;
  memcpy(&seen, mem, sizeof(seen));
  cr_assert_eq(seen.struct_size, older);
  cr_assert_str_eq(seen.backend, "sim");
  cr_assert_eq(seen.run_lane_cpu, -1);
  for (size_t i = older; i < sizeof(mem); ++i) {
    cr_assert_eq(mem[i], 0xab, "byte %zu past the caller's %u bytes was written", i, older);
  }
}
