// parent/task_reports.c — the per-task reports of a run (lw_handle_run_tasks): the DAG's owner
// writes them as it builds, posts and finishes each task; the query reads them once the run's
// handle finished, which orders every write before the read. Contract in parent/task_reports.h.
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/sys.h"
#include "parent/task_reports.h"

// The per-task cost worker.h promises (lw_handle_run_tasks).
_Static_assert(sizeof(lw_task_report_t) == 112, "lw_task_report_t is 112 bytes per task");

// ---------------------------------------------------------------------------------------------
// Recording (the DAG's owner)

static lw_task_report_t *task_report(lw_run_t *run, uint64_t task_id) {
  if (task_id == 0 || task_id > run->task_reports_cap) return NULL;  // lost: out of memory
  return &run->task_reports[task_id - 1];
}

void lw__task_report_begin(lw_run_t *run, uint64_t task_id, lw_mb_task_kind_t kind,
                           const char *callable, int64_t submit_ns) {
  if (task_id > run->task_reports_cap && !run->task_reports_lost) {
    uint64_t cap = run->task_reports_cap ? (uint64_t)run->task_reports_cap * 2 : 16;
    if (cap > UINT32_MAX) cap = UINT32_MAX;  // run->n_tasks is 32 bits too
    lw_task_report_t *p = realloc(run->task_reports, (size_t)cap * sizeof(*p));
    if (p && cap >= task_id) {
      run->task_reports = p;
      run->task_reports_cap = (uint32_t)cap;
    } else {
      if (p) run->task_reports = p;
      // The task still runs: a report is no reason to fail it. The query says they are lost.
      run->task_reports_lost = true;
    }
  }
  lw_task_report_t *r = task_report(run, task_id);
  if (!r) return;
  memset(r, 0, sizeof(*r));
  r->task_id = task_id;
  r->worker_id = -1;
  r->kind = kind == LW_MB_TASK_SUB ? LW_TASK_SUB : LW_TASK_CHIP;
  r->status = LW_OK;
  r->submit_ns = submit_ns > 0 ? (uint64_t)submit_ns : 0;
  if (callable) {
    size_t n = strnlen(callable, sizeof(r->callable) - 1);
    memcpy(r->callable, callable, n);
    r->callable[n] = '\0';
  }
}

// host_ns holds the absolute time of the post until the task ends (lw__task_report_end turns
// it into the round trip): one field instead of a second timestamp per task.
void lw__task_report_posted(lw_run_t *run, uint64_t task_id, int32_t worker_id,
                            int64_t now_ns) {
  lw_task_report_t *r = task_report(run, task_id);
  if (!r) return;
  uint64_t now = now_ns > 0 ? (uint64_t)now_ns : 0;
  r->worker_id = worker_id;
  r->wait_ns = now > r->submit_ns ? now - r->submit_ns : 0;
  r->host_ns = now;
}

int64_t lw__task_report_posted_ns(const lw_run_t *run, uint64_t task_id) {
  if (task_id == 0 || task_id > run->task_reports_cap) return 0;
  const lw_task_report_t *r = &run->task_reports[task_id - 1];
  // host_ns holds the post's time from lw__task_report_posted until lw__task_report_end.
  return r->worker_id >= 0 && r->host_ns <= INT64_MAX ? (int64_t)r->host_ns : 0;
}

void lw__task_report_child_times(lw_run_t *run, uint64_t task_id, uint64_t queue_ns,
                                 uint64_t kernel_ns) {
  lw_task_report_t *r = task_report(run, task_id);
  if (!r) return;
  r->queue_ns = queue_ns;
  r->kernel_ns = kernel_ns;
}

void lw__task_report_end(lw_run_t *run, uint64_t task_id, lw_status_t status, int64_t now_ns) {
  lw_task_report_t *r = task_report(run, task_id);
  if (!r) return;
  uint64_t now = now_ns > 0 ? (uint64_t)now_ns : 0;
  r->status = status;
  if (r->worker_id >= 0) {
    r->host_ns = now > r->host_ns ? now - r->host_ns : 0;
  } else {
    // Never dispatched: its wait lasted until it was given up.
    r->wait_ns = now > r->submit_ns ? now - r->submit_ns : 0;
    r->host_ns = 0;
  }
}

void lw__task_reports_free(lw_run_t *run) {
  free(run->task_reports);
  run->task_reports = NULL;
  run->task_reports_cap = 0;
}

// ---------------------------------------------------------------------------------------------
// The query (any thread, after the run's handle finished)

lw_status_t lw_handle_run_tasks(const lw_handle_t *h, lw_task_report_t *out, size_t cap,
                                size_t *n_out) {
  if (n_out) *n_out = 0;
  if (!h || !n_out || (!out && cap > 0)) {
    return lw__fail(LW_INVALID_ARGUMENT,
                    "handle_run_tasks: handle and n_out must be set, and out when cap (%zu) > 0",
                    cap);
  }
  if (h->kind != LW_HANDLE_WORKER_RUN) {
    return lw__fail(LW_INVALID_ARGUMENT, "handle_run_tasks: not a worker run handle (kind %d)",
                    (int)h->kind);
  }
  const lw_run_t *run = (const lw_run_t *)h;
  if (!lw_handle_done(h)) {
    return lw__fail(LW_FAILED_PRECONDITION, "handle_run_tasks: run %llu has not finished",
                    (unsigned long long)run->run_id);
  }
  *n_out = run->n_tasks;
  if (run->task_reports_lost) {
    return lw__fail(LW_RESOURCE_EXHAUSTED,
                    "handle_run_tasks: run %llu ran out of memory recording its task reports "
                    "(%u of %u kept); none are returned",
                    (unsigned long long)run->run_id,
                    run->task_reports_cap < run->n_tasks ? run->task_reports_cap : run->n_tasks,
                    run->n_tasks);
  }
  size_t n = cap < run->n_tasks ? cap : run->n_tasks;
  if (n) memcpy(out, run->task_reports, n * sizeof(*out));
  return LW_OK;
}
