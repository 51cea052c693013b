// tests/mailbox/test_args.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// args encode/decode: arena pointers to offsets and back, and every out-of-arena range refused.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Args

Test(mailbox_args, encode_maps_arena_pointers_to_offsets_and_decode_maps_them_back,
     .timeout = 10) {
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_args_t args;
  lw_args_init(&args);
  cr_assert_eq(lw_args_add_tensor(&args, g_arena + 100, 200, LW_TAG_INPUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&args, g_arena, ARENA_BYTES, LW_TAG_INOUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&args, NULL, 0, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&args, g_arena + ARENA_BYTES - 1, 1, LW_TAG_OUTPUT), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&args, 11), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&args, UINT64_MAX), LW_OK);

  lw_mb_args_t wire;
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_OK, "%s", err.message);
  cr_assert_eq(wire.n_tensors, 4u);
  cr_assert_eq(wire.tensor[0].offset, 100u);
  cr_assert_eq(wire.tensor[0].bytes, 200u);
  cr_assert_eq(wire.tensor[1].offset, 0u);
  cr_assert_eq(wire.tensor[1].bytes, ARENA_BYTES);
  cr_assert_eq(wire.tensor[2].offset, 0u, "NULL with 0 bytes encodes as offset 0");
  cr_assert_eq(wire.tensor[2].bytes, 0u);
  cr_assert_eq(wire.tensor[3].offset, ARENA_BYTES - 1u);
  cr_assert_eq(wire.n_scalars, 2u);
  cr_assert_eq(wire.scalar[1], UINT64_MAX);

  lw_kernel_args_t k;
  cr_assert_eq(lw__mailbox_args_decode(&wire, &a, &k, &err), LW_OK, "%s", err.message);
  cr_assert_eq(k.n_tensors, 4u);
  cr_assert_eq(k.tensor[0].data, (void *)(g_arena + 100));
  cr_assert_eq(k.tensor[1].data, (void *)g_arena);
  cr_assert_null(k.tensor[2].data, "a zero-byte tensor arrives as NULL");
  cr_assert_eq(k.tensor[3].data, (void *)(g_arena + ARENA_BYTES - 1));
  cr_assert_eq(k.scalar[0], 11u);
  cr_assert_eq(k.launch.dims, 0u, "no geometry travels as dims 0");
}

Test(mailbox_args, scalar_types_cross_the_mailbox_with_the_launch_word, .timeout = 10) {
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_args_t args;
  lw_args_init(&args);
  cr_assert_eq(lw_args_add_f32(&args, 1.5f), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&args, 3), LW_OK);
  cr_assert_eq(lw_args_add_f64(&args, 2.0), LW_OK);
  cr_assert_eq(lw_args_add_i64(&args, -1), LW_OK);
  const uint64_t g[LW_MAX_LAUNCH_DIMS] = {16, 0, 0};
  cr_assert_eq(lw_args_set_launch(&args, 1, g, NULL), LW_OK);

  lw_mb_args_t wire;
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_OK, "%s", err.message);
  cr_assert_eq(wire.launch.scalar_types, args.launch.scalar_types);
  lw_kernel_args_t k;
  cr_assert_eq(lw__mailbox_args_decode(&wire, &a, &k, &err), LW_OK, "%s", err.message);
  cr_assert_eq(lw_scalar_type_get(&k.launch, 0), LW_SCALAR_F32);
  cr_assert_eq(lw_scalar_type_get(&k.launch, 1), LW_SCALAR_U64);
  cr_assert_eq(lw_scalar_type_get(&k.launch, 2), LW_SCALAR_F64);
  cr_assert_eq(lw_scalar_type_get(&k.launch, 3), LW_SCALAR_I64);
  cr_assert_eq(k.launch.dims, 1u, "the geometry beside them is intact");
  cr_assert_eq(k.launch.global[0], 16u);
}

Test(mailbox_args, launch_geometry_crosses_the_mailbox_and_forged_geometry_is_refused,
     .timeout = 10) {
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_args_t args;
  lw_args_init(&args);
  const uint64_t g[3] = {640, 48, 3};
  const uint64_t l[3] = {64, 16, 1};
  cr_assert_eq(lw_args_set_launch(&args, 3, g, l), LW_OK);
  lw_mb_args_t wire;
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_OK, "%s", err.message);
  lw_kernel_args_t k;
  cr_assert_eq(lw__mailbox_args_decode(&wire, &a, &k, &err), LW_OK, "%s", err.message);
  cr_assert_eq(k.launch.dims, 3u);
  for (int i = 0; i < 3; ++i) {
    cr_assert_eq(k.launch.global[i], g[i], "global[%d]", i);
    cr_assert_eq(k.launch.local[i], l[i], "local[%d]", i);
  }
  // A broken parent's geometry: the decoder says what is wrong.
  lw_mb_args_t forged = wire;
  forged.launch.dims = 9;
  cr_assert_eq(lw__mailbox_args_decode(&forged, &a, &k, &err), LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "launch dims 9"), "%s", err.message);
  forged = wire;
  forged.launch.local[1] = 5;
  cr_assert_eq(lw__mailbox_args_decode(&forged, &a, &k, &err), LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "local[1] = 5 does not divide"), "%s", err.message);
  forged = wire;
  forged.launch.global[0] = 0;
  cr_assert_eq(lw__mailbox_args_decode(&forged, &a, &k, &err), LW_INVALID_ARGUMENT);
  // And the encoder refuses a hand-filled one before it reaches the wire.
  args.launch.global[2] = 0;
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "global[2] is 0"), "%s", err.message);
}

Test(mailbox_args, encode_rejects_a_tensor_outside_the_arena, .timeout = 10) {
  static uint8_t elsewhere[64];
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_args_t wire;
  void *cases[][2] = {
      {elsewhere, (void *)(uintptr_t)16},                       // a different object
      {g_arena + ARENA_BYTES, (void *)(uintptr_t)0},            // one past the end
      {g_arena + ARENA_BYTES - 8, (void *)(uintptr_t)16},       // runs past the end
      {g_arena + 8, (void *)(uintptr_t)UINT64_MAX},             // bytes overflow
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    lw_args_t args;
    lw_args_init(&args);
    args.n_tensors = 2;
    args.tensor[0] = (lw_args_tensor_t){g_arena, 8, LW_TAG_INPUT, 0};
    args.tensor[1] = (lw_args_tensor_t){cases[i][0], (uint64_t)(uintptr_t)cases[i][1],
                                        LW_TAG_INPUT, 0};
    cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT,
                 "case %zu", i);
    cr_assert(has(&err, "tensor 1 at"), "%s", err.message);
    cr_assert(has(&err, "is outside the worker's shared memory; allocate it with "
                        "lw_worker_alloc"),
              "%s", err.message);
  }
  lw_args_t args;
  lw_args_init(&args);
  args.n_tensors = 1;
  args.tensor[0] = (lw_args_tensor_t){NULL, 4, LW_TAG_INPUT, 0};
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT,
               "NULL with bytes");
  args.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT);
  args.n_tensors = 0;
  args.n_scalars = LW_MAX_SCALARS + 1;
  cr_assert_eq(lw__mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT);
}

Test(mailbox_args, decode_rejects_counts_and_ranges_outside_the_arena, .timeout = 10) {
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_kernel_args_t k;
  lw_mb_args_t wire;
  memset(&wire, 0, sizeof(wire));
  wire.n_tensors = 1;
  struct {
    uint64_t offset, bytes;
    lw_status_t want;
  } cases[] = {
      {ARENA_BYTES - 8, UINT64_MAX, LW_INVALID_ARGUMENT},  // offset + bytes wraps
      {UINT64_MAX, 1, LW_INVALID_ARGUMENT},
      {UINT64_MAX, 0, LW_INVALID_ARGUMENT},
      {ARENA_BYTES + 1, 0, LW_INVALID_ARGUMENT},
      {ARENA_BYTES - 8, 9, LW_INVALID_ARGUMENT},
      {0, ARENA_BYTES + 1, LW_INVALID_ARGUMENT},
      {ARENA_BYTES - 8, 8, LW_OK},
      {ARENA_BYTES, 0, LW_OK},  // an empty tensor at the very end
      {0, ARENA_BYTES, LW_OK},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    wire.tensor[0].offset = cases[i].offset;
    wire.tensor[0].bytes = cases[i].bytes;
    cr_assert_eq(lw__mailbox_args_decode(&wire, &a, &k, &err), cases[i].want, "case %zu: %s", i,
                 err.message);
    if (cases[i].want != LW_OK) {
      cr_assert(has(&err, "tensor 0"), "%s", err.message);
      cr_assert(has(&err, "outside the 4096-byte arena"), "%s", err.message);
    }
  }
  wire.tensor[0].offset = 0;
  wire.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw__mailbox_args_decode(&wire, &a, &k, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "17 tensors"), "%s", err.message);
  wire.n_tensors = 0;
  wire.n_scalars = 0xffffffffu;
  cr_assert_eq(lw__mailbox_args_decode(&wire, &a, &k, &err), LW_INVALID_ARGUMENT);
}
