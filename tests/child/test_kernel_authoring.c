// tests/child/test_kernel_authoring.c — what a kernel author gets from lanework/kernel.h, on
// the L2 sim chip: typed scalars (lw_args_add_f32/_f64/_i64 read back with lw_kernel_arg_*),
// the saxpy example kernel, and lw_kernel_fail, whose text reaches the run's (or the
// register's) error, cut and cleaned when the kernel wrote garbage.
#include <math.h>
#include <stdlib.h>

#include "chip_test_util.h"
#include "kernels/scalar_probe.h"
#include "lanework/kernel.h"

TestSuite(kernel_authoring, .init = chip_setup, .fini = chip_teardown, .timeout = 60);

// ---------------------------------------------------------------------------------------------
// Typed scalars

Test(kernel_authoring, typed_scalars_reach_the_sim_kernel_with_their_values_and_types) {
  lw_callable_handle_t h = reg_kernel("scalar_probe");
  scalar_probe_t out[6];
  memset(out, 0xab, sizeof(out));
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_f32(&a, 2.5f));
  LW_ASSERT_OK(lw_args_add_f64(&a, -1.0e300));
  LW_ASSERT_OK(lw_args_add_i64(&a, -42));
  LW_ASSERT_OK(lw_args_add_scalar(&a, UINT64_C(0xfedcba9876543210)));
  LW_ASSERT_OK(lw_args_add_f32(&a, -0.125f));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));

  cr_assert_eq(out[0].type, LW_SCALAR_F32);
  cr_assert_eq(out[0].f32, 2.5f);
  cr_assert_eq(out[0].u64 >> 32, 0, "an f32 leaves the slot's high half zero");
  cr_assert_eq(out[1].type, LW_SCALAR_F64);
  cr_assert_eq(out[1].f64, -1.0e300);
  cr_assert_eq(out[2].type, LW_SCALAR_I64);
  cr_assert_eq(out[2].i64, -42);
  cr_assert_eq(out[3].type, LW_SCALAR_U64);
  cr_assert_eq(out[3].u64, UINT64_C(0xfedcba9876543210));
  cr_assert_eq(out[4].type, LW_SCALAR_F32);
  cr_assert_eq(out[4].f32, -0.125f);
  // Past the last scalar every accessor reads 0 and the type is the default.
  cr_assert_eq(out[5].type, LW_SCALAR_U64);
  cr_assert_eq(out[5].u64, 0);
  cr_assert_eq(out[5].f32, 0.0f);
  cr_assert_eq(out[5].f64, 0.0);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, a_launch_set_after_typed_scalars_keeps_their_types) {
  lw_callable_handle_t h = reg_kernel("scalar_probe");
  scalar_probe_t out[3];
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, out, sizeof(out), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_f64(&a, 0.5));
  const uint64_t g[LW_MAX_LAUNCH_DIMS] = {64, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&a, 1, g, NULL));
  LW_ASSERT_OK(lw_args_add_f32(&a, 3.0f));
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  cr_assert_eq(out[0].type, LW_SCALAR_F64);
  cr_assert_eq(out[0].f64, 0.5);
  cr_assert_eq(out[1].type, LW_SCALAR_F32);
  cr_assert_eq(out[1].f32, 3.0f);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, saxpy_with_an_f32_a_matches_the_reference_exactly) {
  lw_callable_handle_t h = reg_kernel("saxpy");
  // Past one block of the kernel's loop, so its should_stop checks run too.
  enum { N = 70001 };
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  float *want = malloc(N * sizeof(float));
  cr_assert(x && y && want);
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
  LW_ASSERT_OK(lw_chip_run(chip, h, &a, NULL, NULL));
  for (int i = 0; i < N; ++i) cr_assert_eq(y[i], want[i], "y[%d] = %g, want %g", i, y[i], want[i]);
  free(x);
  free(y);
  free(want);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, saxpy_given_a_u64_a_fails_saying_it_wants_an_f32) {
  lw_callable_handle_t h = reg_kernel("saxpy");
  float x[4] = {1, 2, 3, 4}, y[4] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_tensor(&a, x, sizeof(x), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&a, y, sizeof(y), LW_TAG_INOUT));
  LW_ASSERT_OK(lw_args_add_scalar(&a, 2));
  cr_assert_eq(lw_chip_run(chip, h, &a, NULL, NULL), LW_TASK_FAILED);
  cr_assert_str_eq(lw_last_error()->message,
                   "chip 0: kernel saxpy failed: scalar a must be an f32 (lw_args_add_f32), got "
                   "type 0 (returned -1)");
  cr_assert_eq(y[0], 0.0f, "nothing was written");
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

// ---------------------------------------------------------------------------------------------
// lw_kernel_fail

// Runs fail_text in the given mode; returns its handle, finished, for the caller to read.
static lw_handle_t *run_fail_text(lw_callable_handle_t h, uint64_t mode, uint64_t n) {
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_scalar(&a, mode));
  LW_ASSERT_OK(lw_args_add_scalar(&a, n));
  lw_handle_t *hd = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, h, &a, NULL, &hd));
  (void)lw_handle_wait(hd, LW_WAIT_FOREVER);
  return hd;
}

Test(kernel_authoring, the_fail_text_of_a_kernel_reaches_the_handle_error) {
  lw_callable_handle_t h = reg_kernel("fail_text");
  lw_handle_t *hd = run_fail_text(h, 0, 7);
  cr_assert_eq(lw_handle_status(hd), LW_TASK_FAILED);
  const lw_error_t *e = lw_handle_error(hd);
  cr_assert_eq(e->code, LW_TASK_FAILED);
  cr_assert_str_eq(e->message,
                   "chip 0: kernel fail_text failed: n (7) is not a multiple of 4 (returned -1)");
  lw_handle_release(hd);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, a_text_from_an_earlier_run_never_shows_in_a_later_one) {
  lw_callable_handle_t h = reg_kernel("fail_text");
  lw_handle_t *first = run_fail_text(h, 0, 9);
  cr_assert(strstr(lw_handle_error(first)->message, "n (9)"), "%s",
            lw_handle_error(first)->message);
  lw_handle_release(first);
  // Mode 4 returns -5 and says nothing: the message is the plain return code.
  lw_handle_t *second = run_fail_text(h, 4, 0);
  cr_assert_eq(lw_handle_status(second), LW_TASK_FAILED);
  cr_assert_str_eq(lw_handle_error(second)->message, "chip 0: kernel fail_text returned -5");
  lw_handle_release(second);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, a_kernel_that_returns_0_after_writing_a_text_succeeds) {
  lw_callable_handle_t h = reg_kernel("fail_text");
  lw_handle_t *hd = run_fail_text(h, 2, 0);
  cr_assert_eq(lw_handle_status(hd), LW_OK, "%s", lw_handle_error(hd)->message);
  lw_handle_release(hd);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, unterminated_garbage_in_the_fail_buffer_is_cut_and_replaced) {
  lw_callable_handle_t h = reg_kernel("fail_text");
  lw_handle_t *hd = run_fail_text(h, 1, 0);
  cr_assert_eq(lw_handle_status(hd), LW_TASK_FAILED);
  const char *msg = lw_handle_error(hd)->message;
  const char *prefix = "chip 0: kernel fail_text failed: a??b???ca??b???c";
  cr_assert(strncmp(msg, prefix, strlen(prefix)) == 0, "message: %s", msg);
  cr_assert_lt(strlen(msg), LW_ERROR_MESSAGE_BYTES);
  for (const unsigned char *p = (const unsigned char *)msg; *p; ++p) {
    cr_assert(*p >= 0x20 && *p < 0x7f, "byte 0x%02x at %td is not printable", *p,
              (const char *)p - msg);
  }
  lw_handle_release(hd);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, a_fail_text_longer_than_the_buffer_is_cut) {
  lw_callable_handle_t h = reg_kernel("fail_text");
  lw_handle_t *hd = run_fail_text(h, 3, 0);
  cr_assert_eq(lw_handle_status(hd), LW_TASK_FAILED);
  const char *msg = lw_handle_error(hd)->message;
  cr_assert(strncmp(msg, "chip 0: kernel fail_text failed: xxxx", 37) == 0, "%s", msg);
  cr_assert_null(strstr(msg, "END"), "the text's end was cut: %s", msg);
  cr_assert_lt(strlen(msg), LW_ERROR_MESSAGE_BYTES);
  lw_handle_release(hd);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, well_formed_utf8_in_a_fail_text_is_kept) {
  lw_callable_handle_t h = reg_kernel("fail_text");
  lw_handle_t *hd = run_fail_text(h, 5, 0);
  cr_assert_str_eq(lw_handle_error(hd)->message,
                   "chip 0: kernel fail_text failed: caf\xC3\xA9 ok (returned -6)");
  lw_handle_release(hd);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(kernel_authoring, a_prepare_hook_fail_text_reaches_the_register_error) {
  lw_callable_t c = lw_test_kernel("fail_text");
  const char *loaded_name = c.name;
  c.name = "fail_text_prepare";  // the kernel's prepare fails under this name
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, &c, &h);
  c.name = loaded_name;
  lw_callable_free_loaded(&c);
  cr_assert_eq(st, LW_TASK_FAILED, "%s", lw_status_name(st));
  cr_assert_str_eq(lw_last_error()->message,
                   "chip 0: prepare hook of callable fail_text_prepare failed: table of 12 "
                   "entries cannot be built (returned -1)");
}

Test(kernel_authoring, fail_on_an_abi_2_ctx_writes_nothing_and_still_returns_failure) {
  // A kernel built against ABI 3 may run on a chip that hands it an ABI 2 ctx, which ends
  // before fail_text: lw_kernel_fail must not touch those bytes.
  char buf[32];
  memset(buf, 'k', sizeof(buf));
  lw_kernel_ctx_t ctx;
  memset(&ctx, 0, sizeof(ctx));
  ctx.abi_version = 2;
  ctx.fail_text = buf;
  ctx.fail_bytes = sizeof(buf);
  cr_assert_eq(lw_kernel_fail(&ctx, "ignored %d", 1), LW_KERNEL_FAILED);
  for (size_t i = 0; i < sizeof(buf); ++i) cr_assert_eq(buf[i], 'k', "byte %zu changed", i);
  ctx.abi_version = LW_KERNEL_ABI_VERSION;
  cr_assert_eq(lw_kernel_fail(&ctx, "seen %d", 3), LW_KERNEL_FAILED);
  cr_assert_str_eq(buf, "seen 3");
}
