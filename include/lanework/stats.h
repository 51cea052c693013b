// lanework/stats.h — counters of what a worker or a chip did: tasks run, failed and cancelled
// per child, registers, respawns, escalations, liveness kills, queue depths, arena bytes.
//
// A snapshot: the counters are read without stopping anything (each is written with one
// relaxed atomic where its event happens), so the fields of one snapshot may come from
// slightly different moments while work is going on. Once the worker or chip is idle (every
// handle finished), a snapshot is exact. Counters only grow, from 0 at create / open; the
// fields said to be "now" (queue depths, tasks alive, callables, bytes in use) go up and down.
//
// Growing structs: the caller sets struct_size to sizeof(the struct it was compiled with)
// before the call. The library fills only that many bytes (a prefix of its own struct) and
// leaves the rest of the caller's memory alone, so a program built against an older, shorter
// struct keeps working when fields are appended. struct_size 0, or too small to hold the
// fields up to and including the first counter, gives INVALID_ARGUMENT. New fields are only
// ever appended.
//
// Each task counts exactly once. At L3 a task that reached a child (posted into its mailbox)
// counts on that child as run (finished OK), failed or cancelled, with its final status: a task
// whose kernel returned OK after its run stopped and the parent cancelled it counts cancelled,
// as its run report does; a task failed by its child's death counts failed on that child (a
// respawn replays callables, never tasks). A task that ended POISONED never started (a failed
// dependency, group member or run) and counts in the worker's tasks_poisoned, even when it had
// been posted to a child (wait elision posts a task behind its producers on their chip); a
// task that ended otherwise without reaching a child counts in tasks_skipped (its run was
// cancelled, its chip was down, its post was refused). So, when the worker is idle:
//   tasks_submitted == sum over children of (tasks_run + tasks_failed + tasks_cancelled)
//                      + tasks_poisoned + tasks_skipped.
//
// Cost: reading takes no lock of the worker; lw_chip_stats takes the chip registry's lock for a
// walk of its slots (to count the callables), as a register does.
//
// Thread safety: any thread, at any time between create/open and destroy/close.
#ifndef LANEWORK_STATS_H_
#define LANEWORK_STATS_H_

#include <stdint.h>

#include "lanework/chip.h"
#include "lanework/status.h"
#include "lanework/worker.h"

#ifdef __cplusplus
extern "C" {
#endif

// The structs' tags: C keeps the names it always had; in C++ a struct named like the function
// that fills it (lw_chip_stats, lw_worker_stats) would be hidden by it, which g++ reports under
// -Wshadow ("hides constructor"), so C++ sees the typedef names only. The layout is the same.
#ifdef __cplusplus
#define LW__STATS_TAG(name) name##_s
#else
#define LW__STATS_TAG(name) name
#endif

// One chip or sub child (lw_worker_stats_t.child[]), or an L2 chip (lw_chip_stats).
typedef struct LW__STATS_TAG(lw_chip_stats) {
  uint32_t struct_size;       // set by the caller: sizeof(lw_chip_stats_t)
  uint32_t reserved0;
  uint64_t tasks_run;         // finished OK
  uint64_t tasks_failed;      // finished with an error (a kernel error, a timeout, a death)
  uint64_t tasks_cancelled;   // finished CANCELLED
  // Callables registered on this child: at L3 a register (chip callables on chip children, sub
  // functions on sub children) the caller saw succeed; replays into a respawned child are not
  // counted again (see respawns). unregisters: unregisters done; register_failures: registers
  // that failed naming this child (at L2: registers of this chip that failed).
  uint64_t registers;
  uint64_t unregisters;
  uint64_t register_failures;
  // L3 only (0 at L2).
  uint64_t respawns;          // new children started after a death, callables replayed
  uint64_t escalations;       // children killed because a kernel ignored its cancel or timeout
  uint64_t liveness_kills;    // children killed for a heartbeat that stood still
  uint64_t deaths;            // child deaths seen (a kill above is also a death)
  // Tasks posted to this child (L3) or accepted by the chip's run lane (L2) and not finished,
  // now; the most there ever were at once.
  uint32_t queue_depth;
  uint32_t queue_depth_max;
  uint32_t callables;         // registered now
  uint32_t reserved1;
} lw_chip_stats_t;

typedef struct LW__STATS_TAG(lw_worker_stats) {
  uint32_t struct_size;       // set by the caller: sizeof(lw_worker_stats_t)
  uint32_t n_chips, n_subs;   // child[] holds n_chips + n_subs entries
  uint32_t reserved0;
  uint64_t runs_started;      // orch functions started
  uint64_t runs_ok, runs_failed, runs_cancelled;  // run handles finished, by status
  uint64_t tasks_submitted;   // tasks the DAG accepted
  uint64_t tasks_poisoned;    // ended POISONED: never started (see above)
  uint64_t tasks_skipped;     // ended otherwise without reaching a child
  uint64_t arena_bytes;       // the arena's size
  uint64_t arena_bytes_in_use;  // allocated now (lw_worker_alloc rounds up to 64 bytes)
  uint64_t arena_bytes_peak;  // the most ever in use at once
  uint32_t dag_tasks_alive;   // tasks in the DAG's ring now (not yet finished)
  uint32_t dag_ring;          // the ring's size (lw_worker_config_t.task_ring)
  // Chips first (child[i] is chip i), then subs (child[n_chips + j] is sub j); the entries past
  // n_chips + n_subs are zero. Their struct_size is sizeof(lw_chip_stats_t).
  lw_chip_stats_t child[LW_MAX_CHIPS + LW_MAX_SUBS];
} lw_worker_stats_t;

// Fills *out (out->struct_size set by the caller; see above). INVALID_ARGUMENT for a NULL
// worker or out, or a bad struct_size.
LW_API LW_MUST_USE lw_status_t lw_worker_stats(lw_worker_t *w, lw_worker_stats_t *out);
// The L2 chip's counters: tasks run / failed / cancelled on its run lane, registers,
// unregisters, register failures, callables, the run lane's queue depth; the L3-only fields
// are 0. INVALID_ARGUMENT for a NULL chip or out, or a bad struct_size.
LW_API LW_MUST_USE lw_status_t lw_chip_stats(lw_chip_t *chip, lw_chip_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_STATS_H_
