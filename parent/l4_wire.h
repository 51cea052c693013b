// parent/l4_wire.h — the L4's task messages between rank 0 and the L3 ranks (DESIGN §11): a
// task, its completion, a cancel. They travel as point-to-point MPI messages, several in
// flight per rank, never a collective per task; this module only turns them into bytes and
// back, so it is tested (and fuzzed) without MPI.
//
// Every message is a 32-byte header and a body, little-endian, each part 8-byte aligned:
//   header  magic "WL4M", version, kind, the message's total bytes, the sender's rank, and seq:
//           the sender's count on this (sender, receiver) stream, 1, 2, 3, ... (a gap or a
//           repeat is a protocol error: a message was lost or replayed);
//   TASK    the task's identity (run, task, dispatch, generation: echoed by its completion),
//           the frame it occupies at the L4, what to run (a chip callable or an L3 orch
//           function, by its registered name), the chip (or LW_ANY_CHIP), timeout, launch
//           geometry, scalars, and one descriptor per tensor (id, version, bytes, home rank,
//           tag); a tensor of at most LW_L4_INLINE_MAX_BYTES may carry its bytes inside the
//           message (after the descriptors, in tensor order, each padded to 8);
//   DONE    identity and frame again, status, kernel rc and times, a bounded error text, and
//           one record per tensor version the task produced (id, version, bytes; small
//           outputs inline the same way);
//   CANCEL  identity and frame: stop that task if it still runs there;
//   MOVE    (the L4 to a rank holding a tensor) send version `version` of tensor `tensor_id`
//           (`bytes`) to rank `to_rank` as transfer `xfer` (lw__l4_comm_xfer_start): the bytes
//           go rank to rank, never through the L4;
//   FREE    (the L4 to a rank) forget tensor `tensor_id`: no task of it runs there any more;
//   LOST    (the L4 to a rank) rank `to_rank` is lost: a transfer with it will never end.
// Decode checks everything before it returns (magic, version, kind, sizes that tile the
// message exactly, counts within bounds, the name and error text terminated and printable,
// tags known, inline only within the bound, the expected sender and seq): the peer is another
// process, maybe on another host, and a bug there must not corrupt this one. Decoded
// pointers (name, inline bytes, error text) point into the decoded buffer.
//
// Threads: pure functions over caller memory; any thread.
#ifndef LANEWORK_PARENT_L4_WIRE_H_
#define LANEWORK_PARENT_L4_WIRE_H_

#include <stddef.h>
#include <stdint.h>

#include "lanework/args.h"
#include "lanework/status.h"
#include "mailbox/mailbox.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_L4_WIRE_MAGIC 0x4d344c57u  // "WL4M" as a little-endian word
#define LW_L4_WIRE_VERSION 1u
#define LW_L4_INLINE_MAX_BYTES (16u * 1024u)  // a tensor this small may ride inside a message
#define LW_L4_NAME_BYTES 64                   // a registered name with its NUL
#define LW_L4_ERROR_TEXT_BYTES 256            // a DONE's error text with its NUL
#define LW_L4_MAX_PRODUCED LW_MAX_TENSORS

typedef enum lw_l4_wire_kind {
  LW_L4_WIRE_TASK = 1,
  LW_L4_WIRE_DONE = 2,
  LW_L4_WIRE_CANCEL = 3,
  LW_L4_WIRE_MOVE = 4,
  LW_L4_WIRE_FREE = 5,
  LW_L4_WIRE_LOST = 6,
} lw_l4_wire_kind_t;

typedef enum lw_l4_task_kind {
  LW_L4_TASK_KERNEL = 1,  // a chip callable registered under name on the rank's L3
  LW_L4_TASK_ORCH = 2,    // an L3 orch function registered under name on the rank
  LW_L4_TASK_SUB = 3,     // a sub function registered under name on the rank's L3
} lw_l4_task_kind_t;

typedef struct lw_l4_wire_header {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;      // lw_l4_wire_kind_t
  uint32_t bytes;     // the whole message, header included
  int32_t from_rank;
  uint64_t seq;
  uint64_t reserved;
} lw_l4_wire_header_t;
_Static_assert(sizeof(lw_l4_wire_header_t) == 32, "L4 message header layout");

#define LW_L4_TENSOR_INLINE 1u  // lw_l4_tensor_t.flags: the bytes are inside the message
#define LW_L4_TENSOR_ZERO 2u    // TASK: the version read is all zero bytes (nothing moves)

// A tensor as a task reads or writes it, or a version a task produced.
typedef struct lw_l4_tensor {
  uint64_t tensor_id;   // the L4's id of the tensor
  uint64_t version;     // TASK: the version read (IN, INOUT) or written over; DONE: produced
  uint64_t bytes;
  // TASK: where the version read comes from: the receiving rank itself (it holds it), or
  // another rank (0: the L4) that sends it as transfer `xfer`; unused when inline or zero.
  // DONE: -1.
  int32_t home_rank;
  uint8_t tag;          // TASK: lw_tag_t; DONE: 0
  uint8_t flags;        // LW_L4_TENSOR_INLINE, LW_L4_TENSOR_ZERO (not both)
  uint16_t xfer;        // TASK: the transfer that brings it (lw__l4_comm_xfer_start); else 0
  // In memory only (not on the wire): the inline bytes. Encode reads `bytes` bytes from it
  // when LW_L4_TENSOR_INLINE is set; decode points it into the buffer (NULL otherwise).
  const void *data;
} lw_l4_tensor_t;

typedef struct lw_l4_task {
  lw_mb_identity_t identity;
  uint32_t frame;            // the task's frame at the L4 (< LW_MB_TASK_FRAMES), echoed back
  uint32_t kind;             // lw_l4_task_kind_t
  int32_t chip;              // a chip index on the rank, or LW_ANY_CHIP
  int64_t timeout_ns;        // 0: none
  char name[LW_L4_NAME_BYTES];
  lw_launch_t launch;
  uint32_t n_tensors;        // <= LW_MAX_TENSORS
  uint32_t n_scalars;        // <= LW_MAX_SCALARS
  lw_l4_tensor_t tensor[LW_MAX_TENSORS];
  uint64_t scalar[LW_MAX_SCALARS];
} lw_l4_task_t;

typedef struct lw_l4_done {
  lw_mb_identity_t identity;
  uint32_t frame;
  lw_status_t status;
  int32_t kernel_rc;
  uint64_t kernel_ns;
  uint64_t queue_ns;
  char error[LW_L4_ERROR_TEXT_BYTES];  // "" for OK
  uint32_t n_produced;                 // <= LW_L4_MAX_PRODUCED
  lw_l4_tensor_t produced[LW_L4_MAX_PRODUCED];
} lw_l4_done_t;

typedef struct lw_l4_cancel {
  lw_mb_identity_t identity;
  uint32_t frame;
} lw_l4_cancel_t;

// MOVE, FREE and LOST (FREE uses tensor_id only, LOST to_rank only: the rest is 0).
typedef struct lw_l4_move {
  uint64_t tensor_id;
  uint64_t version;
  uint64_t bytes;
  int32_t to_rank;   // >= 0, not the holder itself
  uint16_t xfer;
  uint16_t reserved;
} lw_l4_move_t;

typedef struct lw_l4_wire_msg {
  lw_l4_wire_header_t header;
  union {
    lw_l4_task_t task;
    lw_l4_done_t done;
    lw_l4_cancel_t cancel;
    lw_l4_move_t move;  // MOVE, FREE, LOST
  } u;
} lw_l4_wire_msg_t;

// The bytes the encoding of each will take (its inline bytes included).
size_t lw__l4_wire_task_bytes(const lw_l4_task_t *t);
size_t lw__l4_wire_done_bytes(const lw_l4_done_t *d);
size_t lw__l4_wire_cancel_bytes(void);
size_t lw__l4_wire_move_bytes(void);

// Encodes into buf (cap bytes) as message seq of from_rank; *out_bytes the length.
// INVALID_ARGUMENT naming what is wrong (counts, a name or text not terminated, an unknown tag
// or kind, inline past the bound or without data); RESOURCE_EXHAUSTED when cap is too small.
LW_MUST_USE lw_status_t lw__l4_wire_task_encode(const lw_l4_task_t *t, int32_t from_rank,
                                                uint64_t seq, void *buf, size_t cap,
                                                size_t *out_bytes, lw_error_t *err);
LW_MUST_USE lw_status_t lw__l4_wire_done_encode(const lw_l4_done_t *d, int32_t from_rank,
                                                uint64_t seq, void *buf, size_t cap,
                                                size_t *out_bytes, lw_error_t *err);
LW_MUST_USE lw_status_t lw__l4_wire_cancel_encode(const lw_l4_cancel_t *c, int32_t from_rank,
                                                  uint64_t seq, void *buf, size_t cap,
                                                  size_t *out_bytes, lw_error_t *err);

// kind LW_L4_WIRE_MOVE, LW_L4_WIRE_FREE or LW_L4_WIRE_LOST.
LW_MUST_USE lw_status_t lw__l4_wire_move_encode(lw_l4_wire_kind_t kind, const lw_l4_move_t *m,
                                                int32_t from_rank, uint64_t seq, void *buf,
                                                size_t cap, size_t *out_bytes, lw_error_t *err);

// Decodes and checks a message received from from_rank, which must be the seq-th of its
// stream. INTERNAL (a protocol violation of the peer) naming the rank, the seq and what is
// wrong; *out is then unspecified. Pointers in *out point into buf, which must outlive them.
LW_MUST_USE lw_status_t lw__l4_wire_decode(const void *buf, size_t bytes, int32_t from_rank,
                                           uint64_t seq, lw_l4_wire_msg_t *out,
                                           lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_L4_WIRE_H_
