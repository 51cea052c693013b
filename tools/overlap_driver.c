// tools/overlap_driver.c — L2 and L3 drivers for bench_overlap.c.
#include "tools/overlap_driver.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct l2_driver {
  lw_overlap_driver_t base;
  lw_chip_t *chip;
} l2_driver_t;

static lw_status_t l2_register_sync(lw_overlap_driver_t *d, const lw_callable_t *c,
                                    lw_callable_handle_t *out) {
  return lw_chip_register(((l2_driver_t *)d)->chip, c, out);
}
static lw_status_t l2_register_async(lw_overlap_driver_t *d, const lw_callable_t *c,
                                     lw_handle_t **out) {
  return lw_chip_register_async(((l2_driver_t *)d)->chip, c, out);
}
static lw_status_t l2_unregister(lw_overlap_driver_t *d, lw_callable_handle_t h) {
  return lw_chip_unregister(((l2_driver_t *)d)->chip, h);
}
static lw_status_t l2_run(lw_overlap_driver_t *d, lw_callable_handle_t h, const lw_args_t *a) {
  return lw_chip_run(((l2_driver_t *)d)->chip, h, a, NULL, NULL);
}
static lw_status_t l2_run_async(lw_overlap_driver_t *d, lw_callable_handle_t h,
                                const lw_args_t *a, lw_handle_t **out) {
  return lw_chip_run_async(((l2_driver_t *)d)->chip, h, a, NULL, out);
}
static void *l2_alloc(lw_overlap_driver_t *d, size_t bytes) {
  (void)d;
  return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}
static void l2_free(lw_overlap_driver_t *d, void *p) {
  (void)d;
  free(p);
}
static void l2_close(lw_overlap_driver_t *d) {
  lw_chip_close(((l2_driver_t *)d)->chip);
  free(d);
}

lw_status_t lw__overlap_driver_open(int level, size_t arena_bytes, lw_overlap_driver_t **out) {
  (void)arena_bytes;
  *out = NULL;
  if (level != 2) {
    fprintf(stderr, "lanework bench overlap: level %d is not available in this build\n", level);
    return LW_UNAVAILABLE;
  }
  l2_driver_t *d = calloc(1, sizeof(*d));
  if (!d) return LW_RESOURCE_EXHAUSTED;
  lw_status_t st = lw_chip_open(NULL, &d->chip);
  if (st != LW_OK) {
    free(d);
    return st;
  }
  d->base = (lw_overlap_driver_t){l2_register_sync, l2_register_async, l2_unregister, l2_run,
                                  l2_run_async, l2_alloc, l2_free, l2_close};
  *out = &d->base;
  return LW_OK;
}
