// fault_after_ms.cu — a kernel that faults: one thread waits ms milliseconds of the device's
// global timer (as sleep_ms.cu does, returning early if the run is asked to stop), then stores
// to an address no allocation holds. The store is an illegal address (CUDA_ERROR_ILLEGAL_ADDRESS,
// 700), after which the context is unusable: the chip fails the task naming the error and its
// chip child exits to be replaced (docs/cuda.md, "Sticky errors"). What `lanework bench fault`
// runs on one chip while the other chip of the same GPU runs sleep_ms.cu.
// Signature: SCALAR ms (unsigned long long). Entry: fault_after_ms. Launch: one thread.
#include "lanework/kernel_cuda.h"

// The address stored to: the first page, which the driver never maps. Read from a variable
// (which the host could change), not written as a constant: a store through a constant null
// pointer is undefined behaviour the compiler may turn into a trap, a different error.
__device__ unsigned long long lw_fault_address = 8ull;

__device__ static unsigned long long lw_now_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void fault_after_ms(unsigned long long ms) {
  const unsigned long long end = lw_now_ns() + ms * 1000000ull;
  while (lw_now_ns() < end) {
    if (lw_cuda_should_stop()) return;
  }
  *(volatile unsigned int *)lw_fault_address = 1u;
}
