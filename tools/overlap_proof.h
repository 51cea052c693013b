// tools/overlap_proof.h — the overlap bench's proof from trace events (DESIGN 8, "Overlap
// proved from the trace"), as pure functions of recorded captures, so unit tests check them on
// hand-made ones.
//
// Each trial of `lanework bench overlap` records its serial arm (run C1, register C2, run C2)
// and its overlapped arm (run C1 with register C2 beside it) in two trace sessions. From them:
//
//   overlap_by_events   the share of the overlapped arm's register span of C2 that lies inside
//                       run spans of its chip (lw__trace_register_covered): containment;
//   run_stretch         C1's run span in the overlapped arm / in the serial arm;
//   hidden_by_events    overlap_by_events - max(0, run_overlapped - run_alone) / register,
//                       clamped to [0, 1].
//
// Containment alone cannot tell an overlap from a stall: a driver that stops the running
// kernel for the whole register stretches the run span over the register, and containment
// still reads 1. The stretch that the register caused is then time the register was not
// hidden, and hidden_by_events takes it back out; it reads ~0 for a stall and for a serial
// register alike. The overlap holds when hidden_by_events >= LW_OVERLAP_HOLDS.
#ifndef LANEWORK_TOOLS_OVERLAP_PROOF_H_
#define LANEWORK_TOOLS_OVERLAP_PROOF_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanes/trace.h"

#define LW_OVERLAP_HOLDS 0.95

// What one arm's capture says: C1's run span and C2's register span (the first of each with
// the callable's name; t0 == t1 == 0 when none was recorded), where each ran, containment of
// that register span in the run spans of its chip and process, and how many times a running
// kernel was held at a poll (LW_TRACE_STALL: the sim device lock).
typedef struct lw_overlap_arm {
  int64_t run_t0_ns, run_t1_ns;
  int64_t reg_t0_ns, reg_t1_ns;
  int32_t run_pid, run_chip, reg_pid, reg_chip;
  double by_events;  // lw__trace_register_covered of C2's register span; -1: none
  uint32_t stalls;
  // C2's module load (its `load` span, LW_TRACE_LOAD: the cuda backend loads a registered
  // module on the run lane before its first launch); -1: none recorded (other backends).
  int64_t load_ns;
} lw_overlap_arm_t;

void lw__overlap_arm_read(const lw_trace_capture_t *c, const char *c1_name, const char *c2_name,
                          lw_overlap_arm_t *out);

// One trial's figures, from its two arms.
typedef struct lw_overlap_proof {
  double by_events;
  double run_stretch;
  double hidden_by_events;
} lw_overlap_proof_t;

// False (and *out untouched) when a span the figures need is missing: C1's run in either arm,
// or C2's register in the overlapped one; or when that register ran on another chip or in
// another process than C1's run beside it (the figures would compare unrelated spans).
bool lw__overlap_proof(const lw_overlap_arm_t *serial, const lw_overlap_arm_t *overlapped,
                       lw_overlap_proof_t *out);

// The formula itself (any one unit of time): by_events - max(0, run_overlapped - run_alone) /
// reg, clamped to [0, 1]; 0 when reg <= 0.
double lw__overlap_hidden_by_events(double by_events, double run_overlapped, double run_alone,
                                    double reg);

#endif  // LANEWORK_TOOLS_OVERLAP_PROOF_H_
