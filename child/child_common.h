// child/child_common.h — pieces shared by the chip-child and sub-child loops.
#ifndef LANEWORK_CHILD_CHILD_COMMON_H_
#define LANEWORK_CHILD_CHILD_COMMON_H_

#include <pthread.h>
#include <stdbool.h>

#include "child/child.h"

typedef struct lw_child_ctx {
  const lw_child_env_t *env;
  lw_mailbox_t *mb;
  pthread_mutex_t push_mu;  // completions come from several threads of this child
} lw_child_ctx_t;

void lw__child_ctx_init(lw_child_ctx_t *c, const lw_child_env_t *env);

// Publishes the child's pid and INIT state (READY, or FAILED with err).
void lw__child_publish_init(lw_child_ctx_t *c, lw_mb_init_state_t state, const lw_error_t *err);

// Pushes a completion and wakes the parent if it sleeps. A full ring that never drains means
// the parent is gone or broken: the child exits LW_CHILD_EXIT_RING_STUCK.
void lw__child_push(lw_child_ctx_t *c, const lw_mb_completion_t *done);

// Completes task frame `frame` with result and pushes its completion. id may point into
// per-frame state: it is copied before the frame becomes terminal. A frame that is no longer
// the child's (the parent rewrote it) ends the child: LW_CHILD_EXIT_FRAME_LOST.
void lw__child_complete_task(lw_child_ctx_t *c, uint32_t frame, const lw_mb_identity_t *id,
                             const lw_mb_task_result_t *result);

// Why lw__child_wait_post returned.
typedef enum lw_child_wake {
  LW_CHILD_WAKE_POST = 0,    // post seq is visible
  LW_CHILD_WAKE_CANCEL = 1,  // the parent cancelled a task frame (doorbell.cancel_seq moved)
  LW_CHILD_WAKE_LEAVE = 2,   // shutdown or parent death: the child must leave
} lw_child_wake_t;

// Waits until post seq is visible, shutdown/parent death, or (when cancel_seen is not NULL) a
// cancel notice newer than *cancel_seen (then *cancel_seen is updated). Bumps the mailbox
// heartbeat on entry and at least every heartbeat period while it waits: the parent's
// liveness check watches this loop, not the kernels (a long kernel is legal). how: NULL waits
// for every post on the doorbell word, spinning first (lanes/spin.h).
typedef struct lw_child_wait {
  // While it returns true, only a control post (and cancel notices, shutdown) wakes this wait,
  // which sleeps on the doorbell's loop_word at once, without spinning: task posts are another
  // thread's, which spins for them (a chip child's run lane, in its idle hook). Once it
  // returns false, any post counts again.
  bool (*controls_only)(void *ctx);
  void *ctx;
} lw_child_wait_t;
lw_child_wake_t lw__child_wait_post(lw_child_ctx_t *c, uint64_t seq, uint64_t *cancel_seen,
                                    const lw_child_wait_t *how);

// Adds one to the mailbox heartbeat (relaxed: the parent only looks for movement).
void lw__child_beat(lw_child_ctx_t *c);

// Takes the control frame's request and answers what every child answers the same way: a
// malformed request (acked with its error) and PING (acked with the pid). Returns true when
// the request in *out is left for the caller to serve and ack.
bool lw__child_take_control(lw_child_ctx_t *c, lw_mb_control_taken_t *out);

// Acks a control with a synchronous result. A control frame that is no longer the child's
// ends the child: LW_CHILD_EXIT_CONTROL_LOST.
void lw__child_ack(lw_child_ctx_t *c, lw_status_t st, bool async, uint64_t value,
                   const lw_error_t *err);

#endif  // LANEWORK_CHILD_CHILD_COMMON_H_
