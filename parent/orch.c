// parent/orch.c — lw_orch_* (include/lanework/orch.h), the submitting side of the DAG: what
// can be checked at once is checked here, on the thread running the orch function (argument
// shapes and arena bounds, the chip id, the callable, the run already failed), so a bad submit
// fails with its reason; then the task is handed to the DAG's owner as a command
// (parent/dag.h), with a reserved ring slot and a pinned callable. Nothing here changes DAG
// state.
#include <stdlib.h>
#include <string.h>

#include "callables/signature.h"
#include "child/config.h"
#include "lanes/args.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "mailbox/mailbox.h"
#include "parent/callables.h"
#include "parent/dag.h"
#include "parent/runs.h"

// Checks one task and fills its description whole, all but the callable (lw__dag_cmd_new leaves
// it unset). No lock is taken.
static lw_status_t describe(lw_orch_t *o, lw_mb_task_kind_t kind, int32_t worker,
                            const lw_args_t *args, int64_t timeout_ns, lw_dag_task_desc_t *out,
                            lw_error_t *err) {
  lw_runs_t *runs = o->runs;
  lw_args_t empty;
  if (!args) {
    lw_args_init(&empty);
    args = &empty;
  }
  LW_RETURN_IF_ERROR(lw__args_check(args, err));  // counts, tags, launch geometry
  if (kind == LW_MB_TASK_KERNEL &&
      (worker < LW_ANY_CHIP || worker >= (int32_t)runs->links.n_chips)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "orch: worker_id %d is not a chip (0..%u or LW_ANY_CHIP)", worker,
                         runs->links.n_chips - 1);
  }
  if (kind == LW_MB_TASK_SUB && runs->links.n_subs == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "orch: submit_sub on a worker with no sub children");
  }
  LW_RETURN_IF_ERROR(lw__mailbox_args_encode(args, runs->links.mb_arena, &out->args, err));
  out->kind = kind;
  out->worker = worker;
  out->timeout_ns = timeout_ns;
  out->submit_ns = lw__now_ns();
  out->n_keys = args->n_tensors;
  for (uint32_t i = 0; i < args->n_tensors; ++i) {
    out->key[i] = (uintptr_t)args->tensor[i].data;
    out->tag[i] = args->tensor[i].tag;
  }
  return LW_OK;
}

static lw_status_t check_orch(const lw_orch_t *o, lw_error_t *err) {
  if (!o || !o->run) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "orch: not inside an orch function");
  }
  return LW_OK;
}

// A run that failed takes no more tasks. The owner may fail the run right after this check:
// the task is then accepted and skipped (POISONED) without running.
static lw_status_t check_run_live(const lw_orch_t *o, lw_error_t *err) {
  if (lw__dag_run_failed(o->run)) {
    return lw__error_set(err, LW_POISONED, -1, 0,
                         "orch: run %llu already failed, no more tasks are accepted: %s",
                         (unsigned long long)o->run->run_id, o->run->error.message);
  }
  return LW_OK;
}

static void unpin_all(lw_callables_t *calls, uint32_t wc, uint32_t n) {
  pthread_mutex_lock(&calls->mu);
  lw__wc_unpin_n(calls, wc, n);
  pthread_mutex_unlock(&calls->mu);
}

typedef struct slots_wait {
  lw_dag_t *dag;
  uint32_t n;
} slots_wait_t;

// Takes the slots when they are free (the condition of a drain_until).
static bool slots_free(void *ctx) {
  slots_wait_t *s = ctx;
  return lw__dag_try_reserve(s->dag, s->n);
}

// Pins the callable once per task, checks the counts against its signature, reserves the ring
// slots and posts cmd; on failure nothing is left behind (cmd is freed). Everything that can
// be refused is checked before the reserve, which may block on a full ring: a bad submit is
// refused with its own reason at once, never after the submit timeout as "ring full". The
// pins held while the reserve waits only keep an unregister of the callable deferred, as
// the task itself will once accepted.
static lw_status_t hand_over(lw_orch_t *o, lw_dag_cmd_t *cmd, lw_callable_handle_t c,
                             bool want_sub, lw_error_t *err) {
  lw_runs_t *runs = o->runs;
  uint32_t wc = 0;
  uint64_t wc_id = 0;
  lw_status_t st = check_run_live(o, err);
  if (st == LW_OK)
    st = lw__wc_pin_for_tasks(runs->links.calls, c, want_sub, cmd->n_tasks, &wc, &wc_id, err);
  if (st != LW_OK) {
    free(cmd);
    return st;
  }
  // The counts against the callable's signature, for every member before any is posted, so a
  // group is refused whole. The pins keep the slot (and its signature, fixed once live) here.
  const lw_wcallable_t *callable = &runs->links.calls->table[wc];
  for (uint32_t i = 0; i < cmd->n_tasks && st == LW_OK; ++i) {
    st = lw__signature_check_counts(callable->name, callable->n_params, callable->param_dirs,
                                    cmd->task[i].args.n_tensors, cmd->task[i].args.n_scalars,
                                    err);
    if (st != LW_OK && cmd->n_tasks > 1) {
      lw_error_t inner = *err;
      lw__error_set(err, st, -1, 0, "orch: group member %u refused, so is the whole group: %s",
                    i, inner.message);
    }
  }
  slots_wait_t want = {runs->links.dag, cmd->n_tasks};
  // The submit's time serves as the clock of the pass after the post (lw__dag_post) unless the
  // submit waited for slots: then it is old (and the wait belongs in the task's wait_ns).
  int64_t post_ns = cmd->task[cmd->n_tasks - 1].submit_ns;
  if (st == LW_OK && !lw__dag_try_reserve(runs->links.dag, cmd->n_tasks)) {
    post_ns = 0;
    if (!(runs->links.drain_until && runs->links.drain_until(runs->links.ctx, slots_free, &want))) {
      // The ring is full: slots come back as tasks retire, which needs their completions
      // drained. This thread drained them itself while it spun (drain_until); now it sleeps, so
      // it hands the rings back to the scheduler meanwhile (its drainer role).
      bool held = lw__run_orch_drainer_drop(runs);
      st = lw__dag_reserve(runs->links.dag, cmd->n_tasks, err);
      if (held) lw__run_orch_drainer_take(runs);
    }
  }
  if (st != LW_OK) {
    unpin_all(runs->links.calls, wc, cmd->n_tasks);
    free(cmd);
    return st;
  }
  for (uint32_t i = 0; i < cmd->n_tasks; ++i) {
    cmd->task[i].wc = wc;
    cmd->task[i].wc_id = wc_id;
  }
  // The owner numbers the run's tasks in posting order (a group's members one after another),
  // so the ids are known before it builds them. Read before the post: cmd is the DAG's then.
  o->last_task = o->n_posted + 1;
  o->n_posted += cmd->n_tasks;
  // The submit spans (one per task, from the call's start to the post) carry the ids the trace
  // links to the task's dispatch and run. Copied first: after the post the DAG owns cmd.
  char name[LW_TRACE_NAME_BYTES] = "";
  uint32_t n = cmd->n_tasks;
  int64_t t0 = cmd->task[0].submit_ns;
  bool traced = lw__trace_on();
  // Cut to the trace's name size (the precision says so, for gcc's truncation check too).
  if (traced) snprintf(name, sizeof(name), "%.*s", (int)sizeof(name) - 1, callable->name);
  lw__dag_post(runs->links.dag, cmd, post_ns);
  if (traced) {
    int64_t t1 = lw__now_ns();
    for (uint32_t i = 0; i < n; ++i) {
      lw__trace_span(LW_TRACE_SUBMIT, t0, t1, o->run->run_id, o->last_task + i, -1, LW_OK, name);
    }
  }
  return LW_OK;
}

static lw_status_t submit_one(lw_orch_t *o, lw_mb_task_kind_t kind, int32_t worker,
                              lw_callable_handle_t c, const lw_args_t *args, int64_t timeout_ns,
                              lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_orch(o, err));
  lw_dag_cmd_t *cmd = lw__dag_cmd_new(LW_DAG_CMD_SUBMIT, o->run, 1);
  if (!cmd) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "orch: out of memory");
  lw_status_t st = describe(o, kind, worker, args, timeout_ns, &cmd->task[0], err);
  if (st != LW_OK) {
    free(cmd);
    return st;
  }
  return hand_over(o, cmd, c, kind == LW_MB_TASK_SUB, err);
}

lw_status_t lw_orch_submit_next_level(lw_orch_t *o, lw_callable_handle_t c, const lw_args_t *args,
                                      const lw_run_config_t *cfg, int32_t worker_id) {
  lw_run_config_t run_cfg;
  lw_error_t err;
  if (lw__run_config_read(cfg, &run_cfg, &err) != LW_OK) return lw__last_error_store(&err);
  if (run_cfg.timeout_ns < 0) {
    return lw__fail(LW_INVALID_ARGUMENT, "orch: timeout_ns %lld is negative",
                    (long long)run_cfg.timeout_ns);
  }
  lw_status_t st = submit_one(o, LW_MB_TASK_KERNEL, worker_id, c, args, run_cfg.timeout_ns,
                              &err);
  if (st != LW_OK) lw__last_error_store(&err);
  return st;
}

lw_status_t lw_orch_submit_sub(lw_orch_t *o, lw_callable_handle_t c, const lw_args_t *args) {
  lw_error_t err;
  lw_status_t st = submit_one(o, LW_MB_TASK_SUB, -1, c, args, 0, &err);
  if (st != LW_OK) lw__last_error_store(&err);
  return st;
}

lw_status_t lw_orch_submit_next_level_group(lw_orch_t *o, lw_callable_handle_t c,
                                            const lw_args_t *const *args,
                                            const int32_t *worker_ids, int n) {
  lw_error_t err;
  if (check_orch(o, &err) != LW_OK) return lw__last_error_store(&err);
  lw_runs_t *runs = o->runs;
  if (n <= 0 || !args || !worker_ids) {
    return lw__fail(LW_INVALID_ARGUMENT, "orch: a group needs n > 0, args and worker_ids");
  }
  if ((uint32_t)n > runs->links.n_chips * LW_MB_TASK_FRAMES ||
      (uint32_t)n > runs->links.task_ring) {
    return lw__fail(LW_INVALID_ARGUMENT,
                    "orch: a group of %d tasks can never launch at once (at most %u: %u chips x "
                    "%u frames, and a task ring of %u)",
                    n, runs->links.n_chips * LW_MB_TASK_FRAMES, runs->links.n_chips,
                    LW_MB_TASK_FRAMES, runs->links.task_ring);
  }
  lw_dag_cmd_t *cmd = lw__dag_cmd_new(LW_DAG_CMD_GROUP, o->run, (uint32_t)n);
  if (!cmd) return lw__fail(LW_RESOURCE_EXHAUSTED, "orch: out of memory");
  uint32_t per_chip[LW_MAX_CHIPS] = {0};
  for (int i = 0; i < n; ++i) {
    if (worker_ids[i] < 0) {
      free(cmd);
      return lw__fail(LW_INVALID_ARGUMENT, "orch: group member %d needs a chip id, not %d", i,
                      worker_ids[i]);
    }
    // A chip runs at most LW_MB_TASK_FRAMES posted tasks: more members on one chip could never
    // launch together, and the group would block every later group forever.
    if (worker_ids[i] < (int32_t)runs->links.n_chips &&
        ++per_chip[worker_ids[i]] > LW_MB_TASK_FRAMES) {
      free(cmd);
      return lw__fail(LW_INVALID_ARGUMENT,
                      "orch: a group puts more than %u members on chip %d, which can never "
                      "launch them at once (a chip holds %u posted tasks)",
                      LW_MB_TASK_FRAMES, worker_ids[i], LW_MB_TASK_FRAMES);
    }
    if (describe(o, LW_MB_TASK_KERNEL, worker_ids[i], args[i], 0, &cmd->task[i], &err) != LW_OK) {
      free(cmd);
      return lw__last_error_store(&err);
    }
  }
  // Every slot at once, so the owner builds the whole group without waiting between members.
  if (hand_over(o, cmd, c, false, &err) != LW_OK) return lw__last_error_store(&err);
  return LW_OK;
}

uint64_t lw_orch_last_task(const lw_orch_t *o) { return o ? o->last_task : 0; }

static lw_status_t post_scope(lw_orch_t *o, lw_dag_cmd_kind_t kind, lw_error_t *err) {
  lw_dag_cmd_t *cmd = lw__dag_cmd_new(kind, o->run, 0);
  if (!cmd) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "orch: out of memory");
  lw__dag_post(o->runs->links.dag, cmd, 0);
  return LW_OK;
}

lw_status_t lw_orch_scope_begin(lw_orch_t *o) {
  if (!o || !o->run) return lw__fail(LW_INVALID_ARGUMENT, "orch: not inside an orch function");
  // The submitting side keeps the depth, so the owner's tensor map never refuses a scope.
  if (o->scope_depth >= LW_MAX_SCOPES) {
    return lw__fail(LW_INVALID_ARGUMENT, "orch: scopes nest at most %d deep", LW_MAX_SCOPES);
  }
  lw_error_t err;
  if (post_scope(o, LW_DAG_CMD_SCOPE_BEGIN, &err) != LW_OK) return lw__last_error_store(&err);
  o->scope_depth++;
  return LW_OK;
}

lw_status_t lw_orch_scope_end(lw_orch_t *o) {
  if (!o || !o->run) return lw__fail(LW_INVALID_ARGUMENT, "orch: not inside an orch function");
  if (o->scope_depth == 0) return lw__fail(LW_INVALID_ARGUMENT, "orch: scope_end without scope_begin");
  lw_error_t err;
  if (post_scope(o, LW_DAG_CMD_SCOPE_END, &err) != LW_OK) return lw__last_error_store(&err);
  o->scope_depth--;
  return LW_OK;
}
