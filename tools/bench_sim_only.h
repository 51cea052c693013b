// tools/bench_sim_only.h — the benches without a per-backend workload: they measure lanework's
// own machinery (waits, an idle worker, child deaths, tracing) on sim chips, or, like
// bench tensors, measure one backend's own choice.
#ifndef LANEWORK_TOOLS_BENCH_SIM_ONLY_H_
#define LANEWORK_TOOLS_BENCH_SIM_ONLY_H_

#include "tools/bench.h"

int lw__bench_wait(const lw_bench_opts_t *o);   // bench_wait.c
int lw__bench_idle(const lw_bench_opts_t *o);   // bench_idle.c
int lw__bench_l4(const lw_bench_opts_t *o);     // bench_l4_run.c (mpirun, tools/bench_l4.c)
int lw__bench_crash(const lw_bench_opts_t *o);  // bench_crash.c
int lw__bench_trace(const lw_bench_opts_t *o);  // bench_trace.c
int lw__bench_parallel(const lw_bench_opts_t *o);  // bench_parallel.c
int lw__bench_tensors(const lw_bench_opts_t *o);   // bench_tensors.c (cuda only)
int lw__bench_fault(const lw_bench_opts_t *o);     // bench_fault.c (cuda only)

#endif  // LANEWORK_TOOLS_BENCH_SIM_ONLY_H_
