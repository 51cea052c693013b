// tests/headers/cuda_stub.h — a stand-in for what NVRTC and nvcc give CUDA C (the
// execution-space keywords, threadIdx and its siblings, __syncthreads, sinf and cosf), so that
// a host C++ compiler can compile the device part of lanework/kernel_cuda.h and the kernels of
// callables/kernels/cuda where no CUDA compiler is installed (check_kernel_cuda.cmake). It
// checks their C++ (syntax, types, names), not what a device compiler adds; and it lets
// kernel_cuda_host.cpp run lw_cuda_should_stop and lw_cuda_block_should_stop on the host,
// one thread of one block at a time.
#ifndef LANEWORK_TESTS_HEADERS_CUDA_STUB_H_
#define LANEWORK_TESTS_HEADERS_CUDA_STUB_H_

#define __CUDACC_RTC__ 1
#define __global__
#define __device__
#define __forceinline__ inline
// A block's shared variable: one per program here, as there is one block at a time.
#define __shared__ static

struct lw_stub_dim3 {
  unsigned int x, y, z;
};
extern lw_stub_dim3 threadIdx, blockIdx, blockDim, gridDim;
extern "C" void __syncthreads(void);
extern "C" float sinf(float);
extern "C" float cosf(float);

#endif  // LANEWORK_TESTS_HEADERS_CUDA_STUB_H_
