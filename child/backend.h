// child/backend.h — the chip backend interface. The choice is made at run time from
// lw_chip_config_t.backend, hence a vtable (the only one in lanework).
//
// A backend turns ELF kernel images into modules and launches them. `sim` (backend_sim.c)
// runs kernels on the calling CPU thread; a device backend (e.g. CUDA loaded with dlopen)
// would load a device image in `load` and enqueue + synchronize in `launch`, polling the
// cancel word between kernel blocks.
//
// Threads: load/unload are called on the chip's register lane, launch on its run lane; the
// two may run at the same time on different modules. open/close on the thread that opens and
// closes the chip. A backend MUST allow load concurrent with launch.
#ifndef LANEWORK_CHILD_BACKEND_H_
#define LANEWORK_CHILD_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "lanes/cancel.h"
#include "lanework/args.h"
#include "lanework/config.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_backend_launch_result {
  int32_t kernel_rc;        // the kernel's return value
  uint64_t kernel_wall_ns;  // the kernel's own execution time
} lw_backend_launch_result_t;

typedef struct lw_backend_ops {
  const char *name;
  LW_MUST_USE lw_status_t (*open)(const lw_chip_config_t *cfg, void **out_device,
                                  lw_error_t *err);
  void (*close)(void *device);
  // Loads elf (decompressed) and runs the kernel's prepare hook. On failure nothing stays
  // loaded and err names the callable and the reason.
  LW_MUST_USE lw_status_t (*load)(void *device, const uint8_t *elf, size_t bytes,
                                  const char *entry, const char *name, void **out_module,
                                  lw_error_t *err);
  // Runs the release hook and unloads.
  void (*unload)(void *device, void *module);
  // Runs module on args to completion. The kernel sees (cancel_word, generation). LW_OK means
  // the kernel ran (its return value is in out->kernel_rc); an error status means it could
  // not be launched.
  LW_MUST_USE lw_status_t (*launch)(void *device, void *module, const lw_kernel_args_t *args,
                                    lw_cancel_word_t *cancel_word, uint64_t generation,
                                    lw_backend_launch_result_t *out, lw_error_t *err);
} lw_backend_ops_t;

// The backend called name, or NULL.
const lw_backend_ops_t *lw__backend_find(const char *name);

extern const lw_backend_ops_t lw__backend_sim;

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_BACKEND_H_
