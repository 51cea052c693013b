// tests/child/test_opencl.c — the L2 chip on the opencl backend (child/backend_opencl.c):
// OpenCL C programs built at register, NDRanges enqueued in slices, argument mapping by the
// signature, live tensors between slices, cancellation and timeouts between slices, register
// beside a running kernel, two chips on one device, and fd checks that tell a driver's
// process-wide fds from a leak. Built only when CMake found OpenCL; CI installs PoCL so every
// case runs for real.
//
// Nothing here assumes a device's speed: a kernel that must still run at a deadline is sized
// by a probe on the device at hand (tests/opencl_spin.h).
#include <stdlib.h>

#include "child/chip_impl.h"
#include "fd_check.h"
#include "lanework/kernel.h"
#include "opencl_spin.h"
#include "test_util.h"

static lw_chip_t *chip;
static const lw_test_fds_t *fds_base;

static void open_opencl_chip(lw_chip_t **out) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "opencl");
  LW_ASSERT_OK(lw_chip_open(&cfg, out));
}

// One open/close of an opencl chip that also builds a program, maps a buffer and runs a
// kernel, so a driver opens whatever it opens for that (the fd checks' warm-up and cycle).
static void chip_cycle(void *unused) {
  (void)unused;
  static const char src[] = "__kernel void touch(__global int *p) { p[get_global_id(0)] = 1; }";
  static const uint8_t dirs[1] = {LW_PARAM_OUT};
  lw_chip_t *c = NULL;
  open_opencl_chip(&c);
  lw_callable_t k = {.name = "touch", .image = src, .image_bytes = sizeof(src) - 1,
                     .entry = "touch", .n_params = 1, .param_dirs = dirs};
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(c, &k, &h));
  int out[64] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  const uint64_t g[3] = {64, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 1, g, NULL));
  LW_ASSERT_OK(lw_chip_run(c, h, &a, NULL, NULL));
  cr_assert_eq(out[63], 1);
  lw_chip_close(c);
}

static void ocl_setup(void) {
  // Taken after a first open/close: fds the driver keeps for the life of the process (NVIDIA's
  // /dev/nvidia*) are not a leak (tests/fd_check.h).
  fds_base = lw_test_fds_warm_baseline(chip_cycle, NULL);
  open_opencl_chip(&chip);
}

static void ocl_teardown(void) {
  lw_chip_close(chip);
  chip = NULL;
  char extra[512];
  int n = lw_test_fds_excess(fds_base, extra, sizeof(extra));
  cr_expect_eq(n, 0, "the chip left %d fd%s open: %s", n, n == 1 ? "" : "s", extra);
}

TestSuite(opencl, .init = ocl_setup, .fini = ocl_teardown, .timeout = 120);

static const uint8_t k_vadd_dirs[4] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};
static const uint8_t k_repeat_dirs[5] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR,
                                         LW_PARAM_SCALAR};

// An OpenCL C kernel from the build's kernel folder, with its signature.
static lw_callable_t cl_kernel(const char *name, uint32_t n_params, const uint8_t *dirs) {
  char path[512];
  snprintf(path, sizeof(path), "%s/opencl/%s.cl", lw_test_kernel_dir(), name);
  lw_callable_t c;
  lw_status_t st = lw_callable_load_file(path, &c);
  cr_assert_eq(st, LW_OK, "loading %s: %s", path, lw_last_error()->message);
  c.n_params = n_params;
  c.param_dirs = dirs;
  return c;
}

static lw_callable_handle_t reg(const char *name, uint32_t n_params, const uint8_t *dirs) {
  lw_callable_t c = cl_kernel(name, n_params, dirs);
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, &c, &h);
  cr_assert_eq(st, LW_OK, "register %s: %s", name, lw_last_error()->message);
  lw_callable_free_loaded(&c);
  return h;
}

static void expect_register_error(const lw_callable_t *c, lw_status_t want, const char *needle) {
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, c, &h);
  cr_assert_eq(st, want, "got %s (%s)", lw_status_name(st), lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, needle), "message '%s' lacks '%s'",
            lw_last_error()->message, needle);
}

static void vadd_args(lw_args_t *a, float *x, float *y, float *z, uint64_t n) {
  lw_args_init(a);
  LW_ASSERT_OK(lw_args_add_tensor(a, x, n * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(a, y, n * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(a, z, n * sizeof(float), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(a, n));
  const uint64_t g[3] = {n, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(a, 1, g, NULL));
}

Test(opencl, vector_add_matches_reference_exactly_and_reports_kernel_time) {
  lw_callable_handle_t h = reg("vector_add", 4, k_vadd_dirs);
  // Not a multiple of any work-group size: the range is sliced and the tail still computed.
  enum { N = 100003 };
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  float *z = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i) {
    x[i] = (float)i * 0.25f;
    y[i] = 3.0f - (float)i;
    z[i] = -1.0f;
  }
  lw_args_t a;
  vadd_args(&a, x, y, z, N);
  lw_run_timing_t t;
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, &t));
  for (int i = 0; i < N; ++i) cr_assert_eq(z[i], x[i] + y[i], "index %d", i);
  cr_assert_gt(t.kernel_wall_ns, 0, "kernel time comes from the profiling events");
  // A second run reuses the learned slice size and is still exact.
  for (int i = 0; i < N; ++i) z[i] = 0.0f;
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  for (int i = 0; i < N; ++i) cr_assert_eq(z[i], x[i] + y[i], "index %d", i);
  free(x);
  free(y);
  free(z);
}

Test(opencl, repeat_vector_add_with_an_explicit_local_size_matches_reference) {
  lw_callable_handle_t h = reg("repeat_vector_add", 5, k_repeat_dirs);
  enum { N = 4096, REPS = 37 };
  uint32_t *x = malloc(N * 4), *y = malloc(N * 4), *z = calloc(N, 4);
  for (uint32_t i = 0; i < N; ++i) {
    x[i] = i * 2654435761u;
    y[i] = i ^ 0x5bd1e995u;
  }
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, x, N * 4, LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, y, N * 4, LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, z, N * 4, LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&a, N));
  LW_ASSERT_OK(lw_args_add_scalar(&a, REPS));
  const uint64_t g[3] = {N, 0, 0}, l[3] = {32, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 1, g, l));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  for (uint32_t i = 0; i < N; ++i) {
    uint32_t acc = x[i];
    for (int r = 0; r < REPS; ++r) acc = acc * 3u + y[i];
    cr_assert_eq(z[i], acc, "index %u", i);
  }
  free(x);
  free(y);
  free(z);
}

static const uint8_t k_saxpy_dirs[4] = {LW_PARAM_IN, LW_PARAM_INOUT, LW_PARAM_SCALAR,
                                        LW_PARAM_SCALAR};

Test(opencl, saxpy_gets_its_f32_a_as_a_4_byte_float_and_matches_reference) {
  lw_callable_handle_t h = reg("saxpy", 4, k_saxpy_dirs);
  enum { N = 50021 };
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  float *want = malloc(N * sizeof(float));
  cr_assert(x && y && want);
  // a * x[i] is exact in float for these values, so an OpenCL compiler that fuses the
  // multiply-add gives the same bits as the host.
  const float alpha = 1.75f;
  for (int i = 0; i < N; ++i) {
    x[i] = (float)(i % 97) * 0.5f;
    y[i] = 2.0f - (float)(i % 13);
    want[i] = alpha * x[i] + y[i];
  }
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, x, N * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, y, N * sizeof(float), LW_TAG_INOUT));
  LW_ASSERT_OK(lw_args_add_f32(&a, alpha));
  LW_ASSERT_OK(lw_args_add_scalar(&a, N));
  const uint64_t g[3] = {N, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 1, g, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  for (int i = 0; i < N; ++i) cr_assert_eq(y[i], want[i], "y[%d] = %g, want %g", i, y[i], want[i]);
  free(x);
  free(y);
  free(want);
}

Test(opencl, typed_scalars_are_passed_as_double_float_long_and_ulong) {
  static const char src[] =
      "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
      "__kernel void lw_kernel_main(__global ulong *out, double d, float f, long i, ulong u) {\n"
      "  out[0] = as_ulong(d);\n"
      "  out[1] = (ulong)as_uint(f);\n"
      "  out[2] = (ulong)i;\n"
      "  out[3] = u;\n"
      "}\n";
  static const uint8_t dirs[5] = {LW_PARAM_OUT, LW_PARAM_SCALAR, LW_PARAM_SCALAR,
                                  LW_PARAM_SCALAR, LW_PARAM_SCALAR};
  lw_callable_t c = {.name = "scalar_kinds", .image = src, .image_bytes = sizeof(src),
                     .n_params = 5, .param_dirs = dirs};
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, &c, &h);
  cr_assert_eq(st, LW_OK, "register: %s", lw_last_error()->message);
  uint64_t out[4] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_f64(&a, -2.5e-300));
  LW_ASSERT_OK(lw_args_add_f32(&a, 3.25f));
  LW_ASSERT_OK(lw_args_add_i64(&a, -7));
  LW_ASSERT_OK(lw_args_add_scalar(&a, UINT64_C(0x8000000000000001)));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  double d = -2.5e-300;
  float f = 3.25f;
  uint64_t d_bits;
  uint32_t f_bits;
  memcpy(&d_bits, &d, sizeof(d));
  memcpy(&f_bits, &f, sizeof(f));
  cr_assert_eq(out[0], d_bits, "the double arrives bit for bit");
  cr_assert_eq(out[1], f_bits, "the float arrives bit for bit");
  cr_assert_eq(out[2], (uint64_t)INT64_C(-7));
  cr_assert_eq(out[3], UINT64_C(0x8000000000000001));
}

Test(opencl, an_f32_for_a_ulong_parameter_is_refused_naming_the_4_byte_float) {
  lw_callable_handle_t h = reg("saxpy", 4, k_saxpy_dirs);
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, x, sizeof(x), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, y, sizeof(y), LW_TAG_INOUT));
  LW_ASSERT_OK(lw_args_add_f32(&a, 1.0f));
  LW_ASSERT_OK(lw_args_add_f32(&a, 4.0f));  // n is a ulong: a 4-byte float does not fit it
  cr_assert_eq(lw_chip_run(chip, h, &a, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "argument 3 (a 4-byte float scalar) refused"),
            "%s", lw_last_error()->message);
}

Test(opencl, empty_kernel_runs_without_arguments_or_geometry) {
  lw_callable_handle_t h = reg("empty", 0, NULL);
  for (int i = 0; i < 3; ++i) LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
}

Test(opencl, build_options_reach_the_compiler_and_are_part_of_the_identity) {
  static const char src[] =
      "__kernel void scale(__global int *out) { out[get_global_id(0)] = FACTOR; }";
  static const uint8_t dirs[1] = {LW_PARAM_OUT};
  lw_callable_t c = {.name = "scale", .image = src, .image_bytes = sizeof(src) - 1,
                     .entry = "scale", .n_params = 1, .param_dirs = dirs,
                     .build_options = "-DFACTOR=3"};
  lw_callable_handle_t h3, h7;
  LW_ASSERT_OK(lw_chip_register(chip, &c, &h3));
  c.build_options = "-DFACTOR=7";
  LW_ASSERT_OK(lw_chip_register(chip, &c, &h7));
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 2, "other options, other callable");
  int out[8] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  const uint64_t g[3] = {8, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 1, g, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, h3, &a, NULL, NULL));
  for (int i = 0; i < 8; ++i) cr_assert_eq(out[i], 3, "index %d", i);
  LW_ASSERT_OK(lw_chip_run(chip, h7, &a, NULL, NULL));
  for (int i = 0; i < 8; ++i) cr_assert_eq(out[i], 7, "index %d", i);
  // Without the option the program does not build, and the log says why.
  c.build_options = NULL;
  expect_register_error(&c, LW_INVALID_ARGUMENT, "build of callable scale failed");
  cr_assert(strstr(lw_last_error()->message, "FACTOR"), "the log names the identifier: %s",
            lw_last_error()->message);
}

Test(opencl, bad_source_fails_register_with_the_build_log_in_the_error) {
  static const char src[] =
      "__kernel void lw_kernel_main(__global int *out) {\n"
      "  out[0] = not_declared_anywhere + 1;\n"
      "}\n";
  static const uint8_t dirs[1] = {LW_PARAM_OUT};
  lw_callable_t c = {.name = "broken", .image = src, .image_bytes = sizeof(src),
                     .n_params = 1, .param_dirs = dirs};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "opencl: build of callable broken failed");
  const char *msg = lw_last_error()->message;
  cr_assert(strstr(msg, "CL_BUILD_PROGRAM_FAILURE"), "%s", msg);
  cr_assert(strstr(msg, "not_declared_anywhere"), "the log's error line is kept: %s", msg);
  cr_assert(strlen(msg) < LW_ERROR_MESSAGE_BYTES);
  lw_registry_stats_t stats;
  lw__registry_stats(chip->registry, &stats);
  cr_assert_eq(stats.slots_used, 0, "nothing stays loaded");
}

Test(opencl, argument_count_and_entry_are_checked_at_register) {
  lw_callable_t c = cl_kernel("vector_add", 3, k_vadd_dirs);
  expect_register_error(&c, LW_INVALID_ARGUMENT,
                        "kernel 'lw_kernel_main' of callable vector_add takes 4 arguments but "
                        "its signature declares 3 parameters");
  c.n_params = 4;
  c.entry = "vadd";
  expect_register_error(&c, LW_INVALID_ARGUMENT, "callable vector_add has no kernel 'vadd'");
  cr_assert(strstr(lw_last_error()->message, "lw_kernel_main"), "names what the program has: %s",
            lw_last_error()->message);
  lw_callable_free_loaded(&c);
}

Test(opencl, elf_and_unusable_spirv_images_are_refused_naming_the_format) {
  char path[512];
  snprintf(path, sizeof(path), "%s/noop.so", lw_test_kernel_dir());
  lw_callable_t elf;
  LW_ASSERT_OK(lw_callable_load_file(path, &elf));
  expect_register_error(&elf, LW_INVALID_ARGUMENT,
                        "backend opencl cannot load callable noop: its image format is ELF");
  cr_assert(strstr(lw_last_error()->message, "opencl loads: OpenCL C, SPIR-V"), "%s",
            lw_last_error()->message);
  lw_callable_free_loaded(&elf);

  // A SPIR-V header with no module behind it: refused whether or not the device takes IL.
  static const uint8_t spirv[20] = {0x03, 0x02, 0x23, 0x07, 0x00, 0x00, 0x01, 0x00};
  lw_callable_t c = {.name = "il", .image = spirv, .image_bytes = sizeof(spirv)};
  expect_register_error(&c, LW_INVALID_ARGUMENT, "callable il");
}

// ---------------------------------------------------------------------------------------------
// Kernels that run until stopped, on any device (tests/opencl_spin.h, tests/hold_items.h)

// A spin or steer run's host words and args; they outlive the run.
typedef struct spin_words {
  lw_test_spin_words_t w;
  bool steer;
  lw_args_t args;
} spin_words_t;

static lw_callable_handle_t reg_spin_kind(lw_chip_t *c, bool steer) {
  lw_callable_t k = lw_test_spin_callable(steer);
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(c, &k, &h);
  cr_assert_eq(st, LW_OK, "register %s: %s", k.name, lw_last_error()->message);
  lw_test_spin_callable_free(&k);
  return h;
}

static lw_callable_handle_t reg_spin(lw_chip_t *c) { return reg_spin_kind(c, false); }
static lw_callable_handle_t reg_steer(lw_chip_t *c) { return reg_spin_kind(c, true); }

static lw_args_t *spin_args(spin_words_t *w, uint64_t n) {
  lw_test_spin_args(&w->w, w->steer, n, &w->args);
  return &w->args;
}

typedef struct probe_ctx {
  lw_chip_t *chip;
  lw_callable_handle_t h;
  bool steer;
} probe_ctx_t;

static uint64_t probe_l2(uint64_t n, void *ctx) {
  probe_ctx_t *p = ctx;
  spin_words_t w = {.steer = p->steer};
  lw_run_timing_t t;
  LW_ASSERT_OK(lw_chip_run(p->chip, p->h, spin_args(&w, n), NULL, &t));
  cr_assert_eq(atomic_load(&w.w.last), 1u, "the probe of %llu work-items ran them all",
               (unsigned long long)n);
  return t.kernel_wall_ns;
}

// Work-items of h (spin, or steer not skipping) on chip c that keep its device busy for
// LW_TEST_HOLD_S seconds.
static uint64_t hold_items(lw_chip_t *c, lw_callable_handle_t h, bool steer) {
  probe_ctx_t p = {c, h, steer};
  uint64_t n = lw_test_hold_items(probe_l2, &p);
  cr_assert_gt(n, 0, "sizing a run on the device needs the device's profiled kernel time");
  return n;
}

// Submits a spin/steer run of n work-items on c and returns once it started (the run lane
// stored a fresh generation in the chip's cancel word): from then on it runs until it is
// stopped, or for LW_TEST_HOLD_S seconds.
static lw_handle_t *start_run(lw_chip_t *c, lw_callable_handle_t h, spin_words_t *w, uint64_t n,
                              const lw_run_config_t *cfg) {
  uint64_t idle_generation = atomic_load(&c->cancel_word);
  lw_handle_t *hd = NULL;
  LW_ASSERT_OK(lw_chip_run_async(c, h, spin_args(w, n), cfg, &hd));
  while (atomic_load(&c->cancel_word) == idle_generation && !lw_handle_done(hd)) {
    lw_test_sleep_us(50);
  }
  return hd;
}

Test(opencl, cancel_of_a_long_sliced_kernel_finishes_cancelled_between_slices) {
  lw_callable_handle_t h = reg_spin(chip);
  spin_words_t w = {0};
  lw_handle_t *hd = start_run(chip, h, &w, hold_items(chip, h, false), NULL);
  LW_ASSERT_OK(lw_handle_cancel(hd));
  cr_assert_eq(lw_handle_wait(hd, LW_WAIT_FOREVER), LW_CANCELLED, "%s",
               lw_handle_error(hd)->message);
  cr_assert(strstr(lw_handle_error(hd)->message, "cancelled while running"), "%s",
            lw_handle_error(hd)->message);
  lw_handle_release(hd);
  cr_assert_eq(atomic_load(&w.w.last), 0u, "the last work-item never ran");

  // The chip stays usable: an exact short run right after.
  lw_callable_handle_t hv = reg("vector_add", 4, k_vadd_dirs);
  float x[64], y[64], z[64];
  for (int i = 0; i < 64; ++i) {
    x[i] = (float)i;
    y[i] = 0.5f;
  }
  lw_args_t a;
  vadd_args(&a, x, y, z, 64);
  LW_ASSERT_OK(lw_chip_run(chip, hv, &a, NULL, NULL));
  for (int i = 0; i < 64; ++i) cr_assert_eq(z[i], x[i] + y[i]);
}

// A run of few, cheap work-items teaches the module a slice as long as the whole range; a run
// of the same kernel whose scalars make every work-item thousands of times dearer must not
// start from it (it would be one slice of seconds with no cancel point), but from a small one.
Test(opencl, a_run_with_other_scalars_starts_from_a_small_slice_and_a_cancel_lands_in_it) {
  enum { ITEMS = 4096 };
  lw_callable_handle_t h = reg_spin(chip);
  spin_words_t w = {0};
  // The probe: the device time of ITEMS work-items at the usual rounds.
  lw_run_timing_t t;
  LW_ASSERT_OK(lw_chip_run(chip, h, spin_args(&w, ITEMS), NULL, &t));
  cr_assert_gt(t.kernel_wall_ns, 0, "the device profiles its kernels");
  uint64_t reps = w.args.scalar[1];
  // One round per work-item: cheap slices, so the module learns one of the whole range.
  spin_args(&w, ITEMS)->scalar[1] = 1;
  LW_ASSERT_OK(lw_chip_run(chip, h, &w.args, NULL, NULL));
  cr_assert_eq(atomic_load(&w.w.last), 1u, "the cheap run ran out");
  // Rounds for about 2 s over the range: the first slice shows `started`, then the cancel.
  double scale = 2e9 / (double)t.kernel_wall_ns;
  uint64_t dear = (uint64_t)((double)reps * (scale > 1 ? scale : 1));
  lw_handle_t *hd = NULL;
  spin_args(&w, ITEMS)->scalar[1] = dear;
  LW_ASSERT_OK(lw_chip_run_async(chip, h, &w.args, NULL, &hd));
  while (atomic_load(&w.w.started) == 0 && !lw_handle_done(hd)) lw_test_sleep_us(100);
  LW_ASSERT_OK(lw_handle_cancel(hd));
  cr_assert_eq(lw_handle_wait(hd, LW_WAIT_FOREVER), LW_CANCELLED, "%s",
               lw_handle_error(hd)->message);
  lw_handle_release(hd);
  cr_assert_eq(atomic_load(&w.w.last), 0u,
               "the dear run was stopped after a slice of it, not run as one slice to its end");
}

Test(opencl, a_timeout_stops_a_long_sliced_kernel_with_deadline_exceeded) {
  lw_callable_handle_t h = reg_spin(chip);
  uint64_t n = hold_items(chip, h, false);
  spin_words_t w = {0};
  lw_run_config_t cfg;
  lw_run_config_default(&cfg);
  cfg.timeout_ns = 30ll * 1000 * 1000;
  lw_status_t st = lw_chip_run(chip, h, spin_args(&w, n), &cfg, NULL);
  cr_assert_eq(st, LW_DEADLINE_EXCEEDED, "got %s: %s", lw_status_name(st),
               lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "timeout"), "%s", lw_last_error()->message);
  cr_assert_eq(atomic_load(&w.w.started), 1u, "the kernel ran until the deadline stopped it");
  cr_assert_eq(atomic_load(&w.w.last), 0u, "the last work-item never ran");
}

Test(opencl, register_of_a_large_program_completes_while_a_kernel_runs) {
  lw_callable_handle_t h = reg_spin(chip);
  spin_words_t w = {0};
  lw_handle_t *run = start_run(chip, h, &w, hold_items(chip, h, false), NULL);
  cr_assert_not(lw_handle_done(run), "the long run is under way");

  // The register lane builds the program while the run lane's kernel keeps running.
  static const uint8_t dirs[3] = {LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};
  lw_callable_t big = cl_kernel("big_program", 3, dirs);
  big.build_options = "-DSTAGES=16";
  lw_handle_t *hr = NULL;
  LW_ASSERT_OK(lw_chip_register_async(chip, &big, &hr));
  lw_callable_free_loaded(&big);
  cr_assert_eq(lw_handle_wait(hr, LW_WAIT_FOREVER), LW_OK, "%s", lw_handle_error(hr)->message);
  cr_assert_not(lw_handle_done(run), "the register finished before the run it overlapped");
  lw_callable_handle_t hb;
  LW_ASSERT_OK(lw_handle_callable(hr, &hb));
  lw_handle_release(hr);

  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(run);
  cr_assert_eq(atomic_load(&w.w.last), 0u, "the run was stopped, not finished");

  // The program built beside the run works.
  float in[256], out[256];
  for (int i = 0; i < 256; ++i) {
    in[i] = (float)i / 256.0f;
    out[i] = -12345.0f;
  }
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, in, sizeof(in), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&a, 256));
  const uint64_t g[3] = {256, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 1, g, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, hb, &a, NULL, NULL));
  for (int i = 0; i < 256; ++i) cr_assert_neq(out[i], -12345.0f, "index %d was written", i);
}

// ---------------------------------------------------------------------------------------------
// Live tensors (LW_PARAM_LIVE): exchanged with host memory at every slice boundary

Test(opencl, a_live_out_tensor_shows_the_host_a_kernels_store_while_its_run_runs) {
  lw_callable_handle_t h = reg_spin(chip);
  spin_words_t w = {0};
  lw_handle_t *hd = start_run(chip, h, &w, hold_items(chip, h, false), NULL);
  // Work-item 0's store reaches host memory after the first slice at the latest, long before
  // the range could run out.
  while (atomic_load(&w.w.started) == 0 && !lw_handle_done(hd)) lw_test_sleep_us(100);
  cr_assert_not(lw_handle_done(hd), "the run ended before its live store reached the host");
  cr_assert_eq(atomic_load(&w.w.started), 1u);
  LW_ASSERT_OK(lw_handle_cancel(hd));
  cr_assert_eq(lw_handle_wait(hd, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(hd);
  cr_assert_eq(atomic_load(&w.w.last), 0u, "the last work-item never ran");
}

Test(opencl, a_live_in_tensor_steers_a_running_kernel_which_then_ends_ok_on_its_own) {
  lw_callable_handle_t h = reg_steer(chip);
  uint64_t n = hold_items(chip, h, true);
  spin_words_t w = {.steer = true};
  lw_handle_t *hd = start_run(chip, h, &w, n, NULL);
  while (atomic_load(&w.w.started) == 0 && !lw_handle_done(hd)) lw_test_sleep_us(100);
  cr_assert_not(lw_handle_done(hd), "the run ended before the host could steer it");
  // Without the host's store the range would run for HOLD_S seconds: the run ending OK means
  // the store reached the kernel while it ran (at the next slice at the latest).
  atomic_store(&w.w.skip, 1);
  cr_assert_eq(lw_handle_wait(hd, LW_WAIT_FOREVER), LW_OK, "%s",
               lw_handle_error(hd) ? lw_handle_error(hd)->message : "");
  lw_handle_release(hd);
  cr_assert_eq(atomic_load(&w.w.last), 1u, "every work-item of the range ran, the last one too");
}

Test(opencl, live_tensors_reach_the_kernel_at_its_start_and_the_host_at_its_end_of_a_short_run) {
  // One slice: the copies before and after it are the only ones, and the run's result is as
  // without live tensors.
  lw_callable_handle_t h = reg_steer(chip);
  spin_words_t w = {.steer = true};
  lw_args_t *a = spin_args(&w, 64);
  atomic_store(&w.w.skip, 1);  // set before the run: the first slice already sees it
  LW_ASSERT_OK(lw_chip_run(chip, h, a, NULL, NULL));
  cr_assert_eq(atomic_load(&w.w.started), 1u);
  cr_assert_eq(atomic_load(&w.w.last), 1u);
}

// ---------------------------------------------------------------------------------------------
// Two chips on one device

Test(opencl, two_chips_on_one_device_in_one_process_run_side_by_side) {
  // The fixture's chip and a second one, both on device 0: two contexts on one device.
  lw_chip_t *other = NULL;
  open_opencl_chip(&other);
  lw_callable_handle_t h = reg_spin(chip);
  spin_words_t w = {0};
  lw_handle_t *long_run = start_run(chip, h, &w, hold_items(chip, h, false), NULL);

  // While the first chip's kernel runs, the second chip builds and runs its own, exactly.
  lw_callable_t vadd = cl_kernel("vector_add", 4, k_vadd_dirs);
  lw_callable_handle_t hv;
  LW_ASSERT_OK(lw_chip_register(other, &vadd, &hv));
  lw_callable_free_loaded(&vadd);
  float x[256], y[256], z[256];
  for (int i = 0; i < 256; ++i) {
    x[i] = (float)i;
    y[i] = 2.0f;
    z[i] = -1.0f;
  }
  lw_args_t a;
  vadd_args(&a, x, y, z, 256);
  LW_ASSERT_OK(lw_chip_run(other, hv, &a, NULL, NULL));
  for (int i = 0; i < 256; ++i) cr_assert_eq(z[i], x[i] + y[i], "index %d", i);
  cr_assert_not(lw_handle_done(long_run), "the second chip's run waited for the first chip's");

  LW_ASSERT_OK(lw_handle_cancel(long_run));
  cr_assert_eq(lw_handle_wait(long_run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(long_run);
  lw_chip_close(other);
}

// ---------------------------------------------------------------------------------------------
// fd checks (tests/fd_check.h): a driver's process-wide fds are not a leak, a leak still is

// Few cycles: a leak of one fd a cycle shows after one, and a GPU context costs a fraction of
// a second to make (this binary runs within a time budget on a lent GPU machine, docs/gpu.md).
enum { FD_CYCLES = 5, LEAKY_CYCLES = 3 };

Test(opencl, an_opencl_chip_opened_and_closed_5_times_takes_no_more_fds_than_the_first_time) {
  char extra[512];
  int grown = lw_test_fds_growth(chip_cycle, NULL, FD_CYCLES, extra, sizeof(extra));
  cr_assert_eq(grown, 0, "%d open/close cycles left %d more fds: %s", FD_CYCLES, grown, extra);
}

// The negative controls: the same helpers, run against a leak the test makes itself, must
// report it, or the checks above could not fail.

Test(opencl, the_fd_check_reports_an_fd_opened_after_its_baseline_naming_it) {
  lw_test_fds_t base;
  lw_test_fds_snapshot(&base);
  int p[2];
  cr_assert_eq(pipe(p), 0);
  char extra[512];
  int n = lw_test_fds_excess(&base, extra, sizeof(extra));
  cr_assert_eq(n, 2, "a pipe is two fds: %s", extra);
  cr_assert(strstr(extra, "pipe:"), "the message names what the fds are: %s", extra);
  close(p[0]);
  close(p[1]);
  cr_assert_eq(lw_test_fds_excess(&base, extra, sizeof(extra)), 0);
}

// A chip that kept one fd on every open/close.
static int leaked_fds[LEAKY_CYCLES + 1];
static int n_leaked;

static void leaky_chip_cycle(void *unused) {
  chip_cycle(unused);
  leaked_fds[n_leaked++] = dup(STDERR_FILENO);
}

Test(opencl, the_cycle_check_fails_a_chip_that_leaks_an_fd_on_every_open_and_close) {
  char extra[512];
  int grown = lw_test_fds_growth(leaky_chip_cycle, NULL, LEAKY_CYCLES, extra, sizeof(extra));
  for (int i = 0; i < n_leaked; ++i) close(leaked_fds[i]);  // the fixture's check stays clean
  cr_assert_eq(grown, LEAKY_CYCLES, "one fd a cycle over %d cycles, counted %d: %s",
               LEAKY_CYCLES, grown, extra);
  cr_assert(strstr(extra, "fd "), "the message names the leaked fds: %s", extra);
}

Test(opencl, a_device_id_past_the_last_device_is_refused_naming_the_range) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "opencl");
  cfg.device_id = 999;
  lw_chip_t *c = NULL;
  cr_assert_eq(lw_chip_open(&cfg, &c), LW_INVALID_ARGUMENT);
  cr_assert_null(c);
  cr_assert(strstr(lw_last_error()->message, "device_id 999 is out of range"), "%s",
            lw_last_error()->message);
}

Test(opencl, devices_are_listed_in_device_id_order_and_by_lanework_info) {
  lw_opencl_device_info_t devs[16];
  uint32_t n = 0;
  lw_error_t err;
  LW_ASSERT_OK(lw__opencl_list(devs, 16, &n, &err));
  cr_assert_geq(n, 1u, "CI installs PoCL: at least its CPU device");
  for (uint32_t i = 0; i < n && i < 16; ++i) {
    cr_assert_eq(devs[i].index, (int32_t)i);
    cr_assert_neq(devs[i].device[0], '\0', "device %u has a name", i);
    cr_assert_neq(devs[i].platform[0], '\0', "device %u has a platform", i);
    cr_assert_gt(devs[i].compute_units, 0u);
  }
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "'%s' info", lw_test_tool_path());
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char out[4096];
  size_t got = fread(out, 1, sizeof(out) - 1, p);
  out[got] = '\0';
  cr_assert_eq(pclose(p), 0);
  cr_assert(strstr(out, "backends:   sim, opencl"), "%s", out);
  char line[512];
  snprintf(line, sizeof(line), "   0: %s / %s, %s, %u CU", devs[0].platform, devs[0].device,
           devs[0].type, devs[0].compute_units);
  cr_assert(strstr(out, line), "'%s' lacks '%s'", out, line);
}

Test(opencl, without_a_platform_the_backend_says_unavailable_and_what_to_install) {
  // The ICD loader finds no driver when its vendor folder is empty: run `lanework info` so,
  // in its own process (the loader reads the variable once per process).
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "OCL_ICD_VENDORS=/nonexistent-lanework-vendors '%s' info",
           lw_test_tool_path());
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char out[4096];
  size_t got = fread(out, 1, sizeof(out) - 1, p);
  out[got] = '\0';
  cr_assert_eq(pclose(p), 0);
  cr_assert(strstr(out, "opencl:     opencl: no OpenCL platform found (install an OpenCL driver: "
                        "pocl-opencl-icd"),
            "%s", out);
}

// No fixture: OpenCL must not have started in this test's process before the variable is set
// (every test runs in its own process).
TestSuite(opencl_absent, .timeout = 60);

Test(opencl_absent, opening_an_opencl_chip_without_a_platform_is_unavailable) {
  cr_assert_eq(setenv("OCL_ICD_VENDORS", "/nonexistent-lanework-vendors", 1), 0);
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "opencl");
  lw_chip_t *c = NULL;
  cr_assert_eq(lw_chip_open(&cfg, &c), LW_UNAVAILABLE, "%s", lw_last_error()->message);
  cr_assert_null(c);
  cr_assert(strstr(lw_last_error()->message, "no OpenCL platform found"), "%s",
            lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "pocl-opencl-icd"), "%s", lw_last_error()->message);
}
