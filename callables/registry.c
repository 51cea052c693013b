// callables/registry.c — see registry.h for the model.
//
// One mutex guards both tables (the handle ids' generations live in a lanes/handle_table.h
// table, under the same mutex). Every operation is a few loads and stores under it; no
// backend call, allocation or wait happens while it is held.
#include "callables/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callables/digest.h"
#include "lanes/error.h"
#include "lanes/handle_table.h"

typedef enum slot_state {
  SLOT_EMPTY = 0,
  SLOT_READY = 1,
  SLOT_TOMBSTONED = 2,
  SLOT_FREEING = 3,
} slot_state_t;

typedef struct slot {
  slot_state_t state;
  uint32_t refs;
  uint32_t pins;
  lw_digest_t digest;
  void *module;
  lw_registry_waiter_t *waiters;
  char name[LW_REGISTRY_NAME_BYTES];
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
} slot_t;

typedef enum entry_state {
  ENTRY_FREE = 0,
  ENTRY_LIVE = 1,
  ENTRY_UNREGISTERING = 2,  // begin_unregister ran; the id dies with the slot or at apply
} entry_state_t;

// What the registry keeps per handle; entries[i] belongs to index i of the handle table, and
// is FREE exactly when that index is.
typedef struct entry {
  entry_state_t state;
  uint32_t slot;
} entry_t;

struct lw_registry {
  pthread_mutex_t mu;
  uint32_t n_slots;
  uint32_t n_entries;
  lw_handle_table_t ids;  // handle ids: index + generation, a released id never matches again
  slot_t *slots;
  entry_t *entries;
};

lw_status_t lw__registry_create(uint32_t slots, uint32_t handles, lw_registry_t **out,
                                lw_error_t *err) {
  *out = NULL;
  if (slots == 0 || handles == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "registry: slots and handles must be > 0");
  }
  lw_registry_t *reg = calloc(1, sizeof(*reg));
  if (!reg) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "registry: out of memory");
  reg->slots = calloc(slots, sizeof(slot_t));
  reg->entries = calloc(handles, sizeof(entry_t));
  lw_status_t st = lw__handle_table_initialize(&reg->ids, handles);
  if (!reg->slots || !reg->entries || st != LW_OK) {
    lw__handle_table_deinitialize(&reg->ids);
    free(reg->slots);
    free(reg->entries);
    free(reg);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "registry: out of memory");
  }
  pthread_mutex_init(&reg->mu, NULL);
  reg->n_slots = slots;
  reg->n_entries = handles;
  *out = reg;
  return LW_OK;
}

void lw__registry_destroy(lw_registry_t *reg, void (*unload_fn)(void *ctx, void *module),
                          void (*waiter_fn)(void *ctx, lw_registry_waiter_t *w), void *ctx) {
  if (!reg) return;
  for (uint32_t i = 0; i < reg->n_slots; ++i) {
    slot_t *s = &reg->slots[i];
    if (s->state == SLOT_EMPTY) continue;
    if (s->module && unload_fn) unload_fn(ctx, s->module);
    lw_registry_waiter_t *w = s->waiters;
    while (w) {
      lw_registry_waiter_t *next = w->next;  // waiter_fn may free w
      if (waiter_fn) waiter_fn(ctx, w);
      w = next;
    }
  }
  pthread_mutex_destroy(&reg->mu);
  lw__handle_table_deinitialize(&reg->ids);
  free(reg->slots);
  free(reg->entries);
  free(reg);
}

// Finds the live entry for an id, or NULL. Caller holds mu.
static entry_t *entry_lookup(lw_registry_t *reg, lw_callable_handle_t h) {
  uint32_t index;
  if (lw__handle_table_lookup(&reg->ids, h.id, &index) != LW_OK) return NULL;
  return &reg->entries[index];
}

// Allocates a handle entry on slot. Caller holds mu.
static lw_status_t entry_alloc(lw_registry_t *reg, uint32_t slot, lw_callable_handle_t *out,
                               lw_error_t *err) {
  uint32_t index;
  if (lw__handle_table_alloc(&reg->ids, &index, &out->id) != LW_OK) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "registry: callable handle table is full (%u handles)", reg->n_entries);
  }
  reg->entries[index] = (entry_t){.state = ENTRY_LIVE, .slot = slot};
  return LW_OK;
}

// Frees a handle entry: its id never matches again. Caller holds mu.
static void entry_release(lw_registry_t *reg, entry_t *e) {
  e->state = ENTRY_FREE;
  lw__handle_table_release(&reg->ids, (uint32_t)(e - reg->entries));
}

static slot_t *slot_by_digest(lw_registry_t *reg, lw_digest_t d) {
  for (uint32_t i = 0; i < reg->n_slots; ++i) {
    slot_t *s = &reg->slots[i];
    if (s->state != SLOT_EMPTY && lw__digest_equal(s->digest, d)) return s;
  }
  return NULL;
}

lw_status_t lw__registry_acquire(lw_registry_t *reg, lw_digest_t digest,
                                 lw_callable_handle_t *out_handle, lw_error_t *err) {
  out_handle->id = 0;
  pthread_mutex_lock(&reg->mu);
  lw_status_t st;
  slot_t *s = slot_by_digest(reg, digest);
  if (!s) {
    st = LW_NOT_FOUND;
    if (err) lw__error_clear(err);
  } else if (s->state != SLOT_READY) {
    st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                       "callable %s: pending unregister (a same-digest register must wait "
                       "until its runs finish and it is freed)",
                       s->name);
  } else {
    st = entry_alloc(reg, (uint32_t)(s - reg->slots), out_handle, err);
    if (st == LW_OK) s->refs++;
  }
  pthread_mutex_unlock(&reg->mu);
  return st;
}

lw_status_t lw__registry_insert(lw_registry_t *reg, lw_digest_t digest, const char *name,
                                uint32_t n_params, const uint8_t *param_dirs, void *module,
                                lw_callable_handle_t *out_handle, lw_error_t *err) {
  out_handle->id = 0;
  if (n_params > LW_MAX_PARAMS || (n_params > 0 && !param_dirs)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "callable %s: a signature of %u params needs param_dirs and at most %d "
                         "params",
                         name ? name : "callable", n_params, LW_MAX_PARAMS);
  }
  pthread_mutex_lock(&reg->mu);
  lw_status_t st = LW_OK;
  slot_t *free_slot = NULL;
  if (slot_by_digest(reg, digest)) {
    st = lw__error_set(err, LW_ALREADY_EXISTS, -1, 0, "callable %s: already registered", name);
    goto out;
  }
  for (uint32_t i = 0; i < reg->n_slots && !free_slot; ++i) {
    if (reg->slots[i].state == SLOT_EMPTY) free_slot = &reg->slots[i];
  }
  if (!free_slot) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       "callable %s: registry is full (%u callables loaded)", name, reg->n_slots);
    goto out;
  }
  st = entry_alloc(reg, (uint32_t)(free_slot - reg->slots), out_handle, err);
  if (st != LW_OK) goto out;
  memset(free_slot, 0, sizeof(*free_slot));
  free_slot->state = SLOT_READY;
  free_slot->refs = 1;
  free_slot->digest = digest;
  free_slot->module = module;
  snprintf(free_slot->name, sizeof(free_slot->name), "%s", name ? name : "callable");
  free_slot->n_params = n_params;
  if (n_params > 0) memcpy(free_slot->param_dirs, param_dirs, n_params);
out:
  pthread_mutex_unlock(&reg->mu);
  return st;
}

lw_status_t lw__registry_pin(lw_registry_t *reg, lw_callable_handle_t handle,
                             lw_registry_pin_t *out_pin, lw_error_t *err) {
  memset(out_pin, 0, sizeof(*out_pin));
  pthread_mutex_lock(&reg->mu);
  lw_status_t st = LW_OK;
  entry_t *e = entry_lookup(reg, handle);
  if (!e) {
    st = lw__error_set(err, LW_NOT_FOUND, -1, 0,
                       "unknown or released callable handle 0x%llx",
                       (unsigned long long)handle.id);
  } else {
    slot_t *s = &reg->slots[e->slot];
    if (e->state != ENTRY_LIVE || s->state != SLOT_READY) {
      st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "callable %s: pending unregister; no new runs are accepted", s->name);
    } else {
      s->pins++;
      out_pin->slot = e->slot;
      out_pin->module = s->module;
      out_pin->name = s->name;
      out_pin->n_params = s->n_params;
      out_pin->param_dirs = s->param_dirs;
    }
  }
  pthread_mutex_unlock(&reg->mu);
  return st;
}

bool lw__registry_unpin(lw_registry_t *reg, uint32_t slot, void **out_module,
                        lw_registry_waiter_t **out_waiter) {
  bool must_free = false;
  *out_module = NULL;
  *out_waiter = NULL;
  pthread_mutex_lock(&reg->mu);
  slot_t *s = &reg->slots[slot];
  if (s->pins > 0) s->pins--;
  // Free only a tombstoned slot whose unregister has been applied (it left a waiter); a pin
  // count reaching zero on its own frees nothing.
  if (s->pins == 0 && s->state == SLOT_TOMBSTONED && s->waiters) {
    s->state = SLOT_FREEING;
    *out_module = s->module;
    *out_waiter = s->waiters;
    must_free = true;
  }
  pthread_mutex_unlock(&reg->mu);
  return must_free;
}

lw_status_t lw__registry_begin_unregister(lw_registry_t *reg, lw_callable_handle_t handle,
                                          lw_error_t *err) {
  pthread_mutex_lock(&reg->mu);
  lw_status_t st = LW_OK;
  entry_t *e = entry_lookup(reg, handle);
  if (!e) {
    st = lw__error_set(err, LW_NOT_FOUND, -1, 0,
                       "unregister: unknown or released callable handle 0x%llx",
                       (unsigned long long)handle.id);
  } else if (e->state == ENTRY_UNREGISTERING) {
    st = lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                       "unregister: callable %s (handle 0x%llx) is already being unregistered",
                       reg->slots[e->slot].name, (unsigned long long)handle.id);
  } else {
    slot_t *s = &reg->slots[e->slot];
    e->state = ENTRY_UNREGISTERING;
    if (s->refs > 0) s->refs--;
    if (s->refs == 0) s->state = SLOT_TOMBSTONED;
  }
  pthread_mutex_unlock(&reg->mu);
  return st;
}

lw_registry_unregister_result_t lw__registry_apply_unregister(lw_registry_t *reg,
                                                              lw_callable_handle_t handle,
                                                              lw_registry_waiter_t *waiter,
                                                              uint32_t *out_slot,
                                                              void **out_module) {
  lw_registry_unregister_result_t r = LW_REGISTRY_UNREGISTER_DONE;
  *out_module = NULL;
  *out_slot = UINT32_MAX;
  pthread_mutex_lock(&reg->mu);
  entry_t *e = entry_lookup(reg, handle);
  if (e) {
    slot_t *s = &reg->slots[e->slot];
    *out_slot = e->slot;
    if (s->state == SLOT_READY) {
      // Another handle still holds the slot: this id dies now, the callable stays.
      entry_release(reg, e);
    } else if (s->state == SLOT_TOMBSTONED && s->pins == 0) {
      // No pins means no waiters either: the last unpin of a slot with waiters moves it to
      // FREEING, so a TOMBSTONED slot without pins has none queued.
      s->state = SLOT_FREEING;
      *out_module = s->module;
      r = LW_REGISTRY_UNREGISTER_FREE_NOW;
    } else {
      // Pinned, or a free is already under way: wait for it. The id stays (UNREGISTERING) so
      // runs with it keep failing "pending unregister" until the slot is freed.
      waiter->next = s->waiters;
      s->waiters = waiter;
      r = LW_REGISTRY_UNREGISTER_DEFERRED;
    }
  }
  pthread_mutex_unlock(&reg->mu);
  return r;
}

lw_registry_waiter_t *lw__registry_complete_free(lw_registry_t *reg, uint32_t slot) {
  pthread_mutex_lock(&reg->mu);
  slot_t *s = &reg->slots[slot];
  lw_registry_waiter_t *waiters = s->waiters;
  for (uint32_t i = 0; i < reg->n_entries; ++i) {
    entry_t *e = &reg->entries[i];
    if (e->state != ENTRY_FREE && e->slot == slot) entry_release(reg, e);
  }
  memset(s, 0, sizeof(*s));
  pthread_mutex_unlock(&reg->mu);
  return waiters;
}

void lw__registry_slot_name(lw_registry_t *reg, uint32_t slot, char *out, size_t n) {
  if (n == 0) return;
  out[0] = '\0';
  pthread_mutex_lock(&reg->mu);
  if (slot < reg->n_slots) snprintf(out, n, "%s", reg->slots[slot].name);
  pthread_mutex_unlock(&reg->mu);
}

void lw__registry_stats(lw_registry_t *reg, lw_registry_stats_t *out) {
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&reg->mu);
  for (uint32_t i = 0; i < reg->n_slots; ++i) {
    const slot_t *s = &reg->slots[i];
    if (s->state == SLOT_EMPTY) continue;
    out->slots_used++;
    out->pins += s->pins;
    if (s->state == SLOT_TOMBSTONED || s->state == SLOT_FREEING) out->tombstoned++;
  }
  out->handles_live = lw__handle_table_count(&reg->ids);
  pthread_mutex_unlock(&reg->mu);
}
