// gate.cu — the conformance gate kernel (conformance.h, CONF_K_GATE) in CUDA C:
//   (IN|LIVE unsigned gate, OUT|LIVE unsigned entered): stores entered = 1, then holds the run
//   lane until the host stores gate != 0, or until the run is cancelled or times out.
//
// The cuda backend maps live tensors (pinned host memory the device reads and writes over the
// bus, docs/cuda.md), so unlike OpenCL's sliced gate this one can simply wait: the volatile
// load of gate reads host memory again each time, and the system-scope fence after the store
// of entered makes it visible to the host while the kernel still runs. A cancel or a deadline
// reaches it through the backend's stop word (lanework/kernel_cuda.h), polled in the same
// loop. Run as one thread (no launch geometry).
#include "lanework/kernel_cuda.h"

extern "C" __global__ void conf_gate(const volatile unsigned *gate, volatile unsigned *entered) {
  *entered = 1u;
  __threadfence_system();
  while (*gate == 0u) {
    if (lw_cuda_should_stop()) return;
  }
}
