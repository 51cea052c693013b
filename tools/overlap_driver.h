// tools/overlap_driver.h — the overlap benchmark's view of "a chip": L2 (lw_chip_t) or L3
// (lw_worker_t running one-task orch functions). Same trial code for both levels.
#ifndef LANEWORK_TOOLS_OVERLAP_DRIVER_H_
#define LANEWORK_TOOLS_OVERLAP_DRIVER_H_

#include <stdbool.h>

#include "lanework/lanework.h"

typedef struct lw_overlap_driver lw_overlap_driver_t;
struct lw_overlap_driver {
  lw_status_t (*register_sync)(lw_overlap_driver_t *d, const lw_callable_t *c,
                               lw_callable_handle_t *out);
  lw_status_t (*register_async)(lw_overlap_driver_t *d, const lw_callable_t *c,
                                lw_handle_t **out);
  lw_status_t (*unregister)(lw_overlap_driver_t *d, lw_callable_handle_t h);
  lw_status_t (*run)(lw_overlap_driver_t *d, lw_callable_handle_t h, const lw_args_t *a);
  lw_status_t (*run_async)(lw_overlap_driver_t *d, lw_callable_handle_t h, const lw_args_t *a,
                           lw_handle_t **out);
  void *(*alloc)(lw_overlap_driver_t *d, size_t bytes);
  void (*free)(lw_overlap_driver_t *d, void *p);
  void (*close)(lw_overlap_driver_t *d);
};

// level 2: an lw_chip_t; level 3: an lw_worker_t with one chip child; either on backend
// ("sim", "opencl"), device 0. arena_bytes: the tensor memory the benchmark needs. pin: run
// lane on CPU 0, register lane on CPU 1.
lw_status_t lw__overlap_driver_open(int level, const char *backend, size_t arena_bytes, bool pin,
                                    lw_overlap_driver_t **out);

#endif  // LANEWORK_TOOLS_OVERLAP_DRIVER_H_
