// parent/supervise.c — bringing a dead child back: crash-loop bound, a fresh mailbox, a new
// child from the fork server, and every registered callable replayed before it takes work.
//
// Runs on the worker's supervisor thread, so the scheduler keeps serving the other children
// meanwhile. The endpoint does not take tasks and the scheduler does not drain its ring
// (accepting = false) until the replay is complete, so the replay reads the new child's
// completions straight from the ring; tasks directed to it wait in its queue.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/log.h"
#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "parent/callables.h"
#include "parent/supervise.h"
#include "parent/arena.h"
#include "parent/endpoint.h"

#define REPLAY_TIMEOUT_NS (60ll * 1000 * 1000 * 1000)

// Records a death; true when the child died respawn_max times within the window.
static bool crash_loop(lw_supervisor_t *sup, lw_endpoint_t *ep, int64_t now) {
  lw_sup_child_t *sc = &sup->child[ep->slot];
  sc->deaths[sc->n_deaths % LW_SUP_DEATH_LOG] = now;
  sc->n_deaths++;
  uint32_t max = sup->links.respawn_max;
  if (max == 0) return false;  // no bound
  if (max > LW_SUP_DEATH_LOG) max = LW_SUP_DEATH_LOG;
  if (sc->n_deaths < max) return false;
  int64_t oldest = sc->deaths[(sc->n_deaths - max) % LW_SUP_DEATH_LOG];
  return now - oldest <= sup->links.respawn_window_ns;
}

// Waits for the completion of control_id on ep's ring (nothing else is in flight on a child
// that was just started).
static lw_status_t await_control(lw_supervisor_t *sup, lw_endpoint_t *ep, uint64_t control_id,
                                 uint64_t *out_value, lw_error_t *err) {
  int64_t deadline = lw__now_ns() + REPLAY_TIMEOUT_NS;
  for (;;) {
    lw_mb_completion_t c;
    lw_status_t st = lw__ep_pop_completion(ep, false, &c, err);
    if (st == LW_OK && c.kind == LW_MB_COMPLETION_CONTROL && c.control_id == control_id) {
      *out_value = c.value;
      if (c.status != LW_OK) {
        *err = c.error;
        err->code = (lw_status_t)c.status;
      }
      return (lw_status_t)c.status;
    }
    if (st == LW_OK) {
      // Not ours: a register or unregister a user posted to the new child meanwhile.
      if (c.kind == LW_MB_COMPLETION_CONTROL) {
        lw_wop_t *op = NULL;
        c.error.worker_id = (int32_t)ep->index;
        pthread_mutex_lock(&sup->links.calls->mu);
        bool done = lw__wop_report(sup->links.calls, ep->index, c.control_id, (lw_status_t)c.status,
                                   c.value, &c.error, &op);
        pthread_mutex_unlock(&sup->links.calls->mu);
        if (done) lw__wop_complete(op);
      }
      continue;
    }
    if (st != LW_NOT_FOUND) {
      // A malformed ring: the new child is broken. CHILD_EXITED, so the respawn loop kills it
      // and tries again (within the crash-loop bound) rather than failing the chip for good.
      lw_error_t why = *err;
      return lw__ep_violation(ep, why.message, err);
    }
    if (lw__ep_check_dead(ep)) {
      return lw__error_set(err, LW_CHILD_EXITED, (int32_t)ep->index, 0,
                           "the respawned child died during the replay");
    }
    if (lw__now_ns() >= deadline) {
      return lw__error_set(err, LW_DEADLINE_EXCEEDED, (int32_t)ep->index, 0,
                           "replay of a callable did not finish in time");
    }
    sched_yield();
  }
}

static lw_status_t replay_chip(lw_supervisor_t *sup, lw_endpoint_t *ep, lw_error_t *err) {
  for (uint32_t i = 0; i < LW_MAX_CALLABLES; ++i) {
    pthread_mutex_lock(&sup->links.calls->mu);
    lw_wcallable_t *c = &sup->links.calls->table[i];
    // A callable whose unregister is deferred still has queued tasks that will be posted here:
    // the new child needs it until that unregister is posted. Once the unregister is due (its
    // last pin went), no task of it is left: the new child does not get it, and the unregister,
    // bound to the children that gave local ids, skips this one.
    const lw_wop_t *deferred = c->deferred_unregister;
    bool live = (c->state == LW_WC_LIVE ||
                 (c->state == LW_WC_UNREGISTERING && deferred != NULL && !deferred->due)) &&
                c->kind == LW_WC_CHIP;
    lw_mb_control_post_t p;
    memset(&p, 0, sizeof(p));
    if (live) {
      // A pin for the replay's round trip: the slot, its strings and its arena image (which
      // the child reads while it loads) stay as they are until the child answered, even if
      // the callable is unregistered meanwhile (that unregister waits for the pin, as for a
      // queued task, and is posted to this child once it is dropped).
      c->pins++;
      p.command = LW_MB_CMD_REGISTER;
      p.control_id = ((uint64_t)0xfe << 56) | ((uint64_t)i << 8) | ep->index;  // replay ids
      p.image_offset = (uint64_t)((uint8_t *)c->image - sup->links.arena->base);
      p.image_bytes = c->image_bytes;
      p.n_params = c->n_params;
      memcpy(p.param_dirs, c->param_dirs, sizeof(p.param_dirs));
      p.name = c->name;
      p.entry = c->entry;
      p.format = c->format;
      p.build_options = c->build_options;
    }
    pthread_mutex_unlock(&sup->links.calls->mu);
    if (!live) continue;
    lw_mb_control_ack_t ack;
    uint64_t local = 0;
    lw_status_t st = lw__ep_control(ep, &p, &ack, err);
    if (st == LW_OK && ack.status != LW_OK) {
      *err = ack.error;
      st = ack.status;
    }
    if (st == LW_OK) st = await_control(sup, ep, p.control_id, &local, err);
    pthread_mutex_lock(&sup->links.calls->mu);
    if (st != LW_OK) {
      lw__wc_unpin(sup->links.calls, i);  // the replay's pin
      pthread_mutex_unlock(&sup->links.calls->mu);
      return st;
    }
    // The replay's pin kept the slot (no other callable can have taken it) and kept any
    // unregister that started meanwhile deferred, so the callable is still wanted here: the new
    // child's id is recorded, and that unregister reaches this child once the pin is dropped.
    c->local[ep->index] = local;
    // The child that gave it: the replay's own. From here an unregister is posted to this
    // child even before it takes work; a replay that loses its child starts over with the
    // next one, which records its own.
    pthread_mutex_lock(&ep->post_mu);
    c->gen[ep->index] = ep->generation;
    pthread_mutex_unlock(&ep->post_mu);
    lw__wc_unpin(sup->links.calls, i);  // the replay's pin: a deferred unregister may now be posted
    pthread_mutex_unlock(&sup->links.calls->mu);
  }
  return LW_OK;
}

// Replays the sub function table in order, holding sup->links.calls->sub_mu so that no register_sub
// changes the table meanwhile; the child counts as in step only once all of it was replayed.
static lw_status_t replay_subs(lw_supervisor_t *sup, lw_endpoint_t *ep, lw_error_t *err) {
  pthread_mutex_lock(&sup->links.calls->sub_mu);
  lw_status_t st = LW_OK;
  for (uint32_t i = 0; i < sup->links.calls->n_sub_fns && st == LW_OK; ++i) {
    lw_mb_control_post_t p;
    memset(&p, 0, sizeof(p));
    p.command = LW_MB_CMD_REGISTER_SUB;
    p.control_id = sup->links.calls->sub_tags[i];
    p.target = (uint64_t)(uintptr_t)sup->links.calls->sub_fns[i];
    p.name = sup->links.calls->sub_names[i];
    lw_mb_control_ack_t ack;
    st = lw__ep_control(ep, &p, &ack, err);
    if (st == LW_OK && ack.status != LW_OK) {
      *err = ack.error;
      st = ack.status;
    } else if (st == LW_OK && ack.value != i) {
      st = lw__error_set(err, LW_INTERNAL, (int32_t)ep->index, 0,
                         "sub replay gave index %llu, expected %u",
                         (unsigned long long)ack.value, i);
    }
  }
  if (st == LW_OK) {
    pthread_mutex_lock(&ep->post_mu);
    ep->sub_synced_gen = ep->generation;
    pthread_mutex_unlock(&ep->post_mu);
  }
  pthread_mutex_unlock(&sup->links.calls->sub_mu);
  return st;
}

static void fail_for_good(lw_supervisor_t *sup, lw_endpoint_t *ep, const char *why) {
  char name[32];
  // A destroy that meets a child waiting for its respawn ends it as planned: worth a line at
  // INFO, not a warning to the user who asked for the destroy.
  bool shutting_down = atomic_load(sup->links.stopping);
  lw__log(shutting_down ? LW_LOG_INFO : LW_LOG_WARN,
          "%s: failed for good (%s); its tasks fail at once",
          lw__ep_name(ep, name, sizeof(name)), why);
  lw__ep_trace(ep, LW_TRACE_FAILED_FOR_GOOD, 0, 0, why);
  char desc[sizeof(ep->exit_desc)], both[sizeof(ep->exit_desc)];
  lw__ep_exit_desc(ep, desc, sizeof(desc));
  // why is the news: it is kept whole, and the death before it shortened to fit, if need be.
  // Built piece by piece (no snprintf of two bounded strings, which -O3's truncation check
  // cannot prove fits and a Release build with -Werror would refuse).
  size_t why_len = strlen(why);
  size_t room = sizeof(both) > why_len + 3 ? sizeof(both) - why_len - 3 : 0;
  size_t desc_len = strnlen(desc, room);
  memcpy(both, desc, desc_len);
  size_t at = desc_len;
  if (at + 2 < sizeof(both)) {
    memcpy(both + at, "; ", 2);
    at += 2;
  }
  size_t tail = why_len < sizeof(both) - 1 - at ? why_len : sizeof(both) - 1 - at;
  memcpy(both + at, why, tail);
  both[at + tail] = '\0';
  lw__ep_set_exit_desc(ep, both);
  sup->links.pass_lock(sup->links.ctx);  // accepting changes under the DAG owner's token
  atomic_store(&ep->state, LW_EP_DEAD);
  ep->accepting = false;
  sup->links.pass_unlock(sup->links.ctx);
  sup->links.kick(sup->links.ctx);  // the dispatcher fails what waits for this chip
}

// One attempt: a fresh mailbox, a new child, INIT_READY, the replay.
static lw_status_t respawn_once(lw_supervisor_t *sup, lw_endpoint_t *ep, lw_error_t *err) {
  atomic_store(&ep->state, LW_EP_RESPAWNING);
  // A control round trip still running on the dead child sees RESPAWNING within one wait slice
  // and gives up; taking its lock (and the post lock) keeps it out of the mailbox reset.
  pthread_mutex_lock(&ep->ctl_mu);
  pthread_mutex_lock(&ep->post_mu);
  lw__mailbox_initialize(ep->mb, ep->kind, ep->index, sup->links.arena->bytes);
  // A destroy that began meanwhile set the shutdown word under this lock before the reset, or
  // sets it after: either way the new child sees it.
  if (atomic_load(sup->links.stopping)) atomic_store(&ep->mb->header.shutdown, 1);
  // The new child starts with a clean record: the old one's violation was reported at its death.
  atomic_store(&ep->violated, false);
  ep->mb->header.heartbeat_period_ns = (uint64_t)sup->links.heartbeat_period_ns;
  ep->mb->header.spin_budget_ns = (uint64_t)lw__spin_budget_ns();
  pthread_mutex_unlock(&ep->post_mu);
  pthread_mutex_unlock(&ep->ctl_mu);
  // The dead child's events are drained and its rings freed for the new one.
  lw__trace_area_reset(ep->trace);
  int64_t deadline = lw__deadline_after(sup->links.startup_timeout_ns);
  lw_status_t st = lw__ep_spawn(ep, deadline, err);
  if (st == LW_OK) st = lw__ep_wait_ready(ep, deadline, err);  // sets READY
  if (st == LW_OK) {
    st = ep->kind == LW_MB_CHILD_CHIP ? replay_chip(sup, ep, err) : replay_subs(sup, ep, err);
  }
  // Only a child that took its replay joins the scheduler's epoll set: until then its death
  // is this thread's business (the replay sees it), not the scheduler's.
  if (st == LW_OK) {
    if (!sup->links.watch(sup->links.ctx, ep, true)) {
      st = lw__error_set(err, LW_INTERNAL, (int32_t)ep->index, 0, "epoll_ctl failed");
    }
  }
  if (st != LW_OK && ep->pidfd >= 0) {
    (void)sup->links.watch(sup->links.ctx, ep, false);
    lw__ep_kill(ep);
    close(ep->pidfd);
    ep->pidfd = -1;
  }
  if (st != LW_OK && ep->kind == LW_MB_CHILD_CHIP) {
    // The scheduler never sees this child's death (its pidfd was not in the epoll set), so
    // what it was told is answered here, as lw__wop_fail_chip does for any death: an
    // unregister of a callable the replay had given it (posted before it took work) is done.
    lw_wop_t *done = NULL;
    pthread_mutex_lock(&sup->links.calls->mu);
    lw__wop_fail_chip(sup->links.calls, ep->index, err, &done);
    pthread_mutex_unlock(&sup->links.calls->mu);
    while (done) {
      lw_wop_t *next = done->next_done;
      lw__wop_complete(done);
      done = next;
    }
  }
  return st;
}

void lw__ep_respawn(lw_supervisor_t *sup, lw_endpoint_t *ep) {
  if (!sup->links.respawn) {
    fail_for_good(sup, ep, "respawn is off");
    return;
  }
  for (;;) {
    if (atomic_load(sup->links.stopping)) {
      fail_for_good(sup, ep, "the worker is shutting down");
      return;
    }
    if (crash_loop(sup, ep, lw__now_ns())) {
      char why[64];
      snprintf(why, sizeof(why), "crash loop: %u deaths within %lld ms", sup->links.respawn_max,
               (long long)(sup->links.respawn_window_ns / 1000000));
      fail_for_good(sup, ep, why);
      return;
    }
    lw_error_t err;
    lw_status_t st = respawn_once(sup, ep, &err);
    if (st == LW_OK) break;
    // The new child died too (killed again, or crashed while starting): another death that
    // counts toward the crash-loop bound. Anything else will not get better by retrying.
    if (st != LW_CHILD_EXITED) {
      // As long as the exit description holds, so that the cause ("fork server (pid N) is
      // gone: killed by SIGKILL") reaches the error messages whole.
      static const char kPrefix[] = "respawn failed: ";
      char why[sizeof(ep->exit_desc)];
      snprintf(why, sizeof(why), "%s%.*s", kPrefix, (int)(sizeof(why) - sizeof(kPrefix)),
               err.message);
      fail_for_good(sup, ep, why);
      return;
    }
  }
  sup->links.pass_lock(sup->links.ctx);  // accepting changes under the DAG owner's token
  // The new child's pidfd is in the scheduler's epoll set since respawn_once: if the child
  // died already, on_child_death took the endpoint back (RESPAWNING) and queued another
  // respawn. Taking work now would let tasks be posted into a mailbox that respawn resets.
  bool alive = atomic_load(&ep->state) == LW_EP_READY;
  uint32_t respawns = 0;
  if (alive) {
    respawns = ++sup->child[ep->slot].respawns;
    atomic_fetch_add_explicit(&ep->stats.respawns, 1, memory_order_relaxed);  // a counter only
    // Recorded before the endpoint takes work again: a caller that sees it accepting (and
    // stops the session after its next run) finds the respawn in the trace, before the new
    // child's runs.
    lw__ep_trace(ep, LW_TRACE_RESPAWN, 0, 0, "respawned");
    ep->accepting = true;
  }
  sup->links.pass_unlock(sup->links.ctx);
  if (alive) {
    char name[32];
    lw__log(LW_LOG_INFO, "%s: respawned (respawn %u), its callables replayed",
            lw__ep_name(ep, name, sizeof(name)), respawns);
    sup->links.kick(sup->links.ctx);
  }
}

// ---------------------------------------------------------------------------------------------
// The supervisor thread: respawns children whose death the scheduler reported.

void lw__supervisor_queue(lw_supervisor_t *sup, lw_endpoint_t *ep) {
  pthread_mutex_lock(&sup->mu);
  sup->child[ep->slot].pending = true;
  pthread_cond_signal(&sup->cv);
  pthread_mutex_unlock(&sup->mu);
}

static void *supervisor_main(void *arg) {
  lw_supervisor_t *sup = arg;
  lw__trace_role("supervisor", -1);
  pthread_mutex_lock(&sup->mu);
  for (;;) {
    uint32_t slot = UINT32_MAX;
    for (uint32_t s = 0; s < sup->links.n_children && slot == UINT32_MAX; ++s) {
      if (sup->child[s].pending) slot = s;
    }
    if (slot == UINT32_MAX) {
      if (sup->exit) break;
      pthread_cond_wait(&sup->cv, &sup->mu);
      continue;
    }
    sup->child[slot].pending = false;
    pthread_mutex_unlock(&sup->mu);
    lw__ep_respawn(sup, &sup->links.eps[slot]);
    pthread_mutex_lock(&sup->mu);
  }
  pthread_mutex_unlock(&sup->mu);
  return NULL;
}

lw_status_t lw__supervisor_initialize(lw_supervisor_t *sup, const lw_supervisor_links_t *links,
                                      lw_error_t *err) {
  memset(sup, 0, sizeof(*sup));
  sup->links = *links;
  pthread_mutex_init(&sup->mu, NULL);
  lw__cond_init_monotonic(&sup->cv);
  sup->initialized = true;
  sup->child = calloc(links->n_children, sizeof(*sup->child));
  if (!sup->child) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker: out of memory");
  }
  return LW_OK;
}

void lw__supervisor_deinitialize(lw_supervisor_t *sup) {
  if (!sup->initialized) return;
  free(sup->child);
  sup->child = NULL;
  pthread_mutex_destroy(&sup->mu);
  pthread_cond_destroy(&sup->cv);
  sup->initialized = false;
}

lw_status_t lw__supervisor_start(lw_supervisor_t *sup, lw_error_t *err) {
  return lw__thread_start(&sup->thread, "lw-supervise", "supervisor", supervisor_main, sup,
                          err);
}

// Tells the supervisor to leave once its queue is empty (a respawn under way sees `stopping`).
static void supervisor_wake(void *ctx) {
  lw_supervisor_t *sup = ctx;
  pthread_mutex_lock(&sup->mu);
  sup->exit = true;
  pthread_cond_signal(&sup->cv);
  pthread_mutex_unlock(&sup->mu);
}

void lw__supervisor_stop(lw_supervisor_t *sup) {
  lw__thread_stop(&sup->thread, supervisor_wake, sup);
}
