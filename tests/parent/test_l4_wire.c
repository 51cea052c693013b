// tests/parent/test_l4_wire.c — the L4's task messages (parent/l4_wire.h): what is encoded
// decodes to the same, and decode refuses whatever a broken or hostile peer could send (every
// cut of a message, every flipped byte of its header, lying counts and lengths, a lost or
// repeated message) with an error naming the rank, the seq and what is wrong.
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/orch.h"
#include "parent/l4_wire.h"

static lw_l4_task_t sample_task(uint8_t *inline_a, size_t bytes_a, uint8_t *inline_b,
                                size_t bytes_b) {
  lw_l4_task_t t;
  memset(&t, 0, sizeof(t));
  t.identity = (lw_mb_identity_t){.run_id = 7, .task_id = 42, .dispatch_id = 9, .generation = 2};
  t.frame = 5;
  t.kind = LW_L4_TASK_KERNEL;
  t.chip = LW_ANY_CHIP;
  t.timeout_ns = 1000000;
  snprintf(t.name, sizeof(t.name), "vector_add");
  t.launch.dims = 1;
  t.launch.global[0] = 1024;
  t.n_tensors = 3;
  t.tensor[0] = (lw_l4_tensor_t){.tensor_id = 100, .version = 3, .bytes = bytes_a,
                                 .home_rank = 1, .tag = LW_TAG_INPUT,
                                 .flags = LW_L4_TENSOR_INLINE, .data = inline_a};
  t.tensor[1] = (lw_l4_tensor_t){.tensor_id = 101, .version = 0, .bytes = 1u << 30,
                                 .home_rank = 2, .tag = LW_TAG_INPUT};
  t.tensor[2] = (lw_l4_tensor_t){.tensor_id = 102, .version = 5, .bytes = bytes_b,
                                 .home_rank = 0, .tag = LW_TAG_INOUT,
                                 .flags = LW_L4_TENSOR_INLINE, .data = inline_b};
  t.n_scalars = 2;
  t.scalar[0] = 0xfeedfacecafebeefull;
  t.scalar[1] = 17;
  return t;
}

static uint8_t *encode_task(const lw_l4_task_t *t, uint64_t seq, size_t *bytes) {
  size_t cap = lw__l4_wire_task_bytes(t);
  uint8_t *buf = malloc(cap);
  cr_assert_not_null(buf);
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_task_encode(t, 0, seq, buf, cap, bytes, &err), LW_OK, "%s",
               err.message);
  cr_assert_eq(*bytes, cap, "the size function and the encoder agree");
  cr_assert_eq(*bytes % 8, 0u, "messages stay 8-byte aligned");
  return buf;
}

Test(l4_wire, a_task_round_trips_with_its_inline_tensors, .timeout = 10) {
  uint8_t a[13], b[64];
  for (size_t i = 0; i < sizeof(a); ++i) a[i] = (uint8_t)(i * 7 + 1);
  for (size_t i = 0; i < sizeof(b); ++i) b[i] = (uint8_t)(255 - i);
  lw_l4_task_t t = sample_task(a, sizeof(a), b, sizeof(b));
  size_t bytes = 0;
  uint8_t *buf = encode_task(&t, 1, &bytes);
  lw_l4_wire_msg_t m;
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 1, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.header.kind, LW_L4_WIRE_TASK);
  const lw_l4_task_t *d = &m.u.task;
  cr_assert_eq(memcmp(&d->identity, &t.identity, sizeof(t.identity)), 0);
  cr_assert_eq(d->frame, 5u);
  cr_assert_eq(d->kind, (uint32_t)LW_L4_TASK_KERNEL);
  cr_assert_eq(d->chip, LW_ANY_CHIP);
  cr_assert_eq(d->timeout_ns, 1000000);
  cr_assert_str_eq(d->name, "vector_add");
  cr_assert_eq(memcmp(&d->launch, &t.launch, sizeof(t.launch)), 0);
  cr_assert_eq(d->n_tensors, 3u);
  cr_assert_eq(d->n_scalars, 2u);
  cr_assert_eq(d->scalar[0], 0xfeedfacecafebeefull);
  cr_assert_eq(d->scalar[1], 17u);
  for (uint32_t i = 0; i < 3; ++i) {
    cr_assert_eq(d->tensor[i].tensor_id, t.tensor[i].tensor_id);
    cr_assert_eq(d->tensor[i].version, t.tensor[i].version);
    cr_assert_eq(d->tensor[i].bytes, t.tensor[i].bytes);
    cr_assert_eq(d->tensor[i].home_rank, t.tensor[i].home_rank);
    cr_assert_eq(d->tensor[i].tag, t.tensor[i].tag);
    cr_assert_eq(d->tensor[i].flags, t.tensor[i].flags);
  }
  cr_assert_null(d->tensor[1].data, "a tensor that is not inline has no bytes here");
  cr_assert_eq(memcmp(d->tensor[0].data, a, sizeof(a)), 0);
  cr_assert_eq(memcmp(d->tensor[2].data, b, sizeof(b)), 0);
  cr_assert((const uint8_t *)d->tensor[0].data > buf &&
                (const uint8_t *)d->tensor[2].data + sizeof(b) <= buf + bytes,
            "inline bytes point into the message");
  free(buf);
}

Test(l4_wire, a_completion_and_a_cancel_round_trip, .timeout = 10) {
  uint8_t out[40];
  memset(out, 0x5a, sizeof(out));
  lw_l4_done_t d;
  memset(&d, 0, sizeof(d));
  d.identity = (lw_mb_identity_t){.run_id = 7, .task_id = 42, .dispatch_id = 9, .generation = 2};
  d.frame = 5;
  d.status = LW_TASK_FAILED;
  d.kernel_rc = -3;
  d.kernel_ns = 123456;
  d.queue_ns = 78;
  snprintf(d.error, sizeof(d.error), "chip 1: kernel vector_add returned -3");
  d.n_produced = 2;
  d.produced[0] = (lw_l4_tensor_t){.tensor_id = 102, .version = 6, .bytes = sizeof(out),
                                   .home_rank = -1, .flags = LW_L4_TENSOR_INLINE, .data = out};
  d.produced[1] = (lw_l4_tensor_t){.tensor_id = 103, .version = 1, .bytes = 1u << 24,
                                   .home_rank = -1};
  size_t cap = lw__l4_wire_done_bytes(&d), bytes = 0;
  uint8_t *buf = malloc(cap);
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_done_encode(&d, 3, 11, buf, cap, &bytes, &err), LW_OK, "%s",
               err.message);
  lw_l4_wire_msg_t m;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 3, 11, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.header.kind, LW_L4_WIRE_DONE);
  cr_assert_eq(m.u.done.status, LW_TASK_FAILED);
  cr_assert_eq(m.u.done.kernel_rc, -3);
  cr_assert_eq(m.u.done.kernel_ns, 123456u);
  cr_assert_str_eq(m.u.done.error, d.error);
  cr_assert_eq(m.u.done.n_produced, 2u);
  cr_assert_eq(m.u.done.produced[0].version, 6u);
  cr_assert_eq(memcmp(m.u.done.produced[0].data, out, sizeof(out)), 0);
  cr_assert_null(m.u.done.produced[1].data);
  free(buf);

  lw_l4_cancel_t c = {.identity = d.identity, .frame = 5};
  uint8_t small[128];
  cr_assert_eq(lw__l4_wire_cancel_encode(&c, 0, 12, small, sizeof(small), &bytes, &err), LW_OK);
  cr_assert_eq(bytes, lw__l4_wire_cancel_bytes());
  cr_assert_eq(lw__l4_wire_decode(small, bytes, 0, 12, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.header.kind, LW_L4_WIRE_CANCEL);
  cr_assert_eq(m.u.cancel.frame, 5u);
  cr_assert_eq(m.u.cancel.identity.task_id, 42u);
}

static bool has(const char *s, const char *part) { return strstr(s, part) != NULL; }

Test(l4_wire, every_cut_of_a_message_is_refused, .timeout = 30) {
  uint8_t a[13] = {1}, b[64] = {2};
  lw_l4_task_t t = sample_task(a, sizeof(a), b, sizeof(b));
  size_t bytes = 0;
  uint8_t *buf = encode_task(&t, 1, &bytes);
  for (size_t n = 0; n < bytes; ++n) {
    // The header says how long the message is: a cut with the header intact lies about it;
    // one with the length rewritten to the cut ends inside the body.
    uint8_t *cut = malloc(n ? n : 1);
    memcpy(cut, buf, n);
    lw_l4_wire_msg_t m;
    lw_error_t err;
    cr_assert_eq(lw__l4_wire_decode(cut, n, 0, 1, &m, &err), LW_INTERNAL, "cut at %zu", n);
    if (n >= sizeof(lw_l4_wire_header_t)) {
      uint32_t len = (uint32_t)n;
      memcpy(cut + offsetof(lw_l4_wire_header_t, bytes), &len, 4);
      cr_assert_eq(lw__l4_wire_decode(cut, n, 0, 1, &m, &err), LW_INTERNAL, "cut at %zu", n);
      cr_assert(has(err.message, "rank 0") && has(err.message, "message 1"), "%s", err.message);
    }
    free(cut);
  }
  free(buf);
}

Test(l4_wire, every_changed_header_byte_is_refused, .timeout = 30) {
  uint8_t a[13] = {1}, b[64] = {2};
  lw_l4_task_t t = sample_task(a, sizeof(a), b, sizeof(b));
  size_t bytes = 0;
  uint8_t *buf = encode_task(&t, 1, &bytes);
  // Every header byte but the reserved word at the end matters.
  for (size_t i = 0; i < offsetof(lw_l4_wire_header_t, reserved); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      buf[i] ^= (uint8_t)(1u << bit);
      lw_l4_wire_msg_t m;
      lw_error_t err;
      cr_assert_neq(lw__l4_wire_decode(buf, bytes, 0, 1, &m, &err), LW_OK, "byte %zu bit %d",
                    i, bit);
      buf[i] ^= (uint8_t)(1u << bit);
    }
  }
  free(buf);
}

Test(l4_wire, a_lost_or_repeated_message_and_another_sender_are_named, .timeout = 10) {
  uint8_t a[13] = {1}, b[64] = {2};
  lw_l4_task_t t = sample_task(a, sizeof(a), b, sizeof(b));
  size_t bytes = 0;
  uint8_t *buf = encode_task(&t, 5, &bytes);
  lw_l4_wire_msg_t m;
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 6, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "seq 5") && has(err.message, "lost or repeated"), "%s",
            err.message);
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 2, 5, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "rank 2") && has(err.message, "another sender"), "%s", err.message);
  free(buf);
}

// Rewrites a u32 of the body at off (from the message's start) and decodes.
static lw_status_t decode_with_u32(uint8_t *buf, size_t bytes, size_t off, uint32_t v,
                                   lw_error_t *err) {
  uint32_t old;
  memcpy(&old, buf + off, 4);
  memcpy(buf + off, &v, 4);
  lw_l4_wire_msg_t m;
  lw_status_t st = lw__l4_wire_decode(buf, bytes, 0, 1, &m, err);
  memcpy(buf + off, &old, 4);
  return st;
}

Test(l4_wire, lying_fields_of_a_task_are_refused_naming_them, .timeout = 10) {
  uint8_t a[13] = {1}, b[64] = {2};
  lw_l4_task_t t = sample_task(a, sizeof(a), b, sizeof(b));
  size_t bytes = 0;
  uint8_t *buf = encode_task(&t, 1, &bytes);
  const size_t body = sizeof(lw_l4_wire_header_t) + sizeof(lw_mb_identity_t);
  lw_error_t err;
  struct {
    size_t off;
    uint32_t v;
    const char *says;
  } cases[] = {
      {body + 0, LW_MB_TASK_FRAMES, "frame"},        // frame out of range
      {body + 4, 9, "task kind"},                     // unknown kind
      {body + 8, (uint32_t)-5, "chip"},               // a chip below LW_ANY_CHIP
      {body + 12, LW_MAX_TENSORS + 1, "tensors"},     // too many tensors
      {body + 16, LW_MAX_SCALARS + 1, "scalars"},     // too many scalars
      {body + 12, 2, "left over"},                    // fewer tensors than sent
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    cr_assert_eq(decode_with_u32(buf, bytes, cases[i].off, cases[i].v, &err), LW_INTERNAL,
                 "case %zu", i);
    cr_assert(has(err.message, cases[i].says), "case %zu: %s", i, err.message);
  }
  // The name unterminated: every byte of its field set.
  const size_t name_off = body + 24 + 8;
  uint8_t *name = buf + name_off;
  uint8_t saved[LW_L4_NAME_BYTES];
  memcpy(saved, name, sizeof(saved));
  memset(name, 'x', LW_L4_NAME_BYTES);
  lw_l4_wire_msg_t m;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 1, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "name"), "%s", err.message);
  memcpy(name, saved, sizeof(saved));
  // The first tensor's tag unknown, then its inline length past the bound.
  const size_t tensor0 = name_off + LW_L4_NAME_BYTES + sizeof(lw_launch_t);
  buf[tensor0 + 28] = 9;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 1, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "tag 9"), "%s", err.message);
  buf[tensor0 + 28] = LW_TAG_INPUT;
  uint64_t big = LW_L4_INLINE_MAX_BYTES + 1;
  memcpy(buf + tensor0 + 16, &big, 8);
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 1, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "inline"), "%s", err.message);
  free(buf);
}

Test(l4_wire, a_completion_with_a_nul_in_its_text_or_a_long_text_is_refused, .timeout = 10) {
  lw_l4_done_t d;
  memset(&d, 0, sizeof(d));
  d.frame = 1;
  d.status = LW_INTERNAL;
  snprintf(d.error, sizeof(d.error), "abcdefgh");
  size_t cap = lw__l4_wire_done_bytes(&d), bytes = 0;
  uint8_t *buf = malloc(cap);
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_done_encode(&d, 1, 1, buf, cap, &bytes, &err), LW_OK);
  const size_t text = sizeof(lw_l4_wire_header_t) + 32 + 16 + 16;
  lw_l4_wire_msg_t m;
  buf[text + 8 + 3] = '\0';  // inside the 8 text bytes
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 1, 1, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "NUL"), "%s", err.message);
  buf[text + 8 + 3] = 'd';
  uint32_t long_text = LW_L4_ERROR_TEXT_BYTES;
  memcpy(buf + text, &long_text, 4);
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 1, 1, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "error text"), "%s", err.message);
  free(buf);
}

Test(l4_wire, encode_refuses_what_is_not_a_message_naming_it, .timeout = 10) {
  uint8_t a[13] = {1}, b[64] = {2};
  lw_l4_task_t t = sample_task(a, sizeof(a), b, sizeof(b));
  uint8_t buf[64 * 1024];
  size_t bytes = 0;
  lw_error_t err;
  lw_l4_task_t bad = t;
  memset(bad.name, 'n', sizeof(bad.name));
  cr_assert_eq(lw__l4_wire_task_encode(&bad, 0, 1, buf, sizeof(buf), &bytes, &err),
               LW_INVALID_ARGUMENT);
  cr_assert(has(err.message, "name"), "%s", err.message);
  bad = t;
  bad.tensor[0].bytes = LW_L4_INLINE_MAX_BYTES + 8;
  cr_assert_eq(lw__l4_wire_task_encode(&bad, 0, 1, buf, sizeof(buf), &bytes, &err),
               LW_INVALID_ARGUMENT);
  cr_assert(has(err.message, "inline"), "%s", err.message);
  bad = t;
  bad.tensor[2].data = NULL;
  cr_assert_eq(lw__l4_wire_task_encode(&bad, 0, 1, buf, sizeof(buf), &bytes, &err),
               LW_INVALID_ARGUMENT);
  cr_assert(has(err.message, "no data"), "%s", err.message);
  bad = t;
  bad.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw__l4_wire_task_encode(&bad, 0, 1, buf, sizeof(buf), &bytes, &err),
               LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__l4_wire_task_encode(&t, 0, 1, buf, 100, &bytes, &err), LW_RESOURCE_EXHAUSTED);
  cr_assert(has(err.message, "buffer holds 100"), "%s", err.message);
  cr_assert_eq(bytes, 0u);
}

Test(l4_wire, a_task_carries_each_tensors_transfer_and_zero_flag, .timeout = 10) {
  lw_l4_task_t t = sample_task(NULL, 0, NULL, 0);
  t.tensor[0] = (lw_l4_tensor_t){.tensor_id = 100, .version = 3, .bytes = 64, .home_rank = 2,
                                 .tag = LW_TAG_INPUT, .xfer = 0xbeef};
  t.tensor[2] = (lw_l4_tensor_t){.tensor_id = 102, .version = 0, .bytes = 64, .home_rank = 1,
                                 .tag = LW_TAG_INOUT, .flags = LW_L4_TENSOR_ZERO};
  size_t bytes = 0;
  uint8_t *buf = encode_task(&t, 1, &bytes);
  lw_l4_wire_msg_t m;
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 1, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.u.task.tensor[0].xfer, 0xbeef);
  cr_assert_eq(m.u.task.tensor[0].home_rank, 2);
  cr_assert_eq(m.u.task.tensor[2].flags, LW_L4_TENSOR_ZERO);
  cr_assert_null(m.u.task.tensor[2].data);
  free(buf);
  // Inline and zero at once is not a tensor; neither is a zero produced version.
  t.tensor[2].flags = LW_L4_TENSOR_ZERO | LW_L4_TENSOR_INLINE;
  uint8_t big[4096];
  cr_assert_eq(lw__l4_wire_task_encode(&t, 0, 1, big, sizeof(big), &bytes, &err),
               LW_INVALID_ARGUMENT);
  cr_assert(has(err.message, "tensor 2 has unknown flags"), "%s", err.message);
  lw_l4_done_t d;
  memset(&d, 0, sizeof(d));
  d.n_produced = 1;
  d.produced[0] = (lw_l4_tensor_t){.tensor_id = 1, .version = 1, .bytes = 8, .home_rank = -1,
                                   .flags = LW_L4_TENSOR_ZERO};
  cr_assert_eq(lw__l4_wire_done_encode(&d, 1, 1, big, sizeof(big), &bytes, &err),
               LW_INVALID_ARGUMENT);
}

Test(l4_wire, a_move_and_a_free_round_trip_and_lies_are_refused, .timeout = 10) {
  lw_l4_move_t mv = {.tensor_id = 77, .version = 4, .bytes = 4u << 20, .to_rank = 2,
                     .xfer = 8191};
  uint8_t buf[128];
  size_t bytes = 0;
  lw_error_t err;
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_MOVE, &mv, 0, 3, buf, sizeof(buf), &bytes,
                                       &err),
               LW_OK, "%s", err.message);
  cr_assert_eq(bytes, lw__l4_wire_move_bytes());
  lw_l4_wire_msg_t m;
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 3, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.header.kind, LW_L4_WIRE_MOVE);
  cr_assert_eq(m.u.move.tensor_id, 77u);
  cr_assert_eq(m.u.move.version, 4u);
  cr_assert_eq(m.u.move.bytes, 4u << 20);
  cr_assert_eq(m.u.move.to_rank, 2);
  cr_assert_eq(m.u.move.xfer, 8191);
  // A move to a negative rank is refused on both sides.
  mv.to_rank = -1;
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_MOVE, &mv, 0, 4, buf, sizeof(buf), &bytes,
                                       &err),
               LW_INVALID_ARGUMENT);
  mv.to_rank = 2;
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_MOVE, &mv, 0, 4, buf, sizeof(buf), &bytes,
                                       &err),
               LW_OK);
  int32_t bad = -5;
  memcpy(buf + sizeof(lw_l4_wire_header_t) + 24, &bad, sizeof(bad));
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 4, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "bad rank"), "%s", err.message);
  // A free carries the tensor id only; anything more is a lie.
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_FREE, &mv, 0, 5, buf, sizeof(buf), &bytes,
                                       &err),
               LW_OK);
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 5, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.header.kind, LW_L4_WIRE_FREE);
  cr_assert_eq(m.u.move.tensor_id, 77u);
  cr_assert_eq(m.u.move.bytes, 0u);
  uint64_t v = 9;
  memcpy(buf + sizeof(lw_l4_wire_header_t) + 8, &v, sizeof(v));
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 5, &m, &err), LW_INTERNAL);
  cr_assert(has(err.message, "a free with more than a tensor id"), "%s", err.message);
  // A lost-rank notice names a rank >= 1 and nothing else.
  lw_l4_move_t lost = {.to_rank = 2};
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_LOST, &lost, 0, 6, buf, sizeof(buf), &bytes,
                                       &err),
               LW_OK);
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 6, &m, &err), LW_OK, "%s", err.message);
  cr_assert_eq(m.header.kind, LW_L4_WIRE_LOST);
  cr_assert_eq(m.u.move.to_rank, 2);
  memcpy(buf + sizeof(lw_l4_wire_header_t), &v, sizeof(v));
  cr_assert_eq(lw__l4_wire_decode(buf, bytes, 0, 6, &m, &err), LW_INTERNAL);
  lost.to_rank = 0;
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_LOST, &lost, 0, 6, buf, sizeof(buf), &bytes,
                                       &err),
               LW_INVALID_ARGUMENT);
  // Every cut of a move is refused.
  cr_assert_eq(lw__l4_wire_move_encode(LW_L4_WIRE_MOVE, &mv, 0, 7, buf, sizeof(buf), &bytes,
                                       &err),
               LW_OK);
  for (size_t cut = 0; cut < bytes; ++cut) {
    cr_assert_neq(lw__l4_wire_decode(buf, cut, 0, 7, &m, &err), LW_OK, "cut at %zu", cut);
  }
}
