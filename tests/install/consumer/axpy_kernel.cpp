// A consumer's own kernel, in C++, built with lanework_add_kernel against lanework::kernel:
// c[i] = scalar[0] * a[i] + b[i] over float32 tensors a (in), b (in), c (out). It polls
// lw_kernel_should_stop, the C++ spelling of the cancel word's load, every block.
#include <lanework/kernel.h>

#include <cstddef>

namespace {
constexpr std::size_t kBlock = 256;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 3 || args->n_scalars < 1) return -1;
  const std::size_t n = args->tensor[2].bytes / sizeof(float);
  if (args->tensor[0].bytes != n * sizeof(float) || args->tensor[1].bytes != n * sizeof(float)) {
    return -2;
  }
  const float *a = static_cast<const float *>(args->tensor[0].data);
  const float *b = static_cast<const float *>(args->tensor[1].data);
  float *c = static_cast<float *>(args->tensor[2].data);
  const float k = static_cast<float>(args->scalar[0]);
  for (std::size_t start = 0; start < n; start += kBlock) {
    if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
    const std::size_t end = n - start < kBlock ? n : start + kBlock;
    for (std::size_t i = start; i < end; ++i) c[i] = k * a[i] + b[i];
  }
  return 0;
}
