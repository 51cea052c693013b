// callables/registry.h — the per-chip callable registry: slots, refcounts, run pins,
// tombstones and deferred free.
//
// Vocabulary:
//   slot    one loaded callable (one digest) with the backend's module for it;
//   handle  a callable handle id given to the caller; several handles may share a slot
//           (registering the same digest twice); ids come from a lanes/handle_table.h
//           table ((generation << 32) | (entry + 1), a generation per entry), are never a
//           slot index, and a released id is never valid again;
//   refs    live handles on a slot;
//   pins    accepted runs of the slot that have not finished.
//
// Slot states:
//   EMPTY -> READY (insert) -> TOMBSTONED (last handle unregistered) -> FREEING -> EMPTY
// A TOMBSTONED slot rejects new pins and same-digest registers with FAILED_PRECONDITION
// ("pending unregister"). It is freed only when its last pin is dropped AND the unregister
// that tombstoned it has been applied; a pin count reaching zero on a READY slot frees
// nothing.
//
// The registry never calls the backend and never blocks: loading, unloading and completing
// handles are the chip's job, told by the return values here. All functions take the
// registry mutex briefly; any thread.
#ifndef LANEWORK_CALLABLES_REGISTRY_H_
#define LANEWORK_CALLABLES_REGISTRY_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/callable.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_registry lw_registry_t;

// A waiter for a deferred free: embedded in the unregister operation that waits.
typedef struct lw_registry_waiter {
  struct lw_registry_waiter *next;
} lw_registry_waiter_t;

// What a run holds while pinned. name, module and param_dirs stay valid until the matching
// unpin. n_params 0: the callable was registered without a signature.
typedef struct lw_registry_pin {
  uint32_t slot;
  void *module;
  const char *name;
  uint32_t n_params;
  const uint8_t *param_dirs;
} lw_registry_pin_t;

#define LW_REGISTRY_NAME_BYTES 128

// slots: callables loaded at once; handles: live callable handles. Errors (also filled into
// err, which may be NULL): INVALID_ARGUMENT (a zero count), RESOURCE_EXHAUSTED (no memory).
LW_MUST_USE lw_status_t lw__registry_create(uint32_t slots, uint32_t handles,
                                            lw_registry_t **out, lw_error_t *err);
// Frees the tables. Slots still holding modules are reported through unload_fn(ctx, module)
// (called without the lock) so the owner can unload them; waiters still queued are passed
// to waiter_fn so their operations can finish.
void lw__registry_destroy(lw_registry_t *reg, void (*unload_fn)(void *ctx, void *module),
                          void (*waiter_fn)(void *ctx, lw_registry_waiter_t *w), void *ctx);

// Looks a digest up. Found READY: adds a handle on the slot (refs++), *out_handle set, LW_OK.
// Found TOMBSTONED/FREEING: FAILED_PRECONDITION "callable <name>: pending unregister".
// Not found: NOT_FOUND (the caller loads it and calls lw__registry_insert).
// RESOURCE_EXHAUSTED when the handle table is full.
LW_MUST_USE lw_status_t lw__registry_acquire(lw_registry_t *reg, lw_digest_t digest,
                                             lw_callable_handle_t *out_handle, lw_error_t *err);

// Inserts a freshly loaded module as a READY slot with one handle. The slot keeps a copy of
// the signature (n_params <= LW_MAX_PARAMS entries of param_dirs; it is part of the digest, so
// one slot has one signature) for the submit-time argument check. ALREADY_EXISTS if the
// digest appeared meanwhile (the caller unloads its module and calls acquire again);
// RESOURCE_EXHAUSTED when the slot or handle table is full; INVALID_ARGUMENT for n_params
// over LW_MAX_PARAMS.
LW_MUST_USE lw_status_t lw__registry_insert(lw_registry_t *reg, lw_digest_t digest,
                                            const char *name, uint32_t n_params,
                                            const uint8_t *param_dirs, void *module,
                                            lw_callable_handle_t *out_handle, lw_error_t *err);

// Pins the slot behind handle for one run. NOT_FOUND "unknown or released callable handle";
// FAILED_PRECONDITION "pending unregister" when the handle is being unregistered or its slot
// is tombstoned.
LW_MUST_USE lw_status_t lw__registry_pin(lw_registry_t *reg, lw_callable_handle_t handle,
                                         lw_registry_pin_t *out_pin, lw_error_t *err);

// Drops a pin. Returns true when the caller must now free the slot: it was the last pin of a
// tombstoned slot with waiters. The slot is then FREEING; the caller unloads *out_module and
// calls lw__registry_complete_free. *out_waiter is then the first waiter (still queued; the
// caller may reuse its operation to carry the free to another thread).
bool lw__registry_unpin(lw_registry_t *reg, uint32_t slot, void **out_module,
                        lw_registry_waiter_t **out_waiter);

// Step 1 of unregister, on the caller's thread: marks the handle as unregistering (runs with
// it now fail "pending unregister"), drops its ref, and tombstones the slot when that was the
// last ref. NOT_FOUND for an unknown or released handle; FAILED_PRECONDITION when an
// unregister of this handle is already in progress.
LW_MUST_USE lw_status_t lw__registry_begin_unregister(lw_registry_t *reg,
                                                      lw_callable_handle_t handle,
                                                      lw_error_t *err);

typedef enum lw_registry_unregister_result {
  LW_REGISTRY_UNREGISTER_DONE = 0,      // other handles keep the slot; nothing to free
  LW_REGISTRY_UNREGISTER_FREE_NOW = 1,  // no pins: unload *out_module, then complete_free
  LW_REGISTRY_UNREGISTER_DEFERRED = 2,  // pinned or being freed: waiter queued; the free
                                        // (last unpin, or the one under way) hands it back
} lw_registry_unregister_result_t;

// Step 2 of unregister, in lane order (after every earlier run was pinned). waiter is
// queued on the slot when the result is DEFERRED, and handed back by complete_free.
lw_registry_unregister_result_t lw__registry_apply_unregister(lw_registry_t *reg,
                                                              lw_callable_handle_t handle,
                                                              lw_registry_waiter_t *waiter,
                                                              uint32_t *out_slot,
                                                              void **out_module);

// After the caller unloaded a FREEING slot's module: empties the slot, releases its handle
// ids, and returns the list of waiters to finish (may be NULL).
lw_registry_waiter_t *lw__registry_complete_free(lw_registry_t *reg, uint32_t slot);

// Copies the name of the callable in slot (for traces); "" for an empty slot.
void lw__registry_slot_name(lw_registry_t *reg, uint32_t slot, char *out, size_t n);

// Counters for tests and `lanework info`.
typedef struct lw_registry_stats {
  uint32_t slots_used;
  uint32_t handles_live;
  uint32_t tombstoned;
  uint32_t pins;
} lw_registry_stats_t;
void lw__registry_stats(lw_registry_t *reg, lw_registry_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CALLABLES_REGISTRY_H_
