// tools/bench_backend.c — see bench_backend.h.
#include "tools/bench_backend.h"

#include <string.h>

const lw_bench_backend_t *lw__bench_backend_find(const char *name) {
  static const lw_bench_backend_t *const rows[] = {
      &lw__bench_backend_sim,
#ifdef LW_HAVE_OPENCL
      &lw__bench_backend_opencl,
#endif
      &lw__bench_backend_cuda,
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); ++i) {
    if (name && strcmp(rows[i]->name, name) == 0) return rows[i];
  }
  return NULL;
}
