// repeat_vector_add.cu — a long-running vector kernel with an exact integer result, the CUDA C
// version of opencl/repeat_vector_add.cl:
//   acc = a[i]; repeat reps times: acc = acc * 3 + b[i];  c[i] = acc   (unsigned, mod 2^32)
// Signature: IN a (uint[n]), IN b (uint[n]), OUT c (uint[n]), SCALAR n (unsigned long long),
// SCALAR reps (unsigned long long). Launch: 1 dimension (blocks of x threads only), global >= n
// threads or fewer (a grid-stride loop covers the rest).
//
// Cancellable: each block polls the stop word (lanework/kernel_cuda.h) once per LW_POLL_STEPS
// repetitions and returns once it is set, so n * reps sets the run time and a cancel ends a
// long run within about one chunk. c[i] is written once, when element i is done: after a
// stopped run the elements written are those that finished (c given as a live tensor shows
// them in host memory). Build option -DLW_POLL_STEPS=k changes the chunk (default 16 steps:
// on an H100 a step took ~0.6 us with every SM full, ~8 ns in 16 blocks, so a chunk is at
// most ~10 us, ~5 us waited at the median before a stop is seen; 64 steps made that ~20 us
// of a ~120 us cancel at L3, and 2,048 steps ~1.2 ms). A poll is one read of the word by one
// thread and two barriers per block, among the ~16 steps of every thread of the block.
#include "lanework/kernel_cuda.h"

#ifndef LW_POLL_STEPS
#define LW_POLL_STEPS 16ull
#endif

extern "C" __global__ void lw_kernel_main(const unsigned int *a, const unsigned int *b,
                                          unsigned int *c, unsigned long long n,
                                          unsigned long long reps) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  // base depends on blockIdx only, and reps is the same for every thread: the loops below are
  // block-uniform, as lw_cuda_block_should_stop requires.
  for (unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x; base < n;
       base += stride) {
    const unsigned long long i = base + threadIdx.x;
    const bool live = i < n;
    unsigned int acc = live ? a[i] : 0u;
    const unsigned int add = live ? b[i] : 0u;
    unsigned long long done = 0;
    do {
      if (lw_cuda_block_should_stop()) return;
      const unsigned long long end = reps - done < LW_POLL_STEPS ? reps : done + LW_POLL_STEPS;
      for (; done < end; ++done) acc = acc * 3u + add;
    } while (done < reps);
    if (live) c[i] = acc;
  }
}
