// tests/kernels/prepare_gate.c — a kernel whose prepare hook holds the register lane until a
// file exists. The file's path is the part of the callable's name after the first ':'
// ("prepare_gate:/tmp/lw-gate-42"); a name without one does not wait. Lets tests keep
// registers outstanding on a chip for as long as they need ("100 registers queued on a chip
// that is then killed") without any timing.
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_prepare(lw_kernel_ctx_t *ctx) {
  const char *path = ctx->name ? strchr(ctx->name, ':') : NULL;
  if (!path) return 0;
  path++;
  struct timespec pause = {0, 200000};
  while (access(path, F_OK) != 0) nanosleep(&pause, NULL);
  return 0;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
