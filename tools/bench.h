// tools/bench.h — shared helpers of the `lanework bench` subcommands.
#ifndef LANEWORK_TOOLS_BENCH_H_
#define LANEWORK_TOOLS_BENCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lanes/json.h"
#include "lanework/lanework.h"

#define LW_BENCH_MAX_LOAD 64
#define LW_BENCH_MAX_DELAYS 8  // values of overlap's --delay-ms list

typedef struct lw_bench_opts {
  bool json;
  bool quiet;          // --quiet: no progress on stderr
  int trials;
  int level;
  const char *delays;  // "0,2": delays in ms before the C2 register (overlap)
  bool delays_given;   // --delay-ms was on the command line
  long repeat;         // overlap: C1 repeat count; 0 = calibrate
  long iters;          // dispatch / wait / trace iterations
  long seconds;        // idle: how long to sample (0: the default)
  int pin;             // overlap: -1 auto (pin when >= 2 CPUs), 0 no, 1 yes
  const char *backend; // "sim" (default) or "opencl" (overlap, dispatch, cancel)
  bool trials_given;   // --trials was on the command line (benches with another default)
  long stages;         // overlap --backend opencl: big_program's -DSTAGES (0: its default, 64)
  bool serial;         // overlap: register C2 only after C1 finished (negative control)
  int load;            // dispatch: measure again with this many busy-loop processes running
  bool load_in_session;  // dispatch: the busy loops stay in the benchmark's session
  const char *trace_dir;  // overlap --trace DIR: keep one trial's trace and picture there
} lw_bench_opts_t;

// Median of n doubles (sorts a copy).
double lw__bench_median(const double *v, size_t n);
// The q-quantile (0..1) of n doubles (sorts in place).
double lw__bench_quantile(double *v, size_t n, double q);
double lw__bench_now_us(void);

// Loads <kernel dir>/<name>.so into out (heap image); prints the error and returns false.
bool lw__bench_load_kernel(const char *name, lw_callable_t *out);
// Prints the last error with a prefix and returns 1.
int lw__bench_fail(const char *what, lw_status_t st);
// Parses a --delay-ms list ("0,2": at most max values, each 0..1000 ms) into out; an empty
// list gives one 0. Returns the count, or -1 for a bad list (the caller names it).
int lw__bench_parse_delays(const char *list, long *out, int max);
// Progress of the running bench on stderr, "<bench>: <text>": one line each, or on a terminal
// one line rewritten in place; nothing with --quiet. stdout never gets progress.
void lw__bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Clears the progress line on a terminal (before a table or an error is printed).
void lw__bench_progress_end(void);
// Sleeps ms milliseconds (nothing for ms <= 0).
void lw__bench_sleep_ms(long ms);
// The overlap bench's hidden fraction: how much of the shorter of run(C1) and register(C2) the
// overlap saved, (serial - overlap) / min(run_c1, reg_c2); 1.0 = fully hidden.
double lw__bench_hidden_fraction(double serial, double overlap, double run_c1, double reg_c2);

// The --json line, written with the JSON writer: a compact writer on stdout whose object is
// opened and given "schema": "lanework.bench.<name>" (".opencl" appended for --backend
// opencl), "schema_version" and "bench": name. The bench adds its keys, then calls
// lw__bench_json_end.
void lw__bench_json_begin(lw_json_t *j, const char *name);
// Closes the object and ends the line. A misuse of the writer or a failed write of stdout is
// named on stderr; returns 1 then (the bench's exit code), else 0.
int lw__bench_json_end(lw_json_t *j, const char *name);

int lw__bench_overlap(const lw_bench_opts_t *o);
int lw__bench_wait(const lw_bench_opts_t *o);
int lw__bench_dispatch(const lw_bench_opts_t *o);
int lw__bench_idle(const lw_bench_opts_t *o);
int lw__bench_cancel(const lw_bench_opts_t *o);
int lw__bench_crash(const lw_bench_opts_t *o);
int lw__bench_trace(const lw_bench_opts_t *o);

#endif  // LANEWORK_TOOLS_BENCH_H_
