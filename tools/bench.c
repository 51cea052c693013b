// tools/bench.c — `lanework bench <name>`: option parsing and shared helpers.
#include "tools/bench.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/tool.h"
#ifdef LW_HAVE_OPENCL
#include "tools/bench_ocl.h"
#else
#include "child/backend.h"
#endif

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

double lw__bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

bool lw__bench_load_kernel(const char *name, lw_callable_t *out) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s.so", lw__tool_kernel_dir(), name);
  lw_status_t st = lw_callable_load_file(path, out);
  if (st != LW_OK) {
    fprintf(stderr, "lanework bench: cannot load kernel %s: %s (set LW_KERNEL_DIR?)\n", path,
            lw_last_error()->message);
    return false;
  }
  return true;
}

int lw__bench_fail(const char *what, lw_status_t st) {
  fprintf(stderr, "lanework bench: %s failed: %s: %s\n", what, lw_status_name(st),
          lw_last_error()->message);
  return 1;
}

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: lanework bench <overlap|dispatch|wait|idle|cancel|crash> [options]\n"
          "  --json           print one JSON object as the last stdout line\n"
          "  --backend NAME   sim (default) or opencl (overlap, dispatch, cancel: OpenCL\n"
          "                   device 0, every program build cold)\n"
          "  --trials N       trials per configuration (overlap, crash; default 5)\n"
          "  --level 2|3      overlap: L2 direct chip worker or L3 worker (default 2)\n"
          "  --delay-ms LIST  overlap: delays before the C2 register, e.g. 0,2 (default 0,2;\n"
          "                   --backend opencl: 0)\n"
          "  --repeat N       overlap: C1 repeat_count (default: calibrated to ~25 ms)\n"
          "  --load N         dispatch: measure again with N busy-loop processes running (0..64)\n"
          "  --serial         overlap: register C2 only after C1 finished, the negative control\n"
          "                   (hidden and overlap_by_events should read ~0)\n"
          "  --trace DIR      overlap: write one trial's trace and its swimlane picture to DIR\n"
          "                   (overlap_l<level>_<backend>.json and .svg)\n"
          "  --pin / --no-pin overlap: run lane on CPU 0, register lane on CPU 1 (default:\n"
          "                   pinned when the machine has at least 2 CPUs)\n"
          "  --stages N       overlap --backend opencl: C2 = big_program built with\n"
          "                   -DSTAGES=N (1..256, default 64: the program as shipped)\n"
          "  --iters N        dispatch/wait: iterations (default 20000 / 1000000;\n"
          "                   dispatch --backend opencl: 2000);\n"
          "                   idle: seconds to sample (default 5)\n");
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (!s[0] || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int lw__tool_bench(int argc, char **argv) {
  if (argc < 2) {
    bench_usage(stderr);
    return 2;
  }
  const char *name = argv[1];
  lw_bench_opts_t o = {.json = false, .trials = 5, .level = 2, .delays = "0,2", .pin = -1,
                       .backend = "sim"};
  for (int i = 2; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    long n = 0;
    if (strcmp(a, "--json") == 0) {
      o.json = true;
    } else if (strcmp(a, "--pin") == 0) {
      o.pin = 1;
    } else if (strcmp(a, "--no-pin") == 0) {
      o.pin = 0;
    } else if (strcmp(a, "--load") == 0 && v && parse_long(v, 0, LW_BENCH_MAX_LOAD, &n)) {
      o.load = (int)n;
      ++i;
    } else if (strcmp(a, "--serial") == 0) {
      o.serial = true;
    } else if (strcmp(a, "--trace") == 0 && v) {
      o.trace_dir = v;
      ++i;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      bench_usage(stdout);
      return 0;
    } else if (strcmp(a, "--trials") == 0 && v && parse_long(v, 1, 1000, &n)) {
      o.trials = (int)n;
      o.trials_given = true;
      ++i;
    } else if (strcmp(a, "--backend") == 0 && v) {
      o.backend = v;
      ++i;
    } else if (strcmp(a, "--level") == 0 && v && parse_long(v, 2, 3, &n)) {
      o.level = (int)n;
      ++i;
    } else if (strcmp(a, "--delay-ms") == 0 && v) {
      o.delays = v;
      o.delays_given = true;
      ++i;
    } else if (strcmp(a, "--repeat") == 0 && v && parse_long(v, 1, 100000000, &n)) {
      o.repeat = n;
      ++i;
    } else if (strcmp(a, "--stages") == 0 && v && parse_long(v, 1, 256, &n)) {
      o.stages = n;
      ++i;
    } else if (strcmp(a, "--iters") == 0 && v && parse_long(v, 1, 100000000, &n)) {
      o.iters = n;
      ++i;
    } else {
      fprintf(stderr, "lanework bench: bad or incomplete option '%s'\n", a);
      bench_usage(stderr);
      return 2;
    }
  }
  if (strcmp(o.backend, "opencl") == 0) {
    bool supported = strcmp(name, "overlap") == 0 || strcmp(name, "dispatch") == 0 ||
                     strcmp(name, "cancel") == 0;
    if (!supported) {
      fprintf(stderr, "lanework bench: '%s' has no --backend opencl (overlap, dispatch and "
              "cancel have)\n", name);
      return 2;
    }
#ifdef LW_HAVE_OPENCL
    if (lw__bench_ocl_reexec_cold(argc, argv)) return 1;
    if (strcmp(name, "overlap") == 0) return lw__bench_overlap_ocl(&o);
    if (strcmp(name, "dispatch") == 0) return lw__bench_dispatch_ocl(&o);
    return lw__bench_cancel_ocl(&o);
#else
    fprintf(stderr, "lanework bench: --backend opencl: %s\n",
            lw__backend_missing_reason("opencl"));
    return 1;
#endif
  }
  if (strcmp(o.backend, "sim") != 0) {
    fprintf(stderr, "lanework bench: unknown --backend '%s' (sim or opencl)\n", o.backend);
    return 2;
  }
  if (strcmp(name, "overlap") == 0) return lw__bench_overlap(&o);
  if (strcmp(name, "dispatch") == 0) return lw__bench_dispatch(&o);
  if (strcmp(name, "wait") == 0) return lw__bench_wait(&o);
  if (strcmp(name, "idle") == 0) return lw__bench_idle(&o);
  if (strcmp(name, "cancel") == 0) return lw__bench_cancel(&o);
  if (strcmp(name, "crash") == 0) return lw__bench_crash(&o);
  if (strcmp(name, "trace") == 0) return lw__bench_trace(&o);
  fprintf(stderr, "lanework bench: unknown benchmark '%s'\n", name);
  bench_usage(stderr);
  return 2;
}

int lw__bench_parse_delays(const char *list, long *out, int max) {
  int n = 0;
  for (const char *p = list; *p && n < max;) {
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > 1000) {
      fprintf(stderr, "lanework bench overlap: bad --delay-ms list '%s' (values 0..1000 ms)\n",
              list);
      return -1;
    }
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
  lw__json_kv_string(j, "bench", name);
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

double lw__bench_hidden_fraction(double serial, double overlap, double run_c1, double reg_c2) {
  return (serial - overlap) / fmin(run_c1, reg_c2);
}
