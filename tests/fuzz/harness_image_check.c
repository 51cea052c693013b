// tests/fuzz/harness_image_check.c — the checks of kernel image bytes (callables/image_check.h:
// ELF, SPIR-V, OpenCL C, CUDA C, PTX, CUBIN, fatbin) and the AUTO detection predicates on
// arbitrary bytes.
//
// The input is the image, whole (no parameter block). It is copied into a buffer of exactly its
// size, so ASan reports a check that reads one byte past it. A check that fails must fail with
// INVALID_ARGUMENT and a message that says "image is not a valid kernel"; an image the ELF
// check accepts is read again here, by a second, plainer reading of the same rules, and every
// range it promises (the program header table, every segment's and every section's file bytes)
// must lie inside the image: that is what dlopen will map. An accepted CUBIN's sections and an
// accepted fat binary's entries are read again the same way (what the CUDA driver will read).
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "callables/image_check.h"
#include "fuzz/fuzz_harness.h"

static void check_refusal(lw_status_t st, const lw_error_t *err) {
  lw__fuzz_check_error(st, err);
  LW_FUZZ_CHECK(st == LW_INVALID_ARGUMENT);
  LW_FUZZ_CHECK(strstr(err->message, "image is not a valid kernel: ") != NULL);
}

// [off, off + len) inside [0, size), without overflow; reads its first and last byte.
static void check_inside(const uint8_t *p, size_t size, uint64_t off, uint64_t len) {
  LW_FUZZ_CHECK(off <= size && len <= size - off);
  if (len == 0) return;
  volatile uint8_t first = p[off], last = p[off + len - 1];
  (void)first;
  (void)last;
}

static void check_accepted_elf(const uint8_t *p, size_t size) {
  LW_FUZZ_CHECK(size >= sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  LW_FUZZ_CHECK(memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
  LW_FUZZ_CHECK(eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_type == ET_DYN);
  LW_FUZZ_CHECK(eh.e_phentsize == sizeof(Elf64_Phdr));
  LW_FUZZ_CHECK(eh.e_phnum > 0 && eh.e_phnum <= LW_ELF_MAX_PROGRAM_HEADERS);
  check_inside(p, size, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr));
  bool any_load = false;
  for (uint32_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_NULL) continue;
    check_inside(p, size, ph.p_offset, ph.p_filesz);
    if (ph.p_type == PT_LOAD) {
      any_load = true;
      LW_FUZZ_CHECK(ph.p_filesz <= ph.p_memsz);
    }
  }
  LW_FUZZ_CHECK(any_load);
  if (eh.e_shoff == 0) return;
  LW_FUZZ_CHECK(eh.e_shentsize == sizeof(Elf64_Shdr));
  check_inside(p, size, eh.e_shoff, sizeof(Elf64_Shdr));
  Elf64_Shdr s0;
  memcpy(&s0, p + eh.e_shoff, sizeof s0);
  uint64_t shnum = eh.e_shnum != 0 ? eh.e_shnum : s0.sh_size;
  LW_FUZZ_CHECK(shnum <= size / sizeof(Elf64_Shdr));
  check_inside(p, size, eh.e_shoff, shnum * sizeof(Elf64_Shdr));
  for (uint64_t i = 1; i < shnum; ++i) {
    Elf64_Shdr sh;
    memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL) {
      check_inside(p, size, sh.sh_offset, sh.sh_size);
    }
  }
}

static void check_accepted_spirv(const uint8_t *p, size_t size) {
  LW_FUZZ_CHECK(size >= 20 && size % 4 == 0);
  size_t words = size / 4, i = 5;
  while (i < words) {
    uint32_t w;
    memcpy(&w, p + 4 * i, sizeof w);
    LW_FUZZ_CHECK((w >> 16) != 0);
    i += w >> 16;
  }
  LW_FUZZ_CHECK(i == words);
}

// The ELF rules a CUBIN shares with a host image: its section table and sections inside.
static void check_accepted_cubin(const uint8_t *p, size_t size) {
  LW_FUZZ_CHECK(lw__image_is_cubin(p, size));
  Elf64_Ehdr eh;
  LW_FUZZ_CHECK(size >= sizeof eh);
  memcpy(&eh, p, sizeof eh);
  LW_FUZZ_CHECK(eh.e_machine == EM_CUDA && eh.e_ident[EI_CLASS] == ELFCLASS64);
  LW_FUZZ_CHECK(eh.e_type == ET_EXEC || eh.e_type == ET_REL);
  if (eh.e_phnum > 0) {
    LW_FUZZ_CHECK(eh.e_phnum <= LW_ELF_MAX_PROGRAM_HEADERS);
    check_inside(p, size, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr));
    for (uint32_t i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
      if (ph.p_type != PT_NULL) check_inside(p, size, ph.p_offset, ph.p_filesz);
    }
  }
  LW_FUZZ_CHECK(eh.e_shoff != 0 && eh.e_shentsize == sizeof(Elf64_Shdr));
  check_inside(p, size, eh.e_shoff, sizeof(Elf64_Shdr));
  Elf64_Shdr s0;
  memcpy(&s0, p + eh.e_shoff, sizeof s0);
  uint64_t shnum = eh.e_shnum != 0 ? eh.e_shnum : s0.sh_size;
  LW_FUZZ_CHECK(shnum <= size / sizeof(Elf64_Shdr));
  check_inside(p, size, eh.e_shoff, shnum * sizeof(Elf64_Shdr));
  for (uint64_t i = 1; i < shnum; ++i) {
    Elf64_Shdr sh;
    memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL) {
      check_inside(p, size, sh.sh_offset, sh.sh_size);
    }
  }
}

// The header's sizes inside the image, and every entry's header and payload inside the fat
// binary, walked as the driver walks them.
static void check_accepted_fatbin(const uint8_t *p, size_t size) {
  LW_FUZZ_CHECK(lw__image_is_fatbin(p, size) && size >= 16);
  uint16_t header;
  uint64_t fat_size;
  memcpy(&header, p + 6, sizeof header);
  memcpy(&fat_size, p + 8, sizeof fat_size);
  LW_FUZZ_CHECK(header >= 16);
  check_inside(p, size, header, fat_size);
  uint64_t off = header, end = header + fat_size;
  unsigned entries = 0;
  while (end - off >= 16) {
    uint32_t entry_header;
    uint64_t payload;
    memcpy(&entry_header, p + off + 4, sizeof entry_header);
    memcpy(&payload, p + off + 8, sizeof payload);
    if (entry_header == 0) break;  // zero padding
    LW_FUZZ_CHECK(entry_header >= 16 && entry_header <= end - off);
    LW_FUZZ_CHECK(payload <= end - off - entry_header);
    check_inside(p, size, off, entry_header + payload);
    off += entry_header + payload;
    ++entries;
  }
  LW_FUZZ_CHECK(entries > 0);
}

// Text: no NUL byte but one at the very end.
static void check_accepted_text(const uint8_t *p, size_t size) {
  const uint8_t *nul = size ? memchr(p, 0, size) : NULL;
  LW_FUZZ_CHECK(size > 0 && (nul == NULL || nul == p + size - 1));
}

int lw_fuzz_image_check(const uint8_t *data, size_t size) {
  uint8_t *p = malloc(size ? size : 1);
  if (p == NULL) abort();
  if (size > 0) memcpy(p, data, size);
  lw_error_t err;

  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__image_check_elf(p, size, "fuzz", &err);
  if (st == LW_OK) {
    check_accepted_elf(p, size);
  } else {
    check_refusal(st, &err);
  }

  lw__fuzz_poison_error(&err);
  st = lw__image_check_spirv(p, size, "fuzz", &err);
  if (st == LW_OK) {
    check_accepted_spirv(p, size);
  } else {
    check_refusal(st, &err);
  }

  for (int detected = 0; detected < 2; ++detected) {
    lw__fuzz_poison_error(&err);
    st = lw__image_check_opencl_c(p, size, "fuzz", detected, &err);
    if (st == LW_OK) {
      check_accepted_text(p, size);
    } else {
      check_refusal(st, &err);
    }
    lw__fuzz_poison_error(&err);
    st = lw__image_check_cuda_c(p, size, "fuzz", detected, &err);
    if (st == LW_OK) {
      check_accepted_text(p, size);
    } else {
      check_refusal(st, &err);
    }
  }

  lw__fuzz_poison_error(&err);
  st = lw__image_check_ptx(p, size, "fuzz", &err);
  if (st == LW_OK) {
    check_accepted_text(p, size);
    LW_FUZZ_CHECK(lw__image_is_ptx(p, size));
  } else {
    check_refusal(st, &err);
  }

  lw__fuzz_poison_error(&err);
  st = lw__image_check_cubin(p, size, "fuzz", &err);
  if (st == LW_OK) {
    check_accepted_cubin(p, size);
  } else {
    check_refusal(st, &err);
  }

  lw__fuzz_poison_error(&err);
  st = lw__image_check_fatbin(p, size, "fuzz", &err);
  if (st == LW_OK) {
    check_accepted_fatbin(p, size);
  } else {
    check_refusal(st, &err);
  }

  // AUTO's questions read the bytes too (their answers are checked by the tests): each must
  // stay inside them. CUBIN and host ELF never overlap.
  bool cubin = lw__image_is_cubin(p, size);
  (void)lw__image_is_fatbin(p, size);
  (void)lw__image_is_ptx(p, size);
  (void)lw__image_is_cuda_c(p, size);
  if (cubin) LW_FUZZ_CHECK(lw__image_check_elf(p, size, "fuzz", &err) != LW_OK);
  free(p);
  return 0;
}
