// vector_add: c[i] = a[i] + b[i] over float32 tensors a (in), b (in), c (out).
#include "vadd_args.h"

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  vadd_args_t v;
  int rc = vadd_args_check(args, 0, &v);
  if (rc != 0) return rc;
  for (uint64_t i = 0; i < v.n; i++) v.c[i] = v.a[i] + v.b[i];
  return 0;
}
