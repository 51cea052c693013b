// tools/bench_tensors.c — `lanework bench tensors` (cuda): what a run's tensors cost when the
// backend copies them (LW_CUDA_TENSORS=copy: a device buffer per tensor, copies in before the
// launch and back after it) against when it maps them (LW_CUDA_TENSORS=mapped: the host
// memory registered and read and written by the kernel over the bus), for cuda/vector_add.cu
// at L2 on tensors of 4 KiB to 64 MiB; issue 22 asks for both measured on a GPU before the
// backend's default is chosen (docs/cuda.md, "Memory").
//
// Each mode opens its own chip (the mode is read at the chip's open), registers vector_add,
// and for each size runs it once untimed (first touches, the first launch of the size) then
// --trials times, each checked exactly (c = a + b with a, b small integers: exact in float).
// Reported per size and mode: the run's p50 and min (lw_chip_run, submit to finished) and the
// kernel's p50 (its two events: the chips are opened with LW_CUDA_KERNEL_TIME=events); the
// faster mode by p50.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench_sim_only.h"

#define MODES 2
#define SIZES 4
#define MAX_TRIALS 100

static const char *const kModes[MODES] = {"copy", "mapped"};
static const size_t kBytes[SIZES] = {4096, 1u << 20, 16u << 20, 64u << 20};
static const uint8_t kVaddDirs[4] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};

typedef struct cell {
  double p50_us, min_us, kernel_p50_us;
} cell_t;

// The tensors of one size: a[i] = i % 1024, b[i] = 2 (exact sums), c cleared before each run.
typedef struct bufs {
  float *a, *b, *c;
  size_t n;
} bufs_t;

static void bufs_free(bufs_t *t) {
  free(t->a);
  free(t->b);
  free(t->c);
  memset(t, 0, sizeof(*t));
}

static bool bufs_make(bufs_t *t, size_t bytes) {
  t->n = bytes / sizeof(float);
  t->a = aligned_alloc(4096, bytes);
  t->b = aligned_alloc(4096, bytes);
  t->c = aligned_alloc(4096, bytes);
  if (!t->a || !t->b || !t->c) {
    bufs_free(t);
    return false;
  }
  for (size_t i = 0; i < t->n; ++i) {
    t->a[i] = (float)(i % 1024);
    t->b[i] = 2.0f;
  }
  return true;
}

// One run of vector_add over t; its wall and kernel time. Fails (printing why) on a wrong sum.
static int one_run(lw_chip_t *chip, lw_callable_handle_t h, bufs_t *t, const char *mode,
                   double *wall_us, double *kernel_us) {
  memset(t->c, 0, t->n * sizeof(float));
  lw_args_t a;
  lw_args_init(&a);
  size_t bytes = t->n * sizeof(float);
  lw_status_t st = lw_args_add_tensor(&a, t->a, bytes, LW_TAG_INPUT);
  if (st == LW_OK) st = lw_args_add_tensor(&a, t->b, bytes, LW_TAG_INPUT);
  if (st == LW_OK) st = lw_args_add_tensor(&a, t->c, bytes, LW_TAG_OUTPUT);
  if (st == LW_OK) st = lw_args_add_scalar(&a, t->n);
  const uint64_t g[3] = {t->n, 0, 0}, l[3] = {256, 0, 0};
  if (st == LW_OK) st = lw_args_set_launch(&a, 1, g, l);
  lw_run_timing_t timing;
  double t0 = lw__bench_now_us();
  if (st == LW_OK) st = lw_chip_run(chip, h, &a, NULL, &timing);
  *wall_us = lw__bench_now_us() - t0;
  if (st != LW_OK) return lw__bench_fail("a run of vector_add", st);
  *kernel_us = (double)timing.kernel_wall_ns / 1e3;
  for (size_t i = 0; i < t->n; ++i) {
    if (t->c[i] != t->a[i] + t->b[i]) {
      return lw__bench_invalid("tensors %s, %zu bytes: c[%zu] = %g, expected %g", mode, bytes,
                               i, (double)t->c[i], (double)(t->a[i] + t->b[i]));
    }
  }
  return 0;
}

// Sets name=value for a chip's open and returns what was there (NULL: unset), for env_restore.
static char *env_swap(const char *name, const char *value) {
  const char *prev = getenv(name);
  char *saved = prev ? strdup(prev) : NULL;
  setenv(name, value, 1);
  return saved;
}

static void env_restore(const char *name, char *saved) {
  if (saved) {
    setenv(name, saved, 1);
    free(saved);
  } else {
    unsetenv(name);
  }
}

// Every size in one mode, on a chip opened with LW_CUDA_TENSORS=mode.
static int measure_mode(int m, int trials, const lw_callable_t *vadd, cell_t out[SIZES]) {
  char *saved = env_swap("LW_CUDA_TENSORS", kModes[m]);
  char *saved_time = env_swap("LW_CUDA_KERNEL_TIME", "events");
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
  lw_chip_t *chip = NULL;
  lw_status_t st = lw_chip_open(&cfg, &chip);
  env_restore("LW_CUDA_KERNEL_TIME", saved_time);
  env_restore("LW_CUDA_TENSORS", saved);
  if (st != LW_OK) return lw__bench_fail("opening a cuda chip", st);
  lw_callable_handle_t h;
  int rc = 0;
  if ((st = lw_chip_register(chip, vadd, &h)) != LW_OK) {
    rc = lw__bench_fail("registering cuda/vector_add", st);
  }
  double wall[MAX_TRIALS], kern[MAX_TRIALS];
  for (int s = 0; s < SIZES && rc == 0; ++s) {
    bufs_t t;
    if (!bufs_make(&t, kBytes[s])) {
      fprintf(stderr, "lanework bench tensors: out of memory for %zu-byte tensors\n", kBytes[s]);
      rc = 1;
      break;
    }
    lw__bench_progress("%s, %zu-byte tensors", kModes[m], kBytes[s]);
    double w, k;
    rc = one_run(chip, h, &t, kModes[m], &w, &k);  // untimed
    for (int i = 0; i < trials && rc == 0; ++i) {
      rc = one_run(chip, h, &t, kModes[m], &wall[i], &kern[i]);
    }
    if (rc == 0) {
      out[s].p50_us = lw__bench_median(wall, (size_t)trials);
      double lo, hi;
      lw__bench_spread(wall, (size_t)trials, &lo, &hi);
      out[s].min_us = lo;
      out[s].kernel_p50_us = lw__bench_median(kern, (size_t)trials);
    }
    bufs_free(&t);
  }
  lw_chip_close(chip);
  return rc;
}

int lw__bench_tensors(const lw_bench_opts_t *o) {
  lw__bench_progress_start("tensors", "cuda", o->quiet);  // its JSON: lanework.bench.tensors.cuda
  int trials = o->trials_given ? o->trials : 10;
  if (trials < 1 || trials > MAX_TRIALS) trials = trials < 1 ? 1 : MAX_TRIALS;
  lw_callable_t vadd;
  if (!lw__bench_load_cuda_kernel("vector_add", 4, kVaddDirs, &vadd)) return 1;
  cell_t cells[MODES][SIZES];
  int rc = 0;
  for (int m = 0; m < MODES && rc == 0; ++m) rc = measure_mode(m, trials, &vadd, cells[m]);
  lw_callable_free_loaded(&vadd);
  if (rc != 0) return rc;
  lw__bench_progress_end();
  printf("L2, cuda chip, device 0: cuda/vector_add (3 tensors: a, b in, c out; 256-thread "
         "blocks), %d runs a size, the tensors in pageable host memory\n", trials);
  printf("| bytes a tensor | copy p50 (min) | copy kernel | mapped p50 (min) | mapped kernel | "
         "faster |\n|---|---|---|---|---|---|\n");
  for (int s = 0; s < SIZES; ++s) {
    const cell_t *c = &cells[0][s], *p = &cells[1][s];
    printf("| %zu | %.1f us (%.1f) | %.1f us | %.1f us (%.1f) | %.1f us | %s %.2fx |\n",
           kBytes[s], c->p50_us, c->min_us, c->kernel_p50_us, p->p50_us, p->min_us,
           p->kernel_p50_us, c->p50_us <= p->p50_us ? "copy" : "mapped",
           c->p50_us <= p->p50_us ? p->p50_us / c->p50_us : c->p50_us / p->p50_us);
  }
  if (!o->json) return 0;
  lw_json_t j;
  lw__bench_json_begin(&j, "tensors");
  lw__json_kv_int(&j, "level", 2);
  lw__json_kv_int(&j, "runs", trials);
  lw__json_key(&j, "rows");
  lw__json_begin_array(&j);
  for (int s = 0; s < SIZES; ++s) {
    lw__json_begin_object(&j);
    lw__json_kv_uint(&j, "bytes", kBytes[s]);
    for (int m = 0; m < MODES; ++m) {
      char key[40];
      snprintf(key, sizeof(key), "%s_p50_us", kModes[m]);
      lw__json_kv_fixed(&j, key, cells[m][s].p50_us, 1);
      snprintf(key, sizeof(key), "%s_min_us", kModes[m]);
      lw__json_kv_fixed(&j, key, cells[m][s].min_us, 1);
      snprintf(key, sizeof(key), "%s_kernel_p50_us", kModes[m]);
      lw__json_kv_fixed(&j, key, cells[m][s].kernel_p50_us, 1);
    }
    lw__json_kv_string(&j, "faster", cells[0][s].p50_us <= cells[1][s].p50_us ? "copy" : "mapped");
    lw__json_end_object(&j);
  }
  lw__json_end_array(&j);
  return lw__bench_json_end(&j, "tensors");
}
