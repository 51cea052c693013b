// gate.cl — the conformance gate kernel (conformance.h, CONF_K_GATE) in OpenCL C:
//   (IN uint gate, OUT uint entered): stores entered = 1, then holds the run lane until the
//   host stores gate != 0, or until the run is cancelled or times out.
//
// An OpenCL kernel cannot see lanework's cancel word, and OpenCL cannot stop an NDRange under
// way: the opencl backend enqueues a range in slices and checks the cancel word between them.
// So the gate is a long range (its launch geometry is in the backend's row of backends.c),
// each work-item polling the gate a bounded number of times: while the gate is closed a
// work-item lasts about as long as CONF_GATE_POLLS loads, the whole range far longer than any
// test (minutes), and a cancel lands at the next slice. Once the host opens the gate every
// remaining work-item ends after one load, so the range runs out quickly and the run returns
// 0 (success).
//
// Both words are host memory (CL_MEM_USE_HOST_PTR buffers over the test's memory: the heap at
// L2, the worker's shared arena at L3). The loads are volatile so that each poll reads memory
// again and the host's store becomes visible to the running kernel; the store of entered is
// volatile so that the host sees it while the kernel still runs.
#define CONF_GATE_POLLS 16384u

__kernel void conf_gate(__global const volatile uint *gate, __global volatile uint *entered) {
  *entered = 1u;
  for (uint i = 0; i < CONF_GATE_POLLS; ++i) {
    if (*gate != 0u) return;
  }
}
