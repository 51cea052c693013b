// tests/kernels/launch_probe.c — records the launch geometry it was given, so tests can check
// that lw_args_set_launch reaches the kernel (L2 directly, L3 through the mailbox):
//   uint64 out[16] in tensor[0]: out[0] = ctx->launch.dims, out[1..3] = ctx->launch.global,
//   out[4..6] = ctx->launch.local, out[7] = ctx->abi_version, out[8..14] = the same seven
//   values of ctx->launch read through args->launch (dims, global, local), out[15] = 1.
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 1 || args->tensor[0].bytes < 16 * sizeof(uint64_t)) return -22;
  uint64_t *out = args->tensor[0].data;
  out[0] = ctx->launch.dims;
  for (int i = 0; i < 3; ++i) {
    out[1 + i] = ctx->launch.global[i];
    out[4 + i] = ctx->launch.local[i];
  }
  out[7] = ctx->abi_version;
  out[8] = args->launch.dims;
  for (int i = 0; i < 3; ++i) {
    out[9 + i] = args->launch.global[i];
    out[12 + i] = args->launch.local[i];
  }
  out[15] = 1;
  return 0;
}
