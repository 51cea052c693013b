// tests/fuzz/harness_common.c — helpers shared by the mailbox fuzz harnesses.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_harness.h"

const char *lw__fuzz_input_name = NULL;

_Noreturn void lw__fuzz_fail(const char *what, const char *file, int line) {
  fprintf(stderr, "fuzz invariant violated: %s (%s:%d)%s%s\n", what, file, line,
          lw__fuzz_input_name != NULL ? " on input " : "",
          lw__fuzz_input_name != NULL ? lw__fuzz_input_name : "");
  fflush(stderr);
  // A trap, not exit: libFuzzer saves the input as a crash, Criterion reports a crashed test.
  __builtin_trap();
}

size_t lw__fuzz_read_params(void *params, size_t params_size, const uint8_t *data, size_t size) {
  size_t n = size < params_size ? size : params_size;
  memset(params, 0, params_size);
  if (n > 0) memcpy(params, data, n);
  return n;
}

void lw__fuzz_poison_error(lw_error_t *err) {
  memset(err, 0x5a, sizeof(*err));
}

bool lw__fuzz_terminated(const char *s, size_t n) { return memchr(s, '\0', n) != NULL; }

void lw__fuzz_check_error(lw_status_t st, const lw_error_t *err) {
  LW_FUZZ_CHECK(st != LW_OK);
  LW_FUZZ_CHECK((uint32_t)st < (uint32_t)LW_STATUS_COUNT_);
  LW_FUZZ_CHECK(err->code == st);
  LW_FUZZ_CHECK(lw__fuzz_terminated(err->message, sizeof(err->message)));
  LW_FUZZ_CHECK(err->message[0] != '\0');
}

lw_mailbox_t *lw__fuzz_mailbox(lw_mb_child_kind_t kind, const uint32_t header_xor[8]) {
  static _Alignas(64) lw_mailbox_t mb;
  lw__mailbox_initialize(&mb, kind, 0, LW_FUZZ_ARENA_BYTES);
  uint32_t words[8];
  _Static_assert(offsetof(lw_mb_header_t, arena_bytes) == sizeof(words), "header prefix");
  memcpy(words, &mb.header, sizeof(words));
  for (int i = 0; i < 8; ++i) words[i] ^= header_xor[i];
  memcpy(&mb.header, words, sizeof(words));
  return &mb;
}

static uint8_t *fuzz_arena_base(void) {
  // Allocated once and kept: the static pointer keeps it reachable for LeakSanitizer.
  static uint8_t *base;
  if (base == NULL) {
    base = malloc(LW_FUZZ_ARENA_BYTES);
    if (base == NULL) abort();
    memset(base, 0xa5, LW_FUZZ_ARENA_BYTES);
  }
  return base;
}

const lw_mb_arena_t *lw__fuzz_arena_view(uint8_t sel) {
  static lw_mb_arena_t view;
  switch (sel % LW_FUZZ_ARENA_VIEWS) {
    case LW_FUZZ_ARENA_FULL:
      view = (lw_mb_arena_t){fuzz_arena_base(), LW_FUZZ_ARENA_BYTES};
      return &view;
    case LW_FUZZ_ARENA_4K:
      view = (lw_mb_arena_t){fuzz_arena_base(), 4096};
      return &view;
    case LW_FUZZ_ARENA_EMPTY:
      view = (lw_mb_arena_t){fuzz_arena_base(), 0};
      return &view;
    case LW_FUZZ_ARENA_NULL_BASE:
      view = (lw_mb_arena_t){NULL, LW_FUZZ_ARENA_BYTES};
      return &view;
    default:
      return NULL;
  }
}

void lw__fuzz_check_range(const lw_mb_arena_t *arena, const void *data, uint64_t bytes) {
  if (bytes == 0) {
    LW_FUZZ_CHECK(data == NULL);
    return;
  }
  LW_FUZZ_CHECK(data != NULL);
  LW_FUZZ_CHECK(arena != NULL && arena->base != NULL);
  // Integers, not pointer comparisons: data need not point into the arena object.
  uintptr_t p = (uintptr_t)data, base = (uintptr_t)arena->base;
  LW_FUZZ_CHECK(p >= base);
  uint64_t offset = (uint64_t)(p - base);
  LW_FUZZ_CHECK(offset < arena->bytes);
  LW_FUZZ_CHECK(bytes <= arena->bytes - offset);
  const volatile uint8_t *b = data;
  (void)b[0];
  (void)b[bytes - 1];
}

lw_status_t lw__fuzz_status(uint8_t b) {
  uint32_t v = b % ((uint32_t)LW_STATUS_COUNT_ + 2);
  if (v == (uint32_t)LW_STATUS_COUNT_ + 1) return (lw_status_t)-1;
  return (lw_status_t)v;
}
