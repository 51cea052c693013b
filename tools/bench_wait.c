// tools/bench_wait.c — `lanework bench wait`: the cost of lw_handle_done and of
// lw_handle_wait on a handle that already finished (seed 001: 185 ns after the fix, 15.8 us
// before). Both must stay syscall-free.
#include <stdlib.h>

#include "tools/bench_sim_only.h"

#define BATCH 1000

int lw__bench_wait(const lw_bench_opts_t *o) {
  long iters = o->iters > 0 ? o->iters : 1000000;
  long batches = iters / BATCH > 0 ? iters / BATCH : 1;
  lw_callable_t noop;
  if (!lw__bench_load_kernel("noop", &noop)) return 1;
  lw_chip_t *chip = NULL;
  lw_handle_t *h = NULL;
  lw_callable_handle_t ch;
  int rc = 1;
  lw_status_t st = lw_chip_open(NULL, &chip);
  if (st == LW_OK) st = lw_chip_register(chip, &noop, &ch);
  if (st == LW_OK) st = lw_chip_run_async(chip, ch, NULL, NULL, &h);
  if (st == LW_OK) st = lw_handle_wait(h, LW_WAIT_FOREVER);
  if (st != LW_OK) {
    rc = lw__bench_fail("setting up a finished handle", st);
    goto out;
  }
  double *done_ns = malloc(sizeof(double) * (size_t)batches);
  double *wait_ns = malloc(sizeof(double) * (size_t)batches);
  if (!done_ns || !wait_ns) {
    free(done_ns);
    free(wait_ns);
    goto out;
  }
  lw__bench_progress("%ld batches of %d calls", batches, BATCH);
  volatile unsigned sink = 0;
  for (long b = 0; b < batches; ++b) {
    double t0 = lw__bench_now_us();
    for (int i = 0; i < BATCH; ++i) sink += lw_handle_done(h);
    double t1 = lw__bench_now_us();
    for (int i = 0; i < BATCH; ++i) sink += (unsigned)lw_handle_wait(h, LW_WAIT_FOREVER);
    double t2 = lw__bench_now_us();
    done_ns[b] = (t1 - t0) * 1000.0 / BATCH;
    wait_ns[b] = (t2 - t1) * 1000.0 / BATCH;
  }
  double done_p50 = lw__bench_median(done_ns, (size_t)batches);
  double wait_p50 = lw__bench_median(wait_ns, (size_t)batches);
  lw__bench_progress_end();
  printf("lw_handle_done on a finished handle:       %.1f ns (median of %ld batches of %d)\n",
         done_p50, batches, BATCH);
  printf("lw_handle_wait on a finished handle:       %.1f ns\n", wait_p50);
  printf("seed 001 reference: 185 ns (fast path) vs 15.8 us (blocking path)\n");
  rc = 0;
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "wait");
    lw__json_kv_int(&j, "iters", batches * BATCH);
    lw__json_kv_fixed(&j, "done_ns", done_p50, 2);
    lw__json_kv_fixed(&j, "wait_finished_ns", wait_p50, 2);
    lw__json_kv_fixed(&j, "wait_done_ns", done_p50 > wait_p50 ? done_p50 : wait_p50, 2);
    rc = lw__bench_json_end(&j, "wait");
  }
  free(done_ns);
  free(wait_ns);
out:
  lw_handle_release(h);
  lw_chip_close(chip);
  lw_callable_free_loaded(&noop);
  return rc;
}
