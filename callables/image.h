// callables/image.h — kernel images: zstd detection and decompression, format detection,
// the checks of each format (callables/image_check.h), and loading an ELF shared object from
// memory (memfd + dlopen) with its entry points resolved.
//
// Thread safety: every function is reentrant; loaded images are independent. glibc matches an
// already-loaded object by path before inode, and /proc/<pid>/fd/N paths are reused once N is
// closed, so lw__image_load checks the path with RTLD_NOLOAD and takes a fresh fd number when
// it is taken (see image.c). The path names the pid, not "self": a debugger opens the name in
// its own process.
#ifndef LANEWORK_CALLABLES_IMAGE_H_
#define LANEWORK_CALLABLES_IMAGE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "callables/image_check.h"
#include "lanework/callable.h"
#include "lanework/kernel.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Plain ELF bytes: borrowed from the caller's image, or owned (decompressed) when owned != NULL.
typedef struct lw_image_bytes {
  const uint8_t *data;
  size_t bytes;
  void *owned;
} lw_image_bytes_t;

// True when the bytes start with the zstd frame magic.
bool lw__image_is_zstd(const void *image, size_t bytes);

// Gives the ELF bytes of image: decompresses a zstd frame (bounded by LW_MAX_IMAGE_BYTES),
// otherwise borrows. Then checks them as an ELF image (lw__image_check_elf). Errors are
// INVALID_ARGUMENT with the callable's name and the reason in err ("callable vector_add:
// corrupt zstd frame: ...", "...: image is not a valid kernel: not an ELF image (bad magic)").
LW_MUST_USE lw_status_t lw__image_decode(const void *image, size_t bytes, const char *name,
                                         lw_image_bytes_t *out, lw_error_t *err);
void lw__image_bytes_release(lw_image_bytes_t *b);

// Decompresses like lw__image_decode and resolves format, without checking the bytes against
// it: LW_IMAGE_AUTO becomes what lw__image_detect_format says; *out_format gets the result.
// INVALID_ARGUMENT for an unknown format value or a bad frame. The chip uses it to refuse a format
// its backend does not load before it checks the bytes.
LW_MUST_USE lw_status_t lw__image_decode_detect(const void *image, size_t bytes,
                                                const char *name, lw_image_format_t format,
                                                lw_image_bytes_t *out,
                                                lw_image_format_t *out_format, lw_error_t *err);

// The check of format f (never AUTO) from callables/image_check.h on plain (decompressed)
// bytes. detected: f was resolved from LW_IMAGE_AUTO (see lw__image_check_opencl_c).
LW_MUST_USE lw_status_t lw__image_check_format(const uint8_t *p, size_t bytes, const char *name,
                                               lw_image_format_t f, bool detected,
                                               lw_error_t *err);

// lw__image_decode_detect, then lw__image_check_format: the bytes of a register, checked as
// the format they are. INVALID_ARGUMENT naming the callable, the format and the reason.
LW_MUST_USE lw_status_t lw__image_decode_format(const void *image, size_t bytes,
                                                const char *name, lw_image_format_t format,
                                                lw_image_bytes_t *out,
                                                lw_image_format_t *out_format, lw_error_t *err);

// The format the bytes look like, in this order: an ELF magic with e_machine EM_CUDA -> CUBIN,
// any other ELF magic -> ELF; the SPIR-V magic -> SPIRV; the fat binary magic -> FATBIN; text
// whose first directive (after comments) is `.version` -> PTX; text with a CUDA-only marker
// (`__global__`, `extern "C"`) -> CUDA_C; anything else -> OPENCL_C (whose check then refuses
// bytes that are not text). The rules of callable.h's lw_image_format_t comment; the
// predicates are in callables/image_check.h.
lw_image_format_t lw__image_detect_format(const uint8_t *data, size_t bytes);

typedef struct lw_loaded_image {
  void *dl;                          // dlopen handle
  lw_kernel_main_fn main;            // the entry symbol
  lw_kernel_prepare_fn prepare;      // lw_kernel_prepare, or NULL
  lw_kernel_release_fn release;      // lw_kernel_release, or NULL
} lw_loaded_image_t;

// Checks elf (lw__image_check_elf) whoever checked it before: dlopen maps what it is given, and
// a bad image must never reach it. Then writes elf to a memfd named after name, dlopens it
// (RTLD_NOW | RTLD_LOCAL) and resolves entry (NULL: LW_DEFAULT_ENTRY) and the optional hooks.
// The memfd is closed before return. Errors: INVALID_ARGUMENT for an image that fails the
// check, a dlopen failure or a missing entry symbol (message has the dlerror text),
// RESOURCE_EXHAUSTED / INTERNAL for memfd failures.
LW_MUST_USE lw_status_t lw__image_load(const uint8_t *elf, size_t bytes, const char *entry,
                                       const char *name, lw_loaded_image_t *out, lw_error_t *err);
// dlcloses. Accepts a zeroed struct.
void lw__image_unload(lw_loaded_image_t *img);

// Compresses an ELF image (checked with lw__image_check_elf) into one zstd frame that records
// its content size and a checksum: the packed .lwk format. level is a zstd level
// (ZSTD_minCLevel..ZSTD_maxCLevel). *out_frame is malloc'ed; the caller frees it.
LW_MUST_USE lw_status_t lw__image_pack(const uint8_t *elf, size_t bytes, int level,
                                       void **out_frame, size_t *out_bytes, lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CALLABLES_IMAGE_H_
