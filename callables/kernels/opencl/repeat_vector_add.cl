// repeat_vector_add.cl — a long-running vector kernel with an exact integer result:
//   acc = a[i]; repeat reps times: acc = acc * 3 + b[i];  c[i] = acc   (uint arithmetic, mod 2^32)
// Signature: IN a (uint[n]), IN b (uint[n]), OUT c (uint[n]), SCALAR n (ulong),
// SCALAR reps (ulong). Launch: 1 dimension, global >= n. Each work-item costs reps steps, so
// n * reps sets the run time; lanework slices the range, which is what makes a long run of it
// cancellable.
__kernel void lw_kernel_main(__global const uint *a, __global const uint *b, __global uint *c,
                             ulong n, ulong reps) {
  size_t i = get_global_id(0);
  if (i >= n) return;
  uint acc = a[i];
  uint add = b[i];
  for (ulong r = 0; r < reps; ++r) acc = acc * 3u + add;
  c[i] = acc;
}
