// tools/workload_ref.c — see workload_ref.h.
#include "tools/workload_ref.h"

#include <math.h>
#include <stddef.h>

uint32_t lw__workload_repeat_vadd(uint32_t a, uint32_t b, uint64_t r) {
  uint32_t ra = 1, rb = 0, ba = 3, bb = b;
  while (r) {
    if (r & 1) {
      rb = ba * rb + bb;
      ra = ba * ra;
    }
    bb = ba * bb + bb;
    ba = ba * ba;
    r >>= 1;
  }
  return ra * a + rb;
}

double lw__workload_big_stages(float xf, long stages) {
  double x = xf, acc = 0.0;
  for (long k = 0; k < stages; ++k) {
    double y = x * (1.0 + (double)k / 1024.0);
    for (long j = 0; j < (k % 5) + 2; ++j) {
      y = y * 0.5 + sin(y + (double)k) * cos(x - (double)j) + (double)(k % 3);
    }
    acc += y;
  }
  return acc;
}

lw_status_t lw__workload_vadd_args(uint32_t *a, uint32_t *b, uint32_t *c, uint32_t n,
                                   uint64_t reps, lw_args_t *out) {
  const uint64_t g[3] = {n, 0, 0};
  lw_args_init(out);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(out, a, (uint64_t)n * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(out, b, (uint64_t)n * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(out, c, (uint64_t)n * 4, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(out, n));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(out, reps));
  return lw_args_set_launch(out, 1, g, NULL);
}
