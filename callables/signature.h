// callables/signature.h — a callable's signature (its param_dirs) against one task's args.
//
// The signature gives the order of a kernel's parameters: each LW_PARAM_IN / OUT / INOUT takes
// the next tensor, each LW_PARAM_SCALAR the next scalar. A submit whose counts differ is
// refused before anything runs, at L2 (child/chip.c) and at L3 (parent/dag.c), with one message
// for both. A callable registered with n_params 0 gave no signature: its args are not checked
// (lanework/callable.h says so to users).
#ifndef LANEWORK_CALLABLES_SIGNATURE_H_
#define LANEWORK_CALLABLES_SIGNATURE_H_

#include <stdint.h>

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Counts the tensors and the scalars a signature takes. n_params must be <= LW_MAX_PARAMS
// (lw__callable_validate checked it at register); param_dirs may be NULL when n_params is 0.
void lw__signature_counts(uint32_t n_params, const uint8_t *param_dirs, uint32_t *out_tensors,
                          uint32_t *out_scalars);

// LW_OK when n_params is 0 (no signature given) or when the given counts are the ones the
// signature takes. Otherwise INVALID_ARGUMENT in err (may be NULL) naming the callable (NULL
// name: "callable"), the expected and the given counts of tensors and scalars, then the
// signature (last, so a long name cuts only the list), e.g.
//   "callable record expects 1 tensor and 1 scalar, given 2 tensors and 0 scalars
//    (signature INOUT, SCALAR)"
// Any thread; no lock, no allocation.
LW_MUST_USE lw_status_t lw__signature_check_counts(const char *name, uint32_t n_params,
                                                   const uint8_t *param_dirs,
                                                   uint32_t n_tensors, uint32_t n_scalars,
                                                   lw_error_t *err);

// lw__signature_check_counts on the counts of args (NULL args: no tensors, no scalars).
LW_MUST_USE lw_status_t lw__signature_check_args(const char *name, uint32_t n_params,
                                                 const uint8_t *param_dirs,
                                                 const lw_args_t *args, lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CALLABLES_SIGNATURE_H_
