// tests/parent/test_kernel_authoring_l3.c — kernel authoring through the L3 worker: typed
// scalars cross the mailbox with their types (saxpy with an f32 a in a forked chip child), and
// a kernel's lw_kernel_fail text travels in the task frame's result to the run's error, and a
// prepare hook's text to the register's error.
#include <stdlib.h>

#include "kernels/scalar_probe.h"
#include "lanework/kernel.h"
#include "lanework/orch.h"
#include "worker_test_util.h"

typedef struct saxpy_job {
  lw_callable_handle_t k;
  float *x, *y;
  uint32_t n;
  float a;
} saxpy_job_t;

static lw_status_t saxpy_orch(lw_orch_t *o, void *user) {
  saxpy_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->y, j->n * sizeof(float), LW_TAG_INOUT));
  LW_RETURN_IF_ERROR(lw_args_add_f32(&a, j->a));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

Test(kernel_authoring_l3, saxpy_with_an_f32_a_runs_in_a_chip_child_with_exact_results,
     .timeout = 60) {
  make_worker(1, 0);
  saxpy_job_t j = {wreg("saxpy"), NULL, NULL, 4099, -0.75f};
  j.x = lw_worker_alloc(w, j.n * sizeof(float));
  j.y = lw_worker_alloc(w, j.n * sizeof(float));
  cr_assert(j.x && j.y);
  float *want = malloc(j.n * sizeof(float));
  cr_assert_not_null(want);
  for (uint32_t i = 0; i < j.n; ++i) {
    j.x[i] = (float)i * 0.25f;
    j.y[i] = 3.0f - (float)(i % 11);
    want[i] = j.a * j.x[i] + j.y[i];
  }
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, saxpy_orch, &j, &rep));
  cr_assert_eq(rep.n_completed, 1);
  for (uint32_t i = 0; i < j.n; ++i) cr_assert_eq(j.y[i], want[i], "y[%u]", i);
  free(want);
  destroy_and_check();
}

typedef struct probe_job {
  lw_callable_handle_t k;
  scalar_probe_t *out;
} probe_job_t;

static lw_status_t probe_orch(lw_orch_t *o, void *user) {
  probe_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->out, 5 * sizeof(scalar_probe_t), LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_i64(&a, INT64_MIN));
  LW_RETURN_IF_ERROR(lw_args_add_f64(&a, 6.02214076e23));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 17));
  LW_RETURN_IF_ERROR(lw_args_add_f32(&a, 1.0e-3f));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

Test(kernel_authoring_l3, typed_scalars_cross_the_mailbox_with_their_types, .timeout = 60) {
  make_worker(1, 0);
  probe_job_t j = {wreg("scalar_probe"), NULL};
  j.out = lw_worker_alloc(w, 5 * sizeof(scalar_probe_t));
  cr_assert_not_null(j.out);
  memset(j.out, 0xab, 5 * sizeof(scalar_probe_t));
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, probe_orch, &j, &rep));
  cr_assert_eq(j.out[0].type, LW_SCALAR_I64);
  cr_assert_eq(j.out[0].i64, INT64_MIN);
  cr_assert_eq(j.out[1].type, LW_SCALAR_F64);
  cr_assert_eq(j.out[1].f64, 6.02214076e23);
  cr_assert_eq(j.out[2].type, LW_SCALAR_U64);
  cr_assert_eq(j.out[2].u64, 17);
  cr_assert_eq(j.out[3].type, LW_SCALAR_F32);
  cr_assert_eq(j.out[3].f32, 1.0e-3f);
  cr_assert_eq(j.out[4].type, LW_SCALAR_U64, "past the last scalar: the default");
  destroy_and_check();
}

typedef struct fail_job {
  lw_callable_handle_t k;
  uint64_t mode, n;
} fail_job_t;

static lw_status_t fail_orch(lw_orch_t *o, void *user) {
  fail_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->mode));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->n));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

Test(kernel_authoring_l3, a_kernel_fail_text_reaches_the_run_error, .timeout = 60) {
  make_worker(1, 0);
  fail_job_t j = {wreg("fail_text"), 0, 7};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(w, fail_orch, &j, &rep), LW_TASK_FAILED);
  cr_assert_eq(rep.error.code, LW_TASK_FAILED);
  cr_assert_eq(rep.error.task_id, 1);
  cr_assert(strstr(rep.error.message,
                   "chip 0: kernel fail_text failed: n (7) is not a multiple of 4 (returned -1)"),
            "run error: %s", rep.error.message);
  // Garbage written by the kernel arrives cut and cleaned, never as raw bytes.
  j.mode = 1;
  cr_assert_eq(lw_worker_run(w, fail_orch, &j, &rep), LW_TASK_FAILED);
  cr_assert(strstr(rep.error.message, "kernel fail_text failed: a??b???c"), "run error: %s",
            rep.error.message);
  for (const unsigned char *p = (const unsigned char *)rep.error.message; *p; ++p) {
    cr_assert(*p >= 0x20 && *p < 0x7f, "byte 0x%02x is not printable", *p);
  }
  destroy_and_check();
}

Test(kernel_authoring_l3, a_prepare_fail_text_reaches_the_register_error, .timeout = 60) {
  make_worker(2, 0);
  lw_callable_t c = lw_test_kernel("fail_text");
  const char *loaded_name = c.name;
  c.name = "fail_text_prepare";  // the kernel's prepare fails under this name
  lw_callable_handle_t h;
  lw_status_t st = lw_worker_register(w, &c, &h);
  c.name = loaded_name;
  lw_callable_free_loaded(&c);
  cr_assert_eq(st, LW_TASK_FAILED, "%s", lw_status_name(st));
  cr_assert(strstr(lw_last_error()->message,
                   "prepare hook of callable fail_text_prepare failed: table of 12 entries "
                   "cannot be built (returned -1)"),
            "register error: %s", lw_last_error()->message);
  destroy_and_check();
}
