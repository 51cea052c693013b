// tests/callables/test_digest.c — callable digests (XXH3-128 over the canonical encoding) and
// descriptor validation.
#include <ctype.h>
#include <xxhash.h>

#include "callables/cuda_images.h"
#include "callables/digest.h"
#include "callables/image.h"
#include "callables_test_util.h"
#include "lanework/callable.h"

TestSuite(digest, .timeout = 60);

static const uint8_t k_dirs3[3] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT};

static lw_digest_t digest_of(const uint8_t *elf, size_t n, const char *entry, uint32_t np,
                             const uint8_t *dirs) {
  lw_digest_t d;
  lw__digest_compute(elf, n, entry, np, dirs, &d);
  return d;
}

Test(digest, same_bytes_give_the_same_digest_from_different_buffers) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  uint8_t *copy = malloc(n);
  memcpy(copy, elf, n);
  lw_digest_t a = digest_of(elf, n, NULL, 3, k_dirs3);
  lw_digest_t b = digest_of(copy, n, LW_DEFAULT_ENTRY, 3, k_dirs3);
  cr_assert(lw__digest_equal(a, b), "NULL entry means LW_DEFAULT_ENTRY");
  copy[n / 2] ^= 1;
  cr_assert_not(lw__digest_equal(a, digest_of(copy, n, NULL, 3, k_dirs3)),
                "one flipped bit changes the digest");
  free(copy);
  free(elf);
}

Test(digest, different_entry_or_signature_gives_a_different_digest) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  lw_digest_t base = digest_of(elf, n, NULL, 3, k_dirs3);
  cr_assert_not(lw__digest_equal(base, digest_of(elf, n, "other_entry", 3, k_dirs3)));
  const uint8_t inout[3] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_INOUT};
  cr_assert_not(lw__digest_equal(base, digest_of(elf, n, NULL, 3, inout)));
  cr_assert_not(lw__digest_equal(base, digest_of(elf, n, NULL, 2, k_dirs3)));
  cr_assert_not(lw__digest_equal(base, digest_of(elf, n, NULL, 0, NULL)));
  // Length prefixes keep fields from sliding into each other: the last image byte moved into
  // the entry must not collide.
  char moved[64];
  snprintf(moved, sizeof moved, "%c%s", elf[n - 1], LW_DEFAULT_ENTRY);
  cr_assert_not(lw__digest_equal(digest_of(elf, n, NULL, 0, NULL),
                                 digest_of(elf, n - 1, moved, 0, NULL)));
  free(elf);
}

// Pins the documented encoding, so the digest stays stable across versions and processes.
Test(digest, digest_is_xxh3_128_of_the_documented_encoding) {
  const uint8_t elf[5] = {1, 2, 3, 4, 5};
  const char *entry = "main2";
  const uint8_t dirs[2] = {LW_PARAM_SCALAR, LW_PARAM_OUT};
  uint8_t enc[8 + 8 + 5 + 4 + 5 + 4 + 2 + 4 + 4 + 4];
  size_t o = 0;
  memcpy(enc + o, "LWCALL2\0", 8), o += 8;
  const uint8_t len64[8] = {5, 0, 0, 0, 0, 0, 0, 0};
  memcpy(enc + o, len64, 8), o += 8;
  memcpy(enc + o, elf, 5), o += 5;
  const uint8_t len32[4] = {5, 0, 0, 0};
  memcpy(enc + o, len32, 4), o += 4;
  memcpy(enc + o, entry, 5), o += 5;
  const uint8_t np[4] = {2, 0, 0, 0};
  memcpy(enc + o, np, 4), o += 4;
  memcpy(enc + o, dirs, 2), o += 2;
  const uint8_t fmt[4] = {LW_IMAGE_OPENCL_C, 0, 0, 0};
  memcpy(enc + o, fmt, 4), o += 4;
  const uint8_t optlen[4] = {4, 0, 0, 0};
  memcpy(enc + o, optlen, 4), o += 4;
  memcpy(enc + o, "-DX1", 4), o += 4;
  cr_assert_eq(o, sizeof enc);
  XXH128_hash_t want = XXH3_128bits(enc, sizeof enc);
  lw_digest_t got;
  lw__digest_compute_format(elf, 5, entry, 2, dirs, LW_IMAGE_OPENCL_C, "-DX1", &got);
  cr_assert_eq(got.lo, want.low64);
  cr_assert_eq(got.hi, want.high64);
  // The ELF form without options is the same encoding with format 1 and no options.
  enc[sizeof enc - 12] = LW_IMAGE_ELF;
  enc[sizeof enc - 8] = 0;
  want = XXH3_128bits(enc, sizeof enc - 4);
  got = digest_of(elf, 5, entry, 2, dirs);
  cr_assert_eq(got.lo, want.low64);
  cr_assert_eq(got.hi, want.high64);
}

static const char k_source[] = "__kernel void k(__global int *a) { a[0] = 1; }";

Test(digest, auto_format_and_the_format_it_resolves_to_give_one_digest) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  lw_callable_t a = {.name = "va", .image = elf, .image_bytes = n};
  lw_callable_t b = a;
  b.format = LW_IMAGE_ELF;
  lw_digest_t da, db;
  cr_assert_eq(lw_callable_digest(&a, &da), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(lw_callable_digest(&b, &db), LW_OK, "%s", lw_last_error()->message);
  cr_assert(lw__digest_equal(da, db));
  cr_assert(lw__digest_equal(da, digest_of(elf, n, NULL, 0, NULL)));
  lw_callable_t src = {.name = "k", .image = k_source, .image_bytes = strlen(k_source)};
  lw_callable_t src_explicit = src;
  src_explicit.format = LW_IMAGE_OPENCL_C;
  cr_assert_eq(lw_callable_digest(&src, &da), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(lw_callable_digest(&src_explicit, &db), LW_OK, "%s", lw_last_error()->message);
  cr_assert(lw__digest_equal(da, db), "text is detected as OpenCL C");
  free(elf);
}

Test(digest, format_and_build_options_change_the_digest) {
  lw_callable_t c = {.name = "k", .image = k_source, .image_bytes = strlen(k_source)};
  lw_digest_t plain, opt, opt2, empty;
  cr_assert_eq(lw_callable_digest(&c, &plain), LW_OK);
  c.build_options = "-DN=4";
  cr_assert_eq(lw_callable_digest(&c, &opt), LW_OK);
  c.build_options = "-DN=5";
  cr_assert_eq(lw_callable_digest(&c, &opt2), LW_OK);
  c.build_options = "";
  cr_assert_eq(lw_callable_digest(&c, &empty), LW_OK);
  cr_assert_not(lw__digest_equal(plain, opt));
  cr_assert_not(lw__digest_equal(opt, opt2));
  cr_assert(lw__digest_equal(plain, empty), "NULL and empty options are the same");
  lw_digest_t as_c, as_spirv;
  lw__digest_compute_format((const uint8_t *)k_source, 8, NULL, 0, NULL, LW_IMAGE_OPENCL_C, NULL,
                            &as_c);
  lw__digest_compute_format((const uint8_t *)k_source, 8, NULL, 0, NULL, LW_IMAGE_SPIRV, NULL,
                            &as_spirv);
  cr_assert_not(lw__digest_equal(as_c, as_spirv), "the format is part of the identity");
}

Test(digest, images_that_do_not_match_their_format_have_no_digest) {
  // The 5-word header alone is a whole module (no instructions).
  const uint8_t spirv_ok[20] = {0x03, 0x02, 0x23, 0x07, 0, 0, 1, 0};
  const uint8_t spirv_odd[6] = {0x03, 0x02, 0x23, 0x07, 0, 0};
  const char with_nul[] = "__kernel void k() {}\0trailing";
  struct {
    lw_callable_t c;
    lw_status_t want;
    const char *needle;
  } cases[] = {
      {{.name = "t", .image = k_source, .image_bytes = sizeof k_source, .format = LW_IMAGE_ELF},
       LW_INVALID_ARGUMENT, "not an ELF image"},
      {{.name = "t", .image = k_source, .image_bytes = sizeof k_source,
        .format = LW_IMAGE_SPIRV},
       LW_INVALID_ARGUMENT, "not a SPIR-V module (bad magic"},
      {{.name = "t", .image = spirv_odd, .image_bytes = sizeof spirv_odd},
       LW_INVALID_ARGUMENT, "not a SPIR-V module (length"},
      {{.name = "t", .image = with_nul, .image_bytes = sizeof with_nul},
       LW_INVALID_ARGUMENT, "NUL byte at offset 20"},
      {{.name = "t", .image = spirv_ok, .image_bytes = sizeof spirv_ok}, LW_OK, NULL},
      // The source's own terminator is fine.
      {{.name = "t", .image = k_source, .image_bytes = sizeof k_source}, LW_OK, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lw_digest_t d;
    cr_assert_eq(lw_callable_digest(&cases[i].c, &d), cases[i].want, "case %zu: %s", i,
                 lw_last_error()->message);
    if (cases[i].needle) {
      cr_assert_not_null(strstr(lw_last_error()->message, cases[i].needle),
                         "case %zu: '%s' lacks '%s'", i, lw_last_error()->message,
                         cases[i].needle);
    }
  }
}

Test(digest, format_gives_32_lowercase_hex_high_half_first) {
  char s[33];
  lw__digest_format((lw_digest_t){.lo = 0x0123456789abcdefull, .hi = 0xfedcba9876543210ull}, s);
  cr_assert_str_eq(s, "fedcba98765432100123456789abcdef");
  lw__digest_format((lw_digest_t){0}, s);
  cr_assert_eq(strlen(s), 32);
  for (int i = 0; i < 32; i++) cr_assert(isxdigit((unsigned char)s[i]) && !isupper(s[i]));
}

Test(digest, packed_and_plain_images_give_the_same_public_digest) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("big_vector_add", &n);
  void *frame = NULL;
  size_t fn = 0;
  lw_error_t err;
  cr_assert_eq(lw__image_pack(elf, n, 3, &frame, &fn, &err), LW_OK, "%s", err.message);
  lw_callable_t plain = {.name = "big", .image = elf, .image_bytes = n, .n_params = 3,
                         .param_dirs = k_dirs3};
  lw_callable_t packed = plain;
  packed.image = frame;
  packed.image_bytes = fn;
  lw_digest_t a, b;
  cr_assert_eq(lw_callable_digest(&plain, &a), LW_OK, "%s", lw_last_error()->message);
  cr_assert_eq(lw_callable_digest(&packed, &b), LW_OK, "%s", lw_last_error()->message);
  cr_assert(lw__digest_equal(a, b));
  cr_assert(lw__digest_equal(a, digest_of(elf, n, NULL, 3, k_dirs3)),
            "the public digest is the internal one over the decoded bytes");
  free(frame);
  free(elf);
}

Test(digest, corrupt_packed_image_fails_with_the_reason_in_last_error) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  void *frame = NULL;
  size_t fn = 0;
  lw_error_t err;
  cr_assert_eq(lw__image_pack(elf, n, 3, &frame, &fn, &err), LW_OK, "%s", err.message);
  lw_callable_t c = {.name = "vector_add", .image = frame, .image_bytes = fn - 7};
  lw_digest_t d = {1, 1};
  cr_assert_eq(lw_callable_digest(&c, &d), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_last_error()->code, LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "corrupt zstd"), "%s",
                     lw_last_error()->message);
  cr_assert_eq(d.lo, 0, "out is cleared on failure");
  free(frame);
  free(elf);
}

// Each malformed field: INVALID_ARGUMENT from validate and from lw_callable_digest, with the
// field named in the message.
Test(digest, malformed_descriptors_are_rejected_naming_the_field) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("noop", &n);
  const lw_callable_t good = {.name = "noop", .image = elf, .image_bytes = n, .n_params = 3,
                              .param_dirs = k_dirs3};
  lw_error_t err;
  cr_assert_eq(lw__callable_validate(&good, &err), LW_OK);

  char long_name[200];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  char name127[128];
  memset(name127, 'y', 127);
  name127[127] = '\0';
  const uint8_t bad_dir[3] = {LW_PARAM_IN, 9, LW_PARAM_OUT};
  char long_options[LW_MAX_BUILD_OPTIONS_BYTES + 1];
  memset(long_options, 'o', sizeof long_options - 1);
  long_options[sizeof long_options - 1] = '\0';

  struct {
    lw_callable_t c;
    const char *needle;
  } cases[] = {
      {{.name = "noop", .image = NULL, .image_bytes = n}, "image is NULL"},
      {{.name = "noop", .image = elf, .image_bytes = 0}, "image_bytes is 0"},
      {{.name = "noop", .image = elf, .image_bytes = (size_t)LW_MAX_IMAGE_BYTES + 1},
       "LW_MAX_IMAGE_BYTES"},
      {{.name = "noop", .image = elf, .image_bytes = n, .n_params = LW_MAX_PARAMS + 1,
        .param_dirs = k_dirs3},
       "n_params"},
      {{.name = "noop", .image = elf, .image_bytes = n, .n_params = 2, .param_dirs = NULL},
       "param_dirs is NULL"},
      {{.name = "noop", .image = elf, .image_bytes = n, .n_params = 3, .param_dirs = bad_dir},
       "param_dirs[1]"},
      {{.name = long_name, .image = elf, .image_bytes = n}, "name is longer than 127"},
      {{.name = "noop", .image = elf, .image_bytes = n, .entry = long_name},
       "entry is longer than 127"},
      {{.name = "noop", .image = elf, .image_bytes = n, .entry = ""}, "entry is an empty"},
      {{.name = "noop", .image = elf, .image_bytes = n, .format = (lw_image_format_t)9},
       "format 9 is not an LW_IMAGE_* value"},
      {{.name = "noop", .image = elf, .image_bytes = n,
        .format = (lw_image_format_t)(LW_IMAGE_FATBIN + 1)},
       "format 8 is not an LW_IMAGE_* value (0..7)"},
      {{.name = "noop", .image = elf, .image_bytes = n, .build_options = long_options},
       "build_options are longer than 255"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(&err, 0, sizeof err);
    cr_assert_eq(lw__callable_validate(&cases[i].c, &err), LW_INVALID_ARGUMENT, "case %zu", i);
    cr_assert_not_null(strstr(err.message, cases[i].needle), "case %zu: '%s' lacks '%s'", i,
                       err.message, cases[i].needle);
    lw_digest_t d;
    cr_assert_eq(lw_callable_digest(&cases[i].c, &d), LW_INVALID_ARGUMENT, "case %zu", i);
    cr_assert_str_eq(lw_last_error()->message, err.message, "case %zu", i);
  }
  cr_assert_eq(lw__callable_validate(NULL, &err), LW_INVALID_ARGUMENT);

  // The limits themselves are fine.
  lw_callable_t edge = good;
  edge.name = name127;
  edge.entry = name127;
  cr_assert_eq(lw__callable_validate(&edge, &err), LW_OK, "%s", err.message);
  edge.n_params = 0;
  edge.param_dirs = NULL;
  cr_assert_eq(lw__callable_validate(&edge, &err), LW_OK, "%s", err.message);
  long_options[LW_MAX_BUILD_OPTIONS_BYTES - 1] = '\0';  // 255 characters: the limit
  edge.build_options = long_options;
  edge.format = LW_IMAGE_SPIRV;
  cr_assert_eq(lw__callable_validate(&edge, &err), LW_OK, "%s", err.message);
  for (int f = LW_IMAGE_CUDA_C; f <= LW_IMAGE_FATBIN; ++f) {
    edge.format = (lw_image_format_t)f;
    cr_assert_eq(lw__callable_validate(&edge, &err), LW_OK, "format %d: %s", f, err.message);
  }
  free(elf);
}

Test(digest, the_cuda_formats_and_their_options_are_part_of_the_digest) {
  uint8_t cubin[LW_TEST_CUBIN_BYTES], fatbin[LW_TEST_FATBIN_BYTES];
  lw_test_cubin_make(cubin);
  lw_test_fatbin_make(fatbin);
  struct {
    lw_callable_t c;
    lw_image_format_t resolved;
  } cases[] = {
      {{.name = "k", .image = lw_test_cuda_c, .image_bytes = sizeof lw_test_cuda_c},
       LW_IMAGE_CUDA_C},
      {{.name = "k", .image = lw_test_ptx, .image_bytes = sizeof lw_test_ptx}, LW_IMAGE_PTX},
      {{.name = "k", .image = cubin, .image_bytes = sizeof cubin}, LW_IMAGE_CUBIN},
      {{.name = "k", .image = fatbin, .image_bytes = sizeof fatbin}, LW_IMAGE_FATBIN},
  };
  lw_digest_t seen[4];
  for (size_t i = 0; i < 4; ++i) {
    // AUTO and the format it resolves to: one digest, the documented encoding's.
    lw_callable_t explicit_format = cases[i].c;
    explicit_format.format = cases[i].resolved;
    lw_digest_t by_auto, by_name, encoded;
    cr_assert_eq(lw_callable_digest(&cases[i].c, &by_auto), LW_OK, "%s",
                 lw_last_error()->message);
    cr_assert_eq(lw_callable_digest(&explicit_format, &by_name), LW_OK, "%s",
                 lw_last_error()->message);
    lw__digest_compute_format(cases[i].c.image, cases[i].c.image_bytes, NULL, 0, NULL,
                              cases[i].resolved, NULL, &encoded);
    cr_assert(lw__digest_equal(by_auto, by_name), "case %zu", i);
    cr_assert(lw__digest_equal(by_auto, encoded), "case %zu", i);
    for (size_t j = 0; j < i; ++j) cr_assert_not(lw__digest_equal(seen[j], by_auto));
    seen[i] = by_auto;
    // Options: each string its own callable (an -arch for NVRTC, a -D).
    lw_callable_t with_options = cases[i].c;
    with_options.build_options = "-DN=4";
    lw_digest_t opt, opt2;
    cr_assert_eq(lw_callable_digest(&with_options, &opt), LW_OK);
    with_options.build_options = "-DN=5";
    cr_assert_eq(lw_callable_digest(&with_options, &opt2), LW_OK);
    cr_assert_not(lw__digest_equal(by_auto, opt), "case %zu", i);
    cr_assert_not(lw__digest_equal(opt, opt2), "case %zu", i);
  }
  // The same source text as CUDA C and as OpenCL C: two callables.
  lw_callable_t as_cuda = cases[0].c, as_opencl = cases[0].c;
  as_opencl.format = LW_IMAGE_OPENCL_C;
  lw_digest_t dc, dcl;
  cr_assert_eq(lw_callable_digest(&as_cuda, &dc), LW_OK);
  cr_assert_eq(lw_callable_digest(&as_opencl, &dcl), LW_OK, "%s", lw_last_error()->message);
  cr_assert_not(lw__digest_equal(dc, dcl), "the format is part of the identity");
  // A malformed image of a CUDA format has no digest, the reason in the last error.
  lw_callable_t cut = cases[2].c;
  cut.image_bytes = 100;
  lw_digest_t d;
  cr_assert_eq(lw_callable_digest(&cut, &d), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "callable k: image is not a valid kernel"),
                     "%s", lw_last_error()->message);
}

Test(digest, live_in_and_out_parameters_are_valid_and_change_the_digest) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("noop", &n);
  const uint8_t live[3] = {LW_PARAM_IN | LW_PARAM_LIVE, LW_PARAM_IN,
                           LW_PARAM_OUT | LW_PARAM_LIVE};
  lw_callable_t c = {.name = "noop", .image = elf, .image_bytes = n, .n_params = 3,
                     .param_dirs = live};
  lw_error_t err;
  cr_assert_eq(lw__callable_validate(&c, &err), LW_OK, "%s", err.message);
  // Live is part of the signature: the same kernel with plain parameters is another callable.
  cr_assert_not(lw__digest_equal(digest_of(elf, n, NULL, 3, live),
                                 digest_of(elf, n, NULL, 3, k_dirs3)));
  free(elf);
}

Test(digest, live_inout_and_live_scalar_parameters_are_refused_naming_the_parameter) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("noop", &n);
  const uint8_t inout[2] = {LW_PARAM_IN, LW_PARAM_INOUT | LW_PARAM_LIVE};
  const uint8_t scalar[2] = {LW_PARAM_SCALAR | LW_PARAM_LIVE, LW_PARAM_OUT};
  const uint8_t unknown[1] = {LW_PARAM_LIVE | 0x20};
  struct {
    const uint8_t *dirs;
    uint32_t n;
    const char *needle;
  } cases[] = {
      {inout, 2, "param_dirs[1] is LW_PARAM_INOUT | LW_PARAM_LIVE: only IN and OUT"},
      {scalar, 2, "param_dirs[0] is LW_PARAM_SCALAR | LW_PARAM_LIVE: only IN and OUT"},
      {unknown, 1, "param_dirs[0] is 48, not an LW_PARAM_* value"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lw_callable_t c = {.name = "noop", .image = elf, .image_bytes = n, .n_params = cases[i].n,
                       .param_dirs = cases[i].dirs};
    lw_error_t err;
    memset(&err, 0, sizeof err);
    cr_assert_eq(lw__callable_validate(&c, &err), LW_INVALID_ARGUMENT, "case %zu", i);
    cr_assert_not_null(strstr(err.message, cases[i].needle), "case %zu: '%s' lacks '%s'", i,
                       err.message, cases[i].needle);
  }
  free(elf);
}

Test(digest, non_elf_image_given_as_elf_has_no_digest) {
  const char text[] = "hello, not a kernel";
  lw_callable_t c = {.name = "txt", .image = text, .image_bytes = sizeof text,
                     .format = LW_IMAGE_ELF};
  lw_digest_t d;
  cr_assert_eq(lw_callable_digest(&c, &d), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "not an ELF image"), "%s",
                     lw_last_error()->message);
  cr_assert_eq(lw_callable_digest(&c, NULL), LW_INVALID_ARGUMENT);
}
