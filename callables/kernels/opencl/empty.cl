// empty.cl — does nothing: the floor of a launch (enqueue + wait). Signature: no parameters.
__kernel void lw_kernel_main(void) {}
