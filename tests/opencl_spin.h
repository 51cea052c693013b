// tests/opencl_spin.h — OpenCL kernels that run until they are stopped, on any device, for
// the tests that need a kernel still running at a deadline, a cancel, a register beside it or
// another chip's run (tests/child/test_opencl.c at L2, tests/parent/test_opencl_worker.c at
// L3). Their runs are sized on the device at hand (tests/hold_items.h). Every work-item is
// short (LW_TEST_SPIN_REPS rounds of arithmetic and no memory traffic, microseconds on any
// device), so a slice of them is short and a cancel lands within one.
#ifndef LANEWORK_TESTS_OPENCL_SPIN_H_
#define LANEWORK_TESTS_OPENCL_SPIN_H_

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hold_items.h"
#include "lanework/args.h"
#include "lanework/callable.h"
#include "test_util.h"

#define LW_TEST_SPIN_REPS 4096
// steer's rounds per work-item: once the host sets skip, the rest of a range sized for
// LW_TEST_HOLD_S runs out in LW_TEST_HOLD_S times (the cost of a skipping work-item / a working
// one). On a GPU a work-item that does nothing still costs about what 60 rounds do, so a
// working one must cost thousands of times more for that tail to stay under a second.
#define LW_TEST_STEER_REPS 65536

// spin: callables/kernels/opencl/spin.cl (OUT|LIVE started, INOUT last, SCALAR n, SCALAR
// reps): work-item 0 sets *started (live: the host sees it while the range runs), work-item
// n - 1 sets *last.
static const uint8_t lw_test_spin_dirs[4] = {LW_PARAM_OUT | LW_PARAM_LIVE, LW_PARAM_INOUT,
                                             LW_PARAM_SCALAR, LW_PARAM_SCALAR};

// steer (IN|LIVE skip, OUT|LIVE started, INOUT last, SCALAR n, SCALAR reps): spin.cl, except
// that a work-item that finds *skip set does no work: once the host sets it, the rest of the range
// runs out at once and the run ends OK on its own.
static const char lw_test_steer_src[] =
    "__kernel void steer(__global const volatile uint *skip, __global volatile uint *started,\n"
    "                    __global volatile uint *last, ulong n, ulong reps) {\n"
    "  ulong gid = get_global_id(0), h = gid + 1;\n"
    "  if (gid == 0) *started = 1u;\n"
    "  if (*skip == 0u) {\n"
    "    for (ulong r = 0; r < reps; ++r) { h ^= h >> 31; h *= 0x9e3779b97f4a7c15UL; }\n"
    "    if (h == 0) *last = 2u;\n"
    "  }\n"
    "  if (gid == n - 1) *last = 1u;\n"
    "}\n";
static const uint8_t lw_test_steer_dirs[5] = {LW_PARAM_IN | LW_PARAM_LIVE,
                                              LW_PARAM_OUT | LW_PARAM_LIVE, LW_PARAM_INOUT,
                                              LW_PARAM_SCALAR, LW_PARAM_SCALAR};

// The callable of spin (steer false: read from the kernel folder) or steer (a static image).
// Release it with lw_test_spin_callable_free.
static inline lw_callable_t lw_test_spin_callable(bool steer) {
  if (steer) {
    lw_callable_t c = {.name = "steer", .image = lw_test_steer_src,
                       .image_bytes = sizeof(lw_test_steer_src) - 1, .entry = "steer",
                       .n_params = 5, .param_dirs = lw_test_steer_dirs};
    return c;
  }
  char path[512];
  snprintf(path, sizeof(path), "%s/opencl/spin.cl", lw_test_kernel_dir());
  lw_callable_t c;
  lw_status_t st = lw_callable_load_file(path, &c);
  cr_assert_eq(st, LW_OK, "loading %s: %s", path, lw_last_error()->message);
  c.n_params = 4;
  c.param_dirs = lw_test_spin_dirs;
  return c;
}

static inline void lw_test_spin_callable_free(lw_callable_t *c) {
  if (c->image != lw_test_steer_src) lw_callable_free_loaded(c);
}

// The host words of one spin or steer run, in memory the kernel can use (the heap at L2, the
// worker's arena at L3); they must outlive the run.
typedef struct lw_test_spin_words {
  _Atomic uint32_t skip;     // steer only
  _Atomic uint32_t started;  // set by work-item 0
  _Atomic uint32_t last;     // set by the last work-item: the range ran out
} lw_test_spin_words_t;

// Zeroes w and fills *a with the args of a spin (or steer) run of n work-items over it. The
// tags are NO_DEP: the words order nothing at L3.
static inline void lw_test_spin_args(lw_test_spin_words_t *w, bool steer, uint64_t n,
                                     lw_args_t *a) {
  atomic_store(&w->skip, 0);
  atomic_store(&w->started, 0);
  atomic_store(&w->last, 0);
  lw_args_init(a);
  if (steer) cr_assert_eq(lw_args_add_tensor(a, (void *)&w->skip, 4, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_tensor(a, (void *)&w->started, 4, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_tensor(a, (void *)&w->last, 4, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_scalar(a, n), LW_OK);
  cr_assert_eq(lw_args_add_scalar(a, steer ? LW_TEST_STEER_REPS : LW_TEST_SPIN_REPS), LW_OK);
  const uint64_t g[3] = {n, 0, 0};
  cr_assert_eq(lw_args_set_launch(a, 1, g, NULL), LW_OK);
}

#endif  // LANEWORK_TESTS_OPENCL_SPIN_H_
