// lanes/error.h — building lw_error_t records and the thread-local last error.
//
// One internal error channel (DESIGN §9). Below the public API a function that can fail
// returns its status and fills the caller's lw_error_t *err (which may be NULL) with
// lw__error_set; it never touches the thread-local last error, so an internal caller (the
// chip child, the scheduler) gets the error in hand and a public caller's last error is
// never overwritten behind its back. Only public entry points (the LW_API functions of
// include/lanework) set it: once, when the call fails, by lw__last_error_store(&err) of what
// the internals filled, or by lw__fail for an error found in the entry point itself. A call
// that succeeds, or that reports a state rather than a failure (a poll that is not done yet),
// leaves it as it was. Internal code does not read it either (lw_last_error).
// test_error_channel_sources (tests/layering/check_error_channel.cmake) enforces this for
// lanes/, callables/, mailbox/, child/ and parent/. One read is allowed below the API:
// parent/runs.c execute_run takes a failed orch function's error from the last error the
// user's failing public call left, on the same thread (the check lists it as an exception).
#ifndef LANEWORK_LANES_ERROR_H_
#define LANEWORK_LANES_ERROR_H_

#include <stddef.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Fills err (may be NULL) and returns code, so call sites read
//   return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: %u tensors > %u", n, max);
lw_status_t lw__error_set(lw_error_t *err, lw_status_t code, int32_t worker_id, uint64_t task_id,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

// Copies err into this thread's last error (what lw_last_error returns) and returns its code.
// Public entry points only (see above).
lw_status_t lw__last_error_store(const lw_error_t *err);

// lw__error_set into the thread-local last error directly; returns code. Public entry points
// only (see above).
lw_status_t lw__fail(lw_status_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Clears err to {LW_OK, -1, 0, ""}.
void lw__error_clear(lw_error_t *err);

// The contract of a public struct that grows at its end and carries its own size (the stats
// structs): the caller sets struct_size to its sizeof. Checks that it reaches at least
// min_bytes (INVALID_ARGUMENT naming what, the minimum and full_bytes otherwise, as the
// thread's last error); then copies the first min(struct_size, full_bytes) bytes of snapshot
// to out, leaving the caller's struct_size (the first uint32_t of both) as it was.
lw_status_t lw__sized_struct_check(const char *what, uint32_t struct_size, size_t min_bytes,
                                   size_t full_bytes);
void lw__sized_struct_copy(void *out, const void *snapshot, size_t full_bytes);

// A struct_size no version of a config struct will reach; anything above is garbage (say, a
// struct never set up with its *_default function) and is refused without reading it.
#define LW__SIZED_CONFIG_MAX_BYTES 4096u

// The contract of a public config struct the caller hands in (lw_chip_config_t,
// lw_worker_config_t, lw_run_config_t): its first field, uint32_t struct_size, is set by its
// *_default function to the sizeof the caller was compiled with. Reads the caller's struct
// `in` over `out`, which holds this library's defaults and is full_bytes long:
//   - struct_size 0, below min_bytes (the struct's first version) or above
//     LW__SIZED_CONFIG_MAX_BYTES: INVALID_ARGUMENT naming what and the size;
//   - at most full_bytes (an older or the same version): its first struct_size bytes are
//     copied, so the fields it does not have keep their defaults;
//   - above full_bytes (a newer program): accepted only when every byte past full_bytes is 0,
//     i.e. the fields this library does not know are left at their defaults (0 means default
//     for every appended field); otherwise INVALID_ARGUMENT naming the first non-zero byte.
// out->struct_size is full_bytes afterwards. Fills err on failure.
lw_status_t lw__sized_config_read(const char *what, const void *in, size_t min_bytes,
                                  size_t full_bytes, void *out, lw_error_t *err);
// What a *_default_sized function writes: the first min(struct_size, full_bytes) bytes of
// defaults (with struct_size in its first field) and zeros up to struct_size beyond that.
void lw__sized_config_fill(void *out, uint32_t struct_size, const void *defaults,
                           size_t full_bytes);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_ERROR_H_
