// tests/fuzz/harness_completions.c — the parent's validation of completions and task results.
//
// The input writes what the child owns: the ring cursors (possibly corrupt), the ring
// entries, and each task frame's state, identity and result. The harness drains the ring as
// the parent's scheduler does (pop until NOT_FOUND, stopping at a corrupt head, bounded), and
// for each TASK completion consumes the frame it names against the identity the parent
// posted there. Then it pushes one completion as the child does, against cursors from the
// input, to check the child's side of the ring bounds too.
#include <string.h>

#include "fuzz/fuzz_harness.h"

static uint32_t frame_state(lw_mailbox_t *mb, uint32_t frame) {
  return atomic_load_explicit(&mb->task[frame].state, memory_order_relaxed);
}

static bool state_terminal(uint32_t s) {
  return s == LW_MB_TASK_DONE || s == LW_MB_TASK_FAILED || s == LW_MB_TASK_CANCELLED;
}

// The parent takes the result of the task a TASK or TASK_OK completion reported.
static void consume(lw_mailbox_t *mb, const lw_mb_completion_t *c,
                    const lw_mb_identity_t *expected) {
  uint32_t frame = c->frame;
  uint32_t before = frame_state(mb, frame);
  lw_mb_task_t snapshot;
  memcpy(&snapshot, &mb->task[frame], sizeof(snapshot));
  lw_mb_task_result_t out;
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_consume_task(mb, c, expected, &out, &err);
  if (st != LW_OK) {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(st == LW_FAILED_PRECONDITION || st == LW_INTERNAL);
    LW_FUZZ_CHECK(st != LW_FAILED_PRECONDITION ||
                  (c->kind == LW_MB_COMPLETION_TASK && !state_terminal(before)));
    // The frame is left untouched.
    LW_FUZZ_CHECK(memcmp(&snapshot, &mb->task[frame], sizeof(snapshot)) == 0);
    return;
  }
  LW_FUZZ_CHECK((uint32_t)out.status < (uint32_t)LW_STATUS_COUNT_);
  LW_FUZZ_CHECK((out.final_state == LW_MB_TASK_DONE) == (out.status == LW_OK));
  LW_FUZZ_CHECK(out.error.code == out.status);
  LW_FUZZ_CHECK(lw__fuzz_terminated(out.error.message, sizeof(out.error.message)));
  LW_FUZZ_CHECK(frame_state(mb, frame) == LW_MB_TASK_IDLE);
  if (c->kind == LW_MB_COMPLETION_TASK_OK) {
    // The entry's result and identity; the frame is not read, only set IDLE: every other byte
    // is as it was.
    LW_FUZZ_CHECK(memcmp(&c->identity, expected, sizeof(*expected)) == 0);
    lw_mb_task_t after;
    memcpy(&after, &mb->task[frame], sizeof(after));
    atomic_store_explicit(&after.state, atomic_load_explicit(&snapshot.state, memory_order_relaxed),
                          memory_order_relaxed);
    LW_FUZZ_CHECK(memcmp(&after, &snapshot, sizeof(after)) == 0);
    LW_FUZZ_CHECK(out.status == LW_OK && out.kernel_rc == 0);
    LW_FUZZ_CHECK(out.kernel_ns == c->kernel_ns && out.queue_ns == c->queue_ns);
    LW_FUZZ_CHECK(out.error.message[0] == '\0');
    return;
  }
  LW_FUZZ_CHECK(state_terminal(before));
  LW_FUZZ_CHECK(memcmp(&snapshot.identity, expected, sizeof(*expected)) == 0);
  LW_FUZZ_CHECK(out.final_state == (lw_mb_task_state_t)before);
}

static void drain(lw_mailbox_t *mb, const lw_fuzz_completion_params_t *p) {
  // The frames the parent holds a task on (as the scheduler's frame_task): each is consumed
  // once; a second completion for it is the scheduler's to refuse, never consumed again.
  bool held[LW_MB_TASK_FRAMES];
  for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) held[f] = true;
  // Every pop either advances the tail or stops the loop, so 2R + 2 pops drain any ring. As
  // the scheduler drains: the first pop may look at the head, the ones after it may not.
  for (uint32_t n = 0; n < 2 * LW_MB_RING_ENTRIES + 2; ++n) {
    uint64_t tail0 = atomic_load(&mb->ring_tail.value);
    uint64_t head0 = atomic_load(&mb->ring_head.value);
    bool marked = atomic_load(&mb->ring[tail0 % LW_MB_RING_ENTRIES].mark) ==
                  lw__mailbox_completion_mark(tail0);
    // The re-check before a sleep: the mark, else a head that moved (not one behind).
    LW_FUZZ_CHECK(lw__mailbox_completion_pending(mb) ==
                  (marked || (head0 != tail0 && head0 + 1 != tail0)));
    lw_mb_completion_t c;
    memset(&c, 0x3c, sizeof(c));
    lw_error_t err;
    lw__fuzz_poison_error(&err);
    lw_status_t st = n == 0 ? lw__mailbox_pop_completion(mb, &c, &err)
                            : lw__mailbox_pop_next_completion(mb, &c, &err);
    uint64_t tail1 = atomic_load(&mb->ring_tail.value);
    LW_FUZZ_CHECK(atomic_load(&mb->ring_head.value) == head0);  // the parent never moves it
    if (st == LW_NOT_FOUND) {
      // The empty ring is the hot path's answer, not an error: no message is formatted. The
      // first pop says so only when the head agrees; the next ones by the entry alone.
      LW_FUZZ_CHECK(!marked);
      // (A head one behind the tail: the push of the entry taken last by its mark is between
      // its mark and its head.)
      LW_FUZZ_CHECK(n > 0 || head0 == tail0 || head0 + 1 == tail0);
      LW_FUZZ_CHECK(tail1 == tail0);
      return;
    }
    // An entry without its mark is taken by nobody: only reported, when the head says it is
    // there (the first pop).
    LW_FUZZ_CHECK(marked || (n == 0 && head0 != tail0 && head0 + 1 != tail0));
    if (st != LW_OK) {
      lw__fuzz_check_error(st, &err);
      LW_FUZZ_CHECK(st == LW_INTERNAL);
      if (!marked && head0 - tail0 > LW_MB_RING_ENTRIES) {
        // A corrupt head is not consumed; the parent kills the child.
        LW_FUZZ_CHECK(tail1 == tail0);
        return;
      }
      // A malformed entry, or one the head announces without its mark, is consumed.
      LW_FUZZ_CHECK(tail1 == tail0 + 1);
      continue;
    }
    LW_FUZZ_CHECK(marked);
    LW_FUZZ_CHECK(tail1 == tail0 + 1);
    LW_FUZZ_CHECK(lw__fuzz_terminated(c.error.message, sizeof(c.error.message)));
    if (c.kind == LW_MB_COMPLETION_TASK || c.kind == LW_MB_COMPLETION_TASK_OK) {
      LW_FUZZ_CHECK(c.frame < LW_MB_TASK_FRAMES);
      if (!held[c.frame]) continue;
      held[c.frame] = false;
      consume(mb, &c, &p->expected[c.frame]);
    } else {
      LW_FUZZ_CHECK(c.kind == LW_MB_COMPLETION_CONTROL);
      LW_FUZZ_CHECK((uint32_t)c.status < (uint32_t)LW_STATUS_COUNT_);
    }
  }
  // Unreachable with a ring of R entries: more pops than the ring can hold succeeded.
  lw__fuzz_fail("the ring yielded at most 2R + 2 entries", __FILE__, __LINE__);
}

// The child pushes one completion against cursors from the input.
static void push(lw_mailbox_t *mb, const lw_fuzz_completion_params_t *p) {
  atomic_store_explicit(&mb->ring_head.value, p->push_head, memory_order_relaxed);
  atomic_store_explicit(&mb->ring_tail.value, p->push_tail, memory_order_relaxed);
  // The child's record of the tail: the tail itself (a push that finds room reads no tail) or,
  // for odd heads, one that says the ring may be full (the push reads the tail). Either way a
  // record never runs ahead of the tail, and the outcome below is the same.
  mb->ring_head.tail_seen = (p->push_head & 1u) ? p->push_head - LW_MB_RING_ENTRIES : p->push_tail;
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_CONTROL;
  c.control_id = 1;
  memset(c.error.message, 'p', sizeof(c.error.message));  // no NUL: push must add one
  bool wake = true;
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  // A deadline already passed: a full ring answers at once.
  lw_status_t st = lw__mailbox_push_completion(mb, &c, 0, &wake, &err);
  uint64_t used = p->push_head - p->push_tail;
  if (used < LW_MB_RING_ENTRIES) {
    LW_FUZZ_CHECK(st == LW_OK);
    LW_FUZZ_CHECK(atomic_load(&mb->ring_head.value) == p->push_head + 1);
    const lw_mb_completion_t *slot = &mb->ring[p->push_head % LW_MB_RING_ENTRIES];
    LW_FUZZ_CHECK(lw__fuzz_terminated(slot->error.message, sizeof(slot->error.message)));
    LW_FUZZ_CHECK(atomic_load(&slot->mark) == lw__mailbox_completion_mark(p->push_head));
    return;
  }
  lw__fuzz_check_error(st, &err);
  LW_FUZZ_CHECK(st == (used == LW_MB_RING_ENTRIES ? LW_DEADLINE_EXCEEDED : LW_INTERNAL));
  LW_FUZZ_CHECK(!wake);
  LW_FUZZ_CHECK(atomic_load(&mb->ring_head.value) == p->push_head);
}

int lw_fuzz_completions(const uint8_t *data, size_t size) {
  lw_fuzz_completion_params_t p;
  size_t used = lw__fuzz_read_params(&p, sizeof(p), data, size);
  data += used;
  size -= used;

  lw_mailbox_t *mb = lw__fuzz_mailbox(LW_MB_CHILD_CHIP, p.header_xor);

  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    lw_mb_task_t *t = &mb->task[i];
    const lw_fuzz_completion_frame_t *f = &p.frame[i];
    // Relaxed: one thread plays both processes here.
    atomic_store_explicit(&t->state, f->state, memory_order_relaxed);
    t->identity = (f->same_identity & 1u) != 0 ? p.expected[i] : f->identity;
    t->result_status = f->result_status;
    t->kernel_rc = f->kernel_rc;
    t->result_error.code = (lw_status_t)f->result_status;
    memset(t->result_error.message, 'r', sizeof(t->result_error.message));  // no NUL
  }
  // Entries: unwritten bytes are non-NUL too, so messages are never terminated by accident.
  memset(mb->ring, 'c', sizeof(mb->ring));
  uint64_t slot = p.tail % LW_MB_RING_ENTRIES;
  uint8_t *ring = (uint8_t *)mb->ring;
  size_t offset = (size_t)slot * sizeof(lw_mb_completion_t);
  size_t n = size < sizeof(mb->ring) ? size : sizeof(mb->ring);
  size_t first = n < sizeof(mb->ring) - offset ? n : sizeof(mb->ring) - offset;
  memcpy(ring + offset, data, first);
  memcpy(ring, data + first, n - first);
  atomic_store_explicit(&mb->ring_head.value, p.head, memory_order_relaxed);
  atomic_store_explicit(&mb->ring_tail.value, p.tail, memory_order_relaxed);

  drain(mb, &p);
  push(mb, &p);
  return 0;
}
