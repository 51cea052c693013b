// tools/bench.c — the helpers every `lanework bench` driver shares (see bench.h).
#include "tools/bench.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/tool.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double lw__bench_quantile(double *v, size_t n, double q) {
  if (n == 0) return 0.0;
  qsort(v, n, sizeof(double), cmp_double);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

double lw__bench_median(const double *v, size_t n) {
  if (n == 0) return 0.0;
  double *c = malloc(n * sizeof(double));
  if (!c) return 0.0;
  memcpy(c, v, n * sizeof(double));
  qsort(c, n, sizeof(double), cmp_double);
  double m = (n % 2) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  free(c);
  return m;
}

void lw__bench_spread(const double *v, size_t n, double *lo, double *hi) {
  *lo = *hi = n ? v[0] : 0.0;
  for (size_t i = 1; i < n; ++i) {
    *lo = fmin(*lo, v[i]);
    *hi = fmax(*hi, v[i]);
  }
}

bool lw__bench_pin(const lw_bench_opts_t *o) {
  return o->pin == 1 || (o->pin == -1 && sysconf(_SC_NPROCESSORS_ONLN) >= 2);
}

double lw__bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

// Loads <kernel dir>/<sub><name><ext> into out; prints the error and returns false.
static bool load_image(const char *sub, const char *name, const char *ext, const char *what,
                       lw_callable_t *out) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s%s%s", lw__tool_kernel_dir(), sub, name, ext);
  if (lw_callable_load_file(path, out) != LW_OK) {
    lw__bench_progress_end();
    fprintf(stderr, "lanework bench: cannot load %s %s: %s (set LW_KERNEL_DIR?)\n", what, path,
            lw_last_error()->message);
    return false;
  }
  return true;
}

bool lw__bench_load_kernel(const char *name, lw_callable_t *out) {
  return load_image("", name, ".so", "kernel", out);
}

bool lw__bench_load_opencl_kernel(const char *name, uint32_t n_params, const uint8_t *dirs,
                                  lw_callable_t *out) {
  if (!load_image("opencl/", name, ".cl", "OpenCL kernel", out)) return false;
  out->n_params = n_params;
  out->param_dirs = n_params ? dirs : NULL;
  return true;
}

static char g_cuda_include[PATH_MAX + 16];

static void cuda_include_init(void) {
  snprintf(g_cuda_include, sizeof(g_cuda_include), "-I%s/cuda", lw__tool_kernel_dir());
}

const char *lw__bench_cuda_include(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, cuda_include_init);
  return g_cuda_include;
}

bool lw__bench_load_cuda_kernel(const char *name, uint32_t n_params, const uint8_t *dirs,
                                lw_callable_t *out) {
  if (!load_image("cuda/", name, ".cu", "CUDA kernel", out)) return false;
  out->format = LW_IMAGE_CUDA_C;
  out->build_options = lw__bench_cuda_include();
  out->n_params = n_params;
  out->param_dirs = n_params ? dirs : NULL;
  return true;
}

int lw__bench_fail(const char *what, lw_status_t st) {
  lw__bench_progress_end();
  fprintf(stderr, "lanework bench: %s failed: %s: %s\n", what, lw_status_name(st),
          lw_last_error()->message);
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Progress on stderr. stdout carries only the table and the --json line, so a script reading
// stdout never sees these; on a terminal each line overwrites the one before it.

static struct {
  const char *bench;  // the running bench's name: the prefix of every line
  const char *backend;  // its --backend: part of its JSON's schema name unless "sim"
  bool quiet;
  bool tty;
  bool open;  // a line was written on the tty and not yet cleared
} g_progress;

void lw__bench_progress_start(const char *bench, const char *backend, bool quiet) {
  g_progress.bench = bench;
  g_progress.backend = backend;
  g_progress.quiet = quiet;
  g_progress.tty = isatty(STDERR_FILENO) == 1;
}

void lw__bench_progress(const char *fmt, ...) {
  if (g_progress.quiet || !g_progress.bench) return;
  char text[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (g_progress.tty) {
    fprintf(stderr, "\r%s: %s\033[K", g_progress.bench, text);
    g_progress.open = true;
  } else {
    fprintf(stderr, "%s: %s\n", g_progress.bench, text);
  }
  fflush(stderr);
}

void lw__bench_progress_end(void) {
  if (!g_progress.open) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  g_progress.open = false;
}

int lw__bench_invalid(const char *fmt, ...) {
  lw__bench_progress_end();
  fprintf(stderr, "lanework bench %s: invalid measurement: ",
          g_progress.bench ? g_progress.bench : "");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 1;
}

bool lw__bench_reexec_with_env(const char *const (*env)[2], int argc, char **argv) {
  bool changed = false;
  for (size_t i = 0; env && env[i][0]; ++i) {
    const char *now = getenv(env[i][0]);
    if (now && strcmp(now, env[i][1]) == 0) continue;
    setenv(env[i][0], env[i][1], 1);
    changed = true;
  }
  if (!changed) return false;
  char **full = calloc((size_t)argc + 2, sizeof(char *));
  if (!full) {
    fprintf(stderr, "lanework bench: out of memory\n");
    return true;
  }
  full[0] = (char *)"lanework";
  for (int i = 0; i < argc; ++i) full[i + 1] = argv[i];
  execv("/proc/self/exe", full);
  fprintf(stderr,
          "lanework bench: cannot re-execute itself with the environment it needs (%s); set "
          "it before starting:",
          strerror(errno));
  for (size_t i = 0; env[i][0]; ++i) fprintf(stderr, " %s=%s", env[i][0], env[i][1]);
  fputc('\n', stderr);
  free(full);
  return true;
}

int lw__bench_parse_delays(const char *list, long *out, int max) {
  int n = 0;
  for (const char *p = list; *p;) {
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > 1000 || n == max || (*end != ',' && *end != '\0')) return -1;
    out[n++] = v;
    p = (*end == ',') ? end + 1 : end;
  }
  if (n == 0) out[n++] = 0;
  return n;
}

void lw__bench_sleep_ms(long ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

void lw__bench_json_begin(lw_json_t *j, const char *name) {
  lw__json_initialize(j, stdout, false);
  lw__json_begin_object(j);
  char schema[64];
  // The opencl variants report other figures than the sim ones: a schema of their own.
  const char *backend = g_progress.backend;
  bool other = backend && strcmp(backend, "sim") != 0;
  snprintf(schema, sizeof(schema), "lanework.bench.%s%s%s", name, other ? "." : "",
           other ? backend : "");
  lw__json_kv_string(j, "schema", schema);
  lw__json_kv_int(j, "schema_version", LW_TOOL_JSON_SCHEMA_VERSION);
  lw__json_kv_string(j, "bench", name);
  lw__json_kv_string(j, "backend", backend ? backend : "sim");
  lw__json_kv_string(j, "lanework_version", lw_version());
}

int lw__bench_json_end(lw_json_t *j, const char *name) {
  lw__json_end_object(j);
  lw_error_t err;
  if (lw__json_finish(j, &err) != LW_OK) {
    fprintf(stderr, "lanework bench %s: --json: %s\n", name, err.message);
    return 1;
  }
  return 0;
}

void lw__bench_json_spread(lw_json_t *j, const char *key, double median, double lo, double hi,
                           int decimals) {
  char k[96];
  lw__json_kv_fixed(j, key, median, decimals);
  snprintf(k, sizeof(k), "%s_min", key);
  lw__json_kv_fixed(j, k, lo, decimals);
  snprintf(k, sizeof(k), "%s_max", key);
  lw__json_kv_fixed(j, k, hi, decimals);
}

double lw__bench_hidden_fraction(double serial, double overlap, double run_c1, double reg_c2) {
  return (serial - overlap) / fmin(run_c1, reg_c2);
}
