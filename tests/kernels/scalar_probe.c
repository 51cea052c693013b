// tests/kernels/scalar_probe.c — reads every scalar it was given through each accessor of
// lanework/kernel.h, so tests can check that typed scalars (lw_args_add_f32/_f64/_i64) reach the
// kernel with their type (L2 directly, L3 through the mailbox). tensor[0] is an array of
// scalar_probe_t, one per scalar (tests/kernels/scalar_probe.h).
#include "scalar_probe.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 1 ||
      args->tensor[0].bytes < (uint64_t)(args->n_scalars + 1) * sizeof(scalar_probe_t)) {
    return lw_kernel_fail(ctx, "needs one record per scalar plus one");
  }
  scalar_probe_t *out = args->tensor[0].data;
  // One index past the last scalar: the accessors read 0 there.
  for (uint32_t i = 0; i <= args->n_scalars; ++i) {
    out[i].type = (uint32_t)lw_kernel_arg_type(args, i);
    out[i].f32 = lw_kernel_arg_f32(args, i);
    out[i].u64 = lw_kernel_arg_u64(args, i);
    out[i].i64 = lw_kernel_arg_i64(args, i);
    out[i].f64 = lw_kernel_arg_f64(args, i);
  }
  return 0;
}
