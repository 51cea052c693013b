// parent/arena.c — the shared arena: one memfd mapped MAP_SHARED before the fork server
// starts; the server maps it at the same address, so every child sees it there. The
// allocator's metadata lives only in the parent's heap: a child can scribble over the memory
// but never over the bookkeeping.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lanes/error.h"
#include "parent/arena.h"
#include "parent/forkserver.h"

#define ALIGN 64u

static bool grow(lw_arena_block_t **v, uint32_t *cap, uint32_t need) {
  if (need <= *cap) return true;
  uint32_t n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  lw_arena_block_t *p = realloc(*v, n * sizeof(**v));
  if (!p) return false;
  *v = p;
  *cap = n;
  return true;
}

static void insert_at(lw_arena_block_t *v, uint32_t *n, uint32_t i, lw_arena_block_t b) {
  memmove(&v[i + 1], &v[i], (*n - i) * sizeof(*v));
  v[i] = b;
  (*n)++;
}

static void remove_at(lw_arena_block_t *v, uint32_t *n, uint32_t i) {
  memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(*v));
  (*n)--;
}

// bytes as a person reads it: "2 GiB", "1.5 GiB", "256 MiB", "12 KiB", "100 bytes".
static void format_bytes(char *buf, size_t n, uint64_t bytes) {
  static const struct {
    uint64_t unit;
    const char *name;
  } units[] = {{1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); ++i) {
    if (bytes < units[i].unit) continue;
    if (bytes % units[i].unit == 0) {
      snprintf(buf, n, "%llu %s", (unsigned long long)(bytes / units[i].unit), units[i].name);
    } else {
      snprintf(buf, n, "%.1f %s", (double)bytes / (double)units[i].unit, units[i].name);
    }
    return;
  }
  snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
}

// This process's address space now (VmSize), or 0 when /proc cannot say.
static uint64_t address_space_in_use(void) {
  FILE *f = fopen("/proc/self/statm", "re");
  if (f == NULL) return 0;
  unsigned long long pages = 0;
  int got = fscanf(f, "%llu", &pages);
  fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return got == 1 && page > 0 ? pages * (uint64_t)page : 0;
}

const char *lw__arena_describe_failure(char *buf, size_t n, const char *verb, const char *what,
                                       uint64_t bytes, int errnum) {
  if (buf == NULL || n == 0) return buf;
  char size[32];
  format_bytes(size, sizeof(size), bytes);
  char hint[192] = "";
  if (errnum == ENOMEM) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      char limit[32], used[64] = "";
      format_bytes(limit, sizeof(limit), rl.rlim_cur);
      uint64_t in_use = address_space_in_use();
      if (in_use != 0) {
        char u[32];
        format_bytes(u, sizeof(u), in_use);
        snprintf(used, sizeof(used), ", %s of it in use", u);
      }
      snprintf(hint, sizeof(hint),
               " (RLIMIT_AS is %s%s: lower arena_bytes in lw_worker_config_t or raise ulimit -v)",
               limit, used);
    } else {
      snprintf(hint, sizeof(hint),
               " (the system is short of memory or of mappings, vm.max_map_count: lower "
               "arena_bytes in lw_worker_config_t)");
    }
  }
  snprintf(buf, n, "cannot %s %s (%s): %s%s", verb, what, size, strerror(errnum), hint);
  return buf;
}

// RESOURCE_EXHAUSTED into err: what failed, its errno text and the hint.
static lw_status_t arena_failure(lw_error_t *err, const char *verb, uint64_t bytes, int errnum) {
  char why[LW_ERROR_MESSAGE_BYTES];
  lw__arena_describe_failure(why, sizeof(why), verb, "the arena", bytes, errnum);
  return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker: %s", why);
}

lw_status_t lw__arena_initialize(lw_arena_t *a, uint64_t bytes, lw_error_t *err) {
  memset(a, 0, sizeof(*a));
  a->fd = -1;
  pthread_mutex_init(&a->mu, NULL);
  bytes = (bytes + 4095) & ~(uint64_t)4095;
  if (bytes == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "worker: arena_bytes must be > 0");
  }
  a->fd = lw__forkserver_fd_above_stdio(memfd_create("lw-arena", MFD_CLOEXEC));
  if (a->fd < 0) {
    // -1 with errno from memfd_create, or -errno from moving the fd above stdio.
    int e = a->fd < -1 ? -a->fd : errno;
    a->fd = -1;
    return arena_failure(err, "create", bytes, e);
  }
  if (ftruncate(a->fd, (off_t)bytes) != 0) return arena_failure(err, "size", bytes, errno);
  // At an address every fork server can map it at too (see lw__forkserver_share_map).
  void *p = lw__forkserver_share_map(a->fd, bytes);
  if (p == NULL) return arena_failure(err, "map", bytes, errno);
  a->base = p;
  a->bytes = bytes;
  if (!grow(&a->free_list, &a->cap_free, 1)) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker: out of memory");
  }
  a->free_list[0] = (lw_arena_block_t){0, bytes};
  a->n_free = 1;
  return LW_OK;
}

void lw__arena_deinitialize(lw_arena_t *a) {
  if (a->base) lw__forkserver_share_unmap(a->base, a->bytes);
  if (a->fd >= 0) close(a->fd);
  free(a->free_list);
  free(a->used);
  pthread_mutex_destroy(&a->mu);
  memset(a, 0, sizeof(*a));
  a->fd = -1;
}

void *lw__arena_alloc(lw_arena_t *a, uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > a->bytes) return NULL;
  bytes = (bytes + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
  void *out = NULL;
  pthread_mutex_lock(&a->mu);
  for (uint32_t i = 0; i < a->n_free; ++i) {
    lw_arena_block_t *f = &a->free_list[i];
    if (f->bytes < bytes) continue;
    if (!grow(&a->used, &a->cap_used, a->n_used + 1)) break;
    lw_arena_block_t b = {f->offset, bytes};
    f->offset += bytes;
    f->bytes -= bytes;
    if (f->bytes == 0) remove_at(a->free_list, &a->n_free, i);
    uint32_t j = 0;
    while (j < a->n_used && a->used[j].offset < b.offset) ++j;
    insert_at(a->used, &a->n_used, j, b);
    out = a->base + b.offset;
    // Under mu, the one writer: a load and a store suffice.
    uint64_t in_use = atomic_load_explicit(&a->bytes_in_use, memory_order_relaxed) + bytes;
    atomic_store_explicit(&a->bytes_in_use, in_use, memory_order_relaxed);
    if (in_use > atomic_load_explicit(&a->bytes_peak, memory_order_relaxed)) {
      atomic_store_explicit(&a->bytes_peak, in_use, memory_order_relaxed);
    }
    break;
  }
  pthread_mutex_unlock(&a->mu);
  return out;
}

bool lw__arena_free(lw_arena_t *a, void *p) {
  if (!p || !lw__arena_contains(a, p, 0)) return false;
  uint64_t off = (uint64_t)((uint8_t *)p - a->base);
  bool ok = false;
  pthread_mutex_lock(&a->mu);
  uint32_t lo = 0, hi = a->n_used;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (a->used[mid].offset < off) lo = mid + 1;
    else hi = mid;
  }
  if (lo < a->n_used && a->used[lo].offset == off &&
      grow(&a->free_list, &a->cap_free, a->n_free + 1)) {
    lw_arena_block_t b = a->used[lo];
    remove_at(a->used, &a->n_used, lo);
    atomic_fetch_sub_explicit(&a->bytes_in_use, b.bytes, memory_order_relaxed);
    uint32_t i = 0;
    while (i < a->n_free && a->free_list[i].offset < b.offset) ++i;
    insert_at(a->free_list, &a->n_free, i, b);
    // Coalesce with the neighbours.
    if (i + 1 < a->n_free && a->free_list[i].offset + a->free_list[i].bytes == a->free_list[i + 1].offset) {
      a->free_list[i].bytes += a->free_list[i + 1].bytes;
      remove_at(a->free_list, &a->n_free, i + 1);
    }
    if (i > 0 && a->free_list[i - 1].offset + a->free_list[i - 1].bytes == a->free_list[i].offset) {
      a->free_list[i - 1].bytes += a->free_list[i].bytes;
      remove_at(a->free_list, &a->n_free, i);
    }
    ok = true;
  }
  pthread_mutex_unlock(&a->mu);
  return ok;
}
