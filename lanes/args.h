// lanes/args.h — checking an lw_args_t below the public API.
#ifndef LANEWORK_LANES_ARGS_H_
#define LANEWORK_LANES_ARGS_H_

#include "lanework/args.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// lw_args_validate for internal callers: the same checks and messages, filling err (may be
// NULL) instead of the thread-local last error (lanes/error.h).
LW_MUST_USE lw_status_t lw__args_check(const lw_args_t *a, lw_error_t *err);

// Checks launch geometry (the rules of lw_args_set_launch; dims 0 needs every entry 0).
// INVALID_ARGUMENT naming the dimension and the values. l may come from shared memory: the
// caller passes a private copy.
LW_MUST_USE lw_status_t lw__launch_check(const lw_launch_t *l, lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_ARGS_H_
