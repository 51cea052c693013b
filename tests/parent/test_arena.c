// tests/parent/test_arena.c — the shared arena (parent/arena.h) alone: no worker, no
// processes. Blocks are aligned, never overlap, come back whole when freed (neighbours
// coalesce, so the whole arena can be taken again), a foreign or doubly freed pointer is
// refused, exhaustion is a NULL (never a block past the end), the memory is shared (a fork
// sees a write and writes back), and concurrent alloc/free from several threads keeps the
// bookkeeping consistent.
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parent/arena.h"

#define ARENA_BYTES (1u << 20)

static lw_arena_t a;

static void setup(void) {
  lw_error_t err;
  cr_assert_eq(lw__arena_initialize(&a, ARENA_BYTES, &err), LW_OK, "%s", err.message);
}

static void teardown(void) { lw__arena_deinitialize(&a); }

TestSuite(arena, .init = setup, .fini = teardown);

Test(arena, zero_bytes_is_an_invalid_argument) {
  lw_arena_t b;
  lw_error_t err;
  cr_assert_eq(lw__arena_initialize(&b, 0, &err), LW_INVALID_ARGUMENT);
  lw__arena_deinitialize(&b);  // safe after a failed initialize
}

Test(arena, blocks_are_aligned_inside_the_arena_and_never_overlap) {
  uint8_t *p[64];
  for (int i = 0; i < 64; ++i) {
    p[i] = lw__arena_alloc(&a, (uint64_t)(i * 37 + 1));
    cr_assert_not_null(p[i], "allocation %d", i);
    cr_assert_eq((uintptr_t)p[i] % 64, 0, "block %d is not 64-byte aligned", i);
    cr_assert(lw__arena_contains(&a, p[i], (uint64_t)(i * 37 + 1)));
    memset(p[i], i, (size_t)(i * 37 + 1));
  }
  for (int i = 0; i < 64; ++i) {
    for (int k = 0; k < i * 37 + 1; ++k) cr_assert_eq(p[i][k], (uint8_t)i, "block %d was overwritten", i);
  }
  for (int i = 0; i < 64; ++i) cr_assert(lw__arena_free(&a, p[i]));
}

Test(arena, freed_blocks_coalesce_so_the_whole_arena_fits_again) {
  void *p[16];
  uint64_t chunk = a.bytes / 16;
  for (int i = 0; i < 16; ++i) cr_assert_not_null(p[i] = lw__arena_alloc(&a, chunk));
  cr_assert_null(lw__arena_alloc(&a, 1), "the arena is full");
  // Free in an order that needs merging on both sides.
  int order[16] = {1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14};
  for (int i = 0; i < 16; ++i) cr_assert(lw__arena_free(&a, p[order[i]]));
  cr_assert_eq(a.n_free, 1, "free blocks did not coalesce (%u left)", a.n_free);
  void *all = lw__arena_alloc(&a, a.bytes);
  cr_assert_eq(all, (void *)a.base, "the whole arena is one block again");
  cr_assert(lw__arena_free(&a, all));
}

Test(arena, foreign_interior_and_double_frees_are_refused) {
  int local;
  uint8_t *p = lw__arena_alloc(&a, 128);
  cr_assert_not_null(p);
  cr_assert_not(lw__arena_free(&a, &local), "a pointer outside the arena");
  cr_assert_not(lw__arena_free(&a, p + 64), "a pointer inside a block, not its start");
  cr_assert_not(lw__arena_free(&a, NULL));
  cr_assert(lw__arena_free(&a, p));
  cr_assert_not(lw__arena_free(&a, p), "a block freed twice");
}

Test(arena, larger_than_the_arena_is_null_not_a_block_past_the_end) {
  cr_assert_null(lw__arena_alloc(&a, a.bytes + 1));
  cr_assert_null(lw__arena_alloc(&a, UINT64_MAX));
  cr_assert_not(lw__arena_contains(&a, a.base + a.bytes - 8, 16), "a range past the end");
  cr_assert(lw__arena_contains(&a, a.base + a.bytes - 8, 8));
}

Test(arena, memory_is_shared_with_a_forked_child, .timeout = 30) {
  volatile uint32_t *p = lw__arena_alloc(&a, sizeof(uint32_t));
  cr_assert_not_null(p);
  *p = 7;
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) _exit(*p == 7 ? (*p = 42, 0) : 1);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw %u", *p);
  cr_assert_eq(*p, 42u, "the child's write is visible here");
  cr_assert(lw__arena_free(&a, (void *)p));
}

static void *churn(void *arg) {
  uintptr_t seed = (uintptr_t)arg;
  void *held[32] = {0};
  for (int i = 0; i < 20000; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((seed >> 33) % 32);
    if (held[k]) {
      if (!lw__arena_free(&a, held[k])) return (void *)1;
      held[k] = NULL;
    } else {
      held[k] = lw__arena_alloc(&a, (seed >> 40) % 4096 + 1);
      if (held[k]) memset(held[k], (int)k, 1);
    }
  }
  for (int k = 0; k < 32; ++k) {
    if (held[k] && !lw__arena_free(&a, held[k])) return (void *)1;
  }
  return NULL;
}

Test(arena, concurrent_alloc_and_free_leave_one_free_block, .timeout = 60) {
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; ++i) cr_assert_eq(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
  for (int i = 0; i < 4; ++i) {
    void *r = NULL;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d: a block it held was refused", i);
  }
  cr_assert_eq(a.n_used, 0);
  cr_assert_eq(a.n_free, 1, "everything freed must coalesce into one block (%u)", a.n_free);
}
