// tests/parent/test_bad_image_l3.c — at L3 a damaged kernel image (tests/callables/bad_images.h)
// fails lw_worker_register with INVALID_ARGUMENT naming the callable and what is wrong, refused
// in the program's process before anything is sent to a chip child: no child sees it (no
// register failure on any child), none dies or is respawned, and the same chips then register
// and run a good kernel.
#include "callables/bad_images.h"
#include "lanework/orch.h"
#include "lanework/stats.h"
#include "lanework/worker.h"
#include "parent/worker_test_util.h"

#define CHIPS 2

static void expect_refused(const lw_test_bad_image_t *b, lw_status_t st) {
  const lw_error_t *e = lw_last_error();
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s: got %s (%s)", b->what, lw_status_name(st),
               e->message);
  cr_assert(strstr(e->message, "callable vadd"), "%s: the message names no callable: '%s'",
            b->what, e->message);
  cr_assert(strstr(e->message, b->reason), "%s: message '%s' lacks '%s'", b->what, e->message,
            b->reason);
  cr_assert_eq(e->worker_id, -1, "%s: refused by chip %d, not before any child saw it ('%s')",
               b->what, e->worker_id, e->message);
}

// No chip child saw a register, failed one, died or was replaced.
static void expect_children_untouched(void) {
  lw_worker_stats_t s = {.struct_size = sizeof s};
  LW_ASSERT_OK(lw_worker_stats(w, &s));
  for (uint32_t i = 0; i < CHIPS; ++i) {
    cr_assert_eq(s.child[i].register_failures, 0, "chip %u saw a register of a bad image", i);
    cr_assert_eq(s.child[i].deaths, 0, "chip %u died", i);
    cr_assert_eq(s.child[i].respawns, 0, "chip %u was respawned", i);
    cr_assert_eq(s.child[i].callables, 0, "chip %u holds a callable", i);
  }
}

typedef struct vadd_job {
  lw_callable_handle_t k;
  float *a, *b, *c;
  uint32_t n;
  int32_t chip;
} vadd_job_t;

static lw_status_t vadd_orch(lw_orch_t *o, void *user) {
  vadd_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->a, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->b, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->c, j->n * sizeof(float), LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, j->chip);
}

// Every chip takes a good kernel and runs it, in the children it had from the start.
static void expect_chips_work(void) {
  lw_callable_handle_t k = wreg("vector_add");
  for (int32_t chip = 0; chip < CHIPS; ++chip) {
    vadd_job_t j = {k, NULL, NULL, NULL, 256, chip};
    j.a = lw_worker_alloc(w, j.n * sizeof(float));
    j.b = lw_worker_alloc(w, j.n * sizeof(float));
    j.c = lw_worker_alloc(w, j.n * sizeof(float));
    cr_assert(j.a && j.b && j.c);
    for (uint32_t i = 0; i < j.n; ++i) {
      j.a[i] = (float)i;
      j.b[i] = 0.5f;
      j.c[i] = -1;
    }
    lw_run_report_t rep;
    LW_ASSERT_OK(lw_worker_run(w, vadd_orch, &j, &rep));
    cr_assert_eq(rep.n_completed, 1);
    for (uint32_t i = 0; i < j.n; ++i) cr_assert_eq(j.c[i], (float)i + 0.5f, "chip %d", chip);
    lw_worker_free(w, j.a);
    lw_worker_free(w, j.b);
    lw_worker_free(w, j.c);
  }
  LW_ASSERT_OK(lw_worker_unregister(w, k));
  lw_worker_stats_t s = {.struct_size = sizeof s};
  LW_ASSERT_OK(lw_worker_stats(w, &s));
  for (uint32_t i = 0; i < CHIPS; ++i) {
    cr_assert_eq(s.child[i].deaths, 0, "chip %u died", i);
    cr_assert_eq(s.child[i].respawns, 0, "chip %u was respawned", i);
  }
}

Test(worker_bad_image, register_refuses_each_damaged_image_before_any_child_sees_it,
     .timeout = 120) {
  make_worker(CHIPS, 0);
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");
  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    lw_callable_t c = lw_test_bad_callable(b, "vadd");
    lw_callable_handle_t h = {.id = 7};
    expect_refused(b, lw_worker_register(w, &c, &h));
    cr_assert_eq(h.id, 0, "%s: a handle came back", b->what);
  }
  expect_children_untouched();
  expect_chips_work();
  lw_test_bad_images_free(&set);
  destroy_and_check();
}

Test(worker_bad_image, register_async_refuses_a_damaged_image_in_the_call_itself,
     .timeout = 120) {
  make_worker(CHIPS, 0);
  lw_test_bad_images_t set;
  lw_test_bad_images_make(&set, "vector_add");
  for (size_t i = 0; i < set.count; ++i) {
    const lw_test_bad_image_t *b = &set.image[i];
    lw_callable_t c = lw_test_bad_callable(b, "vadd");
    lw_handle_t *h = (lw_handle_t *)&set;  // anything but NULL
    expect_refused(b, lw_worker_register_async(w, &c, &h));
    cr_assert_null(h, "%s: a handle came back", b->what);
  }
  expect_children_untouched();
  expect_chips_work();
  lw_test_bad_images_free(&set);
  destroy_and_check();
}
