// tests/mailbox/test_process.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// across fork: a real child process on MAP_SHARED memory serves a PING and a task.
#include "mailbox_test_util.h"

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
  if (lw__mailbox_validate_header(mb, &err) != LW_OK) return 10;
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    post_wait_ctx_t pw = {mb, seq};
    // Sleeps on the doorbell futex (shared) until the parent posts seq.
    if (lw__waitword_wait(&mb->doorbell.word, post_published, &pw, lw__now_ns() + 5000000000LL,
                         true) != LW_OK) {
      return 11;
    }
    bool is_control;
    uint32_t frame;
    if (lw__mailbox_find_post(mb, seq, LW_MB_TASK_FRAMES, &is_control, &frame, &err) != LW_OK)
      return 12;
    if (is_control) {
      lw_mb_control_taken_t t;
      if (lw__mailbox_take_control(mb, &arena, &t, &err) != LW_OK) return 13;
      if (t.command != LW_MB_CMD_PING) return 14;
      lw_mb_control_ack_t ack = {.status = LW_OK, .value = (uint64_t)getpid()};
      if (lw__mailbox_ack_control(mb, &ack, &err) != LW_OK) return 15;
      continue;
    }
    lw_mb_task_taken_t t;
    if (lw__mailbox_take_task(mb, frame, &arena, &t, &err) != LW_OK) return 16;
    if (lw__mailbox_task_set_running(mb, frame, &err) != LW_OK) return 17;
    (void)lw__cancel_begin(&mb->task[frame].cancel);
    // The "kernel": out[i] = in[i] * 2 + scalar0.
    const int32_t *in = t.args.tensor[0].data;
    int32_t *out = t.args.tensor[1].data;
    size_t n = t.args.tensor[0].bytes / sizeof(int32_t);
    for (size_t i = 0; i < n; ++i) out[i] = in[i] * 2 + (int32_t)t.args.scalar[0];
    lw_mb_task_result_t r;
    memset(&r, 0, sizeof(r));
    r.status = LW_OK;
    r.kernel_rc = 7;
    if (lw__mailbox_task_complete(mb, frame, &r, &err) != LW_OK) return 18;
    lw_mb_completion_t c;
    memset(&c, 0, sizeof(c));
    c.kind = LW_MB_COMPLETION_TASK;
    c.frame = frame;
    c.identity = t.identity;
    bool wake = false;
    if (lw__mailbox_push_completion(mb, &c, lw__now_ns() + 5000000000LL, &wake, &err) != LW_OK) {
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
  lw__mailbox_initialize(mb, LW_MB_CHILD_CHIP, 0, ARENA_BYTES);
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
  cr_assert_eq(lw__mailbox_post_control(mb, &ping, &err), LW_OK, "%s", err.message);
  lw_status_t wst = lw__waitword_wait(&mb->control.done_word, control_done, mb,
                                     lw__now_ns() + 5000000000LL, true);
  lw_mb_control_ack_t ack;
  lw_status_t cst = wst == LW_OK ? lw__mailbox_consume_control(mb, &ack, &err) : wst;

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
  if (pst == LW_OK) pst = lw__mailbox_args_encode(&args, &arena, &p.args, &err);
  if (pst == LW_OK) pst = lw__mailbox_post_task(mb, 3, &p, &err);

  // Wait on the ring the way the scheduler does: pop; if empty, announce sleeping
  // (seq_cst), pop again, and only then block on the eventfd.
  lw_mb_completion_t c;
  lw_status_t rst = LW_NOT_FOUND;
  int64_t deadline = lw__now_ns() + 5000000000LL;
  while (pst == LW_OK && rst == LW_NOT_FOUND && lw__now_ns() < deadline) {
    rst = lw__mailbox_pop_completion(mb, &c, &err);
    if (rst != LW_NOT_FOUND) break;
    atomic_store_explicit(&mb->parent.sleeping, 1, memory_order_seq_cst);
    rst = lw__mailbox_pop_completion(mb, &c, &err);
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
  lw_status_t tst = rst == LW_OK ? lw__mailbox_consume_task(mb, &c, &p.identity, &r, &err) : rst;

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
