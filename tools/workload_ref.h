// tools/workload_ref.h — what the device workloads of several backends share (workload_opencl.c,
// workload_cuda.c run the same kernels in two languages): the host references their results
// are checked against, and the arguments of repeat_vector_add. Internal to tools/.
#ifndef LANEWORK_TOOLS_WORKLOAD_REF_H_
#define LANEWORK_TOOLS_WORKLOAD_REF_H_

#include <stdint.h>

#include "lanework/args.h"
#include "lanework/status.h"

// repeat_vector_add's element: acc = a; repeat r times acc = 3 acc + b (mod 2^32). The map
// x -> 3x + b composed r times is x -> A x + B; (A, B) by squaring, O(log r).
uint32_t lw__workload_repeat_vadd(uint32_t a, uint32_t b, uint64_t r);

// big_program's lw_kernel_main for one element, in double: the sum of stages 0..stages-1,
// stage k being y = x (1 + k/1024), then (k % 5) + 2 times y = y/2 + sin(y + k) cos(x - j)
// + (k % 3) (the stage of opencl/big_program.cl and cuda/big_program.cu).
double lw__workload_big_stages(float x, long stages);

// repeat_vector_add's arguments: a, b (inputs), c (output), each n uint32; the scalars n and
// reps; one dimension of n work-items (threads), the local size left to the backend.
LW_MUST_USE lw_status_t lw__workload_vadd_args(uint32_t *a, uint32_t *b, uint32_t *c, uint32_t n,
                                               uint64_t reps, lw_args_t *out);

#endif  // LANEWORK_TOOLS_WORKLOAD_REF_H_
