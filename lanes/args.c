// lanes/args.c — building and checking lw_args_t. Errors go to the thread-local last error
// with the limit in the message.
#include "lanework/args.h"

#include <stdbool.h>
#include <string.h>

#include "lanes/args.h"
#include "lanes/error.h"

static bool tag_known(lw_tag_t tag) {
  // Unsigned compare: a negative enum value read from a hand-filled struct is unknown too.
  return (uint32_t)tag <= (uint32_t)LW_TAG_NO_DEP;
}

void lw_args_init(lw_args_t *a) {
  if (a == NULL) return;
  memset(a, 0, sizeof(*a));
}

lw_status_t lw_args_add_tensor(lw_args_t *a, void *data, uint64_t bytes, lw_tag_t tag) {
  if (a == NULL) return lw__fail(LW_INVALID_ARGUMENT, "args: args is NULL");
  if (a->n_tensors >= LW_MAX_TENSORS) {
    return lw__fail(LW_INVALID_ARGUMENT, "args: too many tensors (max %d)", LW_MAX_TENSORS);
  }
  if (data == NULL && bytes > 0) {
    return lw__fail(LW_INVALID_ARGUMENT, "args: tensor %u has NULL data and %llu bytes",
                    a->n_tensors, (unsigned long long)bytes);
  }
  if (!tag_known(tag)) {
    return lw__fail(LW_INVALID_ARGUMENT, "args: tensor %u has unknown tag %d (max %d)",
                    a->n_tensors, (int)tag, (int)LW_TAG_NO_DEP);
  }
  lw_args_tensor_t *t = &a->tensor[a->n_tensors++];
  t->data = data;
  t->bytes = bytes;
  t->tag = tag;
  t->reserved_ = 0;
  return LW_OK;
}

// Appends the 8 bytes of one scalar and records its type in the slot's bits of
// launch.scalar_types (cleared first: a hand-reset n_scalars may leave a stale type there).
static lw_status_t add_typed(lw_args_t *a, uint64_t bits, lw_scalar_type_t type,
                             const char *what, lw_error_t *err) {
  if (a == NULL) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: args is NULL");
  if (a->n_scalars >= LW_MAX_SCALARS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "args: too many scalars (max %d); the %s was not added",
                         LW_MAX_SCALARS, what);
  }
  uint32_t slot = a->n_scalars++;
  uint32_t shift = LW_SCALAR_TYPE_BITS * slot;
  a->launch.scalar_types = (a->launch.scalar_types & ~(LW_SCALAR_TYPE_MASK << shift)) |
                           ((uint32_t)type << shift);
  a->scalar[slot] = bits;
  return LW_OK;
}

lw_status_t lw_args_add_scalar(lw_args_t *a, uint64_t value) {
  lw_error_t err;
  if (add_typed(a, value, LW_SCALAR_U64, "u64", &err) != LW_OK) return lw__last_error_store(&err);
  return LW_OK;
}

lw_status_t lw_args_add_i64(lw_args_t *a, int64_t value) {
  lw_error_t err;
  if (add_typed(a, (uint64_t)value, LW_SCALAR_I64, "i64", &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  return LW_OK;
}

lw_status_t lw_args_add_f64(lw_args_t *a, double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof(bits));
  lw_error_t err;
  if (add_typed(a, bits, LW_SCALAR_F64, "f64", &err) != LW_OK) return lw__last_error_store(&err);
  return LW_OK;
}

lw_status_t lw_args_add_f32(lw_args_t *a, float value) {
  // The float's bits in the low half, the high half zero: lw_kernel_arg_f32 reads them back
  // and the OpenCL backend passes exactly these 4 bytes.
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  lw_error_t err;
  if (add_typed(a, bits, LW_SCALAR_F32, "f32", &err) != LW_OK) return lw__last_error_store(&err);
  return LW_OK;
}

lw_status_t lw__launch_check(const lw_launch_t *l, lw_error_t *err) {
  if (l->dims > LW_MAX_LAUNCH_DIMS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "args: launch dims %u is outside 0..%d", l->dims, LW_MAX_LAUNCH_DIMS);
  }
  uint32_t with_local = 0;
  uint64_t items = 1;
  for (uint32_t i = 0; i < LW_MAX_LAUNCH_DIMS; ++i) {
    if (i >= l->dims) {
      if (l->global[i] != 0 || l->local[i] != 0) {
        return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                             "args: launch dimension %u is unused (dims %u) but set to global "
                             "%llu, local %llu",
                             i, l->dims, (unsigned long long)l->global[i],
                             (unsigned long long)l->local[i]);
      }
      continue;
    }
    if (l->global[i] == 0) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "args: launch global[%u] is 0 (need >= 1 work-item)", i);
    }
    if (__builtin_mul_overflow(items, l->global[i], &items)) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "args: launch of %u dimensions has more than 2^64 work-items", l->dims);
    }
    if (l->local[i] != 0) {
      with_local++;
      if (l->global[i] % l->local[i] != 0) {
        return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                             "args: launch local[%u] = %llu does not divide global[%u] = %llu", i,
                             (unsigned long long)l->local[i], i,
                             (unsigned long long)l->global[i]);
      }
    }
  }
  if (with_local != 0 && with_local != l->dims) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "args: launch local sizes are set in %u of %u dimensions (set all, or "
                         "all 0 to let the device choose)",
                         with_local, l->dims);
  }
  return LW_OK;
}

lw_status_t lw_args_set_launch(lw_args_t *a, uint32_t dims,
                               const uint64_t global[LW_MAX_LAUNCH_DIMS],
                               const uint64_t local[LW_MAX_LAUNCH_DIMS]) {
  if (a == NULL) return lw__fail(LW_INVALID_ARGUMENT, "args: args is NULL");
  if (dims == 0 || dims > LW_MAX_LAUNCH_DIMS) {
    return lw__fail(LW_INVALID_ARGUMENT, "args: launch dims %u is outside 1..%d", dims,
                    LW_MAX_LAUNCH_DIMS);
  }
  if (global == NULL) return lw__fail(LW_INVALID_ARGUMENT, "args: launch global is NULL");
  lw_launch_t l;
  memset(&l, 0, sizeof(l));
  l.dims = dims;
  l.scalar_types = a->launch.scalar_types;  // the scalars' types share the word (args.h)
  for (uint32_t i = 0; i < dims; ++i) {
    l.global[i] = global[i];
    l.local[i] = local ? local[i] : 0;
  }
  lw_error_t err;
  lw_status_t st = lw__launch_check(&l, &err);
  if (st != LW_OK) return lw__last_error_store(&err);
  a->launch = l;
  return LW_OK;
}

lw_status_t lw__args_check(const lw_args_t *a, lw_error_t *err) {
  if (a == NULL) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: args is NULL");
  if (a->n_tensors > LW_MAX_TENSORS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: too many tensors: %u (max %d)",
                         a->n_tensors, LW_MAX_TENSORS);
  }
  if (a->n_scalars > LW_MAX_SCALARS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: too many scalars: %u (max %d)",
                         a->n_scalars, LW_MAX_SCALARS);
  }
  for (uint32_t i = 0; i < a->n_tensors; ++i) {
    const lw_args_tensor_t *t = &a->tensor[i];
    if (t->data == NULL && t->bytes > 0) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "args: tensor %u has NULL data and %llu bytes", i,
                           (unsigned long long)t->bytes);
    }
    if (!tag_known(t->tag)) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "args: tensor %u has unknown tag %d (max %d)", i, (int)t->tag,
                           (int)LW_TAG_NO_DEP);
    }
  }
  return lw__launch_check(&a->launch, err);
}

lw_status_t lw_args_validate(const lw_args_t *a) {
  lw_error_t err;
  lw_status_t st = lw__args_check(a, &err);
  if (st != LW_OK) lw__last_error_store(&err);
  return st;
}
