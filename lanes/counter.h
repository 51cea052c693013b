// lanes/counter.h — statistics counters with one writer.
//
// A counter that one thread at a time bumps (the DAG's owner in its pass, under the pass
// token) and any thread reads with a relaxed load needs no read-modify-write: a relaxed load
// and a relaxed store of the sum. A locked add (what atomic_fetch_add is on x86) is also a full
// barrier: in the middle of a pass it waits for the stores before it, a task's post into a
// cache line the child holds among them, to leave the store buffer, a cross-core transfer (~0.2
// us on a 16-core host). Readers see each value the writer stored, never a torn one.
//
// The writers must be ordered among themselves (a lock or a token passed with release and
// acquire); two unordered writers lose counts.
#ifndef LANEWORK_LANES_COUNTER_H_
#define LANEWORK_LANES_COUNTER_H_

#include <stdatomic.h>
#include <stdint.h>

static inline void lw__counter_add_one_writer(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

#endif  // LANEWORK_LANES_COUNTER_H_
