// child/chip_impl.h — internals of lw_chip_t shared with the chip-child loop.
#ifndef LANEWORK_CHILD_CHIP_IMPL_H_
#define LANEWORK_CHILD_CHIP_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "callables/registry.h"
#include "child/backend.h"
#include "lanes/cancel.h"
#include "lanes/lane.h"
#include "lanes/wait.h"
#include "lanework/chip.h"

#ifdef __cplusplus
extern "C" {
#endif

// Cancels the running kernel when its run's timeout passes. One thread per chip, asleep on a
// futex unless a run with a timeout is in flight.
typedef struct lw_chip_watchdog {
  pthread_t thread;
  bool started;
  _Atomic uint64_t armed_generation;  // the run being watched; 0: none
  _Atomic int64_t deadline_ns;        // absolute, for armed_generation
  _Atomic uint64_t fired_generation;  // the last run the watchdog cancelled
  _Atomic bool stop;
  lw_waitword_t word;
} lw_chip_watchdog_t;

struct lw_chip {
  lw_chip_config_t cfg;
  const lw_backend_ops_t *backend;
  void *device;
  lw_registry_t *registry;
  lw_lane_t *run_lane;
  lw_lane_t *register_lane;
  // The run lane's cancel word: a fresh even generation per run (lanes/cancel.h). A child
  // points this at the task frame's word in the mailbox instead (cancel_word_ptr).
  lw_cancel_word_t cancel_word;
  lw_cancel_word_t *cancel_word_ptr;
  lw_chip_watchdog_t watchdog;
  _Atomic bool closing;
  _Atomic uint64_t next_run_id;
};

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_CHIP_IMPL_H_
