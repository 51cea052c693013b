// tools/bench_parallel.c — `lanework bench parallel`: does a worker of N chips use them? DAG
// shapes of LW_ANY_CHIP tasks of one fixed length (the sleep kernel: no CPU used, so the
// machine's CPU count does not decide) on sim workers of 2 and 4 chips. Each shape is a list
// of tasks, each writing a 64-byte buffer of its own and reading the outputs of at most two
// earlier tasks (LW_TAG_INPUT), so the dependencies are exactly those edges:
//   independent  N tasks, no edges;
//   layered      L layers of W tasks, task (l, c) reads (l-1, c) and (l-1, (c+1) mod W);
//   fan-out      G groups of one producer and R readers of its output (groups independent);
//   chain        each task reads the one before.
// ideal wall = max(critical path, ceil(tasks / chips)) x task time; efficiency = ideal /
// measured (the run report's wall, median over --runs); tasks per chip from the task reports
// of the median run.
#include <stdlib.h>
#include <string.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "tools/bench_sim_only.h"

#define MAX_TASKS 64
#define MAX_RUNS 100  // --runs at most

typedef struct shape {
  const char *name;
  const char *about;  // its size, for the text table
  int n;
  int in[MAX_TASKS][2];  // producers (task indices), -1 for none
} shape_t;

typedef struct par_job {
  const shape_t *s;
  lw_callable_handle_t sleep;
  uint64_t task_us;
  uint8_t *bufs;  // MAX_TASKS 64-byte outputs
} par_job_t;

static void shape_add(shape_t *s, int a, int b) {
  s->in[s->n][0] = a;
  s->in[s->n][1] = b;
  s->n++;
}

// The four shapes; returns how many.
static int make_shapes(shape_t *out) {
  memset(out, 0, 4 * sizeof(*out));
  out[0].name = "independent";
  out[0].about = "16 tasks";
  for (int i = 0; i < 16; ++i) shape_add(&out[0], -1, -1);
  enum { L = 4, W = 8 };
  out[1].name = "layered";
  out[1].about = "4 layers of 8, each reading 2";
  for (int l = 0; l < L; ++l) {
    for (int c = 0; c < W; ++c) {
      if (l == 0) shape_add(&out[1], -1, -1);
      else shape_add(&out[1], (l - 1) * W + c, (l - 1) * W + (c + 1) % W);
    }
  }
  enum { G = 3, R = 8 };
  out[2].name = "fan-out";
  out[2].about = "3 x (1 producer, 8 readers)";
  for (int g = 0; g < G; ++g) {
    int producer = out[2].n;
    shape_add(&out[2], -1, -1);
    for (int r = 0; r < R; ++r) shape_add(&out[2], producer, -1);
  }
  out[3].name = "chain";
  out[3].about = "8 tasks";
  for (int i = 0; i < 8; ++i) shape_add(&out[3], i - 1, -1);
  return 4;
}

// The longest path in tasks (producers always come earlier).
static int critical_path(const shape_t *s) {
  int depth[MAX_TASKS], longest = 0;
  for (int i = 0; i < s->n; ++i) {
    depth[i] = 1;
    for (int k = 0; k < 2; ++k) {
      int p = s->in[i][k];
      if (p >= 0 && depth[p] + 1 > depth[i]) depth[i] = depth[p] + 1;
    }
    if (depth[i] > longest) longest = depth[i];
  }
  return longest;
}

static lw_status_t submit_shape(lw_orch_t *o, void *user) {
  const par_job_t *j = user;
  for (int i = 0; i < j->s->n; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    for (int k = 0; k < 2; ++k) {
      int p = j->s->in[i][k];
      if (p >= 0) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->bufs + 64 * p, 64, LW_TAG_INPUT));
    }
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->bufs + 64 * i, 64, LW_TAG_OUTPUT_EXISTING));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->task_us));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->sleep, &a, NULL, LW_ANY_CHIP));
  }
  return LW_OK;
}

typedef struct par_row {
  const shape_t *s;
  int chips;
  int critical_path;
  double ideal_us;
  double wall_us[MAX_RUNS];  // each run's, in order
  double median_us, min_us, max_us;
  double efficiency, eff_min, eff_max;
  int tasks_per_chip[LW_MAX_CHIPS];  // of the median run
} par_row_t;

// One run of the shape; its wall and, with per_chip, where its tasks ran.
static lw_status_t run_once(lw_worker_t *w, par_job_t *j, double *wall_us, int *per_chip) {
  lw_handle_t *h = NULL;
  LW_RETURN_IF_ERROR(lw_worker_run_async(w, submit_shape, j, &h));
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
  lw_run_report_t rep;
  if (st == LW_OK) st = lw_handle_run_report(h, &rep);
  if (st == LW_OK && rep.status != LW_OK) st = rep.status;
  lw_task_report_t tasks[MAX_TASKS];
  size_t n = 0;
  if (st == LW_OK) st = lw_handle_run_tasks(h, tasks, MAX_TASKS, &n);
  if (st == LW_OK) {
    *wall_us = (double)rep.wall_ns / 1e3;
    for (size_t i = 0; i < n && i < MAX_TASKS; ++i) {
      int c = tasks[i].worker_id;
      if (c >= 0 && c < LW_MAX_CHIPS) per_chip[c]++;
    }
  }
  lw_handle_release(h);
  return st;
}

static lw_status_t measure(lw_worker_t *w, par_job_t *j, int runs, par_row_t *row) {
  int per_chip[MAX_RUNS][LW_MAX_CHIPS];
  memset(per_chip, 0, sizeof(per_chip[0]) * (size_t)runs);
  double warm;
  int warm_chips[LW_MAX_CHIPS] = {0};
  LW_RETURN_IF_ERROR(run_once(w, j, &warm, warm_chips));  // not counted
  for (int r = 0; r < runs; ++r) {
    LW_RETURN_IF_ERROR(run_once(w, j, &row->wall_us[r], per_chip[r]));
  }
  row->median_us = lw__bench_median(row->wall_us, (size_t)runs);
  lw__bench_spread(row->wall_us, (size_t)runs, &row->min_us, &row->max_us);
  row->efficiency = row->ideal_us / row->median_us;
  row->eff_min = row->ideal_us / row->max_us;
  row->eff_max = row->ideal_us / row->min_us;
  // The run closest to the median gives the placement.
  int best = 0;
  for (int r = 1; r < runs; ++r) {
    double d = row->wall_us[r] - row->median_us, e = row->wall_us[best] - row->median_us;
    if (d * d < e * e) best = r;
  }
  memcpy(row->tasks_per_chip, per_chip[best], sizeof(row->tasks_per_chip));
  return LW_OK;
}

// Every shape on a worker of chips chips; rows[0 .. n_shapes).
static int run_chips(int chips, const lw_callable_t *sleep, const shape_t *shapes, int n_shapes,
                     const lw_bench_opts_t *o, par_row_t *rows) {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = (uint32_t)chips;
  cfg.arena_bytes = 4ull << 20;
  lw_worker_t *w = NULL;
  par_job_t j = {.task_us = (uint64_t)o->task_us};
  lw_status_t st = lw_worker_create(&cfg, &w);
  if (st == LW_OK) st = lw_worker_register(w, sleep, &j.sleep);
  if (st == LW_OK) {
    j.bufs = lw_worker_alloc(w, 64 * MAX_TASKS);
    if (!j.bufs) st = LW_RESOURCE_EXHAUSTED;
  }
  for (int s = 0; st == LW_OK && s < n_shapes; ++s) {
    lw__bench_progress("%d chips: %s", chips, shapes[s].name);
    par_row_t *row = &rows[s];
    row->s = &shapes[s];
    row->chips = chips;
    row->critical_path = critical_path(&shapes[s]);
    int per_chip = (shapes[s].n + chips - 1) / chips;
    int steps = row->critical_path > per_chip ? row->critical_path : per_chip;
    row->ideal_us = (double)steps * (double)o->task_us;
    j.s = &shapes[s];
    st = measure(w, &j, o->trials, row);
  }
  if (j.bufs) lw_worker_free(w, j.bufs);
  lw_worker_destroy(w);
  if (st != LW_OK) return lw__bench_fail("bench parallel", st);
  return 0;
}

int lw__bench_parallel(const lw_bench_opts_t *o) {
  int chip_counts[2] = {2, 4}, n_counts = 2;
  if (o->chips > 0) {
    chip_counts[0] = o->chips;
    n_counts = 1;
  }
  shape_t shapes[4];
  int n_shapes = make_shapes(shapes);
  lw_callable_t sleep;
  if (!lw__bench_load_kernel("sleep", &sleep)) return 1;
  par_row_t *rows = calloc((size_t)(n_counts * n_shapes), sizeof(par_row_t));
  int rc = rows ? 0 : 1;
  for (int c = 0; rc == 0 && c < n_counts; ++c) {
    rc = run_chips(chip_counts[c], &sleep, shapes, n_shapes, o, rows + c * n_shapes);
  }
  lw_callable_free_loaded(&sleep);
  if (rc != 0) {
    free(rows);
    return rc;
  }
  lw__bench_progress_end();
  printf("LW_ANY_CHIP tasks of %ld us (sleep kernel) on sim workers; median of %d runs\n",
         o->task_us, o->trials);
  printf("%-12s %5s %6s %5s %10s %10s %10s %-18s  %s\n", "shape", "chips", "tasks", "path",
         "ideal_us", "wall_us", "efficiency", "(min..max)", "tasks per chip");
  for (int i = 0; i < n_counts * n_shapes; ++i) {
    const par_row_t *r = &rows[i];
    char spread[32], per[64];
    snprintf(spread, sizeof(spread), "(%.2f..%.2f)", r->eff_min, r->eff_max);
    size_t len = 0;
    per[0] = '\0';
    for (int c = 0; c < r->chips && len < sizeof(per); ++c) {
      len += (size_t)snprintf(per + len, sizeof(per) - len, "%s%d", c ? " " : "",
                              r->tasks_per_chip[c]);
    }
    printf("%-12s %5d %6d %5d %10.0f %10.0f %10.2f %-18s  %s\n", r->s->name, r->chips, r->s->n,
           r->critical_path, r->ideal_us, r->median_us, r->efficiency, spread, per);
  }
  printf("ideal = max(critical path, ceil(tasks / chips)) x task time; efficiency = ideal / "
         "wall\n");
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "parallel");
    lw__json_kv_int(&j, "task_us", o->task_us);
    lw__json_kv_int(&j, "runs", o->trials);
    lw__json_key(&j, "rows");
    lw__json_begin_array(&j);
    for (int i = 0; i < n_counts * n_shapes; ++i) {
      const par_row_t *r = &rows[i];
      lw__json_begin_object(&j);
      lw__json_kv_string(&j, "shape", r->s->name);
      lw__json_kv_string(&j, "about", r->s->about);
      lw__json_kv_int(&j, "chips", r->chips);
      lw__json_kv_int(&j, "tasks", r->s->n);
      lw__json_kv_int(&j, "critical_path", r->critical_path);
      lw__json_kv_fixed(&j, "ideal_us", r->ideal_us, 1);
      lw__bench_json_spread(&j, "wall_us", r->median_us, r->min_us, r->max_us, 1);
      lw__bench_json_spread(&j, "efficiency", r->efficiency, r->eff_min, r->eff_max, 3);
      lw__json_key(&j, "runs_wall_us");
      lw__json_begin_array(&j);
      for (int k = 0; k < o->trials; ++k) lw__json_fixed(&j, r->wall_us[k], 1);
      lw__json_end_array(&j);
      lw__json_key(&j, "tasks_per_chip");
      lw__json_begin_array(&j);
      for (int c = 0; c < r->chips; ++c) lw__json_int(&j, r->tasks_per_chip[c]);
      lw__json_end_array(&j);
      lw__json_end_object(&j);
    }
    lw__json_end_array(&j);
    rc = lw__bench_json_end(&j, "parallel");
  }
  free(rows);
  return rc;
}
