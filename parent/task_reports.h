// parent/task_reports.h — per-task reports of a run (parent/task_reports.c), the records behind
// lw_handle_run_tasks.
// Owns: the run's report array (lw_run_t.task_reports, task id i at [i - 1], and
// task_reports_cap / task_reports_lost; the fields live in the run, parent/runs.h).
// Lifecycle: a report is begun when the DAG's owner builds the task (lw__dag_step: its id is
// the run's newest), marked posted when the scheduler posts it to a child, given the child's
// queue and kernel times when the scheduler consumes its result, and ended with its final
// status when the DAG finishes it (before it retires, so before the run can settle); the
// array is freed with the run (its handle's destroy). The last three calls only touch ids
// begun before, in that order; a task never posted skips the middle two.
// Threads and locks: every writer is the DAG's owner inside its pass (the pass holds the DAG
// owner's token, nothing taken here); lw_handle_run_tasks reads only after the run's handle
// finished (acquire), which the run settling after every task ended orders after the last write.
// Cost: sizeof(lw_task_report_t) = 112 bytes per task, in one array grown by doubling (a
// realloc now and then on the owner's thread), and three clock reads per task (submit, post,
// end). Calls nothing in parent/ (a leaf: the DAG, the scheduler and the runs call it).
#ifndef LANEWORK_PARENT_TASK_REPORTS_H_
#define LANEWORK_PARENT_TASK_REPORTS_H_

#include <stdint.h>

#include "lanework/status.h"
#include "lanework/worker.h"
#include "mailbox/mailbox.h"
#include "parent/runs.h"

// Begins task_id's report (task_id == run->n_tasks, just numbered): kind, callable name
// (copied, truncated), submit time. Out of memory growing the array: the report is dropped
// and the run's reports are marked lost (the task itself is unaffected).
void lw__task_report_begin(lw_run_t *run, uint64_t task_id, lw_mb_task_kind_t kind,
                           const char *callable, int64_t submit_ns);
// The task was posted to child worker_id (chip or sub index) at now_ns (lw__now_ns, or the
// DAG owner's lw__dag_now): its wait ends then.
void lw__task_report_posted(lw_run_t *run, uint64_t task_id, int32_t worker_id,
                            int64_t now_ns);
// When task_id was posted (lw__now_ns), asked before it ends (the DAG's owner, as the calls
// around it): 0 when that is not known (never posted, or its report lost to memory).
int64_t lw__task_report_posted_ns(const lw_run_t *run, uint64_t task_id);
// The times the child measured, from the task's result.
void lw__task_report_child_times(lw_run_t *run, uint64_t task_id, uint64_t queue_ns,
                                 uint64_t kernel_ns);
// The task reached its final status at now_ns (lw__now_ns, or the DAG owner's lw__dag_now).
void lw__task_report_end(lw_run_t *run, uint64_t task_id, lw_status_t status, int64_t now_ns);
// Frees the run's reports (the run's destroy; tests that own their runs).
void lw__task_reports_free(lw_run_t *run);

#endif  // LANEWORK_PARENT_TASK_REPORTS_H_
