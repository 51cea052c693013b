// tests/child/test_bad_image.c — at L2 a damaged kernel image (tests/callables/bad_images.h:
// truncated anywhere, a zstd frame of a truncated kernel, garbage, another machine's, too big,
// empty) fails its register with INVALID_ARGUMENT naming the callable and what is wrong, in
// the caller's process, which goes on; the chip then registers and runs a good kernel.
#include "callables/bad_images.h"
#include "child/chip_test_util.h"
#include "lanework/stats.h"
#include "test_util.h"

TestSuite(chip_bad_image, .init = chip_setup, .fini = chip_teardown, .timeout = 60);

static void expect_refused(const lw_test_bad_image_t *b, lw_status_t st, const lw_error_t *e) {
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s: got %s (%s)", b->what, lw_status_name(st),
               e->message);
  cr_assert(strstr(e->message, "callable vadd"), "%s: the message names no callable: '%s'",
            b->what, e->message);
  cr_assert(strstr(e->message, b->reason), "%s: message '%s' lacks '%s'", b->what, e->message,
            b->reason);
}

// The chip still takes a good kernel and runs it.
static void expect_chip_works(void) {
  lw_callable_handle_t h = reg_kernel("vector_add");
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {0};
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, sizeof(a), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, sizeof(b), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, sizeof(c), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_chip_run(chip, h, &args, NULL, NULL));
  for (int i = 0; i < 4; ++i) cr_assert_eq(c[i], a[i] + b[i], "index %d", i);
  LW_ASSERT_OK(lw_chip_unregister(chip, h));
}

Test(chip_bad_image, register_refuses_each_damaged_image_and_the_process_goes_on) {
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");
  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    lw_callable_t c = lw_test_bad_callable(b, "vadd");
    lw_callable_handle_t h = {.id = 7};
    lw_status_t st = lw_chip_register(chip, &c, &h);
    expect_refused(b, st, lw_last_error());
    cr_assert_eq(h.id, 0, "%s: a handle came back", b->what);
  }
  lw_chip_stats_t s = {.struct_size = sizeof s};
  LW_ASSERT_OK(lw_chip_stats(chip, &s));
  cr_assert_eq(s.registers, 0);
  cr_assert_eq(s.callables, 0, "nothing of a refused image stays loaded");
  expect_chip_works();
  lw_test_bad_images_free(&set);
}

Test(chip_bad_image, an_async_register_of_a_truncated_image_finishes_with_the_reason) {
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");
  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    if (b->n == 0 || b->mapped_bytes) continue;  // refused by the call itself (the descriptor)
    lw_callable_t c = lw_test_bad_callable(b, "vadd");
    lw_handle_t *h = NULL;
    // The async form copies the image: the register lane checks the copy.
    LW_ASSERT_OK(lw_chip_register_async(chip, &c, &h));
    lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
    cr_assert_not_null(lw_handle_error(h), "%s", b->what);
    expect_refused(b, st, lw_handle_error(h));
    cr_assert_eq(lw_handle_error(h)->worker_id, 0, "%s: the error names chip 0", b->what);
    lw_handle_release(h);
  }
  expect_chip_works();
  lw_test_bad_images_free(&set);
}
