// parent/arena.h — the worker's shared arena: one memfd mapped MAP_SHARED at an address every
// child maps it at too, and the allocator that hands out blocks of it (lw_worker_alloc).
// Owns: the mapping, its fd and the block lists. The bookkeeping lives only in the parent's
// heap, so a child can scribble over the memory but never over the allocator.
// Lifecycle: the arena lives in its owner's memory (struct lw_worker):
//   lw__arena_initialize (before the fork server starts, so the server maps it too)
//   -> (lw__arena_alloc, lw__arena_free, lw__arena_contains)* -> lw__arena_deinitialize.
// lw__arena_deinitialize is safe after a failed lw__arena_initialize.
// Threads: alloc and free from any thread; they take a->mu, a leaf lock (nothing is locked
// under it). lw__arena_contains reads only base and bytes, fixed after initialize: no lock.
#ifndef LANEWORK_PARENT_ARENA_H_
#define LANEWORK_PARENT_ARENA_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/status.h"

typedef struct lw_arena_block {
  uint64_t offset, bytes;
} lw_arena_block_t;

typedef struct lw_arena {
  pthread_mutex_t mu;
  uint8_t *base;
  uint64_t bytes;
  int fd;
  lw_arena_block_t *free_list;  // sorted by offset, coalesced
  uint32_t n_free, cap_free;
  lw_arena_block_t *used;       // sorted by offset
  uint32_t n_used, cap_used;
  // Bytes in live blocks now and the most ever: written under mu, read by lw_worker_stats
  // without it (relaxed; a snapshot).
  _Atomic uint64_t bytes_in_use, bytes_peak;
} lw_arena_t;

// Maps a fresh arena of bytes (rounded up to a page); fails INVALID_ARGUMENT (0 bytes) or
// RESOURCE_EXHAUSTED into err (may be NULL), whose message gives the errno text and, for
// ENOMEM, what to change (lw__arena_describe_failure).
LW_MUST_USE lw_status_t lw__arena_initialize(lw_arena_t *a, uint64_t bytes,
                                              lw_error_t *err);
void lw__arena_deinitialize(lw_arena_t *a);

// Why creating or mapping a shared area of the worker (the arena, the mailboxes, the trace
// areas) failed, for an error message: "cannot VERB WHAT (SIZE): ERRNO TEXT", and for ENOMEM
// a hint at what to change, e.g.
//   cannot map the arena (2 GiB): Cannot allocate memory (RLIMIT_AS is 1 GiB, 180 MiB of it
//   in use: lower arena_bytes in lw_worker_config_t or raise ulimit -v)
// (without a finite RLIMIT_AS the hint says the system is short of memory or of mappings).
// errnum is the errno of the failed call, read right after it. Writes at most n bytes to buf,
// always NUL-terminated; returns buf. Any thread; reads getrlimit and /proc/self/statm.
const char *lw__arena_describe_failure(char *buf, size_t n, const char *verb, const char *what,
                                       uint64_t bytes, int errnum);

void *lw__arena_alloc(lw_arena_t *a, uint64_t bytes);
// false when p is not a live block of this arena.
bool lw__arena_free(lw_arena_t *a, void *p);
static inline bool lw__arena_contains(const lw_arena_t *a, const void *p, uint64_t bytes) {
  uintptr_t b = (uintptr_t)a->base, q = (uintptr_t)p;
  return q >= b && q - b <= a->bytes && bytes <= a->bytes - (q - b);
}

#endif  // LANEWORK_PARENT_ARENA_H_
