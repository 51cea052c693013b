// tests/callables/test_image_cuda.c — the CUDA image formats without a CUDA toolkit: AUTO tells
// a CUBIN (an ELF with e_machine EM_CUDA) from a host ELF, a fat binary by its magic, PTX by
// its first directive, CUDA C from OpenCL C by CUDA-only markers; the check of each format
// accepts the well-formed images of tests/callables/cuda_images.h and refuses a malformed one
// naming the callable and what is wrong.
#include <zstd.h>

#include "callables/cuda_images.h"
#include "callables/image.h"
#include "callables/image_check.h"
#include "callables_test_util.h"

static lw_error_t err;

static void setup(void) { memset(&err, 0, sizeof err); }

TestSuite(image_cuda, .init = setup, .timeout = 60);

static void assert_refused(lw_status_t st, const char *what, const char *needle) {
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s: status %s, message '%s'", what, lw_status_name(st),
               err.message);
  cr_assert_not_null(strstr(err.message, needle), "%s: message '%s' lacks '%s'", what,
                     err.message, needle);
  cr_assert(strncmp(err.message, "callable k: image is not a valid kernel: ", 41) == 0,
            "%s: the message does not name the callable first: '%s'", what, err.message);
}

static lw_image_format_t detect(const void *p, size_t n) {
  return lw__image_detect_format(p, n);
}

// The format AUTO resolves to through the whole register path (zstd, detect, check).
static lw_image_format_t decoded_as(const void *p, size_t n, lw_image_format_t given) {
  lw_image_bytes_t out;
  lw_image_format_t f = LW_IMAGE_AUTO;
  cr_assert_eq(lw__image_decode_format(p, n, "k", given, &out, &f, &err), LW_OK, "%s",
               err.message);
  lw__image_bytes_release(&out);
  return f;
}

// ---- detection ------------------------------------------------------------------------------

Test(image_cuda, auto_detects_each_cuda_format_and_keeps_the_others) {
  uint8_t cubin[LW_TEST_CUBIN_BYTES], fatbin[LW_TEST_FATBIN_BYTES];
  lw_test_cubin_make(cubin);
  lw_test_fatbin_make(fatbin);
  cr_assert_eq(detect(cubin, sizeof cubin), LW_IMAGE_CUBIN);
  cr_assert_eq(detect(fatbin, sizeof fatbin), LW_IMAGE_FATBIN);
  cr_assert_eq(detect(lw_test_ptx, sizeof lw_test_ptx), LW_IMAGE_PTX);
  cr_assert_eq(detect(lw_test_ptx, strlen(lw_test_ptx)), LW_IMAGE_PTX, "without its NUL");
  cr_assert_eq(detect(lw_test_cuda_c, strlen(lw_test_cuda_c)), LW_IMAGE_CUDA_C);
  cr_assert_eq(detect(lw_test_opencl_c_with_markers, strlen(lw_test_opencl_c_with_markers)),
               LW_IMAGE_OPENCL_C, "markers in comments and strings do not count");

  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  cr_assert_eq(detect(elf, n), LW_IMAGE_ELF, "a host kernel stays ELF");
  free(elf);
  const uint8_t spirv[20] = {0x03, 0x02, 0x23, 0x07, 0, 0, 1, 0};
  cr_assert_eq(detect(spirv, sizeof spirv), LW_IMAGE_SPIRV);

  // Each through the register path, and each as given: the same format.
  cr_assert_eq(decoded_as(cubin, sizeof cubin, LW_IMAGE_AUTO), LW_IMAGE_CUBIN);
  cr_assert_eq(decoded_as(cubin, sizeof cubin, LW_IMAGE_CUBIN), LW_IMAGE_CUBIN);
  cr_assert_eq(decoded_as(fatbin, sizeof fatbin, LW_IMAGE_AUTO), LW_IMAGE_FATBIN);
  cr_assert_eq(decoded_as(fatbin, sizeof fatbin, LW_IMAGE_FATBIN), LW_IMAGE_FATBIN);
  cr_assert_eq(decoded_as(lw_test_ptx, sizeof lw_test_ptx, LW_IMAGE_AUTO), LW_IMAGE_PTX);
  cr_assert_eq(decoded_as(lw_test_cuda_c, sizeof lw_test_cuda_c, LW_IMAGE_AUTO), LW_IMAGE_CUDA_C);
  cr_assert_eq(decoded_as(lw_test_cuda_c, sizeof lw_test_cuda_c, LW_IMAGE_CUDA_C),
               LW_IMAGE_CUDA_C);
}

Test(image_cuda, cuda_c_is_told_from_opencl_c_by_cuda_only_markers) {
  static const struct {
    const char *src;
    lw_image_format_t want;
  } cases[] = {
      {"__global__ void k(int *a) { a[0] = 1; }", LW_IMAGE_CUDA_C},
      {"extern \"C\" void k(int *a);", LW_IMAGE_CUDA_C},
      {"extern   /* a comment between */ \"C\" { }", LW_IMAGE_CUDA_C},
      {"#define K __global__\nK void k() {}", LW_IMAGE_CUDA_C},
      {"__kernel void k(__global int *a) { a[0] = 1; }", LW_IMAGE_OPENCL_C},
      {"__kernel void k(__global__x int *a) {}", LW_IMAGE_OPENCL_C},  // a longer identifier
      {"extern int x; const char *s = \"C\";", LW_IMAGE_OPENCL_C},   // "C" not after extern
      {"extern \"C++\" {}", LW_IMAGE_OPENCL_C},
      {"// __global__\n__kernel void k() {}", LW_IMAGE_OPENCL_C},
      {"/* extern \"C\" */ __kernel void k() {}", LW_IMAGE_OPENCL_C},
      {"char c = '\"'; const char *s = \"__global__\";", LW_IMAGE_OPENCL_C},
      {"/* never closed __global__", LW_IMAGE_OPENCL_C},
      {"", LW_IMAGE_OPENCL_C},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    cr_assert_eq(detect(cases[i].src, strlen(cases[i].src)), cases[i].want, "case %zu: '%s'", i,
                 cases[i].src);
  }
}

Test(image_cuda, ptx_is_detected_by_its_first_directive_after_comments) {
  static const struct {
    const char *src;
    lw_image_format_t want;
  } cases[] = {
      {".version 8.5\n.target sm_90\n", LW_IMAGE_PTX},
      {"  \t\n// c\n/* .target */ .version 7.0 .target sm_80", LW_IMAGE_PTX},
      {"//.version 8.5\n.target sm_90\n", LW_IMAGE_OPENCL_C},  // .version only in a comment
      {".target sm_90\n.version 8.5\n", LW_IMAGE_OPENCL_C},    // not first
      {".versions 8.5\n", LW_IMAGE_OPENCL_C},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    cr_assert_eq(detect(cases[i].src, strlen(cases[i].src)), cases[i].want, "case %zu: '%s'", i,
                 cases[i].src);
  }
}

Test(image_cuda, a_zstd_frame_of_a_cubin_is_detected_as_the_cubin) {
  uint8_t cubin[LW_TEST_CUBIN_BYTES];
  lw_test_cubin_make(cubin);
  size_t cap = ZSTD_compressBound(sizeof cubin);
  void *frame = malloc(cap);
  cr_assert_not_null(frame);
  size_t fn = ZSTD_compress(frame, cap, cubin, sizeof cubin, 3);
  cr_assert_not(ZSTD_isError(fn));
  cr_assert_eq(decoded_as(frame, fn, LW_IMAGE_AUTO), LW_IMAGE_CUBIN);
  free(frame);
}

// What a CUDA compiler writes: nvcc 13.0's output for the kernels of callables/kernels/cuda,
// committed as image_check fuzz seeds (a CUBIN for sm_90, a fat binary with CUBINs for sm_80
// and sm_90 and PTX, the PTX), each detected as what it is and accepted by its check.
Test(image_cuda, what_nvcc_writes_is_detected_and_accepted) {
  static const struct {
    const char *file;
    lw_image_format_t want;
  } seeds[] = {
      {"nvcc_empty_sm90.cubin", LW_IMAGE_CUBIN},
      {"nvcc_vector_add.fatbin", LW_IMAGE_FATBIN},
      {"nvcc_vector_add.ptx", LW_IMAGE_PTX},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/image_check/%s", LW_FUZZ_CORPUS_DIR, seeds[i].file);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    uint8_t buf[16384];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(n > 0 && n < sizeof buf, "%s: %zu bytes", path, n);
    cr_assert_eq(decoded_as(buf, n, LW_IMAGE_AUTO), seeds[i].want, "%s", seeds[i].file);
  }
}

// ---- CUBIN -----------------------------------------------------------------------------------

// Reads a committed seed of tests/fuzz/corpus/image_check into buf; returns its size.
static size_t read_seed(const char *file, uint8_t *buf, size_t cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/image_check/%s", LW_FUZZ_CORPUS_DIR, file);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  cr_assert(n > 0 && n < cap, "%s: %zu bytes", path, n);
  return n;
}

// A register of a CUBIN (given, or out of NVRTC or nvJitLink) whose kernel is not in it fails
// there, naming the kernels it has, before any run loads it.
Test(image_cuda, a_cubins_kernels_are_found_by_their_code_sections_and_a_missing_one_is_named) {
  uint8_t buf[16384];
  char kernels[64];
  size_t n = read_seed("nvcc_empty_sm90.cubin", buf, sizeof buf);
  cr_assert_eq(lw__image_cubin_has_kernel(buf, n, "lw_kernel_main", kernels, sizeof kernels), 1);
  cr_assert_eq(lw__image_cubin_has_kernel(buf, n, "lw_kernel", kernels, sizeof kernels), 0);
  cr_assert_str_eq(kernels, "lw_kernel_main");
  // A prefix or an extension of a kernel's name is another name.
  cr_assert_eq(lw__image_cubin_has_kernel(buf, n, "lw_kernel_main2", kernels, sizeof kernels), 0);
  // The test's own CUBIN, made with a long kernel name: the list is cut to fit and says so.
  uint8_t mine[1024];
  size_t m = lw_test_cubin_make_named(mine, sizeof mine, "a_kernel_with_a_long_long_name");
  cr_assert_gt(m, 0);
  cr_assert_eq(lw__image_cubin_has_kernel(mine, m, "k", kernels, 16), 0);
  cr_assert_str_eq(kernels, "...");
  cr_assert_eq(lw__image_cubin_has_kernel(mine, m, "a_kernel_with_a_long_long_name", kernels,
                                          sizeof kernels),
               1);
  // Bytes that are no CUBIN, or one whose section table is cut off: nothing is said (-1).
  cr_assert_eq(lw__image_cubin_has_kernel((const uint8_t *)"FAKECUBIN", 9, "k", kernels,
                                          sizeof kernels),
               -1);
  for (size_t cut = 0; cut < m; cut += 7) {
    int r = lw__image_cubin_has_kernel(mine, cut, "a_kernel_with_a_long_long_name", kernels,
                                       sizeof kernels);
    cr_assert(r == -1 || r == 1, "cut at %zu: %d", cut, r);
  }
}


static void put_eh(uint8_t *p, const Elf64_Ehdr *eh) { memcpy(p, eh, sizeof *eh); }

Test(image_cuda, a_cubin_is_never_taken_or_checked_as_a_host_elf) {
  uint8_t cubin[LW_TEST_CUBIN_BYTES];
  lw_test_cubin_make(cubin);
  cr_assert_eq(lw__image_check_cubin(cubin, sizeof cubin, "k", &err), LW_OK, "%s", err.message);
  assert_refused(lw__image_check_elf(cubin, sizeof cubin, "k", &err), "a CUBIN as ELF",
                 "a CUDA CUBIN (e_machine 190 EM_CUDA), not a host shared object");
  lw_image_bytes_t out;
  lw_image_format_t f;
  assert_refused(lw__image_decode_format(cubin, sizeof cubin, "k", LW_IMAGE_ELF, &out, &f, &err),
                 "a CUBIN given as ELF", "a CUDA CUBIN");
  // And a host kernel is no CUBIN.
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  assert_refused(lw__image_check_cubin(elf, n, "k", &err), "a host ELF as CUBIN",
                 "not a CUBIN (e_machine");
  cr_assert_not_null(strstr(err.message, "a host shared object?"), "%s", err.message);
  free(elf);
}

Test(image_cuda, a_malformed_cubin_is_refused_naming_what_is_wrong) {
  uint8_t good[LW_TEST_CUBIN_BYTES], p[LW_TEST_CUBIN_BYTES];
  lw_test_cubin_make(good);
  Elf64_Ehdr eh;

  memcpy(p, good, sizeof p);
  memcpy(&eh, p, sizeof eh);
  eh.e_type = ET_DYN;
  put_eh(p, &eh);
  assert_refused(lw__image_check_cubin(p, sizeof p, "k", &err), "ET_DYN", "not e_type 3");

  memcpy(p, good, sizeof p);
  memcpy(&eh, p, sizeof eh);
  eh.e_type = ET_REL;  // relocatable device code is a CUBIN too
  put_eh(p, &eh);
  cr_assert_eq(lw__image_check_cubin(p, sizeof p, "k", &err), LW_OK, "%s", err.message);

  memcpy(p, good, sizeof p);
  p[EI_CLASS] = ELFCLASS32;
  assert_refused(lw__image_check_cubin(p, sizeof p, "k", &err), "ELFCLASS32", "not a 64-bit ELF");

  memcpy(p, good, sizeof p);
  memcpy(&eh, p, sizeof eh);
  eh.e_shoff = 0;
  eh.e_shnum = 0;
  put_eh(p, &eh);
  assert_refused(lw__image_check_cubin(p, sizeof p, "k", &err), "no sections",
                 "a CUBIN without a section header table");

  memcpy(p, good, sizeof p);
  Elf64_Phdr ph;
  memcpy(&ph, p + LW_TEST_CUBIN_PHOFF, sizeof ph);
  ph.p_filesz = 4096;
  memcpy(p + LW_TEST_CUBIN_PHOFF, &ph, sizeof ph);
  assert_refused(lw__image_check_cubin(p, sizeof p, "k", &err), "segment past the end",
                 "ELF segment 0 (PT_LOAD) [0x90, 0x1090) ends past the image (352 bytes)");

  memcpy(p, good, sizeof p);
  Elf64_Shdr sh;
  memcpy(&sh, p + LW_TEST_CUBIN_SHOFF + 2 * sizeof sh, sizeof sh);
  sh.sh_offset = UINT64_MAX - 4;
  memcpy(p + LW_TEST_CUBIN_SHOFF + 2 * sizeof sh, &sh, sizeof sh);
  assert_refused(lw__image_check_cubin(p, sizeof p, "k", &err), "section offset overflow",
                 "ELF section 2 (.text.k): offset 0xfffffffffffffffb + size 0x10 overflows");

  memcpy(p, good, sizeof p);
  memcpy(&eh, p, sizeof eh);
  eh.e_phnum = 300;
  put_eh(p, &eh);
  assert_refused(lw__image_check_cubin(p, sizeof p, "k", &err), "too many program headers",
                 "more than LW_ELF_MAX_PROGRAM_HEADERS");
}

Test(image_cuda, every_cut_of_a_cubin_is_refused) {
  uint8_t good[LW_TEST_CUBIN_BYTES];
  lw_test_cubin_make(good);
  for (size_t cut = 0; cut < sizeof good; ++cut) {
    uint8_t *copy = malloc(cut ? cut : 1);  // exact size: ASan sees a read past the cut
    cr_assert_not_null(copy);
    memcpy(copy, good, cut);
    cr_assert_eq(lw__image_check_cubin(copy, cut, "k", &err), LW_INVALID_ARGUMENT,
                 "the CUBIN cut at %zu of %zu bytes passed", cut, sizeof good);
    free(copy);
  }
}

// ---- fat binary -----------------------------------------------------------------------------

static void put_u16(uint8_t *p, size_t off, uint16_t v) { memcpy(p + off, &v, sizeof v); }
static void put_u32(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, sizeof v); }
static void put_u64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, sizeof v); }

Test(image_cuda, a_malformed_fat_binary_is_refused_naming_what_is_wrong) {
  uint8_t good[LW_TEST_FATBIN_BYTES], p[LW_TEST_FATBIN_BYTES + 16];
  lw_test_fatbin_make(good);
  const size_t n = sizeof good;
  const size_t second = 16 + LW_TEST_FATBIN_ENTRY_HEADER + LW_TEST_ALIGN8(LW_TEST_CUBIN_BYTES);
  cr_assert_eq(lw__image_check_fatbin(good, n, "k", &err), LW_OK, "%s", err.message);

  memcpy(p, good, n);
  put_u16(p, 4, 2);
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "version", "fat binary version 2");

  memcpy(p, good, n);
  put_u16(p, 6, 8);
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "header size 8",
                 "fat binary header size 8 is outside [16, ");

  memcpy(p, good, n);
  put_u64(p, 8, n);  // 16 bytes more than there are
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "fatSize too big",
                 "ends past the image");

  memcpy(p, good, n);
  put_u64(p, 8, UINT64_MAX - 4);
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "fatSize overflow",
                 "ends past the image");

  memcpy(p, good, n);
  put_u64(p, 8, 0);
  assert_refused(lw__image_check_fatbin(p, 16, "k", &err), "no entries", "holds no entries");

  memcpy(p, good, n);
  put_u32(p, 16 + 4, 8);  // the first entry's header size
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "entry header 8",
                 "fat binary entry 0 at offset 0x10 has a header size of 8");

  memcpy(p, good, n);
  put_u64(p, second + 8, 4096);  // the PTX entry's payload
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "payload past the end",
                 "fat binary entry 1 at offset 0x");
  cr_assert_not_null(strstr(err.message, "kind 1, 64-byte header, 4096-byte payload) ends past"),
                     "%s", err.message);

  memcpy(p, good, n);
  put_u64(p, second + 8, UINT64_MAX - 8);
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "payload overflow", "ends past");

  // The entries must tile the fat binary: a payload 8 bytes short leaves a gap of 8 bytes of
  // PTX text, too short for an entry header and not zero.
  memcpy(p, good, n);
  uint64_t ptx_payload = LW_TEST_ALIGN8(sizeof lw_test_ptx);
  put_u64(p, second + 8, ptx_payload - 8);
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "gap",
                 "8 bytes left at offset 0x");

  // Zero padding after it is fine; anything else there is not.
  memcpy(p, good, n);
  memset(p + n, 0, 16);
  cr_assert_eq(lw__image_check_fatbin(p, n + 16, "k", &err), LW_OK, "%s", err.message);
  p[n + 9] = 0x50;
  assert_refused(lw__image_check_fatbin(p, n + 16, "k", &err), "trailing bytes",
                 "16 bytes after the fat binary's end");

  memcpy(p, good, n);
  p[0] ^= 1;
  assert_refused(lw__image_check_fatbin(p, n, "k", &err), "magic", "not a CUDA fat binary");
  cr_assert_eq(detect(p, n), LW_IMAGE_OPENCL_C, "no magic: not a fat binary");
}

Test(image_cuda, every_cut_of_a_fat_binary_is_refused) {
  uint8_t good[LW_TEST_FATBIN_BYTES];
  lw_test_fatbin_make(good);
  for (size_t cut = 0; cut < sizeof good; ++cut) {
    uint8_t *copy = malloc(cut ? cut : 1);
    cr_assert_not_null(copy);
    memcpy(copy, good, cut);
    cr_assert_eq(lw__image_check_fatbin(copy, cut, "k", &err), LW_INVALID_ARGUMENT,
                 "the fat binary cut at %zu of %zu bytes passed", cut, sizeof good);
    free(copy);
  }
}

// ---- PTX and CUDA C -------------------------------------------------------------------------

Test(image_cuda, malformed_ptx_is_refused_naming_what_is_wrong) {
  static const struct {
    const char *src;
    const char *needle;
  } cases[] = {
      {".target sm_90\n.version 8.5\n",
       "PTX must start with a .version directive (after comments), but starts with '.target'"},
      {"// only a comment\n", "PTX holds only comments and white space"},
      {".version 8.5\n.address_size 64\n// .target sm_90\n", "PTX has no .target directive"},
      {".version eight\n.target sm_90\n", "PTX .version is followed by 'eight'"},
      {".version 8.\n.target sm_90\n", "PTX .version is followed by '8.'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    memset(&err, 0, sizeof err);
    assert_refused(lw__image_check_ptx((const uint8_t *)cases[i].src, strlen(cases[i].src), "k",
                                       &err),
                   cases[i].src, cases[i].needle);
  }
  static const char with_nul[] = ".version 8.5\n.target sm_90\0 trailing";
  assert_refused(lw__image_check_ptx((const uint8_t *)with_nul, sizeof with_nul, "k", &err),
                 "a NUL inside", "PTX has a NUL byte at offset 26 of 37");
  // Given as PTX (not detected), text that is no PTX is refused by the PTX check.
  lw_image_bytes_t out;
  lw_image_format_t f;
  assert_refused(lw__image_decode_format(lw_test_cuda_c, sizeof lw_test_cuda_c, "k", LW_IMAGE_PTX,
                                         &out, &f, &err),
                 "CUDA C given as PTX", "PTX must start with a .version directive");
  cr_assert_eq(lw__image_check_ptx((const uint8_t *)lw_test_ptx, sizeof lw_test_ptx, "k", &err),
               LW_OK, "%s", err.message);
}

Test(image_cuda, cuda_c_with_a_nul_byte_inside_is_refused) {
  static const char src[] = "extern \"C\" __global__ void k() {}\0garbage";
  assert_refused(lw__image_check_cuda_c((const uint8_t *)src, sizeof src, "k", false, &err),
                 "NUL", "CUDA C source has a NUL byte at offset 33 of 42 (binary data given as "
                        "CUDA C?)");
  // Detected, the NUL byte makes it no kernel of any format.
  lw_image_bytes_t out;
  lw_image_format_t f;
  assert_refused(lw__image_decode_format(src, sizeof src, "k", LW_IMAGE_AUTO, &out, &f, &err),
                 "detected CUDA C with a NUL", "NUL byte at offset 33");
  cr_assert_eq(lw__image_check_cuda_c((const uint8_t *)lw_test_cuda_c, sizeof lw_test_cuda_c,
                                      "k", false, &err),
               LW_OK, "%s", err.message);
}

Test(image_cuda, format_values_past_the_last_are_refused_and_the_cuda_ones_accepted) {
  lw_image_bytes_t out;
  lw_image_format_t f;
  cr_assert_eq(lw__image_decode_detect(lw_test_ptx, sizeof lw_test_ptx, "k",
                                       (lw_image_format_t)(LW_IMAGE_FATBIN + 1), &out, &f, &err),
               LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(err.message, "unknown image format 8 (LW_IMAGE_AUTO..LW_IMAGE_FATBIN)"),
                     "%s", err.message);
  for (int g = LW_IMAGE_CUDA_C; g <= LW_IMAGE_FATBIN; ++g) {
    cr_assert_eq(lw__image_decode_detect(lw_test_ptx, sizeof lw_test_ptx, "k",
                                         (lw_image_format_t)g, &out, &f, &err),
                 LW_OK, "%s: %s", lw_image_format_name((lw_image_format_t)g), err.message);
    cr_assert_eq(f, (lw_image_format_t)g);
    lw__image_bytes_release(&out);
  }
  cr_assert_str_eq(lw_image_format_name(LW_IMAGE_FATBIN), "fatbin");
  cr_assert_str_eq(lw_image_format_name((lw_image_format_t)(LW_IMAGE_FATBIN + 1)), "unknown");
}
