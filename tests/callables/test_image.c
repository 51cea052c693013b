// tests/callables/test_image.c — zstd detection and decoding, ELF checks, packing, and loading
// kernel images from memory.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <zstd.h>

#include "callables/image.h"
#include "callables_test_util.h"
#include "lanework/callable.h"

static lw_error_t err;

static void setup(void) { memset(&err, 0, sizeof err); }

TestSuite(image, .init = setup, .timeout = 60);

static void *pack_or_die(const uint8_t *elf, size_t bytes, size_t *out_bytes) {
  void *frame = NULL;
  cr_assert_eq(lw__image_pack(elf, bytes, 3, &frame, out_bytes, &err), LW_OK, "%s",
               err.message);
  return frame;
}

static void assert_invalid(lw_status_t st, const char *needle) {
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "status %s, message '%s'", lw_status_name(st),
               err.message);
  cr_assert_eq(err.code, LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(err.message, needle), "message '%s' lacks '%s'", err.message,
                     needle);
}

// ---- zstd detection and decoding ----------------------------------------------------------

Test(image, zstd_magic_is_detected_only_at_the_start) {
  const uint8_t frame_magic[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00};
  cr_assert(lw__image_is_zstd(frame_magic, sizeof frame_magic));
  cr_assert_not(lw__image_is_zstd(frame_magic, 3), "3 bytes cannot hold the magic");
  cr_assert_not(lw__image_is_zstd(NULL, 8));
  const uint8_t elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  cr_assert_not(lw__image_is_zstd(elf, sizeof elf));
  const uint8_t big_endian_magic[] = {0xFD, 0x2F, 0xB5, 0x28};
  cr_assert_not(lw__image_is_zstd(big_endian_magic, 4), "the magic is little endian");
}

Test(image, pack_then_decode_round_trips_byte_identical) {
  const char *names[] = {"vector_add", "big_vector_add"};
  for (size_t k = 0; k < 2; k++) {
    size_t n = 0;
    uint8_t *elf = test_read_kernel(names[k], &n);
    size_t fn = 0;
    void *frame = pack_or_die(elf, n, &fn);
    cr_assert(lw__image_is_zstd(frame, fn));
    cr_assert_eq(ZSTD_getFrameContentSize(frame, fn), (unsigned long long)n,
                 "the frame records its content size");
    lw_image_bytes_t out;
    cr_assert_eq(lw__image_decode(frame, fn, names[k], &out, &err), LW_OK, "%s", err.message);
    cr_assert_not_null(out.owned, "a decompressed image is owned");
    cr_assert_eq(out.bytes, n);
    cr_assert_eq(memcmp(out.data, elf, n), 0, "%s: decoded bytes differ", names[k]);
    lw__image_bytes_release(&out);
    cr_assert_null(out.data);
    free(frame);
    free(elf);
  }
}

Test(image, plain_elf_is_borrowed_not_copied) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  lw_image_bytes_t out;
  cr_assert_eq(lw__image_decode(elf, n, "vector_add", &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.data, elf);
  cr_assert_eq(out.bytes, n);
  cr_assert_null(out.owned);
  lw__image_bytes_release(&out);
  free(elf);
}

// A frame without a content size, split in two frames: both take the streaming path.
Test(image, frames_without_content_size_and_concatenated_frames_decode) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  cr_assert_not_null(cctx);
  size_t cap = ZSTD_compressBound(n) * 2 + 64;
  uint8_t *buf = malloc(cap);
  cr_assert_not_null(buf);

  // A frame that leaves the size out of its header.
  cr_assert_not(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0)));
  ZSTD_outBuffer out = {buf, cap, 0};
  ZSTD_inBuffer in = {elf, n, 0};
  cr_assert_eq(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0);
  cr_assert_eq(ZSTD_getFrameContentSize(buf, out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
  lw_image_bytes_t dec;
  cr_assert_eq(lw__image_decode(buf, out.pos, "nosize", &dec, &err), LW_OK, "%s", err.message);
  cr_assert_eq(dec.bytes, n);
  cr_assert_eq(memcmp(dec.data, elf, n), 0);
  lw__image_bytes_release(&dec);

  // Two frames, each with its own content size: the first header alone would undercount.
  ZSTD_CCtx_reset(cctx, ZSTD_reset_parameters);
  size_t half = n / 2;
  size_t a = ZSTD_compressCCtx(cctx, buf, cap, elf, half, 3);
  cr_assert_not(ZSTD_isError(a));
  size_t b = ZSTD_compressCCtx(cctx, buf + a, cap - a, elf + half, n - half, 3);
  cr_assert_not(ZSTD_isError(b));
  cr_assert_eq(lw__image_decode(buf, a + b, "two", &dec, &err), LW_OK, "%s", err.message);
  cr_assert_eq(dec.bytes, n);
  cr_assert_eq(memcmp(dec.data, elf, n), 0);
  lw__image_bytes_release(&dec);

  ZSTD_freeCCtx(cctx);
  free(buf);
  free(elf);
}

Test(image, corrupt_zstd_frame_is_invalid_argument_naming_the_callable) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  size_t fn = 0;
  uint8_t *frame = pack_or_die(elf, n, &fn);
  lw_image_bytes_t out;

  // Flipped bytes in the middle: the block decoder or the checksum catches them.
  uint8_t *bad = malloc(fn);
  memcpy(bad, frame, fn);
  for (size_t i = fn / 2; i < fn / 2 + 16 && i < fn; i++) bad[i] ^= 0x5A;
  assert_invalid(lw__image_decode(bad, fn, "vector_add", &out, &err), "corrupt zstd frame");
  cr_assert_not_null(strstr(err.message, "callable vector_add"), "%s", err.message);
  cr_assert_null(out.data);

  // Cut short: the decoder wants input that is not there.
  assert_invalid(lw__image_decode(frame, fn - 10, "vector_add", &out, &err),
                 "corrupt zstd frame");
  // Only the magic and garbage.
  uint8_t junk[32] = {0x28, 0xB5, 0x2F, 0xFD, 0xFF, 0xFF, 0xFF, 0xFF};
  assert_invalid(lw__image_decode(junk, sizeof junk, "junk", &out, &err),
                 "corrupt zstd frame");
  // Trailing bytes after a good frame.
  uint8_t *tail = malloc(fn + 8);
  memcpy(tail, frame, fn);
  memset(tail + fn, 0xAB, 8);
  assert_invalid(lw__image_decode(tail, fn + 8, "tail", &out, &err), "corrupt zstd frame");

  free(tail);
  free(bad);
  free(frame);
  free(elf);
}

// A zstd frame of zeros bigger than the limit: refused from its header when the size is known,
// and after LW_MAX_IMAGE_BYTES of output when it is not.
Test(image, decompressed_size_above_limit_is_refused, .timeout = 120) {
  size_t n = (size_t)LW_MAX_IMAGE_BYTES + 4096;
  uint8_t *zeros = calloc(1, n);
  cr_assert_not_null(zeros);
  size_t cap = ZSTD_compressBound(n);
  uint8_t *buf = malloc(cap);
  cr_assert_not_null(buf);
  size_t fn = ZSTD_compress(buf, cap, zeros, n, 1);
  cr_assert_not(ZSTD_isError(fn));
  lw_image_bytes_t out;
  assert_invalid(lw__image_decode(buf, fn, "huge", &out, &err), "LW_MAX_IMAGE_BYTES");

  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  cr_assert_not(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0)));
  cr_assert_not(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1)));
  ZSTD_outBuffer o = {buf, cap, 0};
  ZSTD_inBuffer in = {zeros, n, 0};
  cr_assert_eq(ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end), 0);
  cr_assert_eq(ZSTD_getFrameContentSize(buf, o.pos), ZSTD_CONTENTSIZE_UNKNOWN);
  assert_invalid(lw__image_decode(buf, o.pos, "huge", &out, &err), "LW_MAX_IMAGE_BYTES");
  ZSTD_freeCCtx(cctx);
  free(buf);
  free(zeros);
}

// ---- ELF checks ---------------------------------------------------------------------------

Test(image, non_elf_image_is_rejected_for_bad_magic) {
  const char text[] = "#!/bin/sh\necho this is not a kernel\n";
  lw_image_bytes_t out;
  assert_invalid(lw__image_decode(text, sizeof text, "script", &out, &err),
                 "not an ELF image (bad magic)");
  cr_assert_not_null(strstr(err.message, "callable script:"), "%s", err.message);
  // The same check applies to what a zstd frame holds.
  size_t fn = ZSTD_compressBound(sizeof text);
  void *frame = malloc(fn);
  fn = ZSTD_compress(frame, fn, text, sizeof text, 3);
  assert_invalid(lw__image_decode(frame, fn, "script", &out, &err), "bad magic");
  free(frame);
}

Test(image, truncated_elf_header_is_rejected) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  assert_invalid(lw__image_check_elf(elf, 40, "short", &err), "truncated ELF header");
  // A whole header whose program headers lie past the end.
  assert_invalid(lw__image_check_elf(elf, sizeof(Elf64_Ehdr), "short", &err),
                 "ELF program header table [0x40, ");
  cr_assert_eq(lw__image_check_elf(elf, n, "whole", &err), LW_OK, "%s", err.message);
  free(elf);
}

Test(image, wrong_class_endianness_type_or_machine_each_gets_its_own_message) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("vector_add", &n);
  uint8_t *copy = malloc(n);
  Elf64_Ehdr eh;

  memcpy(copy, elf, n);
  copy[EI_CLASS] = ELFCLASS32;
  assert_invalid(lw__image_check_elf(copy, n, "k", &err), "not a 64-bit ELF");

  memcpy(copy, elf, n);
  copy[EI_DATA] = ELFDATA2MSB;
  assert_invalid(lw__image_check_elf(copy, n, "k", &err), "not a little-endian ELF");

  memcpy(copy, elf, n);
  memcpy(&eh, copy, sizeof eh);
  eh.e_type = ET_EXEC;
  memcpy(copy, &eh, sizeof eh);
  assert_invalid(lw__image_check_elf(copy, n, "k", &err), "not a shared object");

  memcpy(copy, elf, n);
  memcpy(&eh, copy, sizeof eh);
  eh.e_machine = EM_RISCV;
  memcpy(copy, &eh, sizeof eh);
  assert_invalid(lw__image_check_elf(copy, n, "k", &err), "built for another machine");

  // EM_CUDA is a CUBIN, for a cuda chip: said as such, whatever its type.
  memcpy(copy, elf, n);
  memcpy(&eh, copy, sizeof eh);
  eh.e_machine = EM_CUDA;
  eh.e_type = ET_EXEC;
  memcpy(copy, &eh, sizeof eh);
  assert_invalid(lw__image_check_elf(copy, n, "k", &err),
                 "a CUDA CUBIN (e_machine 190 EM_CUDA), not a host shared object");
  cr_assert_eq(lw__image_detect_format(copy, n), LW_IMAGE_CUBIN);

  free(copy);
  free(elf);
}

// ---- packing -----------------------------------------------------------------------------

Test(image, pack_rejects_non_elf_and_bad_levels) {
  const char text[] = "not an elf at all, just some text";
  void *frame = (void *)1;
  size_t fn = 1;
  assert_invalid(lw__image_pack((const uint8_t *)text, sizeof text, 3, &frame, &fn, &err),
                 "bad magic");
  cr_assert_null(frame);
  cr_assert_eq(fn, 0);
  size_t n = 0;
  uint8_t *elf = test_read_kernel("noop", &n);
  assert_invalid(lw__image_pack(elf, n, ZSTD_maxCLevel() + 1, &frame, &fn, &err), "level");
  free(elf);
}

// ---- loading ------------------------------------------------------------------------------

static lw_loaded_image_t load_kernel(const char *name, const char *entry) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel(name, &n);
  lw_loaded_image_t img;
  cr_assert_eq(lw__image_load(elf, n, entry, name, &img, &err), LW_OK, "%s", err.message);
  // The loaded image must not depend on the caller's buffer.
  memset(elf, 0, n);
  free(elf);
  return img;
}

Test(image, loaded_vector_add_computes_exact_sums) {
  lw_loaded_image_t img = load_kernel("vector_add", NULL);
  cr_assert_not_null(img.dl);
  cr_assert_not_null(img.main);
  cr_assert_null(img.prepare, "vector_add has no prepare hook");
  cr_assert_null(img.release);

  enum { N = 1000 };
  float a[N], b[N], c[N];
  for (int i = 0; i < N; i++) {
    a[i] = (float)i * 0.5f;
    b[i] = 1000.0f - (float)i;
    c[i] = -1.0f;
  }
  test_ctx_t t;
  test_ctx_init(&t, "vector_add");
  lw_kernel_args_t args = {.n_tensors = 3};
  args.tensor[0].data = a, args.tensor[0].bytes = sizeof a;
  args.tensor[1].data = b, args.tensor[1].bytes = sizeof b;
  args.tensor[2].data = c, args.tensor[2].bytes = sizeof c;
  cr_assert_eq(img.main(&t.ctx, &args), 0);
  for (int i = 0; i < N; i++) cr_assert_eq(c[i], a[i] + b[i], "c[%d]", i);

  args.tensor[1].bytes = sizeof b - 4;
  cr_assert_lt(img.main(&t.ctx, &args), 0, "mismatched sizes are refused");
  lw__image_unload(&img);
  cr_assert_null(img.dl);
}

Test(image, missing_entry_symbol_is_invalid_argument_naming_the_symbol) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel("no_entry", &n);
  lw_loaded_image_t img;
  assert_invalid(lw__image_load(elf, n, NULL, "no_entry", &img, &err),
                 "entry symbol 'lw_kernel_main' not found");
  cr_assert_not_null(strstr(err.message, "callable no_entry"), "%s", err.message);
  cr_assert_null(img.dl);
  // A symbol that only a dependency (libc) defines is not the image's entry either.
  assert_invalid(lw__image_load(elf, n, "strlen", "no_entry", &img, &err),
                 "entry symbol 'strlen' not found");
  // The image's own symbol, named as the entry, loads.
  cr_assert_eq(lw__image_load(elf, n, "lw_kernel_not_main", "no_entry", &img, &err), LW_OK,
               "%s", err.message);
  cr_assert_not_null(img.main);
  lw__image_unload(&img);
  free(elf);
}

Test(image, bad_prepare_hook_is_resolved_and_returns_its_error) {
  lw_loaded_image_t img = load_kernel("bad_prepare", NULL);
  cr_assert_not_null(img.prepare);
  cr_assert_null(img.release);
  test_ctx_t t;
  test_ctx_init(&t, "bad_prepare");
  cr_assert_eq(img.prepare(&t.ctx), -7);
  lw__image_unload(&img);
}

Test(image, big_vector_add_prepares_a_table_computes_exactly_and_releases_it) {
  lw_loaded_image_t img = load_kernel("big_vector_add", NULL);
  cr_assert_not_null(img.prepare);
  cr_assert_not_null(img.release);
  test_ctx_t t;
  test_ctx_init(&t, "big_vector_add");

  enum { N = 4099 };
  static float a[N], b[N], c[N];
  for (int i = 0; i < N; i++) {
    a[i] = (float)(i % 97) * 1.25f;
    b[i] = (float)(i % 13) - 7.0f;
  }
  lw_kernel_args_t args = {.n_tensors = 3};
  args.tensor[0].data = a, args.tensor[0].bytes = sizeof a;
  args.tensor[1].data = b, args.tensor[1].bytes = sizeof b;
  args.tensor[2].data = c, args.tensor[2].bytes = sizeof c;
  cr_assert_eq(img.main(&t.ctx, &args), -4, "main refuses to run before prepare");

  cr_assert_eq(img.prepare(&t.ctx), 0);
  cr_assert_not_null(t.ctx.state, "prepare keeps its table in ctx->state");
  cr_assert_eq(img.main(&t.ctx, &args), 0);
  for (int i = 0; i < N; i++) cr_assert_eq(c[i], a[i] + b[i], "c[%d]", i);
  img.release(&t.ctx);
  cr_assert_null(t.ctx.state);
  lw__image_unload(&img);
}

// glibc looks an object up by its path before anything else, and "/proc/<pid>/fd/N" is reused
// once N is closed: two images must still load as two objects.
Test(image, images_loaded_through_reused_fd_numbers_stay_distinct) {
  lw_loaded_image_t add = load_kernel("vector_add", NULL);
  for (int i = 0; i < 4; i++) {
    lw_loaded_image_t fail = load_kernel("fail", NULL);
    cr_assert_neq(fail.dl, add.dl, "the second load returned the first image");
    test_ctx_t t;
    test_ctx_init(&t, "fail");
    lw_kernel_args_t args = {0};
    cr_assert_eq(fail.main(&t.ctx, &args), -3);
    lw__image_unload(&fail);
  }
  // Two live loads of the same bytes are two objects too (each has its own state).
  lw_loaded_image_t again = load_kernel("vector_add", NULL);
  cr_assert_neq(again.dl, add.dl);
  lw__image_unload(&again);
  lw__image_unload(&add);
}

// The name a loaded image keeps in the loader's list is what a debugger opens, in its own
// process, to read the object's symbols: it must name this process's fd, not "/proc/self"
// (gdb's own fd N there is one of its pipes, and gdb waited on it forever).
Test(image, a_loaded_image_is_named_by_this_process_pid) {
  lw_loaded_image_t img = load_kernel("vector_add", NULL);
  struct link_map *lm = NULL;
  cr_assert_eq(dlinfo(img.dl, RTLD_DI_LINKMAP, &lm), 0, "%s", dlerror());
  char want[64];
  snprintf(want, sizeof want, "/proc/%d/fd/", (int)getpid());
  cr_assert_eq(strncmp(lm->l_name, want, strlen(want)), 0,
               "the image is named '%s', not '%s<fd>'", lm->l_name, want);
  lw__image_unload(&img);
}

Test(image, load_rejects_images_that_fail_the_elf_check) {
  const char text[] = "definitely not ELF, but long enough to be read as a header......";
  lw_loaded_image_t img;
  assert_invalid(lw__image_load((const uint8_t *)text, sizeof text, NULL, "txt", &img, &err),
                 "bad magic");
  cr_assert_null(img.dl);
}

Test(image, load_and_unload_cycles_leave_no_descriptor_open) {
  // Warm up: the first dlopen may open descriptors libc keeps (e.g. for its own caches).
  lw_loaded_image_t img = load_kernel("vector_add", NULL);
  lw__image_unload(&img);
  int before = test_count_fds();
  for (int i = 0; i < 20; i++) {
    img = load_kernel(i % 2 ? "vector_add" : "big_vector_add", NULL);
    lw__image_unload(&img);
  }
  size_t n = 0;
  uint8_t *elf = test_read_kernel("no_entry", &n);
  cr_assert_neq(lw__image_load(elf, n, NULL, "no_entry", &img, &err), LW_OK);
  free(elf);
  cr_assert_eq(test_count_fds(), before, "descriptors leaked by load/unload");
  lw__image_unload(&img);  // a zeroed struct is fine
}
