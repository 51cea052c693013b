// child/cuda_hostreg.c — the process's table of host registrations (see cuda_hostreg.h).
#include "child/cuda_hostreg.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct hostreg {
  uint8_t *base;
  uint64_t bytes;
  const void *owner;  // the device whose context registered it
  uint32_t refs;      // runs holding it; 0: waiting for a flush
} hostreg_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static hostreg_t *g_reg;  // g_n entries, room for g_cap
static uint32_t g_n, g_cap;

static bool overlaps(const hostreg_t *r, uintptr_t lo, uintptr_t hi) {
  uintptr_t base = (uintptr_t)r->base;
  return lo < base + r->bytes && base < hi;
}

static void remove_at(uint32_t i) { g_reg[i] = g_reg[--g_n]; }

lw_cu_result_t lw__cuda_hostreg_take(const lw_cuda_driver_t *api, const void *owner, void *host,
                                     uint64_t bytes, void **out_base) {
  *out_base = NULL;
  uintptr_t lo = (uintptr_t)host, hi = lo + bytes;
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < g_n;) {
    hostreg_t *r = &g_reg[i];
    if (!overlaps(r, lo, hi)) {
      ++i;
    } else if (r->refs == 0) {
      // Released: its pages may not be the ones at these addresses now.
      (void)api->cuMemHostUnregister(r->base);
      remove_at(i);
    } else if ((uintptr_t)r->base <= lo && hi <= (uintptr_t)r->base + r->bytes) {
      r->refs++;
      *out_base = r->base;
      pthread_mutex_unlock(&g_mu);
      return LW_CU_SUCCESS;
    } else {
      ++i;
    }
  }
  lw_cu_result_t res = LW_CU_SUCCESS;
  if (g_n == g_cap) {
    uint32_t cap = g_cap ? 2 * g_cap : 16;
    hostreg_t *grown = realloc(g_reg, cap * sizeof(*grown));
    if (grown) {
      g_reg = grown;
      g_cap = cap;
    } else {
      res = LW_CU_ERROR_OUT_OF_MEMORY;
    }
  }
  if (res == LW_CU_SUCCESS) {
    res = api->cuMemHostRegister(host, (size_t)bytes,
                                 LW_CU_MEMHOSTREGISTER_DEVICEMAP | LW_CU_MEMHOSTREGISTER_PORTABLE);
    if (res == LW_CU_SUCCESS) {
      g_reg[g_n++] = (hostreg_t){.base = host, .bytes = bytes, .owner = owner, .refs = 1};
      *out_base = host;
    } else if (res == LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
      res = LW_CU_SUCCESS;  // someone else's registration maps them
    }
  }
  pthread_mutex_unlock(&g_mu);
  return res;
}

void lw__cuda_hostreg_drop(void *base) {
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < g_n; ++i) {
    if (g_reg[i].base == base && g_reg[i].refs > 0) {
      g_reg[i].refs--;
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

// Unregisters the unreferenced entries of owner (NULL: of every device); with forget, drops
// owner's referenced ones too.
static void release(const lw_cuda_driver_t *api, const void *owner, bool forget) {
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < g_n;) {
    hostreg_t *r = &g_reg[i];
    if ((owner && r->owner != owner) || (r->refs > 0 && !forget)) {
      ++i;
      continue;
    }
    if (r->refs == 0) (void)api->cuMemHostUnregister(r->base);
    remove_at(i);
  }
  if (g_n == 0) {
    free(g_reg);
    g_reg = NULL;
    g_cap = 0;
  }
  pthread_mutex_unlock(&g_mu);
}

void lw__cuda_hostreg_flush(const lw_cuda_driver_t *api) { release(api, NULL, false); }

void lw__cuda_hostreg_forget(const lw_cuda_driver_t *api, const void *owner) {
  release(api, owner, true);
}

uint32_t lw__cuda_hostreg_count(void) {
  pthread_mutex_lock(&g_mu);
  uint32_t n = g_n;
  pthread_mutex_unlock(&g_mu);
  return n;
}
