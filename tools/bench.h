// tools/bench.h — what every `lanework bench` driver shares: the parsed options and small
// helpers (statistics, the clock, progress on stderr, the --json line). The dispatcher
// (bench_main.c) fills the options and calls one driver; drivers and the per-backend workloads
// (workload_sim.c, workload_opencl.c) call these helpers and never the dispatcher.
//
//   bench_main.c ──> bench_overlap.c  bench_dispatch.c  bench_cancel.c  bench_{crash,wait,idle,trace}.c
//        │          bench_parallel.c
//        │               │                 │                  │
//        └──> bench_backend.c ──> workload_sim.c, workload_opencl.c (the per-backend tables)
//                        (all of them) ──> bench.c (these helpers), bench_chip.c (L2/L3 chip)
#ifndef LANEWORK_TOOLS_BENCH_H_
#define LANEWORK_TOOLS_BENCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lanes/json.h"
#include "lanework/lanework.h"

#define LW_BENCH_MAX_LOAD 64
#define LW_BENCH_MAX_DELAYS 8   // values of overlap's --delay-ms list
#define LW_BENCH_MAX_TRIALS 1000

typedef struct lw_bench_opts {
  bool json;
  bool quiet;          // --quiet: no progress on stderr
  int trials;
  bool trials_given;   // --trials was on the command line (benches with another default)
  int level;
  bool level_given;
  const char *delays;  // --delay-ms "0,2": delays in ms before the C2 register (overlap)
  long repeat;         // overlap: C1 repeat count; 0 = calibrate
  long iters;          // dispatch / wait / trace iterations (0: the bench's default)
  long seconds;        // idle: how long to sample (0: the default)
  int pin;             // -1 auto (pin when >= 2 CPUs), 0 no, 1 yes
  const char *backend; // "sim" (default) or "opencl"
  long stages;         // overlap --backend opencl: big_program's -DSTAGES (0: its default)
  long register_ms;    // overlap --register-ms: C2's register at least (-1: the workload's)
  long threads;        // cancel --threads (cuda): the cancel kernel's launch (0: one per element)
  long poll_us;        // cancel --poll-us (sim): the spin kernel's poll interval (0: 100 us)
  bool serial;         // overlap: register C2 only after C1 finished (negative control)
  bool stall_control;  // overlap: the sim device lock test hook on (negative control)
  int load;            // dispatch: measure again with this many busy-loop processes running
  bool load_in_session;  // dispatch: the busy loops stay in the benchmark's session
  const char *trace_dir;  // overlap --trace DIR: keep one trial's trace and picture there
  int chips;             // parallel --chips: one worker size (0: both 2 and 4)
  long task_us;          // parallel --task-us: every task's length
  long run_ms;           // fault --run-ms: the other chip's kernel
  long fault_ms;         // fault --fault-ms: when the faulting kernel faults
} lw_bench_opts_t;

// Median of n doubles (sorts a copy).
double lw__bench_median(const double *v, size_t n);
// The q-quantile (0..1) of n doubles (sorts in place).
double lw__bench_quantile(double *v, size_t n, double q);
// The smallest and largest of n >= 1 doubles.
void lw__bench_spread(const double *v, size_t n, double *lo, double *hi);
// CLOCK_MONOTONIC in microseconds: the clock trace events carry too.
double lw__bench_now_us(void);
// Sleeps ms milliseconds (nothing for ms <= 0).
void lw__bench_sleep_ms(long ms);
// Whether to pin the lanes (run lane on CPU 0, register lane on CPU 1): --pin / --no-pin, by
// default when the machine has 2 CPUs or more.
bool lw__bench_pin(const lw_bench_opts_t *o);

// Loads <kernel dir>/<name>.so into out (heap image); prints the error and returns false.
bool lw__bench_load_kernel(const char *name, lw_callable_t *out);
// Loads <kernel dir>/opencl/<name>.cl with the signature dirs[0..n_params) (static storage);
// prints the error and returns false.
bool lw__bench_load_opencl_kernel(const char *name, uint32_t n_params, const uint8_t *dirs,
                                  lw_callable_t *out);
// Loads <kernel dir>/cuda/<name>.cu as CUDA C with the signature dirs[0..n_params) (static
// storage) and the build option lw__bench_cuda_include(); prints the error and returns false.
bool lw__bench_load_cuda_kernel(const char *name, uint32_t n_params, const uint8_t *dirs,
                                lw_callable_t *out);
// "-I<kernel dir>/cuda": where NVRTC finds lanework/kernel_cuda.h for the kernels of cuda/
// (static storage).
const char *lw__bench_cuda_include(void);
// Prints the last error with a prefix and returns 1.
int lw__bench_fail(const char *what, lw_status_t st);
// A run that did not measure what the bench names: says why on stderr, returns 1 (the exit
// code); the bench then reports no figure.
int lw__bench_invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Parses a --delay-ms list ("0,2": at most max values, each 0..1000 ms) into out; an empty
// list gives one 0. Returns the count, or -1 for a bad list (the caller names it).
int lw__bench_parse_delays(const char *list, long *out, int max);

// Environment a bench needs before the process starts: chip children start from lanework's
// zygote (forked when the library loads) and PoCL reads its variables once, so a variable set
// later would not reach them. Sets every name=value pair of env (NULL-terminated) that is not
// set so already and, if any was not, re-executes this program with argv (the words after
// `lanework`). Returns false when nothing needed doing; true only when the re-exec failed
// (after printing why): the caller exits 1.
bool lw__bench_reexec_with_env(const char *const (*env)[2], int argc, char **argv);

// Progress of the running bench on stderr, "<bench>: <text>": one line each, or on a terminal
// one line rewritten in place; nothing with --quiet. stdout never gets progress.
// lw__bench_progress_start names the bench (and its backend, for the JSON's schema).
void lw__bench_progress_start(const char *bench, const char *backend, bool quiet);
void lw__bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Clears the progress line on a terminal (before a table or an error is printed).
void lw__bench_progress_end(void);

// The overlap bench's hidden fraction: how much of the shorter of run(C1) and register(C2) the
// overlap saved, (serial - overlap) / min(run_c1, reg_c2); 1.0 = fully hidden.
double lw__bench_hidden_fraction(double serial, double overlap, double run_c1, double reg_c2);

// The --json line, written with the JSON writer: a compact writer on stdout whose object is
// opened and given "schema": "lanework.bench.<name>" (".<backend>" appended for a backend other
// than sim), "schema_version", "bench": name, "backend" and "lanework_version" (lw_version()).
// The bench adds its keys, then calls lw__bench_json_end.
void lw__bench_json_begin(lw_json_t *j, const char *name);
// Closes the object and ends the line. A misuse of the writer or a failed write of stdout is
// named on stderr; returns 1 then (the bench's exit code), else 0.
int lw__bench_json_end(lw_json_t *j, const char *name);
// "<key>": median, "<key>_min": lo, "<key>_max": hi, each with decimals decimals.
void lw__bench_json_spread(lw_json_t *j, const char *key, double median, double lo, double hi,
                           int decimals);

#endif  // LANEWORK_TOOLS_BENCH_H_
