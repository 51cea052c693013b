// parent/sched.c — the scheduler thread: the single progress owner of a worker.
//
// Loop: drain every child's completion ring, dispatch ready tasks into free task frames,
// apply cancellations; when a pass makes no progress, spin briefly (pause, then yield), then
// sleep in one epoll_wait over the wake eventfd (children and other threads ring it), every
// child's pidfd (death) and the fork server's socket.
//
// Sleeping without losing a wake-up: the scheduler stores `sleeping = 1` (seq_cst) in every
// mailbox's parent line and in sched->sleeping, then re-checks the rings and kick_seq, and
// only then calls epoll_wait. A child pushes its completion (release) and then loads the
// sleeping flag (seq_cst): either the scheduler's re-check sees the entry or the child sees
// the flag and writes the eventfd. Threads that kick use kick_seq the same way.
#include "parent/sched.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "lanes/counter.h"
#include "lanes/error.h"
#include "lanes/log.h"
#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "parent/callables.h"
#include "parent/dag.h"
#include "parent/endpoint.h"
#include "parent/forkserver.h"
#include "parent/runs.h"
#include "parent/supervise.h"
#include "parent/task_reports.h"

#define TAG_WAKE 0xffffffffu
#define TAG_FS 0xfffffffeu
#define TAG_FS_SUBS 0xfffffffdu

// The scheduler's record of ep's child (sched->child, parent/sched.h).
static inline lw_sched_child_t *sched_child(lw_sched_t *sched, const lw_endpoint_t *ep) {
  return &sched->child[ep->slot];
}

// What a pass found and hands on once the token is given back. Intrusive lists, so
// nothing is ever dropped however much completes in one pass.
typedef struct pending_work {
  lw_run_t *finished;      // runs to complete (linked by next)
  lw_wop_t *ops;           // ops to complete (linked by next_done)
  lw_wop_t *unregisters;   // deferred unregisters to post (linked by next_done)
} pending_work_t;

// Takes the deferred unregisters whose last pin went (the token held). From here on they count as
// posted: a chip death reports on them, and a respawn no longer replays their callable.
static void take_due_unregisters(lw_sched_t *sched, pending_work_t *pw) {
  lw_callables_t *calls = sched->links.calls;
  if (!atomic_load_explicit(&calls->due_unregisters, memory_order_relaxed)) return;
  lw__sched_pass_hold_calls(sched);
  lw_wop_t *op;
  while ((op = atomic_load_explicit(&calls->due_unregisters, memory_order_relaxed)) != NULL) {
    atomic_store_explicit(&calls->due_unregisters, op->next_done, memory_order_relaxed);
    sched->links.calls->table[op->wc].deferred_unregister = NULL;
    op->next_done = pw->unregisters;
    pw->unregisters = op;
  }
}

static void flush(lw_sched_t *sched, pending_work_t *pw) {
  (void)sched;
  while (pw->finished) {
    lw_run_t *next = pw->finished->next;
    lw__run_complete(pw->finished);
    pw->finished = next;
  }
  while (pw->ops) {
    lw_wop_t *op = pw->ops;
    pw->ops = op->next_done;
    lw__wop_complete(op);
  }
  while (pw->unregisters) {
    lw_wop_t *op = pw->unregisters;
    pw->unregisters = op->next_done;
    lw__wop_start_unregister(op);
  }
}

static void kill_child(lw_endpoint_t *ep) {
  // Its pidfd reports the death and the normal path (on_child_death) fails its work.
  if (ep->pidfd >= 0) lw__forkserver_kill(ep->fs, ep->index, atomic_load(&ep->pid), ep->pidfd);
}

// A child that broke the protocol is not trusted again (the token held; the scheduler, or a thread
// dispatching): its mailbox is not read again (accepting = false takes it out of the drain,
// the sleep check and dispatch), and the scheduler kills it on its next pass (only the
// scheduler may use the pidfd). Its death fails what it held, naming the violation, and hands
// it to the supervisor. Never re-reading the bad ring is what lets the scheduler sleep until
// that death arrives.
static void break_child(lw_sched_t *sched, lw_endpoint_t *ep, const lw_error_t *why) {
  char name[32];
  lw__log(LW_LOG_WARN, "%s: protocol violation, the child is killed: %s",
          lw__ep_name(ep, name, sizeof(name)), why ? why->message : "found by a control");
  lw__ep_trace(ep, LW_TRACE_PROTOCOL, 0, 0, why ? why->message : "found by a control");
  if (why) {
    lw_error_t ignored;
    (void)lw__ep_violation(ep, why->message, &ignored);  // records the reason, kicks
  }
  ep->accepting = false;
  sched_child(sched, ep)->broken = true;
}

// ---------------------------------------------------------------------------------------------
// Completions (the token held)

static bool drain_endpoint(lw_sched_t *sched, lw_endpoint_t *ep, pending_work_t *pw) {
  bool progress = false;
  // A broken child's ring is never read again, not even after its death: it holds garbage.
  if (atomic_load(&ep->violated)) return false;
  // At most one ring's worth per pass: a child that keeps refilling its ring (well-formed
  // entries, but endless) cannot keep the scheduler here holding the token while submitters wait.
  // The first pop checks the ring's head when the tail holds nothing; the ones after it stop at
  // the first entry that is not there yet, without reading the head's line (the child writes it
  // at every push): a drain that finds work moves no line but the entries'.
  for (uint32_t n = 0; n < LW_MB_RING_ENTRIES; ++n) {
    lw_mb_completion_t c;
    lw_error_t err;
    lw_status_t st = lw__ep_pop_completion(ep, n > 0, &c, &err);
    if (st == LW_NOT_FOUND) {
      // Nothing at all: the pop read the head's line, where the pusher's CPU is. A hint only
      // (relaxed, any value) for the waits that follow (drain_partner).
      if (n == 0) {
        atomic_store_explicit(&ep->push_cpu,
                              atomic_load_explicit(&ep->mb->ring_head.cpu, memory_order_relaxed),
                              memory_order_relaxed);
      }
      break;
    }
    progress = true;
    if (st != LW_OK) {
      break_child(sched, ep, &err);
      break;
    }
    if (c.kind == LW_MB_COMPLETION_CONTROL) {
      if (ep->kind != LW_MB_CHILD_CHIP) {
        // A sub child answers every control in its control frame, and its index is no chip's:
        // a report here could only complete the op of the chip with that index.
        lw__error_set(&err, LW_INTERNAL, (int32_t)ep->index, 0,
                      "a sub child's ring holds a control report (control %llu); sub children "
                      "answer controls in the control frame only",
                      (unsigned long long)c.control_id);
        break_child(sched, ep, &err);
        break;
      }
      lw_wop_t *op = NULL;
      c.error.worker_id = (int32_t)ep->index;
      lw__sched_pass_hold_calls(sched);
      if (lw__wop_report(sched->links.calls, ep->index, c.control_id, (lw_status_t)c.status,
                         c.value, &c.error, &op)) {
        op->next_done = pw->ops;
        pw->ops = op;
      }
      continue;
    }
    lw_sched_child_t *sc = sched_child(sched, ep);
    lw_task_t *t = sc->frame_task[c.frame];
    lw_mb_task_result_t r;
    if (!t) {
      lw__error_set(&err, LW_INTERNAL, (int32_t)ep->index, 0,
                    "a completion names task frame %u, which holds no task", c.frame);
      break_child(sched, ep, &err);
      break;
    }
    if (lw__ep_take_result(ep, &c, &t->identity, &r, &err) != LW_OK) {
      break_child(sched, ep, &err);
      break;
    }
    sc->frame_task[c.frame] = NULL;
    sc->busy--;
    r.error.worker_id = (int32_t)ep->index;
    r.error.task_id = t->task_id;
    lw__task_report_child_times(t->run, t->task_id, r.queue_ns, r.kernel_ns);
    lw__task_finish(sched->links.dag, t, r.status, &r.error, &pw->finished);
  }
  return progress;
}

// ---------------------------------------------------------------------------------------------
// Dispatch (the token held)

// Posts t into a free frame of ep's child (the caller checked the child's busy count) and
// records it there. The frame search starts at the one after the last frame posted: tasks
// mostly end in the order they were posted, so that one is usually free.
static lw_status_t post_task(lw_sched_t *sched, lw_endpoint_t *ep, lw_task_t *t,
                             const lw_wcallable_t *c, lw_error_t *err) {
  lw_sched_child_t *sc = sched_child(sched, ep);
  uint32_t frame = sc->next_frame, looked = 0;
  while (looked < LW_MB_TASK_FRAMES && sc->frame_task[frame]) {
    frame = (frame + 1) % LW_MB_TASK_FRAMES;
    ++looked;
  }
  if (looked == LW_MB_TASK_FRAMES) {
    return lw__error_set(err, LW_INTERNAL, (int32_t)ep->index, t->task_id, "no free task frame");
  }
  lw_mb_task_post_t p;
  memset(&p, 0, sizeof(p));
  p.kind = t->kind;
  // A sub task names its function by index and by the tag the sub child registered there, so
  // the child refuses it rather than run another function.
  p.callable = t->kind == LW_MB_TASK_KERNEL ? c->local[ep->index]
                                            : lw__sub_task_callable(c->sub_tag, c->sub_index);
  p.timeout_ns = t->timeout_ns;
  p.args = t->args;
  p.identity.run_id = t->run->run_id;
  p.identity.task_id = t->task_id;
  LW_RETURN_IF_ERROR(lw__ep_post_task(ep, frame, &p, err));
  t->identity = p.identity;
  t->seen_started_at = 0;
  t->ep = ep;
  t->frame = frame;
  sc->frame_task[frame] = t;
  sc->busy++;
  sc->next_frame = (frame + 1) % LW_MB_TASK_FRAMES;
  return LW_OK;
}

static void post(lw_sched_t *sched, lw_endpoint_t *ep, lw_task_t *t, pending_work_t *pw) {
  lw__sched_pass_hold_calls(sched);  // the callable's words, its pin
  lw_wcallable_t *c = &sched->links.calls->table[t->wc];
  lw_error_t err;
  if (c->id != t->wc_id) {
    // The pins keep a slot from being reused while a task references it, so this cannot
    // happen; if it ever did, refusing is the only safe answer: the slot names other code.
    lw__error_set(&err, LW_INTERNAL, (int32_t)ep->index, t->task_id,
                  "task %llu of run %llu: its callable 0x%llx is gone (slot now holds 0x%llx); "
                  "refused rather than run other code",
                  (unsigned long long)t->task_id, (unsigned long long)t->run->run_id,
                  (unsigned long long)t->wc_id, (unsigned long long)c->id);
    lw__task_finish(sched->links.dag, t, LW_INTERNAL, &err, &pw->finished);
    return;
  }
  lw__dag_task_launch_on(sched->links.dag, t,
                         ep->kind == LW_MB_CHILD_CHIP ? (int32_t)ep->index : -1, &pw->finished);
  lw__task_report_posted(t->run, t->task_id, (int32_t)ep->index, lw__dag_now(sched->links.dag));
  // A chip task's pin goes with its post: the child applies posts in sequence order, so an
  // unregister posted from now on reaches it after this task pinned the callable there. A sub
  // task keeps its pin until it is finished (lw__task_finish drops it).
  if (t->kind == LW_MB_TASK_KERNEL) lw__wc_unpin(sched->links.calls, t->wc);
  int64_t t_post = lw__trace_on() ? lw__now_ns() : 0;
  lw_status_t posted = post_task(sched, ep, t, c, &err);
  if (t_post) {
    lw__trace_span(LW_TRACE_DISPATCH, t_post, lw__now_ns(), t->run->run_id, t->task_id,
                   (int32_t)ep->index, posted, sched->links.calls->table[t->wc].name);
  }
  if (posted != LW_OK) {
    // A violation found by the post: no more posts to this child (the scheduler kills it).
    if (atomic_load(&ep->violated)) break_child(sched, ep, NULL);
    err.worker_id = (int32_t)ep->index;
    err.task_id = t->task_id;
    lw__task_finish(sched->links.dag, t, err.code, &err, &pw->finished);
  }
}

static void fail_down(lw_sched_t *sched, lw_endpoint_t *ep, lw_task_t *t, pending_work_t *pw) {
  lw__sched_pass_hold_calls(sched);  // the callable's name
  lw_error_t err;
  char name[32], desc[192] = "";
  if (ep) lw__ep_exit_desc(ep, desc, sizeof(desc));
  lw__error_set(&err, LW_CHILD_EXITED, (int32_t)(ep ? ep->index : 0), t->task_id,
                "%s is down (%s); task %llu of run %llu (%s) cannot run",
                ep ? lw__ep_name(ep, name, sizeof(name)) : "every child",
                desc[0] ? desc : "no child alive",
                (unsigned long long)t->task_id, (unsigned long long)t->run->run_id,
                sched->links.calls->table[t->wc].name);
  lw__task_finish(sched->links.dag, t, LW_CHILD_EXITED, &err, &pw->finished);
}

static bool skip_if_stopped(lw_sched_t *sched, lw_task_t *t, pending_work_t *pw) {
  if (!lw__run_stopped(t->run)) return false;
  lw__task_skip(sched->links.dag, t, &pw->finished);
  return true;
}

// A task that names no chip goes to the least busy chip, and only while that chip holds fewer
// than this many posted tasks: deeper, it would be bound to a chip long before it could run
// there, while another chip might free up first. A task that names its chip may fill every
// frame (posted behind its producers, DESIGN 4.5). The chips' own queues are served first in
// each pass, so a steady stream of pinned tasks that keeps every chip at 16 or more holds the
// unpinned ones back until it eases (as it did at 16 frames).
#define UNPINNED_DEPTH 16u
_Static_assert(UNPINNED_DEPTH <= LW_MB_TASK_FRAMES, "a chip's frames hold the unpinned depth");

static bool dispatch(lw_sched_t *sched, pending_work_t *pw) {
  bool progress = false;
  uint32_t n_chips = sched->links.n_chips;
  for (uint32_t i = 0; i < n_chips; ++i) {
    lw_endpoint_t *ep = &sched->links.eps[i];
    lw_task_queue_t *q = &sched->links.dag->chip_q[i];
    bool dead = atomic_load(&ep->state) == LW_EP_DEAD;
    if (!dead && !ep->accepting) continue;  // respawning: its tasks wait for it
    const lw_sched_child_t *sc = &sched->child[i];
    while (q->head && (dead || (ep->accepting && sc->busy < LW_MB_TASK_FRAMES))) {
      lw_task_t *t = lw__dag_queue_pop(q);
      progress = true;
      if (skip_if_stopped(sched, t, pw)) continue;
      if (dead) {
        fail_down(sched, ep, t, pw);
        continue;
      }
      post(sched, ep, t, pw);
    }
  }
  while (sched->links.dag->any_q.head) {
    lw_endpoint_t *best = NULL;
    uint32_t best_busy = 0;
    bool any_alive = false;
    for (uint32_t i = 0; i < n_chips; ++i) {
      lw_endpoint_t *ep = &sched->links.eps[i];
      if (atomic_load(&ep->state) == LW_EP_DEAD) continue;
      any_alive = true;  // a respawning chip will take work again
      if (!ep->accepting) continue;
      uint32_t busy = sched->child[i].busy;
      if (busy < UNPINNED_DEPTH && (!best || busy < best_busy)) {
        best = ep;
        best_busy = busy;
      }
    }
    if (!best && any_alive) break;
    lw_task_t *t = lw__dag_queue_pop(&sched->links.dag->any_q);
    progress = true;
    if (skip_if_stopped(sched, t, pw)) continue;
    if (!best) {
      fail_down(sched, NULL, t, pw);
      continue;
    }
    post(sched, best, t, pw);
  }
  while (sched->links.dag->groups_head) {
    lw_group_t *g = sched->links.dag->groups_head;
    uint32_t need[LW_MAX_CHIPS] = {0};
    bool stopped = false, dead = false, fits = true;
    for (uint32_t i = 0; i < g->n; ++i) {
      lw_task_t *t = g->members[i];
      stopped |= lw__run_stopped(t->run);
      need[t->worker]++;
    }
    for (uint32_t c = 0; c < n_chips; ++c) {
      if (!need[c]) continue;
      if (atomic_load(&sched->links.eps[c].state) == LW_EP_DEAD) dead = true;
      if (!sched->links.eps[c].accepting || sched->child[c].busy + need[c] > LW_MB_TASK_FRAMES) {
        fits = false;
      }
    }
    if (!stopped && !dead && !fits) break;  // FIFO: later groups wait behind this one
    (void)lw__dag_group_pop(sched->links.dag);
    progress = true;
    // Copy the members: finishing the last one frees the group.
    uint32_t n = g->n;
    lw_task_t **members = sched->group_members;
    memcpy(members, g->members, n * sizeof(lw_task_t *));
    for (uint32_t i = 0; i < n; ++i) {
      lw_task_t *t = members[i];
      // A member that failed without being posted (skipped, failed down, refused) poisons the
      // rest of its group, which retires them: nothing is left to do for those.
      if (t->state != LW_TS_READY) continue;
      if (stopped) {
        lw__task_skip(sched->links.dag, t, &pw->finished);
      } else if (dead) {
        fail_down(sched, &sched->links.eps[t->worker], t, pw);
      } else {
        post(sched, &sched->links.eps[t->worker], t, pw);
      }
    }
  }
  while (sched->links.dag->sub_q.head) {
    lw_endpoint_t *idle = NULL;
    bool any_alive = false;
    for (uint32_t i = 0; i < sched->links.n_subs; ++i) {
      lw_endpoint_t *ep = &sched->links.eps[n_chips + i];
      if (atomic_load(&ep->state) == LW_EP_DEAD) continue;
      any_alive = true;
      if (!ep->accepting) continue;
      if (sched->child[n_chips + i].busy == 0) {
        idle = ep;
        break;
      }
    }
    if (!idle && any_alive) break;
    lw_task_t *t = lw__dag_queue_pop(&sched->links.dag->sub_q);
    progress = true;
    if (skip_if_stopped(sched, t, pw)) continue;
    if (!idle) {
      fail_down(sched, NULL, t, pw);
      continue;
    }
    post(sched, idle, t, pw);
  }
  return progress;
}

// The task in a child's next occupied frame at or after *f, with *f left on that frame; NULL
// once sc->busy of them were found (*found counts them), so a loop over a chip's frames costs
// what its occupied ones do (the token held). Loop:
//   for (uint32_t f = 0, n = 0; (t = next_busy_frame(sc, &f, &n)) != NULL; ++f)
static lw_task_t *next_busy_frame(const lw_sched_child_t *sc, uint32_t *f, uint32_t *found) {
  if (*found >= sc->busy) return NULL;
  for (; *f < LW_MB_TASK_FRAMES; ++*f) {
    if (sc->frame_task[*f]) {
      ++*found;
      return sc->frame_task[*f];
    }
  }
  return NULL;
}

// Cancels the running kernels of cancelled runs through their frames' cancel words. Looks at
// the frames only when a run stopped since it last looked: every stop (a cancel request, a
// failure, cancel_all below) bumps the DAG's stop_seq after it marked its run, and a stopped
// run's tasks are not posted afterwards (dispatch skips them), so a pass with stop_seq
// unchanged has nothing to cancel.
static void apply_cancels(lw_sched_t *sched) {
  uint32_t all = atomic_load(sched->links.cancel_all_seq);
  bool cancel_all = all != sched->cancel_all_seen;
  sched->cancel_all_seen = all;
  // The runs marked below have their queued tasks swept on the next pass.
  if (cancel_all) atomic_fetch_add(&sched->links.dag->stop_seq, 1);
  uint32_t stops = atomic_load(&sched->links.dag->stop_seq);
  if (stops == sched->cancel_stop_seen) return;
  sched->cancel_stop_seen = stops;
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    lw_endpoint_t *ep = &sched->links.eps[s];
    const lw_sched_child_t *sc = sched_child(sched, ep);
    lw_task_t *t;
    for (uint32_t f = 0, n = 0; (t = next_busy_frame(sc, &f, &n)) != NULL; ++f) {
      if (cancel_all) atomic_store(&t->run->handle.cancel_requested, 1);
      if (lw__handle_cancel_requested(&t->run->handle)) t->run->cancelled = true;
      // A cancelled run, or one that failed, stops its kernels still in flight.
      if (t->cancel_at == 0 && (t->run->cancelled || t->run->failed)) {
        t->cancel_at = lw__now_ns();
        (void)lw__ep_cancel_task(ep, f, t->identity.dispatch_id);
      }
    }
  }
  if (cancel_all) {
    // Every run not finished yet: queued ones (the orchestrator cancels them when it takes
    // them) and running ones whose tasks wait in the ready queues for a frame (dispatch skips
    // them), not only those with a task in a frame right now.
    pthread_mutex_lock(&sched->links.runs->mu);
    for (lw_run_t *r = sched->links.runs->unfinished_head; r; r = r->next_unfinished) {
      atomic_store(&r->handle.cancel_requested, 1);
    }
    pthread_mutex_unlock(&sched->links.runs->mu);
  }
}

// The owner's part of a pass once the inbox is applied: sweep the stopped runs out of the ready
// queues and dispatch (the token held). True when it did something.
static bool sweep_dispatch(lw_sched_t *sched, pending_work_t *pw) {
  bool progress = lw__dag_sweep_stopped(sched->links.dag, &pw->finished);
  progress |= dispatch(sched, pw);
  return progress;
}

// The same, then write the cancel words of stopped runs' tasks in flight: after the rings were
// drained, so a task whose completion is there is not taken for one still running (the
// scheduler's pass and a submitter's assist alike).
static bool sweep_dispatch_cancel(lw_sched_t *sched, pending_work_t *pw) {
  bool progress = sweep_dispatch(sched, pw);
  apply_cancels(sched);
  return progress;
}

// Whether the parent can see the task in frame f running (the endpoint's task_started).
static bool frame_started(const lw_endpoint_t *ep, uint32_t f) {
  return lw__ep_task_started(ep, f);
}

// How often the scheduler looks again at a cancelled or timed task that has not started.
#define START_POLL_NS (10ll * 1000 * 1000)

// Kills the children of kernels that ignore their cancel word past the grace period, or run
// past their timeout plus the grace (the token held). Everything is on the parent's clock: a
// kernel's time counts from when this thread first saw it running, and the grace from that or
// the cancel, whichever is later. A task that has not started (queued behind another kernel)
// is never escalated: its child withdraws it when cancelled (lw__mailbox_cancel_task), and a
// child that stops serving its mailbox is caught by check_liveness. Returns the next time
// something may be due (LW_DEADLINE_NEVER: nothing).
static int64_t check_escalations(lw_sched_t *sched, int64_t now) {
  int64_t next = LW_DEADLINE_NEVER;
  int64_t grace = sched->links.cancel_grace_ns;
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    lw_endpoint_t *ep = &sched->links.eps[s];
    if (atomic_load(&ep->state) != LW_EP_READY || !ep->accepting) continue;
    const lw_sched_child_t *sc = sched_child(sched, ep);
    lw_task_t *t;
    for (uint32_t f = 0, n = 0; (t = next_busy_frame(sc, &f, &n)) != NULL; ++f) {
      if (t->escalated != LW_OK) continue;
      if (!t->cancel_at && t->timeout_ns <= 0) continue;
      // Ended in the child (its completion is on the way): nothing runs to be stopped.
      if (lw__ep_task_ended(ep, f)) continue;
      if (!t->seen_started_at) {
        if (!frame_started(ep, f)) {
          if (now + START_POLL_NS < next) next = now + START_POLL_NS;
          continue;
        }
        t->seen_started_at = now;
      }
      int64_t due = LW_DEADLINE_NEVER;
      lw_status_t why = LW_OK;
      if (t->cancel_at) {
        int64_t from = t->cancel_at > t->seen_started_at ? t->cancel_at : t->seen_started_at;
        due = lw__add_ns_sat(from, grace);
        why = LW_CANCELLED;
      }
      if (t->timeout_ns > 0) {
        int64_t d = lw__add_ns_sat(lw__add_ns_sat(t->seen_started_at, t->timeout_ns), grace);
        if (d < due) {
          due = d;
          why = LW_DEADLINE_EXCEEDED;
        }
      }
      if (due == LW_DEADLINE_NEVER) continue;
      if (now >= due) {
        t->escalated = why;
        atomic_fetch_add_explicit(&ep->stats.escalations, 1, memory_order_relaxed);  // a counter
        char name[32];
        lw__log(LW_LOG_WARN,
                "%s: killing the child: task %llu of run %llu %s for %lld ms after %s",
                lw__ep_name(ep, name, sizeof(name)), (unsigned long long)t->task_id,
                (unsigned long long)t->run->run_id,
                why == LW_CANCELLED ? "ignored its cancel word" : "ran past its timeout",
                (long long)(grace / 1000000),
                why == LW_CANCELLED ? "the cancel" : "the timeout");
        lw__ep_trace(ep, LW_TRACE_ESCALATION, t->run->run_id, t->task_id,
                     why == LW_CANCELLED ? "ignored its cancel word" : "ran past its timeout");
        kill_child(ep);  // its pidfd reports the death; on_child_death finishes the task
      } else if (due < next) {
        next = due;
      }
    }
  }
  return next;
}

// Whether the child owes the parent something its mailbox loop must pick up or serve: a
// posted task, or an async register/unregister whose end it has not reported (the token held). A
// sub child runs its function on the mailbox loop, so a running sub task does not count.
static bool ep_holds_work(lw_sched_t *sched, lw_endpoint_t *ep) {
  if (ep->kind != LW_MB_CHILD_CHIP) {
    const lw_sched_child_t *sc = sched_child(sched, ep);
    lw_task_t *t;
    for (uint32_t f = 0, n = 0; (t = next_busy_frame(sc, &f, &n)) != NULL; ++f) {
      if (atomic_load(&ep->mb->task[f].state) == LW_MB_TASK_READY) return true;
    }
    return false;
  }
  if (sched_child(sched, ep)->busy > 0) return true;
  // No op alive (the count is an atomic): nothing to look for, and no lock to take. An op that
  // starts right after is seen by the next pass.
  if (atomic_load_explicit(&sched->links.calls->live_ops, memory_order_relaxed) == 0) return false;
  lw__sched_pass_hold_calls(sched);
  for (lw_wop_t *op = sched->links.calls->ops; op; op = op->next_pending) {
    if (!op->sub && !op->reported[ep->index]) return true;
  }
  return false;
}

// Kills a child that holds work while its heartbeat stands still for liveness_timeout_ns
// (SIGSTOP, a wedged mailbox loop): handled like a death, so nothing waits forever on it. The
// clock starts when the scheduler first sees the child hold work, so an idle child that was
// stopped is caught once it is given work (the token held). Returns the next time to look.
static int64_t check_liveness(lw_sched_t *sched, int64_t now) {
  int64_t live = sched->links.liveness_timeout_ns;
  if (live <= 0) return LW_DEADLINE_NEVER;
  int64_t next = LW_DEADLINE_NEVER;
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    lw_endpoint_t *ep = &sched->links.eps[s];
    lw_sched_child_t *sc = &sched->child[s];
    if (atomic_load(&ep->state) != LW_EP_READY || !ep->accepting || ep->pidfd < 0 ||
        atomic_load(&ep->hb_killed_ms) != 0 || !ep_holds_work(sched, ep)) {
      sc->hb_watching = false;
      continue;
    }
    uint64_t beat = lw__ep_heartbeat(ep);
    if (!sc->hb_watching || beat != sc->hb_seen) {
      sc->hb_watching = true;
      sc->hb_seen = beat;
      sc->hb_seen_at = now;
    }
    int64_t due = lw__add_ns_sat(sc->hb_seen_at, live);
    if (now >= due) {
      int64_t ms = (now - sc->hb_seen_at) / 1000000;
      atomic_store(&ep->hb_killed_ms, ms > 0 ? ms : 1);
      atomic_fetch_add_explicit(&ep->stats.liveness_kills, 1, memory_order_relaxed);  // a counter
      sc->hb_watching = false;
      char name[32];
      lw__log(LW_LOG_WARN, "%s: killing the child: no heartbeat for %lld ms while it holds work "
              "(stopped or wedged)", lw__ep_name(ep, name, sizeof(name)), (long long)ms);
      lw__ep_trace(ep, LW_TRACE_LIVENESS_KILL, 0, 0, "no heartbeat");
      kill_child(ep);  // its pidfd reports the death; on_child_death fails its work
      continue;
    }
    // Look again a little after the child's next beat is due, or at the deadline.
    int64_t again = lw__add_ns_sat(now, sched->links.heartbeat_period_ns);
    if (again > due) again = due;
    if (again < next) next = again;
  }
  return next;
}

// ---------------------------------------------------------------------------------------------
// Child death (no lock held on entry)

// The run span the dead child never recorded, for the task in frame f that it had started
// (the token held): from the kernel's start the child stamped (started_ns, used only when it lies
// between the post and the death: the child's memory is untrusted), else from the post, to the
// death; with the task's final status and the death on it (lanes/trace.h,
// lw__trace_area_record_dead_run, which leaves it out when the child recorded the run itself).
static void trace_dead_run(lw_sched_t *sched, lw_endpoint_t *ep, uint32_t f, const lw_task_t *t,
                           lw_status_t status, int64_t died_at, const char *desc) {
  if (!lw__trace_on()) return;
  bool chip = ep->kind == LW_MB_CHILD_CHIP;
  int64_t posted = lw__task_report_posted_ns(t->run, t->task_id);
  bool readable = !atomic_load(&ep->violated);
  int64_t started = readable ? (int64_t)atomic_load(&ep->mb->task[f].started_ns) : 0;
  lw_trace_dead_run_t r = {.t1_ns = died_at, .run_id = t->run->run_id, .task_id = t->task_id,
                           .chip = (int32_t)ep->index, .status = status,
                           .callable = sched->links.calls->table[t->wc].name};
  if (started > 0 && started >= posted && started <= died_at) {
    r.t0_ns = started;
    r.start_from = LW_TRACE_START_KERNEL;
  } else {
    r.t0_ns = posted > 0 && posted <= died_at ? posted : died_at;
    r.start_from = LW_TRACE_START_DISPATCH;
  }
  // "child died: killed by SIGSEGV": the pid that opens desc is the span's process already,
  // and a trace name holds 47 bytes.
  static const char kPrefix[] = "child died: ";
  const char *how = desc;
  if (strncmp(how, "child pid ", 10) == 0) {
    const char *p = how + 10;
    while (*p >= '0' && *p <= '9') ++p;
    if (*p == ' ') how = p + 1;
  }
  char death[LW_TRACE_NAME_BYTES];
  size_t n = strnlen(how, sizeof(death) - sizeof(kPrefix));
  memcpy(death, kPrefix, sizeof(kPrefix) - 1);
  memcpy(death + sizeof(kPrefix) - 1, how, n);
  death[sizeof(kPrefix) - 1 + n] = '\0';
  r.death = death;
  lw__trace_area_record_dead_run(ep->trace, (int32_t)atomic_load(&ep->pid),
                                 chip ? "run lane" : "sub loop", &r);
}

static void on_child_death(lw_sched_t *sched, lw_endpoint_t *ep, pending_work_t *pw) {
  if (ep->pidfd < 0) return;  // already handled
  // When the parent learned of the death: the end of the runs it cut short.
  int64_t died_at = lw__now_ns();
  atomic_fetch_add_explicit(&ep->stats.deaths, 1, memory_order_relaxed);  // a counter only
  char desc[192];
  // Names a liveness kill (hb_killed_ms) too; the mark stays until the next spawn.
  lw__ep_describe_exit(ep, desc, sizeof(desc));
  lw__ep_set_exit_desc(ep, desc);
  (void)lw__sched_watch(sched, ep, false);
  close(ep->pidfd);
  ep->pidfd = -1;
  char name[32];
  lw__ep_name(ep, name, sizeof(name));
  lw__log(LW_LOG_WARN, "%s: the child died (%s); its work fails, respawn %s", name, desc,
          sched->links.respawn ? "follows" : "is off");
  lw__ep_trace(ep, LW_TRACE_DEATH, 0, 0, desc);
  int64_t grace_ms = sched->links.cancel_grace_ns / 1000000;
  lw__sched_pass_lock(sched);
  lw__sched_pass_hold_calls(sched);  // callable names, the chip's ops
  ep->accepting = false;
  atomic_store(&ep->state, LW_EP_RESPAWNING);
  // Whatever the child reported before it died still counts (unless it broke the protocol:
  // drain_endpoint then reads nothing).
  (void)drain_endpoint(sched, ep, pw);
  // After the drain, which may itself find garbage: the kill is done, the next child is new.
  lw_sched_child_t *sc = sched_child(sched, ep);
  sc->broken = false;
  for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) {
    lw_task_t *t = sc->frame_task[f];
    if (!t) continue;
    sc->frame_task[f] = NULL;
    sc->busy--;
    lw_error_t err;
    const char *callable = sched->links.calls->table[t->wc].name;
    unsigned long long tid = t->task_id, rid = t->run->run_id;
    // Whether the task's run had begun, so the death cut it short (its trace span). A mailbox
    // that broke the protocol is not read: its tasks count only when escalated (the parent saw
    // them start).
    bool ran = t->escalated != LW_OK || (!atomic_load(&ep->violated) && frame_started(ep, f));
    if (t->escalated == LW_DEADLINE_EXCEEDED) {
      lw__error_set(&err, LW_DEADLINE_EXCEEDED, (int32_t)ep->index, t->task_id,
                    "%s: task %llu of run %llu (%s) ran past its %lld ms timeout and ignored "
                    "cancellation for %lld ms: %s",
                    name, tid, rid, callable, (long long)(t->timeout_ns / 1000000),
                    (long long)grace_ms, desc);
    } else if (t->escalated == LW_CANCELLED) {
      lw__error_set(&err, LW_CANCELLED, (int32_t)ep->index, t->task_id,
                    "%s: task %llu of run %llu (%s) ignored cancellation for %lld ms: %s", name,
                    tid, rid, callable, (long long)grace_ms, desc);
    } else if (!atomic_load(&ep->violated) && !frame_started(ep, f)) {
      // Queued on the chip behind the kernel that took the child down: it never ran, so the
      // message must not name it as the cause. (A violated mailbox is not read; its tasks get
      // the general wording below.)
      lw__error_set(&err, LW_CHILD_EXITED, (int32_t)ep->index, t->task_id,
                    "%s: %s before task %llu of run %llu (%s) started (it was queued on the "
                    "chip)",
                    name, desc, tid, rid, callable);
    } else {
      lw__error_set(&err, LW_CHILD_EXITED, (int32_t)ep->index, t->task_id,
                    "%s: %s during run of %s (task %llu of run %llu)", name, desc,
                    callable, tid, rid);
    }
    if (ran) trace_dead_run(sched, ep, f, t, err.code, died_at, desc);
    lw__task_finish(sched->links.dag, t, err.code, &err, &pw->finished);
  }
  if (ep->kind == LW_MB_CHILD_CHIP) {
    lw_error_t err;
    lw__error_set(&err, LW_CHILD_EXITED, (int32_t)ep->index, 0, "%s: %s", name, desc);
    lw__wop_fail_chip(sched->links.calls, ep->index, &err, &pw->ops);
  }
  lw__sched_pass_unlock(sched);
  flush(sched, pw);
  // The supervisor thread respawns it; the scheduler goes on serving the other children.
  lw__supervisor_queue(sched->links.sup, ep);
}

// ---------------------------------------------------------------------------------------------

// The mailboxes the scheduler may touch: a child being respawned has its mailbox reset by the
// supervisor (maybe several times, if the new child dies too). Only threads holding the token
// clear accepting (on_child_death before handing the child over; break_child), and the
// supervisor sets it only after a replay succeeded, so this check cannot race a reset. A
// broken child's mailbox is not read either: its ring may say anything, forever.
static bool ep_mailbox_live(lw_endpoint_t *ep) {
  return atomic_load(&ep->accepting) && !atomic_load(&ep->violated);
}

static bool rings_pending(lw_sched_t *sched) {
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    if (!ep_mailbox_live(&sched->links.eps[s])) continue;
    if (lw__mailbox_completion_pending(sched->links.eps[s].mb)) return true;
  }
  return false;
}

// The children's side of the sleep handshake: 1 asks a child to ring the wake eventfd after it
// pushed a completion.
static void set_mailboxes_sleeping(lw_sched_t *sched, uint32_t v) {
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    if (ep_mailbox_live(&sched->links.eps[s]))
      atomic_store(&sched->links.eps[s].mb->parent.sleeping, v);
  }
}

static void set_sleeping(lw_sched_t *sched, uint32_t v) {
  set_mailboxes_sleeping(sched, v);
  atomic_store(&sched->sleeping, v);
}

// The scheduler whose token this thread holds (NULL: none): a wait on a run's handle from
// such a thread must not drain (the token is not recursive; lw__sched_wait_draining).
static _Thread_local const lw_sched_t *tls_token_held;
// The scheduler whose thread this is (set by sched_main).
static _Thread_local const lw_sched_t *tls_scheduler_of;

static void *sched_main(void *arg) {
  lw_sched_t *sched = arg;
  tls_scheduler_of = sched;
  lw__trace_role("scheduler", -1);
  pending_work_t pw;
  memset(&pw, 0, sizeof(pw));
  lw__spin_t idle = LW__SPIN_INIT;  // how long the loop has found nothing to do
  uint64_t seen_kick = atomic_load(&sched->kick_seq);
  uint32_t seen_cancel = atomic_load(sched->links.cancel_all_seq);
  // Whether the next pass waits for the token. Only the first after a sleep (or at start) does:
  // then deaths, escalations and liveness may be due, which only this thread handles. While it
  // spins, a pass under way on another thread (a submitter's or a waiting caller's assist)
  // does the same work, so it takes the lock only when free: a thread that waits for the token
  // sleeps on its futex, and on a many-core host the scheduler and a submitter did, each
  // time the other held it.
  bool wait_for_lock = true;
  // When the next escalation or liveness check is due, as of this thread's last pass.
  int64_t next_due = LW_DEADLINE_NEVER;
  while (!atomic_load(&sched->exit)) {
    bool progress = false;
    bool lock_busy = false;  // this round's trylock failed: another thread is in a pass
    if (wait_for_lock) {
      lw__sched_pass_lock(sched);
    } else if (!lw__sched_pass_try(sched)) {
      lock_busy = true;
      goto idle;
    }
    wait_for_lock = false;
    // The kicks this pass answers: read before it looks at anything, so a kick that comes with
    // a post this pass misses stays unanswered and brings another pass.
    uint64_t kick = atomic_load(&sched->kick_seq);
    uint32_t cancel_seq = atomic_load(sched->links.cancel_all_seq);
    // A submitter may have run the last pass (lw__sched_assist).
    lw__dag_set_owner(sched->links.dag, 0);
    // The DAG's inbox first (submits, scopes, runs' ends), in posting order, before the
    // completions: a run's orch error is recorded before the results drained in this pass, so
    // a task still in flight when its orch function failed counts as stopped. This thread is
    // the DAG's owner.
    progress |= lw__dag_step(sched->links.dag, &pw.finished);
    sched->drains_deferred = 0;  // drained below
    for (uint32_t s = 0; s < sched->n_children; ++s) {
      lw_endpoint_t *ep = &sched->links.eps[s];
      bool ready = atomic_load(&ep->state) == LW_EP_READY;
      // A violation another thread found (a control round trip): this thread owns the kill.
      if (ready && ep->accepting && atomic_load(&ep->violated)) break_child(sched, ep, NULL);
      // Until its death is seen; a repeated SIGKILL is harmless and is not progress.
      if (ready && sched->child[s].broken) kill_child(ep);
      // A child being respawned is not drained here: its replay reads its ring.
      if (ready && ep->accepting) progress |= drain_endpoint(sched, ep, &pw);
    }
    if (kick != seen_kick || cancel_seq != seen_cancel) {
      seen_kick = kick;
      seen_cancel = cancel_seq;
      progress = true;
    }
    progress |= sweep_dispatch_cancel(sched, &pw);
    int64_t now = lw__now_ns();
    next_due = check_escalations(sched, now);
    int64_t live_due = check_liveness(sched, now);
    if (live_due < next_due) next_due = live_due;
    take_due_unregisters(sched, &pw);
    lw__sched_pass_unlock(sched);
    flush(sched, &pw);
    // While a drainer holds the rings (lw__sched_drainer_enter), it does this loop's work as it
    // arrives: one pass per wake-up (deaths, escalations, what it was kicked for), then sleep,
    // never a run of passes beside it.
    if (progress && atomic_load(&sched->drainers) == 0) {
      lw__spin_reset(&idle);
      continue;
    }
  idle:
    // Each round of the spin policy is one pass of this loop (its condition is the pass). A
    // caller draining its own run's completions spins already and does this loop's work: the
    // partner is busy elsewhere (two spinners on a small machine take turns on the CPUs and
    // slow each other), so block at once.
    if (atomic_load(&sched->drainers) == 0 &&
        lw__spin_step_for(&idle, LW__PARTNER_UNKNOWN) != LW__SPIN_BLOCK) {
      continue;
    }
    // While a caller drains (lw__sched_wait_draining), completions are its: the children are
    // not asked to ring (a ring would wake this thread to compete with the caller for the token
    // and a CPU), and the last drainer to leave re-arms them. Dekker on sched.sleeping and
    // drainers (both seq_cst): either this load sees no drainer, and this thread arms the
    // children and re-checks the rings, or the leaving drainer sees this thread asleep.
    atomic_store(&sched->sleeping, 1);
    // Possibly a long sleep (the children armed, up to 100 ms): stored before drainers is
    // read, the other half of the Dekker in drainer_enter (a drainer that arrives now either is
    // seen here, or sees this and kicks, so the sleep is never a long one beside a drainer).
    atomic_store(&sched->long_sleep, 1);
    bool arm = atomic_load(&sched->drainers) == 0;
    if (!arm) atomic_store(&sched->long_sleep, 0);
    if (arm) set_mailboxes_sleeping(sched, 1);
    if ((arm && rings_pending(sched)) || atomic_load(&sched->kick_seq) != seen_kick ||
        atomic_load(sched->links.cancel_all_seq) != seen_cancel) {
      atomic_store(&sched->long_sleep, 0);
      set_sleeping(sched, 0);
      lw__spin_reset(&idle);
      // A kick this thread could not answer because a pass held the token: let that pass go on
      // rather than try the lock again at once.
      if (lock_busy) sched_yield();
      continue;
    }
    struct epoll_event ev[16];
    // Sleep until woken, or until the next escalation may be due; at most 100 ms, which
    // bounds how long a stop request can go unseen when nobody kicks.
    int timeout_ms = 100;
    // A drainer holds the rings (the children were not armed): look at them once a
    // millisecond, for completions that arrive while it does something else.
    if (!arm) timeout_ms = 1;
    if (next_due != LW_DEADLINE_NEVER) {
      int64_t ms = (next_due - lw__now_ns() + 999999) / 1000000;
      if (ms < timeout_ms) timeout_ms = ms < 0 ? 0 : (int)ms;
    }
    int n = epoll_wait(sched->epoll_fd, ev, 16, timeout_ms);
    atomic_store(&sched->long_sleep, 0);
    lw__counter_add_one_writer(&sched->n_wakes, 1);
    set_sleeping(sched, 0);
    wait_for_lock = true;
    // A timeout with nothing to do goes straight back to sleep: no new spin phase.
    if (n > 0) lw__spin_reset(&idle);
    for (int i = 0; i < n; ++i) {
      uint32_t tag = (uint32_t)ev[i].data.u64;
      if (tag == TAG_WAKE) {
        uint64_t v;
        ssize_t r = read(sched->links.wake_fd, &v, sizeof(v));
        (void)r;
      } else if (tag == TAG_FS || tag == TAG_FS_SUBS) {
        lw_forkserver_t *fs = tag == TAG_FS ? sched->fs : sched->fs_subs;
        if (lw__forkserver_poll_exit(fs, NULL, NULL, NULL) != LW_OK) {
          epoll_ctl(sched->epoll_fd, EPOLL_CTL_DEL, lw__forkserver_fd(fs), NULL);
        }
      } else if (tag < sched->n_children) {
        on_child_death(sched, &sched->links.eps[tag], &pw);
      }
    }
  }
  return NULL;
}

static lw_status_t epoll_add(lw_sched_t *sched, int fd, uint32_t tag, lw_error_t *err) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  if (epoll_ctl(sched->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return lw__error_set(err, LW_INTERNAL, -1, 0, "worker: epoll_ctl failed (errno %d)", errno);
  }
  return LW_OK;
}

lw_status_t lw__sched_initialize(lw_sched_t *sched, const lw_sched_links_t *links,
                                 lw_error_t *err) {
  memset(sched, 0, sizeof(*sched));
  sched->epoll_fd = -1;
  sched->links = *links;
  sched->n_children = links->n_chips + links->n_subs;
  pthread_mutex_init(&sched->pass_mu, NULL);
  sched->initialized = true;
  sched->child = calloc(sched->n_children, sizeof(*sched->child));
  if (!sched->child) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker: out of memory");
  }
  return LW_OK;
}

void lw__sched_deinitialize(lw_sched_t *sched) {
  if (!sched->initialized) return;
  free(sched->child);
  sched->child = NULL;
  sched->n_children = 0;
  if (sched->epoll_fd >= 0) close(sched->epoll_fd);
  sched->epoll_fd = -1;
  pthread_mutex_destroy(&sched->pass_mu);
  sched->initialized = false;
}

// ---------------------------------------------------------------------------------------------
// The DAG owner's token

bool lw__sched_pass_try(lw_sched_t *sched) {
  if (pthread_mutex_trylock(&sched->pass_mu) != 0) return false;
  tls_token_held = sched;
  return true;
}

void lw__sched_pass_lock(lw_sched_t *sched) {
  pthread_mutex_lock(&sched->pass_mu);
  tls_token_held = sched;
}

void lw__sched_pass_hold_calls(lw_sched_t *sched) {
  if (sched->calls_held) return;
  pthread_mutex_lock(&sched->links.calls->mu);
  sched->calls_held = true;
}

void lw__sched_pass_unlock(lw_sched_t *sched) {
  if (sched->calls_held) {
    sched->calls_held = false;
    pthread_mutex_unlock(&sched->links.calls->mu);
  }
  tls_token_held = NULL;
  pthread_mutex_unlock(&sched->pass_mu);
}

void lw__sched_kick(lw_sched_t *sched) {
  atomic_fetch_add(&sched->kick_seq, 1);
  // seq_cst pairs with the scheduler's store of sleeping before it re-checks kick_seq.
  if (atomic_load(&sched->sleeping)) {
    uint64_t one = 1;
    ssize_t n = write(sched->links.wake_fd, &one, sizeof(one));
    (void)n;  // EAGAIN: the counter is saturated, the fd is readable anyway
  }
}

bool lw__sched_watch(lw_sched_t *sched, lw_endpoint_t *ep, bool on) {
  if (!on) return epoll_ctl(sched->epoll_fd, EPOLL_CTL_DEL, ep->pidfd, NULL) == 0;
  return epoll_add(sched, ep->pidfd, ep->slot, NULL) == LW_OK;
}

bool lw__sched_other_chip_free(lw_sched_t *sched, int32_t chip) {
  for (uint32_t i = 0; i < sched->links.n_chips; ++i) {
    const lw_endpoint_t *ep = &sched->links.eps[i];
    if ((int32_t)i != chip && ep->accepting && atomic_load(&ep->state) == LW_EP_READY &&
        sched->child[i].busy == 0) {
      return true;
    }
  }
  return false;
}

lw_status_t lw__sched_start(lw_sched_t *sched, lw_forkserver_t *fs, lw_forkserver_t *fs_subs,
                            lw_error_t *err) {
  sched->fs = fs;
  sched->fs_subs = fs_subs;
  sched->epoll_fd = lw__forkserver_fd_above_stdio(epoll_create1(EPOLL_CLOEXEC));
  if (sched->epoll_fd < 0) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker: epoll_create1 failed");
  }
  LW_RETURN_IF_ERROR(epoll_add(sched, sched->links.wake_fd, TAG_WAKE, err));
  LW_RETURN_IF_ERROR(epoll_add(sched, lw__forkserver_fd(sched->fs), TAG_FS, err));
  if (sched->fs_subs)
    LW_RETURN_IF_ERROR(epoll_add(sched, lw__forkserver_fd(sched->fs_subs), TAG_FS_SUBS, err));
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    if (sched->links.eps[s].pidfd >= 0)
      LW_RETURN_IF_ERROR(epoll_add(sched, sched->links.eps[s].pidfd, s, err));
  }
  return lw__thread_start(&sched->thread, "lw-sched", "scheduler", sched_main, sched, err);
}

// Tells the scheduler to leave and wakes it wherever it sleeps (the eventfd is written even
// when it is not marked asleep: it may be on its way into epoll_wait).
static void sched_wake(void *ctx) {
  lw_sched_t *sched = ctx;
  atomic_store(&sched->exit, true);
  lw__sched_kick(sched);
  uint64_t one = 1;
  ssize_t n = write(sched->links.wake_fd, &one, sizeof(one));
  (void)n;
}

void lw__sched_stop(lw_sched_t *sched) {
  lw__thread_stop(&sched->thread, sched_wake, sched);
  // The epoll fd stays open: a respawn under way on the supervisor may still add to it.
  // lw__sched_deinitialize closes it (lw_worker_destroy, once the supervisor has stopped).
}

// Every child's ring (the token held).
static bool drain_all(lw_sched_t *sched, pending_work_t *pw) {
  bool did = false;
  sched->drains_deferred = 0;
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    lw_endpoint_t *ep = &sched->links.eps[s];
    if (atomic_load(&ep->state) != LW_EP_READY || !ep->accepting || sched->child[s].broken) {
      continue;
    }
    did |= drain_endpoint(sched, ep, pw);
  }
  return did;
}

// A stop (a cancel, a run's failure, cancel_all) the passes have not acted on yet: its pass
// drains first, so a task that already ended is not taken for one still running.
static bool stop_pending(const lw_sched_t *sched) {
  return atomic_load(sched->links.cancel_all_seq) != sched->cancel_all_seen ||
         atomic_load(&sched->links.dag->stop_seq) != sched->cancel_stop_seen;
}

// Whether the worker's shape lets a submitter's pass leave the rings (sched.h,
// LW_SCHED_DRAIN_EVERY): one chip, at most one sub child. Otherwise its passes drain first, as
// every other pass does.
static bool worker_may_defer_drains(const lw_sched_t *sched) {
  return sched->links.n_chips == 1 && sched->links.n_subs <= 1;
}

// Whether a submitter's pass, having dispatched, may leave the completion rings to a later pass
// (sched.h, LW_SCHED_DRAIN_EVERY). The token held.
static bool may_defer_drain(const lw_sched_t *sched) {
  if (sched->drains_deferred + 1 >= LW_SCHED_DRAIN_EVERY) return false;
  if (lw__dag_n_waiting(sched->links.dag) != 0 || lw__dag_holds_ready(sched->links.dag)) {
    return false;
  }
  for (uint32_t s = 0; s < sched->n_children; ++s) {
    if (sched->child[s].busy >= LW_MB_TASK_FRAMES / 4 * 3) return false;
  }
  return true;
}

// One owner's pass on a thread other than the scheduler's (the token taken with trylock, so it
// never waits for a pass under way): applies the DAG's inbox, drains the completion rings of
// the children it may read, sweeps and dispatches. Deaths, kills, escalations and liveness stay
// the scheduler's. A child whose death this thread has not seen may be in its respawn, its
// mailbox being reset by the supervisor: under the token, accepting says its death was not handled
// yet, so its respawn has not begun, and its ring may be read. only_if_rings: run the pass only
// when a ring holds something (a waiting caller's polls: the rest is the scheduler's and the
// submitters'). Returns whether it ran the pass; *progress (may be NULL) whether it did
// anything. What it leaves to do outside the token (runs to complete, ops to complete, unregisters
// to post) is left in *out for the caller to flush.
// now_ns: the pass's clock (lw__dag_set_owner), 0 for a fresh read; > 0 also says the pass
// follows a submit (may_defer_drain).
static bool assist_pass(lw_sched_t *sched, bool only_if_rings, int64_t now_ns, bool *progress,
                        pending_work_t *out) {
  memset(out, 0, sizeof(*out));
  if (progress) *progress = false;
  if (!lw__sched_pass_try(sched)) return false;
  // Checked under the token: once the scheduler is told to stop, destroy becomes the owner (it
  // takes the token after the scheduler left), and no assist may run a pass beside it.
  if (atomic_load(&sched->exit) || (only_if_rings && !rings_pending(sched))) {
    lw__sched_pass_unlock(sched);
    return false;
  }
  lw__dag_set_owner(sched->links.dag, now_ns);
  bool did = lw__dag_step(sched->links.dag, &out->finished);
  // A submitter's pass (now_ns > 0) with no stop to act on dispatches what its post made ready,
  // then reads the rings only when the DAG still holds work a completion could move.
  bool drain = now_ns == 0 || !worker_may_defer_drains(sched) || stop_pending(sched);
  if (!drain) {
    // No cancel words here: a stop that came meanwhile (a cancel, or a failure this dispatch
    // raised) is acted on after a drain, below or in the pass its kick brings.
    did |= sweep_dispatch(sched, out);
    drain = stop_pending(sched) || !may_defer_drain(sched);
    if (!drain) sched->drains_deferred++;
  }
  if (drain) {
    // The submit's time is older than the completions found now: their ends get a fresh one
    // (a task's end is never stamped before the parent saw it; see dag.h).
    if (now_ns > 0) lw__dag_clock_expire(sched->links.dag);
    did |= drain_all(sched, out);
    did |= sweep_dispatch_cancel(sched, out);
  }
  take_due_unregisters(sched, out);
  lw__sched_pass_unlock(sched);
  if (progress) *progress = did;
  return true;
}

// A submitter that just posted to the DAG's inbox runs one owner's pass itself when no pass is
// under way, instead of waiting for the scheduler to get a CPU. Holding the token for the pass
// makes this thread the DAG's one owner until it returns; the scheduler takes ownership back
// at the start of its next pass.
bool lw__sched_assist(lw_sched_t *sched, int64_t now_ns) {
  pending_work_t pw;
  if (!assist_pass(sched, false, now_ns, NULL, &pw)) return false;
  flush(sched, &pw);
  return true;
}

// LW_CALLER_DRAINS=0 turns the caller's drain off (for comparisons; docs/benchmarks.md).
static bool caller_drains(void) {
  static _Atomic int knob = -1;  // -1: not read yet
  int v = atomic_load_explicit(&knob, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("LW_CALLER_DRAINS");
    v = !(e && strcmp(e, "0") == 0);
    atomic_store_explicit(&knob, v, memory_order_relaxed);
  }
  return v != 0;
}

// A drainer arrives: under the token, so no child's mailbox is being reset (see assist_pass), the
// children stop ringing a sleeping scheduler, whose wake-up would only compete with the drain.
static void drainer_enter(lw_sched_t *sched) {
  lw__sched_pass_lock(sched);
  atomic_fetch_add(&sched->drainers, 1);
  set_mailboxes_sleeping(sched, 0);
  lw__sched_pass_unlock(sched);
  // A scheduler in a long sleep (it went to sleep with no drainer: the children armed, up to
  // 100 ms) would now hear of no completion, since the children no longer ring: kick it, so
  // it sleeps again the short way (a look at the rings every millisecond). Dekker with the
  // scheduler's long_sleep store and drainers load, both seq_cst.
  if (atomic_load(&sched->long_sleep)) lw__sched_kick(sched);
}

// A drainer leaves. The last one out hands the rings back to a sleeping scheduler: arms the
// children, then looks at the rings once more (the other half of the Dekker in sched_main) and
// kicks it for what arrived meanwhile.
static void drainer_leave(lw_sched_t *sched) {
  if (atomic_fetch_sub(&sched->drainers, 1) == 1 && atomic_load(&sched->sleeping)) {
    lw__sched_pass_lock(sched);
    set_mailboxes_sleeping(sched, 1);
    bool pending = rings_pending(sched);
    lw__sched_pass_unlock(sched);
    if (pending) lw__sched_kick(sched);
  }
}

// What the waiting caller's partners do (lanes/spin.h): a chip whose run lane last pushed a
// completion from this thread's CPU cannot run while this thread spins there. From the
// endpoints' copies (push_cpu), not the mailboxes, which a respawn may be resetting.
static lw__partner_t drain_partner(const lw_sched_t *sched) {
  int cpu = lw__sys_cpu();
  if (cpu < 0) return LW__PARTNER_UNKNOWN;
  for (uint32_t s = 0; s < sched->links.n_chips; ++s) {
    if (atomic_load_explicit(&sched->links.eps[s].push_cpu, memory_order_relaxed) == cpu) {
      return LW__PARTNER_SAME_CPU;
    }
  }
  return LW__PARTNER_UNKNOWN;
}

void lw__sched_drainer_enter(lw_sched_t *sched) {
  if (caller_drains()) drainer_enter(sched);
}

void lw__sched_drainer_leave(lw_sched_t *sched) {
  if (caller_drains()) drainer_leave(sched);
}

static bool handle_done(void *ctx) { return lw_handle_done(ctx); }

static bool drain(lw_sched_t *sched, bool (*done)(void *ctx), void *ctx, int64_t deadline_ns,
                  int64_t budget_ns) {
  if (!caller_drains()) return done(ctx);
  drainer_enter(sched);
  lw__spin_t spin = LW__SPIN_INIT;
  spin.budget_ns = budget_ns;
  bool ok;
  while (!(ok = done(ctx))) {
    // A timed wait: no pass starts once its time is up (one that made progress resets the
    // spin below, so the spin's own end would not come while work keeps arriving).
    if (deadline_ns != LW_DEADLINE_NEVER && lw__now_ns() >= deadline_ns) break;
    bool progress = false;
    pending_work_t pw;
    if (assist_pass(sched, true, 0, &progress, &pw)) {
      // Completing callable ops and posting unregisters may block on a control round trip:
      // not as a drainer, or the scheduler, asleep and not rung meanwhile, would leave other
      // runs' completions to its timeout.
      bool slow = pw.ops || pw.unregisters;
      if (slow) drainer_leave(sched);
      flush(sched, &pw);
      if (slow) drainer_enter(sched);
    }
    if (progress) {
      lw__spin_reset(&spin);
      continue;
    }
    if (lw__spin_step_for(&spin, drain_partner(sched)) == LW__SPIN_BLOCK) break;
  }
  drainer_leave(sched);
  return ok;
}

bool lw__sched_wait_draining(lw_sched_t *sched, lw_handle_t *h, int64_t deadline_ns,
                             int64_t budget_ns) {
  // Not on the scheduler's thread (its passes are the drain; it never waits for a handle
  // today), nor on one that holds the token: drainer_enter would wait for it forever.
  if (tls_token_held == sched || tls_scheduler_of == sched) return false;
  (void)drain(sched, handle_done, h, deadline_ns, budget_ns);
  return caller_drains();
}

bool lw__sched_drain_until(lw_sched_t *sched, bool (*done)(void *ctx), void *ctx) {
  return drain(sched, done, ctx, LW_DEADLINE_NEVER, 0);
}
