// tests/mailbox/test_seq.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// sequence numbers: posts are found in order across the control frame and the task frames, and
// stale or repeated numbers are protocol violations.
#include "mailbox_test_util.h"

// find_post's hint when the test does not guess a frame.
#define NO_HINT LW_MB_TASK_FRAMES

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

  cr_assert_eq(lw__mailbox_find_post(mb, 1, NO_HINT, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 3);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 3, &err), LW_OK);  // retired before seq 2
  cr_assert_eq(lw__mailbox_find_post(mb, 2, NO_HINT, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 0);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 0, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 3, NO_HINT, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(is_control);
  lw_mb_control_ack_t ack = {.status = LW_OK};
  cr_assert_eq(lw__mailbox_ack_control(mb, &ack, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 4, NO_HINT, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 2);
  cr_assert_eq(lw__mailbox_task_set_running(mb, 2, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 5, NO_HINT, &is_control, &frame, &err), LW_NOT_FOUND);
  free(mb);
}

Test(mailbox_seq, a_later_post_does_not_make_the_expected_one_visible, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  cr_assert_eq(lw__mailbox_find_post(mb, 1, NO_HINT, &is_control, &frame, &err), LW_NOT_FOUND);
  lw_mb_task_post_t p2 = task_post(2, 2);
  cr_assert_eq(lw__mailbox_post_task(mb, 1, &p2, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 1, NO_HINT, &is_control, &frame, &err), LW_NOT_FOUND,
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
  cr_assert_eq(lw__mailbox_find_post(mb, 5, NO_HINT, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "task frame 2 is TASK_READY with sequence number 3"), "%s", err.message);
  cr_assert(has(&err, "stale or out of order"), "%s", err.message);
  // The same when the post index's slot of 5 names that frame: the scan still reports it.
  atomic_store(&mb->post_index.frame[5], 2);
  cr_assert_eq(lw__mailbox_find_post(mb, 5, NO_HINT, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "task frame 2 is TASK_READY with sequence number 3"), "%s", err.message);
  free(mb);
}

Test(mailbox_seq, a_control_request_with_a_stale_sequence_number_is_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  lw_mb_control_post_t c = ping_post(2, 1);
  cr_assert_eq(lw__mailbox_post_control(mb, &c, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 3, NO_HINT, &is_control, &frame, &err), LW_INTERNAL);
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
  // The post index names the later frame; without it (a parent that did not index) the scan
  // sees both.
  atomic_store(&mb->post_index.frame[1], LW_MB_POST_NONE);
  cr_assert_eq(lw__mailbox_find_post(mb, 1, NO_HINT, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "posted twice"), "%s", err.message);
  free(mb);
}

// ---------------------------------------------------------------------------------------------
// The post index (the doorbell's post_frame slots)

Test(mailbox_seq, a_post_is_indexed_by_its_sequence_number, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_post_t p = task_post(LW_MB_POST_SLOTS + 3, 1);
  cr_assert_eq(lw__mailbox_post_task(mb, 7, &p, &err), LW_OK);
  lw_mb_control_post_t c = ping_post(LW_MB_POST_SLOTS + 4, 9);
  cr_assert_eq(lw__mailbox_post_control(mb, &c, &err), LW_OK);
  cr_assert_eq(atomic_load(&mb->post_index.frame[3]), 7);
  cr_assert_eq(atomic_load(&mb->post_index.frame[4]), LW_MB_POST_CONTROL);
  cr_assert_eq(atomic_load(&mb->post_index.frame[5]), LW_MB_POST_NONE);
  free(mb);
}

// A slot that names the wrong frame, a frame out of range, the control frame without a request
// or a frame holding another number: the lookup scans and still finds the post, or says why not.
Test(mailbox_seq, a_slot_that_does_not_lead_to_the_post_falls_back_to_the_scan, .timeout = 10) {
  static const uint8_t bad[] = {0, 5, LW_MB_TASK_FRAMES, 0x80, LW_MB_POST_CONTROL, LW_MB_POST_NONE};
  for (size_t i = 0; i < sizeof(bad); ++i) {
    lw_mailbox_t *mb = mb_new();
    lw_error_t err;
    bool is_control = true;
    uint32_t frame = 99;
    lw_mb_task_post_t other = task_post(9, 1), p = task_post(2, 2);
    cr_assert_eq(lw__mailbox_post_task(mb, 0, &other, &err), LW_OK);  // frame 0 holds post 9
    cr_assert_eq(lw__mailbox_post_task(mb, 3, &p, &err), LW_OK);
    atomic_store(&mb->post_index.frame[2], bad[i]);
    cr_assert_eq(lw__mailbox_find_post(mb, 2, NO_HINT, &is_control, &frame, &err), LW_OK,
                 "slot %u: %s", bad[i], err.message);
    cr_assert(!is_control && frame == 3, "slot %u: found %s frame %u", bad[i],
              is_control ? "control" : "task", frame);
    free(mb);
  }
}

Test(mailbox_seq, an_indexed_post_is_taken_without_looking_at_the_other_frames, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control = true;
  uint32_t frame = 99;
  lw_mb_task_post_t stale = task_post(1, 1), p = task_post(4, 2);
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &stale, &err), LW_OK);  // a scan would object
  cr_assert_eq(lw__mailbox_post_task(mb, 6, &p, &err), LW_OK);
  cr_assert_eq(lw__mailbox_find_post(mb, 4, NO_HINT, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 6);
  free(mb);
}

Test(mailbox_seq, post_in_frame_is_true_only_for_a_ready_frame_holding_that_post, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_post_t p1 = task_post(1, 1);
  cr_assert(!lw__mailbox_post_in_frame(mb, 1, 5), "an idle frame holds no post");
  cr_assert_eq(lw__mailbox_post_task(mb, 5, &p1, &err), LW_OK);
  // Without the doorbell: the frame alone answers (the post index says nothing here).
  atomic_store(&mb->post_index.frame[1], 9);
  atomic_store(&mb->doorbell.post_seq, 0);
  cr_assert(lw__mailbox_post_in_frame(mb, 1, 5));
  cr_assert(!lw__mailbox_post_in_frame(mb, 2, 5), "another number");
  cr_assert(!lw__mailbox_post_in_frame(mb, 1, 4), "another frame");
  cr_assert(!lw__mailbox_post_in_frame(mb, 1, LW_MB_TASK_FRAMES), "out of range");
  cr_assert(!lw__mailbox_post_in_frame(mb, 1, UINT32_MAX), "out of range");
  cr_assert_eq(lw__mailbox_task_set_running(mb, 5, &err), LW_OK);
  cr_assert(!lw__mailbox_post_in_frame(mb, 1, 5), "taken: RUNNING");
  free(mb);
}

Test(mailbox_seq, find_post_takes_a_hinted_frame_that_holds_the_post_and_looks_further_otherwise,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame = 0;
  lw_mb_task_post_t p1 = task_post(1, 1), p2 = task_post(2, 2);
  cr_assert_eq(lw__mailbox_post_task(mb, 5, &p1, &err), LW_OK);
  cr_assert_eq(lw__mailbox_post_task(mb, 6, &p2, &err), LW_OK);
  // The hint holds post 1: taken there, even with the post index broken.
  atomic_store(&mb->post_index.frame[1], 9);
  cr_assert_eq(lw__mailbox_find_post(mb, 1, 5, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 5);
  // A hint at an idle frame, at a frame holding a later post, or out of range: the scan
  // finds post 1 (the index still points elsewhere).
  const uint32_t misses[] = {7, 6, LW_MB_TASK_FRAMES + 3};
  for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); ++i) {
    frame = 0;
    cr_assert_eq(lw__mailbox_find_post(mb, 1, misses[i], &is_control, &frame, &err), LW_OK,
                 "hint %u: %s", misses[i], err.message);
    cr_assert(!is_control && frame == 5, "hint %u found frame %u", misses[i], frame);
  }
  // With the index mended, a wrong hint falls to the index.
  atomic_store(&mb->post_index.frame[1], 5);
  cr_assert_eq(lw__mailbox_find_post(mb, 1, 6, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert_eq(frame, 5u);
  // Post 1 taken; a hint at a frame holding a stale number is not taken, and the scan
  // reports that frame.
  cr_assert_eq(lw__mailbox_task_set_running(mb, 5, &err), LW_OK);
  mb->task[6].seq = 0;
  cr_assert_eq(lw__mailbox_find_post(mb, 2, 6, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "task frame 6 is TASK_READY with sequence number 0"), "%s", err.message);
  free(mb);
}
