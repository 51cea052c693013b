// child/chip_stats.c — lw_chip_stats: one snapshot of an L2 chip's counters (contract in
// include/lanework/stats.h; the counters are kept in child/chip.c, lw_chip_counters_t).
#include <stddef.h>
#include <string.h>

#include "callables/registry.h"
#include "child/chip_impl.h"
#include "lanes/error.h"
#include "lanework/stats.h"

// Relaxed: each value is a counter read on its own, for a snapshot; none publishes other data.
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

lw_status_t lw_chip_stats(lw_chip_t *chip, lw_chip_stats_t *out) {
  if (!chip || !out) return lw__fail(LW_INVALID_ARGUMENT, "chip_stats: chip and out must be set");
  LW_RETURN_IF_ERROR(lw__sized_struct_check(
      "chip_stats", out->struct_size,
      offsetof(lw_chip_stats_t, tasks_run) + sizeof(out->tasks_run), sizeof(lw_chip_stats_t)));
  lw_chip_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = (uint32_t)sizeof(s);
  s.tasks_run = LOAD(chip->counters.runs_ok);
  s.tasks_failed = LOAD(chip->counters.runs_failed);
  s.tasks_cancelled = LOAD(chip->counters.runs_cancelled);
  s.registers = LOAD(chip->counters.registers);
  s.unregisters = LOAD(chip->counters.unregisters);
  s.register_failures = LOAD(chip->counters.register_failures);
  s.queue_depth = lw__chip_queue_depth(chip);
  s.queue_depth_max = LOAD(chip->counters.depth_max);
  // The registry's own leaf lock, held for a walk of its slots; no run path waits on it long.
  lw_registry_stats_t rs;
  lw__registry_stats(chip->registry, &rs);
  s.callables = rs.handles_live;
  lw__sized_struct_copy(out, &s, sizeof(s));
  return LW_OK;
}
