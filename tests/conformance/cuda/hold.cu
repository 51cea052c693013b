// hold.cu — the conformance hold kernel (conformance.h, CONF_K_HOLD) in CUDA C: a kernel of no
// parameters whose register does not finish until the test lets it.
//
// A cuda register compiles the source with NVRTC on the register lane, which runs no code of
// the test's. But NVRTC reads the files the source includes: conf_kernel_load (backends.c) puts
// the path from the callable's name ("conf_hold:/tmp/x") in place of the marker below and
// makes that path a FIFO. NVRTC's read of it blocks until the test opens the path for writing,
// and the empty text it then reads adds nothing to the program.
#include "@CONF_HOLD_PATH@"

extern "C" __global__ void conf_hold(void) {}
