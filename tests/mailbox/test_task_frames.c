// tests/mailbox/test_task_frames.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// the task frame state machine: the documented transitions, whole task lives, every rejected
// step, identity and result checks on consume, what take_task refuses.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Task state machine

Test(mailbox_task, transition_table_allows_exactly_the_documented_edges, .timeout = 10) {
  const lw_mb_task_state_t I = LW_MB_TASK_IDLE, Rd = LW_MB_TASK_READY, Ru = LW_MB_TASK_RUNNING,
                           D = LW_MB_TASK_DONE, F = LW_MB_TASK_FAILED, C = LW_MB_TASK_CANCELLED;
  // Legal: the diagram in mailbox.h (READY -> terminal: a task the child cannot take).
  const lw_mb_task_state_t legal[][2] = {{I, Rd}, {Rd, Ru}, {Rd, D}, {Rd, F}, {Rd, C},
                                         {Ru, D}, {Ru, F},  {Ru, C}, {D, I},  {F, I},
                                         {C, I}};
  for (uint32_t from = 0; from <= LW_MB_TASK_CANCELLED; ++from) {
    for (uint32_t to = 0; to <= LW_MB_TASK_CANCELLED; ++to) {
      bool want = false;
      for (size_t k = 0; k < sizeof(legal) / sizeof(legal[0]); ++k) {
        if (legal[k][0] == from && legal[k][1] == to) want = true;
      }
      cr_assert_eq(lw__mailbox_task_transition_legal(from, to), want, "%s -> %s",
                   lw__mailbox_task_state_name(from), lw__mailbox_task_state_name(to));
    }
  }
  // Named illegal ones, for the reader.
  cr_assert_not(lw__mailbox_task_transition_legal(I, Ru));
  cr_assert_not(lw__mailbox_task_transition_legal(D, Ru));
  cr_assert_not(lw__mailbox_task_transition_legal(Ru, Rd));
  cr_assert_not(lw__mailbox_task_transition_legal(Rd, I));
  cr_assert_not(lw__mailbox_task_transition_legal(I, D));
  cr_assert_not(lw__mailbox_task_transition_legal(D, F));
  cr_assert_not(lw__mailbox_task_transition_legal((lw_mb_task_state_t)9, I));
  cr_assert_str_eq(lw__mailbox_task_state_name(9), "UNKNOWN");
}

// The whole life of one task, checking the state after each legal step.
static void walk_one_task(lw_status_t st, lw_mb_task_state_t want_final) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  const uint32_t frame = 2;

  lw_mb_task_post_t p = task_post(1, 5);
  cr_assert_eq(lw__mailbox_post_task(mb, frame, &p, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_READY);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 1u);
  cr_assert(lw__mailbox_task_transition_legal(LW_MB_TASK_IDLE, LW_MB_TASK_READY));

  bool is_control = true;
  uint32_t found = 99;
  cr_assert_eq(lw__mailbox_find_post(mb, 1, LW_MB_TASK_FRAMES, &is_control, &found, &err), LW_OK,
               "%s", err.message);
  cr_assert_not(is_control);
  cr_assert_eq(found, frame);

  lw_mb_task_taken_t t;
  cr_assert_eq(lw__mailbox_take_task(mb, frame, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(memcmp(&t.identity, &p.identity, sizeof(t.identity)), 0);
  cr_assert_eq(t.kind, LW_MB_TASK_KERNEL);
  cr_assert_eq(t.callable, 42u);
  cr_assert_eq(t.timeout_ns, 1000);
  cr_assert_eq(t.args.n_tensors, 1u);
  cr_assert_eq(t.args.tensor[0].data, (void *)(g_arena + 64));
  cr_assert_eq(t.args.tensor[0].bytes, 128u);
  cr_assert_eq(t.args.n_scalars, 2u);
  cr_assert_eq(t.args.scalar[1], 0xabcdu);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_READY, "take does not move state");

  cr_assert_eq(lw__mailbox_task_set_running(mb, frame, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_RUNNING);
  cr_assert(lw__mailbox_task_transition_legal(LW_MB_TASK_READY, LW_MB_TASK_RUNNING));

  lw_mb_task_result_t r = result_of(st, st == LW_OK ? "" : "kernel said no");
  cr_assert_eq(lw__mailbox_task_complete(mb, frame, &r, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)want_final, "state %s",
               lw__mailbox_task_state_name(frame_state(mb, frame)));
  cr_assert(lw__mailbox_task_transition_legal(LW_MB_TASK_RUNNING, want_final));

  lw_mb_task_result_t out;
  cr_assert_eq(consume_frame(mb, frame, &p.identity, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.status, st);
  cr_assert_eq(out.final_state, want_final);
  cr_assert_eq(out.kernel_rc, r.kernel_rc);
  cr_assert_eq(out.kernel_ns, 1234u);
  cr_assert_eq(out.queue_ns, 56u);
  cr_assert_eq(out.error.code, st);
  cr_assert_str_eq(out.error.message, r.error.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_IDLE);
  cr_assert(lw__mailbox_task_transition_legal(want_final, LW_MB_TASK_IDLE));

  // The frame is reusable; the post leaves the last result as it was (only the child writes
  // result fields), and the next task's result replaces it whole.
  lw_mb_task_post_t p2 = task_post(2, 6);
  cr_assert_eq(lw__mailbox_post_task(mb, frame, &p2, &err), LW_OK, "%s", err.message);
  cr_assert_eq(mb->task[frame].result_status, (int32_t)st);
  lw_mb_task_taken_t t2;
  cr_assert_eq(lw__mailbox_take_task(mb, frame, &a, &t2, &err), LW_OK, "%s", err.message);
  cr_assert_eq(lw__mailbox_task_set_running(mb, frame, &err), LW_OK, "%s", err.message);
  lw_mb_task_result_t r2 = result_of(LW_OK, "");
  r2.kernel_ns = 99;
  cr_assert_eq(lw__mailbox_task_complete(mb, frame, &r2, &err), LW_OK, "%s", err.message);
  lw_mb_task_result_t out2;
  cr_assert_eq(consume_frame(mb, frame, &p2.identity, &out2, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out2.status, LW_OK);
  cr_assert_eq(out2.kernel_rc, 0);
  cr_assert_eq(out2.kernel_ns, 99u);
  cr_assert_str_eq(out2.error.message, "", "nothing of the earlier message is left");
  cr_assert_eq(out2.error.code, LW_OK);
  free(mb);
}

Test(mailbox_task, done_task_walks_post_find_take_run_complete_consume_idle, .timeout = 10) {
  walk_one_task(LW_OK, LW_MB_TASK_DONE);
}

Test(mailbox_task, failed_task_walks_to_task_failed_and_back_to_idle, .timeout = 10) {
  walk_one_task(LW_TASK_FAILED, LW_MB_TASK_FAILED);
}

Test(mailbox_task, cancelled_task_walks_to_task_cancelled_and_back_to_idle, .timeout = 10) {
  walk_one_task(LW_CANCELLED, LW_MB_TASK_CANCELLED);
}

Test(mailbox_task, deadline_exceeded_completes_as_task_cancelled, .timeout = 10) {
  walk_one_task(LW_DEADLINE_EXCEEDED, LW_MB_TASK_CANCELLED);
}

Test(mailbox_task, ready_task_the_child_cannot_take_completes_failed_without_running,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_post_t p = task_post(1, 1);
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &p, &err), LW_OK);
  lw_mb_task_result_t r = result_of(LW_INVALID_ARGUMENT, "bad args");
  cr_assert_eq(lw__mailbox_task_complete(mb, 0, &r, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_FAILED);
  lw_mb_task_result_t out;
  cr_assert_eq(consume_frame(mb, 0, &p.identity, &out, &err), LW_OK);
  cr_assert_eq(out.status, LW_INVALID_ARGUMENT);
  free(mb);
}

Test(mailbox_task, post_to_a_busy_frame_is_rejected_and_leaves_it_intact, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  post_take_run(mb, 1, 1, 1);
  lw_mb_task_post_t p = task_post(2, 2);
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &p, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "task frame 1 is TASK_RUNNING"), "%s", err.message);
  cr_assert(has(&err, "expected IDLE"), "%s", err.message);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_RUNNING);
  cr_assert_eq(mb->task[1].seq, 1u, "the running task's payload is untouched");
  cr_assert_eq(mb->task[1].identity.task_id, 201u);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 1u, "no doorbell for a rejected post");
  free(mb);
}

Test(mailbox_task, set_running_on_an_idle_frame_is_rejected, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  cr_assert_eq(lw__mailbox_task_set_running(mb, 0, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "task frame 0 is IDLE"), "%s", err.message);
  cr_assert(has(&err, "expected TASK_READY"), "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_IDLE);
  // And twice in a row: the second finds RUNNING.
  post_take_run(mb, 0, 1, 1);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 0, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "TASK_RUNNING"), "%s", err.message);
  free(mb);
}

Test(mailbox_task, complete_on_an_idle_frame_is_rejected_and_writes_nothing, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_result_t r = result_of(LW_TASK_FAILED, "late");
  cr_assert_eq(lw__mailbox_task_complete(mb, 0, &r, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "task frame 0 is IDLE"), "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_IDLE);
  cr_assert_eq(mb->task[0].result_status, 0);
  cr_assert_eq(mb->task[0].result_error.message[0], '\0');
  // A completed frame cannot be completed again either.
  post_run_complete(mb, 0, 1, 1, LW_OK, "");
  cr_assert_eq(lw__mailbox_task_complete(mb, 0, &r, &err), LW_FAILED_PRECONDITION);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_DONE);
  cr_assert_eq(mb->task[0].result_status, LW_OK);
  // An invalid status is refused before anything is written.
  lw_mb_task_result_t bad = result_of((lw_status_t)77, "");
  post_take_run(mb, 1, 2, 2);
  cr_assert_eq(lw__mailbox_task_complete(mb, 1, &bad, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_RUNNING);
  free(mb);
}

Test(mailbox_task, consume_of_a_running_frame_is_rejected, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_result_t out;
  lw_mb_identity_t id = ident(1);
  cr_assert_eq(consume_frame(mb, 0, &id, &out, &err), LW_FAILED_PRECONDITION,
               "consume of an IDLE frame");
  post_take_run(mb, 0, 1, 1);
  cr_assert_eq(consume_frame(mb, 0, &id, &out, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "task frame 0 is TASK_RUNNING"), "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_RUNNING);
  free(mb);
}

Test(mailbox_task, frame_index_out_of_range_is_rejected_everywhere, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  const uint32_t bad = LW_MB_TASK_FRAMES;
  lw_mb_task_post_t p = task_post(1, 1);
  lw_mb_task_result_t r = result_of(LW_OK, "");
  lw_mb_task_taken_t t;
  lw_mb_identity_t id = ident(1);
  cr_assert_eq(lw__mailbox_post_task(mb, bad, &p, &err), LW_INVALID_ARGUMENT);
  char want[48];
  snprintf(want, sizeof(want), "task frame %u out of range", LW_MB_TASK_FRAMES);
  cr_assert(has(&err, want), "%s", err.message);
  cr_assert_eq(lw__mailbox_take_task(mb, bad, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__mailbox_task_set_running(mb, bad, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw__mailbox_task_complete(mb, bad, &r, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(consume_frame(mb, bad, &id, &r, &err), LW_INVALID_ARGUMENT);
  cr_assert_not(lw__mailbox_cancel_task(mb, bad, id.dispatch_id));
  free(mb);
}

Test(mailbox_errors, never_name_the_child_from_the_child_writable_header, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  // A broken child (or a stray kernel write) can put anything into the header; nothing the
  // parent reports may repeat it as the child's name.
  mb->header.child_index = 0x56786461u;
  mb->header.child_kind = 0x41414141u;
  atomic_store(&mb->header.child_pid, 0x42424242);
  atomic_store(&mb->task[2].state, 0x43434343u);
  atomic_store(&mb->ring_head.value, 1000);
  lw_mb_task_post_t p = task_post(1, 9);
  lw_mb_completion_t c;
  lw_mb_control_ack_t ack;
  atomic_store(&mb->control.state, 0x44444444u);
  lw_status_t got[] = {lw__mailbox_post_task(mb, 2, &p, &err), LW_OK, LW_OK};
  char msgs[3][LW_ERROR_MESSAGE_BYTES];
  snprintf(msgs[0], sizeof(msgs[0]), "%s", err.message);
  got[1] = lw__mailbox_pop_completion(mb, &c, &err);
  snprintf(msgs[1], sizeof(msgs[1]), "%s", err.message);
  got[2] = lw__mailbox_consume_control(mb, &ack, &err);
  snprintf(msgs[2], sizeof(msgs[2]), "%s", err.message);
  for (int i = 0; i < 3; ++i) {
    cr_assert_neq(got[i], LW_OK, "call %d", i);
    cr_assert(!strstr(msgs[i], "1450735713") && !strstr(msgs[i], "56786461") &&
                  !strstr(msgs[i], "1111638594") && !strstr(msgs[i], "child"),
              "call %d names the child from the header: %s", i, msgs[i]);
  }
  cr_assert_eq(err.worker_id, -1);
  free(mb);
}

Test(mailbox_task, consume_with_a_stale_identity_is_internal_and_leaves_the_frame_untouched,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  post_run_complete(mb, 1, 1, 4, LW_OK, "");
  uint8_t before[sizeof(lw_mb_task_t)];
  memcpy(before, &mb->task[1], sizeof(before));
  for (int field = 0; field < 4; ++field) {
    lw_mb_identity_t want = ident(4);
    uint64_t *f = field == 0 ? &want.run_id
                  : field == 1 ? &want.task_id
                  : field == 2 ? &want.dispatch_id
                               : &want.generation;
    *f += 1;
    lw_mb_task_result_t out;
    cr_assert_eq(consume_frame(mb, 1, &want, &out, &err), LW_INTERNAL, "field %d", field);
    cr_assert(has(&err, "identity mismatch on frame 1"), "%s", err.message);
    // The mailbox cannot tell which child it is (the header is child-writable): the caller
    // names it.
    cr_assert_eq(err.worker_id, -1);
    cr_assert_eq(memcmp(before, &mb->task[1], sizeof(before)), 0, "frame changed (field %d)",
                 field);
  }
  // The right identity still consumes it.
  lw_mb_identity_t id = ident(4);
  lw_mb_task_result_t out;
  cr_assert_eq(consume_frame(mb, 1, &id, &out, &err), LW_OK, "%s", err.message);
  free(mb);
}

// A TASK_OK completion carries the result: consume takes it from the entry and sets the frame
// IDLE without reading it; its identity is checked like the frame's.
Test(mailbox_task, an_ok_entry_gives_its_own_result_and_frees_the_frame_unread, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  post_run_complete(mb, 1, 1, 4, LW_OK, "");
  // What the frame says is not what the entry says: the entry's answer comes back.
  mb->task[1].kernel_ns = 1;
  mb->task[1].identity.generation += 7;
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_TASK_OK;
  c.frame = 1;
  c.identity = ident(4);
  c.kernel_ns = 777;
  c.queue_ns = 88;
  // A stale identity in the entry: INTERNAL, and the frame is left as it was.
  lw_mb_identity_t other = ident(5);
  uint8_t before[sizeof(lw_mb_task_t)];
  memcpy(before, &mb->task[1], sizeof(before));
  lw_mb_task_result_t out;
  cr_assert_eq(lw__mailbox_consume_task(mb, &c, &other, &out, &err), LW_INTERNAL);
  cr_assert(has(&err, "identity mismatch on frame 1"), "%s", err.message);
  cr_assert_eq(memcmp(before, &mb->task[1], sizeof(before)), 0, "frame changed");
  lw_mb_identity_t id = ident(4);
  memset(&out, 0x5a, sizeof(out));
  cr_assert_eq(lw__mailbox_consume_task(mb, &c, &id, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.status, LW_OK);
  cr_assert_eq(out.kernel_rc, 0);
  cr_assert_eq(out.kernel_ns, 777u);
  cr_assert_eq(out.queue_ns, 88u);
  cr_assert_eq(out.final_state, LW_MB_TASK_DONE);
  cr_assert_eq(out.error.code, LW_OK);
  cr_assert_str_eq(out.error.message, "");
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_IDLE);
  // Free for the next post.
  lw_mb_task_post_t p = task_post(2, 9);
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &p, &err), LW_OK, "%s", err.message);
  free(mb);
}

Test(mailbox_task, consume_rejects_a_result_status_inconsistent_with_the_state,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_identity_t id = ident(1);
  lw_mb_task_result_t out;
  struct {
    uint32_t state;
    int32_t status;
  } bad[] = {
      {LW_MB_TASK_DONE, LW_TASK_FAILED}, {LW_MB_TASK_FAILED, LW_OK},
      {LW_MB_TASK_CANCELLED, LW_OK},     {LW_MB_TASK_FAILED, LW_STATUS_COUNT_},
      {LW_MB_TASK_DONE, -1},             {LW_MB_TASK_CANCELLED, 1000},
  };
  post_take_run(mb, 0, 1, 1);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    // Forge what a broken child could write.
    atomic_store(&mb->task[0].state, bad[i].state);
    mb->task[0].result_status = bad[i].status;
    cr_assert_eq(consume_frame(mb, 0, &id, &out, &err), LW_INTERNAL, "case %zu", i);
    cr_assert(has(&err, "result status"), "%s", err.message);
    cr_assert_eq(frame_state(mb, 0), bad[i].state, "case %zu: frame left as it was", i);
  }
  free(mb);
}

Test(mailbox_task, consume_terminates_an_unterminated_error_message, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  post_run_complete(mb, 0, 1, 1, LW_TASK_FAILED, "");
  memset(mb->task[0].result_error.message, 'x', LW_ERROR_MESSAGE_BYTES);  // forged
  mb->task[0].result_error.code = (lw_status_t)999;
  lw_mb_identity_t id = ident(1);
  lw_mb_task_result_t out;
  cr_assert_eq(consume_frame(mb, 0, &id, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(out.error.message), LW_ERROR_MESSAGE_BYTES - 1u);
  cr_assert_eq(out.error.code, LW_TASK_FAILED, "the code follows the validated status");
  free(mb);
}

// A message is written and read up to its NUL: the bytes a longer earlier message left behind
// in the frame are never part of a later result.
Test(mailbox_task, a_short_message_after_a_long_one_reads_alone, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  char long_msg[200];
  memset(long_msg, 'L', sizeof(long_msg) - 1);
  long_msg[sizeof(long_msg) - 1] = '\0';
  const char *msgs[] = {long_msg, "short", ""};
  for (uint64_t i = 0; i < 3; ++i) {
    lw_status_t st = i == 2 ? LW_OK : LW_TASK_FAILED;
    post_run_complete(mb, 0, i + 1, i + 1, st, msgs[i]);
    lw_mb_identity_t id = ident(i + 1);
    lw_mb_task_result_t out;
    memset(&out, 'g', sizeof(out));  // whatever the caller's buffer held
    cr_assert_eq(consume_frame(mb, 0, &id, &out, &err), LW_OK, "%s", err.message);
    cr_assert_str_eq(out.error.message, msgs[i], "round %llu", (unsigned long long)i);
    cr_assert_eq(out.error.code, st);
  }
  free(mb);
}

// A post writes the argument slots it uses and no others (docs/protocol.md: the rest are
// stale), so a frame keeps an earlier post's tensors and scalars beyond the counts, and the
// child's take reads exactly the counts.
Test(mailbox_task, a_post_writes_only_the_argument_slots_it_uses_and_take_reads_no_further,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_task_post_t wide = task_post(1, 1);
  wide.args.n_tensors = 3;
  for (uint32_t i = 0; i < 3; ++i) {
    wide.args.tensor[i].offset = 64 * (i + 1);
    wide.args.tensor[i].bytes = 32;
  }
  wide.args.n_scalars = 4;
  for (uint32_t i = 0; i < 4; ++i) wide.args.scalar[i] = 0x5000 + i;
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &wide, &err), LW_OK, "%s", err.message);
  lw_mb_task_taken_t t;
  cr_assert_eq(lw__mailbox_take_task(mb, 0, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(t.args.n_tensors, 3u);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 0, &err), LW_OK, "%s", err.message);
  lw_mb_task_result_t r = result_of(LW_OK, "");
  cr_assert_eq(lw__mailbox_task_complete(mb, 0, &r, &err), LW_OK, "%s", err.message);
  lw_mb_task_result_t out;
  cr_assert_eq(consume_frame(mb, 0, &wide.identity, &out, &err), LW_OK, "%s", err.message);

  lw_mb_task_post_t narrow = task_post(2, 2);  // 1 tensor at 64, 2 scalars
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &narrow, &err), LW_OK, "%s", err.message);
  const lw_mb_args_t *in_frame = &mb->task[0].args;
  cr_assert_eq(in_frame->n_tensors, 1u);
  cr_assert_eq(in_frame->tensor[2].offset, 192u, "slot 2 was not written: the earlier post's");
  cr_assert_eq(in_frame->scalar[3], 0x5003u, "scalar 3 was not written: the earlier post's");
  memset(&t, 0x7f, sizeof(t));
  cr_assert_eq(lw__mailbox_take_task(mb, 0, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(t.args.n_tensors, 1u);
  cr_assert_eq(t.args.tensor[0].data, (void *)(g_arena + 64));
  cr_assert_null(t.args.tensor[1].data, "the take sees no slot past the count");
  cr_assert_eq(t.args.tensor[2].bytes, 0u);
  cr_assert_eq(t.args.n_scalars, 2u);
  cr_assert_eq(t.args.scalar[1], 0xabcdu);
  cr_assert_eq(t.args.scalar[3], 0u);
  free(mb);
}

Test(mailbox_task, take_task_rejects_an_unknown_kind_and_bad_args, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_task_taken_t t;
  lw_mb_task_post_t p = task_post(1, 1);
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &p, &err), LW_OK);
  mb->task[0].kind = 9;  // forged
  cr_assert_eq(lw__mailbox_take_task(mb, 0, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "unknown kind 9"), "%s", err.message);
  mb->task[0].kind = LW_MB_TASK_SUB;
  mb->task[0].args.tensor[0].offset = ARENA_BYTES;  // forged: 128 bytes past the end
  cr_assert_eq(lw__mailbox_take_task(mb, 0, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "outside"), "%s", err.message);
  cr_assert_eq(err.task_id, 201u, "the error names the task");
  // The post itself refuses an unknown kind and oversize counts.
  p.kind = (lw_mb_task_kind_t)0;
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &p, &err), LW_INVALID_ARGUMENT);
  p.kind = LW_MB_TASK_KERNEL;
  p.args.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &p, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_IDLE);
  free(mb);
}
