// parent/endpoint.c — one endpoint per child: spawn through the fork server, INIT wait,
// control round trips and task posts.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "parent/endpoint.h"
#include "parent/forkserver.h"

// A control round trip re-checks the child's liveness this often while it waits.
#define CONTROL_SLICE_NS (20ll * 1000 * 1000)
#define CONTROL_TIMEOUT_NS (30ll * 1000 * 1000 * 1000)

void lw__ep_initialize(lw_endpoint_t *ep, const lw_ep_config_t *cfg) {
  memset(ep, 0, sizeof(*ep));
  ep->slot = cfg->slot;
  ep->kind = cfg->kind;
  ep->index = cfg->index;
  ep->mb = cfg->mb;
  ep->trace = cfg->trace;
  ep->fs = cfg->fs;
  ep->liveness_timeout_ns = cfg->liveness_timeout_ns;
  ep->ops = cfg->ops ? cfg->ops : &lw__ep_local_ops;
  ep->kick = cfg->kick;
  ep->kick_ctx = cfg->kick_ctx;
  ep->pidfd = -1;
  pthread_mutex_init(&ep->post_mu, NULL);
  pthread_mutex_init(&ep->ctl_mu, NULL);
  pthread_mutex_init(&ep->desc_mu, NULL);
}

void lw__ep_deinitialize(lw_endpoint_t *ep) {
  if (!ep->mb) return;  // never initialized
  if (ep->pidfd >= 0) close(ep->pidfd);
  ep->pidfd = -1;
  pthread_mutex_destroy(&ep->post_mu);
  pthread_mutex_destroy(&ep->ctl_mu);
  pthread_mutex_destroy(&ep->desc_mu);
  ep->mb = NULL;
}

const char *lw__ep_name(const lw_endpoint_t *ep, char *buf, size_t bytes) {
  snprintf(buf, bytes, "%s %u", ep->kind == LW_MB_CHILD_CHIP ? "chip" : "sub", ep->index);
  return buf;
}

void lw__ep_trace(const lw_endpoint_t *ep, lw_trace_kind_t kind, uint64_t run_id,
                  uint64_t task_id, const char *what) {
  if (!lw__trace_on()) return;
  char name[32], detail[LW_TRACE_NAME_BYTES];
  snprintf(detail, sizeof(detail), "%s: %s", lw__ep_name(ep, name, sizeof(name)), what);
  lw__trace_instant(kind, ep->kind == LW_MB_CHILD_CHIP ? (int32_t)ep->index : -1, run_id,
                    task_id, detail);
}

bool lw__ep_check_dead(lw_endpoint_t *ep) {
  uint32_t state = atomic_load(&ep->state);
  if (state == LW_EP_DEAD || state == LW_EP_RESPAWNING) return true;
  // Any thread may ask, so read the fork server's shared exit table rather than the pidfd
  // (which only the scheduler owns). The server publishes an exit before it reaps the child.
  pid_t pid = atomic_load(&ep->pid);
  int status = 0;
  return pid > 0 && lw__forkserver_exit_status(ep->fs, ep->index, pid, &status);
}

void lw__ep_kill(lw_endpoint_t *ep) {
  pid_t pid = atomic_load(&ep->pid);
  if (pid <= 0) return;
  int fd = lw__forkserver_fd_above_stdio(lw__sys_pidfd_open(pid));
  if (fd == -ENOSYS || fd == -EPERM) {
    lw__forkserver_kill(ep->fs, ep->index, pid, -1);  // no pidfds: the server kills it
    return;
  }
  if (fd < 0) return;  // gone already
  // The fork server publishes an exit before it reaps, and a pid is reused only after the
  // reap: if no exit of this pid is published now, the pidfd opened above is our child's.
  int status = 0;
  if (!lw__forkserver_exit_status(ep->fs, ep->index, pid, &status)) {
    (void)lw__sys_pidfd_send_signal(fd, SIGKILL);
  }
  close(fd);
}

static void local_describe_death(lw_endpoint_t *ep, char *buf, size_t bytes) {
  int status = 0;
  // The pid is the fork server's answer to the spawn, never the one the child wrote into its
  // mailbox header.
  pid_t pid = atomic_load(&ep->pid);
  char how[160];
  snprintf(how, sizeof(how), "child pid %d died (exit status not known)", (int)pid);
  // The fork server publishes the exit right after it reaps; give it a moment.
  for (int i = 0; i < 200; ++i) {
    if (lw__forkserver_exit_status(ep->fs, ep->index, pid, &status)) {
      char desc[64];
      lw__forkserver_describe_status(status, desc, sizeof(desc));
      // A status the child gives itself (child/child_exit.h) says what it saw go wrong.
      const char *why = WIFEXITED(status) ? lw__child_exit_reason(WEXITSTATUS(status)) : NULL;
      snprintf(how, sizeof(how), "child pid %d %s%s%s%s", (int)pid, desc, why ? " (" : "",
               why ? why : "", why ? ")" : "");
      break;
    }
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&ep->violated)) {
    // Killed for breaking the protocol: that is the reason worth reading, the signal is not.
    char what[sizeof(ep->violation)];
    pthread_mutex_lock(&ep->desc_mu);
    snprintf(what, sizeof(what), "%s", ep->violation);
    pthread_mutex_unlock(&ep->desc_mu);
    snprintf(buf, bytes, "protocol violation: %s; child killed (%s)", what, how);
    return;
  }
  // Killed for a silent heartbeat: the reason, not only the SIGKILL. Any observer of the death
  // says so (the scheduler, or a control that read the exit table before the scheduler ran),
  // so the killer's mark stays until the next spawn clears it.
  int64_t silent_ms = atomic_load(&ep->hb_killed_ms);
  if (silent_ms > 0) {
    snprintf(buf, bytes, "no heartbeat for %lld ms (stopped or wedged), %s",
             (long long)silent_ms, how);
    return;
  }
  snprintf(buf, bytes, "%s", how);
}

lw_status_t lw__ep_violation(lw_endpoint_t *ep, const char *what, lw_error_t *err) {
  char name[32];
  lw__ep_name(ep, name, sizeof(name));
  pthread_mutex_lock(&ep->desc_mu);
  if (!atomic_load(&ep->violated)) {
    snprintf(ep->violation, sizeof(ep->violation), "%s", what);
    atomic_store(&ep->violated, true);
  }
  pthread_mutex_unlock(&ep->desc_mu);
  // The scheduler holds the child's pidfd: it does the kill.
  ep->kick(ep->kick_ctx);
  return lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                       "%s: protocol violation: %s; child killed", name, what);
}

// The header fields the parent wrote at initialize and no child may change; a child that
// changed them is broken. The message never repeats the child's index (it is garbage).
static lw_status_t check_header(lw_endpoint_t *ep, lw_error_t *err) {
  lw_error_t why;
  if (lw__mailbox_validate_header(ep->mb, &why) != LW_OK) {
    return lw__ep_violation(ep, why.message, err);
  }
  const lw_mb_header_t *h = &ep->mb->header;
  if (h->child_kind != (uint32_t)ep->kind || h->child_index != ep->index) {
    return lw__ep_violation(ep, "mailbox header: child_kind or child_index was overwritten", err);
  }
  return LW_OK;
}

void lw__ep_set_exit_desc(lw_endpoint_t *ep, const char *desc) {
  pthread_mutex_lock(&ep->desc_mu);
  snprintf(ep->exit_desc, sizeof(ep->exit_desc), "%s", desc);
  pthread_mutex_unlock(&ep->desc_mu);
}

const char *lw__ep_exit_desc(lw_endpoint_t *ep, char *buf, size_t bytes) {
  pthread_mutex_lock(&ep->desc_mu);
  snprintf(buf, bytes, "%s", ep->exit_desc);
  pthread_mutex_unlock(&ep->desc_mu);
  return buf;
}

// The child said why it could not start (INIT_FAILED, its reason in the header).
static lw_status_t init_failed(lw_endpoint_t *ep, const char *name, lw_error_t *err) {
  lw_error_t e = ep->mb->header.init_error;
  e.message[LW_ERROR_MESSAGE_BYTES - 1] = '\0';
  return lw__error_set(err, LW_UNAVAILABLE, (int32_t)ep->index, 0,
                       "%s: child failed to start: %s", name, e.message);
}

lw_status_t lw__ep_spawn(lw_endpoint_t *ep, int64_t deadline_ns, lw_error_t *err) {
  lw_mb_header_t *h = &ep->mb->header;
  atomic_store(&h->init_state, LW_MB_INIT_NONE);
  pthread_mutex_lock(&ep->post_mu);
  atomic_store(&h->generation, ++ep->generation);
  ep->next_seq = 0;
  pthread_mutex_unlock(&ep->post_mu);
  atomic_store(&ep->pid, 0);
  atomic_store(&ep->hb_killed_ms, 0);
  atomic_store(&ep->push_cpu, -1);  // no completion pushed yet
  ep->pidfd = -1;
  pid_t pid = 0;
  lw_status_t st = lw__forkserver_spawn(ep->fs, ep->index, deadline_ns, &pid, &ep->pidfd, err);
  // A child that failed its start quickly may be gone before the fork server's reply was read:
  // its own reason, when it wrote one, says more than its exit (as lw__ep_wait_ready says).
  if (st == LW_CHILD_EXITED &&
      atomic_load_explicit(&h->init_state, memory_order_acquire) == LW_MB_INIT_FAILED) {
    char name[32];
    return init_failed(ep, lw__ep_name(ep, name, sizeof(name)), err);
  }
  if (st != LW_OK) return st;
  atomic_store(&ep->pid, pid);
  atomic_store(&ep->state, LW_EP_STARTING);
  return LW_OK;
}

typedef struct init_cond {
  lw_mailbox_t *mb;
} init_cond_t;

static bool init_changed(const void *ctx) {
  const init_cond_t *c = ctx;
  return atomic_load_explicit(&c->mb->header.init_state, memory_order_acquire) != LW_MB_INIT_NONE;
}

lw_status_t lw__ep_wait_ready(lw_endpoint_t *ep, int64_t deadline_ns, lw_error_t *err) {
  char name[32];
  lw__ep_name(ep, name, sizeof(name));
  init_cond_t c = {ep->mb};
  for (;;) {
    int64_t slice = lw__now_ns() + CONTROL_SLICE_NS;
    lw_status_t st = lw__waitword_wait(&ep->mb->header.init_word, init_changed, &c,
                                      slice < deadline_ns ? slice : deadline_ns, true);
    uint32_t s = atomic_load_explicit(&ep->mb->header.init_state, memory_order_acquire);
    if (s == LW_MB_INIT_READY) {
      atomic_store(&ep->state, LW_EP_READY);
      return LW_OK;
    }
    if (s == LW_MB_INIT_FAILED) return init_failed(ep, name, err);
    if (s != LW_MB_INIT_NONE) {
      // Garbage where the child reports its start: a protocol violation, so a respawn kills it
      // and tries again (within the crash-loop bound) instead of failing the chip for good.
      char what[64];
      snprintf(what, sizeof(what), "unknown INIT state %u", s);
      return lw__ep_violation(ep, what, err);
    }
    if (lw__ep_check_dead(ep)) {
      char desc[128];
      lw__ep_describe_exit(ep, desc, sizeof(desc));
      return lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                           "%s: %s during start-up", name, desc);
    }
    if (st == LW_DEADLINE_EXCEEDED && lw__now_ns() >= deadline_ns) {
      return lw__error_set(err, LW_DEADLINE_EXCEEDED, (int32_t)ep->index, 0,
                           "%s: child did not report INIT_READY before the startup deadline",
                           name);
    }
  }
}

typedef struct control_cond {
  lw_mailbox_t *mb;
} control_cond_t;

static bool control_done(const void *ctx) {
  const control_cond_t *c = ctx;
  return atomic_load_explicit(&c->mb->control.state, memory_order_acquire) != LW_MB_CONTROL_REQUEST;
}

// A sub child calls its functions on its mailbox loop, so its heartbeat stands still while one
// runs (as long as the function likes); the control waits behind it without counting that.
static bool sub_function_running(const lw_endpoint_t *ep) {
  if (ep->kind != LW_MB_CHILD_SUB) return false;
  for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) {
    if (atomic_load(&ep->mb->task[f].state) == LW_MB_TASK_RUNNING) return true;
  }
  return false;
}

lw_status_t lw__ep_down_error(lw_endpoint_t *ep, lw_error_t *err) {
  char name[32], desc[192];
  lw__ep_name(ep, name, sizeof(name));
  lw__ep_exit_desc(ep, desc, sizeof(desc));
  // Only LW_EP_DEAD is for good; a chip starting or respawning comes back (a register refused
  // here can be retried once it has).
  return lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0, "%s is down (%s): %s", name,
                       atomic_load(&ep->state) == LW_EP_DEAD ? "failed for good"
                                                              : "being respawned; retry later",
                       desc[0] ? desc : "not running");
}

static lw_status_t local_post_control(lw_endpoint_t *ep, uint64_t generation,
                                      const lw_mb_control_post_t *post,
                                      lw_mb_control_ack_t *out_ack, lw_error_t *err) {
  char name[32];
  lw__ep_name(ep, name, sizeof(name));
  memset(out_ack, 0, sizeof(*out_ack));
  pthread_mutex_lock(&ep->ctl_mu);
  lw_status_t st;
  if (atomic_load(&ep->state) != LW_EP_READY) {
    st = lw__ep_down_error(ep, err);
    goto out;
  }
  if (atomic_load(&ep->violated)) {
    char what[sizeof(ep->violation)];
    pthread_mutex_lock(&ep->desc_mu);
    snprintf(what, sizeof(what), "%s", ep->violation);
    pthread_mutex_unlock(&ep->desc_mu);
    st = lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                       "%s is down (protocol violation: %s; child killed)", name, what);
    goto out;
  }
  if ((st = check_header(ep, err)) != LW_OK) goto out;
  lw_mb_control_post_t p = *post;
  pthread_mutex_lock(&ep->post_mu);
  if (generation != 0 && ep->generation != generation) {
    // The child the command was prepared for died and a new one took its place (the command
    // names that child's local ids): nothing is posted, as for a child that is down.
    uint64_t now_gen = ep->generation;
    pthread_mutex_unlock(&ep->post_mu);
    st = lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                       "%s: the child this control was meant for (generation %llu) was "
                       "replaced (generation %llu)",
                       name, (unsigned long long)generation, (unsigned long long)now_gen);
    goto out;
  }
  p.seq = ++ep->next_seq;
  lw_error_t why;
  st = lw__mailbox_post_control(ep->mb, &p, &why);
  pthread_mutex_unlock(&ep->post_mu);
  if (st == LW_INVALID_ARGUMENT) {
    // The request itself was bad (the parent's own doing): nothing was written.
    st = lw__error_set(err, st, (int32_t)ep->index, 0, "%s: %s", name, why.message);
    goto out;
  }
  // Any other failure means the control frame was not IDLE although every earlier round trip
  // on this endpoint (serialized by ctl_mu) consumed its ack: the child wrote it. Unless the
  // child is dead: a round trip that saw the death before the scheduler did (from the fork
  // server's exit table) gave up and left its request there, and a dead child broke nothing.
  // Calling that a violation would misname the death and drop the reports in its ring.
  if (st != LW_OK && lw__ep_check_dead(ep)) {
    char desc[192];
    lw__ep_describe_exit(ep, desc, sizeof(desc));
    st = lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0, "%s: %s", name, desc);
    goto out;
  }
  if (st != LW_OK) {
    st = lw__ep_violation(ep, why.message, err);
    goto out;
  }
  control_cond_t c = {ep->mb};
  int64_t deadline = lw__now_ns() + CONTROL_TIMEOUT_NS;
  // Liveness on this thread's own clock: the child's mailbox loop must beat while it owes an
  // answer, or it is stopped or wedged and the round trip would otherwise wait 30 s.
  int64_t live = ep->liveness_timeout_ns;
  uint64_t beat = atomic_load_explicit(&ep->mb->header.heartbeat, memory_order_relaxed);
  int64_t beat_at = lw__now_ns();
  for (;;) {
    int64_t slice = lw__now_ns() + CONTROL_SLICE_NS;
    (void)lw__waitword_wait(&ep->mb->control.done_word, control_done, &c, slice, true);
    if (control_done(&c)) break;
    if (lw__ep_check_dead(ep)) {
      char desc[192];
      // Names a liveness kill too ("no heartbeat for N ms ..."), whoever noticed it first.
      lw__ep_describe_exit(ep, desc, sizeof(desc));
      st = lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                         "%s: %s while a control waited for its answer", name, desc);
      goto out;
    }
    int64_t now = lw__now_ns();
    uint64_t b = atomic_load_explicit(&ep->mb->header.heartbeat, memory_order_relaxed);
    if (b != beat || sub_function_running(ep)) {
      beat = b;
      beat_at = now;
    } else if (live > 0 && now - beat_at >= live) {
      int64_t ms = (now - beat_at) / 1000000;
      atomic_store(&ep->hb_killed_ms, ms > 0 ? ms : 1);
      lw__ep_kill(ep);  // the scheduler (or the supervisor's replay) handles the death
      st = lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                         "%s: no heartbeat for %lld ms (stopped or wedged) while a control "
                         "waited for its answer; the child was killed",
                         name, (long long)ms);
      goto out;
    }
    if (lw__now_ns() >= deadline) {
      st = lw__error_set(err, LW_DEADLINE_EXCEEDED, (int32_t)ep->index, 0,
                         "%s: no answer to a control within 30 s", name);
      goto out;
    }
  }
  st = lw__mailbox_consume_control(ep->mb, out_ack, &why);
  // CONTROL_DONE was seen, so any failure here is the child's: a garbage state or ack.
  if (st != LW_OK) st = lw__ep_violation(ep, why.message, err);
out:
  pthread_mutex_unlock(&ep->ctl_mu);
  return st;
}

static lw_status_t local_post_task(lw_endpoint_t *ep, uint32_t frame, lw_mb_task_post_t *p,
                                   lw_error_t *err) {
  uint64_t task_id = p->identity.task_id;
  pthread_mutex_lock(&ep->post_mu);
  p->seq = ++ep->next_seq;
  p->identity.dispatch_id = ++ep->next_dispatch;
  p->identity.generation = ep->generation;
  lw_error_t why;
  lw_status_t st = check_header(ep, err);
  if (st == LW_OK) st = lw__mailbox_post_task(ep->mb, frame, p, &why);
  pthread_mutex_unlock(&ep->post_mu);
  if (st == LW_INVALID_ARGUMENT) {
    // A bad post (the parent's own doing): nothing was written.
    char name[32];
    return lw__error_set(err, st, (int32_t)ep->index, task_id, "%s: %s",
                         lw__ep_name(ep, name, sizeof(name)), why.message);
  }
  if (st != LW_OK && st != LW_CHILD_EXITED) {
    // The frame is free in the caller's record (its last result was consumed), so a state
    // other than IDLE was written by the child.
    st = lw__ep_violation(ep, why.message, err);
  }
  if (st != LW_OK) return st;
  lw__ep_stats_note_post(ep);
  return LW_OK;
}

static lw_status_t local_pop_completion(lw_endpoint_t *ep, bool next, lw_mb_completion_t *out,
                                        lw_error_t *err) {
  return next ? lw__mailbox_pop_next_completion(ep->mb, out, err)
              : lw__mailbox_pop_completion(ep->mb, out, err);
}

static lw_status_t local_take_result(lw_endpoint_t *ep, const lw_mb_completion_t *c,
                                     const lw_mb_identity_t *expect, lw_mb_task_result_t *out,
                                     lw_error_t *err) {
  return lw__mailbox_consume_task(ep->mb, c, expect, out, err);
}

static bool local_cancel_task(lw_endpoint_t *ep, uint32_t frame, uint64_t dispatch_id) {
  return lw__mailbox_cancel_task(ep->mb, frame, dispatch_id);
}

static uint64_t local_heartbeat(const lw_endpoint_t *ep) {
  // Relaxed: only movement matters, and the value carries no other data.
  return atomic_load_explicit(&ep->mb->header.heartbeat, memory_order_relaxed);
}

// A chip child stamps started_ns when the kernel starts (only "non-zero" is used: the value is
// the child's) and zeroes it before the task's terminal state, so a frame whose task ended
// (its completion not drained yet, or the child died before it pushed it) counts as started
// too, as it did when the post zeroed started_ns: the death of such a child words the task
// as cut short by it (a task withdrawn while queued included). Escalation looks at
// task_ended first. A sub child takes the frame to TASK_RUNNING right before it calls the
// function.
static bool local_task_started(const lw_endpoint_t *ep, uint32_t frame) {
  const lw_mb_task_t *ft = &ep->mb->task[frame];
  uint32_t state = atomic_load(&ft->state);
  if (ep->kind == LW_MB_CHILD_SUB) return state != LW_MB_TASK_READY;
  if (state == LW_MB_TASK_READY || state == LW_MB_TASK_RUNNING) {
    return atomic_load(&ft->started_ns) != 0;
  }
  return state != LW_MB_TASK_IDLE;  // ended (or a state no child writes)
}

static bool local_task_ended(const lw_endpoint_t *ep, uint32_t frame) {
  return lw__mailbox_task_state_is_terminal(atomic_load(&ep->mb->task[frame].state));
}

const lw_endpoint_ops_t lw__ep_local_ops = {
    .post_task = local_post_task,
    .post_control = local_post_control,
    .pop_completion = local_pop_completion,
    .take_result = local_take_result,
    .cancel_task = local_cancel_task,
    .heartbeat = local_heartbeat,
    .task_started = local_task_started,
    .task_ended = local_task_ended,
    .describe_death = local_describe_death,
};
