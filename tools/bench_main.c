// tools/bench_main.c — `lanework bench <name>`: the benches' option tables (from which both the
// checks and the help come, tools/cli.h), the parse, and the choice of a driver and of the
// backend's workload for it (bench_backend.h). The only file that knows every bench; nothing
// calls back into it.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "child/backend.h"
#include "tools/bench.h"
#include "tools/bench_backend.h"
#include "tools/bench_sim_only.h"
#include "tools/cli.h"
#include "tools/tool.h"

// The sim backend's device lock test hook (child/backend_sim.c): --stall-control turns it on.
#define STALL_ENV "LW_SIM_DEVICE_LOCK"

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
  K_REGISTER_MS,
  K_SERIAL,
  K_STALL,
  K_LOAD,
  K_LOAD_IN_SESSION,
  K_TRACE,
  K_CHIPS,
  K_TASK_US,
  K_RUN_MS,
  K_FAULT_MS,
  K_THREADS,
  K_POLL_US,
};

#define OPT_JSON                                                                     \
  {.name = "json", .kind = LW_CLI_FLAG, .key = K_JSON,                               \
   .help = "also print one JSON object as the last stdout line"}
#define OPT_QUIET                                                                    \
  {.name = "quiet", .short_name = 'q', .kind = LW_CLI_FLAG, .key = K_QUIET,          \
   .help = "no progress on stderr"}
#define OPT_BACKEND                                                                  \
  {.name = "backend", .kind = LW_CLI_CHOICE, .choices = LW_BENCH_BACKEND_CHOICES,    \
   .metavar = "NAME", .def = "sim", .key = K_BACKEND,                                \
   .help = "the backend measured (opencl, cuda: device 0, every\nprogram build cold)"}
#define OPT_PIN                                                                      \
  {.name = "pin", .kind = LW_CLI_FLAG, .key = K_PIN,                                 \
   .help = "run lane on CPU 0, register lane on CPU 1 (the\ndefault when there are 2 CPUs)"}, \
  {.name = "no-pin", .kind = LW_CLI_FLAG, .key = K_NO_PIN,                           \
   .help = "let the OS place the lanes"}
#define OPT_END {.name = NULL}

static const lw_cli_opt_t overlap_opts[] = {
    OPT_JSON, OPT_QUIET, OPT_BACKEND,
    {.name = "level", .kind = LW_CLI_INT, .min = 2, .max = 3, .metavar = "N", .def = "2",
     .key = K_LEVEL, .help = "2: direct chip worker, 3: L3 worker (forked chip\nchild)"},
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = LW_BENCH_MAX_TRIALS, .metavar = "N",
     .def = "5", .key = K_TRIALS, .help = "trials per delay"},
    {.name = "delay-ms", .kind = LW_CLI_STRING, .metavar = "LIST", .key = K_DELAYS,
     .def = "0,2; opencl: 0",
     .help = "delays before the C2 register, comma-separated,\nat most 8, each 0..1000 ms"},
    {.name = "repeat", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "calibrated", .key = K_REPEAT, .help = "C1's repeat_count"},
    {.name = "serial", .kind = LW_CLI_FLAG, .key = K_SERIAL,
     .help = "register C2 only after C1 finished: a negative\ncontrol (hidden, by events and "
             "hidden by events\nread ~0)"},
    {.name = "stall-control", .kind = LW_CLI_FLAG, .key = K_STALL, .only_with = "sim",
     .help = "the sim device lock on (" STALL_ENV "=1): a\nregister stops the running kernel, "
             "the negative\ncontrol a stall cannot fool (by events ~1,\nhidden by events ~0)"},
    {.name = "trace", .kind = LW_CLI_STRING, .metavar = "DIR", .key = K_TRACE,
     .help = "write one trial's trace and its swimlane picture\nto DIR "
             "(overlap_l<level>_<backend>.json, .svg)"},
    OPT_PIN,
    {.name = "stages", .kind = LW_CLI_INT, .min = 1, .max = 256, .metavar = "N", .def = "64",
     .key = K_STAGES, .only_with = "opencl|cuda",
     .help = "C2 = big_program built with -DSTAGES=N (cuda:\n-DKERNELS=N, 8..200, default 8)"},
    {.name = "register-ms", .kind = LW_CLI_INT, .min = 0, .max = 60000, .metavar = "N",
     .def = "500", .key = K_REGISTER_MS, .only_with = "cuda",
     .help = "C2 made heavier (-DWEIGHT) until a register\ntakes at least N ms; 0: C2 as "
             "it is"},
    OPT_END,
};

static const lw_cli_opt_t dispatch_opts[] = {
    OPT_JSON, OPT_QUIET, OPT_BACKEND,
    {.name = "iters", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "20000; opencl, cuda: 2000", .key = K_ITERS, .help = "round trips measured"},
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

static const lw_cli_opt_t l4_opts[] = {OPT_JSON, OPT_QUIET, OPT_END};

static const lw_cli_opt_t tensors_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = 100, .metavar = "N", .def = "10",
     .key = K_TRIALS, .help = "timed runs of each size in each mode"},
    OPT_END,
};

static const lw_cli_opt_t fault_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = 100, .metavar = "N", .def = "3",
     .key = K_TRIALS, .help = "faults measured (each replaces chip 1's child)"},
    {.name = "run-ms", .kind = LW_CLI_INT, .min = 2, .max = 60000, .metavar = "MS",
     .def = "400", .key = K_RUN_MS, .help = "the other chip's kernel runs this long"},
    {.name = "fault-ms", .kind = LW_CLI_INT, .min = 0, .max = 59999, .metavar = "MS",
     .def = "100", .key = K_FAULT_MS,
     .help = "the faulting kernel faults this long after it\nstarts (below --run-ms)"},
    OPT_END,
};

static const lw_cli_opt_t idle_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "seconds", .kind = LW_CLI_INT, .min = 1, .max = 3600, .metavar = "N", .def = "5",
     .key = K_SECONDS, .help = "how long the idle worker is sampled"},
    OPT_END,
};

static const lw_cli_opt_t cancel_opts[] = {
    OPT_JSON,
    OPT_QUIET,
    OPT_BACKEND,
    {.name = "trials",
     .kind = LW_CLI_INT,
     .min = 1,
     .max = LW_BENCH_MAX_TRIALS,
     .metavar = "N",
     .def = "20",
     .key = K_TRIALS,
     .help = "cancelled runs"},
    {.name = "level",
     .kind = LW_CLI_INT,
     .min = 2,
     .max = 3,
     .metavar = "N",
     .def = "3",
     .key = K_LEVEL,
     .help = "2: direct chip worker, 3: L3 worker (forked chip\nchild; escalation measured "
             "too)"},
    OPT_PIN,
    {.name = "threads",
     .kind = LW_CLI_INT,
     .min = 0,
     .max = 1 << 21,
     .metavar = "N",
     .def = "0",
     .key = K_THREADS,
     .only_with = "cuda",
     .help = "launch the cancel kernel with N threads, each\nlooping over 2^21 / N elements "
             "(fewer blocks\npoll the stop word); 0: one per element"},
    {.name = "poll-us",
     .kind = LW_CLI_INT,
     .min = 1,
     .max = 1000000,
     .metavar = "US",
     .def = "100",
     .key = K_POLL_US,
     .only_with = "sim",
     .help = "the cancel kernel polls its cancel word every US\nmicroseconds (1: what is left is "
             "the runtime's\npath)"},
    OPT_END,
};

static const lw_cli_opt_t crash_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = LW_BENCH_MAX_TRIALS, .metavar = "N",
     .def = "5", .key = K_TRIALS, .help = "child deaths measured"},
    OPT_END,
};

static const lw_cli_opt_t trace_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "trials", .kind = LW_CLI_INT, .min = 1, .max = LW_BENCH_MAX_TRIALS, .metavar = "N",
     .def = "5", .key = K_TRIALS, .help = "rounds of the dispatch comparison"},
    {.name = "iters", .kind = LW_CLI_INT, .min = 1, .max = 100000000, .metavar = "N",
     .def = "2000", .key = K_ITERS, .help = "iterations of each dispatch round"},
    OPT_END,
};

static const lw_cli_opt_t parallel_opts[] = {
    OPT_JSON, OPT_QUIET,
    {.name = "chips", .kind = LW_CLI_INT, .min = 1, .max = LW_MAX_CHIPS, .metavar = "N",
     .def = "2 and 4", .key = K_CHIPS, .help = "chips of the worker measured"},
    {.name = "task-us", .kind = LW_CLI_INT, .min = 100, .max = 1000000, .metavar = "US",
     .def = "2000", .key = K_TASK_US, .help = "every task's length (it sleeps)"},
    {.name = "runs", .kind = LW_CLI_INT, .min = 1, .max = 100, .metavar = "N", .def = "5",
     .key = K_TRIALS, .help = "runs of each shape (the median is reported)"},
    OPT_END,
};

// A bench runs either over the backend's workload (kind) or, sim only, by itself (run).
typedef enum bench_kind { B_OVERLAP, B_DISPATCH, B_CANCEL, B_SIM_ONLY } bench_kind_t;

typedef struct bench_spec {
  lw_cli_cmd_t cmd;
  const char *summary;  // the line of `lanework bench --help`
  bench_kind_t kind;
  int (*run)(const lw_bench_opts_t *o);  // B_SIM_ONLY
  int default_level;
} bench_spec_t;

static const char *bench_owner_of(const char *option, char *buf, size_t size);

#define BENCH_CMD(bench, about_text, options)                                          \
  {.name = "bench " bench, .synopsis = "[options]", .about = about_text, .opts = options, \
   .max_positional = 0, .owner_of = bench_owner_of}

static const bench_spec_t g_benches[] = {
    {BENCH_CMD("overlap",
               "The register/run overlap table (seed 004): C1 runs while C2 registers, against\n"
               "the same work done serially; one row per delay, each proved from the trials'\n"
               "trace events.",
               overlap_opts),
     "register/run overlap table (seed 004 shape)", B_OVERLAP, NULL, 2},
    {BENCH_CMD("dispatch",
               "Empty-run round trips at L2 and L3, next to what a dispatch costs at least on\n"
               "the backend (the floors), measured in the same run.",
               dispatch_opts),
     "empty-run round trips and their floors", B_DISPATCH, NULL, 2},
    {BENCH_CMD("wait", "The cost of lw_handle_done and lw_handle_wait on a finished handle.",
               wait_opts),
     "cost of done / wait on a finished handle", B_SIM_ONLY, lw__bench_wait, 2},
    {BENCH_CMD("idle",
               "CPU used by an idle worker (2 chips, 1 sub) and its children after 100 runs.",
               idle_opts),
     "CPU used by an idle worker and its children", B_SIM_ONLY, lw__bench_idle, 2},
    {BENCH_CMD("cancel",
               "Cancel latency of a running kernel; at L3 also of one that ignores its cancel\n"
               "(escalation), where the backend has such a kernel.",
               cancel_opts),
     "cancel latency, cooperative and escalated", B_CANCEL, NULL, 3},
    {BENCH_CMD("crash", "Child death at L3: detection and respawn times.", crash_opts),
     "child death: detection and respawn times (L3)", B_SIM_ONLY, lw__bench_crash, 3},
    {BENCH_CMD("trace",
               "The cost of one recorded trace event, and L3 dispatch with tracing off and on.",
               trace_opts),
     "cost of a recorded event; dispatch with tracing on", B_SIM_ONLY, lw__bench_trace, 3},
    {BENCH_CMD("parallel",
               "DAG shapes of LW_ANY_CHIP tasks that sleep a fixed time (independent, layered,\n"
               "fan-out, chain) on sim workers of 2 and 4 chips: efficiency = ideal wall /\n"
               "measured wall, and the tasks each chip ran.",
               parallel_opts),
     "do N chips run a DAG N times as fast? (L3)", B_SIM_ONLY, lw__bench_parallel, 3},
    {BENCH_CMD("l4",
               "The L4 worker over Open MPI under mpirun -np 3 (docs/l4.md): startup, an empty\n"
               "remote task's round trip, the cost per task with 1024 in flight, a 4 MB tensor\n"
               "moved between L3 ranks directly, the time until a killed or stopped rank fails\n"
               "its run, shutdown; then the same figures of its transport alone. Needs a build\n"
               "with MPI.",
               l4_opts),
     "remote tasks through the L4 under mpirun (needs MPI)", B_SIM_ONLY, lw__bench_l4, 4},
    {BENCH_CMD("tensors",
               "A cuda chip's tensors copied (LW_CUDA_TENSORS=copy) against mapped (=mapped):\n"
               "vector_add at L2 on 4 KiB to 64 MiB tensors, each mode on a chip of its own\n"
               "(docs/cuda.md, \"Memory\"). Needs a CUDA device and NVRTC.",
               tensors_opts),
     "cuda tensors copied against mapped (cuda only)", B_SIM_ONLY, lw__bench_tensors, 2},
    {BENCH_CMD("fault",
               "A kernel's illegal address on one of two cuda chips sharing a GPU while the\n"
               "other runs a long kernel (L3): the faulting task fails naming the CUDA error,\n"
               "its chip child is replaced, the other chip's run finishes (docs/cuda.md,\n"
               "\"Sticky errors\"). Needs a CUDA device and NVRTC.",
               fault_opts),
     "a device fault beside a run on the same GPU (cuda only)", B_SIM_ONLY, lw__bench_fault, 3},
};
#define N_BENCHES (sizeof(g_benches) / sizeof(g_benches[0]))

// The benches that take --option, as "bench overlap, bench cancel"; NULL when none does.
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
            g_benches[i].kind != B_SIM_ONLY ? " [" LW_BENCH_BACKEND_CHOICES "]" : "");
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
    case K_LEVEL:
      o->level = (int)v->n;
      o->level_given = true;
      break;
    case K_DELAYS: {
      long delays[LW_BENCH_MAX_DELAYS];
      if (lw__bench_parse_delays(v->text, delays, LW_BENCH_MAX_DELAYS) < 0) {
        return lw__cli_error(s->cmd,
                             "--delay-ms \"%s\" is not a list of delays (comma-separated, at "
                             "most %d, each 0..1000 ms)",
                             v->text, LW_BENCH_MAX_DELAYS);
      }
      o->delays = v->text;
      break;
    }
    case K_REPEAT: o->repeat = v->n; break;
    case K_ITERS: o->iters = v->n; break;
    case K_SECONDS: o->seconds = v->n; break;
    case K_PIN: o->pin = 1; break;
    case K_NO_PIN: o->pin = 0; break;
    case K_STAGES: o->stages = v->n; break;
    case K_REGISTER_MS: o->register_ms = v->n; break;
    case K_THREADS: o->threads = v->n; break;
    case K_POLL_US:
      o->poll_us = v->n;
      break;
    case K_SERIAL: o->serial = true; break;
    case K_STALL: o->stall_control = true; break;
    case K_LOAD: o->load = (int)v->n; break;
    case K_LOAD_IN_SESSION: o->load_in_session = true; break;
    case K_TRACE: o->trace_dir = v->text; break;
    case K_CHIPS: o->chips = (int)v->n; break;
    case K_TASK_US: o->task_us = v->n; break;
    case K_RUN_MS: o->run_ms = v->n; break;
    case K_FAULT_MS: o->fault_ms = v->n; break;
    default: return lw__cli_error(s->cmd, "--%s: no such option key %d", opt->name, opt->key);
  }
  return LW_CLI_OK;
}

// The environment the run needs before it starts (the backend's, and the stall control's),
// with the process re-executed when it lacked any of it. 0, 1 (the re-exec failed) or 2 (the
// environment asks for what the options do not).
static int ensure_env(const bench_spec_t *b, const lw_bench_opts_t *o,
                      const lw_bench_backend_t *be, int argc, char **argv) {
  const char *lock = getenv(STALL_ENV);
  if (!o->stall_control && lock && strcmp(lock, "1") == 0) {
    return lw__cli_error(&b->cmd, "%s=1 is set: every run of a sim chip then stalls while a "
                                  "register runs; unset it (bench overlap --stall-control "
                                  "turns it on for its own run)",
                         STALL_ENV);
  }
  // The backend's pairs, the stall control's, and the end.
  enum { MAX_BACKEND_ENV = 4 };
  const char *env[MAX_BACKEND_ENV + 2][2] = {{NULL, NULL}};
  int n = 0;
  for (size_t i = 0; be->env && be->env[i][0]; ++i, ++n) {
    if (n == MAX_BACKEND_ENV) {
      fprintf(stderr, "lanework bench: backend %s needs more than %d environment variables\n",
              be->name, MAX_BACKEND_ENV);
      return 1;
    }
    env[n][0] = be->env[i][0];
    env[n][1] = be->env[i][1];
  }
  if (o->stall_control) {
    env[n][0] = STALL_ENV;
    env[n++][1] = "1";
  }
  env[n][0] = env[n][1] = NULL;
  return lw__bench_reexec_with_env((const char *const(*)[2])env, argc, argv) ? 1 : 0;
}

// Whether backend is one of list ("opencl|cuda").
static bool backend_in(const char *list, const char *backend) {
  size_t n = strlen(backend);
  for (const char *p = list; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, backend, n) == 0) return true;
    p = bar ? bar + 1 : NULL;
  }
  return false;
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
  lw_bench_opts_t o = {.trials = 5,       .level = b->default_level, .pin = -1,
                       .register_ms = -1, .backend = "sim",           .task_us = 2000,
                       .run_ms = 400,     .fault_ms = 100};
  parse_state_t s = {.cmd = &b->cmd, .o = &o};
  // A re-exec (lw__bench_reexec_with_env) needs the words as given; getopt_long reorders its
  // argv, so it parses a copy.
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
    if (!backend_in(s.given[i]->only_with, o.backend)) {
      return lw__cli_error(&b->cmd, "--%s applies only with --backend %s (this run: %s)",
                           s.given[i]->name, s.given[i]->only_with, o.backend);
    }
  }
  if (o.load_in_session && o.load == 0) {
    return lw__cli_error(&b->cmd, "--load-in-session says where the --load processes run; "
                                  "give --load N (1..%d) with it",
                         LW_BENCH_MAX_LOAD);
  }
  if (o.serial && o.stall_control) {
    return lw__cli_error(&b->cmd, "--serial and --stall-control are two negative controls; "
                                  "give one of them");
  }
  const lw_bench_backend_t *be = lw__bench_backend_find(o.backend);
  if (!be) {
    const char *why = lw__backend_missing_reason(o.backend);
    fprintf(stderr, "lanework bench %s: --backend %s: %s\n", name, o.backend,
            why ? why : "no such backend in this build");
    return 1;
  }
  const void *workload = b->kind == B_OVERLAP    ? (const void *)be->overlap
                         : b->kind == B_DISPATCH ? (const void *)be->dispatch
                         : b->kind == B_CANCEL   ? (const void *)be->cancel
                                                 : (const void *)be;
  if (!workload) {
    fprintf(stderr, "lanework bench %s: --backend %s: this bench has no %s variant\n", name,
            o.backend, o.backend);
    return 2;
  }
  int erc = ensure_env(b, &o, be, argc, argv);
  if (erc != 0) return erc;
  lw__bench_progress_start(name, o.backend, o.quiet);
  int rc;
  switch (b->kind) {
    case B_OVERLAP: rc = lw__bench_overlap(&o, be->overlap); break;
    case B_DISPATCH:
      rc = lw__bench_dispatch(&o, be->dispatch,
                              be == &lw__bench_backend_sim ? NULL
                                                           : lw__bench_backend_sim.dispatch);
      break;
    case B_CANCEL: rc = lw__bench_cancel(&o, be->cancel); break;
    case B_SIM_ONLY:
    default: rc = b->run(&o); break;
  }
  lw__bench_progress_end();
  return rc;
}
