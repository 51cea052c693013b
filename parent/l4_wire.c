// parent/l4_wire.c — the L4's task messages as bytes, and back with every field checked.
// Contract and layout in parent/l4_wire.h.
#include "parent/l4_wire.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lanes/args.h"
#include "lanes/error.h"
#include "lanework/orch.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the L4's messages are little-endian");

// Fixed parts of the bodies, in bytes (each a multiple of 8).
#define TASK_FIXED (32 + 24 + 8 + LW_L4_NAME_BYTES + (uint32_t)sizeof(lw_launch_t))
#define DONE_FIXED (32 + 16 + 16 + 8)
#define CANCEL_FIXED (32 + 8)
#define TENSOR_WIRE 32u
_Static_assert(TASK_FIXED % 8 == 0 && DONE_FIXED % 8 == 0 && CANCEL_FIXED % 8 == 0,
               "message parts stay 8-byte aligned");

static size_t pad8(size_t n) { return (n + 7u) & ~(size_t)7u; }

static size_t inline_bytes(const lw_l4_tensor_t *t, uint32_t n) {
  size_t sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (t[i].flags & LW_L4_TENSOR_INLINE) sum += pad8((size_t)t[i].bytes);
  }
  return sum;
}

size_t lw__l4_wire_task_bytes(const lw_l4_task_t *t) {
  uint32_t nt = t->n_tensors <= LW_MAX_TENSORS ? t->n_tensors : LW_MAX_TENSORS;
  uint32_t ns = t->n_scalars <= LW_MAX_SCALARS ? t->n_scalars : LW_MAX_SCALARS;
  return sizeof(lw_l4_wire_header_t) + TASK_FIXED + (size_t)nt * TENSOR_WIRE + (size_t)ns * 8u +
         inline_bytes(t->tensor, nt);
}

size_t lw__l4_wire_done_bytes(const lw_l4_done_t *d) {
  uint32_t np = d->n_produced <= LW_L4_MAX_PRODUCED ? d->n_produced : LW_L4_MAX_PRODUCED;
  size_t text = strnlen(d->error, sizeof(d->error) - 1);
  return sizeof(lw_l4_wire_header_t) + DONE_FIXED + pad8(text) + (size_t)np * TENSOR_WIRE +
         inline_bytes(d->produced, np);
}

size_t lw__l4_wire_cancel_bytes(void) { return sizeof(lw_l4_wire_header_t) + CANCEL_FIXED; }

#define MOVE_FIXED 32u  // tensor id, version, bytes, to rank, xfer, pad
size_t lw__l4_wire_move_bytes(void) { return sizeof(lw_l4_wire_header_t) + MOVE_FIXED; }

// ---------------------------------------------------------------------------------------------
// Writing

typedef struct writer {
  uint8_t *p;
  size_t at;
} writer_t;

static void put(writer_t *w, const void *v, size_t n) {
  if (n) memcpy(w->p + w->at, v, n);
  w->at += n;
}
static void put_u32(writer_t *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(writer_t *w, uint64_t v) { put(w, &v, 8); }
static void put_pad(writer_t *w) {
  while (w->at % 8u) w->p[w->at++] = 0;
}

static void put_header(writer_t *w, lw_l4_wire_kind_t kind, size_t bytes, int32_t from,
                       uint64_t seq) {
  lw_l4_wire_header_t h = {.magic = LW_L4_WIRE_MAGIC, .version = LW_L4_WIRE_VERSION,
                           .kind = (uint16_t)kind, .bytes = (uint32_t)bytes, .from_rank = from,
                           .seq = seq};
  put(w, &h, sizeof(h));
}

static void put_tensor(writer_t *w, const lw_l4_tensor_t *t) {
  put_u64(w, t->tensor_id);
  put_u64(w, t->version);
  put_u64(w, t->bytes);
  put_u32(w, (uint32_t)t->home_rank);
  uint8_t tail[4] = {t->tag, t->flags, (uint8_t)(t->xfer & 0xffu), (uint8_t)(t->xfer >> 8)};
  put(w, tail, 4);
}

static void put_inline(writer_t *w, const lw_l4_tensor_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (!(t[i].flags & LW_L4_TENSOR_INLINE)) continue;
    put(w, t[i].data, (size_t)t[i].bytes);
    put_pad(w);
  }
}

static bool printable_text(const char *s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 && c != '\t' && c != '\n') return false;
    if (c == 0x7f) return false;
  }
  return true;
}

// The checks both encode (the caller's mistake: INVALID_ARGUMENT) and decode (the peer's:
// INTERNAL) make of tensors. what names the list ("tensor", "produced tensor").
static lw_status_t check_tensors(const lw_l4_tensor_t *t, uint32_t n, bool task, lw_status_t code,
                                 const char *what, const char *ctx, lw_error_t *err) {
  for (uint32_t i = 0; i < n; ++i) {
    if ((t[i].flags & ~(LW_L4_TENSOR_INLINE | LW_L4_TENSOR_ZERO)) ||
        (t[i].flags & LW_L4_TENSOR_INLINE && t[i].flags & LW_L4_TENSOR_ZERO) ||
        (!task && t[i].flags & LW_L4_TENSOR_ZERO)) {
      return lw__error_set(err, code, -1, 0, "%s: %s %u has unknown flags 0x%x", ctx, what, i,
                           (unsigned)t[i].flags);
    }
    if ((t[i].flags & LW_L4_TENSOR_INLINE) && t[i].bytes > LW_L4_INLINE_MAX_BYTES) {
      return lw__error_set(err, code, -1, 0,
                           "%s: %s %u is inline with %" PRIu64 " bytes (at most %u ride inside "
                           "a message)",
                           ctx, what, i, t[i].bytes, LW_L4_INLINE_MAX_BYTES);
    }
    if (task && t[i].tag > LW_TAG_NO_DEP) {
      return lw__error_set(err, code, -1, 0, "%s: %s %u has unknown tag %u", ctx, what, i,
                           (unsigned)t[i].tag);
    }
    if (task && t[i].home_rank < 0) {
      return lw__error_set(err, code, -1, 0, "%s: %s %u has home rank %d", ctx, what, i,
                           (int)t[i].home_rank);
    }
  }
  return LW_OK;
}

static lw_status_t check_task(const lw_l4_task_t *t, lw_status_t code, const char *ctx,
                              lw_error_t *err) {
  if (t->frame >= LW_MB_TASK_FRAMES) {
    return lw__error_set(err, code, -1, t->identity.task_id, "%s: frame %u (%u frames)", ctx,
                         t->frame, LW_MB_TASK_FRAMES);
  }
  if (t->kind != LW_L4_TASK_KERNEL && t->kind != LW_L4_TASK_ORCH && t->kind != LW_L4_TASK_SUB) {
    return lw__error_set(err, code, -1, t->identity.task_id, "%s: unknown task kind %u", ctx,
                         t->kind);
  }
  if (t->chip < 0 && t->chip != LW_ANY_CHIP) {
    return lw__error_set(err, code, -1, t->identity.task_id, "%s: chip %d", ctx, (int)t->chip);
  }
  if (t->timeout_ns < 0) {
    return lw__error_set(err, code, -1, t->identity.task_id, "%s: timeout %" PRId64 " ns", ctx,
                         t->timeout_ns);
  }
  size_t name = strnlen(t->name, sizeof(t->name));
  if (name == 0 || name == sizeof(t->name) || !printable_text(t->name, name)) {
    return lw__error_set(err, code, -1, t->identity.task_id,
                         "%s: the name is empty, unterminated within %d bytes or not printable",
                         ctx, LW_L4_NAME_BYTES);
  }
  if (t->n_tensors > LW_MAX_TENSORS || t->n_scalars > LW_MAX_SCALARS) {
    return lw__error_set(err, code, -1, t->identity.task_id,
                         "%s: %u tensors and %u scalars (at most %d and %d)", ctx, t->n_tensors,
                         t->n_scalars, LW_MAX_TENSORS, LW_MAX_SCALARS);
  }
  lw_error_t why;
  lw_launch_t launch = t->launch;
  if (lw__launch_check(&launch, &why) != LW_OK) {
    return lw__error_set(err, code, -1, t->identity.task_id, "%s: %s", ctx, why.message);
  }
  return check_tensors(t->tensor, t->n_tensors, true, code, "tensor", ctx, err);
}

static lw_status_t check_done(const lw_l4_done_t *d, lw_status_t code, const char *ctx,
                              lw_error_t *err) {
  if (d->frame >= LW_MB_TASK_FRAMES) {
    return lw__error_set(err, code, -1, d->identity.task_id, "%s: frame %u (%u frames)", ctx,
                         d->frame, LW_MB_TASK_FRAMES);
  }
  if ((uint32_t)d->status >= (uint32_t)LW_STATUS_COUNT_) {
    return lw__error_set(err, code, -1, d->identity.task_id, "%s: status %d", ctx,
                         (int)d->status);
  }
  if (d->n_produced > LW_L4_MAX_PRODUCED) {
    return lw__error_set(err, code, -1, d->identity.task_id,
                         "%s: %u produced tensors (at most %d)", ctx, d->n_produced,
                         LW_L4_MAX_PRODUCED);
  }
  size_t text = strnlen(d->error, sizeof(d->error));
  if (text == sizeof(d->error) || !printable_text(d->error, text)) {
    return lw__error_set(err, code, -1, d->identity.task_id,
                         "%s: the error text is unterminated within %d bytes or not printable",
                         ctx, LW_L4_ERROR_TEXT_BYTES);
  }
  return check_tensors(d->produced, d->n_produced, false, code, "produced tensor", ctx, err);
}

static lw_status_t room(size_t need, size_t cap, const char *ctx, lw_error_t *err) {
  if (need <= cap && need <= UINT32_MAX) return LW_OK;
  return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       "%s: the message takes %zu bytes, the buffer holds %zu", ctx, need, cap);
}

static lw_status_t inline_data_given(const lw_l4_tensor_t *t, uint32_t n, const char *ctx,
                                     lw_error_t *err) {
  for (uint32_t i = 0; i < n; ++i) {
    if ((t[i].flags & LW_L4_TENSOR_INLINE) && t[i].bytes > 0 && !t[i].data) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "%s: tensor %u is inline but has no data", ctx, i);
    }
  }
  return LW_OK;
}

lw_status_t lw__l4_wire_task_encode(const lw_l4_task_t *t, int32_t from_rank, uint64_t seq,
                                    void *buf, size_t cap, size_t *out_bytes, lw_error_t *err) {
  *out_bytes = 0;
  const char *ctx = "l4 task encode";
  LW_RETURN_IF_ERROR(check_task(t, LW_INVALID_ARGUMENT, ctx, err));
  LW_RETURN_IF_ERROR(inline_data_given(t->tensor, t->n_tensors, ctx, err));
  size_t bytes = lw__l4_wire_task_bytes(t);
  LW_RETURN_IF_ERROR(room(bytes, cap, ctx, err));
  writer_t w = {.p = buf};
  put_header(&w, LW_L4_WIRE_TASK, bytes, from_rank, seq);
  put(&w, &t->identity, sizeof(t->identity));
  put_u32(&w, t->frame);
  put_u32(&w, t->kind);
  put_u32(&w, (uint32_t)t->chip);
  put_u32(&w, t->n_tensors);
  put_u32(&w, t->n_scalars);
  put_u32(&w, 0);
  put_u64(&w, (uint64_t)t->timeout_ns);
  char name[LW_L4_NAME_BYTES] = {0};
  memcpy(name, t->name, strnlen(t->name, sizeof(name) - 1));
  put(&w, name, sizeof(name));
  put(&w, &t->launch, sizeof(t->launch));
  for (uint32_t i = 0; i < t->n_tensors; ++i) put_tensor(&w, &t->tensor[i]);
  for (uint32_t i = 0; i < t->n_scalars; ++i) put_u64(&w, t->scalar[i]);
  put_inline(&w, t->tensor, t->n_tensors);
  *out_bytes = w.at;
  return LW_OK;
}

lw_status_t lw__l4_wire_done_encode(const lw_l4_done_t *d, int32_t from_rank, uint64_t seq,
                                    void *buf, size_t cap, size_t *out_bytes, lw_error_t *err) {
  *out_bytes = 0;
  const char *ctx = "l4 completion encode";
  LW_RETURN_IF_ERROR(check_done(d, LW_INVALID_ARGUMENT, ctx, err));
  LW_RETURN_IF_ERROR(inline_data_given(d->produced, d->n_produced, ctx, err));
  size_t bytes = lw__l4_wire_done_bytes(d);
  LW_RETURN_IF_ERROR(room(bytes, cap, ctx, err));
  size_t text = strnlen(d->error, sizeof(d->error) - 1);
  writer_t w = {.p = buf};
  put_header(&w, LW_L4_WIRE_DONE, bytes, from_rank, seq);
  put(&w, &d->identity, sizeof(d->identity));
  put_u32(&w, d->frame);
  put_u32(&w, (uint32_t)d->status);
  put_u32(&w, (uint32_t)d->kernel_rc);
  put_u32(&w, d->n_produced);
  put_u64(&w, d->kernel_ns);
  put_u64(&w, d->queue_ns);
  put_u32(&w, (uint32_t)text);
  put_u32(&w, 0);
  put(&w, d->error, text);
  put_pad(&w);
  for (uint32_t i = 0; i < d->n_produced; ++i) put_tensor(&w, &d->produced[i]);
  put_inline(&w, d->produced, d->n_produced);
  *out_bytes = w.at;
  return LW_OK;
}

lw_status_t lw__l4_wire_cancel_encode(const lw_l4_cancel_t *c, int32_t from_rank, uint64_t seq,
                                      void *buf, size_t cap, size_t *out_bytes,
                                      lw_error_t *err) {
  *out_bytes = 0;
  if (c->frame >= LW_MB_TASK_FRAMES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, c->identity.task_id,
                         "l4 cancel encode: frame %u (%u frames)", c->frame, LW_MB_TASK_FRAMES);
  }
  size_t bytes = lw__l4_wire_cancel_bytes();
  LW_RETURN_IF_ERROR(room(bytes, cap, "l4 cancel encode", err));
  writer_t w = {.p = buf};
  put_header(&w, LW_L4_WIRE_CANCEL, bytes, from_rank, seq);
  put(&w, &c->identity, sizeof(c->identity));
  put_u32(&w, c->frame);
  put_u32(&w, 0);
  *out_bytes = w.at;
  return LW_OK;
}

lw_status_t lw__l4_wire_move_encode(lw_l4_wire_kind_t kind, const lw_l4_move_t *m,
                                    int32_t from_rank, uint64_t seq, void *buf, size_t cap,
                                    size_t *out_bytes, lw_error_t *err) {
  *out_bytes = 0;
  if (kind != LW_L4_WIRE_MOVE && kind != LW_L4_WIRE_FREE && kind != LW_L4_WIRE_LOST) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "l4 move encode: kind %d", (int)kind);
  }
  if ((kind == LW_L4_WIRE_MOVE && m->to_rank < 0) ||
      (kind == LW_L4_WIRE_LOST && m->to_rank < 1)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "l4 move encode: to rank %d",
                         (int)m->to_rank);
  }
  size_t bytes = lw__l4_wire_move_bytes();
  LW_RETURN_IF_ERROR(room(bytes, cap, "l4 move encode", err));
  writer_t w = {.p = buf};
  put_header(&w, kind, bytes, from_rank, seq);
  bool move = kind == LW_L4_WIRE_MOVE;
  put_u64(&w, kind == LW_L4_WIRE_LOST ? 0 : m->tensor_id);
  put_u64(&w, move ? m->version : 0);
  put_u64(&w, move ? m->bytes : 0);
  put_u32(&w, kind == LW_L4_WIRE_FREE ? 0 : (uint32_t)m->to_rank);
  put_u32(&w, move ? m->xfer : 0);
  *out_bytes = w.at;
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// Reading

typedef struct reader {
  const uint8_t *p;
  size_t at, n;
  bool short_read;  // a read went past the end: the message is cut
} reader_t;

static const uint8_t *take(reader_t *r, size_t n) {
  if (r->short_read || n > r->n - r->at) {
    r->short_read = true;
    return NULL;
  }
  const uint8_t *at = r->p + r->at;
  r->at += n;
  return at;
}
static void get(reader_t *r, void *out, size_t n) {
  const uint8_t *at = take(r, n);
  if (at) {
    memcpy(out, at, n);
  } else {
    memset(out, 0, n);
  }
}
static uint32_t get_u32(reader_t *r) {
  uint32_t v;
  get(r, &v, 4);
  return v;
}
static uint64_t get_u64(reader_t *r) {
  uint64_t v;
  get(r, &v, 8);
  return v;
}
static void skip_pad(reader_t *r) {
  if (r->at % 8u) (void)take(r, 8u - r->at % 8u);
}

static void get_tensor(reader_t *r, lw_l4_tensor_t *t) {
  t->tensor_id = get_u64(r);
  t->version = get_u64(r);
  t->bytes = get_u64(r);
  t->home_rank = (int32_t)get_u32(r);
  uint8_t tail[4];
  get(r, tail, 4);
  t->tag = tail[0];
  t->flags = tail[1];
  t->xfer = (uint16_t)(tail[2] | (tail[3] << 8));
  t->data = NULL;
}

// Points each inline tensor's data into the message. The tensors were checked first, so an
// inline one holds at most LW_L4_INLINE_MAX_BYTES.
static void get_inline(reader_t *r, lw_l4_tensor_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (!(t[i].flags & LW_L4_TENSOR_INLINE)) continue;
    t[i].data = take(r, (size_t)t[i].bytes);
    skip_pad(r);
  }
}

static lw_status_t violation(lw_error_t *err, int32_t from, uint64_t seq, const char *what) {
  return lw__error_set(err, LW_INTERNAL, -1, 0, "l4: message %" PRIu64 " from rank %d: %s", seq,
                       (int)from, what);
}

static lw_status_t decode_task(reader_t *r, lw_l4_task_t *t, char *ctx, lw_error_t *err) {
  get(r, &t->identity, sizeof(t->identity));
  t->frame = get_u32(r);
  t->kind = get_u32(r);
  t->chip = (int32_t)get_u32(r);
  t->n_tensors = get_u32(r);
  t->n_scalars = get_u32(r);
  (void)get_u32(r);
  t->timeout_ns = (int64_t)get_u64(r);
  get(r, t->name, sizeof(t->name));
  get(r, &t->launch, sizeof(t->launch));
  if (r->short_read) return LW_OK;  // the caller reports the cut
  if (t->n_tensors > LW_MAX_TENSORS || t->n_scalars > LW_MAX_SCALARS) {
    return check_task(t, LW_INTERNAL, ctx, err);  // names the counts
  }
  for (uint32_t i = 0; i < t->n_tensors; ++i) get_tensor(r, &t->tensor[i]);
  for (uint32_t i = 0; i < t->n_scalars; ++i) t->scalar[i] = get_u64(r);
  if (r->short_read) return LW_OK;
  LW_RETURN_IF_ERROR(check_task(t, LW_INTERNAL, ctx, err));
  get_inline(r, t->tensor, t->n_tensors);
  return LW_OK;
}

static lw_status_t decode_done(reader_t *r, lw_l4_done_t *d, char *ctx, lw_error_t *err) {
  get(r, &d->identity, sizeof(d->identity));
  d->frame = get_u32(r);
  d->status = (lw_status_t)get_u32(r);
  d->kernel_rc = (int32_t)get_u32(r);
  d->n_produced = get_u32(r);
  d->kernel_ns = get_u64(r);
  d->queue_ns = get_u64(r);
  uint32_t text = get_u32(r);
  (void)get_u32(r);
  if (r->short_read) return LW_OK;
  if (text >= sizeof(d->error)) {
    return lw__error_set(err, LW_INTERNAL, -1, d->identity.task_id,
                         "%s: error text of %u bytes (at most %d)", ctx, text,
                         LW_L4_ERROR_TEXT_BYTES - 1);
  }
  get(r, d->error, text);
  d->error[text] = '\0';
  if (memchr(d->error, '\0', text)) {
    return lw__error_set(err, LW_INTERNAL, -1, d->identity.task_id,
                         "%s: the error text holds a NUL", ctx);
  }
  skip_pad(r);
  if (d->n_produced > LW_L4_MAX_PRODUCED) return check_done(d, LW_INTERNAL, ctx, err);
  for (uint32_t i = 0; i < d->n_produced; ++i) get_tensor(r, &d->produced[i]);
  if (r->short_read) return LW_OK;
  LW_RETURN_IF_ERROR(check_done(d, LW_INTERNAL, ctx, err));
  get_inline(r, d->produced, d->n_produced);
  return LW_OK;
}

lw_status_t lw__l4_wire_decode(const void *buf, size_t bytes, int32_t from_rank, uint64_t seq,
                               lw_l4_wire_msg_t *out, lw_error_t *err) {
  if (!buf || bytes < sizeof(lw_l4_wire_header_t)) {
    return violation(err, from_rank, seq, "shorter than a message header");
  }
  memcpy(&out->header, buf, sizeof(out->header));
  const lw_l4_wire_header_t *h = &out->header;
  if (h->magic != LW_L4_WIRE_MAGIC) return violation(err, from_rank, seq, "bad magic");
  if (h->version != LW_L4_WIRE_VERSION) {
    return violation(err, from_rank, seq, "another protocol version");
  }
  if (h->bytes != bytes) {
    return violation(err, from_rank, seq, "its length is not the received one");
  }
  if (h->from_rank != from_rank) {
    return violation(err, from_rank, seq, "it names another sender");
  }
  if (h->seq != seq) {
    char what[96];
    snprintf(what, sizeof(what), "it carries seq %" PRIu64 " (a message was lost or repeated)",
             h->seq);
    return violation(err, from_rank, seq, what);
  }
  char ctx[64];
  snprintf(ctx, sizeof(ctx), "l4: message %" PRIu64 " from rank %d", seq, (int)from_rank);
  reader_t r = {.p = buf, .at = sizeof(*h), .n = bytes};
  lw_status_t st = LW_OK;
  switch (h->kind) {
    case LW_L4_WIRE_TASK:
      st = decode_task(&r, &out->u.task, ctx, err);
      break;
    case LW_L4_WIRE_DONE:
      st = decode_done(&r, &out->u.done, ctx, err);
      break;
    case LW_L4_WIRE_CANCEL:
      get(&r, &out->u.cancel.identity, sizeof(out->u.cancel.identity));
      out->u.cancel.frame = get_u32(&r);
      (void)get_u32(&r);
      if (!r.short_read && out->u.cancel.frame >= LW_MB_TASK_FRAMES) {
        return violation(err, from_rank, seq, "a cancel of a frame out of range");
      }
      break;
    case LW_L4_WIRE_MOVE:
    case LW_L4_WIRE_FREE:
    case LW_L4_WIRE_LOST: {
      lw_l4_move_t *m = &out->u.move;
      m->tensor_id = get_u64(&r);
      m->version = get_u64(&r);
      m->bytes = get_u64(&r);
      m->to_rank = (int32_t)get_u32(&r);
      uint32_t xfer = get_u32(&r);
      m->xfer = (uint16_t)xfer;
      m->reserved = 0;
      if (r.short_read) break;
      if (h->kind == LW_L4_WIRE_MOVE && (m->to_rank < 0 || xfer > UINT16_MAX)) {
        return violation(err, from_rank, seq, "a move to a bad rank or transfer");
      }
      if (h->kind == LW_L4_WIRE_FREE && (m->version || m->bytes || m->to_rank || xfer)) {
        return violation(err, from_rank, seq, "a free with more than a tensor id");
      }
      if (h->kind == LW_L4_WIRE_LOST &&
          (m->tensor_id || m->version || m->bytes || xfer || m->to_rank < 1)) {
        return violation(err, from_rank, seq, "a lost-rank notice with more than a rank >= 1");
      }
      break;
    }
    default:
      return violation(err, from_rank, seq, "unknown kind");
  }
  if (st != LW_OK) return st;
  if (r.short_read) return violation(err, from_rank, seq, "cut short");
  if (r.at != bytes) return violation(err, from_rank, seq, "bytes left over after its body");
  return LW_OK;
}
