// tests/fuzz/tiny_kernel.c — the smallest kernel a linker makes (about 1.5 KiB: no libc, no
// build id, no separate code pages, stripped), the valid ELF seed of the image_check fuzz
// target. tests/fuzz/CMakeLists.txt builds it with its own compiler line, without the
// sanitizers of the fuzz build.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
