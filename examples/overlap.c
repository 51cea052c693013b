// examples/overlap.c — the register/run overlap scenario at L3:
//
//   h1 = register(C1)
//   run1 = run_async(orch that runs C1)          C1 runs on chip 0's run lane ...
//   reg2 = register_async(C2), wait               ... while C2 is prepared on its register lane
//   run2 = run_async(orch that runs C2)          queued behind C1 on the same chip
//   wait run1, run2; check both results; unregister C2
//
// usage: overlap [kernel-dir]
#include <math.h>
#include <string.h>
#include <time.h>

#include "example_util.h"
#include "lanework/orch.h"
#include "lanework/worker.h"

#define N (1u << 20)

typedef struct job {
  lw_callable_handle_t kernel;
  float *a, *b, *out;
  uint64_t repeat;  // 0: vector_add (no scalar)
} job_t;

static lw_status_t one_kernel(lw_orch_t *o, void *user) {
  job_t *j = user;
  lw_args_t args;
  lw_args_init(&args);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->a, N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->b, N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->out, N * sizeof(float), LW_TAG_OUTPUT));
  if (j->repeat) LW_RETURN_IF_ERROR(lw_args_add_scalar(&args, j->repeat));
  return lw_orch_submit_next_level(o, j->kernel, &args, NULL, 0);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double max_diff(const float *a, const float *b, const float *c) {
  double m = 0;
  for (uint32_t i = 0; i < N; ++i) m = fmax(m, fabs((double)c[i] - (double)(a[i] + b[i])));
  return m;
}

int main(int argc, char **argv) {
  lw_callable_t c1 = example_kernel(argc, argv, "repeat_vector_add");
  lw_callable_t c2 = example_kernel(argc, argv, "big_vector_add");

  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 128ull << 20;
  lw_worker_t *w;
  CHECK(lw_worker_create(&cfg, &w));

  float *a = lw_worker_alloc(w, N * sizeof(float));
  float *b = lw_worker_alloc(w, N * sizeof(float));
  float *out1 = lw_worker_alloc(w, N * sizeof(float));
  float *out2 = lw_worker_alloc(w, N * sizeof(float));
  if (!a || !b || !out1 || !out2) CHECK(LW_RESOURCE_EXHAUSTED);
  for (uint32_t i = 0; i < N; ++i) {
    a[i] = (float)(i % 1000);
    b[i] = 0.5f;
  }

  job_t j1 = {{0}, a, b, out1, 20};
  CHECK(lw_worker_register(w, &c1, &j1.kernel));

  double t0 = now_ms();
  lw_handle_t *run1, *reg2, *run2;
  CHECK(lw_worker_run_async(w, one_kernel, &j1, &run1));
  CHECK(lw_worker_register_async(w, &c2, &reg2));  // prepared beside C1's run
  CHECK(lw_handle_wait(reg2, LW_WAIT_FOREVER));
  double t_reg = now_ms();
  job_t j2 = {{0}, a, b, out2, 0};
  CHECK(lw_handle_callable(reg2, &j2.kernel));
  CHECK(lw_worker_run_async(w, one_kernel, &j2, &run2));
  CHECK(lw_handle_wait(run1, LW_WAIT_FOREVER));
  CHECK(lw_handle_wait(run2, LW_WAIT_FOREVER));
  double t_end = now_ms();

  double d1 = max_diff(a, b, out1), d2 = max_diff(a, b, out2);
  printf("C1 (repeat_vector_add x%llu) and C2 (big_vector_add, registered while C1 ran)\n",
         (unsigned long long)j1.repeat);
  printf("  register(C2) finished %.2f ms after run_async(C1); both runs done after %.2f ms\n",
         t_reg - t0, t_end - t0);
  printf("  max_diff C1 %.3e, C2 %.3e\n", d1, d2);

  lw_handle_release(run1);
  lw_handle_release(run2);
  lw_handle_release(reg2);
  CHECK(lw_worker_unregister(w, j2.kernel));
  CHECK(lw_worker_unregister(w, j1.kernel));
  lw_worker_destroy(w);
  lw_callable_free_loaded(&c1);
  lw_callable_free_loaded(&c2);
  if (d1 != 0.0 || d2 != 0.0) {
    fprintf(stderr, "overlap: results differ from the reference\n");
    return 1;
  }
  printf("overlap: OK\n");
  return 0;
}
