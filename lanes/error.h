// lanes/error.h — building lw_error_t records and the thread-local last error.
#ifndef LANEWORK_LANES_ERROR_H_
#define LANEWORK_LANES_ERROR_H_

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Fills err (may be NULL) and returns code, so call sites read
//   return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: %u tensors > %u", n, max);
lw_status_t lw__error_set(lw_error_t *err, lw_status_t code, int32_t worker_id, uint64_t task_id,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

// Copies err into this thread's last error (what lw_last_error returns) and returns its code.
lw_status_t lw__last_error_store(const lw_error_t *err);

// lw__error_set into the thread-local last error directly; returns code.
lw_status_t lw__fail(lw_status_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Clears err to {LW_OK, -1, 0, ""}.
void lw__error_clear(lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_ERROR_H_
