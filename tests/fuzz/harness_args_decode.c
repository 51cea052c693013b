// tests/fuzz/harness_args_decode.c — lw__mailbox_args_decode on arbitrary wire args.
//
// The arena is a fresh malloc of a fuzzer-chosen size (0 to 64 KiB), so ASan reports any
// decoded range that reaches past it. A decode that succeeds must re-encode to the same wire
// form (zero-byte tensors travel as offset 0).
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_harness.h"

static void check_decoded(const lw_mb_args_t *wire, const lw_mb_arena_t *arena,
                          const lw_kernel_args_t *out) {
  LW_FUZZ_CHECK(out->n_tensors == wire->n_tensors && out->n_tensors <= LW_MAX_TENSORS);
  LW_FUZZ_CHECK(out->n_scalars == wire->n_scalars && out->n_scalars <= LW_MAX_SCALARS);
  for (uint32_t i = 0; i < LW_MAX_TENSORS; ++i) {
    if (i >= out->n_tensors) {
      LW_FUZZ_CHECK(out->tensor[i].data == NULL && out->tensor[i].bytes == 0);
      continue;
    }
    LW_FUZZ_CHECK(out->tensor[i].bytes == wire->tensor[i].bytes);
    lw__fuzz_check_range(arena, out->tensor[i].data, out->tensor[i].bytes);
    if (out->tensor[i].bytes > 0) {
      LW_FUZZ_CHECK((uintptr_t)out->tensor[i].data - (uintptr_t)arena->base ==
                    wire->tensor[i].offset);
    }
  }
  for (uint32_t i = 0; i < LW_MAX_SCALARS; ++i) {
    LW_FUZZ_CHECK(out->scalar[i] == (i < out->n_scalars ? wire->scalar[i] : 0));
  }

  // Round trip through the parent's encoder.
  lw_args_t args;
  memset(&args, 0, sizeof(args));
  args.n_tensors = out->n_tensors;
  args.n_scalars = out->n_scalars;
  for (uint32_t i = 0; i < out->n_tensors; ++i) {
    args.tensor[i].data = out->tensor[i].data;
    args.tensor[i].bytes = out->tensor[i].bytes;
  }
  memcpy(args.scalar, out->scalar, sizeof(args.scalar));
  lw_mb_args_t again;
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_args_encode(&args, arena, &again, &err);
  LW_FUZZ_CHECK(st == LW_OK);
  LW_FUZZ_CHECK(again.n_tensors == wire->n_tensors && again.n_scalars == wire->n_scalars);
  for (uint32_t i = 0; i < wire->n_tensors; ++i) {
    LW_FUZZ_CHECK(again.tensor[i].bytes == wire->tensor[i].bytes);
    LW_FUZZ_CHECK(again.tensor[i].offset ==
                  (wire->tensor[i].bytes == 0 ? 0 : wire->tensor[i].offset));
  }
  LW_FUZZ_CHECK(memcmp(again.scalar, out->scalar, sizeof(again.scalar)) == 0);
}

int lw_fuzz_args_decode(const uint8_t *data, size_t size) {
  lw_fuzz_args_params_t p;
  size_t used = lw__fuzz_read_params(&p, sizeof(p), data, size);
  data += used;
  size -= used;

  lw_mb_args_t wire;
  memset(&wire, 0, sizeof(wire));
  if (size > 0) memcpy(&wire, data, size < sizeof(wire) ? size : sizeof(wire));

  size_t arena_bytes = p.arena_bytes % (LW_FUZZ_ARENA_BYTES + 1);
  // malloc(0) may return NULL or a unique pointer; both are valid empty arenas.
  uint8_t *base = malloc(arena_bytes);
  if (base == NULL && arena_bytes > 0) abort();
  if (arena_bytes > 0) memset(base, 0xa5, arena_bytes);
  lw_mb_arena_t view = {base, arena_bytes};
  const lw_mb_arena_t *arena = &view;
  switch (p.arena_mode % 3) {
    case 1:
      view.base = NULL;  // a view with no memory: only empty tensors decode
      break;
    case 2:
      arena = NULL;
      break;
    default:
      break;
  }

  lw_kernel_args_t out;
  memset(&out, 0x3c, sizeof(out));
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_args_decode(&wire, arena, &out, &err);
  if (st == LW_OK) {
    check_decoded(&wire, arena, &out);
  } else {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(st == LW_INVALID_ARGUMENT);
  }
  free(base);
  return 0;
}
