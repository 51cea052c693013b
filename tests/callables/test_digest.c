// tests/callables/test_digest.c — callable digests (XXH3-128 over the canonical encoding) and
// descriptor validation.
#include <ctype.h>
#include <xxhash.h>

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
  uint8_t enc[8 + 8 + 5 + 4 + 5 + 4 + 2];
  size_t o = 0;
  memcpy(enc + o, "LWCALL1\0", 8), o += 8;
  const uint8_t len64[8] = {5, 0, 0, 0, 0, 0, 0, 0};
  memcpy(enc + o, len64, 8), o += 8;
  memcpy(enc + o, elf, 5), o += 5;
  const uint8_t len32[4] = {5, 0, 0, 0};
  memcpy(enc + o, len32, 4), o += 4;
  memcpy(enc + o, entry, 5), o += 5;
  const uint8_t np[4] = {2, 0, 0, 0};
  memcpy(enc + o, np, 4), o += 4;
  memcpy(enc + o, dirs, 2), o += 2;
  cr_assert_eq(o, sizeof enc);
  XXH128_hash_t want = XXH3_128bits(enc, sizeof enc);
  lw_digest_t got = digest_of(elf, 5, entry, 2, dirs);
  cr_assert_eq(got.lo, want.low64);
  cr_assert_eq(got.hi, want.high64);
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
  free(elf);
}

Test(digest, non_elf_image_has_no_digest) {
  const char text[] = "hello, not a kernel";
  lw_callable_t c = {.name = "txt", .image = text, .image_bytes = sizeof text};
  lw_digest_t d;
  cr_assert_eq(lw_callable_digest(&c, &d), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "not an ELF image"), "%s",
                     lw_last_error()->message);
  cr_assert_eq(lw_callable_digest(&c, NULL), LW_INVALID_ARGUMENT);
}
