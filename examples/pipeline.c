// examples/pipeline.c — a 13-task DAG over 2 chips and 1 sub child, with diamond dependencies
// inferred from tensor tags, checked against a serial reference computed on the host.
//
//        a,b        c,d
//         |          |
//   T1 x=a+b (c0)  T2 y=c+d (c1)
//         |    \    /   |
//   T3 xs=2x (sub)  T4 u=x+y (c0)
//          \        /   |
//        T5 v=xs+y (c1) |
//              \        |
//           T6 w1=u+v (c0)            <- diamond: T4 and T5 both feed T6
//                 |
//           T7 w2=2*w1 (sub)
//            /           \   (fan out)
//   T8 p=w2+x (c1)    T9 q=w2+y (c0)
//            \           /
//           T10 r=p+q (c1)            <- diamond again
//                 |
//           T11 r2=2*r (sub)
//                 |
//           T12 o1=r2+u (c0)
//                 |
//           T13 o2=o1+v (c1)
//
// usage: pipeline [kernel-dir]
#include <string.h>

#include "example_util.h"
#include "lanework/orch.h"
#include "lanework/stats.h"
#include "lanework/worker.h"

#define N 4096u

// A sub function: out = 2 * in. Runs in a sub child on arena memory.
static lw_status_t scale2(const lw_kernel_args_t *args) {
  if (args->n_tensors != 2 || args->tensor[0].bytes != args->tensor[1].bytes) {
    return LW_INVALID_ARGUMENT;
  }
  const float *in = args->tensor[0].data;
  float *out = args->tensor[1].data;
  for (uint64_t i = 0; i < args->tensor[0].bytes / sizeof(float); ++i) out[i] = 2.0f * in[i];
  return LW_OK;
}

enum { A, B, C, D, X, Y, XS, U, V, W1, W2, P, Q, R, R2, O1, O2, NBUF };

typedef struct pipe {
  lw_callable_handle_t add, scale;
  float *buf[NBUF];
} pipe_t;

static lw_status_t add(lw_orch_t *o, pipe_t *p, int in0, int in1, int out, int chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->buf[in0], N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->buf[in1], N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->buf[out], N * sizeof(float), LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, p->add, &a, NULL, chip);
}

static lw_status_t scale(lw_orch_t *o, pipe_t *p, int in, int out) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->buf[in], N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->buf[out], N * sizeof(float), LW_TAG_OUTPUT));
  return lw_orch_submit_sub(o, p->scale, &a);
}

static lw_status_t pipeline_orch(lw_orch_t *o, void *user) {
  pipe_t *p = user;
  LW_RETURN_IF_ERROR(add(o, p, A, B, X, 0));      // T1
  LW_RETURN_IF_ERROR(add(o, p, C, D, Y, 1));      // T2
  LW_RETURN_IF_ERROR(scale(o, p, X, XS));         // T3
  LW_RETURN_IF_ERROR(add(o, p, X, Y, U, 0));      // T4
  LW_RETURN_IF_ERROR(add(o, p, XS, Y, V, 1));     // T5
  LW_RETURN_IF_ERROR(add(o, p, U, V, W1, 0));     // T6
  LW_RETURN_IF_ERROR(scale(o, p, W1, W2));        // T7
  LW_RETURN_IF_ERROR(add(o, p, W2, X, P, 1));     // T8
  LW_RETURN_IF_ERROR(add(o, p, W2, Y, Q, 0));     // T9
  LW_RETURN_IF_ERROR(add(o, p, P, Q, R, 1));      // T10
  LW_RETURN_IF_ERROR(scale(o, p, R, R2));         // T11
  LW_RETURN_IF_ERROR(add(o, p, R2, U, O1, 0));    // T12
  return add(o, p, O1, V, O2, 1);                 // T13
}

int main(int argc, char **argv) {
  lw_callable_t vadd = example_kernel(argc, argv, "vector_add");
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 2;
  cfg.n_subs = 1;
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w;
  CHECK(lw_worker_create(&cfg, &w));
  pipe_t p;
  CHECK(lw_worker_register(w, &vadd, &p.add));
  CHECK(lw_worker_register_sub(w, scale2, "scale2", &p.scale));
  for (int i = 0; i < NBUF; ++i) {
    p.buf[i] = lw_worker_alloc(w, N * sizeof(float));
    if (!p.buf[i]) CHECK(LW_RESOURCE_EXHAUSTED);
    memset(p.buf[i], 0, N * sizeof(float));
  }
  // Small integers keep every intermediate exact, so the check is equality.
  for (uint32_t i = 0; i < N; ++i) {
    p.buf[A][i] = (float)(i % 7);
    p.buf[B][i] = (float)(i % 5);
    p.buf[C][i] = (float)(i % 3);
    p.buf[D][i] = 1.0f;
  }

  int failures = 0;
  for (int round = 0; round < 3; ++round) {
    lw_run_report_t rep;
    CHECK(lw_worker_run(w, pipeline_orch, &p, &rep));
    for (uint32_t i = 0; i < N; ++i) {
      float x = p.buf[A][i] + p.buf[B][i], y = p.buf[C][i] + p.buf[D][i];
      float xs = 2 * x, u = x + y, v = xs + y, w1 = u + v, w2 = 2 * w1;
      float pp = w2 + x, q = w2 + y, r = pp + q, r2 = 2 * r, o1 = r2 + u, o2 = o1 + v;
      if (p.buf[O2][i] != o2 || p.buf[O1][i] != o1) {
        if (failures++ < 5) {
          fprintf(stderr, "pipeline: element %u: got %g/%g, want %g/%g\n", i, p.buf[O1][i],
                  p.buf[O2][i], o1, o2);
        }
      }
    }
    printf("pipeline round %d: %u tasks (%u completed) in %.3f ms\n", round, rep.n_tasks,
           rep.n_completed, (double)rep.wall_ns / 1e6);
  }
  // Where the tasks ran, from the worker's counters (lanework/stats.h).
  lw_worker_stats_t st = {.struct_size = sizeof(st)};
  CHECK(lw_worker_stats(w, &st));
  printf("pipeline stats: %llu tasks; chip 0 ran %llu, chip 1 ran %llu, sub 0 ran %llu; "
         "%llu KiB of the arena in use\n",
         (unsigned long long)st.tasks_submitted, (unsigned long long)st.child[0].tasks_run,
         (unsigned long long)st.child[1].tasks_run,
         (unsigned long long)st.child[st.n_chips].tasks_run,
         (unsigned long long)(st.arena_bytes_in_use >> 10));
  lw_worker_destroy(w);
  lw_callable_free_loaded(&vadd);
  if (failures) {
    fprintf(stderr, "pipeline: %d elements differ from the serial reference\n", failures);
    return 1;
  }
  printf("pipeline: OK (matches the serial reference)\n");
  return 0;
}
