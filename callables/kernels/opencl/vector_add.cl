// vector_add.cl — c[i] = a[i] + b[i] for i < n.
// Signature: IN a (float[n]), IN b (float[n]), OUT c (float[n]), SCALAR n (ulong).
// Launch: 1 dimension, global >= n (work-items past n do nothing).
__kernel void lw_kernel_main(__global const float *a, __global const float *b,
                             __global float *c, ulong n) {
  size_t i = get_global_id(0);
  if (i < n) c[i] = a[i] + b[i];
}
