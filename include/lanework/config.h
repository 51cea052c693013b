// lanework/config.h — configuration structs. Always start from the *_default function, then
// change fields: new fields get safe defaults that way.
//
// Growing structs: every config struct (these two and lw_worker_config_t) starts with
// uint32_t struct_size, which its *_default function sets to the sizeof the program was
// compiled with; the functions taking the struct read exactly that many bytes. New fields are
// only ever appended, and 0 is the default of every appended field, so
//   - a program built against older headers (a smaller struct_size) keeps working with a newer
//     library: the fields it does not have take their defaults;
//   - a program built against newer headers works with an older library as long as it leaves
//     the fields that library does not know at 0; a non-zero one gives INVALID_ARGUMENT naming
//     the struct (the program asked for something this library cannot do);
//   - struct_size 0 (a struct not set up by its *_default function), one smaller than the
//     struct's first version or a garbage value gives INVALID_ARGUMENT naming the struct.
// The *_default functions are inline wrappers of *_default_sized(c, sizeof(*c)), so even the
// library's default-filling never writes past the caller's struct. docs/packaging.md has the
// whole ABI policy.
#ifndef LANEWORK_CONFIG_H_
#define LANEWORK_CONFIG_H_

#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_BACKEND_NAME_BYTES 16

typedef struct lw_chip_config {
  uint32_t struct_size;                 // sizeof(lw_chip_config_t); set by the _default function
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
  uint32_t struct_size;  // sizeof(lw_run_config_t); set by lw_run_config_default
  uint32_t flags;        // reserved, 0
  // Per-run timeout relative to the start of the run (0: none). On expiry the run is
  // cancelled and finishes DEADLINE_EXCEEDED.
  int64_t timeout_ns;
} lw_run_config_t;

// Fill the first struct_size bytes of *c with the defaults (zeros past this library's own
// struct) and set c->struct_size = struct_size. Call them through the inline functions below.
LW_API void lw_chip_config_default_sized(lw_chip_config_t *c, uint32_t struct_size);
LW_API void lw_run_config_default_sized(lw_run_config_t *c, uint32_t struct_size);

// backend "sim", device 0, NUMA auto, run queue 256, register queue 64, submit blocks 10 s,
// lanes unpinned.
static inline void lw_chip_config_default(lw_chip_config_t *c) {
  lw_chip_config_default_sized(c, (uint32_t)sizeof(*c));
}
// no timeout.
static inline void lw_run_config_default(lw_run_config_t *c) {
  lw_run_config_default_sized(c, (uint32_t)sizeof(*c));
}

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CONFIG_H_
