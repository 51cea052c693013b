// tests/mailbox/test_layout.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// the mailbox layout (sizes and offsets of docs/protocol.md) and its header: initialize, validate.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Layout and header

Test(mailbox_layout, sizes_and_offsets_match_the_protocol_document, .timeout = 10) {
  // The numbers docs/protocol.md states, for D = 128 and R = 256.
  cr_assert_eq(LW_MB_TASK_FRAMES, 128u);
  cr_assert_eq(LW_MB_RING_ENTRIES, 256u);
  cr_assert_eq(LW_MB_POST_SLOTS, 256u);
  cr_assert_eq(sizeof(lw_mb_header_t), 512u);
  cr_assert_eq(sizeof(lw_mb_doorbell_t), 64u);
  cr_assert_eq(sizeof(lw_mb_parent_line_t), 64u);
  cr_assert_eq(sizeof(lw_mb_control_t), 1024u);
  cr_assert_eq(sizeof(lw_mb_task_t), 1024u);
  cr_assert_eq(sizeof(lw_mb_completion_t), 384u);
  cr_assert_eq(sizeof(lw_mb_args_t), 448u);
  cr_assert_eq(offsetof(lw_mb_args_t, launch), 8u);
  cr_assert_eq(offsetof(lw_mb_args_t, tensor), 64u);
  cr_assert_eq(offsetof(lw_mb_args_t, scalar), 320u);
  cr_assert_eq(offsetof(lw_mailbox_t, doorbell), 512u);
  cr_assert_eq(offsetof(lw_mailbox_t, parent), 576u);
  cr_assert_eq(offsetof(lw_mailbox_t, post_index), 640u);
  cr_assert_eq(offsetof(lw_mailbox_t, control), 896u);
  cr_assert_eq(offsetof(lw_mailbox_t, task), 1920u);
  cr_assert_eq(offsetof(lw_mailbox_t, ring_head), 132992u);
  cr_assert_eq(offsetof(lw_mailbox_t, ring_tail), 133056u);
  cr_assert_eq(offsetof(lw_mailbox_t, ring), 133120u);
  cr_assert_eq(sizeof(lw_mailbox_t), 231424u, "total size is %zu", sizeof(lw_mailbox_t));
  // Field offsets the document lists.
  cr_assert_eq(offsetof(lw_mb_header_t, arena_bytes), 32u);
  cr_assert_eq(offsetof(lw_mb_header_t, generation), 56u);
  cr_assert_eq(offsetof(lw_mb_header_t, init_word), 64u);
  cr_assert_eq(offsetof(lw_mb_header_t, init_error), 240u);
  cr_assert_eq(offsetof(lw_mb_control_t, name), 88u);
  cr_assert_eq(offsetof(lw_mb_control_t, ack_status), 344u);
  cr_assert_eq(offsetof(lw_mb_control_t, done_word), 360u);
  cr_assert_eq(offsetof(lw_mb_control_t, ack_error), 752u);
  cr_assert_eq(offsetof(lw_mb_task_t, cancel), 64u);
  cr_assert_eq(offsetof(lw_mb_task_t, args), 128u);
  cr_assert_eq(offsetof(lw_mb_task_t, result_status), 576u);
  cr_assert_eq(offsetof(lw_mb_task_t, cancel_dispatch), 72u);
  cr_assert_eq(offsetof(lw_mb_task_t, started_ns), 80u);
  cr_assert_eq(offsetof(lw_mb_task_t, result_error), 600u);
  cr_assert_eq(offsetof(lw_mb_completion_t, mark), 52u);
  cr_assert_eq(offsetof(lw_mb_completion_t, error), 112u);
  cr_assert_eq(LW_MB_TASK_COMPLETION_BYTES, 64u);
  cr_assert_eq(offsetof(lw_mb_ring_cursor_t, tail_seen), 16u);
}

Test(mailbox_header, initialize_gives_a_valid_header_and_idle_frames, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  cr_assert_eq(lw__mailbox_validate_header(mb, &err), LW_OK, "%s", err.message);
  cr_assert_eq(mb->header.child_index, 3u);
  cr_assert_eq(mb->header.arena_bytes, ARENA_BYTES);
  cr_assert_eq(atomic_load(&mb->header.numa_node), -1);
  cr_assert_eq(atomic_load(&mb->header.child_pid), 0);
  cr_assert_eq(atomic_load(&mb->header.init_state), (uint32_t)LW_MB_INIT_NONE);
  cr_assert_eq(atomic_load(&mb->header.shutdown), 0u);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_IDLE);
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    cr_assert_eq(frame_state(mb, i), (uint32_t)LW_MB_TASK_IDLE);
    cr_assert_eq(atomic_load(&mb->task[i].cancel), 0u);
  }
  cr_assert_eq(atomic_load(&mb->ring_head.value), 0u);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 0u);
  free(mb);
}

Test(mailbox_header, validate_names_the_bad_field_and_its_value, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  struct {
    uint32_t *field;
    uint32_t bad;
    const char *name;
  } cases[] = {
      {&mb->header.magic, 0x12345678u, "magic"},
      {&mb->header.version, 99u, "version is 99"},
      {&mb->header.total_bytes, 100u, "total_bytes is 100"},
      {&mb->header.n_task_frames, 2u, "n_task_frames is 2"},
      {&mb->header.ring_entries, 63u, "ring_entries is 63"},
      {&mb->header.child_kind, 7u, "child_kind is 7"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    uint32_t saved = *cases[i].field;
    *cases[i].field = cases[i].bad;
    cr_assert_eq(lw__mailbox_validate_header(mb, &err), LW_INVALID_ARGUMENT, "case %zu", i);
    cr_assert(has(&err, cases[i].name), "case %zu: message '%s' lacks '%s'", i, err.message,
              cases[i].name);
    *cases[i].field = saved;
  }
  cr_assert_eq(lw__mailbox_validate_header(mb, &err), LW_OK);
  mb->header.child_kind = LW_MB_CHILD_SUB;
  cr_assert_eq(lw__mailbox_validate_header(mb, &err), LW_OK);
  free(mb);
}
