// gate.cl — the conformance gate kernel (conformance.h, CONF_K_GATE) in OpenCL C:
//   (IN|LIVE uint gate, OUT|LIVE uint entered): stores entered = 1, then holds the run lane
//   until the host stores gate != 0, or until the run is cancelled or times out.
//
// An OpenCL kernel cannot see lanework's cancel word, and OpenCL cannot stop an NDRange under
// way: the opencl backend enqueues a range in slices and checks the cancel word between them.
// Nor may a kernel count on seeing a host store while it runs: a discrete GPU (an NVIDIA H100)
// works on its own copy of a buffer, and neither side sees the other's stores until a command
// copies them. So the gate is made of slices:
//   - both words are live tensors (LW_PARAM_LIVE): the backend copies gate to the device before
//     every slice and entered back to the host after every slice, so the test sees entered
//     after the first slice and the kernel sees an opened gate from the next slice on, on
//     every device (on PoCL's CPU device the buffers are the host's memory, and a work-item
//     may see the store even sooner);
//   - each work-item polls gate a bounded number of times (CONF_GATE_POLLS) and ends: a
//     work-item that spun until the gate opened would never end on a device that sees no host
//     store inside a slice;
//   - the range is sized on the device (backends.c, hold_items): a probe of closed gates
//     measures how many work-items the device gets through a second, and the range is what
//     keeps it busy for ten minutes, far longer than a test. Once the gate opens, every
//     remaining work-item ends after one load, tens of thousands of times faster than a closed
//     one, and the range runs out in a fraction of a second;
//   - a cancel or a timeout lands at the next slice.
// The loads are volatile so that each poll reads memory again; the store of entered is
// volatile so that it reaches the buffer before the slice ends.
#define CONF_GATE_POLLS 65536u

__kernel void conf_gate(__global const volatile uint *gate, __global volatile uint *entered) {
  *entered = 1u;
  for (uint i = 0; i < CONF_GATE_POLLS; ++i) {
    if (*gate != 0u) return;
  }
}
