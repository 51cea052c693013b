// hang.cl — ignores cancellation: one work-item that runs until its process is killed.
// Signature: INOUT flag (uint[2]), SCALAR n (ulong). Launch: 1 work-item (no geometry).
// flag[0] = 1 once it runs (visible to the host on a device that computes in host memory);
// then n steps, each reading flag[1] again (volatile: the loop cannot be folded away) and
// leaving early only if it reads 0xdeadbeef, which nothing writes. The backend stops a run
// only between slices, and a one-work-item range is one slice: at L3 a cancel ends it by
// killing its chip child after the grace (escalation), whatever the device.
__kernel void lw_kernel_main(__global volatile uint *flag, ulong n) {
  flag[0] = 1u;
  uint acc = 0u;
  for (ulong i = 0; i < n; ++i) {
    if (flag[1] == 0xdeadbeefu) break;
    acc = acc * 3u + (uint)i;
  }
  flag[1] = acc | 1u;
}
