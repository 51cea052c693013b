// tools/bench_chip.c — the L2 and L3 chips of the benches (see bench_chip.h).
#include "tools/bench_chip.h"

#include <stdio.h>
#include <stdlib.h>

#include "lanework/orch.h"
#include "lanework/worker.h"

typedef struct l2_driver {
  lw_bench_chip_t base;
  lw_chip_t *chip;
} l2_driver_t;

static lw_status_t l2_register_sync(lw_bench_chip_t *d, const lw_callable_t *c,
                                    lw_callable_handle_t *out) {
  return lw_chip_register(((l2_driver_t *)d)->chip, c, out);
}
static lw_status_t l2_register_async(lw_bench_chip_t *d, const lw_callable_t *c,
                                     lw_handle_t **out) {
  return lw_chip_register_async(((l2_driver_t *)d)->chip, c, out);
}
static lw_status_t l2_unregister(lw_bench_chip_t *d, lw_callable_handle_t h) {
  return lw_chip_unregister(((l2_driver_t *)d)->chip, h);
}
static lw_status_t l2_run(lw_bench_chip_t *d, lw_callable_handle_t h, const lw_args_t *a) {
  return lw_chip_run(((l2_driver_t *)d)->chip, h, a, NULL, NULL);
}
static lw_status_t l2_run_async(lw_bench_chip_t *d, lw_callable_handle_t h,
                                const lw_args_t *a, lw_handle_t **out) {
  return lw_chip_run_async(((l2_driver_t *)d)->chip, h, a, NULL, out);
}
static lw_status_t l2_stats(lw_bench_chip_t *d, lw_chip_stats_t *out) {
  out->struct_size = sizeof(*out);
  return lw_chip_stats(((l2_driver_t *)d)->chip, out);
}
// Page-aligned, as the worker's arena hands tensors out: a device may then use the memory in
// place (PoCL's CL_MEM_USE_HOST_PTR buffers are zero-copy only over well-aligned memory).
static void *l2_alloc(lw_bench_chip_t *d, size_t bytes) {
  (void)d;
  return aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
}
static void l2_free(lw_bench_chip_t *d, void *p) {
  (void)d;
  free(p);
}
static void l2_close(lw_bench_chip_t *d) {
  lw_chip_close(((l2_driver_t *)d)->chip);
  free(d);
}

// ---------------------------------------------------------------------------------------------
// L3: one chip child; every run is an orch function that submits one task.

#define L3_JOBS LW_BENCH_CHIP_JOBS

typedef struct l3_job {
  lw_callable_handle_t h;
  lw_args_t args;
} l3_job_t;

typedef struct l3_driver {
  lw_bench_chip_t base;
  lw_worker_t *w;
  // A job must outlive its orch function; the benches never have more than L3_JOBS runs in
  // flight, so a small ring of jobs reused round-robin is enough.
  l3_job_t jobs[L3_JOBS];
  unsigned next_job;
} l3_driver_t;

static lw_status_t l3_orch(lw_orch_t *o, void *user) {
  l3_job_t *j = user;
  return lw_orch_submit_next_level(o, j->h, &j->args, NULL, 0);
}

static l3_job_t *l3_job(l3_driver_t *d, lw_callable_handle_t h, const lw_args_t *a) {
  l3_job_t *j = &d->jobs[d->next_job++ % L3_JOBS];
  j->h = h;
  j->args = *a;
  return j;
}

static lw_status_t l3_register_sync(lw_bench_chip_t *d, const lw_callable_t *c,
                                    lw_callable_handle_t *out) {
  return lw_worker_register(((l3_driver_t *)d)->w, c, out);
}
static lw_status_t l3_register_async(lw_bench_chip_t *d, const lw_callable_t *c,
                                     lw_handle_t **out) {
  return lw_worker_register_async(((l3_driver_t *)d)->w, c, out);
}
static lw_status_t l3_unregister(lw_bench_chip_t *d, lw_callable_handle_t h) {
  return lw_worker_unregister(((l3_driver_t *)d)->w, h);
}
static lw_status_t l3_run(lw_bench_chip_t *d, lw_callable_handle_t h, const lw_args_t *a) {
  l3_driver_t *l3 = (l3_driver_t *)d;
  return lw_worker_run(l3->w, l3_orch, l3_job(l3, h, a), NULL);
}
static lw_status_t l3_run_async(lw_bench_chip_t *d, lw_callable_handle_t h,
                                const lw_args_t *a, lw_handle_t **out) {
  l3_driver_t *l3 = (l3_driver_t *)d;
  return lw_worker_run_async(l3->w, l3_orch, l3_job(l3, h, a), out);
}
static lw_status_t l3_stats(lw_bench_chip_t *d, lw_chip_stats_t *out) {
  lw_worker_stats_t *ws = calloc(1, sizeof(*ws));
  if (!ws) return LW_RESOURCE_EXHAUSTED;
  ws->struct_size = sizeof(*ws);
  lw_status_t st = lw_worker_stats(((l3_driver_t *)d)->w, ws);
  if (st == LW_OK) *out = ws->child[0];
  free(ws);
  return st;
}
static void *l3_alloc(lw_bench_chip_t *d, size_t bytes) {
  return lw_worker_alloc(((l3_driver_t *)d)->w, bytes);
}
static void l3_free(lw_bench_chip_t *d, void *p) { lw_worker_free(((l3_driver_t *)d)->w, p); }
static void l3_close(lw_bench_chip_t *d) {
  lw_worker_destroy(((l3_driver_t *)d)->w);
  free(d);
}

static void pin_lanes(lw_chip_config_t *c, const char *backend, bool pin) {
  snprintf(c->backend, sizeof(c->backend), "%s", backend);
  if (pin) {
    c->run_lane_cpu = 0;
    c->register_lane_cpu = 1;
  }
}

static lw_status_t open_l3(const lw_bench_chip_opts_t *o, lw_bench_chip_t **out) {
  l3_driver_t *d = calloc(1, sizeof(*d));
  if (!d) return LW_RESOURCE_EXHAUSTED;
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  // Tensors plus two copies of the largest image (registered, and the next register).
  cfg.arena_bytes = o->arena_bytes + (64ull << 20);
  if (o->respawn_unbounded) cfg.respawn_max = 0;
  pin_lanes(&cfg.chip, o->backend, o->pin);
  lw_status_t st = lw_worker_create(&cfg, &d->w);
  if (st != LW_OK) {
    free(d);
    return st;
  }
  d->base = (lw_bench_chip_t){3, cfg.cancel_grace_ns, l3_register_sync, l3_register_async,
                              l3_unregister, l3_run, l3_run_async, l3_stats, l3_alloc, l3_free,
                              l3_close};
  *out = &d->base;
  return LW_OK;
}

lw_status_t lw__bench_chip_open(const lw_bench_chip_opts_t *o, lw_bench_chip_t **out) {
  *out = NULL;
  if (o->level == 3) return open_l3(o, out);
  if (o->level != 2) {
    fprintf(stderr, "lanework bench: level %d does not exist (2 or 3)\n", o->level);
    return LW_INVALID_ARGUMENT;
  }
  l2_driver_t *d = calloc(1, sizeof(*d));
  if (!d) return LW_RESOURCE_EXHAUSTED;
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  pin_lanes(&cfg, o->backend, o->pin);
  lw_status_t st = lw_chip_open(&cfg, &d->chip);
  if (st != LW_OK) {
    free(d);
    return st;
  }
  d->base = (lw_bench_chip_t){2, 0, l2_register_sync, l2_register_async, l2_unregister, l2_run,
                              l2_run_async, l2_stats, l2_alloc, l2_free, l2_close};
  *out = &d->base;
  return LW_OK;
}
