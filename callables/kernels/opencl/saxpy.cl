// saxpy.cl — y[i] = a * x[i] + y[i] for i < n.
// Signature: IN x (float[n]), INOUT y (float[n]), SCALAR a (f32: lw_args_add_f32, passed as a
// 4-byte float), SCALAR n (ulong: lw_args_add_scalar).
// Launch: 1 dimension, global >= n (work-items past n do nothing).
__kernel void lw_kernel_main(__global const float *x, __global float *y, float a, ulong n) {
  size_t i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
