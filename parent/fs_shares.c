// parent/fs_shares.c — share addresses (fs_shares.h).
#include "parent/fs_shares.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "parent/forkserver.h"

static void va_reserve_locked(void);

// Address space for shares. The zygote is forked with this PROT_NONE reservation in place and
// never maps anything inside it, so an address the program takes from it for a share is free
// in every server: the server maps the share there with MAP_FIXED, replacing its own copy of
// the reservation. (Outside the reservation, e.g. once it is full, a share address is merely
// likely to be free in the zygote, and MAP_FIXED_NOREPLACE tells.)
enum { kVaMaxRanges = 256 };
static const size_t kVaReserveBytes = (size_t)64 << 30;

static struct {
  pthread_mutex_t mu;
  uintptr_t base;  // 0: no reservation
  size_t bytes;
  uint32_t n;
  struct {
    uintptr_t lo, hi;
  } used[kVaMaxRanges];  // sorted by lo
  // Shares mapped outside the reservation (it was full, or there is none), so that a zygote
  // started later by this process can drop them too (zy_spawn). A share that does not fit
  // here is still mapped; only that drop misses it.
  uint32_t n_outside;
  struct {
    uintptr_t lo;
    size_t len;
  } outside[kVaMaxRanges];
} g_va = {.mu = PTHREAD_MUTEX_INITIALIZER};

size_t lw__fs_page_round(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

bool lw__fs_shares_reserved(uintptr_t addr, size_t len) {
  return g_va.base != 0 && addr >= g_va.base && len <= g_va.bytes &&
         addr - g_va.base <= g_va.bytes - len;
}

// Before a zygote is forked (single-threaded, so no lock). A PROT_NONE mapping costs no
// memory, but it counts against RLIMIT_AS like any other: under a finite limit the
// reservation takes at most an eighth of it (a program under a 72 GiB limit keeps 63 GiB of
// its own, not 8), and shares that do not fit are mapped outside it.
void lw__fs_shares_reserve(void) {
  pthread_mutex_lock(&g_va.mu);
  va_reserve_locked();
  pthread_mutex_unlock(&g_va.mu);
}

static void va_reserve_locked(void) {
  if (g_va.base != 0) return;
  size_t bytes = kVaReserveBytes;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t cap = (size_t)(rl.rlim_cur / 8) / page * page;
    if (cap < bytes) bytes = cap;
  }
  if (bytes == 0) return;
  void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  g_va.base = (uintptr_t)p;
  g_va.bytes = bytes;
}

// First fit; 0 when the reservation has no room (or there is none). Under g_va.mu.
static uintptr_t va_take(size_t len) {
  if (g_va.base == 0 || g_va.n == kVaMaxRanges) return 0;
  uintptr_t at = g_va.base;
  uint32_t i = 0;
  for (; i <= g_va.n; ++i) {
    uintptr_t end = i < g_va.n ? g_va.used[i].lo : g_va.base + g_va.bytes;
    if (end - at >= len) break;
    if (i == g_va.n) return 0;
    at = g_va.used[i].hi;
  }
  memmove(&g_va.used[i + 1], &g_va.used[i], (g_va.n - i) * sizeof(g_va.used[0]));
  g_va.used[i].lo = at;
  g_va.used[i].hi = at + len;
  g_va.n++;
  return at;
}

static void va_give_back(uintptr_t at) {
  for (uint32_t i = 0; i < g_va.n; ++i) {
    if (g_va.used[i].lo != at) continue;
    memmove(&g_va.used[i], &g_va.used[i + 1], (g_va.n - i - 1) * sizeof(g_va.used[0]));
    g_va.n--;
    return;
  }
}

void *lw__forkserver_share_map(int fd, size_t bytes) {
  size_t len = lw__fs_page_round(bytes);
  pthread_mutex_lock(&g_va.mu);
  uintptr_t at = va_take(len);
  pthread_mutex_unlock(&g_va.mu);
  if (at != 0) {
    void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
                   fd, 0);
    if (p != MAP_FAILED) return p;
    pthread_mutex_lock(&g_va.mu);
    va_give_back(at);
    pthread_mutex_unlock(&g_va.mu);
    return NULL;  // the hole is still reserved: MAP_FIXED failed before replacing it
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) return NULL;
  pthread_mutex_lock(&g_va.mu);
  if (g_va.n_outside < kVaMaxRanges) {
    g_va.outside[g_va.n_outside].lo = (uintptr_t)p;
    g_va.outside[g_va.n_outside].len = len;
    g_va.n_outside++;
  }
  pthread_mutex_unlock(&g_va.mu);
  return p;
}

void lw__forkserver_share_unmap(void *addr, size_t bytes) {
  if (addr == NULL) return;
  size_t len = lw__fs_page_round(bytes);
  uintptr_t at = (uintptr_t)addr;
  if (!lw__fs_shares_reserved(at, len)) {
    pthread_mutex_lock(&g_va.mu);
    for (uint32_t i = 0; i < g_va.n_outside; ++i) {
      if (g_va.outside[i].lo != at) continue;
      g_va.outside[i] = g_va.outside[--g_va.n_outside];
      break;
    }
    pthread_mutex_unlock(&g_va.mu);
    munmap(addr, len);
    return;
  }
  // Back to PROT_NONE (still reserved), then free for the next share.
  void *p = mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                 -1, 0);
  if (p == MAP_FAILED) {
    munmap(addr, len);  // leaves a hole the allocator keeps marked used: never handed out
    return;
  }
  pthread_mutex_lock(&g_va.mu);
  va_give_back(at);
  pthread_mutex_unlock(&g_va.mu);
}


void lw__fs_shares_drop_inherited(void) {
  if (g_va.base != 0) {
    (void)mmap((void *)g_va.base, g_va.bytes, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  for (uint32_t i = 0; i < g_va.n_outside; ++i) {
    (void)munmap((void *)g_va.outside[i].lo, g_va.outside[i].len);
  }
  g_va.n = 0;
  g_va.n_outside = 0;
}

void lw__fs_shares_atfork_child(void) { pthread_mutex_init(&g_va.mu, NULL); }

// ---------------------------------------------------------------------------------------------
// Where a helper server mapped the program's shares.

static struct {
  uintptr_t from, to;
  size_t len;
} g_local[LW_FS_MAX_SHARES];

void lw__fs_shares_note_local(uint32_t i, uintptr_t program_addr, uintptr_t local_addr,
                              size_t bytes) {
  if (i >= LW_FS_MAX_SHARES) return;
  g_local[i].from = program_addr;
  g_local[i].to = local_addr;
  g_local[i].len = bytes;
}

void *lw__forkserver_local(const void *program_addr) {
  uintptr_t a = (uintptr_t)program_addr;
  for (uint32_t i = 0; i < LW_FS_MAX_SHARES; ++i) {
    if (g_local[i].len != 0 && a >= g_local[i].from && a - g_local[i].from < g_local[i].len) {
      return (void *)(g_local[i].to + (a - g_local[i].from));
    }
  }
  return (void *)a;
}
