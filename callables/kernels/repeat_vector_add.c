// repeat_vector_add: c[i] = a[i] + b[i], repeated scalar[0] times over float32 tensors
// a (in), b (in), c (out). A stand-in for a long-running kernel (C1 of the overlap benchmark):
// it does the same work scalar[0] times and polls for cancellation every block.
#include "vadd_args.h"

// About 64 KiB of c per block: short enough that a cancel lands within microseconds.
#define BLOCK_FLOATS (16u * 1024u)

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  vadd_args_t v;
  int rc = vadd_args_check(args, 1, &v);
  if (rc != 0) return rc;
  const float *a = v.a, *b = v.b;
  float *c = v.c;
  uint64_t n = v.n;
  uint64_t repeats = args->scalar[0];
  for (uint64_t r = 0; r < repeats; r++) {
    for (uint64_t start = 0; start < n; start += BLOCK_FLOATS) {
      if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
      uint64_t end = n - start < BLOCK_FLOATS ? n : start + BLOCK_FLOATS;
      for (uint64_t i = start; i < end; i++) c[i] = a[i] + b[i];
    }
    // The compiler must believe memory changed, or it would keep one pass of identical
    // stores and drop the other repeats.
    __asm__ volatile("" ::: "memory");
  }
  // With zero repeats or empty tensors, still notice a cancel that came before the start.
  return lw_kernel_should_stop(ctx) ? LW_KERNEL_CANCELLED : 0;
}
