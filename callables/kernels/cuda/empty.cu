// empty.cu — does nothing: the floor of one launch (cuLaunchKernel + the wait). Signature: no
// parameters. Launch: any (one thread is enough).
#include "lanework/kernel_cuda.h"

extern "C" __global__ void lw_kernel_main(void) {}
