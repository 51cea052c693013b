// child/child_common.c — see child_common.h.
#include "child/child_common.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/spin.h"
#include "lanes/sys.h"

// How long one doorbell sleep lasts before the child re-checks that its parent lives. A
// backstop only: the fork server kills children promptly when the worker dies.
#define PARENT_CHECK_NS (1000ll * 1000 * 1000)
// How long a completion may wait for ring space before the child gives up on its parent.
#define PUSH_TIMEOUT_NS (30ll * 1000 * 1000 * 1000)

void lw__child_ctx_init(lw_child_ctx_t *c, const lw_child_env_t *env) {
  c->env = env;
  c->mb = env->mailbox;
  // Before any event: this process records into its area, not into rings it inherited.
  if (env->trace) lw__trace_child_attach(env->trace);
  pthread_mutex_init(&c->push_mu, NULL);
  // The parent's spin budget (a few of its measured wakes): bounded, as all shared memory.
  uint64_t budget = c->mb->header.spin_budget_ns;
  if (budget != 0) (void)lw__spin_set_budget_ns(budget > INT64_MAX ? INT64_MAX : (int64_t)budget);
}

void lw__child_publish_init(lw_child_ctx_t *c, lw_mb_init_state_t state, const lw_error_t *err) {
  lw_mb_header_t *h = &c->mb->header;
  if (err) {
    h->init_error = *err;
    h->init_error.message[LW_ERROR_MESSAGE_BYTES - 1] = '\0';
  }
  atomic_store_explicit(&h->child_pid, (int32_t)getpid(), memory_order_relaxed);
  // Release: the pid and the error are visible to a parent that sees the new state.
  atomic_store_explicit(&h->init_state, (uint32_t)state, memory_order_release);
  lw__waitword_wake(&h->init_word, true);
}

static void wake_parent(lw_child_ctx_t *c) {
  uint64_t one = 1;
  // A failed write (EAGAIN: the counter is saturated) still leaves the eventfd readable.
  ssize_t n = write(c->env->wake_fd, &one, sizeof(one));
  (void)n;
}

// Pushes done (push_mu held); true when the parent must be woken.
static bool push_locked(lw_child_ctx_t *c, const lw_mb_completion_t *done) {
  bool wake = false;
  lw_error_t err;
  // A push that finds room does not wait: the clock is read for a deadline only when the ring
  // is full (deadline 0 has passed: the first call returns at once instead of waiting).
  lw_status_t st = lw__mailbox_push_completion(c->mb, done, 0, &wake, &err);
  if (st == LW_DEADLINE_EXCEEDED) {
    st = lw__mailbox_push_completion(c->mb, done, lw__now_ns() + PUSH_TIMEOUT_NS, &wake, &err);
  }
  if (st != LW_OK) _exit(LW_CHILD_EXIT_RING_STUCK);  // the parent is gone or broken
  return wake;
}

void lw__child_push(lw_child_ctx_t *c, const lw_mb_completion_t *done) {
  pthread_mutex_lock(&c->push_mu);
  bool wake = push_locked(c, done);
  pthread_mutex_unlock(&c->push_mu);
  if (wake) wake_parent(c);
}

void lw__child_complete_task(lw_child_ctx_t *c, uint32_t frame, const lw_mb_identity_t *id,
                             const lw_mb_task_result_t *result) {
  // Copy the identity first: once the frame is terminal the parent may consume it and post
  // the next task into the same frame, which rewrites whatever *id points at.
  const lw_mb_identity_t identity = *id;
  lw_mb_completion_t done;
  memset(&done, 0, sizeof(done));
  done.frame = frame;
  done.identity = identity;
  // An OK result travels in the entry (the parent then reads no line of the frame); any other
  // one, with its error, is read from the frame.
  if (result->status == LW_OK && result->kernel_rc == 0) {
    done.kind = LW_MB_COMPLETION_TASK_OK;
    done.kernel_ns = result->kernel_ns;
    done.queue_ns = result->queue_ns;
  } else {
    done.kind = LW_MB_COMPLETION_TASK;
  }
  lw_error_t err;
  // The lock before the result: taking it is an atomic read-modify-write, a full barrier on
  // x86, which after the result's stores into the parent's lines would wait for their
  // transfers; taken first, the push's one barrier (its seq_cst head store) waits for all of
  // them at once.
  pthread_mutex_lock(&c->push_mu);
  if (lw__mailbox_task_complete(c->mb, frame, result, &err) != LW_OK) {
    _exit(LW_CHILD_EXIT_FRAME_LOST);
  }
  bool wake = push_locked(c, &done);
  pthread_mutex_unlock(&c->push_mu);
  if (wake) wake_parent(c);
}

typedef struct post_cond {
  lw_mailbox_t *mb;
  uint64_t seq;
  const uint64_t *cancel_seen;  // NULL: cancel notices do not wake this loop
  const lw_child_wait_t *how;   // NULL: every post, on the doorbell word
} post_cond_t;

// Post seq is visible and is this wait's: any post, or while how->controls_only says so, a
// control only (the run lane takes task posts then).
static bool post_is_ours(lw_mailbox_t *mb, uint64_t seq, const lw_child_wait_t *how) {
  if (atomic_load_explicit(&mb->doorbell.post_seq, memory_order_acquire) < seq) return false;
  if (!how || !how->controls_only || !how->controls_only(how->ctx)) return true;
  // Acquire: pairs with the post's release CAS to REQUEST.
  return atomic_load_explicit(&mb->control.state, memory_order_acquire) == LW_MB_CONTROL_REQUEST;
}

static bool post_visible(const void *ctx) {
  const post_cond_t *p = ctx;
  return post_is_ours(p->mb, p->seq, p->how) ||
         atomic_load_explicit(&p->mb->header.shutdown, memory_order_acquire) != 0 ||
         (p->cancel_seen && atomic_load_explicit(&p->mb->doorbell.cancel_seq,
                                                 memory_order_acquire) != *p->cancel_seen);
}

void lw__child_beat(lw_child_ctx_t *c) {
  atomic_fetch_add_explicit(&c->mb->header.heartbeat, 1, memory_order_relaxed);
}

// The parent asks for a period (a fraction of its liveness timeout); the value comes from
// shared memory, so keep it within sane bounds.
static int64_t beat_period(const lw_child_ctx_t *c) {
  uint64_t p = c->mb->header.heartbeat_period_ns;
  if (p < 1000000ull || p > (uint64_t)PARENT_CHECK_NS) return PARENT_CHECK_NS;
  return (int64_t)p;
}

lw_child_wake_t lw__child_wait_post(lw_child_ctx_t *c, uint64_t seq, uint64_t *cancel_seen,
                                    const lw_child_wait_t *how) {
  post_cond_t p = {c->mb, seq, cancel_seen, how};
  bool loop_word = how && how->controls_only;
  lw_waitword_t *word = loop_word ? &c->mb->doorbell.loop_word : &c->mb->doorbell.word;
  int64_t period = beat_period(c);
  int64_t next_parent_check = lw__now_ns() + PARENT_CHECK_NS;
  for (;;) {
    lw__child_beat(c);
    lw_status_t st = (loop_word ? lw__waitword_block : lw__waitword_wait)(
        word, post_visible, &p, lw__now_ns() + period, true);
    if (atomic_load_explicit(&c->mb->header.shutdown, memory_order_acquire)) {
      return LW_CHILD_WAKE_LEAVE;
    }
    if (st == LW_OK) {
      if (post_is_ours(c->mb, seq, how)) return LW_CHILD_WAKE_POST;
      if (!cancel_seen) continue;
      *cancel_seen = atomic_load_explicit(&c->mb->doorbell.cancel_seq, memory_order_acquire);
      return LW_CHILD_WAKE_CANCEL;
    }
    if (lw__now_ns() >= next_parent_check) {
      if (getppid() == 1 || kill(c->env->parent_pid, 0) != 0) return LW_CHILD_WAKE_LEAVE;
      next_parent_check = lw__now_ns() + PARENT_CHECK_NS;
    }
  }
}

void lw__child_ack(lw_child_ctx_t *c, lw_status_t st, bool async, uint64_t value,
                   const lw_error_t *err) {
  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = st;
  ack.async = async;
  ack.value = value;
  if (err && st != LW_OK) ack.error = *err;
  ack.error.code = st;
  lw_error_t e2;
  if (lw__mailbox_ack_control(c->mb, &ack, &e2) != LW_OK) _exit(LW_CHILD_EXIT_CONTROL_LOST);
}

bool lw__child_take_control(lw_child_ctx_t *c, lw_mb_control_taken_t *out) {
  lw_error_t err;
  lw__error_clear(&err);
  if (lw__mailbox_take_control(c->mb, &c->env->arena, out, &err) != LW_OK) {
    lw__child_ack(c, err.code, false, 0, &err);
    return false;
  }
  if (out->command == LW_MB_CMD_PING) {
    lw__child_ack(c, LW_OK, false, (uint64_t)getpid(), NULL);
    return false;
  }
  return true;
}
