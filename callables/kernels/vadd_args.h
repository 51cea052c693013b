// callables/kernels/vadd_args.h — the argument check shared by the vector-add kernels:
// float32 tensors a (in), b (in), c (out) of equal size. Header-only (kernels link nothing).
#ifndef LANEWORK_KERNELS_VADD_ARGS_H_
#define LANEWORK_KERNELS_VADD_ARGS_H_

#include "lanework/kernel.h"

typedef struct vadd_args {
  const float *a, *b;
  float *c;
  uint64_t n;
} vadd_args_t;

// 0 and *out filled, or the kernel's error code: -1 missing tensors or scalars, -2 sizes.
static inline int vadd_args_check(const lw_kernel_args_t *args, uint32_t n_scalars,
                                  vadd_args_t *out) {
  if (args->n_tensors < 3 || args->n_scalars < n_scalars) return -1;
  uint64_t bytes = args->tensor[2].bytes;
  if (bytes % sizeof(float) != 0) return -2;
  if (args->tensor[0].bytes != bytes || args->tensor[1].bytes != bytes) return -2;
  out->a = args->tensor[0].data;
  out->b = args->tensor[1].data;
  out->c = args->tensor[2].data;
  out->n = bytes / sizeof(float);
  return 0;
}

#endif  // LANEWORK_KERNELS_VADD_ARGS_H_
