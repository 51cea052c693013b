// tests/mailbox/test_mailbox.c — the mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// layout, state machines, sequence order, identity checks, args bounds, the completion ring,
// cancel words, and one parent/child round trip across fork.
//
// Only the Criterion subset that tests/lanes/tsan_shim supports is used (Test with .timeout,
// cr_assert* with literal messages), so the same file runs under TSan. Helper threads and
// forked children never assert: they record what they saw and the test's thread asserts.
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/cancel.h"
#include "lanes/sys.h"
#include "lanes/wait.h"
#include "mailbox/mailbox.h"
#include "test_util.h"

#define ARENA_BYTES 4096u

// ---------------------------------------------------------------------------------------------
// Helpers

static lw_mailbox_t *mb_new(void) {
  lw_mailbox_t *mb = aligned_alloc(64, sizeof(lw_mailbox_t));
  cr_assert_not_null(mb);
  lw_mailbox_initialize(mb, LW_MB_CHILD_CHIP, 3, ARENA_BYTES);
  return mb;
}

static _Alignas(64) uint8_t g_arena[ARENA_BYTES];

static lw_mb_arena_t arena_view(void) { return (lw_mb_arena_t){g_arena, ARENA_BYTES}; }

static lw_mb_identity_t ident(uint64_t n) {
  return (lw_mb_identity_t){.run_id = 100 + n, .task_id = 200 + n, .dispatch_id = 300 + n,
                            .generation = 7};
}

static lw_mb_task_post_t task_post(uint64_t seq, uint64_t n) {
  lw_mb_task_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = seq;
  p.identity = ident(n);
  p.kind = LW_MB_TASK_KERNEL;
  p.callable = 42;
  p.timeout_ns = 1000;
  p.args.n_tensors = 1;
  p.args.tensor[0].offset = 64;
  p.args.tensor[0].bytes = 128;
  p.args.n_scalars = 2;
  p.args.scalar[0] = n;
  p.args.scalar[1] = 0xabcdu;
  return p;
}

static lw_mb_task_result_t result_of(lw_status_t st, const char *msg) {
  lw_mb_task_result_t r;
  memset(&r, 0, sizeof(r));
  r.status = st;
  r.kernel_rc = st == LW_OK ? 0 : -5;
  r.kernel_ns = 1234;
  r.queue_ns = 56;
  r.error.code = st;
  snprintf(r.error.message, sizeof(r.error.message), "%s", msg);
  return r;
}

static uint32_t frame_state(const lw_mailbox_t *mb, uint32_t frame) {
  return atomic_load(&mb->task[frame].state);
}

static bool has(const lw_error_t *e, const char *needle) {
  return strstr(e->message, needle) != NULL;
}

// Posts (seq, n) on frame, takes it as the child and marks it RUNNING.
static void post_take_run(lw_mailbox_t *mb, uint32_t frame, uint64_t seq, uint64_t n) {
  lw_error_t err;
  lw_mb_task_post_t p = task_post(seq, n);
  cr_assert_eq(lw_mailbox_post_task(mb, frame, &p, &err), LW_OK, "post: %s", err.message);
  lw_mb_arena_t a = arena_view();
  lw_mb_task_taken_t taken;
  cr_assert_eq(lw_mailbox_take_task(mb, frame, &a, &taken, &err), LW_OK, "take: %s",
               err.message);
  cr_assert_eq(lw_mailbox_task_set_running(mb, frame, &err), LW_OK, "run: %s", err.message);
}

static void push_ok(lw_mailbox_t *mb, const lw_mb_completion_t *c) {
  bool wake = true;
  lw_error_t err;
  cr_assert_eq(lw_mailbox_push_completion(mb, c, LW_DEADLINE_NEVER, &wake, &err), LW_OK,
               "push: %s", err.message);
}

static lw_mb_completion_t control_completion(uint64_t id, uint64_t value) {
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_CONTROL;
  c.control_id = id;
  c.status = LW_OK;
  c.value = value;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Layout and header

Test(mailbox_layout, sizes_and_offsets_match_the_protocol_document, .timeout = 10) {
  // The numbers docs/protocol.md states, for D = 4 and R = 64.
  cr_assert_eq(LW_MB_TASK_FRAMES, 4u);
  cr_assert_eq(LW_MB_RING_ENTRIES, 64u);
  cr_assert_eq(sizeof(lw_mb_header_t), 512u);
  cr_assert_eq(sizeof(lw_mb_doorbell_t), 64u);
  cr_assert_eq(sizeof(lw_mb_parent_line_t), 64u);
  cr_assert_eq(sizeof(lw_mb_control_t), 1024u);
  cr_assert_eq(sizeof(lw_mb_task_t), 1024u);
  cr_assert_eq(sizeof(lw_mb_completion_t), 384u);
  cr_assert_eq(sizeof(lw_mb_args_t), 392u);
  cr_assert_eq(offsetof(lw_mailbox_t, doorbell), 512u);
  cr_assert_eq(offsetof(lw_mailbox_t, parent), 576u);
  cr_assert_eq(offsetof(lw_mailbox_t, control), 640u);
  cr_assert_eq(offsetof(lw_mailbox_t, task), 1664u);
  cr_assert_eq(offsetof(lw_mailbox_t, ring_head), 5760u);
  cr_assert_eq(offsetof(lw_mailbox_t, ring_tail), 5824u);
  cr_assert_eq(offsetof(lw_mailbox_t, ring), 5888u);
  cr_assert_eq(sizeof(lw_mailbox_t), 30464u, "total size is %zu", sizeof(lw_mailbox_t));
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
  cr_assert_eq(offsetof(lw_mb_task_t, result_status), 520u);
  cr_assert_eq(offsetof(lw_mb_task_t, result_error), 752u);
  cr_assert_eq(offsetof(lw_mb_completion_t, error), 112u);
}

Test(mailbox_header, initialize_gives_a_valid_header_and_idle_frames, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  cr_assert_eq(lw_mailbox_validate_header(mb, &err), LW_OK, "%s", err.message);
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
      {&mb->header.version, 9u, "version is 9"},
      {&mb->header.total_bytes, 100u, "total_bytes is 100"},
      {&mb->header.n_task_frames, 2u, "n_task_frames is 2"},
      {&mb->header.ring_entries, 63u, "ring_entries is 63"},
      {&mb->header.child_kind, 7u, "child_kind is 7"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    uint32_t saved = *cases[i].field;
    *cases[i].field = cases[i].bad;
    cr_assert_eq(lw_mailbox_validate_header(mb, &err), LW_INVALID_ARGUMENT, "case %zu", i);
    cr_assert(has(&err, cases[i].name), "case %zu: message '%s' lacks '%s'", i, err.message,
              cases[i].name);
    *cases[i].field = saved;
  }
  cr_assert_eq(lw_mailbox_validate_header(mb, &err), LW_OK);
  mb->header.child_kind = LW_MB_CHILD_SUB;
  cr_assert_eq(lw_mailbox_validate_header(mb, &err), LW_OK);
  free(mb);
}

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
      cr_assert_eq(lw_mailbox_task_transition_legal(from, to), want, "%s -> %s",
                   lw_mailbox_task_state_name(from), lw_mailbox_task_state_name(to));
    }
  }
  // Named illegal ones, for the reader.
  cr_assert_not(lw_mailbox_task_transition_legal(I, Ru));
  cr_assert_not(lw_mailbox_task_transition_legal(D, Ru));
  cr_assert_not(lw_mailbox_task_transition_legal(Ru, Rd));
  cr_assert_not(lw_mailbox_task_transition_legal(Rd, I));
  cr_assert_not(lw_mailbox_task_transition_legal(I, D));
  cr_assert_not(lw_mailbox_task_transition_legal(D, F));
  cr_assert_not(lw_mailbox_task_transition_legal((lw_mb_task_state_t)9, I));
  cr_assert_str_eq(lw_mailbox_task_state_name(9), "UNKNOWN");
}

// The whole life of one task, checking the state after each legal step.
static void walk_one_task(lw_status_t st, lw_mb_task_state_t want_final) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  const uint32_t frame = 2;

  lw_mb_task_post_t p = task_post(1, 5);
  cr_assert_eq(lw_mailbox_post_task(mb, frame, &p, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_READY);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 1u);
  cr_assert(lw_mailbox_task_transition_legal(LW_MB_TASK_IDLE, LW_MB_TASK_READY));

  bool is_control = true;
  uint32_t found = 99;
  cr_assert_eq(lw_mailbox_find_post(mb, 1, &is_control, &found, &err), LW_OK, "%s",
               err.message);
  cr_assert_not(is_control);
  cr_assert_eq(found, frame);

  lw_mb_task_taken_t t;
  cr_assert_eq(lw_mailbox_take_task(mb, frame, &a, &t, &err), LW_OK, "%s", err.message);
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

  cr_assert_eq(lw_mailbox_task_set_running(mb, frame, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_RUNNING);
  cr_assert(lw_mailbox_task_transition_legal(LW_MB_TASK_READY, LW_MB_TASK_RUNNING));

  lw_mb_task_result_t r = result_of(st, st == LW_OK ? "" : "kernel said no");
  cr_assert_eq(lw_mailbox_task_complete(mb, frame, &r, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)want_final, "state %s",
               lw_mailbox_task_state_name(frame_state(mb, frame)));
  cr_assert(lw_mailbox_task_transition_legal(LW_MB_TASK_RUNNING, want_final));

  lw_mb_task_result_t out;
  cr_assert_eq(lw_mailbox_consume_task(mb, frame, &p.identity, &out, &err), LW_OK, "%s",
               err.message);
  cr_assert_eq(out.status, st);
  cr_assert_eq(out.final_state, want_final);
  cr_assert_eq(out.kernel_rc, r.kernel_rc);
  cr_assert_eq(out.kernel_ns, 1234u);
  cr_assert_eq(out.queue_ns, 56u);
  cr_assert_eq(out.error.code, st);
  cr_assert_str_eq(out.error.message, r.error.message);
  cr_assert_eq(frame_state(mb, frame), (uint32_t)LW_MB_TASK_IDLE);
  cr_assert(lw_mailbox_task_transition_legal(want_final, LW_MB_TASK_IDLE));

  // The frame is reusable, and the next post starts from a clean result.
  lw_mb_task_post_t p2 = task_post(2, 6);
  cr_assert_eq(lw_mailbox_post_task(mb, frame, &p2, &err), LW_OK, "%s", err.message);
  cr_assert_eq(mb->task[frame].result_status, LW_OK);
  cr_assert_eq(mb->task[frame].result_error.message[0], '\0');
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
  cr_assert_eq(lw_mailbox_post_task(mb, 0, &p, &err), LW_OK);
  lw_mb_task_result_t r = result_of(LW_INVALID_ARGUMENT, "bad args");
  cr_assert_eq(lw_mailbox_task_complete(mb, 0, &r, &err), LW_OK, "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_FAILED);
  lw_mb_task_result_t out;
  cr_assert_eq(lw_mailbox_consume_task(mb, 0, &p.identity, &out, &err), LW_OK);
  cr_assert_eq(out.status, LW_INVALID_ARGUMENT);
  free(mb);
}

Test(mailbox_task, post_to_a_busy_frame_is_rejected_and_leaves_it_intact, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  post_take_run(mb, 1, 1, 1);
  lw_mb_task_post_t p = task_post(2, 2);
  cr_assert_eq(lw_mailbox_post_task(mb, 1, &p, &err), LW_FAILED_PRECONDITION);
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
  cr_assert_eq(lw_mailbox_task_set_running(mb, 0, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "task frame 0 is IDLE"), "%s", err.message);
  cr_assert(has(&err, "expected TASK_READY"), "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_IDLE);
  // And twice in a row: the second finds RUNNING.
  post_take_run(mb, 0, 1, 1);
  cr_assert_eq(lw_mailbox_task_set_running(mb, 0, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "TASK_RUNNING"), "%s", err.message);
  free(mb);
}

Test(mailbox_task, complete_on_an_idle_frame_is_rejected_and_writes_nothing, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_result_t r = result_of(LW_TASK_FAILED, "late");
  cr_assert_eq(lw_mailbox_task_complete(mb, 0, &r, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "task frame 0 is IDLE"), "%s", err.message);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_IDLE);
  cr_assert_eq(mb->task[0].result_status, 0);
  cr_assert_eq(mb->task[0].result_error.message[0], '\0');
  // A completed frame cannot be completed again either.
  post_take_run(mb, 0, 1, 1);
  lw_mb_task_result_t ok = result_of(LW_OK, "");
  cr_assert_eq(lw_mailbox_task_complete(mb, 0, &ok, &err), LW_OK);
  cr_assert_eq(lw_mailbox_task_complete(mb, 0, &r, &err), LW_FAILED_PRECONDITION);
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_DONE);
  cr_assert_eq(mb->task[0].result_status, LW_OK);
  // An invalid status is refused before anything is written.
  lw_mb_task_result_t bad = result_of((lw_status_t)77, "");
  post_take_run(mb, 1, 2, 2);
  cr_assert_eq(lw_mailbox_task_complete(mb, 1, &bad, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_RUNNING);
  free(mb);
}

Test(mailbox_task, consume_of_a_running_frame_is_rejected, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_task_result_t out;
  lw_mb_identity_t id = ident(1);
  cr_assert_eq(lw_mailbox_consume_task(mb, 0, &id, &out, &err), LW_FAILED_PRECONDITION,
               "consume of an IDLE frame");
  post_take_run(mb, 0, 1, 1);
  cr_assert_eq(lw_mailbox_consume_task(mb, 0, &id, &out, &err), LW_FAILED_PRECONDITION);
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
  cr_assert_eq(lw_mailbox_post_task(mb, bad, &p, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "task frame 4 out of range"), "%s", err.message);
  cr_assert_eq(lw_mailbox_take_task(mb, bad, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_mailbox_task_set_running(mb, bad, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_mailbox_task_complete(mb, bad, &r, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_mailbox_consume_task(mb, bad, &id, &r, &err), LW_INVALID_ARGUMENT);
  cr_assert_not(lw_mailbox_cancel_task(mb, bad));
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
  lw_status_t got[] = {lw_mailbox_post_task(mb, 2, &p, &err), LW_OK, LW_OK};
  char msgs[3][LW_ERROR_MESSAGE_BYTES];
  snprintf(msgs[0], sizeof(msgs[0]), "%s", err.message);
  got[1] = lw_mailbox_pop_completion(mb, &c, &err);
  snprintf(msgs[1], sizeof(msgs[1]), "%s", err.message);
  got[2] = lw_mailbox_consume_control(mb, &ack, &err);
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
  post_take_run(mb, 1, 1, 4);
  lw_mb_task_result_t r = result_of(LW_OK, "");
  cr_assert_eq(lw_mailbox_task_complete(mb, 1, &r, &err), LW_OK);
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
    cr_assert_eq(lw_mailbox_consume_task(mb, 1, &want, &out, &err), LW_INTERNAL, "field %d",
                 field);
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
  cr_assert_eq(lw_mailbox_consume_task(mb, 1, &id, &out, &err), LW_OK, "%s", err.message);
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
    cr_assert_eq(lw_mailbox_consume_task(mb, 0, &id, &out, &err), LW_INTERNAL, "case %zu", i);
    cr_assert(has(&err, "result status"), "%s", err.message);
    cr_assert_eq(frame_state(mb, 0), bad[i].state, "case %zu: frame left as it was", i);
  }
  free(mb);
}

Test(mailbox_task, consume_terminates_an_unterminated_error_message, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  post_take_run(mb, 0, 1, 1);
  lw_mb_task_result_t r = result_of(LW_TASK_FAILED, "");
  cr_assert_eq(lw_mailbox_task_complete(mb, 0, &r, &err), LW_OK);
  memset(mb->task[0].result_error.message, 'x', LW_ERROR_MESSAGE_BYTES);  // forged
  mb->task[0].result_error.code = (lw_status_t)999;
  lw_mb_identity_t id = ident(1);
  lw_mb_task_result_t out;
  cr_assert_eq(lw_mailbox_consume_task(mb, 0, &id, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(out.error.message), LW_ERROR_MESSAGE_BYTES - 1u);
  cr_assert_eq(out.error.code, LW_TASK_FAILED, "the code follows the validated status");
  free(mb);
}

Test(mailbox_task, take_task_rejects_an_unknown_kind_and_bad_args, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_task_taken_t t;
  lw_mb_task_post_t p = task_post(1, 1);
  cr_assert_eq(lw_mailbox_post_task(mb, 0, &p, &err), LW_OK);
  mb->task[0].kind = 9;  // forged
  cr_assert_eq(lw_mailbox_take_task(mb, 0, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "unknown kind 9"), "%s", err.message);
  mb->task[0].kind = LW_MB_TASK_SUB;
  mb->task[0].args.tensor[0].offset = ARENA_BYTES;  // forged: 128 bytes past the end
  cr_assert_eq(lw_mailbox_take_task(mb, 0, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "outside"), "%s", err.message);
  cr_assert_eq(err.task_id, 201u, "the error names the task");
  // The post itself refuses an unknown kind and oversize counts.
  p.kind = (lw_mb_task_kind_t)0;
  cr_assert_eq(lw_mailbox_post_task(mb, 1, &p, &err), LW_INVALID_ARGUMENT);
  p.kind = LW_MB_TASK_KERNEL;
  p.args.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw_mailbox_post_task(mb, 1, &p, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_IDLE);
  free(mb);
}

// ---------------------------------------------------------------------------------------------
// Sequence numbers

static lw_mb_control_post_t ping_post(uint64_t seq, uint64_t id) {
  lw_mb_control_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = seq;
  p.command = LW_MB_CMD_PING;
  p.control_id = id;
  return p;
}

Test(mailbox_seq, find_post_returns_posts_in_sequence_order_across_control_and_tasks,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  // Posted in frame order 3, 0, control, 2: the child must apply them by seq.
  lw_mb_task_post_t p1 = task_post(1, 1), p2 = task_post(2, 2), p4 = task_post(4, 4);
  lw_mb_control_post_t c3 = ping_post(3, 33);
  cr_assert_eq(lw_mailbox_post_task(mb, 3, &p1, &err), LW_OK);
  cr_assert_eq(lw_mailbox_post_task(mb, 0, &p2, &err), LW_OK);
  cr_assert_eq(lw_mailbox_post_control(mb, &c3, &err), LW_OK);
  cr_assert_eq(lw_mailbox_post_task(mb, 2, &p4, &err), LW_OK);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 4u);

  cr_assert_eq(lw_mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 3);
  cr_assert_eq(lw_mailbox_task_set_running(mb, 3, &err), LW_OK);  // retired before seq 2
  cr_assert_eq(lw_mailbox_find_post(mb, 2, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 0);
  cr_assert_eq(lw_mailbox_task_set_running(mb, 0, &err), LW_OK);
  cr_assert_eq(lw_mailbox_find_post(mb, 3, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(is_control);
  lw_mb_control_ack_t ack = {.status = LW_OK};
  cr_assert_eq(lw_mailbox_ack_control(mb, &ack, &err), LW_OK);
  cr_assert_eq(lw_mailbox_find_post(mb, 4, &is_control, &frame, &err), LW_OK, "%s",
               err.message);
  cr_assert(!is_control && frame == 2);
  cr_assert_eq(lw_mailbox_task_set_running(mb, 2, &err), LW_OK);
  cr_assert_eq(lw_mailbox_find_post(mb, 5, &is_control, &frame, &err), LW_NOT_FOUND);
  free(mb);
}

Test(mailbox_seq, a_later_post_does_not_make_the_expected_one_visible, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  cr_assert_eq(lw_mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_NOT_FOUND);
  lw_mb_task_post_t p2 = task_post(2, 2);
  cr_assert_eq(lw_mailbox_post_task(mb, 1, &p2, &err), LW_OK);
  cr_assert_eq(lw_mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_NOT_FOUND,
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
  cr_assert_eq(lw_mailbox_post_task(mb, 2, &p, &err), LW_OK);
  // The child already applied 1..4; a READY frame numbered 3 is out of order.
  cr_assert_eq(lw_mailbox_find_post(mb, 5, &is_control, &frame, &err), LW_INTERNAL);
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
  cr_assert_eq(lw_mailbox_post_control(mb, &c, &err), LW_OK);
  cr_assert_eq(lw_mailbox_find_post(mb, 3, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "control request has sequence number 2"), "%s", err.message);
  free(mb);
}

Test(mailbox_seq, a_sequence_number_posted_twice_is_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  bool is_control;
  uint32_t frame;
  lw_mb_task_post_t a = task_post(1, 1), b = task_post(1, 2);
  cr_assert_eq(lw_mailbox_post_task(mb, 0, &a, &err), LW_OK);
  cr_assert_eq(lw_mailbox_post_task(mb, 1, &b, &err), LW_OK);
  cr_assert_eq(lw_mailbox_find_post(mb, 1, &is_control, &frame, &err), LW_INTERNAL);
  cr_assert(has(&err, "posted twice"), "%s", err.message);
  free(mb);
}

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
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_OK, "%s", err.message);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_REQUEST);
  cr_assert_eq(atomic_load(&mb->doorbell.post_seq), 1u);

  lw_mb_control_taken_t t;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(t.command, LW_MB_CMD_REGISTER);
  cr_assert_eq(t.control_id, 77u);
  cr_assert_eq(t.image_offset, 1024u);
  cr_assert_eq(t.image_bytes, 2048u);
  cr_assert_eq(t.n_params, 3u);
  cr_assert_eq(t.param_dirs[2], 2);
  cr_assert_str_eq(t.name, "vector_add");
  cr_assert_str_eq(t.entry, "vector_add_entry");

  uint32_t epoch = atomic_load(&mb->control.done_word.epoch);
  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = LW_OK;
  ack.async = true;
  ack.value = 5;
  cr_assert_eq(lw_mailbox_ack_control(mb, &ack, &err), LW_OK, "%s", err.message);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_DONE);
  cr_assert_neq(atomic_load(&mb->control.done_word.epoch), epoch, "done_word was woken");

  lw_mb_control_ack_t out;
  cr_assert_eq(lw_mailbox_consume_control(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.status, LW_OK);
  cr_assert(out.async);
  cr_assert_eq(out.value, 5u);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_IDLE);
  cr_assert_eq(lw_mailbox_consume_control(mb, &out, &err), LW_FAILED_PRECONDITION,
               "nothing to consume when IDLE");
  free(mb);
}

Test(mailbox_control, consume_while_request_says_not_done, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_control_post_t p = ping_post(1, 1);
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_OK);
  lw_mb_control_ack_t out;
  cr_assert_eq(lw_mailbox_consume_control(mb, &out, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "not done"), "%s", err.message);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_REQUEST);
  // A second post while one is pending is refused.
  lw_mb_control_post_t p2 = ping_post(2, 2);
  cr_assert_eq(lw_mailbox_post_control(mb, &p2, &err), LW_FAILED_PRECONDITION);
  cr_assert_eq(mb->control.seq, 1u);
  free(mb);
}

Test(mailbox_control, ack_without_a_request_is_rejected, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_control_ack_t ack = {.status = LW_OK, .value = 1};
  cr_assert_eq(lw_mailbox_ack_control(mb, &ack, &err), LW_FAILED_PRECONDITION);
  cr_assert(has(&err, "control frame is IDLE"), "%s", err.message);
  cr_assert_eq(mb->control.ack_value, 0u);
  lw_mb_arena_t a = arena_view();
  lw_mb_control_taken_t t;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_FAILED_PRECONDITION);
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
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_OK);
  lw_mb_control_t *c = &mb->control;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);

  c->command = 99;  // forged by a broken parent
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "unknown command 99"), "%s", err.message);
  c->command = LW_MB_CMD_REGISTER;

  memset(c->name, 'n', LW_MB_NAME_BYTES);
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "name is not NUL-terminated"), "%s", err.message);
  c->name[0] = '\0';
  memset(c->entry, 'e', LW_MB_NAME_BYTES);
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "entry is not NUL-terminated"), "%s", err.message);
  c->entry[LW_MB_NAME_BYTES - 1] = '\0';  // the longest legal entry
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(t.entry), LW_MB_NAME_BYTES - 1u);

  c->n_params = 33;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "33 params"), "%s", err.message);
  c->n_params = 32;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_OK);

  c->image_bytes = 0;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT, "empty image");
  c->image_offset = ARENA_BYTES - 8;
  c->image_bytes = UINT64_MAX;  // offset + bytes overflows
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "REGISTER image"), "%s", err.message);
  c->image_offset = ARENA_BYTES + 1;
  c->image_bytes = 1;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_INVALID_ARGUMENT);
  c->image_offset = ARENA_BYTES - 8;
  c->image_bytes = 8;  // exactly the last 8 bytes
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);

  // The image range only matters for REGISTER.
  c->command = LW_MB_CMD_UNREGISTER;
  c->image_bytes = UINT64_MAX;
  cr_assert_eq(lw_mailbox_take_control(mb, &a, &t, &err), LW_OK, "%s", err.message);
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
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_INVALID_ARGUMENT);
  p.command = LW_MB_CMD_REGISTER_SUB;
  p.n_params = 33;
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_INVALID_ARGUMENT);
  p.n_params = 0;
  p.name = longname;
  p.entry = NULL;
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strnlen(mb->control.name, LW_MB_NAME_BYTES), LW_MB_NAME_BYTES - 1u);
  cr_assert_eq(mb->control.entry[0], '\0');
  free(mb);
}

Test(mailbox_control, acks_are_terminated_and_invalid_ack_statuses_are_rejected,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_control_post_t p = ping_post(1, 1);
  cr_assert_eq(lw_mailbox_post_control(mb, &p, &err), LW_OK);
  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = (lw_status_t)50;
  cr_assert_eq(lw_mailbox_ack_control(mb, &ack, &err), LW_INVALID_ARGUMENT);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_REQUEST);
  ack.status = LW_NOT_FOUND;
  memset(ack.error.message, 'z', sizeof(ack.error.message));
  cr_assert_eq(lw_mailbox_ack_control(mb, &ack, &err), LW_OK, "%s", err.message);
  cr_assert_eq(mb->control.ack_error.message[LW_ERROR_MESSAGE_BYTES - 1], '\0');

  // A forged ack status is caught by the parent, and the frame stays DONE.
  mb->control.ack_status = -3;
  lw_mb_control_ack_t out;
  cr_assert_eq(lw_mailbox_consume_control(mb, &out, &err), LW_INTERNAL);
  cr_assert(has(&err, "control ack has status -3"), "%s", err.message);
  mb->control.ack_status = LW_OK;
  mb->control.ack_async = 2;
  cr_assert_eq(lw_mailbox_consume_control(mb, &out, &err), LW_INTERNAL);
  cr_assert_eq(atomic_load(&mb->control.state), (uint32_t)LW_MB_CONTROL_DONE);
  mb->control.ack_async = 0;
  mb->control.ack_status = LW_NOT_FOUND;
  memset(mb->control.ack_error.message, 'q', LW_ERROR_MESSAGE_BYTES);  // forged
  cr_assert_eq(lw_mailbox_consume_control(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(out.error.message), LW_ERROR_MESSAGE_BYTES - 1u);
  cr_assert_eq(out.status, LW_NOT_FOUND);
  free(mb);
}

// ---------------------------------------------------------------------------------------------
// Args

Test(mailbox_args, encode_maps_arena_pointers_to_offsets_and_decode_maps_them_back,
     .timeout = 10) {
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_args_t args;
  lw_args_init(&args);
  cr_assert_eq(lw_args_add_tensor(&args, g_arena + 100, 200, LW_TAG_INPUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&args, g_arena, ARENA_BYTES, LW_TAG_INOUT), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&args, NULL, 0, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&args, g_arena + ARENA_BYTES - 1, 1, LW_TAG_OUTPUT), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&args, 11), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&args, UINT64_MAX), LW_OK);

  lw_mb_args_t wire;
  cr_assert_eq(lw_mailbox_args_encode(&args, &a, &wire, &err), LW_OK, "%s", err.message);
  cr_assert_eq(wire.n_tensors, 4u);
  cr_assert_eq(wire.tensor[0].offset, 100u);
  cr_assert_eq(wire.tensor[0].bytes, 200u);
  cr_assert_eq(wire.tensor[1].offset, 0u);
  cr_assert_eq(wire.tensor[1].bytes, ARENA_BYTES);
  cr_assert_eq(wire.tensor[2].offset, 0u, "NULL with 0 bytes encodes as offset 0");
  cr_assert_eq(wire.tensor[2].bytes, 0u);
  cr_assert_eq(wire.tensor[3].offset, ARENA_BYTES - 1u);
  cr_assert_eq(wire.n_scalars, 2u);
  cr_assert_eq(wire.scalar[1], UINT64_MAX);

  lw_kernel_args_t k;
  cr_assert_eq(lw_mailbox_args_decode(&wire, &a, &k, &err), LW_OK, "%s", err.message);
  cr_assert_eq(k.n_tensors, 4u);
  cr_assert_eq(k.tensor[0].data, (void *)(g_arena + 100));
  cr_assert_eq(k.tensor[1].data, (void *)g_arena);
  cr_assert_null(k.tensor[2].data, "a zero-byte tensor arrives as NULL");
  cr_assert_eq(k.tensor[3].data, (void *)(g_arena + ARENA_BYTES - 1));
  cr_assert_eq(k.scalar[0], 11u);
}

Test(mailbox_args, encode_rejects_a_tensor_outside_the_arena, .timeout = 10) {
  static uint8_t elsewhere[64];
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_mb_args_t wire;
  void *cases[][2] = {
      {elsewhere, (void *)(uintptr_t)16},                       // a different object
      {g_arena + ARENA_BYTES, (void *)(uintptr_t)0},            // one past the end
      {g_arena + ARENA_BYTES - 8, (void *)(uintptr_t)16},       // runs past the end
      {g_arena + 8, (void *)(uintptr_t)UINT64_MAX},             // bytes overflow
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    lw_args_t args;
    lw_args_init(&args);
    args.n_tensors = 2;
    args.tensor[0] = (lw_args_tensor_t){g_arena, 8, LW_TAG_INPUT, 0};
    args.tensor[1] = (lw_args_tensor_t){cases[i][0], (uint64_t)(uintptr_t)cases[i][1],
                                        LW_TAG_INPUT, 0};
    cr_assert_eq(lw_mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT,
                 "case %zu", i);
    cr_assert(has(&err, "tensor 1 at"), "%s", err.message);
    cr_assert(has(&err, "is outside the worker's shared memory; allocate it with "
                        "lw_worker_alloc"),
              "%s", err.message);
  }
  lw_args_t args;
  lw_args_init(&args);
  args.n_tensors = 1;
  args.tensor[0] = (lw_args_tensor_t){NULL, 4, LW_TAG_INPUT, 0};
  cr_assert_eq(lw_mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT,
               "NULL with bytes");
  args.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw_mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT);
  args.n_tensors = 0;
  args.n_scalars = LW_MAX_SCALARS + 1;
  cr_assert_eq(lw_mailbox_args_encode(&args, &a, &wire, &err), LW_INVALID_ARGUMENT);
}

Test(mailbox_args, decode_rejects_counts_and_ranges_outside_the_arena, .timeout = 10) {
  lw_mb_arena_t a = arena_view();
  lw_error_t err;
  lw_kernel_args_t k;
  lw_mb_args_t wire;
  memset(&wire, 0, sizeof(wire));
  wire.n_tensors = 1;
  struct {
    uint64_t offset, bytes;
    lw_status_t want;
  } cases[] = {
      {ARENA_BYTES - 8, UINT64_MAX, LW_INVALID_ARGUMENT},  // offset + bytes wraps
      {UINT64_MAX, 1, LW_INVALID_ARGUMENT},
      {UINT64_MAX, 0, LW_INVALID_ARGUMENT},
      {ARENA_BYTES + 1, 0, LW_INVALID_ARGUMENT},
      {ARENA_BYTES - 8, 9, LW_INVALID_ARGUMENT},
      {0, ARENA_BYTES + 1, LW_INVALID_ARGUMENT},
      {ARENA_BYTES - 8, 8, LW_OK},
      {ARENA_BYTES, 0, LW_OK},  // an empty tensor at the very end
      {0, ARENA_BYTES, LW_OK},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    wire.tensor[0].offset = cases[i].offset;
    wire.tensor[0].bytes = cases[i].bytes;
    cr_assert_eq(lw_mailbox_args_decode(&wire, &a, &k, &err), cases[i].want, "case %zu: %s", i,
                 err.message);
    if (cases[i].want != LW_OK) {
      cr_assert(has(&err, "tensor 0"), "%s", err.message);
      cr_assert(has(&err, "outside the 4096-byte arena"), "%s", err.message);
    }
  }
  wire.tensor[0].offset = 0;
  wire.n_tensors = LW_MAX_TENSORS + 1;
  cr_assert_eq(lw_mailbox_args_decode(&wire, &a, &k, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(&err, "17 tensors"), "%s", err.message);
  wire.n_tensors = 0;
  wire.n_scalars = 0xffffffffu;
  cr_assert_eq(lw_mailbox_args_decode(&wire, &a, &k, &err), LW_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------------
// Completion ring

Test(mailbox_ring, pop_on_an_empty_ring_is_not_found, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c;
  cr_assert_eq(lw_mailbox_pop_completion(mb, &c, &err), LW_NOT_FOUND);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 0u);
  free(mb);
}

Test(mailbox_ring, ring_wraps_correctly_over_three_times_its_size, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  const uint64_t total = 3 * LW_MB_RING_ENTRIES;
  uint64_t pushed = 0, popped = 0;
  // Uneven batches (up to a full ring) so the wrap falls at different points.
  while (popped < total) {
    uint64_t batch = (pushed * 7 + 5) % LW_MB_RING_ENTRIES + 1;
    for (uint64_t i = 0; i < batch && pushed < total; ++i, ++pushed) {
      lw_mb_completion_t c = control_completion(pushed, pushed * 3);
      push_ok(mb, &c);
    }
    lw_mb_completion_t out;
    while (lw_mailbox_pop_completion(mb, &out, &err) == LW_OK) {
      cr_assert_eq(out.control_id, popped, "entry order");
      cr_assert_eq(out.value, popped * 3);
      popped++;
    }
  }
  cr_assert_eq(atomic_load(&mb->ring_head.value), total);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), total);
  free(mb);
}

Test(mailbox_ring, push_to_a_full_ring_is_deadline_exceeded_and_writes_nothing,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  for (uint32_t i = 0; i < LW_MB_RING_ENTRIES; ++i) {
    lw_mb_completion_t c = control_completion(i, 0);
    push_ok(mb, &c);
  }
  lw_mb_completion_t extra = control_completion(999, 0);
  bool wake = true;
  cr_assert_eq(lw_mailbox_push_completion(mb, &extra, lw__now_ns() - 1, &wake, &err),
               LW_DEADLINE_EXCEEDED);
  cr_assert(has(&err, "ring full"), "%s", err.message);
  cr_assert_not(wake);
  // A short future deadline goes through spin, yield and naps, then gives up the same way.
  cr_assert_eq(lw_mailbox_push_completion(mb, &extra, lw__now_ns() + 2000000, &wake, &err),
               LW_DEADLINE_EXCEEDED);
  cr_assert_eq(atomic_load(&mb->ring_head.value), LW_MB_RING_ENTRIES);
  lw_mb_completion_t out;
  cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_OK);
  cr_assert_eq(out.control_id, 0u, "the oldest entry was not overwritten");
  cr_assert_eq(lw_mailbox_push_completion(mb, &extra, lw__now_ns() - 1, &wake, &err), LW_OK,
               "one slot free: the push succeeds even past its deadline");
  free(mb);
}

Test(mailbox_ring, malformed_completions_are_rejected_but_consumed, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t bad[4];
  memset(bad, 0, sizeof(bad));
  bad[0].kind = 9;  // unknown kind
  bad[1].kind = LW_MB_COMPLETION_TASK;
  bad[1].frame = LW_MB_TASK_FRAMES;  // out of range
  bad[2].kind = LW_MB_COMPLETION_CONTROL;
  bad[2].status = LW_STATUS_COUNT_;  // bad status
  bad[3].kind = LW_MB_COMPLETION_CONTROL;
  bad[3].status = -1;
  const char *why[] = {"has kind 9", "names task frame 4", "has status 13", "has status -1"};
  for (int i = 0; i < 4; ++i) {
    // Written the way a broken child would: entry, then head.
    mb->ring[i] = bad[i];
    atomic_store(&mb->ring_head.value, (uint64_t)i + 1);
  }
  lw_mb_completion_t good = control_completion(5, 6);
  push_ok(mb, &good);
  lw_mb_completion_t out;
  for (int i = 0; i < 4; ++i) {
    cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_INTERNAL, "entry %d", i);
    cr_assert(has(&err, why[i]), "entry %d: %s", i, err.message);
    cr_assert_eq(atomic_load(&mb->ring_tail.value), (uint64_t)i + 1, "entry %d consumed", i);
  }
  cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.control_id, 5u);
  cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_NOT_FOUND);
  free(mb);
}

Test(mailbox_ring, corrupt_cursors_are_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t out;
  atomic_store(&mb->ring_head.value, LW_MB_RING_ENTRIES + 1u);
  cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_INTERNAL);
  cr_assert(has(&err, "65 entries past tail 0"), "%s", err.message);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 0u);
  // A tail ahead of the head (a broken parent) stops the child's push.
  atomic_store(&mb->ring_head.value, 3u);
  atomic_store(&mb->ring_tail.value, 4u);
  lw_mb_completion_t c = control_completion(1, 1);
  bool wake;
  cr_assert_eq(lw_mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_INTERNAL);
  cr_assert_eq(atomic_load(&mb->ring_head.value), 3u);
  free(mb);
}

Test(mailbox_ring, popped_entries_have_terminated_messages, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c = control_completion(1, 1);
  c.status = LW_TASK_FAILED;
  push_ok(mb, &c);
  memset(mb->ring[0].error.message, 'm', LW_ERROR_MESSAGE_BYTES);  // forged after the push
  lw_mb_completion_t out;
  cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_OK);
  cr_assert_eq(strlen(out.error.message), LW_ERROR_MESSAGE_BYTES - 1u);
  free(mb);
}

Test(mailbox_ring, push_reports_wake_only_when_the_parent_is_sleeping, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c = control_completion(1, 1), out;
  bool wake = true;
  cr_assert_eq(lw_mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_OK);
  cr_assert_not(wake, "parent awake: no eventfd write needed");
  atomic_store(&mb->parent.sleeping, 1);
  cr_assert_eq(lw_mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_OK);
  cr_assert(wake, "parent sleeping: the child must ring the eventfd");
  atomic_store(&mb->parent.sleeping, 0);
  cr_assert_eq(lw_mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_OK);
  cr_assert_not(wake);
  for (int i = 0; i < 3; ++i) cr_assert_eq(lw_mailbox_pop_completion(mb, &out, &err), LW_OK);
  free(mb);
}

// ---------------------------------------------------------------------------------------------
// Cancel words

Test(mailbox_cancel, cancel_sets_bit0_only_for_a_live_even_generation_once, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_cancel_word_t *w = &mb->task[1].cancel;
  cr_assert_not(lw_mailbox_cancel_task(mb, 1), "0: no run ever began");
  cr_assert_eq(atomic_load(w), 0u);
  post_take_run(mb, 1, 1, 1);
  uint64_t g = lw_cancel_begin(w);  // the run lane starts the run
  cr_assert(lw_mailbox_cancel_task(mb, 1));
  cr_assert_eq(atomic_load(w), g | 1u);
  cr_assert(lw_cancel_is_requested(w, g));
  cr_assert_not(lw_mailbox_cancel_task(mb, 1), "a second cancel finds bit 0 set");
  cr_assert_eq(atomic_load(w), g | 1u);
  lw_mb_task_result_t r = result_of(LW_CANCELLED, "cancelled while running");
  cr_assert_eq(lw_mailbox_task_complete(mb, 1, &r, &err), LW_OK);
  cr_assert_eq(frame_state(mb, 1), (uint32_t)LW_MB_TASK_CANCELLED);
  // The post leaves the word alone; the next run gets a fresh, uncancelled generation.
  lw_mb_identity_t id = ident(1);
  cr_assert_eq(lw_mailbox_consume_task(mb, 1, &id, &r, &err), LW_OK);
  post_take_run(mb, 1, 2, 2);
  cr_assert_eq(atomic_load(w), g | 1u);
  uint64_t g2 = lw_cancel_begin(w);
  cr_assert_gt(g2, g);
  cr_assert_not(lw_cancel_is_requested(w, g2));
  free(mb);
}

Test(mailbox_cancel, cancel_after_completion_finds_no_live_run, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_cancel_word_t *w = &mb->task[0].cancel;
  post_take_run(mb, 0, 1, 1);
  uint64_t g = lw_cancel_begin(w);
  lw_mb_task_result_t r = result_of(LW_OK, "");
  cr_assert_eq(lw_mailbox_task_complete(mb, 0, &r, &err), LW_OK);
  cr_assert_eq(atomic_load(w), g | 1u, "complete retires the generation");
  cr_assert_not(lw_mailbox_cancel_task(mb, 0), "a finished run cannot be cancelled");
  cr_assert_eq(frame_state(mb, 0), (uint32_t)LW_MB_TASK_DONE);
  free(mb);
}

// ---------------------------------------------------------------------------------------------
// Two threads (what TSan checks: every payload crosses through a release/acquire pair)

typedef struct ring_thread_ctx {
  lw_mailbox_t *mb;
  uint64_t n;
  _Atomic int failures;
} ring_thread_ctx_t;

static void *ring_producer(void *arg) {
  ring_thread_ctx_t *ctx = arg;
  for (uint64_t i = 0; i < ctx->n; ++i) {
    lw_mb_completion_t c = control_completion(i, ~i);
    snprintf(c.error.message, sizeof(c.error.message), "entry %llu", (unsigned long long)i);
    bool wake;
    lw_error_t err;
    if (lw_mailbox_push_completion(ctx->mb, &c, LW_DEADLINE_NEVER, &wake, &err) != LW_OK) {
      atomic_fetch_add(&ctx->failures, 1);
      break;
    }
  }
  return NULL;
}

Test(mailbox_threads, ring_producer_and_consumer_threads_keep_every_entry_in_order,
     .timeout = 30) {
  ring_thread_ctx_t ctx = {.mb = mb_new(), .n = 20 * LW_MB_RING_ENTRIES};
  atomic_init(&ctx.failures, 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, ring_producer, &ctx), 0);
  uint64_t got = 0;
  bool in_order = true;
  lw_error_t err;
  while (got < ctx.n && atomic_load(&ctx.failures) == 0) {
    lw_mb_completion_t out;
    lw_status_t st = lw_mailbox_pop_completion(ctx.mb, &out, &err);
    if (st == LW_NOT_FOUND) {
      sched_yield();
      continue;
    }
    char want[32];
    snprintf(want, sizeof(want), "entry %llu", (unsigned long long)got);
    if (st != LW_OK || out.control_id != got || out.value != ~got ||
        strcmp(out.error.message, want) != 0) {
      in_order = false;
      break;
    }
    got++;
  }
  pthread_join(th, NULL);
  cr_assert_eq(atomic_load(&ctx.failures), 0);
  cr_assert(in_order, "entry %llu arrived wrong", (unsigned long long)got);
  cr_assert_eq(got, ctx.n);
  free(ctx.mb);
}

typedef struct task_thread_ctx {
  lw_mailbox_t *mb;
  uint64_t n_tasks;
  _Atomic int bad_step;  // 0: fine; otherwise which step failed
} task_thread_ctx_t;

// The child's side: apply posts strictly by seq; the result echoes the payload.
static void *task_child_thread(void *arg) {
  task_thread_ctx_t *ctx = arg;
  lw_mb_arena_t a = arena_view();
  for (uint64_t seq = 1; seq <= ctx->n_tasks; ++seq) {
    bool is_control;
    uint32_t frame;
    lw_error_t err;
    lw_status_t st;
    while ((st = lw_mailbox_find_post(ctx->mb, seq, &is_control, &frame, &err)) == LW_NOT_FOUND) {
      sched_yield();
    }
    lw_mb_task_taken_t t;
    if (st != LW_OK || is_control) {
      atomic_store(&ctx->bad_step, 1);
      return NULL;
    }
    if (lw_mailbox_take_task(ctx->mb, frame, &a, &t, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 2);
      return NULL;
    }
    if (lw_mailbox_task_set_running(ctx->mb, frame, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 3);
      return NULL;
    }
    (void)lw_cancel_begin(&ctx->mb->task[frame].cancel);
    lw_mb_task_result_t r = result_of(LW_OK, "");
    r.kernel_rc = (int32_t)(t.args.scalar[0] * 3);
    r.kernel_ns = t.identity.task_id;
    if (lw_mailbox_task_complete(ctx->mb, frame, &r, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 4);
      return NULL;
    }
    lw_mb_completion_t c;
    memset(&c, 0, sizeof(c));
    c.kind = LW_MB_COMPLETION_TASK;
    c.frame = frame;
    c.identity = t.identity;
    bool wake;
    if (lw_mailbox_push_completion(ctx->mb, &c, LW_DEADLINE_NEVER, &wake, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 5);
      return NULL;
    }
  }
  return NULL;
}

Test(mailbox_threads, task_round_trips_between_threads_carry_payload_and_result,
     .timeout = 30) {
  task_thread_ctx_t ctx = {.mb = mb_new(), .n_tasks = 400};
  atomic_init(&ctx.bad_step, 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, task_child_thread, &ctx), 0);
  bool busy[LW_MB_TASK_FRAMES] = {false};
  uint64_t next_seq = 1, done = 0;
  bool ok = true;
  lw_error_t err;
  while (done < ctx.n_tasks && ok && atomic_load(&ctx.bad_step) == 0) {
    // Fill every free frame, then drain completions.
    for (uint32_t f = 0; f < LW_MB_TASK_FRAMES && next_seq <= ctx.n_tasks; ++f) {
      if (busy[f]) continue;
      lw_mb_task_post_t p = task_post(next_seq, next_seq);
      if (lw_mailbox_post_task(ctx.mb, f, &p, &err) != LW_OK) ok = false;
      busy[f] = true;
      next_seq++;
    }
    lw_mb_completion_t c;
    lw_status_t st = lw_mailbox_pop_completion(ctx.mb, &c, &err);
    if (st == LW_NOT_FOUND) {
      sched_yield();
      continue;
    }
    if (st != LW_OK || c.kind != LW_MB_COMPLETION_TASK || !busy[c.frame]) {
      ok = false;
      break;
    }
    uint64_t n = c.identity.run_id - 100;
    lw_mb_identity_t want = ident(n);
    lw_mb_task_result_t r;
    if (lw_mailbox_consume_task(ctx.mb, c.frame, &want, &r, &err) != LW_OK ||
        r.kernel_rc != (int32_t)(n * 3) || r.kernel_ns != want.task_id) {
      ok = false;
      break;
    }
    busy[c.frame] = false;
    done++;
  }
  pthread_join(th, NULL);
  cr_assert_eq(atomic_load(&ctx.bad_step), 0, "child thread failed at step %d",
               atomic_load(&ctx.bad_step));
  cr_assert(ok, "parent side failed after %llu tasks: %s", (unsigned long long)done,
            err.message);
  cr_assert_eq(done, ctx.n_tasks);
  free(ctx.mb);
}

// ---------------------------------------------------------------------------------------------
// Across fork: a real child process on MAP_SHARED memory

typedef struct shared_region {
  lw_mailbox_t mb;
  _Alignas(64) uint8_t arena[ARENA_BYTES];
} shared_region_t;

typedef struct post_wait_ctx {
  lw_mailbox_t *mb;
  uint64_t seq;
} post_wait_ctx_t;

static bool post_published(const void *arg) {
  const post_wait_ctx_t *c = arg;
  // Acquire: pairs with the doorbell's release store of post_seq.
  return atomic_load_explicit(&c->mb->doorbell.post_seq, memory_order_acquire) >= c->seq;
}

static bool control_done(const void *arg) {
  const lw_mailbox_t *mb = arg;
  return atomic_load_explicit(&mb->control.state, memory_order_acquire) ==
         LW_MB_CONTROL_DONE;
}

// The forked child: serve a PING (seq 1) and one task (seq 2), then exit. Its exit status
// says which step failed (0: none).
static int child_serve(shared_region_t *sh, int efd) {
  lw_mailbox_t *mb = &sh->mb;
  lw_mb_arena_t arena = {sh->arena, ARENA_BYTES};
  lw_error_t err;
  if (lw_mailbox_validate_header(mb, &err) != LW_OK) return 10;
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    post_wait_ctx_t pw = {mb, seq};
    // Sleeps on the doorbell futex (shared) until the parent posts seq.
    if (lw_waitword_wait(&mb->doorbell.word, post_published, &pw, lw__now_ns() + 5000000000LL,
                         true) != LW_OK) {
      return 11;
    }
    bool is_control;
    uint32_t frame;
    if (lw_mailbox_find_post(mb, seq, &is_control, &frame, &err) != LW_OK) return 12;
    if (is_control) {
      lw_mb_control_taken_t t;
      if (lw_mailbox_take_control(mb, &arena, &t, &err) != LW_OK) return 13;
      if (t.command != LW_MB_CMD_PING) return 14;
      lw_mb_control_ack_t ack = {.status = LW_OK, .value = (uint64_t)getpid()};
      if (lw_mailbox_ack_control(mb, &ack, &err) != LW_OK) return 15;
      continue;
    }
    lw_mb_task_taken_t t;
    if (lw_mailbox_take_task(mb, frame, &arena, &t, &err) != LW_OK) return 16;
    if (lw_mailbox_task_set_running(mb, frame, &err) != LW_OK) return 17;
    (void)lw_cancel_begin(&mb->task[frame].cancel);
    // The "kernel": out[i] = in[i] * 2 + scalar0.
    const int32_t *in = t.args.tensor[0].data;
    int32_t *out = t.args.tensor[1].data;
    size_t n = t.args.tensor[0].bytes / sizeof(int32_t);
    for (size_t i = 0; i < n; ++i) out[i] = in[i] * 2 + (int32_t)t.args.scalar[0];
    lw_mb_task_result_t r;
    memset(&r, 0, sizeof(r));
    r.status = LW_OK;
    r.kernel_rc = 7;
    if (lw_mailbox_task_complete(mb, frame, &r, &err) != LW_OK) return 18;
    lw_mb_completion_t c;
    memset(&c, 0, sizeof(c));
    c.kind = LW_MB_COMPLETION_TASK;
    c.frame = frame;
    c.identity = t.identity;
    bool wake = false;
    if (lw_mailbox_push_completion(mb, &c, lw__now_ns() + 5000000000LL, &wake, &err) != LW_OK) {
      return 19;
    }
    if (wake) {
      uint64_t one = 1;
      if (write(efd, &one, sizeof(one)) != (ssize_t)sizeof(one)) return 20;
    }
  }
  return 0;
}

Test(mailbox_process, forked_child_serves_a_ping_and_a_task_while_the_parent_waits_on_the_ring,
     .timeout = 20) {
  int fds_before = lw_test_fd_count();
  shared_region_t *sh = mmap(NULL, sizeof(shared_region_t), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(sh, MAP_FAILED);
  lw_mailbox_t *mb = &sh->mb;
  lw_mailbox_initialize(mb, LW_MB_CHILD_CHIP, 0, ARENA_BYTES);
  lw_mb_arena_t arena = {sh->arena, ARENA_BYTES};
  int efd = eventfd(0, EFD_CLOEXEC);
  cr_assert_geq(efd, 0);

  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) _exit(child_serve(sh, efd));

  lw_error_t err;
  // PING: the parent sleeps on done_word (a shared futex) until the child acks.
  lw_mb_control_post_t ping = ping_post(1, 500);
  cr_assert_eq(lw_mailbox_post_control(mb, &ping, &err), LW_OK, "%s", err.message);
  lw_status_t wst = lw_waitword_wait(&mb->control.done_word, control_done, mb,
                                     lw__now_ns() + 5000000000LL, true);
  lw_mb_control_ack_t ack;
  lw_status_t cst = wst == LW_OK ? lw_mailbox_consume_control(mb, &ack, &err) : wst;

  // One task: out = in * 2 + 5 over 16 ints in the arena.
  int32_t *in = (int32_t *)sh->arena, *out = (int32_t *)(sh->arena + 1024);
  for (int i = 0; i < 16; ++i) in[i] = i;
  lw_args_t args;
  lw_args_init(&args);
  lw_status_t pst = lw_args_add_tensor(&args, in, 16 * sizeof(int32_t), LW_TAG_INPUT);
  if (pst == LW_OK) pst = lw_args_add_tensor(&args, out, 16 * sizeof(int32_t), LW_TAG_OUTPUT);
  if (pst == LW_OK) pst = lw_args_add_scalar(&args, 5);
  lw_mb_task_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = 2;
  p.identity = ident(9);
  p.kind = LW_MB_TASK_KERNEL;
  if (pst == LW_OK) pst = lw_mailbox_args_encode(&args, &arena, &p.args, &err);
  if (pst == LW_OK) pst = lw_mailbox_post_task(mb, 3, &p, &err);

  // Wait on the ring the way the scheduler does: pop; if empty, announce sleeping
  // (seq_cst), pop again, and only then block on the eventfd.
  lw_mb_completion_t c;
  lw_status_t rst = LW_NOT_FOUND;
  int64_t deadline = lw__now_ns() + 5000000000LL;
  while (pst == LW_OK && rst == LW_NOT_FOUND && lw__now_ns() < deadline) {
    rst = lw_mailbox_pop_completion(mb, &c, &err);
    if (rst != LW_NOT_FOUND) break;
    atomic_store_explicit(&mb->parent.sleeping, 1, memory_order_seq_cst);
    rst = lw_mailbox_pop_completion(mb, &c, &err);
    if (rst == LW_NOT_FOUND) {
      struct pollfd pfd = {.fd = efd, .events = POLLIN};
      if (poll(&pfd, 1, 100) == 1) {
        uint64_t v;
        (void)!read(efd, &v, sizeof(v));
      }
    }
    atomic_store_explicit(&mb->parent.sleeping, 0, memory_order_relaxed);
  }
  lw_mb_task_result_t r;
  lw_status_t tst = rst == LW_OK ? lw_mailbox_consume_task(mb, c.frame, &p.identity, &r, &err)
                                 : rst;

  // Reap the child before asserting, so a failed assertion leaks nothing.
  int ws = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid, &ws, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped != pid) kill(pid, SIGKILL);
  bool outputs_ok = true;
  for (int i = 0; i < 16; ++i) outputs_ok = outputs_ok && out[i] == i * 2 + 5;
  close(efd);

  cr_assert_eq(reaped, pid);
  cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child failed at step %d",
            WIFEXITED(ws) ? WEXITSTATUS(ws) : -WTERMSIG(ws));
  cr_assert_eq(cst, LW_OK, "ping: %s", err.message);
  cr_assert_eq(ack.value, (uint64_t)pid, "PING answers with the child's pid");
  cr_assert_eq(pst, LW_OK, "post: %s", err.message);
  cr_assert_eq(rst, LW_OK, "no completion: %s", err.message);
  cr_assert_eq(c.kind, (uint32_t)LW_MB_COMPLETION_TASK);
  cr_assert_eq(c.frame, 3u);
  cr_assert_eq(tst, LW_OK, "consume: %s", err.message);
  cr_assert_eq(r.final_state, LW_MB_TASK_DONE);
  cr_assert_eq(r.kernel_rc, 7);
  cr_assert(outputs_ok, "the child wrote the outputs into the shared arena");
  cr_assert_eq(frame_state(mb, 3), (uint32_t)LW_MB_TASK_IDLE);
  cr_assert_eq(munmap(sh, sizeof(shared_region_t)), 0);
  cr_assert_eq(lw_test_child_count(), 0, "no child left behind");
  cr_assert_eq(lw_test_fd_count(), fds_before, "no fd left behind");
}
