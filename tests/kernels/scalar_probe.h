// tests/kernels/scalar_probe.h — the record tests/kernels/scalar_probe.c writes per scalar.
#ifndef LANEWORK_TESTS_KERNELS_SCALAR_PROBE_H_
#define LANEWORK_TESTS_KERNELS_SCALAR_PROBE_H_

#include "lanework/kernel.h"

typedef struct scalar_probe {
  uint32_t type;  // lw_kernel_arg_type
  float f32;      // lw_kernel_arg_f32
  uint64_t u64;   // lw_kernel_arg_u64
  int64_t i64;    // lw_kernel_arg_i64
  double f64;     // lw_kernel_arg_f64
} scalar_probe_t;

#endif  // LANEWORK_TESTS_KERNELS_SCALAR_PROBE_H_
