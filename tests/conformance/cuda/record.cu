// record.cu — the conformance record kernel (conformance.h, CONF_K_RECORD) in CUDA C:
//   (INOUT long long log[], SCALAR value): claims slot n = log[0]++ atomically and stores value
//   in log[1 + n]. Run as one thread (no launch geometry: one block of one thread).
// The slot is claimed with a 64-bit atomic add, as the sim and OpenCL kernels do. The log holds
// CONF_LOG_LEN - 1 values: a record past its end is dropped (the count still grows, so the test
// sees it). Nothing to poll: the kernel is a handful of instructions.
#define CONF_LOG_LEN 130

extern "C" __global__ void conf_record(long long *log, unsigned long long value) {
  unsigned long long n = atomicAdd((unsigned long long *)&log[0], 1ULL);
  if (n < CONF_LOG_LEN - 1) log[1 + n] = (long long)value;
}
