// vector_add.cu — c[i] = a[i] + b[i] for i < n: the CUDA C version of opencl/vector_add.cl.
// Signature: IN a (float[n]), IN b (float[n]), OUT c (float[n]), SCALAR n (unsigned long long).
// Launch: 1 dimension, global >= n threads (threads past n do nothing), any block size.
// One element per thread and no loop: nothing to poll.
#include "lanework/kernel_cuda.h"

extern "C" __global__ void lw_kernel_main(const float *a, const float *b, float *c,
                                          unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
