// tests/lanes/test_handle.c — lw_handle_t: finish once, waits, cancel, release/refcounts.
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/handle_impl.h"
#include "lanes/sys.h"
#include "lanework/handle.h"

// A fake operation: the handle first, as lanes/handle_impl.h requires.
typedef struct test_op {
  lw_handle_t handle;
  _Atomic uint32_t *destroyed;  // counts destroy calls; outlives the op
  _Atomic uint32_t cancels;     // ops->cancel calls
  bool free_on_destroy;
} test_op_t;

static lw_status_t op_cancel(lw_handle_t *h) {
  test_op_t *op = (test_op_t *)h;
  atomic_fetch_add(&op->cancels, 1);
  return LW_OK;
}

static void op_destroy(lw_handle_t *h) {
  test_op_t *op = (test_op_t *)h;
  atomic_fetch_add(op->destroyed, 1);
  if (op->free_on_destroy) free(op);
}

static const lw_handle_ops_t test_ops = {op_cancel, op_destroy};
static const lw_handle_ops_t no_cancel_ops = {NULL, op_destroy};

static test_op_t *op_create(lw_handle_kind_t kind, _Atomic uint32_t *destroyed) {
  test_op_t *op = calloc(1, sizeof(*op));
  cr_assert_not_null(op);
  lw__handle_initialize(&op->handle, kind, &test_ops);
  op->destroyed = destroyed;
  op->free_on_destroy = true;
  return op;
}

// Drops both references (caller's and producer's).
static void op_drop_all(test_op_t *op) {
  lw_handle_release(&op->handle);
  lw__handle_unref(&op->handle);
}

Test(handle, is_not_done_until_finished_then_done_with_status) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  lw_handle_t *h = &op->handle;
  cr_assert_not(lw_handle_done(h));
  cr_assert_eq(lw_handle_status(h), LW_FAILED_PRECONDITION);
  cr_assert_null(lw_handle_error(h));
  cr_assert_eq(lw_handle_kind(h), LW_HANDLE_RUN);
  cr_assert(lw__handle_finish(h, LW_OK, NULL));
  cr_assert(lw_handle_done(h));
  cr_assert_eq(lw_handle_status(h), LW_OK);
  cr_assert_null(lw_handle_error(h), "a successful handle has no error");
  op_drop_all(op);
  cr_assert_eq(destroyed, 1);
}

Test(handle, failed_finish_without_error_record_names_the_status) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  cr_assert(lw__handle_finish(&op->handle, LW_TASK_FAILED, NULL));
  const lw_error_t *e = lw_handle_error(&op->handle);
  cr_assert_not_null(e);
  cr_assert_eq(e->code, LW_TASK_FAILED);
  cr_assert_str_eq(e->message, "LW_TASK_FAILED");
  op_drop_all(op);
}

typedef struct finisher {
  lw_handle_t *h;
  pthread_barrier_t *barrier;
  lw_status_t status;
  bool won;
} finisher_t;

static void *finisher_main(void *p) {
  finisher_t *f = p;
  pthread_barrier_wait(f->barrier);
  lw_error_t err;
  (void)lw__error_set(&err, f->status, 3, 9, "finisher with status %d", (int)f->status);
  f->won = lw__handle_finish(f->h, f->status, &err);
  return NULL;
}

#define N_FINISHERS 8

Test(handle, finishes_exactly_once_when_many_threads_race, .timeout = 20) {
  for (int round = 0; round < 50; ++round) {
    _Atomic uint32_t destroyed = 0;
    test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, N_FINISHERS);
    pthread_t th[N_FINISHERS];
    finisher_t f[N_FINISHERS];
    for (int i = 0; i < N_FINISHERS; ++i) {
      // Distinct statuses, so the stored status names the winner.
      f[i] = (finisher_t){&op->handle, &barrier, (lw_status_t)(LW_CANCELLED + i), false};
      cr_assert_eq(pthread_create(&th[i], NULL, finisher_main, &f[i]), 0);
    }
    int winners = 0;
    lw_status_t winner_status = LW_OK;
    for (int i = 0; i < N_FINISHERS; ++i) {
      pthread_join(th[i], NULL);
      if (f[i].won) {
        winners++;
        winner_status = f[i].status;
      }
    }
    pthread_barrier_destroy(&barrier);
    cr_assert_eq(winners, 1);
    cr_assert_eq(lw_handle_wait(&op->handle, LW_WAIT_FOREVER), winner_status);
    const lw_error_t *e = lw_handle_error(&op->handle);
    cr_assert_eq(e->code, winner_status);
    cr_assert_eq(e->worker_id, 3);
    cr_assert_eq(e->task_id, 9);
    op_drop_all(op);
    cr_assert_eq(destroyed, 1);
  }
}

Test(handle, wait_on_finished_handle_returns_the_same_status_every_time, .timeout = 10) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  lw_error_t err;
  (void)lw__error_set(&err, LW_TASK_FAILED, 1, 4, "chip 1: kernel k returned -3");
  cr_assert(lw__handle_finish(&op->handle, LW_TASK_FAILED, &err));
  for (int i = 0; i < 5; ++i) {
    cr_assert_eq(lw_handle_wait(&op->handle, LW_WAIT_FOREVER), LW_TASK_FAILED);
    cr_assert_eq(lw_handle_wait(&op->handle, 0), LW_TASK_FAILED);
    cr_assert_str_eq(lw_handle_error(&op->handle)->message, "chip 1: kernel k returned -3");
  }
  cr_assert_str_eq(lw_last_error()->message, "chip 1: kernel k returned -3",
                   "a failing wait leaves the op's error as this thread's last error");
  cr_assert_not(lw__handle_finish(&op->handle, LW_OK, NULL), "a second finish changes nothing");
  cr_assert_eq(lw_handle_status(&op->handle), LW_TASK_FAILED);
  op_drop_all(op);
}

Test(handle, timeout_zero_polls_an_unfinished_handle, .timeout = 10) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  cr_assert_eq(lw_handle_wait(&op->handle, 0), LW_DEADLINE_EXCEEDED);
  cr_assert_not(lw_handle_done(&op->handle), "a poll does not finish the operation");
  cr_assert(lw__handle_finish(&op->handle, LW_OK, NULL));
  cr_assert_eq(lw_handle_wait(&op->handle, 0), LW_OK);
  op_drop_all(op);
}

Test(handle, wait_timeout_returns_deadline_exceeded_after_at_least_the_timeout, .timeout = 10) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  const int64_t timeout = 20 * 1000 * 1000;
  int64_t start = lw__now_ns();
  cr_assert_eq(lw_handle_wait(&op->handle, timeout), LW_DEADLINE_EXCEEDED);
  cr_assert_geq(lw__now_ns() - start, timeout);
  cr_assert_eq(lw_last_error()->code, LW_DEADLINE_EXCEEDED);
  cr_assert_not(lw_handle_done(&op->handle), "the operation goes on");
  cr_assert(lw__handle_finish(&op->handle, LW_OK, NULL));
  op_drop_all(op);
}

typedef struct late_finisher {
  test_op_t *op;
  _Atomic uint32_t result_written;
} late_finisher_t;

static void *late_finisher_main(void *p) {
  late_finisher_t *lf = p;
  // Wait for the main thread to be asleep in the futex, then fill the result and finish.
  while (atomic_load(&lf->op->handle.done.word.sleepers) == 0) sched_yield();
  lf->op->handle.timing.kernel_wall_ns = 1234;  // result fields are filled BEFORE finish
  atomic_store(&lf->result_written, 1);
  (void)lw__handle_finish(&lf->op->handle, LW_OK, NULL);
  lw__handle_unref(&lf->op->handle);  // the producer is done with the op
  return NULL;
}

Test(handle, wait_sleeps_until_another_thread_finishes_and_sees_results, .timeout = 10) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  late_finisher_t lf = {op, 0};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, late_finisher_main, &lf), 0);
  cr_assert_eq(lw_handle_wait(&op->handle, LW_WAIT_FOREVER), LW_OK);
  cr_assert_eq(atomic_load(&lf.result_written), 1);
  lw_run_timing_t timing;
  cr_assert_eq(lw_handle_timing(&op->handle, &timing), LW_OK);
  cr_assert_eq(timing.kernel_wall_ns, 1234);
  pthread_join(th, NULL);
  cr_assert_eq(destroyed, 0, "the caller still holds its reference");
  lw_handle_release(&op->handle);
  cr_assert_eq(destroyed, 1);
}

Test(handle, cancel_before_done_calls_op_cancel_once_and_second_cancel_is_harmless) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  cr_assert_not(lw__handle_cancel_requested(&op->handle));
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_OK);
  cr_assert(lw__handle_cancel_requested(&op->handle));
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_OK);
  cr_assert_eq(atomic_load(&op->cancels), 1);
  cr_assert(lw__handle_finish(&op->handle, LW_CANCELLED, NULL));
  cr_assert_eq(lw_handle_wait(&op->handle, LW_WAIT_FOREVER), LW_CANCELLED);
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_NOT_FOUND);
  cr_assert_eq(lw_handle_status(&op->handle), LW_CANCELLED);
  op_drop_all(op);
}

Test(handle, cancel_after_done_is_not_found_and_changes_nothing) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  cr_assert(lw__handle_finish(&op->handle, LW_OK, NULL));
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_NOT_FOUND);
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_NOT_FOUND);
  cr_assert_eq(atomic_load(&op->cancels), 0);
  cr_assert_not(lw__handle_cancel_requested(&op->handle));
  cr_assert_eq(lw_handle_status(&op->handle), LW_OK);
  cr_assert_eq(lw_handle_wait(&op->handle, 0), LW_OK);
  op_drop_all(op);
}

Test(handle, cancel_without_cancel_hook_is_ok) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  op->handle.ops = &no_cancel_ops;
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_OK);
  cr_assert(lw__handle_cancel_requested(&op->handle));
  cr_assert(lw__handle_finish(&op->handle, LW_CANCELLED, NULL));
  op_drop_all(op);
}

Test(handle, release_before_finish_keeps_op_alive_until_producer_unrefs) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  lw_handle_release(&op->handle);  // the caller is gone; the operation goes on
  cr_assert_eq(destroyed, 0);
  cr_assert_eq(op->handle.magic, LW_HANDLE_MAGIC);
  cr_assert(lw__handle_finish(&op->handle, LW_OK, NULL));
  cr_assert_eq(destroyed, 0);
  lw__handle_ref(&op->handle);  // e.g. a notify path borrowing it
  lw__handle_unref(&op->handle);
  cr_assert_eq(destroyed, 0);
  lw__handle_unref(&op->handle);  // producer's reference: now it goes
  cr_assert_eq(destroyed, 1);
}

Test(handle, released_handle_is_rejected_by_magic_check) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_RUN, &destroyed);
  op->free_on_destroy = false;  // keep the memory so the test may look at it after destroy
  cr_assert(lw__handle_finish(&op->handle, LW_OK, NULL));
  op_drop_all(op);
  cr_assert_eq(destroyed, 1);
  cr_assert_eq(op->handle.magic, LW_HANDLE_MAGIC_DEAD);
  cr_assert_eq(lw_handle_wait(&op->handle, 0), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "released or invalid handle") != NULL, "got: %s",
            lw_last_error()->message);
  cr_assert_eq(lw_handle_cancel(&op->handle), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_handle_status(&op->handle), LW_INVALID_ARGUMENT);
  cr_assert_not(lw_handle_done(&op->handle));
  lw_handle_release(&op->handle);  // ignored: no second destroy
  cr_assert_eq(destroyed, 1);
  free(op);
}

Test(handle, null_handle_arguments_are_invalid_argument) {
  lw_callable_handle_t c;
  lw_run_timing_t t;
  cr_assert_not(lw_handle_done(NULL));
  cr_assert_eq(lw_handle_wait(NULL, 0), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_last_error()->code, LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_handle_wait(NULL, LW_WAIT_FOREVER), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_handle_cancel(NULL), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_handle_status(NULL), LW_INVALID_ARGUMENT);
  cr_assert_null(lw_handle_error(NULL));
  cr_assert_eq(lw_handle_callable(NULL, &c), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_handle_timing(NULL, &t), LW_INVALID_ARGUMENT);
  lw_handle_release(NULL);  // ignored
}

// Each public call sets the thread-local last error exactly when it fails with a bad
// argument, with a message naming the call; a call that only reports a state (not done yet,
// done and fine) leaves it as it was.
Test(handle, public_calls_set_the_last_error_exactly_when_an_argument_is_bad) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *run = op_create(LW_HANDLE_RUN, &destroyed);
  lw_run_timing_t t;
  lw_callable_handle_t c;
  (void)lw__fail(LW_POISONED, "set by the test");
  cr_assert_eq(lw_handle_timing(&run->handle, &t), LW_FAILED_PRECONDITION);
  cr_assert_eq(lw_handle_wait(&run->handle, 0), LW_DEADLINE_EXCEEDED);  // a poll
  cr_assert_eq(lw_last_error()->code, LW_POISONED);
  cr_assert_str_eq(lw_last_error()->message, "set by the test");

  cr_assert_eq(lw_handle_callable(&run->handle, &c), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message,
                   "lw_handle_callable: wrong handle kind 3 (want 1)");
  cr_assert_eq(lw_handle_timing(&run->handle, NULL), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message, "lw_handle_timing: out is NULL");
  cr_assert_eq(lw_handle_status(NULL), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message, "lw_handle_status: handle is NULL");
  cr_assert_eq(lw_handle_callable(NULL, &c), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message, "lw_handle_callable: handle is NULL");

  cr_assert(lw__handle_finish(&run->handle, LW_OK, NULL));
  (void)lw__fail(LW_POISONED, "set by the test");
  cr_assert_eq(lw_handle_timing(&run->handle, &t), LW_OK);
  cr_assert_eq(lw_handle_wait(&run->handle, 0), LW_OK);
  cr_assert_eq(lw_last_error()->code, LW_POISONED);
  op_drop_all(run);
  cr_assert_eq(destroyed, 1);
}

Test(handle, callable_is_returned_only_by_a_finished_successful_register_handle) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *reg = op_create(LW_HANDLE_REGISTER, &destroyed);
  lw_callable_handle_t c = {0};
  lw_run_timing_t t;
  cr_assert_eq(lw_handle_callable(&reg->handle, &c), LW_FAILED_PRECONDITION);
  cr_assert_eq(lw_handle_callable(&reg->handle, NULL), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_handle_timing(&reg->handle, &t), LW_INVALID_ARGUMENT, "wrong kind");
  reg->handle.callable.id = 42;
  cr_assert(lw__handle_finish(&reg->handle, LW_OK, NULL));
  cr_assert_eq(lw_handle_callable(&reg->handle, &c), LW_OK);
  cr_assert_eq(c.id, 42);
  op_drop_all(reg);

  test_op_t *failed = op_create(LW_HANDLE_REGISTER, &destroyed);
  cr_assert(lw__handle_finish(&failed->handle, LW_ALREADY_EXISTS, NULL));
  c.id = 7;
  cr_assert_eq(lw_handle_callable(&failed->handle, &c), LW_ALREADY_EXISTS);
  cr_assert_eq(c.id, 7, "out untouched on failure");
  op_drop_all(failed);

  test_op_t *run = op_create(LW_HANDLE_RUN, &destroyed);
  cr_assert(lw__handle_finish(&run->handle, LW_OK, NULL));
  cr_assert_eq(lw_handle_callable(&run->handle, &c), LW_INVALID_ARGUMENT, "wrong kind");
  cr_assert_eq(lw_handle_timing(&run->handle, &t), LW_OK);
  op_drop_all(run);
  cr_assert_eq(destroyed, 3);
}

// A run that failed or was cancelled has times too (lw_handle_timing), with its own status.
Test(handle, timing_of_a_cancelled_run_is_filled_and_returns_its_status) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *stopped = op_create(LW_HANDLE_RUN, &destroyed);
  stopped->handle.timing =
      (lw_run_timing_t){.host_wall_ns = 30, .queue_ns = 10, .kernel_wall_ns = 15};
  lw_run_timing_t t = {0};
  cr_assert_eq(lw_handle_timing(&stopped->handle, &t), LW_FAILED_PRECONDITION, "still running");
  cr_assert_eq(t.host_wall_ns, 0, "out untouched while it runs");
  cr_assert(lw__handle_finish(&stopped->handle, LW_CANCELLED, NULL));
  cr_assert_eq(lw_handle_timing(&stopped->handle, &t), LW_CANCELLED);
  cr_assert_eq(t.host_wall_ns, 30);
  cr_assert_eq(t.queue_ns, 10);
  cr_assert_eq(t.kernel_wall_ns, 15);
  op_drop_all(stopped);
  cr_assert_eq(destroyed, 1);
}

typedef struct notify_log {
  int calls;
  bool saw_done;
  lw_handle_t *h;
} notify_log_t;

static void on_finish(void *ctx, lw_handle_t *h) {
  notify_log_t *log = ctx;
  log->calls++;
  log->saw_done = lw_handle_done(h);
  log->h = h;
}

Test(handle, notify_runs_once_after_the_handle_is_done) {
  _Atomic uint32_t destroyed = 0;
  test_op_t *op = op_create(LW_HANDLE_WORKER_RUN, &destroyed);
  notify_log_t log = {0, false, NULL};
  lw__handle_set_notify(&op->handle, on_finish, &log);
  cr_assert(lw__handle_finish(&op->handle, LW_OK, NULL));
  cr_assert_not(lw__handle_finish(&op->handle, LW_OK, NULL));
  cr_assert_eq(log.calls, 1);
  cr_assert(log.saw_done);
  cr_assert_eq(log.h, &op->handle);
  op_drop_all(op);
}
