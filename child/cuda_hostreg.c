// child/cuda_hostreg.c — the process's table of host registrations (see cuda_hostreg.h).
#include "child/cuda_hostreg.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct hostreg {
  uint8_t *base;
  uint64_t bytes;
  const void *owner;  // the device whose context registered it
  uint64_t id;        // what take hands out and drop matches: never reused
  uint32_t refs;      // runs holding it; 0: waiting for a flush
} hostreg_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;  // a reference was dropped
static hostreg_t *g_reg;                                // g_n entries, room for g_cap
static uint32_t g_n, g_cap;
static uint64_t g_next_id = 1;

static bool overlaps(const hostreg_t *r, uintptr_t lo, uintptr_t hi) {
  uintptr_t base = (uintptr_t)r->base;
  return lo < base + r->bytes && base < hi;
}

static bool covers(const hostreg_t *r, uintptr_t lo, uintptr_t hi) {
  return (uintptr_t)r->base <= lo && hi <= (uintptr_t)r->base + r->bytes;
}

static void remove_at(uint32_t i) { g_reg[i] = g_reg[--g_n]; }

// Unregisters entry i, which holds no reference, and takes it out of the table; a failed
// unregister keeps it (tried again by the next flush or take). Under g_mu.
static lw_cu_result_t unregister_at(const lw_cuda_driver_t *api, uint32_t i) {
  lw_cu_result_t r = api->cuMemHostUnregister(g_reg[i].base);
  // Not registered (any more): nothing of it is left to release.
  if (r == LW_CU_SUCCESS || r == LW_CU_ERROR_HOST_MEMORY_NOT_REGISTERED) {
    remove_at(i);
    return LW_CU_SUCCESS;
  }
  return r;
}

lw_cu_result_t lw__cuda_hostreg_take(const lw_cuda_driver_t *api, const void *owner, void *host,
                                     uint64_t bytes, uint64_t *out_ref) {
  *out_ref = 0;
  uintptr_t lo = (uintptr_t)host, hi = lo + bytes;
  lw_cu_result_t res = LW_CU_SUCCESS;
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < g_n && res == LW_CU_SUCCESS;) {
    hostreg_t *r = &g_reg[i];
    if (!overlaps(r, lo, hi)) {
      ++i;
    } else if (r->refs == 0) {
      // Released: its pages may not be the ones at these addresses now.
      res = unregister_at(api, i);
    } else if (covers(r, lo, hi)) {
      r->refs++;
      *out_ref = r->id;
      pthread_mutex_unlock(&g_mu);
      return LW_CU_SUCCESS;
    } else {
      // Held by a run, and part of the range lies outside it: the driver would map only the
      // held part, and the kernel would fault beyond it.
      res = LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
  }
  if (res == LW_CU_SUCCESS && g_n == g_cap) {
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
      uint64_t id = g_next_id++;
      g_reg[g_n++] = (hostreg_t){.base = host, .bytes = bytes, .owner = owner, .id = id, .refs = 1};
      *out_ref = id;
    } else if (res == LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
      res = LW_CU_SUCCESS;  // the program's registration maps them
    }
  }
  pthread_mutex_unlock(&g_mu);
  return res;
}

void lw__cuda_hostreg_drop(uint64_t ref) {
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < g_n; ++i) {
    if (g_reg[i].id == ref && g_reg[i].refs > 0) {
      if (--g_reg[i].refs == 0) pthread_cond_broadcast(&g_cv);
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void lw__cuda_hostreg_flush(const lw_cuda_driver_t *api) {
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < g_n;) {
    uint32_t n = g_n;
    if (g_reg[i].refs == 0) (void)unregister_at(api, i);
    if (g_n == n) ++i;  // kept: look at the next (a removal moved the last entry to i)
  }
  pthread_mutex_unlock(&g_mu);
}

// Whether owner has an entry a run holds. Under g_mu.
static bool held_by_a_run(const void *owner) {
  for (uint32_t i = 0; i < g_n; ++i) {
    if (g_reg[i].owner == owner && g_reg[i].refs > 0) return true;
  }
  return false;
}

void lw__cuda_hostreg_forget(const lw_cuda_driver_t *api, const void *owner) {
  pthread_mutex_lock(&g_mu);
  // Another chip's run may still use a registration this device made: it ends with this
  // device's context, so close waits for that run to drop it.
  while (held_by_a_run(owner)) pthread_cond_wait(&g_cv, &g_mu);
  for (uint32_t i = 0; i < g_n;) {
    if (g_reg[i].owner == owner) {
      // One that will not unregister goes with the context all the same.
      (void)api->cuMemHostUnregister(g_reg[i].base);
      remove_at(i);
    } else {
      ++i;
    }
  }
  // The table's room is kept between runs (a flush leaves it), and given back once empty at a
  // close.
  if (g_n == 0) {
    free(g_reg);
    g_reg = NULL;
    g_cap = 0;
  }
  pthread_mutex_unlock(&g_mu);
}

uint32_t lw__cuda_hostreg_count(void) {
  pthread_mutex_lock(&g_mu);
  uint32_t n = g_n;
  pthread_mutex_unlock(&g_mu);
  return n;
}
