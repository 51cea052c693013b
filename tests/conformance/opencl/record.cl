// record.cl — the conformance record kernel (conformance.h, CONF_K_RECORD) in OpenCL C:
//   (INOUT long log[], SCALAR value): claims slot n = log[0]++ atomically and stores value in
//   log[1 + n]. Run as one work-item (no launch geometry).
// The slot is claimed with a 64-bit atomic add, as the sim kernel does, so the log's order is
// the order in which runs executed even when chips in different processes share it. The log
// holds CONF_LOG_LEN - 1 values: a record past its end is dropped (the count still grows, so
// the test sees it).
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#define CONF_LOG_LEN 130

__kernel void conf_record(__global volatile long *log, ulong value) {
  long n = atom_add(&log[0], 1L);
  if (n >= 0 && n < CONF_LOG_LEN - 1) log[1 + n] = (long)value;
}
