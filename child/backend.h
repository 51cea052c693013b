// child/backend.h — the chip backend interface. The choice is made at run time from
// lw_chip_config_t.backend, hence a vtable (the only one in lanework).
//
// A backend turns kernel images into modules and launches them. `sim` (backend_sim.c) loads
// ELF images and runs kernels on the calling CPU thread; `opencl` (backend_opencl.c, built
// when CMake finds OpenCL) builds OpenCL C or SPIR-V programs in `load` and enqueues NDRanges
// in slices in `launch`, checking the cancel word between slices; `cuda` (backend_cuda.c, built
// on every machine, the driver loaded with dlopen at open) compiles on the register lane and
// loads modules on the run lane. Each backend lists the image formats it loads; the chip
// refuses the others before calling load.
//
// Threads: load/unload are called on the chip's register lane, launch on its run lane; the
// two may run at the same time on different modules. open/close on the thread that opens and
// closes the chip. A backend MUST allow load concurrent with launch.
#ifndef LANEWORK_CHILD_BACKEND_H_
#define LANEWORK_CHILD_BACKEND_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanes/cancel.h"
#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/config.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Room for a kernel's lw_kernel_fail text: what is left of an lw_error_t message after the
// chip's "chip N: kernel NAME failed: " and " (returned RC)" around it for a short name.
#define LW_BACKEND_FAIL_TEXT_BYTES 192

typedef struct lw_backend_launch_result {
  int32_t kernel_rc;        // the kernel's return value
  uint64_t kernel_wall_ns;  // the kernel's own execution time
  // When the backend read the clock as the kernel ended (lw__now_ns), or 0: the chip then
  // reads it itself. Saves the run lane a clock read per run where the backend has one.
  int64_t end_ns;
  // Why the kernel failed (lw_kernel_fail), NUL-terminated printable text; "" when it said
  // nothing. The caller sets it to "" before launch; a backend whose kernels cannot say why
  // leaves it so.
  char fail_text[LW_BACKEND_FAIL_TEXT_BYTES];
} lw_backend_launch_result_t;

// What load gets: the image (decompressed, its format resolved and checked) and the callable's
// description. Everything is borrowed for the duration of the call.
typedef struct lw_backend_image {
  const uint8_t *data;
  size_t bytes;
  lw_image_format_t format;    // never LW_IMAGE_AUTO
  const char *entry;           // never NULL
  const char *name;            // never NULL
  const char *build_options;   // never NULL ("" for none)
  uint32_t n_params;
  const uint8_t *param_dirs;   // n_params entries of LW_PARAM_*
} lw_backend_image_t;

// What launch gets about the run besides its args, borrowed for the call: the cancel word the
// kernel polls and the generation the run started with, and the identity the chip's run span
// carries in the trace, so a backend that runs in slices records them under the same run.
typedef struct lw_backend_run {
  lw_cancel_word_t *cancel_word;
  uint64_t generation;
  uint64_t trace_run;   // the run span's run and task ids (lanes/trace.h)
  uint64_t trace_task;
  int32_t chip;         // the chip's id in messages and trace events
  // The run lane's read of the monotonic clock as it started the run, just before the launch
  // (0: none): a backend that times the kernel on the host may take it as the kernel's start
  // instead of reading the clock again.
  int64_t start_ns;
} lw_backend_run_t;

// Bit for format f in lw_backend_ops_t.formats.
#define LW_BACKEND_FORMAT_BIT(f) (1u << (unsigned)(f))

// LW_MUST_USE is [[nodiscard]] outside the library (lanework/status.h), which applies to
// functions, not to the pointers below: these say warn_unused_result themselves.
#define LW__BACKEND_MUST_USE __attribute__((warn_unused_result))

typedef struct lw_backend_ops {
  const char *name;
  uint32_t formats;  // LW_BACKEND_FORMAT_BIT of every format load accepts
  LW__BACKEND_MUST_USE lw_status_t (*open)(const lw_chip_config_t *cfg, void **out_device,
                                           lw_error_t *err);
  void (*close)(void *device);
  // Loads the image (sim: dlopen + the prepare hook; opencl: build the program, create the
  // kernel). On failure nothing stays loaded and err names the callable and the reason.
  LW__BACKEND_MUST_USE lw_status_t (*load)(void *device, const lw_backend_image_t *image,
                                           void **out_module, lw_error_t *err);
  // Runs the release hook and unloads.
  void (*unload)(void *device, void *module);
  // Runs module on args to completion. The kernel sees (run->cancel_word, run->generation).
  // LW_OK means the kernel ran (its return value is in out->kernel_rc); an error status means
  // it could not be launched. A backend that executes a run in slices records each slice with
  // lw__trace_slice (lanes/trace.h) under run's identity, on the calling (run lane) thread.
  LW__BACKEND_MUST_USE lw_status_t (*launch)(void *device, void *module,
                                             const lw_kernel_args_t *args,
                                             const lw_backend_run_t *run,
                                             lw_backend_launch_result_t *out, lw_error_t *err);
  // Optional (NULL: nothing). Called on the run lane after each run finished and its handle
  // completed (at L3: its completion pushed), before the lane takes the next item: work a run
  // leaves that its result need not wait for (cuda: unregistering host memory).
  void (*after_run)(void *device);
  // Optional (NULL: never). True once the device can no longer run anything (a sticky CUDA
  // error): every later launch fails at once, and a chip child that sees it after a task
  // failed exits LW_CHILD_EXIT_DEVICE_LOST once the task's completion is pushed, so the
  // worker respawns it on a fresh device context. Any thread.
  bool (*device_lost)(void *device);
  // Optional (NULL: ignored). [base, base + bytes) stays mapped at this address, holding
  // tensors of later runs, for as long as the device is open (an L3 chip child's view of the
  // worker's arena): the backend may map it into the device once, at its first use, rather
  // than each run's tensors in it per run. Called at most once, after open and before any
  // launch, on the thread that opened the device.
  void (*host_region)(void *device, void *base, uint64_t bytes);
} lw_backend_ops_t;

// The backends built into this library (child/backend.c), sim first; their number in *out_n.
// Static, never NULL.
const lw_backend_ops_t *const *lw__backend_list(uint32_t *out_n);

// The backend of lw__backend_list called name, or NULL (an unknown name, or a backend not
// built in).
const lw_backend_ops_t *lw__backend_find(const char *name);

// Room for lw__backend_names' text.
#define LW_BACKEND_NAMES_BYTES 64

// The names of lw__backend_list, in its order, for messages: "sim" or "sim, opencl". Static;
// thread-safe.
const char *lw__backend_names(void);

// When name is a backend lanework knows but this build lacks: why, and what to install (a
// static string); NULL otherwise.
const char *lw__backend_missing_reason(const char *name);

extern const lw_backend_ops_t lw__backend_sim;
extern const lw_backend_ops_t lw__backend_cuda;

// One CUDA device as `lanework info` shows it; index is its device_id for the cuda chip.
typedef struct lw_cuda_device_info {
  int32_t index;
  int32_t cc_major, cc_minor;  // compute capability: sm_<major><minor>
  uint32_t multiprocessors;
  uint64_t memory_bytes;
  char name[128];
  char uuid[48];               // "GPU-..." (or "MIG-..." for a MIG instance)
} lw_cuda_device_info_t;

// What `lanework info` says about CUDA on this machine: the driver's and NVRTC's versions
// (as CUDA numbers them, 13000 = 13.0; 0 when absent) and why NVRTC is absent ("" when found).
typedef struct lw_cuda_info {
  int32_t driver_version;
  int32_t nvrtc_major, nvrtc_minor;
  char driver_path[256];
  char nvrtc_missing[LW_ERROR_MESSAGE_BYTES];
} lw_cuda_info_t;

// Loads the driver (once per process; this calls cuInit in the calling process, so never in a
// worker's parent) and fills up to cap devices in ordinal order; *out_n is the number of
// devices (may exceed cap). UNAVAILABLE saying why when there is no driver or no device.
LW_MUST_USE lw_status_t lw__cuda_list(lw_cuda_info_t *info, lw_cuda_device_info_t *out,
                                      uint32_t cap, uint32_t *out_n, lw_error_t *err);
#ifdef LW_HAVE_OPENCL
extern const lw_backend_ops_t lw__backend_opencl;

// One OpenCL device as `lanework info` shows it; index is its device_id for the opencl chip.
typedef struct lw_opencl_device_info {
  int32_t index;
  uint32_t compute_units;
  char platform[128];
  char device[128];
  char type[16];     // "CPU", "GPU", "accelerator" or "other"
  char version[64];  // CL_DEVICE_VERSION
} lw_opencl_device_info_t;

// Fills up to cap devices in device_id order; *out_n is the number of devices (may exceed
// cap). UNAVAILABLE (saying what to install) when there is no platform or no device.
LW_MUST_USE lw_status_t lw__opencl_list(lw_opencl_device_info_t *out, uint32_t cap,
                                        uint32_t *out_n, lw_error_t *err);
#endif

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_BACKEND_H_
