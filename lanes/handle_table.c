// lanes/handle_table.c — see handle_table.h for the model. The caller's lock guards every call.
#include "lanes/handle_table.h"

#include <stdlib.h>
#include <string.h>

static uint64_t make_id(uint32_t generation, uint32_t index) {
  return ((uint64_t)generation << 32) | ((uint64_t)index + 1);
}

lw_status_t lw__handle_table_initialize(lw_handle_table_t *t, uint32_t capacity) {
  memset(t, 0, sizeof(*t));
  if (capacity == 0) return LW_INVALID_ARGUMENT;
  lw_handle_slot_t *slots = calloc(capacity, sizeof(*slots));
  if (!slots) return LW_RESOURCE_EXHAUSTED;
  // Generation 0 is never used: an id's upper half is never 0, so no id looks like an index.
  for (uint32_t i = 0; i < capacity; ++i) slots[i].generation = 1;
  t->slots = slots;
  t->capacity = capacity;
  return LW_OK;
}

void lw__handle_table_deinitialize(lw_handle_table_t *t) {
  free(t->slots);
  memset(t, 0, sizeof(*t));
}

lw_status_t lw__handle_table_alloc(lw_handle_table_t *t, uint32_t *out_index, uint64_t *out_id) {
  *out_index = UINT32_MAX;
  *out_id = 0;
  for (uint32_t i = 0; i < t->capacity; ++i) {
    lw_handle_slot_t *s = &t->slots[i];
    if (s->state != LW_HANDLE_SLOT_FREE) continue;
    s->state = LW_HANDLE_SLOT_LIVE;
    t->n_live++;
    *out_index = i;
    *out_id = make_id(s->generation, i);
    return LW_OK;
  }
  return LW_RESOURCE_EXHAUSTED;
}

lw_status_t lw__handle_table_lookup(const lw_handle_table_t *t, uint64_t id,
                                    uint32_t *out_index) {
  *out_index = UINT32_MAX;
  uint64_t low = id & 0xffffffffu;
  if (low == 0 || low > t->capacity) return LW_NOT_FOUND;
  uint32_t index = (uint32_t)(low - 1);
  const lw_handle_slot_t *s = &t->slots[index];
  if (s->state != LW_HANDLE_SLOT_LIVE || make_id(s->generation, index) != id) {
    return LW_NOT_FOUND;
  }
  *out_index = index;
  return LW_OK;
}

uint64_t lw__handle_table_id(const lw_handle_table_t *t, uint32_t index) {
  if (index >= t->capacity || t->slots[index].state != LW_HANDLE_SLOT_LIVE) return 0;
  return make_id(t->slots[index].generation, index);
}

void lw__handle_table_release(lw_handle_table_t *t, uint32_t index) {
  if (index >= t->capacity) return;
  lw_handle_slot_t *s = &t->slots[index];
  if (s->state != LW_HANDLE_SLOT_LIVE) return;
  t->n_live--;
  if (s->generation == UINT32_MAX) {
    // Starting again at 1 would make ids of long-released allocations valid again.
    s->state = LW_HANDLE_SLOT_RETIRED;
    return;
  }
  s->generation++;
  s->state = LW_HANDLE_SLOT_FREE;
}
