// lanework/kernel_cuda.h — the cancel word for CUDA kernels (the `cuda` backend). Header-only:
// a CUDA C kernel includes it (NVRTC compiles it with no standard headers, so it needs none);
// host C and C++ may include it too and then see the macros and the typedef only.
//
// What a kernel gets:
//
//   bool lw_cuda_should_stop(void);        // any thread, any time: one load of the word
//   bool lw_cuda_block_should_stop(void);  // the whole block together: one load, a broadcast
//
// Both say true once the run was asked to stop: lw_cancel on its handle, its deadline
// (lw_run_config_t.timeout_ns), a cancel of everything (worker shutdown, a cancelled scope).
// A kernel that sees true should return soon (every thread of it); the run then finishes
// LW_CANCELLED, or LW_DEADLINE_EXCEEDED when its deadline stopped it, whatever the kernel
// wrote: the outputs of a stopped run are unspecified and never reported OK (as for
// lw_kernel_should_stop in lanework/kernel.h).
//
// How the stop reaches the device. The backend keeps one stop word per chip, 0 when a launch
// starts and non-zero once the running run is asked to stop, and points lw__cuda_stop at it
// (cuModuleGetGlobal on LW_CUDA_STOP_SYMBOL, once, after it loaded the module). By default
// the word is in device memory, set by a 4-byte copy on a stream of its own that a copy engine
// runs beside the kernel (LW_CUDA_STOP=device), so a poll reads device memory; with
// LW_CUDA_STOP=host it is pinned host memory mapped into the device, and every poll crosses
// the bus. Measured on an H100: one block polling host memory, host store -> stream done 9 us
// at the median; a kernel of ~8 waves of full blocks cancelled in 8.4 ms with the word in host
// memory (the resident blocks' reads queue on the bus, every later wave reads once more) and
// in 0.72 ms in device memory. Until the backend sets it (a module loaded by something else, a
// kernel run outside lanework) lw__cuda_stop is NULL and both functions say false.
//
// Poll at block granularity, not per element: hundreds of thousands of threads each reading in
// a tight loop load the memory system for nothing. Either one thread per block reads it and
// shares the answer (lw_cuda_block_should_stop does exactly that; every thread of the block
// must call it together, as it holds two __syncthreads), or each thread reads it once per
// grid-stride iteration or per chunk of a long loop. Size a chunk for a full device, not a
// lone block: a stop lands within the chunk under way, and when every SM is full a thread gets
// a small share of its SM (on an H100, 2,048 steps of a multiply-add chain took ~17 us in 16
// blocks and ~1.2 ms with every SM full). A kernel that never polls still ends a cancel:
// at L3 the worker escalates (DESIGN §4.2) by killing the chip child, which is then respawned
// with its callables registered again; at L2 the run finishes when the kernel ends.
//
// One definition per module: this header DEFINES the device variable lw__cuda_stop, so a
// module must be one translation unit that includes it once (what NVRTC compiles from one
// source, or nvcc -cubin / -ptx / -fatbin of one .cu file). Two translation units that both
// include it, linked with relocatable device code, define the symbol twice.
//
// Entry points: a kernel is `extern "C" __global__` so its name is the entry a callable names
// (lw_callable_t.entry; NULL means "lw_kernel_main"); its parameters are, in the callable's
// signature order, a device pointer per IN/OUT/INOUT tensor and the 8-byte value of each
// SCALAR (unsigned long long, or a double by its bits), as for the opencl backend.
#ifndef LANEWORK_KERNEL_CUDA_H_
#define LANEWORK_KERNEL_CUDA_H_

// The device symbol the backend looks up in every module it loads, and the version of this
// contract (the symbol's name, its type, what non-zero means). Both sides use these.
#define LW_CUDA_STOP_SYMBOL "lw__cuda_stop"
#define LW_KERNEL_CUDA_ABI_VERSION 1

// The stop word's type, as the host maps it and the device reads it (32 bits on both sides).
typedef unsigned int lw_cuda_stop_word_t;

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

extern "C" {

// The device address of the run's stop word, or NULL (zero-initialized: static storage).
// Written by the backend between launches only; kernels read it.
__device__ const volatile lw_cuda_stop_word_t *lw__cuda_stop;

// True when the stop word is set. volatile: each call reads host memory again, so a loop that
// polls sees the store the host made while it ran.
__device__ __forceinline__ bool lw_cuda_should_stop(void) {
  const volatile lw_cuda_stop_word_t *word = lw__cuda_stop;
  return word != 0 && *word != 0u;
}

// One read per block: thread (0, 0, 0) reads the word and the block shares its answer through
// shared memory. Every thread of the block must call it, the same number of times (it holds
// __syncthreads): call it from block-uniform control flow, e.g. at the top of a grid-stride
// loop whose bounds depend on blockIdx only. The first barrier keeps a thread from overwriting
// the answer while a slower one of the same block still reads the previous one.
__device__ __forceinline__ bool lw_cuda_block_should_stop(void) {
  __shared__ int lw__block_stop;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    lw__block_stop = lw_cuda_should_stop() ? 1 : 0;
  }
  __syncthreads();
  return lw__block_stop != 0;
}

}  // extern "C"

#endif  // __CUDACC__ || __CUDACC_RTC__
#endif  // LANEWORK_KERNEL_CUDA_H_
