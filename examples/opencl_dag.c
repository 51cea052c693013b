// examples/opencl_dag.c — a small DAG of OpenCL C kernels on two OpenCL chips at L3, with an
// expensive register (a large program's build) posted while the DAG runs.
//
//      a,b          a,c
//       |            |
//   T1 x=a+b (c0)  T2 y=a+c (c1)
//         |        |
//        T3 u=x+y (c0)
//         |        |
//   T4 p=u+b (c1)  T5 q=u+c (c0)
//         |        |
//        T6 r=p+q (c1)
//
// Dependencies come from the tensor tags; the result is checked against a serial reference.
// By default both chips run on OpenCL device 0, each chip child in its own context
// (lw_worker_config_t.n_devices = 1): one GPU is enough. --devices N spreads the chips over
// devices 0..N-1 (chip i on device i % N); with PoCL, POCL_DEVICES="pthread pthread" gives two
// CPU devices (ctest runs it so, with --devices 2).
//
// usage: opencl_dag [kernel-dir] [--chips N] [--devices N]
#include <string.h>

#include "example_util.h"
#include "lanework/orch.h"
#include "lanework/worker.h"

#define N 10000u

enum { A, B, C, X, Y, U, P, Q, R, NBUF };

typedef struct dag {
  lw_callable_handle_t add;
  float *buf[NBUF];
  int chips;
} dag_t;

static const uint8_t k_vadd_dirs[4] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};

static lw_callable_t load_cl(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/opencl/%s.cl", dir, name);
  lw_callable_t c;
  CHECK(lw_callable_load_file(path, &c));
  return c;
}

static lw_status_t add(lw_orch_t *o, dag_t *d, int in0, int in1, int out, int chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, d->buf[in0], N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, d->buf[in1], N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, d->buf[out], N * sizeof(float), LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, N));
  const uint64_t global[3] = {N, 0, 0};
  LW_RETURN_IF_ERROR(lw_args_set_launch(&a, 1, global, NULL));
  return lw_orch_submit_next_level(o, d->add, &a, NULL, chip % d->chips);
}

static lw_status_t dag_orch(lw_orch_t *o, void *user) {
  dag_t *d = user;
  LW_RETURN_IF_ERROR(add(o, d, A, B, X, 0));  // T1
  LW_RETURN_IF_ERROR(add(o, d, A, C, Y, 1));  // T2
  LW_RETURN_IF_ERROR(add(o, d, X, Y, U, 0));  // T3
  LW_RETURN_IF_ERROR(add(o, d, U, B, P, 1));  // T4
  LW_RETURN_IF_ERROR(add(o, d, U, C, Q, 0));  // T5
  return add(o, d, P, Q, R, 1);               // T6
}

int main(int argc, char **argv) {
  const char *dir = getenv("LW_KERNEL_DIR") ? getenv("LW_KERNEL_DIR") : "kernels";
  int chips = 2, devices = 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--chips") == 0 && i + 1 < argc) {
      chips = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
      devices = atoi(argv[++i]);
    } else {
      dir = argv[i];
    }
  }
  if (chips < 1) chips = 1;
  if (devices < 1) devices = 1;
  if (devices > chips) devices = chips;

  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "opencl");
  cfg.n_chips = (uint32_t)chips;
  cfg.n_devices = (uint32_t)devices;  // chip i opens device i % devices
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w;
  CHECK(lw_worker_create(&cfg, &w));
  printf("opencl_dag: %d chip%s on %d OpenCL device%s%s\n", chips, chips == 1 ? "" : "s", devices,
         devices == 1 ? "" : "s",
         chips > devices ? " (chips sharing a device each have their own context)" : "");

  dag_t d = {.chips = chips};
  lw_callable_t vadd = load_cl(dir, "vector_add");
  vadd.n_params = 4;
  vadd.param_dirs = k_vadd_dirs;
  CHECK(lw_worker_register(w, &vadd, &d.add));
  lw_callable_free_loaded(&vadd);
  for (int i = 0; i < NBUF; ++i) {
    d.buf[i] = lw_worker_alloc(w, N * sizeof(float));
    if (!d.buf[i]) CHECK(LW_RESOURCE_EXHAUSTED);
    memset(d.buf[i], 0, N * sizeof(float));
  }
  // Small integers keep every sum exact, so the check is equality.
  for (uint32_t i = 0; i < N; ++i) {
    d.buf[A][i] = (float)(i % 11);
    d.buf[B][i] = (float)(i % 7);
    d.buf[C][i] = (float)(i % 3);
  }

  // The expensive register: every chip builds the large program on its register lane while
  // the DAG's kernels run on the run lanes.
  static const uint8_t big_dirs[3] = {LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};
  lw_callable_t big = load_cl(dir, "big_program");
  big.n_params = 3;
  big.param_dirs = big_dirs;
  lw_handle_t *big_reg = NULL;
  CHECK(lw_worker_register_async(w, &big, &big_reg));
  lw_callable_free_loaded(&big);

  int failures = 0;
  for (int round = 0; round < 3; ++round) {
    lw_run_report_t rep;
    CHECK(lw_worker_run(w, dag_orch, &d, &rep));
    for (uint32_t i = 0; i < N; ++i) {
      float a = d.buf[A][i], b = d.buf[B][i], c = d.buf[C][i];
      float x = a + b, y = a + c, u = x + y, p = u + b, q = u + c, r = p + q;
      if (d.buf[R][i] != r && failures++ < 5) {
        fprintf(stderr, "opencl_dag: element %u: got %g, want %g\n", i, d.buf[R][i], r);
      }
    }
    printf("opencl_dag round %d: %u tasks (%u completed) in %.3f ms, register %s\n", round,
           rep.n_tasks, rep.n_completed, (double)rep.wall_ns / 1e6,
           lw_handle_done(big_reg) ? "done" : "still building");
  }
  CHECK(lw_handle_wait(big_reg, LW_WAIT_FOREVER));
  lw_handle_release(big_reg);
  lw_worker_destroy(w);
  if (failures) {
    fprintf(stderr, "opencl_dag: %d elements differ from the serial reference\n", failures);
    return 1;
  }
  printf("opencl_dag: OK (matches the serial reference)\n");
  return 0;
}
