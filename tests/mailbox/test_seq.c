// tests/mailbox/test_seq.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// sequence numbers: posts are found in order across the control frame and the task frames, and
// stale or repeated numbers are protocol violations.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Sequence numbers

Test(mailbox_seq, find_post_returns_posts_in_sequence_order_across_control_and_tasks,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  // Posted in frame order 3, 0, control, 2: the child must apply them by seq.
  lw_mb_task_post_t p1 = task_post(1, 1), p2 = task_post(2, 2), p4 = task_post(4, 4);
  lw_mb_control_post_t c3 = ping_post(3, 33);
  cr_assert_eq(lw__mailbox_post_task(mb, 3, &p1, &err), LW_OK);
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &p2, &err), LW_OK);
  cr_assert_eq(lw__mailbox_post_control(mb, &c3, &err), LW_OK);
  cr_assert_eq(lw__mailbox_post_task(mb, 2, &p4, &err), LW_OK);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 4u);

  cr_assert_eq(lw__mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 3);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 3, &err), LW_OK);  // retired before seq 2
  cr_assert_eq(lw__mailbox_find_post(mb, 2, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 0);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 0, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 3, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(is_control);
  lw_mb_control_ack_t ack = {.status = LW_OK};
  cr_assert_eq(lw__mailbox_ack_control(mb, &ack, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 4, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 2);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 2, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 5, &is_control, &frame, &err), LW_NOT_FOUND);
  free(mb);
}

Test(mailbox_seq, a_later_post_does_not_make_the_expected_one_visible, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  cr_assert_eq(lw__mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_NOT_FOUND);
  lw_mb_task_post_t p2 = task_post(2, 2);
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &p2, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_NOT_FOUND,
               "seq 2 is ahead of 1: wait for 1");
  cr_assert(has(&err, "post 1 is not visible"), "%s", err.message);
  free(mb);
}

Test(mailbox_seq, a_ready_frame_with_a_stale_sequence_number_is_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  lw_mb_task_post_t p = task_post(3, 1);
  cr_assert_eq(lw__mailbox_post_task(mb, 2, &p, &err), LW_OK);
  // The child already applied 1..4; a READY frame numbered 3 is out of order.
  cr_assert_eq(lw__mailbox_find_post(mb, 5, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "task frame 2 is TASK_READY with sequence number 3"), "%s", err.message);
  cr_assert(has(&err, "stale or out of order"), "%s", err.message);
  free(mb);
}

Test(mailbox_seq, a_control_request_with_a_stale_sequence_number_is_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  lw_mb_control_post_t c = ping_post(2, 1);
  cr_assert_eq(lw__mailbox_post_control(mb, &c, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 3, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "control request has sequence number 2"), "%s", err.message);
  free(mb);
}

Test(mailbox_seq, a_sequence_number_posted_twice_is_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  lw_mb_task_post_t a = task_post(1, 1), b = task_post(1, 2);
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &a, &err), LW_OK);
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &b, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "posted twice"), "%s", err.message);
  free(mb);
}
