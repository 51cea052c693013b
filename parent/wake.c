// parent/wake.c — the worker's few calls that every component makes (declared in
// parent/worker_impl.h): waking the scheduler (also the DAG's doorbell), writing the user's
// event fd, the heartbeat period asked of the children. A leaf: it calls no other parent
// file, so no component has to call up into worker.c, which only wires them together.
#include <unistd.h>

#include "parent/worker_impl.h"

int64_t lw__heartbeat_period_ns(const lw_worker_t *w) {
  int64_t live = w->cfg.liveness_timeout_ns;
  if (live <= 0) return 0;  // the child picks its own (slow) period
  // Several beats per timeout, so one late wake-up of a busy child is not a death.
  int64_t p = live / 8;
  if (p < 1000000) p = 1000000;
  if (p > 250000000) p = 250000000;
  return p;
}

void lw__worker_kick(lw_worker_t *w) { lw__sched_kick(&w->sched); }

void lw__worker_write_user_fd(lw_worker_t *w) {
  uint64_t one = 1;
  ssize_t n = write(w->user_fd, &one, sizeof(one));
  (void)n;  // EAGAIN: the counter is saturated, the fd is readable anyway
}

void lw__worker_notify_user(void *ctx, lw_handle_t *h) {
  (void)h;
  lw_worker_t *w = ctx;
  // Once pending, it stays so: later finishes skip the store (see worker_impl.h).
  if (!atomic_load_explicit(&w->user_fd_pending, memory_order_relaxed)) {
    atomic_store(&w->user_fd_pending, true);
  }
  if (atomic_load(&w->user_fd_armed)) lw__worker_write_user_fd(w);
}
