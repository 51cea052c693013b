// tools/bench_overlap.h — `lanework bench overlap`: one driver (bench_overlap.c) over a small
// per-backend workload (workload_sim.c, workload_opencl.c) that says which two callables it
// runs, on which tensors, how long C1 should last and how a result is checked.
//
//   serial  = run(C1) + register(C2) + run(C2)
//   overlap = run_async(C1), [delay], register_async(C2) while C1 runs, run_async(C2) queued
//             behind C1 once C2 is registered, wait both
//
// Every arm of every trial is traced (tools/overlap_events.h), and the figures that prove the
// overlap come from those events (tools/overlap_proof.h).
#ifndef LANEWORK_TOOLS_BENCH_OVERLAP_H_
#define LANEWORK_TOOLS_BENCH_OVERLAP_H_

#include <stdio.h>

#include "tools/bench.h"
#include "tools/bench_chip.h"

// What the outputs of every arm, compared with the workload's reference, came to.
typedef struct lw_overlap_check {
  double max_diff;  // the largest difference from an exact reference: must be 0
  double rel_err;   // the largest relative error against an inexact reference (0: none)
} lw_overlap_check_t;

typedef struct lw_overlap_workload {
  const char *backend;
  const char *default_delays;  // --delay-ms when not given
  size_t arena_bytes;          // the chip memory its tensors need
  // C1's length, unless --repeat: starting at initial_repeat, C1 is first scaled to run
  // target_floor_us (which also warms it), then to clamp(target_factor x register(C2),
  // target_floor_us, target_cap_us), register(C2) the median of register_samples registers.
  // C1 exists to hide the register: shorter than it, neither clock nor events could show it.
  long initial_repeat;
  int register_samples;
  double target_factor, target_floor_us, target_cap_us;
  double rel_tol;  // a check's rel_err above this fails the bench
  // The register C2 must at least take, before C1 is scaled to it (--register-ms overrides):
  // while the median register is shorter, c2_heavier makes C2 heavier (register_us what it
  // took, want_us what is wanted) and it is measured again; c2_heavier says false when C2 is
  // at its heaviest. 0 / NULL: C2 as it is.
  double register_floor_us;
  bool (*c2_heavier)(void *s, double register_us, double want_us);
  // The workload's state: open loads C1 and C2 (o: --stages and the like); alloc gives it its
  // tensors in the chip's memory, filled with inputs; close frees them (d may be NULL when
  // alloc never ran) and the state.
  lw_status_t (*open)(const lw_bench_opts_t *o, void **out);
  const lw_callable_t *(*c1)(void *s);
  // C2 for one register: the bench calls it once a register (and once for its name), so a
  // workload may hand each register a program of its own (cuda: a nonce against NVRTC's
  // in-process reuse).
  const lw_callable_t *(*c2)(void *s);
  lw_status_t (*alloc)(void *s, lw_bench_chip_t *d);
  lw_status_t (*args_c1)(void *s, long repeat, lw_args_t *out);
  lw_status_t (*args_c2)(void *s, lw_args_t *out);
  void (*clear)(void *s);  // zeroes the outputs before an arm
  // After an arm: compares the outputs with the references, adding to c.
  void (*check)(void *s, long repeat, lw_overlap_check_t *c);
  // Lines of the text table's header that describe C1 and C2 (each ends with a newline).
  void (*describe)(void *s, long repeat, FILE *out);
  // Keys of the workload's own in the --json object (may be NULL).
  void (*json)(void *s, lw_json_t *j);
  void (*close)(void *s, lw_bench_chip_t *d);
} lw_overlap_workload_t;

int lw__bench_overlap(const lw_bench_opts_t *o, const lw_overlap_workload_t *w);

#endif  // LANEWORK_TOOLS_BENCH_OVERLAP_H_
