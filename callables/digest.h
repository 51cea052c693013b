// callables/digest.h — callable identity.
//
// The digest is XXH3-128 over this canonical encoding (all integers little endian):
//   "LWCALL2\0" | u64 elf_bytes | elf bytes | u32 entry_len | entry (no NUL) |
//   u32 n_params | n_params bytes of LW_PARAM_* | u32 format | u32 options_len | options
// The elf bytes are the image after decompression, so a packed (.lwk) and a plain image of the
// same kernel have the same digest. format is the resolved lw_image_format_t (never AUTO, so
// AUTO and the format it resolves to give one digest); options are the build options without
// their NUL (NULL and "" are the same).
#ifndef LANEWORK_CALLABLES_DIGEST_H_
#define LANEWORK_CALLABLES_DIGEST_H_

#include <stddef.h>
#include <stdint.h>

#include "lanework/callable.h"

#ifdef __cplusplus
extern "C" {
#endif

// The digest of an ELF image without build options.
void lw__digest_compute(const uint8_t *elf, size_t bytes, const char *entry, uint32_t n_params,
                        const uint8_t *param_dirs, lw_digest_t *out);
// The digest of an image of any resolved format, with its build options (may be NULL).
void lw__digest_compute_format(const uint8_t *image, size_t bytes, const char *entry,
                               uint32_t n_params, const uint8_t *param_dirs,
                               lw_image_format_t format, const char *build_options,
                               lw_digest_t *out);

static inline int lw__digest_equal(lw_digest_t a, lw_digest_t b) {
  return a.lo == b.lo && a.hi == b.hi;
}

// 32 hex chars + NUL.
void lw__digest_format(lw_digest_t d, char out[33]);

// Checks a descriptor's fields (image set, sizes, n_params, param dirs, name/entry lengths,
// format value, build options length).
// INVALID_ARGUMENT with the reason in err.
LW_MUST_USE lw_status_t lw__callable_validate(const lw_callable_t *c, lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CALLABLES_DIGEST_H_
