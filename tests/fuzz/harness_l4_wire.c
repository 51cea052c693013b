// tests/fuzz/harness_l4_wire.c — lw__l4_wire_decode (parent/l4_wire.h) on arbitrary bytes, as
// a message from another rank. Whatever the bytes: an error is INTERNAL with a message, or the
// message decodes to values within their bounds whose inline bytes lie inside the input, and
// encodes back to a message that decodes to the same values.
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_harness.h"
#include "parent/l4_wire.h"

static void check_inside(const uint8_t *buf, size_t size, const lw_l4_tensor_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    LW_FUZZ_CHECK((t[i].flags & ~(LW_L4_TENSOR_INLINE | LW_L4_TENSOR_ZERO)) == 0);
    LW_FUZZ_CHECK(!(t[i].flags & LW_L4_TENSOR_INLINE) || !(t[i].flags & LW_L4_TENSOR_ZERO));
    if (!(t[i].flags & LW_L4_TENSOR_INLINE)) {
      LW_FUZZ_CHECK(t[i].data == NULL);
      continue;
    }
    LW_FUZZ_CHECK(t[i].bytes <= LW_L4_INLINE_MAX_BYTES);
    const uint8_t *d = t[i].data;
    LW_FUZZ_CHECK(d >= buf && d + t[i].bytes <= buf + size);
  }
}

static bool same_tensors(const lw_l4_tensor_t *a, const lw_l4_tensor_t *b, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (a[i].tensor_id != b[i].tensor_id || a[i].version != b[i].version ||
        a[i].bytes != b[i].bytes || a[i].home_rank != b[i].home_rank || a[i].tag != b[i].tag ||
        a[i].flags != b[i].flags || a[i].xfer != b[i].xfer) {
      return false;
    }
    if ((a[i].flags & LW_L4_TENSOR_INLINE) && a[i].bytes &&
        memcmp(a[i].data, b[i].data, (size_t)a[i].bytes) != 0) {
      return false;
    }
  }
  return true;
}

// Encodes what was decoded and decodes it again: the same values come back.
static void round_trip(const lw_l4_wire_msg_t *m, int32_t from, uint64_t seq) {
  size_t cap = 0;
  switch (m->header.kind) {
    case LW_L4_WIRE_TASK: cap = lw__l4_wire_task_bytes(&m->u.task); break;
    case LW_L4_WIRE_DONE: cap = lw__l4_wire_done_bytes(&m->u.done); break;
    case LW_L4_WIRE_MOVE:
    case LW_L4_WIRE_FREE:
    case LW_L4_WIRE_LOST: cap = lw__l4_wire_move_bytes(); break;
    default: cap = lw__l4_wire_cancel_bytes(); break;
  }
  uint8_t *buf = malloc(cap);
  if (!buf) abort();
  size_t n = 0;
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st;
  switch (m->header.kind) {
    case LW_L4_WIRE_TASK: st = lw__l4_wire_task_encode(&m->u.task, from, seq, buf, cap, &n, &err); break;
    case LW_L4_WIRE_DONE: st = lw__l4_wire_done_encode(&m->u.done, from, seq, buf, cap, &n, &err); break;
    case LW_L4_WIRE_MOVE:
    case LW_L4_WIRE_FREE:
    case LW_L4_WIRE_LOST:
      st = lw__l4_wire_move_encode((lw_l4_wire_kind_t)m->header.kind, &m->u.move, from, seq, buf,
                                   cap, &n, &err);
      break;
    default: st = lw__l4_wire_cancel_encode(&m->u.cancel, from, seq, buf, cap, &n, &err); break;
  }
  LW_FUZZ_CHECK(st == LW_OK);
  LW_FUZZ_CHECK(n == cap);
  lw_l4_wire_msg_t again;
  LW_FUZZ_CHECK(lw__l4_wire_decode(buf, n, from, seq, &again, &err) == LW_OK);
  LW_FUZZ_CHECK(again.header.kind == m->header.kind);
  if (m->header.kind == LW_L4_WIRE_TASK) {
    const lw_l4_task_t *a = &m->u.task, *b = &again.u.task;
    LW_FUZZ_CHECK(memcmp(&a->identity, &b->identity, sizeof(a->identity)) == 0);
    LW_FUZZ_CHECK(a->frame == b->frame && a->kind == b->kind && a->chip == b->chip);
    LW_FUZZ_CHECK(a->timeout_ns == b->timeout_ns && strcmp(a->name, b->name) == 0);
    LW_FUZZ_CHECK(memcmp(&a->launch, &b->launch, sizeof(a->launch)) == 0);
    LW_FUZZ_CHECK(a->n_tensors == b->n_tensors && a->n_scalars == b->n_scalars);
    LW_FUZZ_CHECK(memcmp(a->scalar, b->scalar, a->n_scalars * sizeof(uint64_t)) == 0);
    LW_FUZZ_CHECK(same_tensors(a->tensor, b->tensor, a->n_tensors));
  } else if (m->header.kind == LW_L4_WIRE_DONE) {
    const lw_l4_done_t *a = &m->u.done, *b = &again.u.done;
    LW_FUZZ_CHECK(memcmp(&a->identity, &b->identity, sizeof(a->identity)) == 0);
    LW_FUZZ_CHECK(a->frame == b->frame && a->status == b->status);
    LW_FUZZ_CHECK(a->kernel_rc == b->kernel_rc && a->kernel_ns == b->kernel_ns);
    LW_FUZZ_CHECK(a->queue_ns == b->queue_ns && strcmp(a->error, b->error) == 0);
    LW_FUZZ_CHECK(a->n_produced == b->n_produced);
    LW_FUZZ_CHECK(same_tensors(a->produced, b->produced, a->n_produced));
  } else if (m->header.kind == LW_L4_WIRE_MOVE || m->header.kind == LW_L4_WIRE_FREE ||
             m->header.kind == LW_L4_WIRE_LOST) {
    const lw_l4_move_t *a = &m->u.move, *b = &again.u.move;
    LW_FUZZ_CHECK(a->tensor_id == b->tensor_id && a->version == b->version);
    LW_FUZZ_CHECK(a->bytes == b->bytes && a->to_rank == b->to_rank && a->xfer == b->xfer);
  } else {
    LW_FUZZ_CHECK(m->u.cancel.frame == again.u.cancel.frame);
  }
  free(buf);
}

int lw_fuzz_l4_wire(const uint8_t *data, size_t size) {
  lw_fuzz_l4_params_t p;
  size_t used = lw__fuzz_read_params(&p, sizeof(p), data, size);
  data += used;
  size -= used;
  // The message in a buffer of exactly its size, so ASan flags a read past it.
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) abort();
  if (size) memcpy(buf, data, size);
  lw_l4_wire_msg_t m;
  memset(&m, 0x3c, sizeof(m));
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__l4_wire_decode(buf, size, p.from_rank, p.seq, &m, &err);
  if (st == LW_OK) {
    LW_FUZZ_CHECK(m.header.kind >= LW_L4_WIRE_TASK && m.header.kind <= LW_L4_WIRE_LOST);
    LW_FUZZ_CHECK(m.header.bytes == size);
    if (m.header.kind == LW_L4_WIRE_TASK) {
      LW_FUZZ_CHECK(m.u.task.n_tensors <= LW_MAX_TENSORS && m.u.task.n_scalars <= LW_MAX_SCALARS);
      LW_FUZZ_CHECK(m.u.task.frame < LW_MB_TASK_FRAMES);
      LW_FUZZ_CHECK(memchr(m.u.task.name, '\0', sizeof(m.u.task.name)) != NULL);
      check_inside(buf, size, m.u.task.tensor, m.u.task.n_tensors);
    } else if (m.header.kind == LW_L4_WIRE_DONE) {
      LW_FUZZ_CHECK(m.u.done.n_produced <= LW_L4_MAX_PRODUCED);
      LW_FUZZ_CHECK(m.u.done.frame < LW_MB_TASK_FRAMES);
      LW_FUZZ_CHECK(memchr(m.u.done.error, '\0', sizeof(m.u.done.error)) != NULL);
      check_inside(buf, size, m.u.done.produced, m.u.done.n_produced);
    } else if (m.header.kind == LW_L4_WIRE_MOVE) {
      LW_FUZZ_CHECK(m.u.move.to_rank >= 0);
    } else if (m.header.kind == LW_L4_WIRE_FREE) {
      LW_FUZZ_CHECK(m.u.move.version == 0 && m.u.move.bytes == 0 && m.u.move.to_rank == 0);
    } else if (m.header.kind == LW_L4_WIRE_LOST) {
      LW_FUZZ_CHECK(m.u.move.tensor_id == 0 && m.u.move.bytes == 0 && m.u.move.to_rank >= 1);
    } else {
      LW_FUZZ_CHECK(m.u.cancel.frame < LW_MB_TASK_FRAMES);
    }
    round_trip(&m, p.from_rank, p.seq);
  } else {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(st == LW_INTERNAL);
  }
  free(buf);
  return 0;
}
