// vector_add: c[i] = a[i] + b[i] over float32 tensors a (in), b (in), c (out).
#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  if (args->n_tensors < 3) return -1;
  uint64_t bytes = args->tensor[2].bytes;
  if (bytes % sizeof(float) != 0) return -2;
  if (args->tensor[0].bytes != bytes || args->tensor[1].bytes != bytes) return -2;
  const float *a = args->tensor[0].data;
  const float *b = args->tensor[1].data;
  float *c = args->tensor[2].data;
  uint64_t n = bytes / sizeof(float);
  for (uint64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
  return 0;
}
