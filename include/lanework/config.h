// lanework/config.h — configuration structs. Always start from the *_default function, then
// change fields: new fields get safe defaults that way.
#ifndef LANEWORK_CONFIG_H_
#define LANEWORK_CONFIG_H_

#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_BACKEND_NAME_BYTES 16

typedef struct lw_chip_config {
  char backend[LW_BACKEND_NAME_BYTES];  // "sim"
  int32_t device_id;                    // chip index on its backend
  int32_t numa_node;                    // -1: auto (the device's node, or none)
  uint32_t run_queue_depth;             // runs accepted but not finished, per chip
  uint32_t register_queue_depth;        // registers/unregisters queued, per chip
  // How long a submit blocks when a lane is full before RESOURCE_EXHAUSTED
  // (0: fail at once; -1: block until space).
  int64_t submit_timeout_ns;
  // CPUs for the lane threads (-1: let the OS place them). Giving the run lane and the
  // register lane different cores guarantees a register really runs beside a CPU-bound run
  // (the sim backend runs kernels on the run lane's thread).
  int32_t run_lane_cpu;
  int32_t register_lane_cpu;
} lw_chip_config_t;

typedef struct lw_run_config {
  // Per-run timeout relative to the start of the run (0: none). On expiry the run is
  // cancelled and finishes DEADLINE_EXCEEDED.
  int64_t timeout_ns;
  uint32_t flags;  // reserved, 0
  uint32_t reserved_;
} lw_run_config_t;

// backend "sim", device 0, NUMA auto, run queue 256, register queue 64, submit blocks 10 s,
// lanes unpinned.
LW_API void lw_chip_config_default(lw_chip_config_t *c);
// no timeout.
LW_API void lw_run_config_default(lw_run_config_t *c);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CONFIG_H_
