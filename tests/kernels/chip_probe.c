// tests/kernels/chip_probe.c — records which device the sim backend opened for its chip, so
// tests can check where a worker's n_devices put each chip:
//   int64 out[2] in tensor[0]: out[0] = ctx->chip_id (the device the backend opened; the sim
//   backend hands a kernel its device), out[1] = 1 once written.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 1 || args->tensor[0].bytes < 2 * sizeof(int64_t)) return -22;
  int64_t *out = args->tensor[0].data;
  out[0] = ctx->chip_id;
  out[1] = 1;
  return 0;
}
