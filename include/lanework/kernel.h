// lanework/kernel.h — the kernel ABI. Header-only: kernels include this and do NOT link
// against liblanework.
//
// A kernel image is an ELF shared object exporting
//
//   int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args);   // required*
//   int lw_kernel_prepare(lw_kernel_ctx_t *ctx);   // optional: run once at register
//   void lw_kernel_release(lw_kernel_ctx_t *ctx);  // optional: run once at unregister
//
// (*) the entry symbol may be renamed in lw_callable_t.entry.
//
// Return 0 for success; any other value fails the run with LW_TASK_FAILED and the value in
// the message. A kernel polls lw_kernel_should_stop() at block granularity and returns
// LW_KERNEL_CANCELLED (or any value) once it says true; the run then finishes LW_CANCELLED
// (LW_DEADLINE_EXCEEDED when its timeout stopped it) whatever the kernel returned, 0
// included: outputs of a stopped run are unspecified and never reported OK.
//
// ctx->state is the kernel's own: prepare may set it (e.g. to a table it built) and every
// later run and release sees the same value. Runs of one chip are serial (one run lane), but
// prepare/release run on the register lane, concurrently with runs of OTHER callables.
#ifndef LANEWORK_KERNEL_H_
#define LANEWORK_KERNEL_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/args.h"

// The cancel word is a 64-bit atomic that the library writes and the kernel reads. C names it
// _Atomic uint64_t; C++ has no _Atomic before C++23, so there it is std::atomic<uint64_t>,
// the type C++23 defines _Atomic(uint64_t) to be. Only a pointer to it sits in
// lw_kernel_ctx_t, so the struct's layout is the same in both languages; the asserts check
// that the word itself has uint64_t's size and alignment and needs no lock, which is what lets
// the two languages share it.
#ifdef __cplusplus
#include <atomic>
typedef std::atomic<uint64_t> lw_kernel_cancel_word_t;
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the cancel word must be lock-free");
static_assert(sizeof(lw_kernel_cancel_word_t) == sizeof(uint64_t) &&
                  alignof(lw_kernel_cancel_word_t) == alignof(uint64_t),
              "the cancel word must be laid out as a plain uint64_t");
#else
#include <stdatomic.h>
typedef _Atomic uint64_t lw_kernel_cancel_word_t;
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the cancel word must be lock-free");
_Static_assert(sizeof(lw_kernel_cancel_word_t) == sizeof(uint64_t) &&
                   _Alignof(lw_kernel_cancel_word_t) == _Alignof(uint64_t),
               "the cancel word must be laid out as a plain uint64_t");
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LW_KERNEL_ABI_VERSION 2u  // 2: ctx->launch
#define LW_KERNEL_CANCELLED (-125)  // conventional return of a kernel that saw should_stop

typedef struct lw_kernel_ctx {
  uint32_t abi_version;           // LW_KERNEL_ABI_VERSION
  int32_t chip_id;                // the chip's device id
  // The run's cancel word and the generation this run started with. The word holds the
  // generation while the run may continue; a canceller sets bit 0 (see lanes/cancel.h).
  const lw_kernel_cancel_word_t *cancel_word;
  uint64_t generation;
  void *state;                    // kernel-owned; set by prepare, passed to every run
  const char *name;               // the callable's name
  // Added in ABI 2, at the end (older kernels never read it): the run's launch geometry from
  // lw_args_set_launch (dims 0: none given), the same as args->launch. Zero in prepare and
  // release.
  lw_launch_t launch;
} lw_kernel_ctx_t;

// True once this run was cancelled. One relaxed load and a compare: a stale value only delays
// the stop by one block, and nothing else is read based on it.
static inline bool lw_kernel_should_stop(const lw_kernel_ctx_t *ctx) {
#ifdef __cplusplus
  return ctx->cancel_word->load(std::memory_order_relaxed) != ctx->generation;
#else
  return atomic_load_explicit(ctx->cancel_word, memory_order_relaxed) != ctx->generation;
#endif
}

typedef int (*lw_kernel_main_fn)(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args);
typedef int (*lw_kernel_prepare_fn)(lw_kernel_ctx_t *ctx);
typedef void (*lw_kernel_release_fn)(lw_kernel_ctx_t *ctx);

#define LW_KERNEL_EXPORT __attribute__((visibility("default"), used))

// The entry points a kernel image may define (declared here so kernels compile cleanly with
// -Wmissing-prototypes; a kernel defines only the ones it has).
LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args);
LW_KERNEL_EXPORT int lw_kernel_prepare(lw_kernel_ctx_t *ctx);
LW_KERNEL_EXPORT void lw_kernel_release(lw_kernel_ctx_t *ctx);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_KERNEL_H_
