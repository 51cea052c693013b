// gate.cl — the conformance gate kernel (conformance.h, CONF_K_GATE) in OpenCL C:
//   (IN uint gate, OUT uint entered): stores entered = 1, then holds the run lane until the
//   host stores gate != 0, or until the run is cancelled or times out.
//
// An OpenCL kernel cannot see lanework's cancel word, and OpenCL cannot stop an NDRange under
// way: the opencl backend enqueues a range in slices and checks the cancel word between them.
// So the gate is a long range (its launch geometry is in the backend's row of backends.c),
// each work-item polling the gate a bounded number of times: while the gate is closed a
// work-item lasts CONF_GATE_POLLS loads (25-100 us on PoCL here), and the range of 2^28 of
// them hours on one core, still minutes on 64, far longer than a test's timeout; a cancel
// lands at the next slice. Once the host opens the gate every remaining work-item ends after
// one load, and the range runs out in well under a second (0.4 s here for all of it).
//
// Both words are host memory (CL_MEM_USE_HOST_PTR buffers over the test's memory: the heap at
// L2, the worker's shared arena at L3). The loads are volatile so that each poll reads memory
// again and the host's store becomes visible to the running kernel; the store of entered is
// volatile so that the host sees it while the kernel still runs.
#define CONF_GATE_POLLS 65536u

__kernel void conf_gate(__global const volatile uint *gate, __global volatile uint *entered) {
  *entered = 1u;
  for (uint i = 0; i < CONF_GATE_POLLS; ++i) {
    if (*gate != 0u) return;
  }
}
