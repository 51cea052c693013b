// lanework/orch.h — what an orch function may call. Every function here is only valid inside
// the orch function its lw_orch_t was handed to, on the thread running it: the worker's
// orchestrator thread, or the caller of lw_worker_run when that run executes inline (see
// worker.h).
//
// Dependencies come from tensor tags (see args.h), per buffer (same data pointer), and every
// hazard is ordered: a read (INPUT) waits for the last writer (read-after-write); a write
// (OUTPUT, INOUT, OUTPUT_EXISTING) waits for the last writer (write-after-write) and for every
// read of the buffer since that write (write-after-read), then becomes the last writer. So a
// task never overwrites a buffer that an earlier task, on any chip, still reads. NO_DEP does
// neither. Members of one group launch together, so no dependency is made between them.
//
// An orch function that returns an error fails its run like a task failure, with that error
// (unless a task of the run failed before: the first error wins). Tasks of the run that
// finished before it returned keep their outcome; every other task of the run is stopped at
// once: one not yet dispatched is skipped (POISONED) and never runs, one in flight is
// cancelled (its kernel sees the cancel word) and counts as failed whatever its kernel
// returns.
//
// A run that has failed (a task failed, possibly while the orch function is still submitting)
// accepts no more tasks: a later submit returns POISONED ("run N already failed") and the
// orch function may stop there; a refused task is not part of the run. A task submitted just
// as the run fails may still be accepted: it is then skipped (POISONED) without running and
// counts as failed.
//
// Back-pressure: when the task ring is full a submit blocks until tasks retire, and fails
// RESOURCE_EXHAUSTED after the worker's submit timeout. Nothing is dropped silently. What a
// submit can refuse (a bad callable, bad args, a wrong chip) it refuses before it waits.
#ifndef LANEWORK_ORCH_H_
#define LANEWORK_ORCH_H_

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/config.h"
#include "lanework/status.h"
#include "lanework/worker.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_ANY_CHIP (-1)

// One task of a chip callable on chip worker_id (0..n_chips-1, or LW_ANY_CHIP). cfg may be
// NULL. A chip holds up to 128 posted tasks (one running, the rest queued behind it): a task
// whose producers are all on its chip is posted behind them before they finish. A task with
// LW_ANY_CHIP goes to the least busy chip, and only to one holding fewer than 16, so it is not
// bound to a chip long before it can run there.
LW_API LW_MUST_USE lw_status_t lw_orch_submit_next_level(lw_orch_t *o, lw_callable_handle_t c,
                                                         const lw_args_t *args,
                                                         const lw_run_config_t *cfg,
                                                         int32_t worker_id);
// n tasks of one callable that launch all-or-nothing: none is dispatched until every one
// can be (all dependencies met and a frame free on each chip).
LW_API LW_MUST_USE lw_status_t lw_orch_submit_next_level_group(lw_orch_t *o,
                                                               lw_callable_handle_t c,
                                                               const lw_args_t *const *args,
                                                               const int32_t *worker_ids, int n);
// One task of a sub callable, on any idle sub child.
LW_API LW_MUST_USE lw_status_t lw_orch_submit_sub(lw_orch_t *o, lw_callable_handle_t c,
                                                  const lw_args_t *args);
// The id of the task the last successful submit on o created (lw_orch_submit_next_level or
// lw_orch_submit_sub), or of the first member of the last group: the members of a group get
// consecutive ids in the order of args, so member i is lw_orch_last_task(o) + i. 0 before
// any submit succeeded; a refused submit leaves it unchanged. Ids are the run's task ids, the
// ones lw_error_t.task_id and the run's task reports (lw_handle_run_tasks) use; they count
// from 1 in each run.
LW_API uint64_t lw_orch_last_task(const lw_orch_t *o);
// Scopes: buffers first written inside a scope are forgotten by the tensor map at its end
// (their last writer and its readers), so a later reuse of the same memory starts without
// stale dependencies. A buffer only read inside the scope is remembered. Nest up to 16 deep.
LW_API LW_MUST_USE lw_status_t lw_orch_scope_begin(lw_orch_t *o);
LW_API LW_MUST_USE lw_status_t lw_orch_scope_end(lw_orch_t *o);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_ORCH_H_
