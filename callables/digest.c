// callables/digest.c — callable identity (XXH3-128 over a canonical encoding) and descriptor
// validation.
#include "callables/digest.h"

#include <stdio.h>
#include <string.h>

// The state struct is only visible with XXH_STATIC_LINKING_ONLY; keeping it on the stack
// spares an allocation that lw__digest_compute (void) could not report. The functions still
// come from libxxhash.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "callables/image.h"
#include "lanes/error.h"

// Longest name or entry accepted, in characters (a 128-byte buffer with its NUL holds it).
#define LW_CALLABLE_MAX_NAME_CHARS 127

// Version 2 of the encoding added the format and the build options.
static const uint8_t k_domain[8] = {'L', 'W', 'C', 'A', 'L', 'L', '2', '\0'};

static void put_u32(uint8_t b[4], uint32_t v) {
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t b[8], uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

void lw__digest_compute(const uint8_t *elf, size_t bytes, const char *entry, uint32_t n_params,
                        const uint8_t *param_dirs, lw_digest_t *out) {
  lw__digest_compute_format(elf, bytes, entry, n_params, param_dirs, LW_IMAGE_ELF, NULL, out);
}

void lw__digest_compute_format(const uint8_t *elf, size_t bytes, const char *entry,
                               uint32_t n_params, const uint8_t *param_dirs,
                               lw_image_format_t format, const char *build_options,
                               lw_digest_t *out) {
  if (entry == NULL) entry = LW_DEFAULT_ENTRY;
  if (build_options == NULL) build_options = "";
  size_t options_len = strlen(build_options);
  size_t entry_len = strlen(entry);
  uint8_t u64[8], u32[4];

  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, k_domain, sizeof k_domain);
  put_u64(u64, (uint64_t)bytes);
  XXH3_128bits_update(&state, u64, sizeof u64);
  if (bytes > 0) XXH3_128bits_update(&state, elf, bytes);
  put_u32(u32, (uint32_t)entry_len);
  XXH3_128bits_update(&state, u32, sizeof u32);
  XXH3_128bits_update(&state, entry, entry_len);
  put_u32(u32, n_params);
  XXH3_128bits_update(&state, u32, sizeof u32);
  if (n_params > 0) XXH3_128bits_update(&state, param_dirs, n_params);
  put_u32(u32, (uint32_t)format);
  XXH3_128bits_update(&state, u32, sizeof u32);
  put_u32(u32, (uint32_t)options_len);
  XXH3_128bits_update(&state, u32, sizeof u32);
  if (options_len > 0) XXH3_128bits_update(&state, build_options, options_len);
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  out->lo = h.low64;
  out->hi = h.high64;
}

// Most significant half first, like XXH128's canonical form.
void lw__digest_format(lw_digest_t d, char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)d.hi, (unsigned long long)d.lo);
}

lw_status_t lw__callable_validate(const lw_callable_t *c, lw_error_t *err) {
  if (c == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "callable: descriptor is NULL");
  }
  // Check the name first: every later message prints it.
  if (c->name != NULL && strnlen(c->name, LW_CALLABLE_MAX_NAME_CHARS + 1) >
                             LW_CALLABLE_MAX_NAME_CHARS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %.32s...: name is longer than %d characters", c->name,
                         LW_CALLABLE_MAX_NAME_CHARS);
  }
  const char *name = c->name ? c->name : "callable";
  if (c->entry != NULL) {
    size_t n = strnlen(c->entry, LW_CALLABLE_MAX_NAME_CHARS + 1);
    if (n > LW_CALLABLE_MAX_NAME_CHARS) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "callable %s: entry is longer than %d characters", name,
                           LW_CALLABLE_MAX_NAME_CHARS);
    }
    if (n == 0) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "callable %s: entry is an empty string (NULL gives %s)", name,
                           LW_DEFAULT_ENTRY);
    }
  }
  if (c->image == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "callable %s: image is NULL", name);
  }
  if (c->image_bytes == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: image is empty (image_bytes is 0)", name);
  }
  if (c->image_bytes > LW_MAX_IMAGE_BYTES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: image_bytes %zu exceeds LW_MAX_IMAGE_BYTES (%llu)", name,
                         c->image_bytes, (unsigned long long)LW_MAX_IMAGE_BYTES);
  }
  if (c->n_params > LW_MAX_PARAMS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: n_params %u exceeds LW_MAX_PARAMS (%d)", name,
                         c->n_params, LW_MAX_PARAMS);
  }
  if (c->n_params > 0 && c->param_dirs == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: param_dirs is NULL but n_params is %u", name,
                         c->n_params);
  }
  for (uint32_t i = 0; i < c->n_params; i++) {
    unsigned dir = c->param_dirs[i], base = dir & ~(unsigned)LW_PARAM_LIVE;
    if (base > LW_PARAM_SCALAR) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "callable %s: param_dirs[%u] is %u, not an LW_PARAM_* value (0..%d, "
                           "IN or OUT may add LW_PARAM_LIVE)",
                           name, i, dir, LW_PARAM_SCALAR);
    }
    // A live tensor is copied one way only (host to kernel, or kernel to host) while the run
    // runs: an INOUT one would have two writers, and a scalar is no memory at all.
    if ((dir & LW_PARAM_LIVE) && base != LW_PARAM_IN && base != LW_PARAM_OUT) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "callable %s: param_dirs[%u] is %s | LW_PARAM_LIVE: only IN and OUT "
                           "parameters can be live",
                           name, i, base == LW_PARAM_INOUT ? "LW_PARAM_INOUT" : "LW_PARAM_SCALAR");
    }
  }
  if ((uint32_t)c->format > (uint32_t)LW_IMAGE_FATBIN) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: format %d is not an LW_IMAGE_* value (%d..%d)", name,
                         (int)c->format, LW_IMAGE_AUTO, LW_IMAGE_FATBIN);
  }
  if (c->build_options != NULL &&
      strnlen(c->build_options, LW_MAX_BUILD_OPTIONS_BYTES) >= LW_MAX_BUILD_OPTIONS_BYTES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: build_options are longer than %d characters", name,
                         LW_MAX_BUILD_OPTIONS_BYTES - 1);
  }
  return LW_OK;
}

lw_status_t lw_callable_digest(const lw_callable_t *c, lw_digest_t *out) {
  lw_error_t err;
  lw__error_clear(&err);
  if (out == NULL) return lw__fail(LW_INVALID_ARGUMENT, "lw_callable_digest: out is NULL");
  *out = (lw_digest_t){0};
  lw_status_t st = lw__callable_validate(c, &err);
  if (st != LW_OK) return lw__last_error_store(&err);
  lw_image_bytes_t elf;
  lw_image_format_t format = LW_IMAGE_AUTO;
  st = lw__image_decode_format(c->image, c->image_bytes, c->name, c->format, &elf, &format,
                               &err);
  if (st != LW_OK) return lw__last_error_store(&err);
  lw__digest_compute_format(elf.data, elf.bytes, c->entry, c->n_params, c->param_dirs, format,
                            c->build_options, out);
  lw__image_bytes_release(&elf);
  return LW_OK;
}
