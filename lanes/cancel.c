// lanes/cancel.c — cooperative cancellation words (seed 000).
//
// Word values: an even value g is the live generation of the current run; g | 1 means that
// run was cancelled. lw__cancel_begin moves to the next even value above whatever the word
// holds, so every run gets a generation no earlier cancel could have targeted.
#include "lanes/cancel.h"

#include "lanes/sys.h"

// The futex word of a cancel word: its low 32 bits, which hold bit 0 and change with every
// generation's low bits. A generation that differs only above bit 31 from the one a nap waits
// for cannot appear while that run lives (only its own run lane moves the generation).
static const _Atomic uint32_t *futex_word(const lw_cancel_word_t *word) {
  _Static_assert(sizeof(lw_cancel_word_t) == 8 && sizeof(_Atomic uint32_t) == 4,
                 "a cancel word is two futex words");
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return (const _Atomic uint32_t *)(const void *)word + 1;
#else
  return (const _Atomic uint32_t *)(const void *)word;
#endif
}

uint64_t lw__cancel_begin(lw_cancel_word_t *word) {
  // Relaxed: only the owning run lane changes the generation; cancellers only ever set bit 0
  // of an even value, which (cur | 1) + 1 already steps over.
  uint64_t cur = atomic_load_explicit(word, memory_order_relaxed);
  uint64_t next = (cur | 1u) + 1u;
  // A store (not a CAS) is enough: a cancel racing with it either hits the old generation
  // first (cur + 1 < next) or fails its CAS against next.
  // Release: the kernel and cancellers that read next also see the run's setup before it.
  atomic_store_explicit(word, next, memory_order_release);
  return next;
}

bool lw__cancel_request(lw_cancel_word_t *word, uint64_t loaded) {
  if ((loaded & 1u) != 0) return false;  // already a cancelled generation: nothing to hit
  uint64_t expected = loaded;
  // The CAS is the whole protocol: it sets bit 0 only while the word still holds the
  // generation the canceller saw, so a stale cancel cannot hit a later run. acq_rel so that
  // the canceller's prior writes (e.g. a reason) are visible to whoever observes the bit.
  if (!atomic_compare_exchange_strong_explicit(word, &expected, loaded | 1u, memory_order_acq_rel,
                                               memory_order_relaxed)) {
    return false;
  }
  // After the CAS: a nap that compared the word before it sleeps on the futex and is woken
  // here; one that compares after sees the new value and does not sleep.
  (void)lw__sys_futex_wake(futex_word(word), 1, true);
  return true;
}

void lw__cancel_nap(const lw_cancel_word_t *word, uint64_t generation, int64_t ns) {
  (void)lw__sys_futex_wait(futex_word(word), (uint32_t)generation, lw__deadline_after(ns), true);
}

bool lw__cancel_is_requested(const lw_cancel_word_t *word, uint64_t generation) {
  // Acquire pairs with the canceller's CAS (see lw__cancel_request).
  return atomic_load_explicit(word, memory_order_acquire) != generation;
}
