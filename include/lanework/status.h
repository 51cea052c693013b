// lanework/status.h — the one status enum and the error record.
//
// Every fallible lanework function returns lw_status_t (LW_OK == 0). The detail of a failure
// travels in an lw_error_t: fixed size, no pointers, so the same record crosses process
// boundaries through shared memory unchanged.
//
// Where an error lives:
//   - async operations keep it on their handle (lw_handle_error);
//   - a sync call that fails leaves a copy in thread-local storage, read with lw_last_error().
//     A sync call that succeeds does not clear it.
#ifndef LANEWORK_STATUS_H_
#define LANEWORK_STATUS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LW_BUILDING_LIBRARY)
#define LW_API __attribute__((visibility("default")))
#else
#define LW_API
#endif

// LW_MUST_USE marks a function whose result says whether it worked (most return an
// lw_status_t): a call that drops the result warns (-Wunused-result, on by default in gcc and
// clang), and a cast to void says it is dropped on purpose and silences the warning, so a
// program built with -Werror can still write `(void)lw_args_add_scalar(&a, 1);` in cleanup
// code:
//   - C++17 and C23: the standard [[nodiscard]];
//   - clang in older modes: __attribute__((warn_unused_result)), which a (void) cast silences
//     in clang;
//   - gcc in older modes (C17, C++14): [[nodiscard]] as a GNU extension (__extension__ keeps
//     -pedantic quiet) where gcc has it (gcc 11 and later); not gcc's warn_unused_result,
//     which no cast silences (gcc bug 66425). An older gcc gets nothing.
// Inside liblanework (LW_BUILDING_LIBRARY) it stays gcc's warn_unused_result: the library's
// own code cannot drop a status even with a cast; it handles or records every one.
#if defined(__has_c_attribute) && !defined(__cplusplus)
#if __has_c_attribute(nodiscard)
#define LW_HAS_NODISCARD_ 1
#endif
#elif defined(__has_cpp_attribute) && defined(__cplusplus)
#if __has_cpp_attribute(nodiscard)
#define LW_HAS_NODISCARD_ 1
#endif
#endif
#if defined(LW_BUILDING_LIBRARY)
#define LW_MUST_USE __attribute__((warn_unused_result))
#elif defined(__cplusplus) && __cplusplus >= 201703L
#define LW_MUST_USE [[nodiscard]]
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ > 201710L && \
    defined(LW_HAS_NODISCARD_)
#define LW_MUST_USE [[nodiscard]]
#elif defined(__clang__)
#define LW_MUST_USE __attribute__((warn_unused_result))
#elif defined(__GNUC__) && defined(LW_HAS_NODISCARD_)
#define LW_MUST_USE __extension__ [[nodiscard]]
#else
#define LW_MUST_USE
#endif

// A compile-time check that reads the same in C and C++ (C17 spells it _Static_assert, C++
// static_assert), so the public headers state their layout rules in both languages.
#ifdef __cplusplus
#define LW_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define LW_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

typedef enum lw_status {
  LW_OK = 0,
  LW_CANCELLED = 1,            // the operation was cancelled before or while it ran
  LW_INVALID_ARGUMENT = 2,     // the caller passed something malformed; message says what
  LW_NOT_FOUND = 3,            // unknown or released handle; cancel of a finished handle
  LW_ALREADY_EXISTS = 4,
  LW_FAILED_PRECONDITION = 5,  // e.g. callable pending unregister
  LW_RESOURCE_EXHAUSTED = 6,   // a queue or table is full
  LW_DEADLINE_EXCEEDED = 7,    // a wait or a run ran past its deadline
  LW_TASK_FAILED = 8,          // a kernel or sub function returned an error
  LW_CHILD_EXITED = 9,         // a child process died
  LW_POISONED = 10,            // an upstream task failed, so this one never ran
  LW_UNAVAILABLE = 11,         // the chip or worker is shut down or broken
  LW_INTERNAL = 12,            // a lanework bug or a violated invariant
  LW_STATUS_COUNT_ = 13,
} lw_status_t;

// The room for an error's message, its terminating NUL included. A longer message is cut
// to fit: after its last whole word that fits, followed by "…" (U+2026, 3 bytes of UTF-8), so
// a reader sees that text is missing. A word longer than a quarter of the room (a path) is cut
// inside instead, never inside a UTF-8 character. A message that fits is never changed. The
// size is part of lw_error_t's layout (the ABI and the mailbox), hence fixed.
#define LW_ERROR_MESSAGE_BYTES 256

// What failed, where and why. worker_id is the chip/sub child index (-1: none, e.g. L2 or the
// parent itself); task_id is the task within a run (0: none).
typedef struct lw_error {
  lw_status_t code;
  int32_t worker_id;
  uint64_t task_id;
  char message[LW_ERROR_MESSAGE_BYTES];
} lw_error_t;

LW_STATIC_ASSERT(sizeof(lw_status_t) == 4, "lw_status_t must fit a 32-bit shared field");
LW_STATIC_ASSERT(sizeof(lw_error_t) == 272, "lw_error_t is part of the mailbox layout");

// The status's name, e.g. "LW_TASK_FAILED". Never NULL; unknown values give "LW_UNKNOWN".
LW_API const char *lw_status_name(lw_status_t status);

// The error left by the last failing sync call on this thread (code LW_OK if none yet).
LW_API const lw_error_t *lw_last_error(void);

#define LW_RETURN_IF_ERROR(expr)             \
  do {                                       \
    lw_status_t lw_status_tmp_ = (expr);     \
    if (lw_status_tmp_ != LW_OK) return lw_status_tmp_; \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_STATUS_H_
