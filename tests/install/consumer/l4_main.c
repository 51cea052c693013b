// A program outside the project that uses the installed L4 worker (lanework::l4, with Open
// MPI): run as `mpirun -np 2 consumer_l4 [KERNEL_DIR]`. Rank 0 adds two vectors with the
// installed vector_add kernel on rank 1 and checks the sum that comes back; rank 1 serves.
// Prints "l4: ok" on rank 0 and exits 0 when the result is right.
#include <lanework/l4.h>
#include <stdio.h>
#include <unistd.h>

#ifndef LW_CONSUMER_KERNEL_DIR
#error "build with -DLW_CONSUMER_KERNEL_DIR=\"<the installed kernel folder>\""
#endif

#define N 256

typedef struct job {
  lw_callable_handle_t vadd;
  void *a, *b, *c;
} job_t;

static lw_status_t orch(lw_l4_orch_t *o, void *user) {
  job_t *j = (job_t *)user;
  lw_args_t args;
  lw_args_init(&args);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->a, N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->b, N * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&args, j->c, N * sizeof(float), LW_TAG_OUTPUT));
  return lw_l4_submit(o, j->vadd, &args, NULL, LW_L4_ANY_RANK);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : LW_CONSUMER_KERNEL_DIR;
  lw_l4_t *l4 = NULL;
  if (lw_l4_create(&argc, &argv, NULL, &l4) != LW_OK) {
    fprintf(stderr, "consumer_l4: %s\n", lw_last_error()->message);
    return 1;
  }
  char path[1024];
  snprintf(path, sizeof(path), "%s/vector_add.so", dir);
  lw_callable_t k;
  job_t j;
  int bad = lw_callable_load_file(path, &k) != LW_OK;
  if (!bad) {
    bad = lw_l4_register(l4, "vector_add", &k, &j.vadd) != LW_OK;
    lw_callable_free_loaded(&k);
  }
  if (bad) fprintf(stderr, "consumer_l4: %s\n", lw_last_error()->message);
  if (!bad && lw_l4_rank(l4) > 0) {
    bad = lw_l4_serve(l4) != LW_OK;
  } else if (!bad) {
    static float a[N], b[N], c[N];
    for (int i = 0; i < N; ++i) {
      a[i] = (float)i;
      b[i] = 2.0f * (float)i;
    }
    lw_run_report_t rep;
    bad = lw_l4_tensor_create(l4, a, sizeof(a), 1, &j.a) != LW_OK ||
          lw_l4_tensor_create(l4, b, sizeof(b), 1, &j.b) != LW_OK ||
          lw_l4_tensor_create(l4, c, sizeof(c), 1, &j.c) != LW_OK ||
          lw_l4_run(l4, orch, &j, &rep) != LW_OK;
    for (int i = 0; i < N && !bad; ++i) bad = c[i] != 3.0f * (float)i;
    printf("l4: %s\n", bad ? lw_last_error()->message : "ok");
  }
  int rc = lw_l4_destroy(l4);
  if (rc != 0) _exit(rc);
  return bad;
}
