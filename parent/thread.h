// parent/thread.h — one start/stop pair for the worker's own threads (the orchestrator, the
// scheduler, the supervisor), so each component starts, stops and joins its thread the same
// way and a half-built worker can be stopped whatever it had started.
// Lifecycle: a zeroed lw_thread_t (started false) -> lw__thread_start (started true once the
// thread runs) -> lw__thread_stop (asks the thread to leave through the component's wake
// callback, joins it, started false again). stop on a thread that never started does nothing,
// so a component's deinitialize may call it unconditionally.
// Threads: start and stop from the thread that owns the component's lifecycle (worker create
// and destroy), never from the started thread itself. The started thread runs with every
// asynchronous signal blocked (lanes/sys.h, lw__sys_thread_start).
// Locks: none of its own; the wake callback takes whatever lock the component's exit flag
// needs, and is called with no lock held.
#ifndef LANEWORK_PARENT_THREAD_H_
#define LANEWORK_PARENT_THREAD_H_

#include <pthread.h>
#include <stdbool.h>

#include "lanework/status.h"

typedef struct lw_thread {
  pthread_t thread;
  bool started;  // set by start, cleared by stop (the lifecycle's thread only)
} lw_thread_t;

// Starts fn(arg) on a new thread named name (lw-*, at most 15 characters). On failure
// RESOURCE_EXHAUSTED "worker: cannot start the <what> thread" in *err, and t stays not started.
LW_MUST_USE lw_status_t lw__thread_start(lw_thread_t *t, const char *name, const char *what,
                                         void *(*fn)(void *), void *arg, lw_error_t *err);
// When t was started: wake(ctx) tells the thread to leave and wakes it (it must make the
// thread return in bounded time), then the thread is joined and t is not started again.
// Nothing when t never started.
void lw__thread_stop(lw_thread_t *t, void (*wake)(void *ctx), void *ctx);

#endif  // LANEWORK_PARENT_THREAD_H_
