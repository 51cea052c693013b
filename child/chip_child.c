// child/chip_child.c — the chip-child process loop. See child.h.
#include <limits.h>
#include <numa.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "child/chip_impl.h"
#include "child/child_common.h"
#include "child/placement.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"

typedef struct frame_ctx {
  lw_child_ctx_t *c;
  uint32_t frame;
  lw_mb_identity_t identity;
  // The frame's last run, owned by whichever taker of posts holds take_mu: released when the
  // frame takes its next task (the parent reposts a frame only after consuming its completion,
  // so the run has finished by then). Lets a cancel notice reach a run still queued on the run
  // lane.
  lw_handle_t *run;
  bool cancel_sent;
  int32_t chip_index;  // for messages
  lw_chip_t *chip;     // asked whether its device was lost when a task fails
} frame_ctx_t;

typedef struct control_ctx {
  lw_child_ctx_t *c;
  uint64_t control_id;
  lw_mb_command_t command;
  lw_handle_t *h;  // set once submitted (under pending_mu)
  struct control_ctx *next;
} control_ctx_t;

static frame_ctx_t frames[LW_MB_TASK_FRAMES];

// Two threads take posts (DESIGN 5): the mailbox loop always, and the run lane while it is
// idle (its lane idle hook, run_lane_idle), so a task posted to an idle chip goes from the
// doorbell straight to the thread that runs it instead of through a second thread hop. One
// taker at a time: take_mu guards next_seq and frames[] (serve_task, forward_cancel), and
// posts are served in sequence order whoever serves them. A task the mailbox loop serves is
// queued on the run lane as before; one the run lane serves is queued on its own lane and run
// as soon as the hook returns. While the run lane runs a kernel the mailbox loop serves every
// post (register and unregister controls, more tasks, cancel notices).
static pthread_mutex_t take_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t next_seq = 1;  // the next post to serve; written under take_mu
// The task frame after the last one served (written under take_mu; the run lane's idle hook
// also reads it without the lock, relaxed, as a guess): where the parent, which takes its
// frames in turn, most likely put the next task (lw__mailbox_find_post's hint).
static _Atomic uint32_t next_frame_hint = LW_MB_TASK_FRAMES;
// The run lane is in its idle hook, taking task posts: the mailbox loop then sleeps on the
// doorbell's loop_word and leaves task posts to it. (A run the loop queues wakes the hook
// through the lane's own wake-up, lw_lane_idle_t.wake.)
static _Atomic bool run_lane_taking;
static _Atomic bool leaving;  // set by the mailbox loop when it leaves; the hook steps aside
static _Thread_local bool on_run_lane_named;  // the run lane's trace role is set

// Registers and unregisters on the register lane, by control id, so CANCEL can withdraw one.
// An entry leaves the list (under the lock) before its handle is released, so a cancel found
// through the list always acts on a live handle.
static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;
static control_ctx_t *pending;

static void pending_remove(control_ctx_t *cc) {
  pthread_mutex_lock(&pending_mu);
  for (control_ctx_t **pp = &pending; *pp; pp = &(*pp)->next) {
    if (*pp == cc) {
      *pp = cc->next;
      break;
    }
  }
  pthread_mutex_unlock(&pending_mu);
}

// Runs this process on the node's CPUs among those it may use now: the mask it inherited from
// the thread that created the worker (a taskset, a program's own affinity) is never widened.
// When none of the node's CPUs is allowed the mask stays as it is. numa_run_on_node would
// replace the mask with the node's CPUs: every chip child of a program run under `taskset -c
// 0,1` ran on all of a one-node machine's CPUs. libnuma's masks, sized for the machine (a
// cpu_set_t holds 1024 CPUs). Returns whether the masks could be read.
static bool run_on_node_within_mask(int node) {
  struct bitmask *allowed = numa_allocate_cpumask();
  struct bitmask *cpus = numa_allocate_cpumask();
  struct bitmask *want = numa_allocate_cpumask();
  bool ok = allowed && cpus && want && numa_sched_getaffinity(0, allowed) >= 0 &&
            numa_node_to_cpus(node, cpus) == 0;
  if (ok) {
    unsigned n_want = 0;
    bool same = true;
    for (unsigned i = 0; i < allowed->size; ++i) {
      bool in =
          numa_bitmask_isbitset(allowed, i) && i < cpus->size && numa_bitmask_isbitset(cpus, i);
      if (in) {
        numa_bitmask_setbit(want, i);
        n_want++;
      }
      if (in != (bool)numa_bitmask_isbitset(allowed, i)) same = false;
    }
    if (n_want > 0 && !same) (void)numa_sched_setaffinity(0, want);
  }
  if (allowed) numa_free_cpumask(allowed);
  if (cpus) numa_free_cpumask(cpus);
  if (want) numa_free_cpumask(want);
  return ok;
}

// Binds this process to the chip's NUMA node (its CPUs within the inherited mask, its memory).
// Returns the node, -1 when NUMA is unavailable (then nothing is bound), or -2 with err set
// when the configured node does not exist.
static int bind_numa(const lw_chip_config_t *cfg, lw_mailbox_t *mb, lw_error_t *err) {
  if (numa_available() < 0) return -1;
  int max = numa_max_node();
  int node = cfg->numa_node >= 0 ? cfg->numa_node : cfg->device_id % (max + 1);
  if (node > max) {
    lw__error_set(err, LW_INVALID_ARGUMENT, cfg->device_id, 0,
                  "chip %d: NUMA node %d does not exist (max %d)", cfg->device_id, node, max);
    return -2;
  }
  // The CPUs may stay as they are (masks unreadable): the memory is bound all the same.
  (void)run_on_node_within_mask(node);
  numa_set_preferred(node);
  // The parent gives each mailbox its own pages (LW_MAILBOX_STRIDE), so this binds no one else's.
  numa_tonode_memory(mb, (sizeof(*mb) + 4095) & ~(size_t)4095, node);
  return node;
}

// The runs that had a task fail in this child, most recent last, with the status they failed
// with: a ring of one note per failed task (one per run while its failures come in a row).
// Written when a task finishes with an error (the run lane, or the mailbox loop when a cancel
// withdraws a queued task); read on the run lane before a task starts.
//
// How many notes it must keep: a task C posted behind its failed producer P (wait elision) is
// posted while the parent has not consumed P's completion yet, so every task that ends between
// P and C in the run lane's order still holds its frame when C is posted (its completion comes
// after P's in the ring). So at most LW_MB_TASK_FRAMES - 2 notes come after P's before C asks:
// a ring of LW_MB_TASK_FRAMES notes still holds P's run.
#define FAILED_RUNS LW_MB_TASK_FRAMES
_Static_assert(FAILED_RUNS >= LW_MB_TASK_FRAMES, "a failed producer's note outlives its consumers' "
               "posts");
static _Atomic uint64_t failed_runs[FAILED_RUNS];
static _Atomic int32_t failed_status[FAILED_RUNS];
static _Atomic uint64_t n_failed_runs;  // notes ever made (64 bits: never wraps)

static void note_failed_run(uint64_t run_id, lw_status_t st) {
  // Writers are the run lane and the mailbox loop (under take_mu when it withdraws); a note
  // skipped here is one whose run the newest note already names with the same status, which
  // only a racing writer could change, and then that writer's own note names it.
  uint64_t n = atomic_load(&n_failed_runs);
  if (n > 0) {
    uint64_t last = (n - 1) % FAILED_RUNS;
    if (atomic_load(&failed_runs[last]) == run_id &&
        atomic_load(&failed_status[last]) == (int32_t)st) {
      return;
    }
  }
  uint64_t i = atomic_fetch_add(&n_failed_runs, 1) % FAILED_RUNS;
  atomic_store(&failed_status[i], (int32_t)st);
  atomic_store(&failed_runs[i], run_id);
}

// A task of a run that had a task fail here never starts: the run has failed (or was
// cancelled), and every task of it that has not finished is stopped. This is what makes wait
// elision safe: a task posted before its producers on this chip finished (parent/dag.h) does
// not run after one of them failed. The run lane runs tasks in post order, so the producers'
// ends are noted before it asks. A cancelled run's task ends CANCELLED, any other POISONED.
static lw_status_t task_must_not_start(void *ctx, lw_error_t *why) {
  // Every task asks: the common case (no task of any run failed here) is one load.
  uint64_t n = atomic_load(&n_failed_runs);
  if (n == 0) return LW_OK;
  frame_ctx_t *fc = ctx;
  uint64_t run = fc->identity.run_id;
  for (uint32_t i = 0; i < FAILED_RUNS && i < n; ++i) {
    if (run == 0 || atomic_load(&failed_runs[i]) != run) continue;
    int32_t dev = fc->chip_index;
    bool cancelled = atomic_load(&failed_status[i]) == LW_CANCELLED;
    return lw__error_set(why, cancelled ? LW_CANCELLED : LW_POISONED, dev, fc->identity.task_id,
                         "chip %d: task %llu of run %llu not started: a task of its run %s "
                         "before it on this chip",
                         dev, (unsigned long long)fc->identity.task_id, (unsigned long long)run,
                         cancelled ? "was cancelled" : "failed");
  }
  return LW_OK;
}

static void task_done(void *ctx, lw_handle_t *h) {
  frame_ctx_t *fc = ctx;
  if (h->status != LW_OK) note_failed_run(fc->identity.run_id, h->status);
  lw_mb_task_result_t r;
  memset(&r, 0, sizeof(r));
  r.status = h->status;
  r.kernel_ns = h->timing.kernel_wall_ns;
  r.queue_ns = h->timing.queue_ns;
  r.error = h->error;
  lw__child_complete_task(fc->c, fc->frame, &fc->identity, &r);
  // A device that can no longer run anything (a sticky CUDA error) ends the child once the
  // task that lost it is reported: the worker respawns it on a fresh context.
  const lw_backend_ops_t *be = fc->chip->backend;
  if (h->status != LW_OK && be->device_lost && be->device_lost(fc->chip->device)) {
    _exit(LW_CHILD_EXIT_DEVICE_LOST);
  }
  // The mailbox loop keeps its reference in fc->run (see frame_ctx_t).
}

// Forwards the parent's cancel of a frame (its cancel_dispatch mark) to the frame's run: a run
// still queued behind another kernel finishes CANCELLED now, without running; a running one
// has already had its cancel word set by the parent. Either taker of posts, under take_mu.
static void forward_cancel(lw_child_ctx_t *c, uint32_t frame) {
  frame_ctx_t *fc = &frames[frame];
  if (!fc->run || fc->cancel_sent) return;
  // seq_cst: pairs with the parent's store in lw__mailbox_cancel_task; either this load sees
  // the mark or the parent's cancel_seq bump comes after it and wakes the loop again.
  if (atomic_load_explicit(&c->mb->task[frame].cancel_dispatch, memory_order_seq_cst) !=
      fc->identity.dispatch_id) {
    return;
  }
  fc->cancel_sent = true;
  (void)lw_handle_cancel(fc->run);  // NOT_FOUND when it finished already
}

static void fail_task(lw_child_ctx_t *c, uint32_t frame, const lw_mb_identity_t *id,
                      const lw_error_t *err) {
  lw_mb_task_result_t r;
  memset(&r, 0, sizeof(r));
  r.status = err->code != LW_OK ? err->code : LW_INTERNAL;
  r.error = *err;
  lw__child_complete_task(c, frame, id, &r);
}

static void serve_task(lw_child_ctx_t *c, lw_chip_t *chip, uint32_t frame) {
  lw_mb_task_taken_t t;
  lw_error_t err;
  lw__error_clear(&err);
  int32_t dev = chip->cfg.device_id;
  int64_t t_take = lw__trace_on() ? lw__now_ns() : 0;  // the handoff span's start
  // The frame's previous run finished before the parent could post into it again.
  if (frames[frame].run) {
    lw_handle_release(frames[frame].run);
    frames[frame].run = NULL;
  }
  if (lw__mailbox_take_task(c->mb, frame, &c->env->arena, &t, &err) != LW_OK) {
    // The identity could not be trusted either; echo what the frame says so the parent can
    // match (or reject) it.
    lw_mb_identity_t id = c->mb->task[frame].identity;
    // The mailbox does not name the child (its header is writable memory); this child does.
    char what[LW_ERROR_MESSAGE_BYTES];
    snprintf(what, sizeof(what), "%s", err.message);
    lw__error_set(&err, err.code, dev, id.task_id, "chip %d: %s", dev, what);
    fail_task(c, frame, &id, &err);
    return;
  }
  if (t.kind != LW_MB_TASK_KERNEL) {
    lw__error_set(&err, LW_INVALID_ARGUMENT, dev, t.identity.task_id,
                  "chip %d: task frame %u holds a sub task (kind %u)", dev, frame,
                  (unsigned)t.kind);
    fail_task(c, frame, &t.identity, &err);
    return;
  }
  frame_ctx_t *fc = &frames[frame];
  fc->c = c;
  fc->frame = frame;
  fc->identity = t.identity;
  fc->cancel_sent = false;
  fc->chip_index = dev;
  fc->chip = chip;
  lw_chip_submit_opts_t opts = {.cancel_word = &c->mb->task[frame].cancel,
                                .cancel_mark = &c->mb->task[frame].cancel_dispatch,
                                .cancel_mark_value = t.identity.dispatch_id,
                                .started_ns = &c->mb->task[frame].started_ns,
                                .notify = task_done,
                                .notify_ctx = fc,
                                .must_not_start = task_must_not_start,
                                .task_id = t.identity.task_id,
                                .l3_run_id = t.identity.run_id,
                                // Every task enqueue of this child is made under take_mu, which
                                // the caller holds: an empty lane stays empty until this run.
                                .starts_next = lw__lane_is_current(chip->run_lane) &&
                                               !lw__lane_has_work_or_stop(chip->run_lane)};
  lw_chip_run_t *run = NULL;
  lw_status_t st = lw__chip_run_prepare(chip, (lw_callable_handle_t){t.callable}, &t.args,
                                        t.timeout_ns, &opts, &run, &err);
  if (st != LW_OK) {
    fail_task(c, frame, &t.identity, &err);
    return;
  }
  // The payload is copied and the callable pinned: from here the frame is not read again, so
  // controls may be served while the run lane executes.
  if (lw__mailbox_task_set_running(c->mb, frame, &err) != LW_OK) _exit(LW_CHILD_EXIT_TAKE_FAILED);
  if (t_take) {
    lw__trace_span(LW_TRACE_HANDOFF, t_take, lw__now_ns(), t.identity.run_id, t.identity.task_id,
                   dev, LW_OK, lw__chip_run_name(run));
  }
  fc->run = lw__chip_run_enqueue(run);
  // A cancel posted before this point may have been noticed while the frame had no run yet.
  forward_cancel(c, frame);
}

static void control_done(void *ctx, lw_handle_t *h) {
  control_ctx_t *cc = ctx;
  pending_remove(cc);
  lw_mb_completion_t done;
  memset(&done, 0, sizeof(done));
  done.kind = LW_MB_COMPLETION_CONTROL;
  done.control_id = cc->control_id;
  done.status = h->status;
  done.value = cc->command == LW_MB_CMD_REGISTER ? h->callable.id : 0;
  done.error = h->error;
  lw__child_push(cc->c, &done);
  lw_handle_release(h);
  free(cc);
}

static void serve_control(lw_child_ctx_t *c, lw_chip_t *chip) {
  lw_mb_control_taken_t t;
  lw_error_t err;
  lw__error_clear(&err);
  int32_t dev = chip->cfg.device_id;
  if (!lw__child_take_control(c, &t)) return;
  if (t.command == LW_MB_CMD_CANCEL) {
    lw_status_t st = LW_NOT_FOUND;
    pthread_mutex_lock(&pending_mu);
    for (control_ctx_t *p = pending; p; p = p->next) {
      // OK: a queued command will finish CANCELLED; one already running finishes normally.
      if (p->control_id == t.target && p->h) st = lw_handle_cancel(p->h) == LW_OK ? LW_OK : LW_NOT_FOUND;
    }
    pthread_mutex_unlock(&pending_mu);
    lw__child_ack(c, LW_OK, false, st == LW_OK ? 1 : 0, NULL);
    return;
  }
  if (t.command != LW_MB_CMD_REGISTER && t.command != LW_MB_CMD_UNREGISTER) {
    lw__error_set(&err, LW_INVALID_ARGUMENT, dev, 0, "chip %d: command %u is not for chips",
                  dev, (unsigned)t.command);
    lw__child_ack(c, LW_INVALID_ARGUMENT, false, 0, &err);
    return;
  }
  control_ctx_t *cc = calloc(1, sizeof(*cc));
  if (!cc) {
    lw__error_set(&err, LW_RESOURCE_EXHAUSTED, dev, 0, "chip %d: out of memory", dev);
    lw__child_ack(c, LW_RESOURCE_EXHAUSTED, false, 0, &err);
    return;
  }
  cc->c = c;
  cc->control_id = t.control_id;
  cc->command = t.command;
  // Listed before the submit: the command may finish (and unlist itself) before it returns.
  pthread_mutex_lock(&pending_mu);
  cc->next = pending;
  pending = cc;
  pthread_mutex_unlock(&pending_mu);
  lw_chip_submit_opts_t opts = {.notify = control_done,
                                .notify_ctx = cc,
                                .borrow_image = true,
                                .heartbeat = &c->mb->header.heartbeat};
  lw_handle_t *h = NULL;
  lw_status_t st;
  if (t.command == LW_MB_CMD_REGISTER) {
    // The image stays in the arena until the parent sees this register's completion.
    lw_callable_t callable = {.name = t.name,
                              .image = c->env->arena.base + t.image_offset,
                              .image_bytes = t.image_bytes,
                              .entry = t.entry[0] ? t.entry : NULL,
                              .n_params = t.n_params,
                              .param_dirs = t.n_params ? t.param_dirs : NULL,
                              .format = (lw_image_format_t)t.format,
                              .build_options = t.build_options};
    st = lw__chip_register_async_opts(chip, &callable, &opts, &h, &err);
  } else {
    st = lw__chip_unregister_async_opts(chip, (lw_callable_handle_t){t.target}, &opts, &h, &err);
  }
  if (st != LW_OK) {
    pending_remove(cc);
    free(cc);
    err.worker_id = dev;
    lw__child_ack(c, st, false, 0, &err);
    return;
  }
  pthread_mutex_lock(&pending_mu);
  for (control_ctx_t *p = pending; p; p = p->next) {
    if (p == cc) p->h = h;  // still listed: not finished yet
  }
  pthread_mutex_unlock(&pending_mu);
  lw__child_ack(c, LW_OK, true, 0, NULL);
}

static bool run_lane_is_taking(void *ctx) {
  (void)ctx;
  return atomic_load(&run_lane_taking);
}

// Serves post seq (the next in order) if nobody has yet; the caller holds take_mu.
static void serve_post_locked(lw_child_ctx_t *c, lw_chip_t *chip, uint64_t seq) {
  if (atomic_load(&next_seq) != seq) return;  // the other taker served it
  bool is_control = false;
  uint32_t frame = 0;
  lw_error_t err;
  lw__error_clear(&err);
  uint32_t hint = atomic_load_explicit(&next_frame_hint, memory_order_relaxed);
  if (lw__mailbox_find_post(c->mb, seq, hint, &is_control, &frame, &err) != LW_OK) {
    _exit(LW_CHILD_EXIT_POST_MISSING);  // the parent is broken
  }
  if (is_control) {
    serve_control(c, chip);
  } else {
    atomic_store_explicit(&next_frame_hint, (frame + 1) % LW_MB_TASK_FRAMES, memory_order_relaxed);
    serve_task(c, chip, frame);
  }
  atomic_store(&next_seq, seq + 1);
}

typedef struct run_lane_wait {
  lw_child_ctx_t *c;
  lw_lane_t *lane;
} run_lane_wait_t;

static bool run_lane_should_wake(const void *ctx) {
  const run_lane_wait_t *rw = ctx;
  return atomic_load_explicit(&rw->c->mb->doorbell.post_seq, memory_order_acquire) >=
             atomic_load(&next_seq) ||
         lw__lane_has_work_or_stop(rw->lane) || atomic_load(&leaving);
}

// Whoever posts last ran on this CPU: pausing only keeps it from posting (lanes/spin.h).
static lw__partner_t run_lane_partner(const void *ctx) {
  const run_lane_wait_t *rw = ctx;
  int32_t poster = atomic_load_explicit(&rw->c->mb->doorbell.poster_cpu, memory_order_relaxed);
  return poster >= 0 && poster == lw__sys_cpu() ? LW__PARTNER_SAME_CPU : LW__PARTNER_UNKNOWN;
}

// Placement (child/placement.h, which has the rule): a run lane that takes posts on the
// poster's CPU moves off it when another CPU has room for it. The move: it leaves that CPU out
// of its mask for a moment (the kernel moves it to another allowed CPU), then takes its whole
// mask back, so the kernel stays free to place it anywhere later. Two syscalls per move; a
// move the kernel undoes costs them again only after as many posts. LW_RUN_LANE_MOVE=0 turns
// it off (for comparisons), =N looks after N posts. Posts taken without a wait (the parent
// ahead) are looked at one in RUN_LANE_PLACE_EVERY, counting for that many: the look reads the
// doorbell's line, which the parent writes at every post, and the two can share a CPU that way
// too (the parent posts ahead while the run lane waits for the CPU, which then finds every
// post there). Each look is a trace instant (LW_TRACE_PLACEMENT) on the run lane's track.
#define RUN_LANE_PLACE_EVERY 8

static bool placement_ready;      // run lane thread only
static lw_placement_t placement;  // run lane thread only
static int machine_cpus;          // run lane thread only: the online CPUs, read once
static uint32_t unplaced_takes;   // run lane thread only: posts taken without a wait, unlooked

// Looks at the machine and moves the calling thread off cpu if the look says so.
static void look_and_move(int cpu, int32_t dev) {
  cpu_set_t all, without;
  if (sched_getaffinity(0, sizeof(all), &all) != 0) return;
  without = all;
  CPU_CLR(cpu, &without);
  int allowed = CPU_COUNT(&all);
  int runnable = CPU_COUNT(&without) > 0 ? lw__sys_runnable_threads() : -1;
  lw_placement_verdict_t v = lw__placement_decide(&placement, runnable, allowed, machine_cpus);
  if (lw__trace_on()) {
    char detail[LW_TRACE_NAME_BYTES];
    snprintf(detail, sizeof(detail), "cpu %d: %s, %d/%d", cpu, lw__placement_verdict_name(v),
             runnable, allowed);
    lw__trace_instant(LW_TRACE_PLACEMENT, dev, 0, 0, detail);
  }
  if (!lw__placement_moves(v)) return;
  if (sched_setaffinity(0, sizeof(without), &without) != 0) return;
  // The mask back; a second try if the first failed (a cpuset change in between): a run lane
  // must not stay shut out of a CPU it was allowed.
  if (sched_setaffinity(0, sizeof(all), &all) != 0) (void)sched_setaffinity(0, sizeof(all), &all);
}

// Called by the run lane for the posts it takes: n of them (one, or RUN_LANE_PLACE_EVERY taken
// without a wait).
static void place_run_lane(const lw_mailbox_t *mb, int n, int32_t dev) {
  if (!placement_ready) {
    const char *e = getenv("LW_RUN_LANE_MOVE");
    long after = LW_PLACEMENT_MOVE_AFTER;
    if (e && *e) {
      after = strtol(e, NULL, 10);  // out of range: LONG_MIN/MAX, clamped by init
      if (after > INT_MAX) after = INT_MAX;
      if (after < 0) after = 0;
    }
    lw__placement_init(&placement, (int)after);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    machine_cpus = online > 0 && online < INT_MAX ? (int)online : -1;
    placement_ready = true;
  }
  int me = lw__sys_cpu();
  int poster = atomic_load_explicit(&mb->doorbell.poster_cpu, memory_order_relaxed);
  if (lw__placement_count(&placement, me, poster, n)) look_and_move(me, dev);
}

typedef struct run_lane_hook {
  lw_child_ctx_t *c;
  lw_chip_t *chip;
} run_lane_hook_t;

// The lane's submit and destroy call this (lanes/lane.h): the hook sleeps on the doorbell, so a
// run the mailbox loop queues (or a close) wakes it there. The waitword's own handshake (the
// lane's count raised before this bump, the hook's sleeper count raised before its last look)
// makes sure the hook sees the run or is woken.
static void wake_run_lane_hook(void *ctx) {
  run_lane_hook_t *h = ctx;
  lw__waitword_wake(&h->c->mb->doorbell.word, true);
}

// The run lane's idle hook (lanes/lane.h): waits on the doorbell and serves posts until one of
// them queued a run on this lane (or the mailbox loop did, or the lane stops).
static bool run_lane_idle(void *ctx, lw_lane_t *lane) {
  run_lane_hook_t *h = ctx;
  if (atomic_load(&leaving)) return false;
  atomic_store(&run_lane_taking, true);
  run_lane_wait_t rw = {h->c, lane};
  // The hook may record (a handoff) before this thread ran anything: its trace track is the
  // run lane's from the first event on.
  if (!on_run_lane_named) {
    lw__trace_role("run lane", h->chip->cfg.device_id);
    on_run_lane_named = true;
  }
  while (!lw__lane_has_work_or_stop(lane) && !atomic_load(&leaving)) {
    uint64_t seq = atomic_load(&next_seq);
    // A parent that posts ahead of the run lane has put the next task in the frame after the
    // last one taken: found there, it is taken at once, without a wait or a read of the
    // doorbell (whose line the parent writes at every post: one cross-core transfer in each
    // task's path otherwise). The run lane did not sleep for it, so where it runs is as good
    // as before, but for the case where the two share a CPU (see place_run_lane).
    bool ahead = lw__mailbox_post_in_frame(
        h->c->mb, seq, atomic_load_explicit(&next_frame_hint, memory_order_relaxed));
    if (ahead && ++unplaced_takes == RUN_LANE_PLACE_EVERY) {
      unplaced_takes = 0;
      place_run_lane(h->c->mb, RUN_LANE_PLACE_EVERY, h->chip->cfg.device_id);
    }
    if (!ahead) {
      // A bounded sleep: the mailbox loop wakes the doorbell when it leaves, this only bounds
      // what a lost wake-up could cost.
      (void)lw__waitword_wait_partner(&h->c->mb->doorbell.word, run_lane_should_wake, &rw,
                                      lw__now_ns() + 1000000000, true, run_lane_partner);
      seq = atomic_load(&next_seq);
      if (atomic_load_explicit(&h->c->mb->doorbell.post_seq, memory_order_acquire) < seq) {
        continue;
      }
      place_run_lane(h->c->mb, 1, h->chip->cfg.device_id);
    }
    pthread_mutex_lock(&take_mu);
    serve_post_locked(h->c, h->chip, seq);
    pthread_mutex_unlock(&take_mu);
    // The parent is ahead (its post was there before the run lane looked): the next one is
    // likely posted already too, in the frame after. Its lines are asked for now, to come
    // over while this task runs. Not when the run lane had to wait: the parent may be
    // writing that frame right now, and taking its line away would cost it a transfer.
    if (ahead) {
      lw__mailbox_prefetch_post(h->c->mb,
                                atomic_load_explicit(&next_frame_hint, memory_order_relaxed));
    }
  }
  atomic_store(&run_lane_taking, false);
  return true;
}

_Noreturn void lw__chip_child_main(const lw_child_env_t *env) {
  lw_child_ctx_t c;
  lw__child_ctx_init(&c, env);
  char name[16];
  snprintf(name, sizeof(name), "lw-chip-%d", env->chip.device_id);
  prctl(PR_SET_NAME, name);
  lw__trace_role("mailbox loop", env->chip.device_id);

  lw_error_t err;
  lw__error_clear(&err);
  int node = bind_numa(&env->chip, c.mb, &err);
  atomic_store(&c.mb->header.numa_node, node >= 0 ? node : -1);
  if (node == -2) {
    lw__child_publish_init(&c, LW_MB_INIT_FAILED, &err);
    _exit(LW_CHILD_EXIT_START_FAILED);
  }
  lw_chip_t *chip = NULL;
  if (lw__chip_open_on(&env->chip, env->device, &chip, &err) != LW_OK) {
    lw__child_publish_init(&c, LW_MB_INIT_FAILED, &err);
    _exit(LW_CHILD_EXIT_START_FAILED);
  }
  // The arena outlives the chip and holds every task's tensors: a backend may map it once.
  lw__chip_set_host_region(chip, env->arena.base, env->arena.bytes);
  lw__child_publish_init(&c, LW_MB_INIT_READY, NULL);

  run_lane_hook_t hook = {&c, chip};
  lw_lane_idle_t idle = {run_lane_idle, wake_run_lane_hook, &hook};
  // LW_RUN_LANE_POSTS=0 leaves every post to the mailbox loop (the hop chain before the hook;
  // for comparisons: docs/benchmarks.md, "Dispatch under load").
  const char *knob = getenv("LW_RUN_LANE_POSTS");
  if (!(knob && strcmp(knob, "0") == 0)) lw__lane_set_idle(chip->run_lane, &idle);

  uint64_t cancel_seen = 0;
  for (;;) {
    uint64_t seq = atomic_load(&next_seq);
    // While the run lane waits for posts in its hook, task posts are its: this loop sleeps at
    // once on the doorbell's loop_word, which only control posts, cancel notices and shutdown
    // wake, so a task post wakes one thread and nothing spins beside the run lane (on a small
    // machine a second spinner takes the CPU the run lane or the parent needs). Posts a
    // busy run lane leaves are served here once a control or cancel wakes this loop, or by the
    // run lane when it is back in its hook.
    lw_child_wait_t how = {.controls_only = run_lane_is_taking};
    bool taking = atomic_load(&run_lane_taking);
    lw_child_wake_t why = lw__child_wait_post(&c, seq, &cancel_seen, taking ? &how : NULL);
    if (why == LW_CHILD_WAKE_LEAVE) break;
    if (why == LW_CHILD_WAKE_CANCEL) {
      pthread_mutex_lock(&take_mu);
      for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) forward_cancel(&c, f);
      pthread_mutex_unlock(&take_mu);
      continue;
    }
    // An idle run lane was woken by the same doorbell and takes the post itself; give it a
    // moment (pauses only: a yield would hand a busy CPU to somebody else for a timeslice),
    // then serve the post here if it has not.
    for (int i = 0; i < 64 && atomic_load(&run_lane_taking) && atomic_load(&next_seq) == seq;
         ++i) {
      lw__cpu_relax();
    }
    pthread_mutex_lock(&take_mu);
    serve_post_locked(&c, chip, seq);
    pthread_mutex_unlock(&take_mu);
  }
  // The run lane leaves its hook (woken here) and waits on its own futex, which close wakes.
  atomic_store(&leaving, true);
  lw__waitword_wake(&c.mb->doorbell.word, true);
  lw_chip_close(chip);  // finishes every queued run, so the frames' runs are done
  for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) {
    if (frames[f].run) lw_handle_release(frames[f].run);
  }
  _exit(LW_CHILD_EXIT_OK);
}
