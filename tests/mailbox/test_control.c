// tests/mailbox/test_control.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// the control frame: request / done / idle, malformed requests, truncated names, acks.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Control frame

Test(mailbox_control, request_done_idle_cycle_carries_the_request_and_the_ack,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_control_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = 1;
  p.command = LW_MB_CMD_REGISTER;
  p.control_id = 77;
  p.image_offset = 1024;
  p.image_bytes = 2048;
  p.n_params = 3;
  p.param_dirs[0] = 0;
  p.param_dirs[1] = 1;
  p.param_dirs[2] = 2;
  p.name = "vector_add";
  p.entry = "vector_add_entry";
  p.format = LW_IMAGE_OPENCL_C;
  p.build_options = "-DN=4 -cl-fast-relaxed-math";
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_OK, "%s", err.message);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_REQUEST);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 1u);

  lw_mb_control_taken_t t;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(t.command, LW_MB_CMD_REGISTER);
  cr_assert_eq(t.control_id, 77u);
  cr_assert_eq(t.image_offset, 1024u);
  cr_assert_eq(t.image_bytes, 2048u);
  cr_assert_eq(t.n_params, 3u);
  cr_assert_eq(t.param_dirs[2], 2);
  cr_assert_str_eq(t.name, "vector_add");
  cr_assert_str_eq(t.entry, "vector_add_entry");
  cr_assert_eq(t.format, (uint32_t)LW_IMAGE_OPENCL_C);
  cr_assert_str_eq(t.build_options, "-DN=4 -cl-fast-relaxed-math");

  uint32_t epoch = atomic_load(&mb->control.done_word.epoch);
  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = LW_OK;
  ack.async = true;
  ack.value = 5;
  cr_assert_eq(lw__mailbox_ack_control(mb, &ack, &err), LW_OK, "%s", err.message);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_DONE);
  cr_assert_neq(atomic_load(&mb->control.done_word.epoch), epoch, "done_word was woken");

  lw_mb_control_ack_t out;
  cr_assert_eq(lw__mailbox_consume_control(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.status, LW_OK);
  cr_assert(out.async);
  cr_assert_eq(out.value, 5u);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_IDLE);
  cr_assert_eq(lw__mailbox_consume_control(mb, &out, &err), LW_FAILED_PRECONDITION,
               "nothing to consume when IDLE");
  free(mb);
}

Test(mailbox_control, consume_while_request_says_not_done, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_control_post_t p = ping_post(1, 1);
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_OK);
  lw_mb_control_ack_t out;
  cr_assert_eq(lw__mailbox_consume_control(mb, &out, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "not done"), "%s", err.message);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_REQUEST);
  // A second post while one is pending is refused.
  lw_mb_control_post_t p2 = ping_post(2, 2);
  cr_assert_eq(lw__mailbox_post_control(mb, &p2, &err), LW_FAILED_PRECONDITION);
  cr_assert_eq(mb->control.seq, 1u);
  free(mb);
}

Test(mailbox_control, ack_without_a_request_is_rejected, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_control_ack_t ack = {.status = LW_OK, .value = 1};
  cr_assert_eq(lw__mailbox_ack_control(mb, &ack, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "control frame is IDLE"), "%s", err.message);
  cr_assert_eq(mb->control.ack_value, 0u);
  lw_mb_arena_t a = arena_view();
  lw_mb_control_taken_t t;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_FAILED_PRECONDITION);
  free(mb);
}

Test(mailbox_control, take_control_rejects_malformed_requests, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_control_taken_t t;
  lw_mb_control_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = 1;
  p.command = LW_MB_CMD_REGISTER;
  p.image_offset = 0;
  p.image_bytes = 16;
  p.name = "k";
  p.entry = "e";
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_OK);
  lw_mb_control_t *c = &mb->control;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);

  c->command = 99;  // forged by a broken parent
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "unknown command 99"), "%s", err.message);
  c->command = LW_MB_CMD_REGISTER;

  memset(c->name, 'n', LW_MB_NAME_BYTES);
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "name is not NUL-terminated"), "%s", err.message);
  c->name[0] = '\0';
  memset(c->entry, 'e', LW_MB_NAME_BYTES);
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "entry is not NUL-terminated"), "%s", err.message);
  c->entry[LW_MB_NAME_BYTES - 1] = '\0';  // the longest legal entry
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(t.entry), LW_MB_NAME_BYTES - 1u);

  c->n_params = 33;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "33 params"), "%s", err.message);
  c->n_params = 32;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK);

  c->image_bytes = 0;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT, "empty image");
  c->image_offset = ARENA_BYTES - 8;
  c->image_bytes = UINT64_MAX;  // offset + bytes overflows
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "REGISTER image"), "%s", err.message);
  c->image_offset = ARENA_BYTES + 1;
  c->image_bytes = 1;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  c->image_offset = ARENA_BYTES - 8;
  c->image_bytes = 8;  // exactly the last 8 bytes
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);

  c->format = LW_IMAGE_FATBIN;  // the last format
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  c->format = LW_IMAGE_FATBIN + 1;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "image format 8"), "%s", err.message);
  c->format = LW_IMAGE_SPIRV;
  memset(c->build_options, 'o', sizeof(c->build_options));
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "build options are not NUL-terminated"), "%s", err.message);
  c->build_options[sizeof(c->build_options) - 1] = '\0';  // the longest legal options
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(t.build_options), LW_MAX_BUILD_OPTIONS_BYTES - 1u);

  // The image range only matters for REGISTER.
  c->command = LW_MB_CMD_UNREGISTER;
  c->image_bytes = UINT64_MAX;
  cr_assert_eq(lw__mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  free(mb);
}

Test(mailbox_control, post_control_truncates_long_names_and_rejects_bad_requests,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  char longname[300];
  memset(longname, 'a', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  lw_mb_control_post_t p = ping_post(1, 1);
  p.command = (lw_mb_command_t)0;
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_INVALID_ARGUMENT);
  p.command = LW_MB_CMD_REGISTER_SUB;
  p.n_params = 33;
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_INVALID_ARGUMENT);
  p.n_params = 0;
  p.name = longname;
  p.entry = NULL;
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strnlen(mb->control.name, LW_MB_NAME_BYTES), LW_MB_NAME_BYTES - 1u);
  cr_assert_eq(mb->control.entry[0], '\0');
  free(mb);
}

Test(mailbox_control, acks_are_terminated_and_invalid_ack_statuses_are_rejected,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_control_post_t p = ping_post(1, 1);
  cr_assert_eq(lw__mailbox_post_control(mb, &p, &err), LW_OK);
  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = (lw_status_t)50;
  cr_assert_eq(lw__mailbox_ack_control(mb, &ack, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_REQUEST);
  ack.status = LW_NOT_FOUND;
  memset(ack.error.message, 'z', sizeof(ack.error.message));
  cr_assert_eq(lw__mailbox_ack_control(mb, &ack, &err), LW_OK, "%s", err.message);
  cr_assert_eq(mb->control.ack_error.message[LW_ERROR_MESSAGE_BYTES - 1], '\0');

  // A forged ack status is caught by the parent, and the frame stays DONE.
  mb->control.ack_status = -3;
  lw_mb_control_ack_t out;
  cr_assert_eq(lw__mailbox_consume_control(mb, &out, &err), LW_INTERNAL);
  cr_assert(has(&err, "control ack has status -3"), "%s", err.message);
  mb->control.ack_status = LW_OK;
  mb->control.ack_async = 2;
  cr_assert_eq(lw__mailbox_consume_control(mb, &out, &err), LW_INTERNAL);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_DONE);
  mb->control.ack_async = 0;
  mb->control.ack_status = LW_NOT_FOUND;
  memset(mb->control.ack_error.message, 'q', LW_ERROR_MESSAGE_BYTES);  // forged
  cr_assert_eq(lw__mailbox_consume_control(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(out.error.message), LW_ERROR_MESSAGE_BYTES - 1u);
  cr_assert_eq(out.status, LW_NOT_FOUND);
  free(mb);
}
