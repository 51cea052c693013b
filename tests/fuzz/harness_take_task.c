// tests/fuzz/harness_take_task.c — the child's decoding of task frames.
//
// The input writes what the parent owns: a task frame's payload bytes, the states and
// sequence numbers of the other frames and of the control frame, the doorbell, and the header
// fields the child's messages use. The harness then does what the child's loop does:
// find_post(next expected seq), take_task on the frame found (or on the overwritten frame,
// so decoding is reached without solving the sequence check), then task_set_running and
// task_complete, or task_complete straight from READY when the task cannot be taken; and
// finally what the parent does with the result (consume_task), which must accept anything a
// child produced through the API.
#include <string.h>

#include "fuzz/fuzz_harness.h"

static uint32_t frame_state(lw_mailbox_t *mb, uint32_t frame) {
  return atomic_load_explicit(&mb->task[frame].state, memory_order_relaxed);
}

static lw_mb_task_state_t terminal_state_for(lw_status_t st) {
  if (st == LW_OK) return LW_MB_TASK_DONE;
  if (st == LW_CANCELLED || st == LW_DEADLINE_EXCEEDED) return LW_MB_TASK_CANCELLED;
  return LW_MB_TASK_FAILED;
}

// What an LW_OK take_task promises.
static void check_taken(const lw_mb_task_taken_t *t, const lw_mb_task_t *frame,
                        const lw_mb_arena_t *arena) {
  LW_FUZZ_CHECK(t->kind == LW_MB_TASK_KERNEL || t->kind == LW_MB_TASK_SUB);
  LW_FUZZ_CHECK(memcmp(&t->identity, &frame->identity, sizeof(t->identity)) == 0);
  LW_FUZZ_CHECK(t->callable == frame->callable);
  LW_FUZZ_CHECK(t->args.n_tensors <= LW_MAX_TENSORS);
  LW_FUZZ_CHECK(t->args.n_scalars <= LW_MAX_SCALARS);
  for (uint32_t i = 0; i < LW_MAX_TENSORS; ++i) {
    if (i < t->args.n_tensors) {
      LW_FUZZ_CHECK(t->args.tensor[i].bytes == frame->args.tensor[i].bytes);
      lw__fuzz_check_range(arena, t->args.tensor[i].data, t->args.tensor[i].bytes);
    } else {
      LW_FUZZ_CHECK(t->args.tensor[i].data == NULL && t->args.tensor[i].bytes == 0);
    }
  }
  for (uint32_t i = 0; i < LW_MAX_SCALARS; ++i) {
    LW_FUZZ_CHECK(t->args.scalar[i] == (i < t->args.n_scalars ? frame->args.scalar[i] : 0));
  }
}

// The child completes the frame with status st; then the parent consumes it.
static void complete_and_consume(lw_mailbox_t *mb, uint32_t frame, lw_status_t st,
                                 const lw_error_t *why, const lw_mb_identity_t *posted) {
  lw_mb_task_result_t result;
  memset(&result, 0, sizeof(result));
  result.status = st;
  result.kernel_rc = st == LW_OK ? 0 : -1;
  result.kernel_ns = 1000;
  result.queue_ns = 10;
  if (why != NULL) {
    result.error = *why;
  } else {
    // No NUL anywhere: task_complete must terminate what it publishes.
    memset(result.error.message, 'k', sizeof(result.error.message));
  }
  uint32_t before = frame_state(mb, frame);
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t cst = lw__mailbox_task_complete(mb, frame, &result, &err);
  if ((uint32_t)st >= (uint32_t)LW_STATUS_COUNT_) {
    // A kernel status the protocol cannot carry is refused and the frame left alone.
    lw__fuzz_check_error(cst, &err);
    LW_FUZZ_CHECK(cst == LW_INVALID_ARGUMENT);
    LW_FUZZ_CHECK(frame_state(mb, frame) == before);
    st = LW_INTERNAL;
    result.status = st;
    lw__fuzz_poison_error(&err);
    cst = lw__mailbox_task_complete(mb, frame, &result, &err);
  }
  LW_FUZZ_CHECK(cst == LW_OK);
  LW_FUZZ_CHECK(frame_state(mb, frame) == (uint32_t)terminal_state_for(st));
  const lw_mb_task_t *t = &mb->task[frame];
  LW_FUZZ_CHECK(t->result_status == (int32_t)st);
  LW_FUZZ_CHECK(t->result_error.code == st);
  LW_FUZZ_CHECK(lw__fuzz_terminated(t->result_error.message, sizeof(t->result_error.message)));
  // The frame's next task has not started.
  LW_FUZZ_CHECK(atomic_load(&t->started_ns) == 0);
  // The run's cancel generation is retired: a late cancel finds nothing live.
  LW_FUZZ_CHECK(!lw__mailbox_cancel_task(mb, frame, posted->dispatch_id));

  // The frame path (a TASK completion naming the frame), as the parent takes a result that
  // is not OK.
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_TASK;
  c.frame = frame;
  lw_mb_task_result_t out;
  lw__fuzz_poison_error(&err);
  lw_status_t pst = lw__mailbox_consume_task(mb, &c, posted, &out, &err);
  LW_FUZZ_CHECK(pst == LW_OK);
  LW_FUZZ_CHECK(out.status == st);
  LW_FUZZ_CHECK(out.error.code == st);
  LW_FUZZ_CHECK(out.final_state == terminal_state_for(st));
  LW_FUZZ_CHECK(lw__fuzz_terminated(out.error.message, sizeof(out.error.message)));
  LW_FUZZ_CHECK(frame_state(mb, frame) == LW_MB_TASK_IDLE);
}

// The child takes frame `frame` as its loop would.
static void take_one(lw_mailbox_t *mb, uint32_t frame, const lw_mb_arena_t *arena,
                     lw_status_t kernel_status) {
  // The payload as posted: a private copy, so the checks do not read what the calls change.
  lw_mb_task_t posted;
  memcpy(&posted, &mb->task[frame], sizeof(posted));
  uint32_t before = frame_state(mb, frame);

  lw_mb_task_taken_t taken;
  memset(&taken, 0x3c, sizeof(taken));
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_take_task(mb, frame, arena, &taken, &err);
  // take_task never changes the state.
  LW_FUZZ_CHECK(frame_state(mb, frame) == before);
  if (st != LW_OK) {
    lw__fuzz_check_error(st, &err);
    if (before != LW_MB_TASK_READY) {
      LW_FUZZ_CHECK(st == LW_FAILED_PRECONDITION);
      // Nor can the child run it again.
      lw__fuzz_poison_error(&err);
      st = lw__mailbox_task_set_running(mb, frame, &err);
      lw__fuzz_check_error(st, &err);
      LW_FUZZ_CHECK(frame_state(mb, frame) == before);
      if (before == LW_MB_TASK_RUNNING) {
        // Already the child's (taken earlier): completing it is legitimate.
        complete_and_consume(mb, frame, kernel_status, NULL, &posted.identity);
        return;
      }
      // Any other state belongs to the parent: the child cannot complete it.
      lw_mb_task_result_t r;
      memset(&r, 0, sizeof(r));
      lw__fuzz_poison_error(&err);
      st = lw__mailbox_task_complete(mb, frame, &r, &err);
      lw__fuzz_check_error(st, &err);
      LW_FUZZ_CHECK(frame_state(mb, frame) == before);
      return;
    }
    // A READY frame that cannot be taken is malformed: the child fails it from READY.
    LW_FUZZ_CHECK(st == LW_INVALID_ARGUMENT);
    LW_FUZZ_CHECK(err.task_id == posted.identity.task_id);
    complete_and_consume(mb, frame, st, &err, &posted.identity);
    return;
  }
  LW_FUZZ_CHECK(before == LW_MB_TASK_READY);
  check_taken(&taken, &posted, arena);

  lw__fuzz_poison_error(&err);
  st = lw__mailbox_task_set_running(mb, frame, &err);
  LW_FUZZ_CHECK(st == LW_OK);
  LW_FUZZ_CHECK(frame_state(mb, frame) == LW_MB_TASK_RUNNING);
  // A second set_running is a state error, not a success.
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_task_set_running(mb, frame, &err);
  lw__fuzz_check_error(st, &err);
  LW_FUZZ_CHECK(st == LW_FAILED_PRECONDITION);

  complete_and_consume(mb, frame, kernel_status, NULL, &posted.identity);
}

int lw_fuzz_take_task(const uint8_t *data, size_t size) {
  lw_fuzz_task_params_t p;
  size_t used = lw__fuzz_read_params(&p, sizeof(p), data, size);
  data += used;
  size -= used;

  lw_mailbox_t *mb = lw__fuzz_mailbox(LW_MB_CHILD_CHIP, p.header_xor);
  lw_error_t err;
  lw__fuzz_poison_error(&err);
  lw_status_t st = lw__mailbox_validate_header(mb, &err);
  if (st != LW_OK) lw__fuzz_check_error(st, &err);

  // Relaxed stores: one thread plays both processes here.
  atomic_store_explicit(&mb->doorbell.post_seq, p.post_seq, memory_order_relaxed);
  atomic_store_explicit(&mb->control.state, p.control_state, memory_order_relaxed);
  mb->control.seq = p.control_seq;
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    atomic_store_explicit(&mb->task[i].state, p.other_state[i], memory_order_relaxed);
    mb->task[i].seq = p.other_seq[i];
  }
  // The post index names the payload's frame (as the parent's post would) or, for other byte
  // values, a wrong or out-of-range frame: find_post must then fall back to its scan.
  atomic_store_explicit(&mb->post_index.frame[p.next_seq % LW_MB_POST_SLOTS], p.frame,
                        memory_order_relaxed);
  uint32_t frame = p.frame % LW_MB_TASK_FRAMES;
  memcpy(&mb->task[frame], data, size < sizeof(lw_mb_task_t) ? size : sizeof(lw_mb_task_t));
  const lw_mb_arena_t *arena = lw__fuzz_arena_view(p.arena);

  bool is_control = true;
  uint32_t found = UINT32_MAX;
  lw__fuzz_poison_error(&err);
  // Any hint (the frame looked at first; LW_MB_TASK_FRAMES and beyond: none): what is found
  // holds the post (checked below).
  uint32_t hint = (uint32_t)(p.next_seq % (LW_MB_TASK_FRAMES + 2));
  st = lw__mailbox_find_post(mb, p.next_seq, hint, &is_control, &found, &err);
  // The frame the child takes: the post found, else the overwritten frame anyway.
  uint32_t take = st == LW_OK && !is_control ? found : frame;
  if (st == LW_OK) {
    if (is_control) {
      LW_FUZZ_CHECK(atomic_load(&mb->control.state) == LW_MB_CONTROL_REQUEST);
      LW_FUZZ_CHECK(mb->control.seq == p.next_seq);
    } else {
      LW_FUZZ_CHECK(found < LW_MB_TASK_FRAMES);
      LW_FUZZ_CHECK(frame_state(mb, found) == LW_MB_TASK_READY);
      LW_FUZZ_CHECK(mb->task[found].seq == p.next_seq);
    }
  } else {
    lw__fuzz_check_error(st, &err);
    LW_FUZZ_CHECK(st == LW_NOT_FOUND || st == LW_INTERNAL);
  }

  // A stray index, as a broken caller might pass: in range it only reads (take_task does not
  // change the state); out of range every child call refuses it.
  lw_mb_task_taken_t taken;
  lw__fuzz_poison_error(&err);
  st = lw__mailbox_take_task(mb, p.probe_frame, arena, &taken, &err);
  if (st != LW_OK) {
    lw__fuzz_check_error(st, &err);
  } else {
    LW_FUZZ_CHECK(p.probe_frame < LW_MB_TASK_FRAMES);
    check_taken(&taken, &mb->task[p.probe_frame], arena);
  }
  if (p.probe_frame >= LW_MB_TASK_FRAMES) {
    LW_FUZZ_CHECK(st == LW_INVALID_ARGUMENT);
    lw__fuzz_poison_error(&err);
    st = lw__mailbox_task_set_running(mb, p.probe_frame, &err);
    lw__fuzz_check_error(st, &err);
    lw_mb_task_result_t r;
    memset(&r, 0, sizeof(r));
    lw__fuzz_poison_error(&err);
    st = lw__mailbox_task_complete(mb, p.probe_frame, &r, &err);
    lw__fuzz_check_error(st, &err);
  }

  take_one(mb, take, arena, lw__fuzz_status(p.result_status));
  return 0;
}
