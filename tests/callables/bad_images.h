// tests/callables/bad_images.h — the damaged kernel images every layer must refuse without
// crashing, made from a real test kernel: cut at 0, 16, 64, 600, 4000 bytes and one byte short
// of the whole, every cut of it packed as a zstd frame (a .lwk of a truncated .so), garbage,
// the kernel with another machine's e_machine, the kernel with e_machine EM_CUDA (detected as a
// CUBIN, which neither sim nor a host ELF check takes), and a kernel followed by zeros to one
// byte over
// LW_MAX_IMAGE_BYTES. Used by tests/callables/test_image_validate.c (the checks themselves and
// `lanework pack`), tests/child/test_bad_image.c (L2 register) and
// tests/parent/test_bad_image_l3.c (L3 register).
//
// Each image carries a piece of the message its refusal must hold, the same at every layer.
#ifndef LANEWORK_TESTS_CALLABLES_BAD_IMAGES_H_
#define LANEWORK_TESTS_CALLABLES_BAD_IMAGES_H_

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zstd.h>

#include "lanework/callable.h"
#include "test_util.h"

#define LW_TEST_BAD_IMAGES_MAX 16

typedef struct lw_test_bad_image {
  char what[64];       // "vector_add.so cut at 600 bytes"
  uint8_t *bytes;      // malloc'ed, or mapped when mapped_bytes != 0
  size_t n;
  size_t mapped_bytes;
  bool zstd;           // a zstd frame: check it through decoding, not as ELF bytes
  char reason[128];    // what the refusal's message must hold
} lw_test_bad_image_t;

typedef struct lw_test_bad_images {
  uint8_t *elf;        // the whole kernel, malloc'ed
  size_t elf_bytes;
  size_t count;
  lw_test_bad_image_t image[LW_TEST_BAD_IMAGES_MAX];
} lw_test_bad_images_t;

static inline lw_test_bad_image_t *lw_test_bad_add(lw_test_bad_images_t *set, const char *what,
                                                  const char *reason) {
  cr_assert_lt(set->count, LW_TEST_BAD_IMAGES_MAX);
  lw_test_bad_image_t *b = &set->image[set->count++];
  memset(b, 0, sizeof *b);
  snprintf(b->what, sizeof b->what, "%s", what);
  snprintf(b->reason, sizeof b->reason, "%s", reason);
  return b;
}

static inline void lw_test_bad_cut(lw_test_bad_images_t *set, size_t cut, const char *reason) {
  char what[64];
  snprintf(what, sizeof what, "the kernel cut at %zu bytes", cut);
  lw_test_bad_image_t *b = lw_test_bad_add(set, what, reason);
  b->bytes = malloc(cut ? cut : 1);
  cr_assert_not_null(b->bytes);
  memcpy(b->bytes, set->elf, cut);
  b->n = cut;
}

// Fills set from the test kernel `kernel` (its .so in the test kernel folder). Its PT_LOAD
// segments must start at 0 and 0x1000 or later (true of every kernel a normal link writes with
// 4 KiB pages), so cuts at 600 and 4000 bytes fall inside a loaded segment.
static inline void lw_test_bad_images_make(lw_test_bad_images_t *set, const char *kernel) {
  memset(set, 0, sizeof *set);
  lw_callable_t c = lw_test_kernel(kernel);
  set->elf_bytes = c.image_bytes;
  set->elf = malloc(c.image_bytes);
  cr_assert_not_null(set->elf);
  memcpy(set->elf, c.image, c.image_bytes);
  lw_callable_free_loaded(&c);
  cr_assert_gt(set->elf_bytes, 8192u, "the kernel is too small for the cuts");
  char reason[128];

  lw_test_bad_cut(set, 0, "image is empty");
  lw_test_bad_cut(set, 16, "truncated ELF header (16 bytes, need 64)");
  lw_test_bad_cut(set, 64, "ELF program header table [0x40, ");
  lw_test_bad_cut(set, 600, "ends past the image (600 bytes): truncated?");
  lw_test_bad_cut(set, 4000, "ends past the image (4000 bytes): truncated?");
  snprintf(reason, sizeof reason, "ends past the image (%zu bytes): truncated?",
           set->elf_bytes - 1);
  lw_test_bad_cut(set, set->elf_bytes - 1, reason);

  // A packed image of a truncated kernel: the frame is fine, what it holds is not.
  lw_test_bad_image_t *b =
      lw_test_bad_add(set, "a zstd frame of the kernel cut at 4000 bytes",
                      "ends past the image (4000 bytes): truncated?");
  size_t cap = ZSTD_compressBound(4000);
  b->bytes = malloc(cap);
  cr_assert_not_null(b->bytes);
  b->n = ZSTD_compress(b->bytes, cap, set->elf, 4000, 3);
  cr_assert_not(ZSTD_isError(b->n));
  b->zstd = true;

  // Garbage: no magic of any format, and a NUL byte, so it is not OpenCL C text either.
  b = lw_test_bad_add(set, "4 KiB of garbage", "image is not a valid kernel");
  b->n = 4096;
  b->bytes = malloc(b->n);
  cr_assert_not_null(b->bytes);
  uint32_t x = 0x2545f491u;
  for (size_t i = 0; i < b->n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b->bytes[i] = (uint8_t)(x >> 24);
  }
  b->bytes[0] = 0x13;  // neither ELF's 0x7f nor SPIR-V's 0x03 nor zstd's 0x28
  b->bytes[100] = 0;

  // Another machine's kernel: everything right but e_machine.
  b = lw_test_bad_add(set, "the kernel with e_machine EM_RISCV", "built for another machine");
  b->n = set->elf_bytes;
  b->bytes = malloc(b->n);
  cr_assert_not_null(b->bytes);
  memcpy(b->bytes, set->elf, b->n);
  Elf64_Half machine = EM_RISCV;
  memcpy(b->bytes + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof machine);

  // e_machine EM_CUDA: a CUBIN by its header. The host ELF check says it is a CUBIN, AUTO
  // detects it as one (an L2 sim chip refuses the format, an L3 register the CUBIN check's
  // e_type ET_DYN): every refusal names the CUBIN.
  b = lw_test_bad_add(set, "the kernel with e_machine EM_CUDA", "CUBIN");
  b->n = set->elf_bytes;
  b->bytes = malloc(b->n);
  cr_assert_not_null(b->bytes);
  memcpy(b->bytes, set->elf, b->n);
  machine = 190;  // EM_CUDA
  memcpy(b->bytes + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof machine);

  // Too big: the kernel, then zeros, one byte over the limit. Mapped with MAP_NORESERVE and
  // never written past the kernel, so it costs the pages of the kernel only.
  b = lw_test_bad_add(set, "the kernel padded to LW_MAX_IMAGE_BYTES + 1",
                      "exceeds LW_MAX_IMAGE_BYTES");
  b->n = (size_t)LW_MAX_IMAGE_BYTES + 1;
  b->mapped_bytes = b->n + 4096;
  void *m = mmap(NULL, b->mapped_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  cr_assert_neq(m, MAP_FAILED);
  b->bytes = m;
  memcpy(b->bytes, set->elf, set->elf_bytes);
}

static inline void lw_test_bad_images_free(lw_test_bad_images_t *set) {
  for (size_t i = 0; i < set->count; ++i) {
    lw_test_bad_image_t *b = &set->image[i];
    if (b->mapped_bytes) {
      munmap(b->bytes, b->mapped_bytes);
    } else {
      free(b->bytes);
    }
  }
  free(set->elf);
  memset(set, 0, sizeof *set);
}

// A descriptor for image b named name (format AUTO, no signature).
static inline lw_callable_t lw_test_bad_callable(const lw_test_bad_image_t *b, const char *name) {
  return (lw_callable_t){.name = name, .image = b->bytes, .image_bytes = b->n};
}

#endif  // LANEWORK_TESTS_CALLABLES_BAD_IMAGES_H_
