// tools/bench.c — `lanework bench <name>`: the benches' option tables, progress and shared
// helpers.
#include "tools/bench.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"
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
    lw__bench_progress_end();
    fprintf(stderr, "lanework bench: cannot load kernel %s: %s (set LW_KERNEL_DIR?)\n", path,
            lw_last_error()->message);
    return false;
  }
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

// ---------------------------------------------------------------------------------------------
// The benches and their options: one table per bench, from which both the checks and the help
// come (tools/cli.h).

enum {
  K_JSON = 1,
  K_QUIET,
  K_BACKEND,
  K_TRIALS,
  K_LEVEL,
  K_DELAYS,
  K_REPEAT,
  K_ITERS,
  K_SECONDS,
  K_PIN,
  K_NO_PIN,
  K_STAGES,
  K_SERIAL,
  K_LOAD,
  K_LOAD_IN_SESSION,
  K_TRACE,
};

#define OPT_JSON                                                                     \
  {.name = "json", .kind = LW_CLI_FLAG, .key = K_JSON,                               \
   .help = "also print one JSON object as the last stdout line"}
#define OPT_QUIET                                                                    \
  {.name = "quiet", .short_name = 'q', .kind = LW_CLI_FLAG, .key = K_QUIET,          \
   .help = "no progress on stderr"}
#define OPT_BACKEND                                                                  \
  {.name = "backend", .kind = LW_CLI_CHOICE, .choices = "sim|opencl", .metavar = "NAME", \
   .def = "sim", .key = K_BACKEND,                                                   \
   .help = "the backend measured (opencl: device 0, every\nprogram build cold)"}
#define OPT_PIN(only)                                                                \
  {.name = "pin", .kind = LW_CLI_FLAG, .key = K_PIN, .only_with = only,              \
   .help = "run lane on CPU 0, register lane on CPU 1 (the\ndefault when there are 2 CPUs)"}, \
  {.name = "no-pin", .kind = LW_CLI_FLAG, .key = K_NO_PIN, .only_with = only,        \
   .help = "let the OS place the lanes"}
#define OPT_END {.name = NULL}

static const lw_cli_opt_t overlap_opts[] = {
    OPT_JSON, OPT_QUIET, OPT_BACKEND,
    {.name = "level", .kind = LW_CLI_INT, .min = 2, .max = 3, .metavar = "N", .def = "2",
     .key = K_LEVEL, .help = "2: direct chip worker, 3: L3 worker (forked chip\nchild)"},
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = 1000, .metavar = "N", .def = "5",
     .key = K_TRIALS, .help = "trials per delay"},
    {.name = "delay-ms", .kind = LW_CLI_STRING, .metavar = "LIST", .key = K_DELAYS,
     .def = "0,2; opencl: 0",
     .help = "delays before the C2 register, comma-separated,\nat most 8, each 0..1000 ms"},
    {.name = "repeat", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "calibrated to ~25 ms", .key = K_REPEAT, .help = "C1's repeat_count"},
    {.name = "serial", .kind = LW_CLI_FLAG, .key = K_SERIAL,
     .help = "register C2 only after C1 finished: the negative\ncontrol (hidden and "
             "overlap_by_events read ~0)"},
    {.name = "trace", .kind = LW_CLI_STRING, .metavar = "DIR", .key = K_TRACE,
     .help = "write one trial's trace and its swimlane picture\nto DIR "
             "(overlap_l<level>_<backend>.json, .svg)"},
    OPT_PIN(NULL),
    {.name = "stages", .kind = LW_CLI_INT, .min = 1, .max = 256, .metavar = "N", .def = "64",
     .key = K_STAGES, .only_with = "opencl",
     .help = "C2 = big_program built with -DSTAGES=N"},
    OPT_END,
};

static const lw_cli_opt_t dispatch_opts[] = {
    OPT_JSON, OPT_QUIET, OPT_BACKEND,
    {.name = "iters", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "20000; opencl: 2000", .key = K_ITERS, .help = "round trips measured"},
    {.name = "load", .kind = LW_CLI_INT, .min = 0, .max = LW_BENCH_MAX_LOAD, .metavar = "N",
     .def = "0", .key = K_LOAD, .only_with = "sim",
     .help = "measure again with N busy-loop processes (own sessions)"},
    {.name = "load-in-session", .kind = LW_CLI_FLAG, .key = K_LOAD_IN_SESSION,
     .only_with = "sim",
     .help = "the --load processes share this session (autogroup)"},
    OPT_END,
};

static const lw_cli_opt_t wait_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "iters", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "1000000", .key = K_ITERS, .help = "calls of each function measured"},
    OPT_END,
};

static const lw_cli_opt_t idle_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "seconds", .kind = LW_CLI_INT, .min = 1, .max = 3600, .metavar = "N", .def = "5",
     .key = K_SECONDS, .help = "how long the idle worker is sampled"},
    OPT_END,
};

static const lw_cli_opt_t cancel_opts[] = {
    OPT_JSON, OPT_QUIET, OPT_BACKEND,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = 1000, .metavar = "N",
     .def = "sim: 20 runs, 4 x N when N > 5; opencl: 20", .key = K_TRIALS,
     .help = "cancelled runs"},
    {.name = "level", .kind = LW_CLI_INT, .min = 2, .max = 3, .metavar = "N", .def = "2",
     .key = K_LEVEL, .only_with = "opencl",
     .help = "2: direct chip worker, 3: L3 worker (sim: always\nL3)"},
    OPT_PIN("opencl"),
    OPT_END,
};

static const lw_cli_opt_t crash_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = 1000, .metavar = "N", .def = "5",
     .key = K_TRIALS, .help = "child deaths measured"},
    OPT_END,
};

static const lw_cli_opt_t trace_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = 1000, .metavar = "N", .def = "5",
     .key = K_TRIALS, .help = "rounds of the dispatch comparison"},
    {.name = "iters", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "2000", .key = K_ITERS, .help = "iterations of each dispatch round"},
    OPT_END,
};

typedef struct bench_spec {
  lw_cli_cmd_t cmd;
  const char *summary;  // the line of `lanework bench --help`
  int (*run_sim)(const lw_bench_opts_t *o);
  bool has_opencl;      // has a --backend opencl variant (tools/bench_*_ocl.c)
} bench_spec_t;

static const char *bench_owner_of(const char *option, char *buf, size_t size);

#define BENCH_CMD(bench, about_text, options)                                          \
  {.name = "bench " bench, .synopsis = "[options]", .about = about_text, .opts = options, \
   .max_positional = 0, .owner_of = bench_owner_of}

static const bench_spec_t g_benches[] = {
    {BENCH_CMD("overlap",
               "The register/run overlap table (seed 004): C1 runs while C2 registers, against\n"
               "the same work done serially; one row per delay.",
               overlap_opts),
     "register/run overlap table (seed 004 shape)", lw__bench_overlap, true},
    {BENCH_CMD("dispatch",
               "Empty-run round trips at L2 and L3, next to a shared-memory spin and a futex\n"
               "round trip between two processes (the floors).",
               dispatch_opts),
     "empty-run round trips and the shm/futex floors", lw__bench_dispatch, true},
    {BENCH_CMD("wait", "The cost of lw_handle_done and lw_handle_wait on a finished handle.",
               wait_opts),
     "cost of done / wait on a finished handle", lw__bench_wait, false},
    {BENCH_CMD("idle",
               "CPU used by an idle worker (2 chips, 1 sub) and its children after 100 runs.",
               idle_opts),
     "CPU used by an idle worker and its children", lw__bench_idle, false},
    {BENCH_CMD("cancel", "Cancel latency, cooperative and escalated (sim: L3).", cancel_opts),
     "cancel latency, cooperative and escalated", lw__bench_cancel, true},
    {BENCH_CMD("crash", "Child death at L3: detection and respawn times.", crash_opts),
     "child death: detection and respawn times (L3)", lw__bench_crash, false},
    {BENCH_CMD("trace",
               "The cost of one recorded trace event, and L3 dispatch with tracing off and on.",
               trace_opts),
     "cost of a recorded event; dispatch with tracing on", lw__bench_trace, false},
};
#define N_BENCHES (sizeof(g_benches) / sizeof(g_benches[0]))

// The benches that take --option, as "overlap, cancel"; NULL when none does.
static const char *bench_owner_of(const char *option, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < N_BENCHES; ++i) {
    if (!lw__cli_find(g_benches[i].cmd.opts, option)) continue;
    int n = snprintf(buf + len, size - len, "%sbench %s", len ? ", " : "",
                     g_benches[i].cmd.name + strlen("bench "));
    if (n < 0 || (size_t)n >= size - len) break;
    len += (size_t)n;
  }
  return len ? buf : NULL;
}

static void bench_list(FILE *f) {
  fprintf(f, "usage: lanework bench <name> [options]\n\nbenchmarks:\n");
  for (size_t i = 0; i < N_BENCHES; ++i) {
    fprintf(f, "  %-10s %s%s\n", g_benches[i].cmd.name + strlen("bench "), g_benches[i].summary,
            g_benches[i].has_opencl ? " [sim|opencl]" : "");
  }
  fprintf(f,
          "\nEvery bench takes --json (one JSON object as the last stdout line), --quiet (no\n"
          "progress on stderr) and --help; run `lanework bench <name> --help` for its options,\n"
          "their defaults and ranges.\n");
}

typedef struct parse_state {
  const lw_cli_cmd_t *cmd;
  lw_bench_opts_t *o;
  const lw_cli_opt_t *given[32];  // the options given that apply to one backend only
  int n_given;
} parse_state_t;

static int bench_on_opt(void *user, const lw_cli_opt_t *opt, const lw_cli_value_t *v) {
  parse_state_t *s = user;
  lw_bench_opts_t *o = s->o;
  if (opt->only_with && s->n_given < 32) s->given[s->n_given++] = opt;
  switch (opt->key) {
    case K_JSON: o->json = true; break;
    case K_QUIET: o->quiet = true; break;
    case K_BACKEND: o->backend = v->text; break;
    case K_TRIALS:
      o->trials = (int)v->n;
      o->trials_given = true;
      break;
    case K_LEVEL: o->level = (int)v->n; break;
    case K_DELAYS: {
      long delays[LW_BENCH_MAX_DELAYS];
      if (lw__bench_parse_delays(v->text, delays, LW_BENCH_MAX_DELAYS) < 0) {
        return lw__cli_error(s->cmd,
                             "--delay-ms \"%s\" is not a list of delays (comma-separated, at "
                             "most %d, each 0..1000 ms)",
                             v->text, LW_BENCH_MAX_DELAYS);
      }
      o->delays = v->text;
      o->delays_given = true;
      break;
    }
    case K_REPEAT: o->repeat = v->n; break;
    case K_ITERS: o->iters = v->n; break;
    case K_SECONDS: o->seconds = v->n; break;
    case K_PIN: o->pin = 1; break;
    case K_NO_PIN: o->pin = 0; break;
    case K_STAGES: o->stages = v->n; break;
    case K_SERIAL: o->serial = true; break;
    case K_LOAD: o->load = (int)v->n; break;
    case K_LOAD_IN_SESSION: o->load_in_session = true; break;
    case K_TRACE: o->trace_dir = v->text; break;
    default: return lw__cli_error(s->cmd, "--%s: no such option key %d", opt->name, opt->key);
  }
  return LW_CLI_OK;
}

int lw__tool_bench(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "lanework bench: which benchmark?\n\n");
    bench_list(stderr);
    return 2;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
    bench_list(stdout);
    return 0;
  }
  const bench_spec_t *b = NULL;
  for (size_t i = 0; i < N_BENCHES && !b; ++i) {
    if (strcmp(g_benches[i].cmd.name + strlen("bench "), name) == 0) b = &g_benches[i];
  }
  if (!b) {
    fprintf(stderr, "lanework bench: unknown benchmark '%s'\n\n", name);
    bench_list(stderr);
    return 2;
  }
  lw_bench_opts_t o = {.json = false, .trials = 5, .level = 2, .delays = "0,2", .pin = -1,
                       .backend = "sim"};
  parse_state_t s = {.cmd = &b->cmd, .o = &o};
  // The re-exec of the opencl benches (a cold program cache) needs the words as given;
  // getopt_long reorders its argv, so it parses a copy.
  char **args = calloc((size_t)argc, sizeof(char *));
  if (!args) {
    fprintf(stderr, "lanework bench: out of memory\n");
    return 1;
  }
  memcpy(args, argv + 1, (size_t)(argc - 1) * sizeof(char *));
  int prc = lw__cli_parse(&b->cmd, argc - 1, args, bench_on_opt, &s, NULL);
  free(args);
  if (prc == LW_CLI_HELP) return 0;
  if (prc != LW_CLI_OK) return 2;
  for (int i = 0; i < s.n_given; ++i) {
    if (strcmp(s.given[i]->only_with, o.backend) != 0) {
      return lw__cli_error(&b->cmd, "--%s applies only with --backend %s (this run: %s)",
                           s.given[i]->name, s.given[i]->only_with, o.backend);
    }
  }
  if (o.load_in_session && o.load == 0) {
    return lw__cli_error(&b->cmd, "--load-in-session says where the --load processes run; "
                                  "give --load N (1..%d) with it",
                         LW_BENCH_MAX_LOAD);
  }
  g_progress.bench = name;
  g_progress.backend = o.backend;
  g_progress.quiet = o.quiet;
  g_progress.tty = isatty(STDERR_FILENO) == 1;
  int rc;
  if (strcmp(o.backend, "opencl") == 0) {
#ifdef LW_HAVE_OPENCL
    if (lw__bench_ocl_reexec_cold(argc, argv)) return 1;
    if (strcmp(name, "overlap") == 0) {
      rc = lw__bench_overlap_ocl(&o);
    } else if (strcmp(name, "dispatch") == 0) {
      rc = lw__bench_dispatch_ocl(&o);
    } else {
      rc = lw__bench_cancel_ocl(&o);
    }
#else
    fprintf(stderr, "lanework bench %s: --backend opencl: %s\n", name,
            lw__backend_missing_reason("opencl"));
    rc = 1;
#endif
  } else {
    rc = b->run_sim(&o);
  }
  lw__bench_progress_end();
  return rc;
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
