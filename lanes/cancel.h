// lanes/cancel.h — cooperative cancellation words (seed 000).
//
// A cancel word is a uint64 in memory the kernel can read. At run start the run lane stores a
// fresh even generation and hands (word, generation) to the kernel. A canceller that loaded
// the generation while that run was in flight calls lw__cancel_request(word, loaded): it sets
// bit 0 only if the word still holds loaded (compare-and-swap), so a stale cancel cannot hit a
// later run, and a second cancel of the same run finds bit 0 already set and does nothing.
// Nothing to allocate or free. The word may live in shared memory.
//
// A run lane that waits on a device (a CUDA kernel, which polls a device-side copy of the stop)
// naps with lw__cancel_nap rather than a plain sleep: a successful request wakes the nap
// (a futex on the word's low 32 bits, not private, so a canceller in another process wakes
// it too), and the stop reaches the device without waiting out the nap.
#ifndef LANEWORK_LANES_CANCEL_H_
#define LANEWORK_LANES_CANCEL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef _Atomic uint64_t lw_cancel_word_t;

// Stores the next even generation after the word's current value (release) and returns it.
// Only the run lane that owns the word calls this.
uint64_t lw__cancel_begin(lw_cancel_word_t *word);

// Sets bit 0 iff *word == loaded and loaded is an even (live) generation. Returns true when
// this call cancelled the run (and then wakes a lw__cancel_nap on the word: one futex wake);
// false for a stale or repeated request. Any thread or process.
bool lw__cancel_request(lw_cancel_word_t *word, uint64_t loaded);
// Sleeps up to ns nanoseconds, or until the run of this generation is cancelled (returning at
// once when it already is). A signal or a spurious wake ends it early: callers nap in a loop
// that checks what they wait for. The calling thread's timer slack applies.
void lw__cancel_nap(const lw_cancel_word_t *word, uint64_t generation, int64_t ns);

// True when the run with this generation was cancelled (the word moved off generation).
bool lw__cancel_is_requested(const lw_cancel_word_t *word, uint64_t generation);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_CANCEL_H_
