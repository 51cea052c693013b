// lanework/callable.h — what a task runs.
//
// A chip callable is a kernel image (ELF .so bytes, OpenCL C source, SPIR-V IL, CUDA C source,
// PTX, a CUBIN or a CUDA fat binary, each plain or as a zstd frame; the compression is
// auto-detected), its format, build options, an entry symbol and a signature. The descriptor only
// points at caller memory: registering copies what it needs, so the caller may free the image once
// register (or, for the async form, its handle) has finished.
//
// Identity: the digest is XXH3-128 over a canonical encoding of {image bytes after
// decompression, entry, signature, format (after AUTO is resolved), build options}. Same
// digest = same callable: registering it twice on one chip gives two handles on one
// refcounted slot.
#ifndef LANEWORK_CALLABLE_H_
#define LANEWORK_CALLABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_DEFAULT_ENTRY "lw_kernel_main"
#define LW_MAX_PARAMS 32
#define LW_MAX_IMAGE_BYTES (256ull << 20)  // decompressed; larger images are INVALID_ARGUMENT
// Build options are at most this many bytes with their NUL (longer is INVALID_ARGUMENT).
#define LW_MAX_BUILD_OPTIONS_BYTES 256

// What the image bytes are (after zstd decompression). Each backend loads some formats only:
// `sim` loads ELF; `opencl` OpenCL C and SPIR-V; `cuda` CUDA C, PTX, CUBIN and fatbin.
// Registering another format on a backend fails INVALID_ARGUMENT naming the backend, the
// callable and the format. Every register checks the bytes as their format first (an image
// that is not what its format says is INVALID_ARGUMENT naming the callable and what is wrong).
typedef enum lw_image_format {
  // Decided from the bytes, in this order:
  //   ELF magic with e_machine EM_CUDA (190) -> CUBIN; any other ELF magic -> ELF;
  //   SPIR-V magic (0x07230203)               -> SPIRV;
  //   fat binary magic (0xBA55ED50, LE word)  -> FATBIN;
  //   text whose first directive after comments is `.version` -> PTX;
  //   source text: OpenCL C and CUDA C cannot be told apart by a magic, so text holding a
  //   CUDA-only marker outside comments and strings (the keyword `__global__`, or
  //   `extern "C"`) is CUDA C, and any other text is OpenCL C (OpenCL C spells its address
  //   space `__global` and has no linkage specifications). Name the format to skip the guess.
  LW_IMAGE_AUTO = 0,
  LW_IMAGE_ELF = 1,       // a host shared object exporting lw_kernel_main (lanework/kernel.h)
  LW_IMAGE_OPENCL_C = 2,  // OpenCL C source text; entry names the __kernel function
  LW_IMAGE_SPIRV = 3,     // SPIR-V IL (clCreateProgramWithIL); entry names the kernel
  LW_IMAGE_CUDA_C = 4,    // CUDA C/C++ source (NVRTC); entry names the extern "C" __global__
                          // function (lanework/kernel_cuda.h for the cancel word)
  LW_IMAGE_PTX = 5,       // PTX assembly text; entry names the .entry
  LW_IMAGE_CUBIN = 6,     // a CUDA ELF (e_machine EM_CUDA) for one sm_XY
  LW_IMAGE_FATBIN = 7,    // a CUDA fat binary (CUBINs and/or PTX for several targets)
  // Formats added later take the next numbers; the range checks end at the last one.
} lw_image_format_t;

enum {
  LW_PARAM_IN = 0,
  LW_PARAM_OUT = 1,
  LW_PARAM_INOUT = 2,
  LW_PARAM_SCALAR = 3,
  // Or'ed with LW_PARAM_IN or LW_PARAM_OUT: a live tensor, through which the host and a kernel
  // talk while its run runs (a word the host sets to steer the kernel, a progress word the host
  // watches). The host's stores to a live IN tensor reach the kernel, and the kernel's stores
  // to a live OUT tensor reach host memory, while the run runs: at once where kernels use host
  // memory itself (sim), and at the latest at the next slice boundary where a backend runs a
  // kernel in slices on a device with memory of its own (opencl copies a live IN tensor to the
  // device before every slice and a live OUT tensor back after every slice; a work-item must
  // therefore end on its own, not spin until a live word changes: docs/opencl.md). Only the
  // host writes a live IN tensor during the run, only the kernel a live OUT one. INOUT and
  // SCALAR parameters cannot be live (INVALID_ARGUMENT at register). A live parameter is part
  // of the signature, so of the digest.
  LW_PARAM_LIVE = 0x10,
};

typedef struct lw_callable {
  const char *name;          // for messages and traces; NULL gives "callable"
  // The kernel image in its format (see lw_image_format_t), plain or as a zstd frame: what the
  // chip's backend loads. `sim`: an ELF .so exporting lw_kernel_main (lanework/kernel.h).
  // `opencl`: OpenCL C source or SPIR-V IL. `cuda`: CUDA C source, PTX, a CUBIN or a fatbin.
  const void *image;
  size_t image_bytes;
  const char *entry;         // NULL gives LW_DEFAULT_ENTRY
  // The signature: the kernel's parameters in order. Each LW_PARAM_IN / OUT / INOUT takes the
  // next tensor of a run's args, each LW_PARAM_SCALAR the next scalar. Every submit (lw_chip_run,
  // lw_chip_run_async, lw_orch_submit_next_level and its group form) checks the args' counts
  // against it, on every backend, and refuses a mismatch with INVALID_ARGUMENT naming the
  // callable, the expected and the given counts, before anything runs.
  // n_params 0 (param_dirs NULL) means "no signature given", not "no args": such a callable's
  // args are not checked and its kernel reads what it is handed (lw_callable_load_file gives
  // this; the example and test kernels rely on it). A kernel that takes nothing therefore
  // cannot be told apart from one without a signature: both are unchecked.
  uint32_t n_params;         // <= LW_MAX_PARAMS
  const uint8_t *param_dirs; // n_params entries of LW_PARAM_*; NULL when n_params == 0
  // Fields added after the first release sit here, at the end, so a descriptor zeroed by
  // older code means AUTO and no options.
  lw_image_format_t format;  // LW_IMAGE_AUTO (0) detects it from the bytes
  // Passed to the device compiler (e.g. "-DN=4"); NULL or "" for none. Ignored by formats
  // that are not compiled (ELF), but still part of the digest.
  const char *build_options;
} lw_callable_t;

// Opaque: an id in a per-chip (L2) or per-worker (L3) table, never a slot index. 0 is never a
// valid handle.
typedef struct lw_callable_handle {
  uint64_t id;
} lw_callable_handle_t;

typedef struct lw_digest {
  uint64_t lo, hi;
} lw_digest_t;

// Reads a kernel image file (.so, or a packed .lwk from `lanework pack`) into out. The image
// buffer and the name are heap copies owned by out: release them with lw_callable_free_loaded.
// name is the file's base name without extension; entry is LW_DEFAULT_ENTRY.
LW_API LW_MUST_USE lw_status_t lw_callable_load_file(const char *path, lw_callable_t *out);
LW_API void lw_callable_free_loaded(lw_callable_t *c);

// The format's name for messages ("ELF", "OpenCL C", "SPIR-V", "CUDA C", "PTX", "CUBIN",
// "fatbin", "AUTO"; "unknown" otherwise).
LW_API const char *lw_image_format_name(lw_image_format_t f);

// Computes the digest (decompressing a zstd image first). INVALID_ARGUMENT for a malformed
// descriptor or a corrupt zstd frame.
LW_API LW_MUST_USE lw_status_t lw_callable_digest(const lw_callable_t *c, lw_digest_t *out);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CALLABLE_H_
