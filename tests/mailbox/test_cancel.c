// tests/mailbox/test_cancel.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// the cancel words: set once for a live generation, nothing after completion.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Cancel words

Test(mailbox_cancel, cancel_sets_bit0_only_for_a_live_even_generation_once, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_cancel_word_t *w = &mb->task[1].cancel;
  cr_assert_not(lw__mailbox_cancel_task(mb, 1, ident(1).dispatch_id), "0: no run ever began");
  cr_assert_eq(atomic_load(w), 0u);
  post_take_run(mb, 1, 1, 1);
  uint64_t g = lw__cancel_begin(w);  // the run lane starts the run
  cr_assert(lw__mailbox_cancel_task(mb, 1, ident(1).dispatch_id));
  cr_assert_eq(atomic_load(w), g | 1u);
  cr_assert(lw__cancel_is_requested(w, g));
  cr_assert_not(lw__mailbox_cancel_task(mb, 1, ident(1).dispatch_id),
                "a second cancel finds bit 0 set");
  cr_assert_eq(atomic_load(w), g | 1u);
  lw_mb_task_result_t r = result_of(LW_CANCELLED, "cancelled while running");
  cr_assert_eq(lw__mailbox_task_complete(mb, 1, &r, &err), LW_OK);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_CANCELLED);
  // The post leaves the word alone; the next run gets a fresh, uncancelled generation.
  lw_mb_identity_t id = ident(1);
  cr_assert_eq(consume_frame(mb, 1, &id, &r, &err), LW_OK);
  post_take_run(mb, 1, 2, 2);
  cr_assert_eq(atomic_load(w), g | 1u);
  uint64_t g2 = lw__cancel_begin(w);
  cr_assert_gt(g2, g);
  cr_assert_not(lw__cancel_is_requested(w, g2));
  free(mb);
}

Test(mailbox_cancel, cancel_after_completion_finds_no_live_run, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_cancel_word_t *w = &mb->task[0].cancel;
  post_take_run(mb, 0, 1, 1);
  uint64_t g = lw__cancel_begin(w);
  lw_mb_task_result_t r = result_of(LW_OK, "");
  cr_assert_eq(lw__mailbox_task_complete(mb, 0, &r, &err), LW_OK);
  cr_assert_eq(atomic_load(w), g | 1u, "complete retires the generation");
  cr_assert_not(lw__mailbox_cancel_task(mb, 0, ident(1).dispatch_id),
                "a finished run cannot be cancelled");
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_DONE);
  free(mb);
}

// The mark names a post: a cancel that came after its task ended (it stays on the frame, no post
// clears it) is not a cancel of the frame's next task, whose own cancel replaces it.
Test(mailbox_cancel, a_late_cancel_marks_its_own_post_not_the_frames_next_task, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_t *t = &mb->task[2];
  post_take_run(mb, 2, 1, 1);
  (void)lw__cancel_begin(&t->cancel);
  atomic_store(&t->started_ns, 12345u);  // the kernel started, as the run lane stamps it
  lw_mb_task_result_t r = result_of(LW_OK, "");
  cr_assert_eq(lw__mailbox_task_complete(mb, 2, &r, &err), LW_OK);
  cr_assert_not(lw__mailbox_cancel_task(mb, 2, ident(1).dispatch_id), "late: nothing live");
  cr_assert_eq(atomic_load(&t->cancel_dispatch), ident(1).dispatch_id);
  lw_mb_identity_t id1 = ident(1);
  cr_assert_eq(consume_frame(mb, 2, &id1, &r, &err), LW_OK);
  post_take_run(mb, 2, 2, 2);
  cr_assert_neq(atomic_load(&t->cancel_dispatch), ident(2).dispatch_id,
                "the next task's post is not marked");
  cr_assert_eq(atomic_load(&t->started_ns), 0u, "complete zeroed the start; no post did");
  uint64_t g = lw__cancel_begin(&t->cancel);
  cr_assert(lw__mailbox_cancel_task(mb, 2, ident(2).dispatch_id));
  cr_assert_eq(atomic_load(&t->cancel_dispatch), ident(2).dispatch_id);
  cr_assert(lw__cancel_is_requested(&t->cancel, g));
  free(mb);
}
