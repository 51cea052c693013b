// tests/fuzz/harness_take_control.c — the child's decoding of the control frame.
//
// The input writes the control frame's bytes (state, command, seq, image range, params,
// names, and the ack fields), the task frames' states and seqs, the doorbell and the header
// fields the messages use. The harness runs find_post, then take_control and ack_control as
// the child does (acking a request it cannot take with the error), then consume_control as
// the parent does. When the input leaves the frame CONTROL_DONE, consume_control reads an ack
// the "child" wrote from the input: the parent's validation of a garbage ack.
#include <string.h>

#include "fuzz/fuzz_harness.h"

static uint32_t control_state(lw_mailbox_t *mb) {
  return atomic_load_explicit(&mb->control.state, memory_order_relaxed);
}

// Every lw_mb_command_t (keep in step with mailbox/mailbox.h).
static bool command_known(uint32_t c) {
  return c == LW_MB_CMD_PING || c == LW_MB_CMD_REGISTER || c == LW_MB_CMD_UNREGISTER ||
         c == LW_MB_CMD_REGISTER_SUB || c == LW_MB_CMD_CANCEL;
}

// What an LW_OK take_control promises.
static void check_taken(const lw_mb_control_taken_t *t, const lw_mb_control_t *posted,
                        const lw_mb_arena_t *arena) {
  LW_FUZZ_CHECK(command_known((uint32_t)t->command));
  LW_FUZZ_CHECK((uint32_t)t->command == posted->command);
  LW_FUZZ_CHECK(t->control_id == posted->control_id);
  LW_FUZZ_CHECK(t->target == posted->target);
  LW_FUZZ_CHECK(lw__fuzz_terminated(t->name, sizeof(t->name)));
  LW_FUZZ_CHECK(lw__fuzz_terminated(t->entry, sizeof(t->entry)));
  LW_FUZZ_CHECK(strcmp(t->name, posted->name) == 0);
  LW_FUZZ_CHECK(strcmp(t->entry, posted->entry) == 0);
  LW_FUZZ_CHECK(t->n_params <= sizeof(t->param_dirs));
  if (t->command == LW_MB_CMD_REGISTER) {
    LW_FUZZ_CHECK(t->image_bytes > 0);
    LW_FUZZ_CHECK(arena != NULL && arena->base != NULL);
    LW_FUZZ_CHECK(t->image_offset < arena->bytes);
    lw__fuzz_check_range(arena, arena->base + t->image_offset, t->image_bytes);
  }
}

// The parent consumes the ack the child just wrote: it must accept it unchanged.
static void consume_own_ack(lw_mailbox_t *mb, const lw_mb_control_ack_t *ack) {
  lw_mb_control_ack_t out;
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_consume_control(mb, &out, &err);
  LW_FUZZ_CHECK(st == LW_OK);
  LW_FUZZ_CHECK(out.status == ack->status);
  LW_FUZZ_CHECK(out.async == ack->async);
  LW_FUZZ_CHECK(out.value == ack->value);
  LW_FUZZ_CHECK(out.error.code == ack->status);
  LW_FUZZ_CHECK(lw__fuzz_terminated(out.error.message, sizeof(out.error.message)));
  LW_FUZZ_CHECK(control_state(mb) == LW_MB_CONTROL_IDLE);
}

// The child acks with ack (status possibly invalid: then it is refused, and the child acks
// INTERNAL instead), then the parent consumes.
static void ack_and_consume(lw_mailbox_t *mb, lw_mb_control_ack_t *ack) {
  lw_error_t err;
  lw_mb_control_ack_t early;
  lw__fuzz_poison_error(&err);
  // The parent polling too early is told "not done", and the request stays.
  lw_status_t st = lw__mailbox_consume_control(mb, &early, &err);
  lw__fuzz_check_error(st, &err);
  LW_FUZZ_CHECK(st == LW_FAILED_PRECONDITION);
  LW_FUZZ_CHECK(control_state(mb) == LW_MB_CONTROL_REQUEST);
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_ack_control(mb, ack, &err);
  if ((uint32_t)ack->status >= (uint32_t)LW_STATUS_COUNT_) {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(st == LW_INVALID_ARGUMENT);
    LW_FUZZ_CHECK(control_state(mb) == LW_MB_CONTROL_REQUEST);
    ack->status = LW_INTERNAL;
    lw__fuzz_poison_error(&err);
    st = lw__mailbox_ack_control(mb, ack, &err);
  }
  LW_FUZZ_CHECK(st == LW_OK);
  LW_FUZZ_CHECK(control_state(mb) == LW_MB_CONTROL_DONE);
  LW_FUZZ_CHECK(lw__fuzz_terminated(mb->control.ack_error.message,
                                    sizeof(mb->control.ack_error.message)));
  // A second ack is a state error.
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_ack_control(mb, ack, &err);
  lw__fuzz_check_error(st, &err);
  LW_FUZZ_CHECK(st == LW_FAILED_PRECONDITION);
  consume_own_ack(mb, ack);
}

int lw_fuzz_take_control(const uint8_t *data, size_t size) {
  lw_fuzz_control_params_t p;
  size_t used = lw__fuzz_read_params(&p, sizeof(p), data, size);
  data += used;
  size -= used;

  lw_mailbox_t *mb = lw__fuzz_mailbox(LW_MB_CHILD_SUB, p.header_xor);
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_validate_header(mb, &err);
  if (st != LW_OK) lw__fuzz_check_error(st, &err);

  // Relaxed stores: one thread plays both processes here.
  atomic_store_explicit(&mb->doorbell.post_seq, p.post_seq, memory_order_relaxed);
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    atomic_store_explicit(&mb->task[i].state, p.task_state[i], memory_order_relaxed);
    mb->task[i].seq = p.task_seq[i];
  }
  atomic_store_explicit(&mb->post_index.frame[p.next_seq % LW_MB_POST_SLOTS], p.post_slot,
                        memory_order_relaxed);
  // Names with no NUL unless the input brings one.
  memset(mb->control.name, 'n', sizeof(mb->control.name));
  memset(mb->control.entry, 'e', sizeof(mb->control.entry));
  memset(mb->control.ack_error.message, 'a', sizeof(mb->control.ack_error.message));
  memcpy(&mb->control, data, size < sizeof(lw_mb_control_t) ? size : sizeof(lw_mb_control_t));
  const lw_mb_arena_t *arena = lw__fuzz_arena_view(p.arena);

  bool is_control = false;
  uint32_t found = UINT32_MAX;
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_find_post(mb, p.next_seq, LW_MB_TASK_FRAMES, &is_control, &found, &err);
  if (st == LW_OK) {
    if (is_control) {
      LW_FUZZ_CHECK(control_state(mb) == LW_MB_CONTROL_REQUEST);
      LW_FUZZ_CHECK(mb->control.seq == p.next_seq);
    } else {
      LW_FUZZ_CHECK(found < LW_MB_TASK_FRAMES);
      LW_FUZZ_CHECK(atomic_load(&mb->task[found].state) == LW_MB_TASK_READY);
      LW_FUZZ_CHECK(mb->task[found].seq == p.next_seq);
    }
  } else {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(st == LW_NOT_FOUND || st == LW_INTERNAL);
  }

  // The request as posted: a private copy, so the checks do not read what the calls change.
  lw_mb_control_t posted;
  memcpy(&posted, &mb->control, sizeof(posted));
  uint32_t before = control_state(mb);

  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = lw__fuzz_status(p.ack_status);
  ack.async = (p.ack_async & 1u) != 0;
  ack.value = p.ack_value;
  memset(ack.error.message, 'x', sizeof(ack.error.message));  // no NUL: ack must add one

  lw_mb_control_taken_t taken;
  memset(&taken, 0x3c, sizeof(taken));
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_take_control(mb, arena, &taken, &err);
  // take_control never changes the state.
  LW_FUZZ_CHECK(control_state(mb) == before);
  if (st == LW_OK) {
    LW_FUZZ_CHECK(before == LW_MB_CONTROL_REQUEST);
    check_taken(&taken, &posted, arena);
    ack_and_consume(mb, &ack);
    return 0;
  }
  lw__fuzz_check_error(st, &err);
  if (before == LW_MB_CONTROL_REQUEST) {
    // A malformed request: the child acks it with the error.
    LW_FUZZ_CHECK(st == LW_INVALID_ARGUMENT);
    ack.status = st;
    ack.async = false;
    ack.error = err;
    ack_and_consume(mb, &ack);
    return 0;
  }
  LW_FUZZ_CHECK(st == LW_FAILED_PRECONDITION);
  // Not the child's to ack.
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_ack_control(mb, &ack, &err);
  lw__fuzz_check_error(st, &err);
  LW_FUZZ_CHECK(control_state(mb) == before);

  // The parent's side: an ack the input wrote, or no ack at all.
  lw_mb_control_ack_t out;
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_consume_control(mb, &out, &err);
  if (st == LW_OK) {
    LW_FUZZ_CHECK(before == LW_MB_CONTROL_DONE);
    LW_FUZZ_CHECK((uint32_t)out.status < (uint32_t)LW_STATUS_COUNT_);
    LW_FUZZ_CHECK(out.status == (lw_status_t)posted.ack_status);
    LW_FUZZ_CHECK(out.async == (posted.ack_async == 1));
    LW_FUZZ_CHECK(posted.ack_async <= 1);
    LW_FUZZ_CHECK(out.error.code == out.status);
    LW_FUZZ_CHECK(lw__fuzz_terminated(out.error.message, sizeof(out.error.message)));
    LW_FUZZ_CHECK(control_state(mb) == LW_MB_CONTROL_IDLE);
  } else {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(control_state(mb) == before);
  }
  return 0;
}
