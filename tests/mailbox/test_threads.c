// tests/mailbox/test_threads.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// two threads on one mailbox (what TSan checks: every payload crosses through a
// release/acquire pair): the completion ring and task round trips.
#include "mailbox_test_util.h"

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
    if (lw__mailbox_push_completion(ctx->mb, &c, LW_DEADLINE_NEVER, &wake, &err) != LW_OK) {
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
    lw_status_t st = lw__mailbox_pop_completion(ctx.mb, &out, &err);
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
  uint32_t hint = LW_MB_TASK_FRAMES;  // the frame after the last one, as a child looks first
  for (uint64_t seq = 1; seq <= ctx->n_tasks; ++seq) {
    bool is_control;
    uint32_t frame;
    lw_error_t err;
    lw_status_t st;
    while ((st = lw__mailbox_find_post(ctx->mb, seq, hint, &is_control, &frame, &err)) ==
           LW_NOT_FOUND) {
      sched_yield();
    }
    hint = (frame + 1) % LW_MB_TASK_FRAMES;
    lw_mb_task_taken_t t;
    if (st != LW_OK || is_control) {
      atomic_store(&ctx->bad_step, 1);
      return NULL;
    }
    if (lw__mailbox_take_task(ctx->mb, frame, &a, &t, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 2);
      return NULL;
    }
    if (lw__mailbox_task_set_running(ctx->mb, frame, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 3);
      return NULL;
    }
    (void)lw__cancel_begin(&ctx->mb->task[frame].cancel);
    // Odd tasks report through the frame (kernel_rc n * 3), even ones in the entry (TASK_OK:
    // kernel_rc 0), as a child does for an OK result.
    bool in_entry = (t.args.scalar[0] & 1u) == 0;
    lw_mb_task_result_t r = result_of(LW_OK, "");
    r.kernel_rc = in_entry ? 0 : (int32_t)(t.args.scalar[0] * 3);
    r.kernel_ns = t.identity.task_id;
    if (lw__mailbox_task_complete(ctx->mb, frame, &r, &err) != LW_OK) {
      atomic_store(&ctx->bad_step, 4);
      return NULL;
    }
    lw_mb_completion_t c;
    memset(&c, 0, sizeof(c));
    c.kind = in_entry ? LW_MB_COMPLETION_TASK_OK : LW_MB_COMPLETION_TASK;
    c.frame = frame;
    c.identity = t.identity;
    if (in_entry) c.kernel_ns = r.kernel_ns;
    bool wake;
    if (lw__mailbox_push_completion(ctx->mb, &c, LW_DEADLINE_NEVER, &wake, &err) != LW_OK) {
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
      if (lw__mailbox_post_task(ctx.mb, f, &p, &err) != LW_OK) ok = false;
      busy[f] = true;
      next_seq++;
    }
    // A drain as the scheduler's: the first pop may read the head, the next ones stop at the
    // first entry without its mark.
    uint32_t popped = 0;
    for (;;) {
      lw_mb_completion_t c;
      lw_status_t st = popped == 0 ? lw__mailbox_pop_completion(ctx.mb, &c, &err)
                                   : lw__mailbox_pop_next_completion(ctx.mb, &c, &err);
      if (st == LW_NOT_FOUND) break;
      uint64_t n = c.identity.run_id - 100;
      bool in_entry = (n & 1u) == 0;
      uint32_t want_kind = in_entry ? LW_MB_COMPLETION_TASK_OK : LW_MB_COMPLETION_TASK;
      if (st != LW_OK || c.kind != want_kind || !busy[c.frame]) {
        ok = false;
        break;
      }
      lw_mb_identity_t want = ident(n);
      lw_mb_task_result_t r;
      if (lw__mailbox_consume_task(ctx.mb, &c, &want, &r, &err) != LW_OK ||
          r.kernel_rc != (in_entry ? 0 : (int32_t)(n * 3)) || r.kernel_ns != want.task_id) {
        ok = false;
        break;
      }
      busy[c.frame] = false;
      done++;
      popped++;
    }
    if (ok && popped == 0) sched_yield();
  }
  pthread_join(th, NULL);
  cr_assert_eq(atomic_load(&ctx.bad_step), 0, "child thread failed at step %d",
               atomic_load(&ctx.bad_step));
  cr_assert(ok, "parent side failed after %llu tasks: %s", (unsigned long long)done,
            err.message);
  cr_assert_eq(done, ctx.n_tasks);
  free(ctx.mb);
}
