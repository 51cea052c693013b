// tests/parent/rlimit_as_probe.c — a program started under a finite RLIMIT_AS (by
// test_rlimit_as.c), so liblanework reserves its address range under that limit. The program
// must keep most of its address space: it maps argv[1] GiB of its own (PROT_NONE, which counts
// against the limit like anything else), then creates and uses a worker. Exit status: 0, or
// the step that failed.
#include <stdlib.h>
#include <sys/mman.h>

#include "lanework/worker.h"

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  size_t bytes = (size_t)atoi(argv[1]) << 30;
  void *own = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (own == MAP_FAILED) return 10;
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 64ull << 20;
  lw_worker_t *w = NULL;
  if (lw_worker_create(&cfg, &w) != LW_OK) return 11;
  void *p = lw_worker_alloc(w, 4096);
  if (p == NULL) return 12;
  lw_worker_destroy(w);
  munmap(own, bytes);
  return 0;
}
