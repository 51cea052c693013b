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
// the message (return lw_kernel_fail(ctx, ...) puts the kernel's own words there too; scalar
// arguments are read with lw_kernel_arg_u64/_i64/_f64/_f32). A kernel polls lw_kernel_should_stop() at block granularity and returns
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
// For lw_kernel_fail (vsnprintf) and the scalar accessors (memcpy); kernels link libc.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

// 2: ctx->launch; 3: ctx->fail_text (lw_kernel_fail); 4: ctx->poll_hook
#define LW_KERNEL_ABI_VERSION 4u
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
  // Added in ABI 3, at the end (older kernels never touch it): where lw_kernel_fail writes why
  // the run (or prepare) failed, fail_bytes long including the NUL. The chip empties it before
  // each call and, when the kernel returns non-zero, quotes it in the error (cut at fail_bytes
  // - 1, bytes that are not printable text replaced). NULL in release.
  char *fail_text;
  uint32_t fail_bytes;
  uint32_t reserved_;
  // Added in ABI 4, at the end (older kernels never call it): NULL on every chip unless a
  // backend must hold a running kernel at its polls. Today only the sim backend's documented
  // test hook sets it (LW_SIM_DEVICE_LOCK=1, docs/observability.md): a register then holds a
  // device-wide lock for its whole load, as a GPU driver's compiler does, and the hook makes
  // the running kernel's polls wait for it, so the overlap benchmark can prove that it sees a
  // stall. Kernels never call it themselves; lw_kernel_should_stop does. Under that hook a poll
  // may block for a whole register, sees no cancel or deadline while it waits, and may come
  // from any thread of the kernel: a kernel must not poll while holding a lock its own prepare
  // needs. A kernel built against ABI 3 or older never calls it (it then runs unstalled).
  void (*poll_hook)(const struct lw_kernel_ctx *ctx);
  void *poll_hook_arg;  // the backend's, for poll_hook
} lw_kernel_ctx_t;

// True once this run was cancelled. One relaxed load and a compare (plus, from ABI 4, a test
// for the poll hook, which is NULL outside the stall test hook): a stale value only delays the
// stop by one block, and nothing else is read based on it.
static inline bool lw_kernel_should_stop(const lw_kernel_ctx_t *ctx) {
  if (ctx->abi_version >= 4u && ctx->poll_hook != NULL) ctx->poll_hook(ctx);
#ifdef __cplusplus
  return ctx->cancel_word->load(std::memory_order_relaxed) != ctx->generation;
#else
  return atomic_load_explicit(ctx->cancel_word, memory_order_relaxed) != ctx->generation;
#endif
}

#define LW_KERNEL_FAILED (-1)  // what lw_kernel_fail returns

// Says why the kernel failed, printf style, and returns LW_KERNEL_FAILED for the kernel to
// return at once:
//
//   if (n % 4 != 0) return lw_kernel_fail(ctx, "n (%llu) is not a multiple of 4", n);
//
// The run then fails LW_TASK_FAILED with "chip 0: kernel saxpy failed: n (7) is not a multiple
// of 4 (returned -1)" (prepare: the register fails the same way). A longer text is cut. A
// chip older than ABI 3 has no buffer: the text is dropped and only the return value counts.
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static inline int lw_kernel_fail(lw_kernel_ctx_t *ctx, const char *fmt, ...) {
  if (ctx != NULL && ctx->abi_version >= 3u && ctx->fail_text != NULL && ctx->fail_bytes > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->fail_text, ctx->fail_bytes, fmt, ap);
    va_end(ap);
  }
  return LW_KERNEL_FAILED;
}

// Scalar accessors: scalar i of the run (0-based, in the order the caller added them), read as
// the named type. They reinterpret the slot's 8 bytes and do not check its recorded type
// (lw_kernel_arg_type tells it); an index at or past args->n_scalars reads 0. f32 reads the
// low 32 bits, where lw_args_add_f32 put the float.
static inline lw_scalar_type_t lw_kernel_arg_type(const lw_kernel_args_t *args, uint32_t i) {
  return i < args->n_scalars ? lw_scalar_type_get(&args->launch, i) : LW_SCALAR_U64;
}

static inline uint64_t lw_kernel_arg_u64(const lw_kernel_args_t *args, uint32_t i) {
  return i < args->n_scalars && i < LW_MAX_SCALARS ? args->scalar[i] : 0;
}

static inline int64_t lw_kernel_arg_i64(const lw_kernel_args_t *args, uint32_t i) {
  return (int64_t)lw_kernel_arg_u64(args, i);
}

static inline double lw_kernel_arg_f64(const lw_kernel_args_t *args, uint32_t i) {
  uint64_t bits = lw_kernel_arg_u64(args, i);
  double v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

static inline float lw_kernel_arg_f32(const lw_kernel_args_t *args, uint32_t i) {
  uint32_t bits = (uint32_t)lw_kernel_arg_u64(args, i);
  float v;
  memcpy(&v, &bits, sizeof(v));
  return v;
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
