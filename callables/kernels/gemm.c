// gemm: C[MxN] = A[MxK] * B[KxN], row-major float32. Scalars M, N, K; tensors A (in),
// B (in), C (out). Blocked over rows and the K dimension; polls for cancellation per block.
#include <stddef.h>

#include "lanework/kernel.h"

#define BM 32u
#define BK 64u

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  if (args->n_tensors < 3 || args->n_scalars < 3) return -1;
  uint64_t m = args->scalar[0], n = args->scalar[1], k = args->scalar[2];
  // Reject sizes whose byte counts would overflow before comparing them.
  const uint64_t lim = 1ull << 28;
  if (m > lim || n > lim || k > lim) return -2;
  if ((m && k > UINT64_MAX / 4 / m) || (k && n > UINT64_MAX / 4 / k) ||
      (m && n > UINT64_MAX / 4 / m))
    return -2;
  if (args->tensor[0].bytes != m * k * 4 || args->tensor[1].bytes != k * n * 4 ||
      args->tensor[2].bytes != m * n * 4)
    return -2;
  const float *a = args->tensor[0].data;
  const float *b = args->tensor[1].data;
  float *c = args->tensor[2].data;
  for (uint64_t i = 0; i < m * n; i++) c[i] = 0.0f;
  for (uint64_t i0 = 0; i0 < m; i0 += BM) {
    uint64_t i1 = m - i0 < BM ? m : i0 + BM;
    for (uint64_t k0 = 0; k0 < k; k0 += BK) {
      if (lw_kernel_should_stop(ctx)) return LW_KERNEL_CANCELLED;
      uint64_t k1 = k - k0 < BK ? k : k0 + BK;
      for (uint64_t i = i0; i < i1; i++) {
        float *crow = c + i * n;
        for (uint64_t kk = k0; kk < k1; kk++) {
          float av = a[i * k + kk];
          const float *brow = b + kk * n;
          for (uint64_t j = 0; j < n; j++) crow[j] += av * brow[j];
        }
      }
    }
  }
  return 0;
}
