// lanework/args.h — task arguments: tensors and scalars.
//
// lw_args_t lives in caller memory (stack is fine); it holds no allocation and needs no
// deinitialize. Submitting copies it, so the caller may reuse it at once after a submit
// returns. The tensor data itself is NOT copied: it must stay valid until the run finishes
// (at L3 it must live in lw_worker_alloc memory).
#ifndef LANEWORK_ARGS_H_
#define LANEWORK_ARGS_H_

#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_MAX_TENSORS 16
#define LW_MAX_SCALARS 16

// Tags drive dependency inference in the L3 orchestrator's tensor map. At L2 they are kept but
// not interpreted (the run lane is FIFO).
typedef enum lw_tag {
  LW_TAG_INPUT = 0,            // read: depends on the last writer (read-after-write)
  // The three writes depend on the last writer (write-after-write) and on every reader since
  // it (write-after-read), then become the last writer.
  LW_TAG_OUTPUT = 1,           // written
  LW_TAG_INOUT = 2,            // read and written
  LW_TAG_OUTPUT_EXISTING = 3,  // written in place into an existing buffer
  LW_TAG_NO_DEP = 4,           // neither looked up nor recorded
} lw_tag_t;

typedef struct lw_args_tensor {
  void *data;
  uint64_t bytes;
  lw_tag_t tag;
  uint32_t reserved_;
} lw_args_tensor_t;

#define LW_MAX_LAUNCH_DIMS 3

// Launch geometry, OpenCL style: dims work-item dimensions (1..3), global[i] work-items in
// dimension i, local[i] the work-group size (0 in every used dimension: the device chooses).
// dims 0 means no geometry was given: a device backend then runs a single work-item, and a sim
// kernel decides for itself. Unused dimensions are 0.
//
// scalar_types records the type of every scalar slot (see lw_scalar_type_t below). It lives
// here because it is the one spare word that already travels with the args on every path (the
// caller's lw_args_t, the mailbox task frame, the kernel's lw_kernel_args_t and ctx->launch),
// so typed scalars did not change any layout. lw_args_add_* write it; lw_args_set_launch keeps
// it.
typedef struct lw_launch {
  uint32_t dims;
  uint32_t scalar_types;  // LW_SCALAR_TYPE_BITS per scalar slot, slot i at bit 2 * i
  uint64_t global[LW_MAX_LAUNCH_DIMS];
  uint64_t local[LW_MAX_LAUNCH_DIMS];
} lw_launch_t;

// What a scalar slot holds. Every slot is 8 bytes; the type says how to read them. A device
// backend passes the scalar to the kernel as this type (OpenCL: ulong, long, double, float).
typedef enum lw_scalar_type {
  LW_SCALAR_U64 = 0,  // lw_args_add_scalar: an unsigned 64-bit integer (the default)
  LW_SCALAR_I64 = 1,  // lw_args_add_i64: a signed 64-bit integer, two's complement
  LW_SCALAR_F64 = 2,  // lw_args_add_f64: the bits of an IEEE-754 double
  LW_SCALAR_F32 = 3,  // lw_args_add_f32: the bits of an IEEE-754 float in the low 32 bits
} lw_scalar_type_t;

#define LW_SCALAR_TYPE_BITS 2u
#define LW_SCALAR_TYPE_MASK 3u

// The type of scalar slot i as recorded in launch->scalar_types (U64 for i out of range).
static inline lw_scalar_type_t lw_scalar_type_get(const lw_launch_t *launch, uint32_t i) {
  if (i >= LW_MAX_SCALARS) return LW_SCALAR_U64;
  return (lw_scalar_type_t)((launch->scalar_types >> (LW_SCALAR_TYPE_BITS * i)) &
                            LW_SCALAR_TYPE_MASK);
}

typedef struct lw_args {
  uint32_t n_tensors;
  uint32_t n_scalars;
  lw_args_tensor_t tensor[LW_MAX_TENSORS];
  uint64_t scalar[LW_MAX_SCALARS];
  lw_launch_t launch;  // lw_args_set_launch; zeroed by lw_args_init (no geometry)
} lw_args_t;

// What a kernel or a sub function receives: tags stripped, order kept.
typedef struct lw_kernel_args {
  uint32_t n_tensors;
  uint32_t n_scalars;
  struct {
    void *data;
    uint64_t bytes;
  } tensor[LW_MAX_TENSORS];
  uint64_t scalar[LW_MAX_SCALARS];
  lw_launch_t launch;  // as the caller set it (dims 0: none)
} lw_kernel_args_t;

// Empties *a.
LW_API void lw_args_init(lw_args_t *a);

// Appends a tensor. INVALID_ARGUMENT (and lw_last_error says why) when a is NULL, data is NULL
// with bytes > 0, the tag is unknown, or LW_MAX_TENSORS are already present.
LW_API LW_MUST_USE lw_status_t lw_args_add_tensor(lw_args_t *a, void *data, uint64_t bytes,
                                                  lw_tag_t tag);

// Appends a scalar; INVALID_ARGUMENT past LW_MAX_SCALARS.
LW_API LW_MUST_USE lw_status_t lw_args_add_scalar(lw_args_t *a, uint64_t value);

// Append a typed scalar (see lw_scalar_type_t) in the same sequence as lw_args_add_scalar: a
// kernel reads it with lw_kernel_arg_i64 / _f64 / _f32 (lanework/kernel.h) at the same index,
// and the OpenCL backend passes it as a long, double or float kernel argument.
// INVALID_ARGUMENT past LW_MAX_SCALARS.
LW_API LW_MUST_USE lw_status_t lw_args_add_i64(lw_args_t *a, int64_t value);
LW_API LW_MUST_USE lw_status_t lw_args_add_f64(lw_args_t *a, double value);
LW_API LW_MUST_USE lw_status_t lw_args_add_f32(lw_args_t *a, float value);

// Sets the launch geometry: dims 1..LW_MAX_LAUNCH_DIMS, global[i] >= 1 for i < dims, local
// NULL or all 0 (the device chooses) or every local[i] >= 1 dividing global[i]. Entries past
// dims are ignored and stored as 0. INVALID_ARGUMENT naming the dimension and the values.
LW_API LW_MUST_USE lw_status_t lw_args_set_launch(lw_args_t *a, uint32_t dims,
                                                  const uint64_t global[LW_MAX_LAUNCH_DIMS],
                                                  const uint64_t local[LW_MAX_LAUNCH_DIMS]);

// Checks an args struct filled by hand (counts within limits, tags known, data set).
LW_API LW_MUST_USE lw_status_t lw_args_validate(const lw_args_t *a);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_ARGS_H_
