// parent/thread.c — the worker's thread start/stop pair (contract in parent/thread.h).
#include "parent/thread.h"

#include "lanes/error.h"
#include "lanes/sys.h"

lw_status_t lw__thread_start(lw_thread_t *t, const char *name, const char *what,
                             void *(*fn)(void *), void *arg, lw_error_t *err) {
  t->started = false;
  if (lw__sys_thread_start(&t->thread, name, fn, arg) != 0) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker: cannot start the %s thread",
                         what);
  }
  t->started = true;
  return LW_OK;
}

void lw__thread_stop(lw_thread_t *t, void (*wake)(void *ctx), void *ctx) {
  if (!t->started) return;
  if (wake) wake(ctx);
  pthread_join(t->thread, NULL);
  t->started = false;
}
