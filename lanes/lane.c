// lanes/lane.c — a FIFO of intrusive items served by one thread.
//
// The list, the sequence counter and the stopping flag are guarded by mu. Two counters are
// mirrored in atomics so that waiters can test their condition without the lock:
//   queued     items in the list (the lane thread's "work to do" condition);
//   in_flight  items queued or running (the submitters' "space left" condition).
// Each counter has a waitword: the lane thread sleeps on work_word, submitters of a full lane
// sleep on space_word.
//
// lw__lane_run_here: a caller that finds the lane idle runs its item itself. `here` (set and
// cleared under mu, mirrored in an atomic for the lock-free checks) holds the lane thread off
// the list meanwhile; clearing it under mu orders it against every enqueue, so the finisher
// either sees what was queued meanwhile and wakes the lane, or the later submitter's own wake
// finds here clear.
#include "lanes/lane.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/wait.h"

#define LANE_NAME_BYTES 32

struct lw_lane {
  char name[LANE_NAME_BYTES];
  uint32_t capacity;

  pthread_mutex_t mu;
  lw_lane_item_t *head;  // guarded by mu
  lw_lane_item_t *tail;  // guarded by mu
  uint64_t next_seq;     // guarded by mu; last sequence number handed out
  bool stopping;         // guarded by mu; set once by destroy
  bool here;             // guarded by mu; an lw__lane_run_here item is running
  lw_lane_drain_t mode;  // guarded by mu; valid once stopping

  _Atomic uint32_t queued;     // mirrors the list length for lock-free idle checks
  _Atomic uint32_t in_flight;  // queued + running, counted against capacity
  _Atomic uint32_t stop;       // mirrors stopping for lock-free checks
  _Atomic uint32_t here_a;     // mirrors here for lock-free checks
  _Atomic(const lw_lane_idle_t *) idle;  // lw__lane_set_idle; NULL: wait on work_word

  lw_waitword_t work_word;   // lane thread sleeps here; woken by submit and destroy
  lw_waitword_t space_word;  // full-lane submitters sleep here; woken when an item finishes
  lw_timeline_t timeline;    // signalled with each item's seq after its fn returns

  pthread_t thread;
  bool thread_started;
};

// The lane whose thread this is (NULL on other threads). A thread-local instead of comparing
// pthread_t values: it is never read before it is written, so it has no race with create.
static _Thread_local const lw_lane_t *current_lane;

static bool has_work_or_stop(const void *ctx) {
  const lw_lane_t *lane = ctx;
  // Relaxed: a hint only; the lane thread re-reads the list under mu before acting.
  return (atomic_load_explicit(&lane->queued, memory_order_relaxed) != 0 ||
          atomic_load_explicit(&lane->stop, memory_order_relaxed) != 0) &&
         atomic_load_explicit(&lane->here_a, memory_order_relaxed) == 0;
}

// The lane's own wait: also ends when a different idle hook is installed, so a lane asleep
// before lw__lane_set_idle goes round and calls the new hook.
typedef struct idle_wait {
  const lw_lane_t *lane;
  const lw_lane_idle_t *seen;  // the hook the lane thread saw before it began to wait
} idle_wait_t;

static bool has_work_stop_or_new_hook(const void *ctx) {
  const idle_wait_t *iw = ctx;
  return has_work_or_stop(iw->lane) ||
         atomic_load_explicit(&iw->lane->idle, memory_order_relaxed) != iw->seen;
}

static bool has_space_or_stop(const void *ctx) {
  const lw_lane_t *lane = ctx;
  // Relaxed: a hint only; submit re-checks under mu before queuing.
  return atomic_load_explicit(&lane->in_flight, memory_order_relaxed) < lane->capacity ||
         atomic_load_explicit(&lane->stop, memory_order_relaxed) != 0;
}

// Appends item; caller holds mu and has checked stopping.
static uint64_t enqueue_locked(lw_lane_t *lane, lw_lane_item_t *item) {
  item->next = NULL;
  item->seq = ++lane->next_seq;
  if (lane->tail != NULL) {
    lane->tail->next = item;
  } else {
    lane->head = item;
  }
  lane->tail = item;
  // Relaxed: mu orders these with the list; the waitword's seq_cst epoch bump that follows
  // publishes them to lock-free readers (see lanes/wait.c).
  atomic_fetch_add_explicit(&lane->in_flight, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&lane->queued, 1, memory_order_relaxed);
  return item->seq;
}

// Wakes the lane thread wherever it waits: its futex, and its idle hook's own word.
static void wake_lane(lw_lane_t *lane) {
  lw__waitword_wake(&lane->work_word, false);
  const lw_lane_idle_t *idle = atomic_load_explicit(&lane->idle, memory_order_acquire);
  if (idle != NULL && idle->wake != NULL) idle->wake(idle->ctx);
}

// After a submit. Not from the lane's own thread (its hook or an item's fn), nor from inside
// lw__lane_run_here: the lane thread is awake then and checks its queue before it waits again
// (after the hook or fn returns), and run_here wakes it for what queued meanwhile when its item
// ends. A wake there would only cost barriers, and the hook's wake (a chip child's run lane
// queuing the task it took) writes a line another process writes at every post.
static void wake_lane_after_submit(lw_lane_t *lane) {
  if (current_lane != lane) wake_lane(lane);
}

// After an item's fn returned (on the lane thread or in lw__lane_run_here). Frees the capacity
// slot before signalling the timeline, so that a waiter that sees seq reached also finds its
// slot free. Release: the slot is reused by the submitter that observes it; seq_cst is
// provided by the wake that follows.
static void item_done(lw_lane_t *lane, uint64_t seq) {
  atomic_fetch_sub_explicit(&lane->in_flight, 1, memory_order_release);
  lw__waitword_wake(&lane->space_word, false);
  // Fails when the timeline already passed seq (a run_here item that started once in_flight
  // fell to 0 and signalled first: harmless, the timeline only moves forward) or when someone
  // failed it from outside, which its waiters already see.
  lw_status_t st = lw__timeline_signal(&lane->timeline, seq);
  (void)st;
}

static void *lane_main(void *arg) {
  lw_lane_t *lane = arg;
  current_lane = lane;
  for (;;) {
    // Idle: the hook waits if there is one and wants to; otherwise spin, yield, then sleep on
    // the futex until work or destroy arrives.
    idle_wait_t iw = {lane, atomic_load_explicit(&lane->idle, memory_order_acquire)};
    if (!has_work_or_stop(lane) && !(iw.seen != NULL && iw.seen->fn(iw.seen->ctx, lane))) {
      (void)lw__waitword_wait(&lane->work_word, has_work_stop_or_new_hook, &iw,
                              LW_DEADLINE_NEVER, false);
    }

    pthread_mutex_lock(&lane->mu);
    if (lane->here) {  // woken while a caller runs an item itself: its finish wakes us again
      pthread_mutex_unlock(&lane->mu);
      continue;
    }
    lw_lane_item_t *item = lane->head;
    if (item == NULL) {
      bool stopping = lane->stopping;
      pthread_mutex_unlock(&lane->mu);
      if (stopping) break;  // drained: nothing queued and nothing more can be queued
      continue;
    }
    lane->head = item->next;
    if (lane->head == NULL) lane->tail = NULL;
    // Relaxed: only a hint for has_work_or_stop; the list under mu is the truth.
    atomic_fetch_sub_explicit(&lane->queued, 1, memory_order_relaxed);
    bool cancelled = lane->stopping && lane->mode == LW_LANE_DRAIN_CANCEL;
    pthread_mutex_unlock(&lane->mu);

    // Read seq before calling fn: fn usually finishes a handle and may free the item.
    uint64_t seq = item->seq;
    item->next = NULL;
    item->fn(item, cancelled);
    item_done(lane, seq);
  }
  current_lane = NULL;
  return NULL;
}

void lw__lane_destroy(lw_lane_t *lane, lw_lane_drain_t mode) {
  if (lane == NULL) return;
  if (current_lane == lane) {
    // The lane thread cannot join itself; going on would free the lane under its own feet.
    fprintf(stderr, "lanework: lw__lane_destroy(%s) called on the lane's own thread\n",
            lane->name);
    abort();
  }
  if (lane->thread_started) {
    pthread_mutex_lock(&lane->mu);
    lane->stopping = true;
    lane->mode = mode;
    // Relaxed: published to lock-free readers by the seq_cst epoch bumps below.
    atomic_store_explicit(&lane->stop, 1, memory_order_relaxed);
    pthread_mutex_unlock(&lane->mu);
    wake_lane(lane);
    lw__waitword_wake(&lane->space_word, false);  // blocked submitters fail UNAVAILABLE
    pthread_join(lane->thread, NULL);
  }
  lw__timeline_deinitialize(&lane->timeline);
  pthread_mutex_destroy(&lane->mu);
  free(lane);
}

lw_status_t lw__lane_create(const char *name, uint32_t capacity, lw_lane_t **out,
                            lw_error_t *err) {
  if (out == NULL) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "lane: out is NULL");
  *out = NULL;
  if (capacity == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "lane: capacity must be > 0");
  }

  lw_lane_t *lane = calloc(1, sizeof(*lane));
  if (lane == NULL) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "lane: out of memory");
  }
  snprintf(lane->name, sizeof(lane->name), "%s", name != NULL ? name : "lane");
  lane->capacity = capacity;
  pthread_mutex_init(&lane->mu, NULL);
  atomic_init(&lane->queued, 0);
  atomic_init(&lane->in_flight, 0);
  atomic_init(&lane->stop, 0);
  atomic_init(&lane->here_a, 0);
  atomic_init(&lane->idle, NULL);
  lw__waitword_initialize(&lane->work_word);
  lw__waitword_initialize(&lane->space_word);
  lw__timeline_initialize(&lane->timeline, 0, 0);

  // The lane thread blocks every asynchronous signal: process signals (SIGINT, SIGCHLD...)
  // belong to the application's threads, never to a thread running kernels.
  int rc = lw__sys_thread_start(&lane->thread, lane->name, lane_main, lane);
  if (rc != 0) {
    lw__lane_destroy(lane, LW_LANE_DRAIN_CANCEL);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "lane %s: cannot start its thread (error %d)",
                         name != NULL ? name : "lane", rc);
  }
  lane->thread_started = true;
  *out = lane;
  return LW_OK;
}

lw_status_t lw__lane_submit(lw_lane_t *lane, lw_lane_item_t *item, int64_t deadline_ns,
                           uint64_t *out_seq, lw_error_t *err) {
  if (lane == NULL || item == NULL || item->fn == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "lane: NULL lane, item or item fn");
  }
  for (;;) {
    pthread_mutex_lock(&lane->mu);
    if (lane->stopping) {
      pthread_mutex_unlock(&lane->mu);
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "lane %s: shutting down", lane->name);
    }
    // Relaxed: in_flight only grows under mu, so under mu this read bounds it from above.
    if (atomic_load_explicit(&lane->in_flight, memory_order_relaxed) < lane->capacity) {
      uint64_t seq = enqueue_locked(lane, item);
      pthread_mutex_unlock(&lane->mu);
      wake_lane_after_submit(lane);
      if (out_seq != NULL) *out_seq = seq;
      return LW_OK;
    }
    pthread_mutex_unlock(&lane->mu);

    // The lane thread frees slots; waiting for one on the lane thread itself would deadlock.
    if (current_lane == lane) {
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                           "lane %s: full (capacity %u) and submit came from its own thread",
                           lane->name, lane->capacity);
    }
    if (lw__waitword_wait(&lane->space_word, has_space_or_stop, lane, deadline_ns, false) !=
        LW_OK) {
      // One last try under mu: a slot may have freed just as the deadline passed.
      pthread_mutex_lock(&lane->mu);
      lw_status_t st = LW_RESOURCE_EXHAUSTED;
      uint64_t seq = 0;
      if (lane->stopping) {
        st = LW_UNAVAILABLE;
      } else if (atomic_load_explicit(&lane->in_flight, memory_order_relaxed) < lane->capacity) {
        seq = enqueue_locked(lane, item);  // relaxed load: see above
        st = LW_OK;
      }
      pthread_mutex_unlock(&lane->mu);
      if (st == LW_OK) {
        wake_lane_after_submit(lane);
        if (out_seq != NULL) *out_seq = seq;
        return LW_OK;
      }
      if (st == LW_UNAVAILABLE) {
        return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "lane %s: shutting down", lane->name);
      }
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                           "lane %s: full (capacity %u) past the deadline", lane->name,
                           lane->capacity);
    }
    // Space (or stop) observed: loop and try again under mu; another submitter may win.
  }
}

lw_status_t lw__lane_submit_reserved(lw_lane_t *lane, lw_lane_item_t *item, uint64_t *out_seq,
                                    lw_error_t *err) {
  if (lane == NULL || item == NULL || item->fn == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "lane: NULL lane, item or item fn");
  }
  pthread_mutex_lock(&lane->mu);
  if (lane->stopping) {
    pthread_mutex_unlock(&lane->mu);
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "lane %s: shutting down", lane->name);
  }
  uint64_t seq = enqueue_locked(lane, item);
  pthread_mutex_unlock(&lane->mu);
  wake_lane_after_submit(lane);
  if (out_seq != NULL) *out_seq = seq;
  return LW_OK;
}

bool lw__lane_run_here(lw_lane_t *lane, lw_lane_item_t *item, uint64_t *out_seq) {
  if (current_lane == lane) return false;  // the lane's own thread (or a nested run_here)
  // Relaxed peek: a busy lane is the common refusal and costs no lock.
  if (atomic_load_explicit(&lane->in_flight, memory_order_relaxed) != 0) return false;
  pthread_mutex_lock(&lane->mu);
  if (lane->stopping || lane->here ||
      atomic_load_explicit(&lane->in_flight, memory_order_relaxed) != 0) {
    pthread_mutex_unlock(&lane->mu);
    return false;
  }
  item->next = NULL;
  item->seq = ++lane->next_seq;
  lane->here = true;
  atomic_store_explicit(&lane->here_a, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&lane->in_flight, 1, memory_order_relaxed);
  pthread_mutex_unlock(&lane->mu);

  uint64_t seq = item->seq;
  if (out_seq != NULL) *out_seq = seq;
  const lw_lane_t *outer = current_lane;
  current_lane = lane;  // a submit from inside fn to a full lane fails instead of waiting
  item->fn(item, false);
  current_lane = outer;

  // Signal seq before the lane thread may take (and signal) what queued behind it: the
  // timeline only moves forward. Then release the lane; what was queued meanwhile (or a
  // destroy) woke the lane thread while `here` held it off, so wake it again.
  item_done(lane, seq);
  pthread_mutex_lock(&lane->mu);
  lane->here = false;
  atomic_store_explicit(&lane->here_a, 0, memory_order_relaxed);
  // Under mu: once `here` is clear, a stopping lane thread may leave and destroy free the lane
  // as soon as it can take mu; it cannot before this thread is done with the lane.
  if (lane->head != NULL || lane->stopping) wake_lane(lane);
  pthread_mutex_unlock(&lane->mu);
  return true;
}

lw_timeline_t *lw__lane_timeline(lw_lane_t *lane) { return &lane->timeline; }

void lw__lane_set_idle(lw_lane_t *lane, const lw_lane_idle_t *idle) {
  atomic_store_explicit(&lane->idle, idle, memory_order_release);
  // A lane asleep on its futex goes round once and finds the hook.
  lw__waitword_wake(&lane->work_word, false);
}

bool lw__lane_has_work_or_stop(const lw_lane_t *lane) {
  return (atomic_load_explicit(&lane->queued, memory_order_acquire) != 0 ||
          atomic_load_explicit(&lane->stop, memory_order_acquire) != 0) &&
         atomic_load_explicit(&lane->here_a, memory_order_acquire) == 0;
}

bool lw__lane_is_current(const lw_lane_t *lane) { return lane != NULL && current_lane == lane; }

const char *lw__lane_name(const lw_lane_t *lane) { return lane->name; }

lw_status_t lw__lane_set_cpu(lw_lane_t *lane, int cpu, lw_error_t *err) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "lane %s: cpu %d is out of range",
                         lane->name, cpu);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(lane->thread, sizeof(set), &set);
  if (rc != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "lane %s: cannot run on cpu %d (error %d)", lane->name, cpu, rc);
  }
  return LW_OK;
}
