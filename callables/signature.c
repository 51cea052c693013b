// callables/signature.c — see signature.h.
#include "callables/signature.h"

#include <stdio.h>

#include "lanes/error.h"

void lw__signature_counts(uint32_t n_params, const uint8_t *param_dirs, uint32_t *out_tensors,
                          uint32_t *out_scalars) {
  uint32_t tensors = 0, scalars = 0;
  for (uint32_t i = 0; i < n_params; ++i) {
    if (param_dirs[i] == LW_PARAM_SCALAR) {
      scalars++;
    } else {
      tensors++;
    }
  }
  *out_tensors = tensors;
  *out_scalars = scalars;
}

static const char *dir_name(uint8_t dir) {
  switch (dir) {
    case LW_PARAM_IN: return "IN";
    case LW_PARAM_OUT: return "OUT";
    case LW_PARAM_INOUT: return "INOUT";
    case LW_PARAM_SCALAR: return "SCALAR";
    case LW_PARAM_IN | LW_PARAM_LIVE: return "IN|LIVE";
    case LW_PARAM_OUT | LW_PARAM_LIVE: return "OUT|LIVE";
    default: return "?";
  }
}

// Writes "IN, OUT, SCALAR" into out (cap > 0), ending with "..." when it does not fit: the
// message must stay within an lw_error_t, and the counts before it already say what matters.
static void format_dirs(uint32_t n_params, const uint8_t *param_dirs, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < n_params; ++i) {
    int n = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", dir_name(param_dirs[i]));
    if (n < 0 || (size_t)n >= cap - used) {
      // Not enough room: end the list with an ellipsis where it was cut.
      if (cap >= 4) snprintf(out + cap - 4, 4, "...");
      return;
    }
    used += (size_t)n;
  }
}

static const char *plural(uint32_t n) { return n == 1 ? "" : "s"; }

lw_status_t lw__signature_check_counts(const char *name, uint32_t n_params,
                                       const uint8_t *param_dirs, uint32_t n_tensors,
                                       uint32_t n_scalars, lw_error_t *err) {
  // No signature given: the kernel reads what it was handed (lanework/callable.h).
  if (n_params == 0) return LW_OK;
  uint32_t want_tensors, want_scalars;
  lw__signature_counts(n_params, param_dirs, &want_tensors, &want_scalars);
  if (want_tensors == n_tensors && want_scalars == n_scalars) return LW_OK;
  char dirs[96];
  format_dirs(n_params, param_dirs, dirs, sizeof(dirs));
  return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       "callable %s expects %u tensor%s and %u scalar%s, given %u tensor%s "
                       "and %u scalar%s (signature %s)",
                       name ? name : "callable", want_tensors, plural(want_tensors),
                       want_scalars, plural(want_scalars), n_tensors, plural(n_tensors),
                       n_scalars, plural(n_scalars), dirs);
}

lw_status_t lw__signature_check_args(const char *name, uint32_t n_params,
                                     const uint8_t *param_dirs, const lw_args_t *args,
                                     lw_error_t *err) {
  return lw__signature_check_counts(name, n_params, param_dirs, args ? args->n_tensors : 0,
                                    args ? args->n_scalars : 0, err);
}
