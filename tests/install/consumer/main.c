// A program outside the project, built against an installed lanework (find_package, pkg-config
// or the static library) and compiled both as C and as C++ (it is written in their common
// subset): prints the library's version, then runs the installed example kernel vector_add on
// an L2 sim chip, found through the kernel folder the package names (LANEWORK_KERNEL_DIR or
// pkg-config's kerneldir, given as LW_CONSUMER_KERNEL_DIR), and, when a second path is given,
// a kernel the consumer built itself with lanework_add_kernel. Exit 0 when every result is
// right.
//   consumer [KERNEL_DIR] [OWN_KERNEL.so]
#include <lanework/lanework.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LW_CONSUMER_KERNEL_DIR
#error "build with -DLW_CONSUMER_KERNEL_DIR=\"<the installed kernel folder>\""
#endif

#define N 1000

static int fail(const char *what, lw_status_t st) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, lw_status_name(st), lw_last_error()->message);
  return 1;
}

// Runs the kernel at path on chip over a and b into c, with scalars[0..n_scalars-1].
static int run_kernel(lw_chip_t *chip, const char *path, float *a, float *b, float *c,
                      const uint64_t *scalars, int n_scalars) {
  lw_callable_t callable;
  lw_status_t st = lw_callable_load_file(path, &callable);
  if (st != LW_OK) return fail(path, st);
  lw_callable_handle_t h;
  st = lw_chip_register(chip, &callable, &h);
  lw_callable_free_loaded(&callable);
  if (st != LW_OK) return fail("lw_chip_register", st);
  lw_args_t args;
  lw_args_init(&args);
  if ((st = lw_args_add_tensor(&args, a, N * sizeof(float), LW_TAG_INPUT)) != LW_OK ||
      (st = lw_args_add_tensor(&args, b, N * sizeof(float), LW_TAG_INPUT)) != LW_OK ||
      (st = lw_args_add_tensor(&args, c, N * sizeof(float), LW_TAG_OUTPUT)) != LW_OK) {
    return fail("lw_args_add_tensor", st);
  }
  for (int i = 0; i < n_scalars; ++i) {
    if ((st = lw_args_add_scalar(&args, scalars[i])) != LW_OK) return fail("scalar", st);
  }
  st = lw_chip_run(chip, h, &args, NULL, NULL);
  if (st != LW_OK) return fail("lw_chip_run", st);
  st = lw_chip_unregister(chip, h);
  if (st != LW_OK) return fail("lw_chip_unregister", st);
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : LW_CONSUMER_KERNEL_DIR;
#ifdef __cplusplus
  const char *language = "C++";
#else
  const char *language = "C";
#endif
  printf("consumer: lanework %s (headers %s), %s\n", lw_version(), LW_VERSION_STRING, language);
  if (lw_version_number() != LW_VERSION_NUMBER) {
    fprintf(stderr, "consumer: library %s, headers %s\n", lw_version(), LW_VERSION_STRING);
    return 1;
  }
  float *a = (float *)malloc(3 * N * sizeof(float));
  if (a == NULL) return 1;
  float *b = a + N, *c = a + 2 * N;
  for (int i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  lw_chip_t *chip = NULL;
  lw_status_t st = lw_chip_open(NULL, &chip);
  if (st != LW_OK) {
    free(a);
    return fail("lw_chip_open", st);
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/vector_add.so", dir);
  int rc = run_kernel(chip, path, a, b, c, NULL, 0);
  for (int i = 0; rc == 0 && i < N; ++i) {
    if (c[i] != a[i] + b[i]) {
      fprintf(stderr, "consumer: vector_add: c[%d] = %g, want %g\n", i, c[i], a[i] + b[i]);
      rc = 1;
    }
  }
  if (rc == 0) printf("consumer: vector_add from %s: ok\n", dir);
  if (rc == 0 && argc > 2) {
    const uint64_t factor = 3;
    rc = run_kernel(chip, argv[2], a, b, c, &factor, 1);
    for (int i = 0; rc == 0 && i < N; ++i) {
      if (c[i] != 3.0f * a[i] + b[i]) {
        fprintf(stderr, "consumer: %s: c[%d] = %g, want %g\n", argv[2], i, c[i],
                3.0f * a[i] + b[i]);
        rc = 1;
      }
    }
    if (rc == 0) printf("consumer: own kernel %s: ok\n", argv[2]);
  }
  lw_chip_close(chip);
  free(a);
  return rc;
}
