// saxpy: y[i] = a * x[i] + y[i] over float32 tensors.
// Signature: IN x (float[n]), INOUT y (float[n]), SCALAR a (f32: lw_args_add_f32).
// n is the tensors' length in floats. Wrong arguments fail the run with lw_kernel_fail, so
// the caller's error says what was wrong instead of only a return code.
#include <stddef.h>

#include "lanework/kernel.h"

// Floats done between two looks at lw_kernel_should_stop: long enough that the check costs
// nothing, short enough that a cancel lands within microseconds.
#define SAXPY_BLOCK 65536u

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors != 2 || args->n_scalars != 1) {
    return lw_kernel_fail(ctx, "expects 2 tensors (x, y) and 1 scalar (a), got %u and %u",
                          args->n_tensors, args->n_scalars);
  }
  if (lw_kernel_arg_type(args, 0) != LW_SCALAR_F32) {
    return lw_kernel_fail(ctx, "scalar a must be an f32 (lw_args_add_f32), got type %d",
                          (int)lw_kernel_arg_type(args, 0));
  }
  uint64_t x_bytes = args->tensor[0].bytes, y_bytes = args->tensor[1].bytes;
  if (x_bytes != y_bytes) {
    return lw_kernel_fail(ctx, "x has %llu bytes but y has %llu", (unsigned long long)x_bytes,
                          (unsigned long long)y_bytes);
  }
  if (x_bytes % sizeof(float) != 0) {
    return lw_kernel_fail(ctx, "x and y have %llu bytes, not a whole number of floats",
                          (unsigned long long)x_bytes);
  }
  const float *x = args->tensor[0].data;
  float *y = args->tensor[1].data;
  const float a = lw_kernel_arg_f32(args, 0);
  uint64_t n = x_bytes / sizeof(float);
  for (uint64_t start = 0; start < n; start += SAXPY_BLOCK) {
    if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    uint64_t end = n - start < SAXPY_BLOCK ? n : start + SAXPY_BLOCK;
    for (uint64_t i = start; i < end; ++i) y[i] = a * x[i] + y[i];
  }
  return 0;
}
