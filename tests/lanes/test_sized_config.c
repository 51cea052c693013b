// tests/lanes/test_sized_config.c — the growing-struct contract of the config structs
// (lanes/error.h: lw__sized_config_read / lw__sized_config_fill), on a made-up struct with two
// versions: v1 as an older program has it, v2 as this "library" has it, one field appended.
#include <stddef.h>
#include <string.h>

#include "lanes/error.h"
#include "test_util.h"

typedef struct cfg_v1 {
  uint32_t struct_size;
  uint32_t a;
  int64_t b;
} cfg_v1_t;

typedef struct cfg_v2 {
  uint32_t struct_size;
  uint32_t a;
  int64_t b;
  int64_t c;  // appended in v2; 0 would mean "default", here the default is 7
} cfg_v2_t;

static void v2_defaults(cfg_v2_t *d) {
  memset(d, 0, sizeof(*d));
  d->struct_size = sizeof(*d);
  d->a = 1;
  d->b = 2;
  d->c = 7;
}

static lw_status_t read_cfg(const void *in, cfg_v2_t *out, lw_error_t *err) {
  v2_defaults(out);
  return lw__sized_config_read("cfg_t", in, sizeof(cfg_v1_t), sizeof(cfg_v2_t), out, err);
}

Test(sized_config, older_program_struct_keeps_defaults_for_fields_it_lacks) {
  // An older program's struct sits in memory followed by bytes that are not its own.
  struct {
    cfg_v1_t v1;
    int64_t not_the_callers;
  } mem = {{sizeof(cfg_v1_t), 10, 20}, 12345};
  cfg_v2_t out;
  lw_error_t err;
  LW_ASSERT_OK(read_cfg(&mem.v1, &out, &err));
  cr_assert_eq(out.a, 10);
  cr_assert_eq(out.b, 20);
  cr_assert_eq(out.c, 7, "the field the old struct lacks takes its default, got %lld",
               (long long)out.c);
  cr_assert_eq(out.struct_size, sizeof(cfg_v2_t));
}

Test(sized_config, same_version_struct_is_read_whole) {
  cfg_v2_t in = {sizeof(cfg_v2_t), 10, 20, 30}, out;
  lw_error_t err;
  LW_ASSERT_OK(read_cfg(&in, &out, &err));
  cr_assert(out.a == 10 && out.b == 20 && out.c == 30);
}

Test(sized_config, newer_program_struct_with_unknown_fields_at_zero_is_accepted) {
  struct {
    cfg_v2_t v2;
    int64_t newer_field;
  } in = {{sizeof(in), 10, 20, 30}, 0};
  cfg_v2_t out;
  lw_error_t err;
  LW_ASSERT_OK(read_cfg(&in, &out, &err));
  cr_assert(out.a == 10 && out.b == 20 && out.c == 30);
  cr_assert_eq(out.struct_size, sizeof(cfg_v2_t));
}

Test(sized_config, newer_program_struct_with_an_unknown_field_set_is_refused_by_name) {
  struct {
    cfg_v2_t v2;
    int64_t newer_field;
  } in = {{sizeof(in), 10, 20, 30}, 5};
  cfg_v2_t out;
  lw_error_t err;
  cr_assert_eq(read_cfg(&in, &out, &err), LW_INVALID_ARGUMENT);
  cr_assert_not_null(
      strstr(err.message, "cfg_t: struct_size 32 is larger than this library's 24"), "%s",
      err.message);
  cr_assert_not_null(strstr(err.message, "byte 24 is not 0"), "%s", err.message);
}

Test(sized_config, zero_struct_size_is_refused_naming_the_struct_and_its_default) {
  cfg_v2_t in = {0, 10, 20, 30}, out;
  lw_error_t err;
  cr_assert_eq(read_cfg(&in, &out, &err), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(err.message, "cfg_t: struct_size 0 is not the size of any version"),
                     "%s", err.message);
  cr_assert_not_null(strstr(err.message, "cfg_default()"), "%s", err.message);
}

Test(sized_config, garbage_struct_size_is_refused_without_reading_past_the_struct) {
  // Only 32 bytes exist: a read of the claimed size would run off the object (ASan sees it).
  cfg_v2_t in = {0xdeadbeefu, 10, 20, 30}, out;
  lw_error_t err;
  cr_assert_eq(read_cfg(&in, &out, &err), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(err.message, "struct_size 3735928559 is not the size"), "%s",
                     err.message);
}

Test(sized_config, size_below_the_first_version_is_refused) {
  cfg_v2_t in = {8, 10, 20, 30}, out;
  lw_error_t err;
  cr_assert_eq(read_cfg(&in, &out, &err), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(err.message, "cfg_t: struct_size 8 is too small (at least 16"), "%s",
                     err.message);
}

Test(sized_config, fill_never_writes_past_an_older_programs_struct) {
  struct {
    cfg_v1_t v1;
    int64_t canary;
  } mem;
  memset(&mem, 0xab, sizeof(mem));
  int64_t canary = mem.canary;
  cfg_v2_t d;
  v2_defaults(&d);
  lw__sized_config_fill(&mem.v1, sizeof(cfg_v1_t), &d, sizeof(d));
  cr_assert_eq(mem.v1.struct_size, sizeof(cfg_v1_t));
  cr_assert(mem.v1.a == 1 && mem.v1.b == 2);
  cr_assert_eq(mem.canary, canary, "the bytes past the caller's struct were written");
}

Test(sized_config, fill_zeroes_the_fields_of_a_newer_program) {
  struct {
    cfg_v2_t v2;
    int64_t newer_field;
  } mem;
  memset(&mem, 0xab, sizeof(mem));
  cfg_v2_t d;
  v2_defaults(&d);
  lw__sized_config_fill(&mem, sizeof(mem), &d, sizeof(d));
  cr_assert_eq(mem.v2.struct_size, sizeof(mem));
  cr_assert_eq(mem.v2.c, 7);
  cr_assert_eq(mem.newer_field, 0);
}
