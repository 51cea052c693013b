// tests/parent/test_opencl_worker.c — the opencl backend at L3: OpenCL C kernels registered on
// a worker run in its chip children on arena tensors, with the format, the build options and
// the launch geometry carried through the mailbox. Built only with OpenCL (CI installs PoCL).
#include <stdlib.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "worker_test_util.h"

TestSuite(opencl_worker, .timeout = 180);

static void make_opencl_worker(uint32_t chips) {
  lw_worker_config_t cfg;
  wt_config(&cfg, chips, 0);
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "opencl");
  // Chip i opens OpenCL device i. PoCL lists one CPU device unless POCL_DEVICES names more:
  // ctest runs this test with POCL_DEVICES="pthread pthread" (two devices). The children come
  // from lanework's zygote, started when the library loaded, so the variable must be in the
  // environment from the start; setting it here would not reach them.
  if (chips > 1) {
    const char *devices = getenv("POCL_DEVICES");
    cr_assert(devices && strstr(devices, "pthread pthread"),
              "run with POCL_DEVICES=\"pthread pthread\" (ctest sets it) for %u OpenCL devices",
              chips);
  }
  wt_create(&cfg);
}

static const uint8_t k_vadd_dirs[4] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};

static lw_callable_handle_t wreg_cl(const char *name, uint32_t n_params, const uint8_t *dirs,
                                    const char *options) {
  char path[512];
  snprintf(path, sizeof(path), "%s/opencl/%s.cl", lw_test_kernel_dir(), name);
  lw_callable_t c;
  LW_ASSERT_OK(lw_callable_load_file(path, &c));
  c.n_params = n_params;
  c.param_dirs = dirs;
  c.build_options = options;
  lw_callable_handle_t h;
  lw_status_t st = lw_worker_register(w, &c, &h);
  cr_assert_eq(st, LW_OK, "register %s: %s", name, lw_last_error()->message);
  lw_callable_free_loaded(&c);
  return h;
}

typedef struct vadd_dag {
  lw_callable_handle_t k;
  float *a, *b, *c, *d;
  uint64_t n;
  uint32_t chips;
} vadd_dag_t;

static lw_status_t submit_vadd(lw_orch_t *o, const vadd_dag_t *j, float *x, float *y, float *z,
                               int32_t chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, x, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, y, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, z, j->n * sizeof(float), LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->n));
  const uint64_t g[3] = {j->n, 0, 0};
  LW_RETURN_IF_ERROR(lw_args_set_launch(&a, 1, g, NULL));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, chip);
}

// c = a + b on one chip, then d = c + a on the other: the second depends on the first
// through c (read-after-write), so it sees the first's output in the arena.
static lw_status_t vadd_dag(lw_orch_t *o, void *user) {
  vadd_dag_t *j = user;
  LW_RETURN_IF_ERROR(submit_vadd(o, j, j->a, j->b, j->c, 0));
  return submit_vadd(o, j, j->c, j->a, j->d, (int32_t)(j->chips - 1));
}

Test(opencl_worker, opencl_kernels_run_in_chip_children_with_exact_results) {
  make_opencl_worker(2);
  vadd_dag_t j = {wreg_cl("vector_add", 4, k_vadd_dirs, NULL), NULL, NULL, NULL, NULL, 5000, 2};
  j.a = lw_worker_alloc(w, j.n * sizeof(float));
  j.b = lw_worker_alloc(w, j.n * sizeof(float));
  j.c = lw_worker_alloc(w, j.n * sizeof(float));
  j.d = lw_worker_alloc(w, j.n * sizeof(float));
  cr_assert(j.a && j.b && j.c && j.d);
  for (uint64_t i = 0; i < j.n; ++i) {
    j.a[i] = (float)i * 0.5f;
    j.b[i] = 7.0f - (float)i;
    j.c[i] = j.d[i] = -1.0f;
  }
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, vadd_dag, &j, &rep));
  cr_assert_eq(rep.n_completed, 2);
  for (uint64_t i = 0; i < j.n; ++i) {
    cr_assert_eq(j.c[i], j.a[i] + j.b[i], "c[%lu]", i);
    cr_assert_eq(j.d[i], j.c[i] + j.a[i], "d[%lu]", i);
  }
  destroy_and_check();
}

typedef struct fill_job {
  lw_callable_handle_t k;
  int32_t *out;
} fill_job_t;

static lw_status_t fill_orch(lw_orch_t *o, void *user) {
  fill_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->out, 4 * 6 * sizeof(int32_t), LW_TAG_OUTPUT));
  const uint64_t g[3] = {4, 6, 0}, l[3] = {2, 3, 0};
  LW_RETURN_IF_ERROR(lw_args_set_launch(&a, 2, g, l));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

Test(opencl_worker, build_options_and_geometry_cross_the_mailbox) {
  make_opencl_worker(1);
  // Builds only with -DBASE given, and writes what get_global_id says: the options and the
  // 2-dimensional launch both had to reach the child.
  static const char src[] =
      "__kernel void fill(__global int *out) {\n"
      "  size_t x = get_global_id(0), y = get_global_id(1);\n"
      "  out[y * get_global_size(0) + x] = BASE + (int)(y * 10 + x);\n"
      "}\n";
  static const uint8_t dirs[1] = {LW_PARAM_OUT};
  lw_callable_t c = {.name = "fill", .image = src, .image_bytes = sizeof(src) - 1,
                     .entry = "fill", .n_params = 1, .param_dirs = dirs,
                     .format = LW_IMAGE_OPENCL_C, .build_options = "-DBASE=1000"};
  fill_job_t j;
  LW_ASSERT_OK(lw_worker_register(w, &c, &j.k));
  j.out = lw_worker_alloc(w, 4 * 6 * sizeof(int32_t));
  memset(j.out, 0, 4 * 6 * sizeof(int32_t));
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, fill_orch, &j, &rep));
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 4; ++x) {
      cr_assert_eq(j.out[y * 4 + x], 1000 + y * 10 + x, "(%d, %d)", x, y);
    }
  }
  // Without the options the child's build fails and says why.
  c.build_options = NULL;
  c.name = "fill_no_base";
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register(w, &c, &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "build of callable fill_no_base failed"), "%s",
            lw_last_error()->message);
  destroy_and_check();
}
