// parent/dag.c — the DAG of the worker's runs: the inbox and the owner's pass over it, the task
// ring with back-pressure, dependencies (tensor map of parent/tmap.h), groups, scopes, the
// ready queues, and what happens when a task reaches a terminal state (poisoning, groups,
// retirement); contract in parent/dag.h. Nothing here knows the worker: what the DAG needs
// from it comes through lw_dag_hooks_t.
#include "parent/dag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/counter.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "parent/task_reports.h"
#include "parent/tmap.h"

_Static_assert(LW_MAX_SCOPES == LW_TMAP_MAX_SCOPES, "lw_orch scopes are the tensor map's scopes");

// ---------------------------------------------------------------------------------------------
// Tasks (the owner)

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

lw_task_t *lw__dag_queue_pop(lw_task_queue_t *q) {
  lw_task_t *t = q->head;
  if (!t) return NULL;
  q->head = t->next;
  if (!q->head) q->tail = NULL;
  q->n--;
  t->next = NULL;
  return t;
}

bool lw__run_stopped(const lw_run_t *run) {
  return run->failed || run->cancelled || lw__handle_cancel_requested(&run->handle);
}

bool lw__dag_run_failed(const lw_run_t *run) {
  return atomic_load_explicit(&run->failed_pub, memory_order_acquire);
}

void lw__dag_note_stop(lw_dag_t *d) {
  atomic_fetch_add(&d->stop_seq, 1);
  if (d->hooks.stop) {
    d->hooks.stop(d->hooks.ctx);
  } else {
    d->hooks.ring(d->hooks.ctx, 0);
  }
}

static const char *callable_name(lw_dag_t *d, const lw_task_t *t) {
  return d->hooks.callable_name(d->hooks.ctx, t->wc, t->wc_id);
}

// The run failed with *err (the first error wins). Published for submitters (failed_pub) once
// run->error is complete; the sweep takes its queued tasks out.
static void run_fail(lw_dag_t *d, lw_run_t *run, lw_status_t st, const lw_error_t *err,
                     uint64_t task_id) {
  if (run->failed) return;
  run->failed = true;
  run->error = *err;
  run->error.code = st;
  if (task_id) run->error.task_id = task_id;
  atomic_store_explicit(&run->failed_pub, true, memory_order_release);
  atomic_fetch_add(&d->stop_seq, 1);
}

static void make_ready(lw_dag_t *d, lw_task_t *t, lw_run_t **finished);

// How a task of a stopped run ends without a result of its own: POISONED when the run failed of
// something else, CANCELLED when it was cancelled (its first error is then a CANCELLED).
static bool run_stopped_by_cancel(const lw_run_t *run) {
  return !run->failed || run->error.code == LW_CANCELLED;
}

static void poison_group(lw_dag_t *d, lw_group_t *g, const lw_error_t *why,
                         lw_run_t **finished);

static void settle_if_done(lw_run_t *run, lw_run_t **finished) {
  if (run->orch_done && run->n_terminal == run->n_tasks && !run->settled_by_dag) {
    run->settled_by_dag = true;
    run->next = *finished;
    *finished = run;
  }
}

// Every task state change goes through here, which keeps the count of PENDING tasks.
static void set_state(lw_dag_t *d, lw_task_t *t, lw_task_state_t s) {
  d->n_waiting += (uint32_t)(s == LW_TS_PENDING) - (uint32_t)(t->state == LW_TS_PENDING);
  t->state = s;
}

static void give_slots_back(lw_dag_t *d, int64_t n) {
  atomic_fetch_add(&d->slots_free, n);
  // seq_cst, paired with lw__dag_reserve: either the waiter sees the new count or this sees
  // the waiter and broadcasts under space_mu, which the waiter holds from its check to its wait.
  if (atomic_load(&d->space_waiters) != 0) {
    pthread_mutex_lock(&d->space_mu);
    pthread_cond_broadcast(&d->space_cv);
    pthread_mutex_unlock(&d->space_mu);
  }
}

static void retire(lw_dag_t *d, lw_task_t *t, lw_run_t **finished) {
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
  set_state(d, t, LW_TS_FREE);
  t->gen++;
  t->run = NULL;
  t->ep = NULL;
  d->free_tasks[d->n_free_tasks++] = t->index;
  lw__counter_add_one_writer(&d->n_retired, 1);  // a counter only, the owner its writer
  give_slots_back(d, 1);
  run->n_terminal++;
  settle_if_done(run, finished);
}

// One task that a finish in progress also finishes (see lw__task_finish).
struct lw_finish_item {
  lw_task_t *t;
  uint32_t gen;  // the task it was queued for: a slot retired meanwhile is not finished again
  lw_status_t st;
  bool has_err;
  lw_error_t err;
};

static void task_finish_one(lw_dag_t *d, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                            lw_run_t **finished);

static bool finish_push(lw_dag_t *d, lw_task_t *t, lw_status_t st, const lw_error_t *err) {
  if (d->n_finish == d->cap_finish) {
    uint32_t cap = d->cap_finish ? d->cap_finish * 2 : 64;
    struct lw_finish_item *p = realloc(d->finish_stack, cap * sizeof(*p));
    if (!p) return false;
    d->finish_stack = p;
    d->cap_finish = cap;
  }
  struct lw_finish_item *it = &d->finish_stack[d->n_finish++];
  it->t = t;
  it->gen = t->gen;
  it->st = st;
  it->has_err = err != NULL;
  if (err) it->err = *err;
  return true;
}

// Finishing one task finishes others: its consumers (poisoned, or skipped when their run
// stopped), its group's members. Those nested finishes are queued on d->finish_stack and done
// in a loop here rather than by recursion, so a dependency chain of any length (the ring holds
// up to 2^20 tasks) never runs the finishing thread out of stack.
void lw__task_finish(lw_dag_t *d, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                     lw_run_t **finished) {
  if (d->finishing) {
    // Out of memory for the list: finished right here, recursing as deep as the chain.
    if (!finish_push(d, t, st, err)) task_finish_one(d, t, st, err, finished);
    return;
  }
  d->finishing = true;
  task_finish_one(d, t, st, err, finished);
  while (d->n_finish > 0) {
    struct lw_finish_item it = d->finish_stack[--d->n_finish];  // a copy: pushes may realloc
    if (it.t->gen != it.gen) continue;
    task_finish_one(d, it.t, it.st, it.has_err ? &it.err : NULL, finished);
  }
  d->finishing = false;
}

// Marks c, an elided consumer posted or queued behind a producer that ended without a result,
// and the elided consumers queued behind c, and theirs: each waits on its chip for a producer
// that will never give it a result (failed_id names the task that failed). Transitively, and
// now, not as each producer ends: the child may report them in any order (a cancel withdraws a
// queued task before the run lane reports the one ahead of it), and one reported before its
// producer ended must already know. Iterative over d->mark_stack, so a chain of any length
// needs no stack; out of memory for it, a consumer it could not hold is left unmarked, for its
// producer's own end to mark (as before the walk).
static void mark_upstream_failed(lw_dag_t *d, lw_task_t *c, uint64_t failed_id) {
  c->upstream_failed = failed_id;
  uint32_t n = 0;
  lw_task_t *x = c;
  for (;;) {
    for (uint32_t i = 0; i < x->n_consumers; ++i) {
      lw_task_t *y = &d->tasks[x->consumers[i].index];
      if (y->gen != x->consumers[i].gen || y->state == LW_TS_PENDING || !y->elided ||
          y->upstream_failed) {
        continue;
      }
      if (n == d->cap_mark) {
        uint32_t cap = d->cap_mark ? d->cap_mark * 2 : 64;
        lw_task_t **p = realloc(d->mark_stack, cap * sizeof(*p));
        if (!p) continue;
        d->mark_stack = p;
        d->cap_mark = cap;
      }
      y->upstream_failed = failed_id;
      d->mark_stack[n++] = y;
    }
    if (n == 0) return;
    x = d->mark_stack[--n];
  }
}

static void task_finish_one(lw_dag_t *d, lw_task_t *t, lw_status_t st, const lw_error_t *err,
                            lw_run_t **finished) {
  if (t->state == LW_TS_FREE || t->state == LW_TS_COMPLETED || t->state == LW_TS_FAILED) {
    return;  // one claim per task
  }
  bool dispatched = t->state == LW_TS_RUNNING;
  // A chip task's pin went with its launch (the chip child pins it from then on); a sub task
  // holds its pin until now. Dropped last: the callable's name is still used below.
  bool unpin = !dispatched || t->kind == LW_MB_TASK_SUB;
  uint32_t wc = t->wc;
  uint64_t wc_id = t->wc_id;
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
  lw_error_t upstream;
  if (t->upstream_failed) {
    // Posted behind a producer that then failed: never a result, whatever came back (the child
    // does not start it; a death or a cancel may end it first). As for a skipped task
    // (lw__task_skip): POISONED, or CANCELLED when its run was cancelled.
    if (run_stopped_by_cancel(t->run)) {
      lw__error_set(&upstream, LW_CANCELLED, err ? err->worker_id : t->worker, t->task_id,
                    "task %llu of run %llu cancelled: its run was cancelled while it was "
                    "queued behind task %llu on chip %d",
                    (unsigned long long)t->task_id, (unsigned long long)t->run->run_id,
                    (unsigned long long)t->upstream_failed, t->worker);
    } else {
      lw__error_set(&upstream, LW_POISONED, err ? err->worker_id : t->worker, t->task_id,
                    "task %llu of run %llu poisoned: upstream task %llu failed (it was queued "
                    "behind it on chip %d)",
                    (unsigned long long)t->task_id, (unsigned long long)t->run->run_id,
                    (unsigned long long)t->upstream_failed, t->worker);
    }
    st = upstream.code;
    err = &upstream;
  }
  lw_error_t plain;
  if (st != LW_OK && !err) {
    lw__error_set(&plain, st, -1, t->task_id, "task %llu failed: %s",
                  (unsigned long long)t->task_id, lw_status_name(st));
    err = &plain;
  }
  set_state(d, t, st == LW_OK ? LW_TS_COMPLETED : LW_TS_FAILED);
  // Counted here, past the one claim and with the final status, so each task counts once.
  // A POISONED task never started, even one posted to a child (wait elision): it counts with
  // the worker's poisoned tasks, not with a child's outcomes (the hook still hears of it, for
  // the child's queue depth).
  if (t->ep && d->hooks.task_done) d->hooks.task_done(d->hooks.ctx, t, st);
  if (!t->ep || st == LW_POISONED) {
    lw__counter_add_one_writer(st == LW_POISONED ? &d->n_poisoned : &d->n_skipped, 1);
  }
  lw_run_t *run = t->run;
  if (st == LW_OK) {
    run->n_completed++;
  } else {
    run->n_failed++;
    // The first error wins: it names the failing task, callable and worker.
    run_fail(d, run, st, err, t->task_id);
  }
  for (uint32_t i = 0; i < t->n_consumers; ++i) {
    lw_task_t *c = &d->tasks[t->consumers[i].index];
    if (c->gen != t->consumers[i].gen) continue;
    if (c->state != LW_TS_PENDING) {
      // An elided consumer is READY or posted already: whatever it ends with, it ends POISONED.
      if (st != LW_OK && c->elided && !c->upstream_failed) {
        mark_upstream_failed(d, c, t->upstream_failed ? t->upstream_failed : t->task_id);
      }
      continue;
    }
    if (st != LW_OK) {
      lw_error_t why;
      lw__error_set(&why, LW_POISONED, err->worker_id, c->task_id,
                    "task %llu of run %llu poisoned: upstream task %llu (%s) failed: %s",
                    (unsigned long long)c->task_id, (unsigned long long)c->run->run_id,
                    (unsigned long long)t->task_id, callable_name(d, t), err->message);
      lw__task_finish(d, c, LW_POISONED, &why, finished);
    } else if (--c->n_pending == 0) {
      make_ready(d, c, finished);
    }
  }
  if (st != LW_OK && !dispatched && t->group) poison_group(d, t->group, err, finished);
  // Before retire, which may settle the run.
  lw__task_report_end(run, t->task_id, st, lw__dag_now(d));
  retire(d, t, finished);
  if (unpin) d->hooks.unpin(d->hooks.ctx, wc, wc_id);
}

static void poison_group(lw_dag_t *d, lw_group_t *g, const lw_error_t *why,
                         lw_run_t **finished) {
  // All-or-nothing: a member that can never launch takes the whole group down. The group
  // outlives this loop: called from inside a finish (a member failed), the members' finishes
  // are only queued and the failing member retires after it; called outside one (apply_group),
  // the caller holds the group (n_open).
  for (uint32_t i = 0; i < g->n; ++i) {
    lw_task_t *m = g->members[i];
    if (m && m->group == g && (m->state == LW_TS_PENDING || m->state == LW_TS_READY)) {
      lw_error_t e;
      lw__error_set(&e, LW_POISONED, -1, m->task_id, "task %llu: its group cannot launch: %s",
                    (unsigned long long)m->task_id, why ? why->message : "a member failed");
      lw__task_finish(d, m, LW_POISONED, &e, finished);
    }
  }
}

void lw__task_skip(lw_dag_t *d, lw_task_t *t, lw_run_t **finished) {
  lw_run_t *run = t->run;
  if (lw__handle_cancel_requested(&run->handle)) run->cancelled = true;
  lw_error_t e;
  // A cancelled run's first error is its first skipped task's CANCELLED, so it keeps skipping
  // CANCELLED.
  if (!run_stopped_by_cancel(run)) {
    lw__error_set(&e, LW_POISONED, -1, t->task_id,
                  "task %llu skipped: run %llu already failed: %s", (unsigned long long)t->task_id,
                  (unsigned long long)run->run_id, run->error.message);
    lw__task_finish(d, t, LW_POISONED, &e, finished);
  } else {
    lw__error_set(&e, LW_CANCELLED, -1, t->task_id, "task %llu skipped: run %llu cancelled",
                  (unsigned long long)t->task_id, (unsigned long long)run->run_id);
    lw__task_finish(d, t, LW_CANCELLED, &e, finished);
  }
}

static void make_ready(lw_dag_t *d, lw_task_t *t, lw_run_t **finished) {
  if (lw__run_stopped(t->run)) {
    lw__task_skip(d, t, finished);
    return;
  }
  set_state(d, t, LW_TS_READY);
  if (t->group) {
    lw_group_t *g = t->group;
    if (++g->n_ready == g->n) {
      g->next_ready = NULL;
      if (d->groups_tail) {
        d->groups_tail->next_ready = g;
      } else {
        d->groups_head = g;
      }
      d->groups_tail = g;
    }
    return;
  }
  if (t->kind == LW_MB_TASK_SUB) {
    queue_push(&d->sub_q, t);
  } else if (t->worker >= 0) {
    queue_push(&d->chip_q[t->worker], t);
  } else {
    queue_push(&d->any_q, t);
  }
}

// A producer of c was posted to chip (-1: a sub child or unknown).
static void note_posted_producer(lw_task_t *c, int32_t chip) {
  if (chip < 0) {
    c->elide_chip = -2;
  } else if (c->elide_chip == -1) {
    c->elide_chip = chip;
  } else if (c->elide_chip != chip) {
    c->elide_chip = -2;
  }
}

// Makes c READY for its producers' chip when every unfinished producer is posted there. Only a
// lone kernel task (a group launches all-or-nothing, a sub task runs elsewhere) that may run on
// that chip.
static void maybe_elide(lw_dag_t *d, lw_task_t *c, lw_run_t **finished) {
  if (!d->elision || c->state != LW_TS_PENDING || c->n_pending == 0 || c->n_unlaunched != 0 ||
      c->elide_chip < 0 || c->kind != LW_MB_TASK_KERNEL || c->group) {
    return;
  }
  if (c->worker >= 0 && c->worker != c->elide_chip) return;  // pinned to another chip
  // A task that names no chip goes where it can start now: behind its producer only when no
  // other chip is free (a chain on a busy worker; a fan-out's readers spread once the
  // producer is done). Pinned tasks keep elision as it was.
  if (c->worker < 0 && d->hooks.other_chip_free &&
      d->hooks.other_chip_free(d->hooks.ctx, c->elide_chip)) {
    return;
  }
  c->elided = true;
  c->worker = c->elide_chip;
  make_ready(d, c, finished);
}

void lw__dag_task_launch_on(lw_dag_t *d, lw_task_t *t, int32_t chip, lw_run_t **finished) {
  set_state(d, t, LW_TS_RUNNING);
  t->launched_chip = chip;
  for (uint32_t i = 0; i < t->n_consumers; ++i) {
    lw_task_t *c = &d->tasks[t->consumers[i].index];
    if (c->gen != t->consumers[i].gen || c->state != LW_TS_PENDING) continue;
    note_posted_producer(c, chip);
    c->n_unlaunched--;
    if (finished) maybe_elide(d, c, finished);
  }
}

void lw__dag_task_launch(lw_dag_t *d, lw_task_t *t) { lw__dag_task_launch_on(d, t, -1, NULL); }

lw_group_t *lw__dag_group_pop(lw_dag_t *d) {
  lw_group_t *g = d->groups_head;
  if (!g) return NULL;
  d->groups_head = g->next_ready;
  if (!d->groups_head) d->groups_tail = NULL;
  g->next_ready = NULL;
  return g;
}

static lw_status_t add_edge(lw_task_t *producer, lw_task_t *consumer) {
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
  if (producer->state == LW_TS_RUNNING) {
    note_posted_producer(consumer, producer->launched_chip);
  } else {
    consumer->n_unlaunched++;
  }
  if (lw__trace_on()) {
    lw__trace_dep(consumer->run->run_id, consumer->task_id, producer->run->run_id,
                  producer->task_id);
  }
  return LW_OK;
}

// The task behind a reference while it is still unfinished, or NULL: a retired or terminal
// task's effect on the buffer is complete, so nothing waits for it.
static lw_task_t *live_task(lw_dag_t *d, lw_tmap_ref_t r) {
  lw_task_t *p = &d->tasks[r.index];
  if (p->gen != r.gen) return NULL;
  if (p->state != LW_TS_BUILDING && p->state != LW_TS_PENDING && p->state != LW_TS_READY &&
      p->state != LW_TS_RUNNING) {
    return NULL;
  }
  return p;
}

// The tensor map's liveness callback.
static bool tmap_live(void *ctx, lw_tmap_ref_t r) { return live_task(ctx, r) != NULL; }

typedef struct tmap_edge_ctx {
  lw_dag_t *d;
  lw_task_t *consumer;
} tmap_edge_ctx_t;

// The tensor map's edge callback: consumer waits for producer. The map reports only producers
// it has just seen live, so the slot still holds that task.
static lw_status_t tmap_edge(void *ctx, lw_tmap_ref_t producer) {
  tmap_edge_ctx_t *e = ctx;
  return add_edge(&e->d->tasks[producer.index], e->consumer);
}

// ---------------------------------------------------------------------------------------------
// Back-pressure (any thread)

// Takes n free slots if there are that many (any thread). *have: the count it last saw.
static bool try_take_slots(lw_dag_t *d, uint32_t n, int64_t *have_out) {
  int64_t have = atomic_load(&d->slots_free);
  while (have >= (int64_t)n) {
    if (atomic_compare_exchange_weak(&d->slots_free, &have, have - (int64_t)n)) return true;
  }
  if (have_out) *have_out = have;
  return false;
}

bool lw__dag_try_reserve(lw_dag_t *d, uint32_t n) {
  return n <= d->n_tasks_cap && try_take_slots(d, n, NULL);
}

lw_status_t lw__dag_reserve(lw_dag_t *d, uint32_t n, lw_error_t *err) {
  if (n > d->n_tasks_cap) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "orch: %u tasks at once can never fit the task ring of %u slots", n,
                         d->n_tasks_cap);
  }
  if (try_take_slots(d, n, NULL)) return LW_OK;
  int64_t deadline = lw__deadline_after(d->submit_timeout_ns);
  lw_status_t st = LW_OK;
  pthread_mutex_lock(&d->space_mu);
  atomic_fetch_add(&d->space_waiters, 1);
  for (;;) {
    int64_t have = 0;
    if (try_take_slots(d, n, &have)) break;
    if (lw__now_ns() >= deadline) {
      st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "orch: the task ring is full (%lld of %u slots taken, %u needed) and "
                         "not enough tasks retired within the submit timeout (%lld ns); "
                         "nothing was dropped",
                         (long long)(d->n_tasks_cap - (have > 0 ? have : 0)), d->n_tasks_cap, n,
                         (long long)d->submit_timeout_ns);
      break;
    }
    // give_slots_back broadcasts under space_mu when it sees a waiter; the loop re-checks the
    // count and the deadline after every wake-up.
    (void)lw__cond_wait_until(&d->space_cv, &d->space_mu, deadline);
  }
  atomic_fetch_sub(&d->space_waiters, 1);
  pthread_mutex_unlock(&d->space_mu);
  return st;
}

void lw__dag_unreserve(lw_dag_t *d, uint32_t n) { give_slots_back(d, n); }

// ---------------------------------------------------------------------------------------------
// The inbox (any thread)

lw_dag_cmd_t *lw__dag_cmd_new(lw_dag_cmd_kind_t kind, lw_run_t *run, uint32_t n_tasks) {
  lw_dag_cmd_t *c = malloc(sizeof(*c) + (size_t)n_tasks * sizeof(lw_dag_task_desc_t));
  if (!c) return NULL;
  memset(c, 0, sizeof(*c));  // the descriptions are the maker's to fill (dag.h)
  c->kind = kind;
  c->run = run;
  c->n_tasks = n_tasks;
  return c;
}

void lw__dag_post(lw_dag_t *d, lw_dag_cmd_t *cmd, int64_t now_ns) {
  lw_dag_cmd_t *head = atomic_load_explicit(&d->inbox, memory_order_relaxed);
  do {
    cmd->next = head;
  } while (!atomic_compare_exchange_weak_explicit(&d->inbox, &head, cmd, memory_order_release,
                                                  memory_order_relaxed));
  d->hooks.ring(d->hooks.ctx, now_ns);
}

// ---------------------------------------------------------------------------------------------
// Applying commands (the owner)

// Builds one task into a reserved slot. On a tensor-map failure the task is finished failed,
// which fails the run with that error (producers may already list it as a consumer, so it
// cannot just be dropped). Returns the task, PENDING, or NULL when it already ended.
static lw_task_t *build_task(lw_dag_t *d, lw_run_t *run, const lw_dag_task_desc_t *desc,
                             lw_group_t *group, lw_run_t **finished) {
  lw_task_t *t = &d->tasks[d->free_tasks[--d->n_free_tasks]];
  lw__counter_add_one_writer(&d->n_built, 1);  // a counter only, the owner its writer
  set_state(d, t, LW_TS_BUILDING);
  t->n_pending = 0;
  t->launched_chip = -1;
  t->n_unlaunched = 0;
  t->elide_chip = -1;
  t->elided = false;
  t->upstream_failed = 0;
  t->n_consumers = 0;
  t->next = NULL;
  t->ep = NULL;
  // A reused slot must not inherit its last task's cancellation or escalation.
  t->cancel_at = 0;
  t->seen_started_at = 0;
  t->escalated = LW_OK;
  t->run = run;
  t->task_id = ++run->n_tasks;
  t->kind = desc->kind;
  t->worker = desc->kind == LW_MB_TASK_SUB ? -1 : desc->worker;
  t->wc = desc->wc;
  t->wc_id = desc->wc_id;
  t->args = desc->args;
  t->timeout_ns = desc->timeout_ns;
  lw__task_report_begin(run, t->task_id, t->kind, callable_name(d, t), desc->submit_ns);
  // Set before the edges: members of one group get none between them.
  t->group = group;
  if (group) {
    group->members[group->n++] = t;
    group->n_open++;
  }
  tmap_edge_ctx_t edge_ctx = {d, t};
  for (uint32_t i = 0; i < desc->n_keys; ++i) {
    // The map skips NO_DEP tensors and NULL data: they are neither looked up nor recorded.
    if (lw__tmap_use(d->tmap, desc->key[i], desc->tag[i], (lw_tmap_ref_t){t->index, t->gen},
                     tmap_edge, &edge_ctx) != LW_OK) {
      set_state(d, t, LW_TS_PENDING);
      lw_error_t err;
      lw__error_set(&err, LW_RESOURCE_EXHAUSTED, -1, t->task_id,
                    "orch: out of memory while building task %llu of run %llu",
                    (unsigned long long)t->task_id, (unsigned long long)run->run_id);
      lw__task_finish(d, t, LW_RESOURCE_EXHAUSTED, &err, finished);
      return NULL;
    }
  }
  set_state(d, t, LW_TS_PENDING);
  return t;
}

static void apply_submit(lw_dag_t *d, lw_dag_cmd_t *c, lw_run_t **finished) {
  lw_task_t *t = build_task(d, c->run, &c->task[0], NULL, finished);
  // A task of a run that already stopped is built (it counts in the run) and skipped at once.
  if (t && t->n_pending == 0) {
    make_ready(d, t, finished);
  } else if (t) {
    maybe_elide(d, t, finished);  // its producers may all be posted to one chip already
  }
}

static void apply_group(lw_dag_t *d, lw_dag_cmd_t *c, lw_run_t **finished) {
  lw_group_t *g = calloc(1, sizeof(*g));
  lw_task_t **members = calloc(c->n_tasks, sizeof(*members));
  if (!g || !members) {
    free(g);
    free(members);
    // No group: each member is built and finished failed, which fails the run.
    for (uint32_t i = 0; i < c->n_tasks; ++i) {
      lw_task_t *t = build_task(d, c->run, &c->task[i], NULL, finished);
      if (!t) continue;
      lw_error_t err;
      lw__error_set(&err, LW_RESOURCE_EXHAUSTED, -1, t->task_id,
                    "orch: out of memory for a group of %u tasks", c->n_tasks);
      lw__task_finish(d, t, LW_RESOURCE_EXHAUSTED, &err, finished);
    }
    return;
  }
  g->members = members;
  // Every member is built before any can become ready: the commands apply on this thread
  // alone, so no member is made ready, poisoned or retired before the group is whole. Member
  // slots were reserved together, so building never waits.
  bool ok = true;
  g->n_open++;  // a hold: a member that ends early cannot free the group under this loop
  for (uint32_t i = 0; i < c->n_tasks; ++i) {
    if (!build_task(d, c->run, &c->task[i], g, finished)) ok = false;
  }
  if (!ok) {
    lw_error_t err;
    lw__error_set(&err, LW_RESOURCE_EXHAUSTED, -1, 0,
                  "a member of the group could not be built (out of memory)");
    poison_group(d, g, &err, finished);
  } else {
    uint32_t n = g->n;
    for (uint32_t i = 0; i < n; ++i) {
      lw_task_t *m = members[i];
      if (m->group == g && m->state == LW_TS_PENDING && m->n_pending == 0) {
        make_ready(d, m, finished);
      }
    }
  }
  // The hold goes last: making members ready may skip them (a stopped run), which poisons and
  // retires the whole group while the loop above still walks its members.
  if (--g->n_open == 0) {
    free(g->members);
    free(g);
  }
}

static void apply_orch_done(lw_dag_t *d, lw_dag_cmd_t *c, lw_run_t **finished) {
  lw_run_t *run = c->run;
  // The map's entries name this run's tasks; the next run starts with none (runs are ordered
  // by the orchestrator token, not by buffers).
  lw__tmap_clear(d->tmap);
  run->orch_done = true;
  if (c->status != LW_OK) {
    // The orch function's error is the run's first error unless a task failed before it
    // (first error wins). The run stops here: no task of it is dispatched any more (the sweep
    // and make_ready skip them POISONED), and the scheduler cancels what is in flight in the
    // same pass; those count failed whatever their kernels return.
    run_fail(d, run, c->status, &c->error, 0);
  }
  settle_if_done(run, finished);
}

static void scope_mismatch(lw_dag_t *d, lw_run_t *run, const char *what) {
  lw_error_t err;
  lw__error_set(&err, LW_INTERNAL, -1, 0, "run %llu: the tensor map refused a scope %s",
                (unsigned long long)run->run_id, what);
  run_fail(d, run, LW_INTERNAL, &err, 0);
}

static void apply(lw_dag_t *d, lw_dag_cmd_t *c, lw_run_t **finished) {
  switch (c->kind) {
    case LW_DAG_CMD_SUBMIT:
      apply_submit(d, c, finished);
      break;
    case LW_DAG_CMD_GROUP:
      apply_group(d, c, finished);
      break;
    case LW_DAG_CMD_SCOPE_BEGIN:
      // The submitter checked the depth (it keeps its own count), so neither can fail; if one
      // ever did, the map's scopes and the orch function's would disagree: fail the run.
      if (!lw__tmap_scope_begin(d->tmap)) scope_mismatch(d, c->run, "begin");
      break;
    case LW_DAG_CMD_SCOPE_END:
      if (!lw__tmap_scope_end(d->tmap)) scope_mismatch(d, c->run, "end");
      break;
    case LW_DAG_CMD_ORCH_DONE:
      apply_orch_done(d, c, finished);
      break;
  }
}

static lw_dag_cmd_t *take_inbox(lw_dag_t *d) {
  lw_dag_cmd_t *c = atomic_exchange_explicit(&d->inbox, NULL, memory_order_acquire);
  lw_dag_cmd_t *in_order = NULL;
  while (c) {  // the stack holds the newest first
    lw_dag_cmd_t *next = c->next;
    c->next = in_order;
    in_order = c;
    c = next;
  }
  return in_order;
}

bool lw__dag_step(lw_dag_t *d, lw_run_t **finished) {
  if (atomic_load_explicit(&d->inbox, memory_order_relaxed) == NULL) return false;
  if (d->has_owner && !pthread_equal(d->owner, pthread_self())) abort();  // a broken contract
  lw_dag_cmd_t *c = take_inbox(d);
  while (c) {
    lw_dag_cmd_t *next = c->next;
    apply(d, c, finished);
    free(c);
    c = next;
  }
  return true;
}

bool lw__dag_sweep_stopped(lw_dag_t *d, lw_run_t **finished) {
  uint32_t seq = atomic_load(&d->stop_seq);
  if (seq == d->stop_seen) return false;
  d->stop_seen = seq;
  bool progress = false;
  lw_task_queue_t *queues[LW_MAX_CHIPS + 2];
  uint32_t nq = 0;
  for (uint32_t i = 0; i < d->n_chips; ++i) queues[nq++] = &d->chip_q[i];
  queues[nq++] = &d->any_q;
  queues[nq++] = &d->sub_q;
  for (uint32_t qi = 0; qi < nq; ++qi) {
    lw_task_queue_t *q = queues[qi];
    lw_task_t *keep_head = NULL, *keep_tail = NULL, *stopped = NULL;
    uint32_t kept = 0;
    // Split the queue in order: tasks of live runs stay (FIFO kept), the others are skipped
    // after the queue is whole again (skipping may make other tasks ready and push them).
    for (lw_task_t *t = q->head, *next; t; t = next) {
      next = t->next;
      t->next = NULL;
      if (lw__run_stopped(t->run)) {
        t->next = stopped;
        stopped = t;
        continue;
      }
      if (keep_tail) {
        keep_tail->next = t;
      } else {
        keep_head = t;
      }
      keep_tail = t;
      kept++;
    }
    q->head = keep_head;
    q->tail = keep_tail;
    q->n = kept;
    while (stopped) {
      lw_task_t *t = stopped;
      stopped = t->next;
      t->next = NULL;
      progress = true;
      lw__task_skip(d, t, finished);
    }
  }
  // Ready groups: one of a stopped run is skipped whole (all-or-nothing still holds).
  for (lw_group_t **pp = &d->groups_head; *pp;) {
    lw_group_t *g = *pp;
    bool stopped = false;
    for (uint32_t i = 0; i < g->n; ++i) stopped |= lw__run_stopped(g->members[i]->run);
    if (!stopped) {
      pp = &g->next_ready;
      continue;
    }
    *pp = g->next_ready;
    progress = true;
    // The first member's skip poisons the others (all-or-nothing), which retires them and
    // frees the group: look at the first member only.
    lw_task_t *first = g->members[0];
    if (first->state == LW_TS_READY) lw__task_skip(d, first, finished);
  }
  d->groups_tail = NULL;
  for (lw_group_t *g = d->groups_head; g; g = g->next_ready) d->groups_tail = g;
  return progress;
}

void lw__dag_finish_all(lw_dag_t *d, lw_status_t st,
                        void (*describe)(void *ctx, const lw_task_t *t, lw_error_t *out),
                        void *ctx, lw_run_t **finished) {
  (void)lw__dag_step(d, finished);
  for (uint32_t i = 0; d->tasks && i < d->n_tasks_cap; ++i) {
    lw_task_t *t = &d->tasks[i];
    // lw__task_finish retires a task (FREE) before it returns, and may finish others (its
    // consumers, its group) on the way: those are FREE by the time the loop reaches them.
    if (t->state != LW_TS_BUILDING && t->state != LW_TS_PENDING && t->state != LW_TS_READY &&
        t->state != LW_TS_RUNNING) {
      continue;
    }
    lw_error_t err;
    describe(ctx, t, &err);
    lw__task_finish(d, t, st, &err, finished);
  }
  // Every task is FREE now: the queues and the ready groups would only point at retired tasks
  // and freed groups.
  for (uint32_t i = 0; i < d->n_chips; ++i) d->chip_q[i] = (lw_task_queue_t){0};
  d->any_q = (lw_task_queue_t){0};
  d->sub_q = (lw_task_queue_t){0};
  d->groups_head = d->groups_tail = NULL;
}

uint32_t lw__dag_live_tasks(const lw_dag_t *d) { return d->n_tasks_cap - d->n_free_tasks; }

// ---------------------------------------------------------------------------------------------
// Lifecycle

lw_status_t lw__dag_initialize(lw_dag_t *d, uint32_t n_tasks, uint32_t n_chips,
                               int64_t submit_timeout_ns, const lw_dag_hooks_t *hooks,
                               const lw_tmap_options_t *tmap_options, lw_error_t *err) {
  memset(d, 0, sizeof(*d));
  if (n_tasks == 0 || n_chips > LW_MAX_CHIPS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "dag: %u task slots and %u chips (1.. slots, at most %d chips)", n_tasks,
                         n_chips, LW_MAX_CHIPS);
  }
  d->hooks = *hooks;
  d->n_chips = n_chips;
  d->submit_timeout_ns = submit_timeout_ns;
  const char *elision = getenv("LW_WAIT_ELISION");
  d->elision = !(elision && strcmp(elision, "0") == 0);
  atomic_init(&d->inbox, NULL);
  atomic_init(&d->slots_free, n_tasks);
  atomic_init(&d->space_waiters, 0);
  atomic_init(&d->stop_seq, 0);
  pthread_mutex_init(&d->space_mu, NULL);
  // Monotonic: reserve's deadline comes from lw__now_ns, and a wall-clock step must not
  // stretch or cut the wait.
  lw__cond_init_monotonic(&d->space_cv);
  d->n_tasks_cap = n_tasks;
  d->tasks = calloc(n_tasks, sizeof(lw_task_t));
  d->free_tasks = calloc(n_tasks, sizeof(uint32_t));
  lw_tmap_options_t o = {0};
  if (tmap_options) o = *tmap_options;
  o.live = tmap_live;
  o.live_ctx = d;
  lw_status_t tst = lw__tmap_create(&o, &d->tmap);
  if (!d->tasks || !d->free_tasks || tst != LW_OK) {
    lw__dag_deinitialize(d);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "dag: out of memory for a ring of %u tasks", n_tasks);
  }
  for (uint32_t i = 0; i < n_tasks; ++i) {
    d->tasks[i].index = i;
    d->free_tasks[n_tasks - 1 - i] = i;
  }
  d->n_free_tasks = n_tasks;
  return LW_OK;
}

void lw__dag_set_owner(lw_dag_t *d, int64_t now_ns) {
  d->owner = pthread_self();
  d->has_owner = true;
  // A time read before this thread took the token may be older than one a pass before used:
  // then it is not taken, so the clock the passes use never goes back (a task's end is never
  // stamped before its post).
  if (now_ns > 0 && now_ns >= d->clock_ns) {
    d->clock_ns = now_ns;
    d->clock_uses = LW_DAG_CLOCK_USES;
  } else {
    d->clock_uses = 0;  // clock_ns keeps the last time used, for the check above
  }
}

void lw__dag_clock_expire(lw_dag_t *d) { d->clock_uses = 0; }

uint32_t lw__dag_n_waiting(const lw_dag_t *d) { return d->n_waiting; }

bool lw__dag_holds_ready(const lw_dag_t *d) {
  if (d->any_q.n != 0 || d->sub_q.n != 0 || d->groups_head != NULL) return true;
  for (uint32_t c = 0; c < d->n_chips; ++c) {
    if (d->chip_q[c].n != 0) return true;
  }
  return false;
}

int64_t lw__dag_now(lw_dag_t *d) {
  if (d->clock_uses == 0) {
    d->clock_ns = lw__now_ns();
    d->clock_uses = LW_DAG_CLOCK_USES;
  }
  d->clock_uses--;
  return d->clock_ns;
}

void lw__dag_deinitialize(lw_dag_t *d) {
  // Commands never applied: their tasks' pins go back.
  lw_dag_cmd_t *c = take_inbox(d);
  while (c) {
    lw_dag_cmd_t *next = c->next;
    if (c->kind == LW_DAG_CMD_SUBMIT || c->kind == LW_DAG_CMD_GROUP) {
      for (uint32_t i = 0; i < c->n_tasks; ++i) {
        d->hooks.unpin(d->hooks.ctx, c->task[i].wc, c->task[i].wc_id);
      }
    }
    free(c);
    c = next;
  }
  for (uint32_t i = 0; d->tasks && i < d->n_tasks_cap; ++i) free(d->tasks[i].consumers);
  free(d->tasks);
  free(d->free_tasks);
  free(d->finish_stack);
  free(d->mark_stack);
  if (d->tmap) lw__tmap_destroy(d->tmap);
  pthread_mutex_destroy(&d->space_mu);
  pthread_cond_destroy(&d->space_cv);
  memset(d, 0, sizeof(*d));
}
