// hold.cl — the conformance hold kernel (conformance.h, CONF_K_HOLD) in OpenCL C: a kernel of
// no parameters whose register does not finish until the test lets it.
//
// An OpenCL register is a program build, which runs no code of the test's. But the compiler
// reads the files the source includes: conf_kernel_load (backends.c) puts the path from the
// callable's name ("conf_hold:/tmp/x") in place of the marker below and makes that path a
// FIFO. The compiler's read of it blocks until the test opens the path for writing (the
// sim's hold waits for the file to exist; here opening it is what lets the build go on), and
// the empty text it then reads adds nothing to the program.
#include "@CONF_HOLD_PATH@"

__kernel void conf_hold(void) {}
