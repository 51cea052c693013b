// repeat_vector_add: c[i] = a[i] + b[i], repeated scalar[0] times over float32 tensors
// a (in), b (in), c (out). A stand-in for a long-running kernel (C1 of the overlap benchmark):
// it does the same work scalar[0] times and polls for cancellation every block.
#include "lanework/kernel.h"

// About 64 KiB of c per block: short enough that a cancel lands within microseconds.
#define BLOCK_FLOATS (16u * 1024u)

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 3 || args->n_scalars < 1) return -1;
  uint64_t bytes = args->tensor[2].bytes;
  if (bytes % sizeof(float) != 0) return -2;
  if (args->tensor[0].bytes != bytes || args->tensor[1].bytes != bytes) return -2;
  const float *a = args->tensor[0].data;
  const float *b = args->tensor[1].data;
  float *c = args->tensor[2].data;
  uint64_t n = bytes / sizeof(float);
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
