// tools/dispatch_l3.c — the L3 DAG figures of `lanework bench dispatch` (the per-task cost
// inside a 1000-task DAG, and where it went) and, for `bench trace`, those with a whole
// lw_worker_run of one no-op task (orchestrator thread, scheduler, mailbox, chip child, run lane
// and back) on a sim worker of its own.
#include "tools/dispatch_l3.h"

#include <stdlib.h>
#include <unistd.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "tools/bench.h"

#define DAG_TASKS 1000
#define DAG_WIDTH 10

typedef struct dag_job {
  lw_callable_handle_t noop;
  uint8_t *bufs;   // 2 x DAG_WIDTH 64-byte dependency carriers
  uint8_t *fresh;  // DAG_TASKS 64-byte buffers, one per task (raw_only_dag)
  int n;
} dag_job_t;

static lw_status_t one_task(lw_orch_t *o, void *user) {
  const lw_dispatch_l3_side_t *s = user;
  return lw_orch_submit_next_level(o, s->empty, NULL, NULL, 0);
}

lw_status_t lw__dispatch_l3_open(const char *backend, const lw_callable_t *empty,
                                 lw_dispatch_l3_side_t *out) {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 4ull << 20;
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "%s", backend);
  LW_RETURN_IF_ERROR(lw_worker_create(&cfg, &out->w));
  return lw_worker_register(out->w, empty, &out->empty);
}

lw_status_t lw__dispatch_l3_sample(lw_dispatch_l3_side_t *s, long n, double *v) {
  for (long i = 0; i < n; ++i) {
    double t0 = lw__bench_now_us();
    LW_RETURN_IF_ERROR(lw_worker_run(s->w, one_task, s, NULL));
    if (v) v[i] = lw__bench_now_us() - t0;
  }
  return LW_OK;
}

// Task i's input (layer > 0) and output in a layered DAG. Layered: layers of DAG_WIDTH tasks
// over two rows of buffers, so each task reads one output of the layer before and writes a
// buffer the layer before read (write-after-read) and the one before that wrote
// (write-after-write). Fresh (raw_only): every task writes its own buffer, so only the
// read-after-write edges remain.
static void layer_bufs(const dag_job_t *j, int i, bool fresh, uint8_t **in, uint8_t **out) {
  int layer = i / DAG_WIDTH, col = i % DAG_WIDTH, next = (col + 1) % DAG_WIDTH;
  if (fresh) {
    *in = j->fresh + 64 * ((layer - 1) * DAG_WIDTH + next);
    *out = j->fresh + 64 * i;
  } else {
    *in = j->bufs + 64 * (((layer + 1) % 2) * DAG_WIDTH + next);
    *out = j->bufs + 64 * ((layer % 2) * DAG_WIDTH + col);
  }
}

static lw_status_t submit_layers(lw_orch_t *o, const dag_job_t *j, bool fresh) {
  for (int i = 0; i < j->n; ++i) {
    uint8_t *in, *out;
    layer_bufs(j, i, fresh, &in, &out);
    lw_args_t a;
    lw_args_init(&a);
    if (i >= DAG_WIDTH) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, in, 64, LW_TAG_INPUT));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, out, 64, LW_TAG_OUTPUT_EXISTING));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->noop, &a, NULL, 0));
  }
  return LW_OK;
}

static lw_status_t layered_dag(lw_orch_t *o, void *user) { return submit_layers(o, user, false); }

static lw_status_t raw_only_dag(lw_orch_t *o, void *user) { return submit_layers(o, user, true); }

// A chain: every task reads and writes the same buffer on chip 0, so each one depends on the
// one before it (what wait elision, DESIGN 4.5, is about).
static lw_status_t chain(lw_orch_t *o, void *user) {
  dag_job_t *j = user;
  for (int i = 0; i < j->n; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->bufs, 64, LW_TAG_INOUT));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->noop, &a, NULL, 0));
  }
  return LW_OK;
}

#define DAG_RUNS LW_DISPATCH_L3_RUNS

// The median over DAG_RUNS runs of fn (j->n tasks each) of the time per task. With where:
// also where that time went (see lw_dispatch_l3_result_t).
static lw_status_t per_task_us(lw_worker_t *w, lw_orch_fn fn, dag_job_t *j, double *out,
                               lw_dispatch_l3_result_t *where) {
  double per[DAG_RUNS], sum = 0;
  lw_bench_times_t before = {0}, after = {0};
  // The worker's processes are not ours: name them (the chip servers and children).
  int32_t ids[LW_MAX_CHIPS + LW_MAX_SUBS + 3];
  pid_t roots[LW_MAX_CHIPS + LW_MAX_SUBS + 3];
  uint32_t n_roots = lw_worker_process_ids(w, ids, LW_MAX_CHIPS + LW_MAX_SUBS + 3);
  for (uint32_t i = 0; i < n_roots; ++i) roots[i] = ids[i];
  if (where) (void)lw__bench_times_read_with(gettid(), false, roots, n_roots, &before);
  for (int r = 0; r < DAG_RUNS; ++r) {
    double t0 = lw__bench_now_us();
    lw_status_t st = lw_worker_run(w, fn, j, NULL);
    if (st != LW_OK) {
      lw__bench_times_free(&before);
      return st;
    }
    per[r] = (lw__bench_now_us() - t0) / j->n;
    sum += per[r];
  }
  *out = lw__bench_median(per, DAG_RUNS);
  if (where) {
    (void)lw__bench_times_read_with(gettid(), true, roots, n_roots, &after);
    lw_bench_role_times_t spent;
    lw__bench_times_diff(&after, &before, &spent);
    lw__bench_times_free(&before);
    lw__bench_times_free(&after);
    where->where_ok = spent.ok;
    where->mean_per_task_us = sum / DAG_RUNS;
    for (int r = 0; r < DAG_RUNS; ++r) where->runs_per_task_us[r] = per[r];
    double tasks = (double)DAG_RUNS * j->n;
    for (int role = 0; role < LW_BENCH_ROLE_COUNT; ++role) {
      where->cpu_us_per_task[role] = (double)spent.cpu_ns[role] / 1e3 / tasks;
      where->wait_us_per_task[role] = (double)spent.wait_ns[role] / 1e3 / tasks;
      where->sleeps_per_1000_tasks[role] = (double)spent.sleeps[role] * 1000 / tasks;
    }
  }
  return LW_OK;
}

// The DAG figures on w, whose callable empty ignores its arguments.
static int dags(lw_worker_t *w, dag_job_t *j, lw_dispatch_l3_result_t *out) {
  j->bufs = lw_worker_alloc(w, 64 * 2 * DAG_WIDTH);
  j->fresh = lw_worker_alloc(w, 64 * DAG_TASKS);
  int rc = 1;
  if (!j->bufs || !j->fresh) {
    out->why = "arena allocation failed";
    goto done;
  }
  j->n = DAG_TASKS;
  if (per_task_us(w, layered_dag, j, &out->per_task_us, out) != LW_OK) {
    out->why = "the DAG run failed";
    goto done;
  }
  if (per_task_us(w, raw_only_dag, j, &out->raw_only_per_task_us, NULL) != LW_OK) {
    out->why = "the read-after-write-only DAG run failed";
    goto done;
  }
  if (per_task_us(w, chain, j, &out->chain_per_task_us, NULL) != LW_OK) {
    out->why = "the chain run failed";
    goto done;
  }
  out->dag_tasks = DAG_TASKS;
  rc = 0;
done:
  lw_worker_free(w, j->bufs);
  lw_worker_free(w, j->fresh);
  return rc;
}

int lw__dispatch_l3_dags(lw_dispatch_l3_side_t *s, lw_dispatch_l3_result_t *out) {
  dag_job_t j = {s->empty, NULL, NULL, 1};
  return dags(s->w, &j, out);
}

int lw__dispatch_l3(long iters, lw_dispatch_l3_result_t *out) {
  lw_callable_t noop;
  if (!lw__bench_load_kernel("noop", &noop)) {
    out->why = "kernel noop not found";
    return 1;
  }
  lw_dispatch_l3_side_t side = {0};
  int rc = 1;
  double *v = malloc(sizeof(double) * (size_t)iters);
  lw_status_t st = lw__dispatch_l3_open("sim", &noop, &side);
  if (st != LW_OK || !v) {
    out->why = "worker setup failed";
    goto done;
  }
  st = lw__dispatch_l3_sample(&side, 200, NULL);
  if (st == LW_OK) st = lw__dispatch_l3_sample(&side, iters, v);
  if (st != LW_OK) {
    out->why = "an empty run failed";
    goto done;
  }
  out->empty_p50_us = lw__bench_quantile(v, (size_t)iters, 0.5);
  out->empty_p99_us = lw__bench_quantile(v, (size_t)iters, 0.99);
  rc = lw__dispatch_l3_dags(&side, out);
done:
  free(v);
  lw_worker_destroy(side.w);
  lw_callable_free_loaded(&noop);
  return rc;
}
