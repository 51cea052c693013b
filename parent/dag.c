// parent/dag.c — the DAG of the worker's runs: the task ring with back-pressure, lw_orch_*
// (dependencies from the tensor map of parent/tmap.h, groups, scopes), the ready queues, and
// what happens when a task reaches a terminal state (poisoning, groups, retirement); contract
// in parent/dag.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "callables/signature.h"
#include "lanes/args.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "parent/callables.h"
#include "parent/dag.h"
#include "parent/runs.h"
#include "parent/tmap.h"
#include "parent/worker_impl.h"

_Static_assert(LW_MAX_SCOPES == LW_TMAP_MAX_SCOPES, "lw_orch scopes are the tensor map's scopes");

// ---------------------------------------------------------------------------------------------
// Tasks (w->mu held)

static void queue_push(lw_task_queue_t *q, lw_task_t *t) {
  t->next = NULL;
  if (q->tail) {
    q->tail->next = t;
  } else {
    q->head = t;
  }
  q->tail = t;
  q->n++;
}

static void make_ready(lw_worker_t *w, lw_task_t *t, lw_run_t **finished);

static void poison_group(lw_worker_t *w, lw_group_t *g, const lw_error_t *why,
                         lw_run_t **finished);

static void retire(lw_worker_t *w, lw_task_t *t, lw_run_t **finished) {
  lw_run_t *run = t->run;
  if (t->group) {
    lw_group_t *g = t->group;
    t->group = NULL;
    if (--g->n_open == 0) {
      free(g->members);
      free(g);
    }
  }
  t->n_consumers = 0;
  t->state = LW_TS_FREE;
  t->gen++;
  t->run = NULL;
  t->ep = NULL;
  w->free_tasks[w->n_free_tasks++] = t->index;
  pthread_cond_broadcast(&w->space_cv);
  run->n_terminal++;
  if (run->orch_done && run->n_terminal == run->n_tasks) {
    run->next = *finished;
    *finished = run;
  }
}

// One task that a finish in progress also finishes (see lw__task_finish).
struct lw_finish_item {
  lw_task_t *t;
  uint32_t gen;  // the task it was queued for: a slot retired meanwhile is not finished again
  lw_status_t st;
  bool has_err;
  lw_error_t err;
};

static void task_finish_one(lw_worker_t *w, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                            lw_run_t **finished);

static bool finish_push(lw_worker_t *w, lw_task_t *t, lw_status_t st, const lw_error_t *err) {
  if (w->n_finish == w->cap_finish) {
    uint32_t cap = w->cap_finish ? w->cap_finish * 2 : 64;
    struct lw_finish_item *p = realloc(w->finish_stack, cap * sizeof(*p));
    if (!p) return false;
    w->finish_stack = p;
    w->cap_finish = cap;
  }
  struct lw_finish_item *it = &w->finish_stack[w->n_finish++];
  it->t = t;
  it->gen = t->gen;
  it->st = st;
  it->has_err = err != NULL;
  if (err) it->err = *err;
  return true;
}

// Finishing one task finishes others: its consumers (poisoned, or skipped when their run
// stopped), its group's members. Those nested finishes are queued on w->finish_stack and done
// in a loop here rather than by recursion, so a dependency chain of any length (the ring holds
// up to 2^20 tasks) never runs the finishing thread out of stack.
void lw__task_finish(lw_worker_t *w, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                     lw_run_t **finished) {
  if (w->finishing) {
    // Out of memory for the list: finished right here, recursing as deep as the chain.
    if (!finish_push(w, t, st, err)) task_finish_one(w, t, st, err, finished);
    return;
  }
  w->finishing = true;
  task_finish_one(w, t, st, err, finished);
  while (w->n_finish > 0) {
    struct lw_finish_item it = w->finish_stack[--w->n_finish];  // a copy: pushes may realloc
    if (it.t->gen != it.gen) continue;
    task_finish_one(w, it.t, it.st, it.has_err ? &it.err : NULL, finished);
  }
  w->finishing = false;
}

static void task_finish_one(lw_worker_t *w, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                            lw_run_t **finished) {
  if (t->state == LW_TS_FREE || t->state == LW_TS_COMPLETED || t->state == LW_TS_FAILED) {
    return;  // one claim per task
  }
  bool dispatched = t->state == LW_TS_RUNNING;
  // A chip task's pin went with its post (the chip child pins it from then on); a sub task
  // holds its pin until now. Dropped last: the callable's name is still used below.
  bool unpin = (!dispatched || t->kind == LW_MB_TASK_SUB) && w->callables[t->wc].id == t->wc_id;
  uint32_t wc = t->wc;
  lw_error_t stopped;
  if (st == LW_OK && t->cancel_at != 0) {
    // The run stopped (failed or cancelled) and the parent asked the child to stop this task
    // before it consumed the result: the task counts as cancelled even though its kernel
    // returned 0, so a stopped run never reports a task completed that finished after the
    // stop. Its outputs are unspecified, as for every task of a stopped run.
    lw__error_set(&stopped, LW_CANCELLED, err ? err->worker_id : -1, t->task_id,
                  "task %llu of run %llu cancelled: the run stopped while it was in flight",
                  (unsigned long long)t->task_id, (unsigned long long)t->run->run_id);
    st = LW_CANCELLED;
    err = &stopped;
  }
  t->state = st == LW_OK ? LW_TS_COMPLETED : LW_TS_FAILED;
  lw_run_t *run = t->run;
  if (st == LW_OK) {
    run->n_completed++;
  } else {
    run->n_failed++;
    // The first error wins: it names the failing task, callable and worker.
    if (!run->failed) {
      run->failed = true;
      atomic_fetch_add(&w->stop_seq, 1);  // the scheduler sweeps its queued tasks
      run->error = *err;
      run->error.code = st;
      run->error.task_id = t->task_id;
    }
  }
  for (uint32_t i = 0; i < t->n_consumers; ++i) {
    lw_task_t *c = &w->tasks[t->consumers[i].index];
    if (c->gen != t->consumers[i].gen || c->state != LW_TS_PENDING) continue;
    if (st != LW_OK) {
      lw_error_t why;
      lw__error_set(&why, LW_POISONED, err ? err->worker_id : -1, c->task_id,
                    "task %llu of run %llu poisoned: upstream task %llu (%s) failed: %s",
                    (unsigned long long)c->task_id, (unsigned long long)run->run_id,
                    (unsigned long long)t->task_id, w->callables[t->wc].name,
                    err ? err->message : lw_status_name(st));
      lw__task_finish(w, c, LW_POISONED, &why, finished);
    } else if (--c->n_pending == 0) {
      make_ready(w, c, finished);
    }
  }
  if (st != LW_OK && !dispatched && t->group) poison_group(w, t->group, err, finished);
  retire(w, t, finished);
  if (unpin) lw__wc_unpin(w, wc);
}

static void poison_group(lw_worker_t *w, lw_group_t *g, const lw_error_t *why,
                         lw_run_t **finished) {
  // All-or-nothing: a member that can never launch takes the whole group down. Called
  // outside a finish (a group whose build failed), finishing the first member finishes all of
  // them and frees the group: the loop works on a copy and skips members already retired
  // (their group is cleared).
  uint32_t n = g->n;
  lw_task_t *members[LW_MAX_CHIPS * LW_MB_TASK_FRAMES];
  memcpy(members, g->members, n * sizeof(lw_task_t *));
  for (uint32_t i = 0; i < n; ++i) {
    lw_task_t *m = members[i];
    if (m && m->group == g && (m->state == LW_TS_PENDING || m->state == LW_TS_READY)) {
      lw_error_t e;
      lw__error_set(&e, LW_POISONED, -1, m->task_id,
                    "task %llu: its group cannot launch: %s", (unsigned long long)m->task_id,
                    why ? why->message : "a member failed");
      lw__task_finish(w, m, LW_POISONED, &e, finished);
    }
  }
}

// A task that can no longer run because its run failed or was cancelled (a run whose cancel
// was requested is marked cancelled here).
void lw__task_skip(lw_worker_t *w, lw_task_t *t, lw_run_t **finished) {
  lw_run_t *run = t->run;
  if (lw__handle_cancel_requested(&run->handle)) run->cancelled = true;
  lw_error_t e;
  if (run->failed) {
    lw__error_set(&e, LW_POISONED, -1, t->task_id,
                  "task %llu skipped: run %llu already failed: %s", (unsigned long long)t->task_id,
                  (unsigned long long)run->run_id, run->error.message);
    lw__task_finish(w, t, LW_POISONED, &e, finished);
  } else {
    lw__error_set(&e, LW_CANCELLED, -1, t->task_id, "task %llu skipped: run %llu cancelled",
                  (unsigned long long)t->task_id, (unsigned long long)run->run_id);
    lw__task_finish(w, t, LW_CANCELLED, &e, finished);
  }
}

static void make_ready(lw_worker_t *w, lw_task_t *t, lw_run_t **finished) {
  if (lw__run_stopped(t->run)) {
    lw__task_skip(w, t, finished);
    return;
  }
  t->state = LW_TS_READY;
  if (t->group) {
    lw_group_t *g = t->group;
    if (++g->n_ready == g->n) {
      g->next_ready = NULL;
      if (w->groups_tail) {
        w->groups_tail->next_ready = g;
      } else {
        w->groups_head = g;
      }
      w->groups_tail = g;
    }
    return;
  }
  if (t->kind == LW_MB_TASK_SUB) {
    queue_push(&w->sub_q, t);
  } else if (t->worker >= 0) {
    queue_push(&w->chip_q[t->worker], t);
  } else {
    queue_push(&w->any_q, t);
  }
}

static lw_status_t add_edge(lw_worker_t *w, lw_task_t *producer, lw_task_t *consumer) {
  if (producer == consumer) return LW_OK;
  // Members of one group launch together (all-or-nothing), so one can never wait for another:
  // an edge between them would keep the group from ever launching.
  if (producer->group && producer->group == consumer->group) return LW_OK;
  if (producer->n_consumers == producer->cap_consumers) {
    uint32_t cap = producer->cap_consumers ? producer->cap_consumers * 2 : 4;
    lw_task_ref_t *p = realloc(producer->consumers, cap * sizeof(*p));
    // No message: the tensor map hands the failure back to build_task, which names it.
    if (!p) return LW_RESOURCE_EXHAUSTED;
    producer->consumers = p;
    producer->cap_consumers = cap;
  }
  // A task lists each consumer once per tensor; duplicates just count twice on both sides.
  producer->consumers[producer->n_consumers++] = (lw_task_ref_t){consumer->index, consumer->gen};
  consumer->n_pending++;
  (void)w;
  return LW_OK;
}

// The task behind a reference while it is still unfinished, or NULL: a retired or terminal
// task's effect on the buffer is complete, so nothing waits for it.
static lw_task_t *live_task(lw_worker_t *w, lw_tmap_ref_t r) {
  lw_task_t *p = &w->tasks[r.index];
  if (p->gen != r.gen) return NULL;
  if (p->state != LW_TS_BUILDING && p->state != LW_TS_PENDING && p->state != LW_TS_READY &&
      p->state != LW_TS_RUNNING) {
    return NULL;
  }
  return p;
}

// The tensor map's liveness callback (w->mu held: it reads task state).
bool lw__dag_tmap_live(void *ctx, lw_tmap_ref_t r) { return live_task(ctx, r) != NULL; }

typedef struct tmap_edge_ctx {
  lw_worker_t *w;
  lw_task_t *consumer;
} tmap_edge_ctx_t;

// The tensor map's edge callback: consumer waits for producer (w->mu held). The map reports
// only producers it has just seen live, so the slot still holds that task.
static lw_status_t tmap_edge(void *ctx, lw_tmap_ref_t producer) {
  tmap_edge_ctx_t *e = ctx;
  return add_edge(e->w, &e->w->tasks[producer.index], e->consumer);
}

// Waits until n task slots are free (w->mu held; released while waiting).
static lw_status_t wait_task_slots(lw_worker_t *w, uint32_t n, lw_error_t *err) {
  int64_t deadline = lw__deadline_after(w->cfg.submit_timeout_ns);
  while (w->n_free_tasks < n) {
    int64_t now = lw__now_ns();
    if (now >= deadline) {
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                           "orch: the task ring is full (%u of %u slots taken, %u needed) and "
                           "not enough tasks retired within the submit timeout (%lld ns); "
                           "nothing was dropped",
                           w->n_tasks_cap - w->n_free_tasks, w->n_tasks_cap, n,
                           (long long)w->cfg.submit_timeout_ns);
    }
    // retire() broadcasts space_cv under w->mu for every freed slot; the loop re-checks the
    // deadline after every wake-up.
    (void)lw__cond_wait_until(&w->space_cv, &w->mu, deadline);
  }
  return LW_OK;
}

static lw_status_t take_task_slot(lw_worker_t *w, lw_task_t **out, lw_error_t *err) {
  LW_RETURN_IF_ERROR(wait_task_slots(w, 1, err));
  lw_task_t *t = &w->tasks[w->free_tasks[--w->n_free_tasks]];
  t->state = LW_TS_BUILDING;
  t->n_pending = 0;
  t->n_consumers = 0;
  t->group = NULL;
  t->next = NULL;
  t->ep = NULL;
  // A reused slot must not inherit its last task's cancellation or escalation.
  t->cancel_at = 0;
  t->escalated = LW_OK;
  *out = t;
  return LW_OK;
}

typedef struct submit_desc {
  lw_mb_task_kind_t kind;
  int32_t worker;
  lw_callable_handle_t callable;
  const lw_args_t *args;
  int64_t timeout_ns;
  lw_group_t *group;  // the group the task joins, NULL for a single task
} submit_desc_t;

// Checks what can be checked without the lock: argument shapes and shared-memory bounds.
static lw_status_t check_desc(lw_orch_t *o, const submit_desc_t *d, lw_mb_args_t *out_args,
                              lw_error_t *err) {
  lw_worker_t *w = o->w;
  lw_args_t empty;
  const lw_args_t *args = d->args;
  if (!args) {
    lw_args_init(&empty);
    args = &empty;
  }
  LW_RETURN_IF_ERROR(lw__args_check(args, err));
  if (d->kind == LW_MB_TASK_KERNEL && (d->worker < LW_ANY_CHIP || d->worker >= (int32_t)w->cfg.n_chips)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "orch: worker_id %d is not a chip (0..%u or LW_ANY_CHIP)", d->worker,
                         w->cfg.n_chips - 1);
  }
  if (d->kind == LW_MB_TASK_SUB && w->cfg.n_subs == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "orch: submit_sub on a worker with no sub children");
  }
  LW_RETURN_IF_ERROR(lw__mailbox_args_encode(args, &w->mb_arena, out_args, err));
  for (uint32_t i = 0; i < args->n_tensors; ++i) {
    if (args->tensor[i].tag > LW_TAG_NO_DEP) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "orch: tensor %u has unknown tag %d",
                           i, (int)args->tensor[i].tag);
    }
  }
  return LW_OK;
}

// Builds one task (w->mu held). On error nothing is left behind.
static lw_status_t build_task(lw_orch_t *o, const submit_desc_t *d, const lw_mb_args_t *margs,
                              lw_task_t **out, lw_error_t *err) {
  lw_worker_t *w = o->w;
  lw_run_t *run = o->run;
  *out = NULL;
  if (run->failed) {
    return lw__error_set(err, LW_POISONED, -1, 0,
                         "orch: run %llu already failed, no more tasks are accepted: %s",
                         (unsigned long long)run->run_id, run->error.message);
  }
  uint32_t index;
  if (lw__handle_table_lookup(&w->callable_ids, d->callable.id, &index) != LW_OK) {
    return lw__error_set(err, LW_NOT_FOUND, -1, 0,
                         "orch: unknown or released callable handle 0x%llx",
                         (unsigned long long)d->callable.id);
  }
  lw_wcallable_t *c = &w->callables[index];
  if (c->state == LW_WC_UNREGISTERING) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "orch: callable %s is pending unregister", c->name);
  }
  if (c->state != LW_WC_LIVE) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "orch: callable %s is still registering", c->name);
  }
  bool want_sub = d->kind == LW_MB_TASK_SUB;
  if (want_sub != (c->kind == LW_WC_SUB)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "orch: %s is a %s callable; use %s",
                         c->name, c->kind == LW_WC_SUB ? "sub" : "chip",
                         c->kind == LW_WC_SUB ? "lw_orch_submit_sub"
                                              : "lw_orch_submit_next_level");
  }
  LW_RETURN_IF_ERROR(lw__signature_check_args(c->name, c->n_params, c->param_dirs, d->args, err));
  lw_task_t *t = NULL;
  LW_RETURN_IF_ERROR(take_task_slot(w, &t, err));
  t->run = run;
  t->task_id = ++run->n_tasks;
  t->kind = d->kind;
  t->worker = want_sub ? -1 : d->worker;
  t->wc = (uint32_t)(c - w->callables);
  t->wc_id = c->id;
  t->args = *margs;
  t->timeout_ns = d->timeout_ns;
  c->pins++;
  // Set before the edges: members of one group get none between them.
  t->group = d->group;
  // Dependencies from tags, in tensor order.
  const lw_args_t *args = d->args;
  tmap_edge_ctx_t edge_ctx = {w, t};
  for (uint32_t i = 0; args && i < args->n_tensors; ++i) {
    // The map skips NO_DEP tensors and NULL data: they are neither looked up nor recorded.
    if (lw__tmap_use(o->tmap, (uintptr_t)args->tensor[i].data, args->tensor[i].tag,
                     (lw_tmap_ref_t){t->index, t->gen}, tmap_edge, &edge_ctx) != LW_OK) {
      goto oom;
    }
  }
  t->state = LW_TS_PENDING;
  *out = t;
  return LW_OK;
oom:
  // Producers may already list this task as a consumer, so it cannot just be dropped: it is
  // handed back PENDING and the caller finishes it failed, which fails the run with this error.
  t->state = LW_TS_PENDING;
  *out = t;
  return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       "orch: out of memory while building task %llu",
                       (unsigned long long)t->task_id);
}

static void finish_runs(lw_run_t *finished) {
  while (finished) {
    lw_run_t *next = finished->next;
    lw__run_complete(finished);
    finished = next;
  }
}

// Submits one task; on failure err (must be set) says why, and the public submit stores it as
// the last error.
static lw_status_t submit_one(lw_orch_t *o, const submit_desc_t *d, lw_error_t *err) {
  if (!o || !o->run) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "orch: not inside an orch function");
  }
  lw_mb_args_t margs;
  LW_RETURN_IF_ERROR(check_desc(o, d, &margs, err));
  lw_worker_t *w = o->w;
  lw_run_t *finished = NULL;
  pthread_mutex_lock(&w->mu);
  lw_task_t *t = NULL;
  lw_status_t st = build_task(o, d, &margs, &t, err);
  if (t) {
    if (st != LW_OK) {
      lw__task_finish(w, t, st, err, &finished);
    } else if (t->n_pending == 0) {
      make_ready(w, t, &finished);
    }
  }
  pthread_mutex_unlock(&w->mu);
  finish_runs(finished);
  if (st == LW_OK) lw__sched_dispatch_now(w);
  lw__worker_kick(w);
  return st;
}

lw_status_t lw_orch_submit_next_level(lw_orch_t *o, lw_callable_handle_t c, const lw_args_t *args,
                                      const lw_run_config_t *cfg, int32_t worker_id) {
  if (cfg && cfg->timeout_ns < 0) {
    return lw__fail(LW_INVALID_ARGUMENT, "orch: timeout_ns %lld is negative",
                    (long long)cfg->timeout_ns);
  }
  submit_desc_t d = {LW_MB_TASK_KERNEL, worker_id, c, args, cfg ? cfg->timeout_ns : 0, NULL};
  lw_error_t err;
  lw_status_t st = submit_one(o, &d, &err);
  if (st != LW_OK) lw__last_error_store(&err);
  return st;
}

lw_status_t lw_orch_submit_sub(lw_orch_t *o, lw_callable_handle_t c, const lw_args_t *args) {
  submit_desc_t d = {LW_MB_TASK_SUB, -1, c, args, 0, NULL};
  lw_error_t err;
  lw_status_t st = submit_one(o, &d, &err);
  if (st != LW_OK) lw__last_error_store(&err);
  return st;
}

lw_status_t lw_orch_submit_next_level_group(lw_orch_t *o, lw_callable_handle_t c,
                                            const lw_args_t *const *args,
                                            const int32_t *worker_ids, int n) {
  if (!o || !o->run) return lw__fail(LW_INVALID_ARGUMENT, "orch: not inside an orch function");
  lw_worker_t *w = o->w;
  if (n <= 0 || !args || !worker_ids) {
    return lw__fail(LW_INVALID_ARGUMENT, "orch: a group needs n > 0, args and worker_ids");
  }
  if ((uint32_t)n > w->cfg.n_chips * LW_MB_TASK_FRAMES || (uint32_t)n > w->n_tasks_cap) {
    return lw__fail(LW_INVALID_ARGUMENT,
                    "orch: a group of %d tasks can never launch at once (at most %u: %u chips x "
                    "%u frames)",
                    n, w->cfg.n_chips * LW_MB_TASK_FRAMES, w->cfg.n_chips, LW_MB_TASK_FRAMES);
  }
  lw_mb_args_t *margs = calloc((size_t)n, sizeof(*margs));
  if (!margs) return lw__fail(LW_RESOURCE_EXHAUSTED, "orch: out of memory");
  for (int i = 0; i < n; ++i) {
    if (worker_ids[i] < 0) {
      free(margs);
      return lw__fail(LW_INVALID_ARGUMENT, "orch: group member %d needs a chip id, not %d", i,
                      worker_ids[i]);
    }
    submit_desc_t d = {LW_MB_TASK_KERNEL, worker_ids[i], c, args[i], 0, NULL};
    lw_error_t err;
    if (check_desc(o, &d, &margs[i], &err) != LW_OK) {
      free(margs);
      return lw__last_error_store(&err);
    }
  }
  lw_group_t *g = calloc(1, sizeof(*g));
  lw_task_t **members = calloc((size_t)n, sizeof(lw_task_t *));
  if (!g || !members) {
    free(g);
    free(members);
    free(margs);
    return lw__fail(LW_RESOURCE_EXHAUSTED, "orch: out of memory");
  }
  g->members = members;
  g->n = (uint32_t)n;
  lw_run_t *finished = NULL;
  lw_status_t st = LW_OK;
  lw_error_t err;
  pthread_mutex_lock(&w->mu);
  // Every slot first, so w->mu is never released between members: while it is held, no
  // member can be made ready, poisoned or retired by another thread before the group is whole
  // (a member made ready early would be counted twice, and a poisoned one could free the group).
  st = wait_task_slots(w, (uint32_t)n, &err);
  if (st != LW_OK) {
    pthread_mutex_unlock(&w->mu);
    free(members);
    free(g);
    free(margs);
    return lw__last_error_store(&err);
  }
  uint32_t built = 0;
  for (int i = 0; i < n && st == LW_OK; ++i) {
    submit_desc_t d = {LW_MB_TASK_KERNEL, worker_ids[i], c, args[i], 0, g};
    lw_task_t *t = NULL;
    st = build_task(o, &d, &margs[i], &t, &err);
    if (t) {
      t->group = g;
      members[built++] = t;
      g->n_open++;
    }
  }
  if (st != LW_OK) {
    g->n = built;
    if (built == 0) {
      free(members);
      free(g);
    } else {
      poison_group(w, g, &err, &finished);
    }
  } else {
    for (uint32_t i = 0; i < built; ++i) {
      if (members[i]->n_pending == 0) make_ready(w, members[i], &finished);
    }
  }
  pthread_mutex_unlock(&w->mu);
  free(margs);
  finish_runs(finished);
  lw__worker_kick(w);
  if (st != LW_OK) lw__last_error_store(&err);
  return st;
}

lw_status_t lw_orch_scope_begin(lw_orch_t *o) {
  if (!o || !o->run) return lw__fail(LW_INVALID_ARGUMENT, "orch: not inside an orch function");
  if (!lw__tmap_scope_begin(o->tmap)) {
    return lw__fail(LW_INVALID_ARGUMENT, "orch: scopes nest at most %d deep", LW_MAX_SCOPES);
  }
  return LW_OK;
}

lw_status_t lw_orch_scope_end(lw_orch_t *o) {
  if (!o || !o->run) return lw__fail(LW_INVALID_ARGUMENT, "orch: not inside an orch function");
  pthread_mutex_lock(&o->w->mu);
  bool ended = lw__tmap_scope_end(o->tmap);
  pthread_mutex_unlock(&o->w->mu);
  if (!ended) return lw__fail(LW_INVALID_ARGUMENT, "orch: scope_end without scope_begin");
  return LW_OK;
}
