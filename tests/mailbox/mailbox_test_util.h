// tests/mailbox/mailbox_test_util.h — helpers shared by the mailbox protocol tests
// (tests/mailbox/test_*.c): a fresh mailbox, an arena to point tensors into, canned posts,
// results and completions. Every function is static inline so a file that does not use one
// compiles without warnings.
//
// Only the Criterion subset that tests/tsan_shim supports is used by these tests (Test with
// .timeout, cr_assert* with literal messages), so the same files run under TSan. Helper threads
// and forked children never assert: they record what they saw and the test's thread asserts.
#ifndef LANEWORK_TESTS_MAILBOX_MAILBOX_TEST_UTIL_H_
#define LANEWORK_TESTS_MAILBOX_MAILBOX_TEST_UTIL_H_

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

static inline lw_mailbox_t *mb_new(void) {
  lw_mailbox_t *mb = aligned_alloc(64, sizeof(lw_mailbox_t));
  cr_assert_not_null(mb);
  lw__mailbox_initialize(mb, LW_MB_CHILD_CHIP, 3, ARENA_BYTES);
  return mb;
}

// Only some files use it; the attribute keeps the others quiet.
static _Alignas(64) uint8_t g_arena[ARENA_BYTES] __attribute__((unused));

static inline lw_mb_arena_t arena_view(void) { return (lw_mb_arena_t){g_arena, ARENA_BYTES}; }

static inline lw_mb_identity_t ident(uint64_t n) {
  return (lw_mb_identity_t){.run_id = 100 + n, .task_id = 200 + n, .dispatch_id = 300 + n,
                            .generation = 7};
}

static inline lw_mb_task_post_t task_post(uint64_t seq, uint64_t n) {
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

static inline lw_mb_task_result_t result_of(lw_status_t st, const char *msg) {
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

static inline uint32_t frame_state(const lw_mailbox_t *mb, uint32_t frame) {
  return atomic_load(&mb->task[frame].state);
}

static inline bool has(const lw_error_t *e, const char *needle) {
  return strstr(e->message, needle) != NULL;
}

// Posts (seq, n) on frame, takes it as the child and marks it RUNNING.
static inline void post_take_run(lw_mailbox_t *mb, uint32_t frame, uint64_t seq, uint64_t n) {
  lw_error_t err;
  lw_mb_task_post_t p = task_post(seq, n);
  cr_assert_eq(lw__mailbox_post_task(mb, frame, &p, &err), LW_OK, "post: %s", err.message);
  lw_mb_arena_t a = arena_view();
  lw_mb_task_taken_t taken;
  cr_assert_eq(lw__mailbox_take_task(mb, frame, &a, &taken, &err), LW_OK, "take: %s",
               err.message);
  cr_assert_eq(lw__mailbox_task_set_running(mb, frame, &err), LW_OK, "run: %s", err.message);
}

// post_take_run, then the child completes the task with status st and message msg.
static inline void post_run_complete(lw_mailbox_t *mb, uint32_t frame, uint64_t seq, uint64_t n,
                                     lw_status_t st, const char *msg) {
  post_take_run(mb, frame, seq, n);
  lw_error_t err;
  lw_mb_task_result_t r = result_of(st, msg);
  cr_assert_eq(lw__mailbox_task_complete(mb, frame, &r, &err), LW_OK, "complete: %s", err.message);
}

static inline void push_ok(lw_mailbox_t *mb, const lw_mb_completion_t *c) {
  bool wake = true;
  lw_error_t err;
  cr_assert_eq(lw__mailbox_push_completion(mb, c, LW_DEADLINE_NEVER, &wake, &err), LW_OK,
               "push: %s", err.message);
}

// consume_task of the frame path: what a TASK completion naming frame asks for.
static inline lw_status_t consume_frame(lw_mailbox_t *mb, uint32_t frame,
                                        const lw_mb_identity_t *expected, lw_mb_task_result_t *out,
                                        lw_error_t *err) {
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_TASK;
  c.frame = frame;
  return lw__mailbox_consume_task(mb, &c, expected, out, err);
}

static inline lw_mb_completion_t control_completion(uint64_t id, uint64_t value) {
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_CONTROL;
  c.control_id = id;
  c.status = LW_OK;
  c.value = value;
  return c;
}

static inline lw_mb_control_post_t ping_post(uint64_t seq, uint64_t id) {
  lw_mb_control_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = seq;
  p.command = LW_MB_CMD_PING;
  p.control_id = id;
  return p;
}

#endif  // LANEWORK_TESTS_MAILBOX_MAILBOX_TEST_UTIL_H_
