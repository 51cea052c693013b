// tests/hold_items.h — sizing a run on the device at hand, for tests that need a kernel still
// running at a deadline, a cancel, a register or another run (tests/opencl_spin.h, the opencl
// conformance gate in tests/conformance/backends.c).
//
// "Long" cannot be taken from a CPU: an NVIDIA H100 ends in microseconds what PoCL runs for a
// minute. So lw_test_hold_items runs a probe of doubling ranges (from 4096 work-items) until
// one takes LW_TEST_PROBE_NS of the device's own profiled time, and returns the work-items that
// keep the device busy for LW_TEST_HOLD_S seconds at that rate: ten times the longest test
// timeout of the suites that use it. The probe runs the same kernel the same way as the run it
// sizes (same slices, same level), so whatever limits its rate limits the run's too. Tests
// assert events (the run was not done, its last work-item never ran), never a time.
#ifndef LANEWORK_TESTS_HOLD_ITEMS_H_
#define LANEWORK_TESTS_HOLD_ITEMS_H_

#include <criterion/criterion.h>
#include <stdint.h>

#define LW_TEST_HOLD_S 600
#define LW_TEST_PROBE_NS (100ll * 1000 * 1000)

// Runs the kernel over n work-items to its end and returns its time as the chip measured it
// (0: the device gave none).
typedef uint64_t (*lw_test_probe_fn)(uint64_t n, void *ctx);

// The work-items that keep the device busy for LW_TEST_HOLD_S seconds (a multiple of 64, the
// largest work-group lanework picks), or 0 when a probe reported no kernel time: the caller
// then cannot size the run, and says so (an assert, or a skip naming the device).
static inline uint64_t lw_test_hold_items(lw_test_probe_fn probe, void *ctx) {
  for (uint64_t n = 4096;; n *= 2) {
    uint64_t ns = probe(n, ctx);
    if (ns == 0) return 0;
    if ((int64_t)ns >= LW_TEST_PROBE_NS || n >= (UINT64_C(1) << 40)) {
      double items = (double)n * LW_TEST_HOLD_S * 1e9 / (double)ns;
      cr_assert_lt(items, 0x1p52, "this device would need %g work-items to stay busy %d s",
                   items, LW_TEST_HOLD_S);
      uint64_t held = (uint64_t)items;
      return held - held % 64 + 64;
    }
  }
}

#endif  // LANEWORK_TESTS_HOLD_ITEMS_H_
