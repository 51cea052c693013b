// tests/parent/test_opencl_worker.c — the opencl backend at L3: OpenCL C kernels registered on
// a worker run in its chip children on arena tensors, with the format, the build options and
// the launch geometry carried through the mailbox; two chips on one device (one GPU is
// enough), and on two devices where the machine has them. Built only with OpenCL (CI installs
// PoCL).
#include <stdlib.h>

#include "lanework/orch.h"
#include "lanework/stats.h"
#include "lanework/worker.h"
#include "opencl_spin.h"
#include "worker_test_util.h"

TestSuite(opencl_worker, .timeout = 180);

// A worker of `chips` opencl chips over n_devices devices from device 0 (0: one device per
// chip, chip i on device i).
static void make_opencl_worker(uint32_t chips, uint32_t n_devices) {
  lw_worker_config_t cfg;
  wt_config(&cfg, chips, 0);
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "opencl");
  cfg.n_devices = n_devices;
  wt_create(&cfg);
}

// Skips the calling test unless the machine has at least `want` OpenCL devices, naming what
// it has. The count comes from `lanework info` in a process of its own: OpenCL must not start
// in this process before its first worker, whose chip children may be copies of it as it is
// then (docs/processes.md, "A zygote started later"; under ThreadSanitizer such a copy of an
// initialised PoCL hangs). PoCL lists one CPU device unless POCL_DEVICES names more (ctest runs
// this test with POCL_DEVICES="pthread pthread"), read when a process starts.
static void need_devices(unsigned want) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "'%s' info", lw_test_tool_path());
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  unsigned n = 0;
  char line[512], first[512] = "none";
  while (fgets(line, sizeof(line), p)) {
    if (sscanf(line, "opencl: %u device", &n) == 1) continue;
    if (strncmp(line, "   0: ", 6) == 0) {
      snprintf(first, sizeof(first), "%s", line + 6);
      first[strcspn(first, ",\n")] = '\0';
    }
  }
  cr_assert_eq(pclose(p), 0, "%s failed", cmd);
  if (n < want) {
    cr_skip("this machine has %u OpenCL device%s (device 0: %s): the case needs %u; one "
            "device runs two chips in opencl_kernels_on_two_chips_sharing_one_device_*",
            n, n == 1 ? "" : "s", first, want);
  }
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

// The two-chip DAG on a worker of 2 chips over n_devices devices.
static void run_two_chip_dag(uint32_t n_devices) {
  make_opencl_worker(2, n_devices);
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

Test(opencl_worker, opencl_kernels_on_two_chips_sharing_one_device_give_exact_results) {
  // One GPU is enough: both chip children open device 0, each in its own context.
  run_two_chip_dag(1);
}

Test(opencl_worker, opencl_kernels_on_two_chips_with_a_device_each_give_exact_results) {
  need_devices(2);
  run_two_chip_dag(0);
}

// A spin run on one chip of w, or a spin beside a vector_add on the other chip.
typedef struct spin_job {
  lw_callable_handle_t spin, vadd;
  lw_test_spin_words_t *w;  // in the arena
  uint64_t n;
  float *x, *y, *z;  // vector_add's tensors (arena); NULL: spin only
  uint64_t vn;
} spin_job_t;

static lw_status_t spin_orch(lw_orch_t *o, void *user) {
  spin_job_t *j = user;
  lw_args_t a;
  lw_test_spin_args(j->w, false, j->n, &a);
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->spin, &a, NULL, 0));
  if (!j->z) return LW_OK;
  vadd_dag_t v = {j->vadd, NULL, NULL, NULL, NULL, j->vn, 2};
  return submit_vadd(o, &v, j->x, j->y, j->z, 1);
}

// The L3 probe (tests/hold_items.h): a spin of n work-items on chip 0, its task's kernel time.
static uint64_t probe_l3(uint64_t n, void *ctx) {
  spin_job_t j = *(spin_job_t *)ctx;
  j.n = n;
  j.z = NULL;
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, spin_orch, &j, &h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_OK, "%s", lw_handle_error(h)->message);
  lw_task_report_t r[1];
  size_t got = 0;
  LW_ASSERT_OK(lw_handle_run_tasks(h, r, 1, &got));
  lw_handle_release(h);
  cr_assert_eq(atomic_load(&j.w->last), 1u, "the probe ran every work-item");
  return r[0].kernel_ns;
}

Test(opencl_worker, a_chip_sharing_a_device_runs_its_kernel_while_the_other_chips_kernel_runs) {
  make_opencl_worker(2, 1);  // both chip children on device 0
  lw_callable_t spin = lw_test_spin_callable(false);
  spin_job_t j = {.vn = 4096};
  LW_ASSERT_OK(lw_worker_register(w, &spin, &j.spin));
  lw_test_spin_callable_free(&spin);
  j.vadd = wreg_cl("vector_add", 4, k_vadd_dirs, NULL);
  j.w = lw_worker_alloc(w, sizeof(*j.w));
  j.x = lw_worker_alloc(w, j.vn * sizeof(float));
  j.y = lw_worker_alloc(w, j.vn * sizeof(float));
  float *z = lw_worker_alloc(w, j.vn * sizeof(float));
  cr_assert(j.w && j.x && j.y && z);
  j.n = lw_test_hold_items(probe_l3, &j);
  cr_assert_gt(j.n, 0, "sizing a run on the device needs the device's profiled kernel time");
  for (uint64_t i = 0; i < j.vn; ++i) {
    j.x[i] = (float)i;
    j.y[i] = 3.0f;
    z[i] = -1.0f;
  }
  j.z = z;
  // One run: the spin on chip 0 and the vector_add on chip 1 (a worker's runs start in order,
  // so two runs could not overlap).
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, spin_orch, &j, &h));
  // Chip 1's task finishes while chip 0's kernel runs on the same device.
  for (;;) {
    lw_worker_stats_t st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    LW_ASSERT_OK(lw_worker_stats(w, &st));
    if (st.child[1].tasks_run == 1 || lw_handle_done(h)) break;
    lw_test_sleep_us(200);
  }
  cr_assert_not(lw_handle_done(h), "the spin ended before chip 1's kernel ran");
  cr_assert_eq(atomic_load(&j.w->last), 0u, "chip 0's spin was still running");
  LW_ASSERT_OK(lw_handle_cancel(h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_task_report_t r[2];
  size_t got = 0;
  LW_ASSERT_OK(lw_handle_run_tasks(h, r, 2, &got));
  cr_assert_eq(got, 2);
  cr_assert_eq(r[0].worker_id, 0);
  cr_assert_eq(r[0].status, LW_CANCELLED, "the spin: %s", lw_status_name(r[0].status));
  cr_assert_eq(r[1].worker_id, 1);
  cr_assert_eq(r[1].status, LW_OK, "the vector_add: %s", lw_status_name(r[1].status));
  for (uint64_t i = 0; i < j.vn; ++i) cr_assert_eq(z[i], j.x[i] + j.y[i], "z[%lu]", i);
  lw_handle_release(h);
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
  make_opencl_worker(1, 0);
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
