// tools/workload_ref.h — what the device workloads of several backends share (workload_opencl.c,
// workload_cuda.c run the same kernels in two languages): the host references their results
// are checked against, and the arguments of repeat_vector_add. Internal to tools/.
#ifndef LANEWORK_TOOLS_WORKLOAD_REF_H_
#define LANEWORK_TOOLS_WORKLOAD_REF_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/status.h"
#include "tools/bench_cancel.h"

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
// The same launched with `threads` work-items (threads <= n: the CUDA kernel's grid-stride loop
// covers the rest; OpenCL's repeat_vector_add needs one per element).
LW_MUST_USE lw_status_t lw__workload_vadd_args_threads(uint32_t *a, uint32_t *b, uint32_t *c,
                                                       uint32_t n, uint64_t reps,
                                                       uint32_t threads, lw_args_t *out);

// The cancel workload of the device backends (bench_cancel.h): repeat_vector_add over
// LW_RC_ITEMS elements, a = b = 1, calibrated on the device to an uncancelled run of about
// LW_RC_FULL_US, and the hang kernel for the escalation trial. What does not depend on the
// backend is here: a backend opens it with its own kernel loader, parameter directions and the
// tag of hang's flag, uses the functions below in its lw_cancel_workload_t, and words its own
// stopped_early, describe and json from the state (lw_repeat_cancel_t).
#define LW_RC_ITEMS (1u << 21)
#define LW_RC_FIRST_STEPS 256u
#define LW_RC_MAX_STEPS (1u << 30)  // a = b = 1: the result is never 0 below 2^31 steps
#define LW_RC_PROBE_US 50000.0      // the calibration grows the steps until a run lasts this long
#define LW_RC_FULL_US 2e6           // an uncancelled run, calibrated
#define LW_RC_MAX_PAUSE_US 3000.0
// hang's steps: with one slow step each, longer than any trial on any device.
#define LW_RC_HANG_STEPS (1ull << 62)
// Where hang's start cannot be seen (a device that copies results back at the end), the
// escalation trial cancels this long after the submit: the kernel runs by then, or the
// escalation counters afterwards say it did not.
#define LW_RC_HANG_START_US 200000.0

typedef struct lw_repeat_cancel {
  lw_callable_t k, hang;
  bool loaded, hang_loaded;
  lw_callable_handle_t h, hang_h;
  uint32_t *a, *b, *c;
  uint32_t *flag;      // hang's two words
  lw_tag_t hang_tag;   // how hang's flag is passed
  bool hang_armed;     // the run armed last is hang's
  uint64_t steps;
  double full_us;      // an uncancelled run's length at steps, as calibrated
  uint32_t threads;    // the kernel's launch: LW_RC_ITEMS, or fewer (a grid-stride loop)
} lw_repeat_cancel_t;

// A backend's kernel loader (bench.h: lw__bench_load_opencl_kernel, lw__bench_load_cuda_kernel).
typedef bool (*lw_rc_load_fn)(const char *name, uint32_t n_params, const uint8_t *dirs,
                              lw_callable_t *out);

// open: loads repeat_vector_add with vadd_dirs (5 entries) and hang with hang_dirs (2).
LW_MUST_USE lw_status_t lw__repeat_cancel_open(lw_rc_load_fn load, const uint8_t *vadd_dirs,
                                               const uint8_t *hang_dirs, lw_tag_t hang_tag,
                                               void **out);
// The rest of lw_cancel_workload_t's entries, as bench_cancel.h describes them.
lw_status_t lw__repeat_cancel_setup(void *p, lw_bench_chip_t *d);
lw_status_t lw__repeat_cancel_arm(void *p, lw_callable_handle_t *h, lw_args_t *a);
lw_status_t lw__repeat_cancel_arm_hang(void *p, lw_callable_handle_t *h, lw_args_t *a);
lw_status_t lw__repeat_cancel_run_short(void *p, lw_bench_chip_t *d);
lw_cancel_seen_t lw__repeat_cancel_seen(void *p, double waited_us, char *why, size_t n);
void lw__repeat_cancel_close(void *p, lw_bench_chip_t *d);

#endif  // LANEWORK_TOOLS_WORKLOAD_REF_H_
