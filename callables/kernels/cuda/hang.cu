// hang.cu — ignores cancellation: one thread that runs until its process is killed, the CUDA C
// version of opencl/hang.cl and what `bench cancel --backend cuda --level 3` escalates.
// Signature: INOUT flag (uint[2]), SCALAR n (unsigned long long). Launch: one thread (no
// geometry). flag[0] = 1 once it runs; then n steps, each reading flag[1] again (volatile: the
// loop cannot be folded away) and leaving early only if it reads 0xdeadbeef, which nothing
// writes. It never reads the stop word (lanework/kernel_cuda.h is included for the contract's
// symbol only), so a cancel cannot reach it: at L3 the worker kills its chip child after the
// grace and respawns it; at L2 only the end of its n steps ends the run.
#include "lanework/kernel_cuda.h"

extern "C" __global__ void lw_kernel_main(volatile unsigned int *flag, unsigned long long n) {
  flag[0] = 1u;
  unsigned int acc = 0u;
  for (unsigned long long i = 0; i < n; ++i) {
    if (flag[1] == 0xdeadbeefu) break;
    acc = acc * 3u + (unsigned int)i;
  }
  flag[1] = acc | 1u;
}
