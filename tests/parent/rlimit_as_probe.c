// tests/parent/rlimit_as_probe.c — a program started under a finite RLIMIT_AS (by
// test_rlimit_as.c), so liblanework reserves its address range under that limit.
//   rlimit_as_probe GIB: the program must keep most of its address space: it maps GIB GiB of
//     its own (PROT_NONE, which counts against the limit like anything else), then creates and
//     uses a worker. Exit status: 0, or the step that failed.
//   rlimit_as_probe arena MIB: creates a worker whose arena is MIB MiB, more than the limit
//     leaves; prints the failed create's status name and message on two lines to stdout and
//     exits 0 (20 when the create succeeded).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lanework/worker.h"

static int arena_too_big(uint64_t mib) {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = mib << 20;
  lw_worker_t *w = NULL;
  lw_status_t st = lw_worker_create(&cfg, &w);
  if (st == LW_OK) {
    lw_worker_destroy(w);
    return 20;
  }
  printf("%s\n%s\n", lw_status_name(st), lw_last_error()->message);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "arena") == 0) return arena_too_big(strtoull(argv[2], NULL, 10));
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
