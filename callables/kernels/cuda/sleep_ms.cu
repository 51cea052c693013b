// sleep_ms.cu — a kernel of a set length on one thread: it reads the device's global timer
// (%globaltimer, nanoseconds) until ms milliseconds have passed, polling the stop word at each
// read, and returns early once the run is asked to stop. What `lanework bench fault` runs on
// the chip beside the one that faults: its length is wall time, whatever share of the device it
// gets while the two chips time-slice it, so a fault that cut it short would show.
// Signature: SCALAR ms (unsigned long long). Entry: sleep_ms. Launch: one thread (no geometry).
#include "lanework/kernel_cuda.h"

__device__ static unsigned long long lw_now_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void sleep_ms(unsigned long long ms) {
  const unsigned long long end = lw_now_ns() + ms * 1000000ull;
  while (lw_now_ns() < end) {
    if (lw_cuda_should_stop()) return;
  }
}
