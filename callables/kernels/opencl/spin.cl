// spin.cl — a kernel that runs for as long as its range is long, on any device, and says so
// while it runs: for runs sized on the device at hand (a probe of small ranges gives the rate;
// examples/opencl_costs.c, tests/opencl_spin.h) that must still run at a cancel or a deadline.
// Signature: OUT|LIVE started (uint), INOUT last (uint), SCALAR n (ulong), SCALAR reps (ulong).
// Launch: 1 dimension, global n.
// Every work-item mixes its id `reps` times (arithmetic only, no memory traffic: microseconds
// on any device, so a slice of them is short and a cancel lands within one). Work-item 0 sets
// *started: a live tensor (LW_PARAM_LIVE), so the host sees it while the range runs, after the
// first slice at the latest. Work-item n - 1 sets *last: still 0 after a cancelled run, the
// range did not run out. The test of h (never true) keeps every work-item's loop.
__kernel void lw_kernel_main(__global volatile uint *started, __global volatile uint *last,
                             ulong n, ulong reps) {
  ulong gid = get_global_id(0), h = gid + 1;
  if (gid == 0) *started = 1u;
  for (ulong r = 0; r < reps; ++r) {
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15UL;
  }
  if (h == 0) *last = 2u;
  if (gid == n - 1) *last = 1u;
}
