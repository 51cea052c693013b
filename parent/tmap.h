// parent/tmap.h — the tensor map (hazard map) of the parent's orchestrator; for parent/ only.
// It maps a buffer address to the last task that wrote it and the tasks that read it since
// that write, and for each access of a new task it reports the earlier tasks the new one must
// wait for:
//   INPUT                          read-after-write: the last writer;
//   OUTPUT, INOUT, OUTPUT_EXISTING write-after-write: the last writer, and write-after-read:
//                                  every reader since that write; the task becomes the writer
//                                  and the reader list starts empty;
//   NO_DEP (or a NULL address)     nothing is looked up or recorded.
// Keys are exact addresses: two tensors that overlap without the same start address are not
// related. The map knows nothing of tasks, runs or workers: a task is an opaque reference
// {index, gen} and the caller says, through a callback, whether a reference still names an
// unfinished task. A finished task's effect on the buffer is complete, so it is never reported
// as a producer and is dropped from reader lists when they fill up.
//
// Scopes: buffers first written inside a scope are forgotten when the scope ends (their next
// use starts with no producer). A buffer that already had a writer when the scope began, or
// that the scope only read, keeps its entry.
//
// Lifecycle:
//   lw__tmap_create -> (lw__tmap_use, lw__tmap_scope_begin/end)* -> lw__tmap_clear (between
//   runs; keeps the allocated buckets) -> ... -> lw__tmap_destroy.
// Ownership: the map owns its entries and reader lists; it holds no pointer into the caller's
// memory other than the callback contexts, which must outlive it (live_ctx) or the call
// (edge_ctx).
// Threads: the map has no lock. One thread at a time may call it. In the worker that is the
// DAG's owner inside its pass (parent/dag.c; the DAG owner's token held, parent/sched.h),
// because the callbacks read and write task state.
// Bounds: lw__tmap_use costs expected O(1) for a read and O(readers since the last write) for
// a write; a reader list holds at most about twice the readers still unfinished (a full list
// first drops finished readers), however many tasks read the buffer over a run. The map holds
// one entry per distinct address used since the last clear (minus the ones scopes forgot); it
// doubles its bucket array when entries exceed twice the buckets and never shrinks it.
// lw__tmap_scope_end costs O(buffers first written inside the scope).
#ifndef LANEWORK_PARENT_TMAP_H_
#define LANEWORK_PARENT_TMAP_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/args.h"
#include "lanework/status.h"

// Scopes nest at most this deep (depth 0 is outside every scope).
#define LW_TMAP_MAX_SCOPES 16
// Bucket count of a map created with initial_buckets == 0.
#define LW_TMAP_DEFAULT_BUCKETS 1024

typedef struct lw_tmap lw_tmap_t;

// An opaque task reference: the map only stores and compares it.
typedef struct lw_tmap_ref {
  uint32_t index;
  uint32_t gen;
} lw_tmap_ref_t;

// Returns true while ref names a task that has not finished (its accesses may still be in
// flight). Called from lw__tmap_use only, on the calling thread.
typedef bool (*lw_tmap_live_fn)(void *ctx, lw_tmap_ref_t ref);
// Receives one producer the new task must wait for (always live at the time of the call). A
// status other than LW_OK stops lw__tmap_use, which returns it.
typedef lw_status_t (*lw_tmap_edge_fn)(void *ctx, lw_tmap_ref_t producer);
// Test hook: called before every allocation; returning false makes that allocation fail.
typedef bool (*lw_tmap_alloc_gate_fn)(void *ctx);

typedef struct lw_tmap_options {
  lw_tmap_live_fn live;         // required
  void *live_ctx;
  uint32_t initial_buckets;     // a power of two; 0 means LW_TMAP_DEFAULT_BUCKETS
  lw_tmap_alloc_gate_fn alloc_gate;  // NULL in production
  void *alloc_gate_ctx;
} lw_tmap_options_t;

// Creates an empty map at depth 0. LW_INVALID_ARGUMENT when live is NULL or initial_buckets is
// not a power of two, LW_RESOURCE_EXHAUSTED when out of memory; *out is NULL on error. Does
// not set the thread's last error (the caller words it).
LW_MUST_USE lw_status_t lw__tmap_create(const lw_tmap_options_t *options, lw_tmap_t **out);
// Frees the map and everything in it. NULL is fine.
void lw__tmap_destroy(lw_tmap_t *m);
// Forgets every buffer and closes every scope (depth 0); keeps the buckets for the next run.
void lw__tmap_clear(lw_tmap_t *m);

// Records that task accesses the buffer at key with tag, calling edge(edge_ctx, producer) for
// each live producer task must wait for, in this order: the last writer, then (for a write)
// the readers since that write, oldest first. Reporting task itself as a producer is possible
// when it uses one buffer through two tensors; the caller ignores such an edge. Returns LW_OK,
// edge's status if it fails, or LW_RESOURCE_EXHAUSTED when out of memory. On an error the
// edges already reported stay reported and this access may not be recorded: the caller fails
// the task (and its run) and clears the map before the next run.
LW_MUST_USE lw_status_t lw__tmap_use(lw_tmap_t *m, uintptr_t key, lw_tag_t tag, lw_tmap_ref_t task,
                                     lw_tmap_edge_fn edge, void *edge_ctx);

// Opens a scope. Returns false (nothing changed) when LW_TMAP_MAX_SCOPES are already open.
LW_MUST_USE bool lw__tmap_scope_begin(lw_tmap_t *m);
// Closes the innermost scope, forgetting the buffers first written inside it. Returns false
// (nothing changed) when no scope is open.
LW_MUST_USE bool lw__tmap_scope_end(lw_tmap_t *m);
// The number of open scopes.
uint32_t lw__tmap_depth(const lw_tmap_t *m);

// What the map holds for one buffer; for tests and diagnostics.
typedef struct lw_tmap_entry_info {
  bool has_writer;
  lw_tmap_ref_t writer;
  uint32_t n_readers;    // readers since the last write, finished ones not yet dropped included
  uint32_t cap_readers;  // the capacity of the reader list
} lw_tmap_entry_info_t;

// Fills *out_info and returns true when the map has an entry for key.
bool lw__tmap_lookup(const lw_tmap_t *m, uintptr_t key, lw_tmap_entry_info_t *out_info);
// The number of buffers the map holds, and its bucket count.
uint32_t lw__tmap_count(const lw_tmap_t *m);
uint32_t lw__tmap_bucket_count(const lw_tmap_t *m);

#endif  // LANEWORK_PARENT_TMAP_H_
