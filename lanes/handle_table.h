// lanes/handle_table.h — a generational handle table: the one place where ids given to callers
// are made from table indices, checked and retired.
//
// Model: a fixed number of slots, each with its own 32-bit generation. An allocated slot has
// the id
//     (generation << 32) | (index + 1)
// so an id is never 0 (0 stays "no handle"), is never a small number such as a child's slot
// index (its upper half is never 0), and names both the slot and the one allocation of it.
// Releasing a slot bumps its generation, so every id handed out for it before no longer
// matches: a released id is never valid again.
//
// Wraparound: a slot's generation starts at 1 and grows by one per release. When the release
// of generation UINT32_MAX would wrap it, the slot is retired instead of starting again at 1:
// it is never allocated again, so no id can come back even after 2^32 - 1 reuses of one slot.
// The table then has one slot fewer; it reports RESOURCE_EXHAUSTED only once every slot is
// taken or retired, which takes capacity * (2^32 - 1) allocations.
//
// Allocation is first fit (the lowest free index), as the tables this one replaced did, so
// the order in which callers see their indices is unchanged.
//
// Lifecycle and ownership: the lw_handle_table_t lives in the caller's memory (a field of its
// owner). lw__handle_table_initialize allocates the slot array, which the table owns;
// lw__handle_table_deinitialize frees it. Deinitializing a zero-filled table (never
// initialized, or initialize failed) is allowed and does nothing, so an owner's failed create
// can clean up uniformly.
//
// Thread safety: none inside. The table is part of its owner's state and is guarded by the
// owner's lock (the registry's mutex, the worker's w->mu); every call, lookups included, must
// hold it. An internal lock would not help: a caller always pairs a lookup with reading its
// own per-index data, which must be one critical section anyway.
//
// Errors: the functions return a status and never touch lw_error_t or the thread-local last
// error; the caller words the message (it knows what the handle was for).
#ifndef LANEWORK_LANES_HANDLE_TABLE_H_
#define LANEWORK_LANES_HANDLE_TABLE_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lw_handle_slot_state {
  LW_HANDLE_SLOT_FREE = 0,
  LW_HANDLE_SLOT_LIVE = 1,
  LW_HANDLE_SLOT_RETIRED = 2,  // its generation is spent; never allocated again
} lw_handle_slot_state_t;

typedef struct lw_handle_slot {
  uint32_t generation;  // of the current (LIVE) or next (FREE) allocation; never 0
  lw_handle_slot_state_t state;
} lw_handle_slot_t;

typedef struct lw_handle_table {
  lw_handle_slot_t *slots;
  uint32_t capacity;
  uint32_t n_live;
} lw_handle_table_t;

// The generation part of an id (for a caller that needs a 32-bit tag naming one allocation).
static inline uint32_t lw__handle_table_id_generation(uint64_t id) { return (uint32_t)(id >> 32); }

// Sets up a table of capacity slots, all free (any capacity up to UINT32_MAX: index + 1 always
// fits the low half of an id). INVALID_ARGUMENT when capacity is 0; RESOURCE_EXHAUSTED when
// the slot array cannot be allocated. On failure *t is zero-filled.
LW_MUST_USE lw_status_t lw__handle_table_initialize(lw_handle_table_t *t, uint32_t capacity);

// Frees the slot array. Ids still live simply stop existing; the caller finishes whatever
// they stood for first.
void lw__handle_table_deinitialize(lw_handle_table_t *t);

// Takes the lowest free slot: *out_index and *out_id are set, LW_OK. RESOURCE_EXHAUSTED when
// every slot is live or retired (*out_index = UINT32_MAX, *out_id = 0).
LW_MUST_USE lw_status_t lw__handle_table_alloc(lw_handle_table_t *t, uint32_t *out_index,
                                               uint64_t *out_id);

// Finds the live slot of id: *out_index set, LW_OK. NOT_FOUND for 0, an id whose index is out
// of range, a free or retired slot, or an id of an earlier allocation of the slot
// (*out_index = UINT32_MAX).
LW_MUST_USE lw_status_t lw__handle_table_lookup(const lw_handle_table_t *t, uint64_t id,
                                                uint32_t *out_index);

// The id of the live slot at index, or 0 when the slot is not live (or index is out of range).
uint64_t lw__handle_table_id(const lw_handle_table_t *t, uint32_t index);

// Frees a live slot: its generation moves on (or the slot retires, see above), so its id
// never matches again. Releasing a slot that is not live does nothing.
void lw__handle_table_release(lw_handle_table_t *t, uint32_t index);

// Live slots.
static inline uint32_t lw__handle_table_count(const lw_handle_table_t *t) { return t->n_live; }

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_HANDLE_TABLE_H_
