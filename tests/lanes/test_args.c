// tests/lanes/test_args.c — lw_args_*: limits and bad input, with the limit in the message.
#include <criterion/criterion.h>
#include <string.h>

#include "lanework/args.h"
#include "lanework/status.h"

static void assert_last_error_mentions(const char *needle) {
  const lw_error_t *e = lw_last_error();
  cr_assert_eq(e->code, LW_INVALID_ARGUMENT);
  cr_assert(strstr(e->message, needle) != NULL, "message \"%s\" lacks \"%s\"", e->message,
            needle);
}

Test(args, init_empties_a_dirty_struct) {
  lw_args_t a;
  memset(&a, 0xab, sizeof(a));
  lw_args_init(&a);
  cr_assert_eq(a.n_tensors, 0);
  cr_assert_eq(a.n_scalars, 0);
  cr_assert_eq(lw_args_validate(&a), LW_OK);
}

Test(args, tensors_and_scalars_are_appended_in_order) {
  lw_args_t a;
  lw_args_init(&a);
  char buf[3][8];
  cr_assert_eq(lw_args_add_tensor(&a, buf[0], 8, LW_TAG_INPUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&a, buf[1], 4, LW_TAG_OUTPUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&a, buf[2], 2, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&a, 10), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&a, 20), LW_OK);
  cr_assert_eq(a.n_tensors, 3);
  cr_assert_eq(a.tensor[1].data, buf[1]);
  cr_assert_eq(a.tensor[1].bytes, 4);
  cr_assert_eq(a.tensor[1].tag, LW_TAG_OUTPUT);
  cr_assert_eq(a.n_scalars, 2);
  cr_assert_eq(a.scalar[0], 10);
  cr_assert_eq(a.scalar[1], 20);
  cr_assert_eq(lw_args_validate(&a), LW_OK);
}

Test(args, seventeenth_tensor_fails_with_the_limit_in_the_message) {
  lw_args_t a;
  lw_args_init(&a);
  char buf[1];
  for (int i = 0; i < LW_MAX_TENSORS; ++i) {
    cr_assert_eq(lw_args_add_tensor(&a, buf, 1, LW_TAG_INOUT), LW_OK);
  }
  cr_assert_eq(lw_args_add_tensor(&a, buf, 1, LW_TAG_INOUT), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("too many tensors (max 16)");
  cr_assert_eq(a.n_tensors, LW_MAX_TENSORS, "a failed add changes nothing");
}

Test(args, seventeenth_scalar_fails_with_the_limit_in_the_message) {
  lw_args_t a;
  lw_args_init(&a);
  for (int i = 0; i < LW_MAX_SCALARS; ++i) cr_assert_eq(lw_args_add_scalar(&a, (uint64_t)i), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&a, 99), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("too many scalars (max 16)");
  cr_assert_eq(a.n_scalars, LW_MAX_SCALARS);
}

Test(args, null_data_is_rejected_only_with_nonzero_bytes) {
  lw_args_t a;
  lw_args_init(&a);
  cr_assert_eq(lw_args_add_tensor(&a, NULL, 0, LW_TAG_INPUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&a, NULL, 64, LW_TAG_INPUT), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("NULL data");
  cr_assert_eq(a.n_tensors, 1);
}

Test(args, unknown_tag_is_rejected) {
  lw_args_t a;
  lw_args_init(&a);
  char buf[1];
  cr_assert_eq(lw_args_add_tensor(&a, buf, 1, (lw_tag_t)5), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("unknown tag 5");
  cr_assert_eq(lw_args_add_tensor(&a, buf, 1, (lw_tag_t)-1), LW_INVALID_ARGUMENT);
  cr_assert_eq(a.n_tensors, 0);
}

Test(args, null_args_is_invalid_argument) {
  cr_assert_eq(lw_args_add_tensor(NULL, NULL, 0, LW_TAG_INPUT), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_args_add_scalar(NULL, 1), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_args_validate(NULL), LW_INVALID_ARGUMENT);
  lw_args_init(NULL);  // ignored
}

Test(args, validate_catches_hand_filled_mistakes) {
  lw_args_t a;
  lw_args_init(&a);
  a.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw_args_validate(&a), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("max 16");

  lw_args_init(&a);
  a.n_scalars = 100;
  cr_assert_eq(lw_args_validate(&a), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("max 16");

  lw_args_init(&a);
  a.n_tensors = 2;
  a.tensor[0] = (lw_args_tensor_t){&a, 1, LW_TAG_INPUT, 0};
  a.tensor[1] = (lw_args_tensor_t){NULL, 8, LW_TAG_INPUT, 0};
  cr_assert_eq(lw_args_validate(&a), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("tensor 1");

  a.tensor[1] = (lw_args_tensor_t){&a, 8, (lw_tag_t)42, 0};
  cr_assert_eq(lw_args_validate(&a), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("unknown tag 42");

  a.tensor[1].tag = LW_TAG_OUTPUT_EXISTING;
  cr_assert_eq(lw_args_validate(&a), LW_OK);
}

Test(args, set_launch_stores_the_geometry_and_zeroes_unused_dimensions) {
  lw_args_t a;
  lw_args_init(&a);
  cr_assert_eq(a.launch.dims, 0u, "init gives no geometry");
  const uint64_t g[3] = {1024, 8, 77};
  const uint64_t l[3] = {64, 2, 99};
  cr_assert_eq(lw_args_set_launch(&a, 2, g, l), LW_OK);
  cr_assert_eq(a.launch.dims, 2u);
  cr_assert_eq(a.launch.global[0], 1024u);
  cr_assert_eq(a.launch.global[1], 8u);
  cr_assert_eq(a.launch.global[2], 0u, "past dims: stored as 0");
  cr_assert_eq(a.launch.local[0], 64u);
  cr_assert_eq(a.launch.local[1], 2u);
  cr_assert_eq(a.launch.local[2], 0u);
  cr_assert_eq(lw_args_validate(&a), LW_OK);
  cr_assert_eq(lw_args_set_launch(&a, 1, g, NULL), LW_OK, "local NULL: the device chooses");
  cr_assert_eq(a.launch.local[0], 0u);
  cr_assert_eq(a.launch.global[1], 0u);
}

Test(args, set_launch_rejects_bad_geometry_naming_the_dimension) {
  lw_args_t a;
  lw_args_init(&a);
  const uint64_t g[3] = {100, 10, 4};
  const uint64_t zero_g[3] = {100, 0, 4};
  const uint64_t l_bad[3] = {7, 1, 1};
  const uint64_t l_part[3] = {10, 0, 0};
  cr_assert_eq(lw_args_set_launch(&a, 0, g, NULL), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("launch dims 0");
  cr_assert_eq(lw_args_set_launch(&a, 4, g, NULL), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("outside 1..3");
  cr_assert_eq(lw_args_set_launch(&a, 2, zero_g, NULL), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("global[1] is 0");
  cr_assert_eq(lw_args_set_launch(&a, 1, g, l_bad), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("local[0] = 7 does not divide global[0] = 100");
  cr_assert_eq(lw_args_set_launch(&a, 2, g, l_part), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("set in 1 of 2 dimensions");
  cr_assert_eq(lw_args_set_launch(&a, 1, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_args_set_launch(NULL, 1, g, NULL), LW_INVALID_ARGUMENT);
  const uint64_t huge[3] = {UINT64_MAX, 2, 1};
  cr_assert_eq(lw_args_set_launch(&a, 2, huge, NULL), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("2^64");
  cr_assert_eq(a.launch.dims, 0u, "a refused launch leaves the args as they were");

  // A hand-filled geometry goes through the same check.
  a.launch.dims = 1;
  a.launch.global[0] = 8;
  a.launch.global[2] = 5;
  cr_assert_eq(lw_args_validate(&a), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("dimension 2 is unused");
}

Test(args, typed_scalars_record_their_type_per_slot_and_their_bits) {
  lw_args_t a;
  lw_args_init(&a);
  cr_assert_eq(lw_args_add_scalar(&a, 5), LW_OK);
  cr_assert_eq(lw_args_add_f32(&a, 1.5f), LW_OK);
  cr_assert_eq(lw_args_add_f64(&a, -0.25), LW_OK);
  cr_assert_eq(lw_args_add_i64(&a, -3), LW_OK);
  cr_assert_eq(a.n_scalars, 4);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 0), LW_SCALAR_U64);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 1), LW_SCALAR_F32);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 2), LW_SCALAR_F64);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 3), LW_SCALAR_I64);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 4), LW_SCALAR_U64, "an unused slot: the default");
  cr_assert_eq(a.launch.scalar_types, (3u << 2) | (2u << 4) | (1u << 6));
  float f = 1.5f;
  uint32_t f_bits;
  memcpy(&f_bits, &f, sizeof(f));
  cr_assert_eq(a.scalar[1], (uint64_t)f_bits, "the float's bits in the low half, high half 0");
  double d = -0.25;
  uint64_t d_bits;
  memcpy(&d_bits, &d, sizeof(d));
  cr_assert_eq(a.scalar[2], d_bits);
  cr_assert_eq(a.scalar[3], (uint64_t)INT64_C(-3));
  cr_assert_eq(lw_args_validate(&a), LW_OK);
}

Test(args, a_slot_reused_after_a_hand_reset_gets_its_new_type) {
  lw_args_t a;
  lw_args_init(&a);
  cr_assert_eq(lw_args_add_f32(&a, 1.0f), LW_OK);
  a.n_scalars = 0;  // reset by hand: the slot's old type bits are still in the word
  cr_assert_eq(lw_args_add_scalar(&a, 9), LW_OK);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 0), LW_SCALAR_U64);
}

Test(args, set_launch_keeps_the_scalar_types) {
  lw_args_t a;
  lw_args_init(&a);
  cr_assert_eq(lw_args_add_f64(&a, 2.0), LW_OK);
  const uint64_t g[LW_MAX_LAUNCH_DIMS] = {8, 4, 0};
  cr_assert_eq(lw_args_set_launch(&a, 2, g, NULL), LW_OK);
  cr_assert_eq(lw_scalar_type_get(&a.launch, 0), LW_SCALAR_F64);
  cr_assert_eq(a.launch.dims, 2);
  cr_assert_eq(a.launch.global[1], 4);
}

Test(args, seventeenth_typed_scalar_fails_naming_the_limit_and_the_type) {
  lw_args_t a;
  lw_args_init(&a);
  for (int i = 0; i < LW_MAX_SCALARS; ++i) cr_assert_eq(lw_args_add_f64(&a, i), LW_OK);
  cr_assert_eq(lw_args_add_f32(&a, 1.0f), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("too many scalars (max 16); the f32 was not added");
  cr_assert_eq(lw_args_add_i64(&a, 1), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("the i64 was not added");
  cr_assert_eq(a.n_scalars, LW_MAX_SCALARS, "a failed add changes nothing");
  cr_assert_eq(lw_scalar_type_get(&a.launch, LW_MAX_SCALARS - 1), LW_SCALAR_F64);
  cr_assert_eq(lw_args_add_f64(NULL, 1.0), LW_INVALID_ARGUMENT);
  assert_last_error_mentions("args is NULL");
}
