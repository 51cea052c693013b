// tests/parent/test_orch_longjmp.c — an orch function that does not return (docs/api.md,
// "Exceptions and longjmp"): a longjmp out of an inline orch function is reported by the next
// run or run_async on that thread (or handled by destroy), which stops the abandoned run and
// gives the worker back; a sync run from inside an orch function of the same worker is refused
// rather than waiting for itself. (A C++ exception: test_orch_exceptions.c.)
#include <pthread.h>
#include <setjmp.h>

#include "lanework/orch.h"
#include "lanework/stats.h"
#include "lanework/worker.h"
#include "worker_test_util.h"

typedef struct jump_job {
  jmp_buf *env;
  lw_callable_handle_t gate;  // with submit: a gate task is in flight when the function jumps
  shared_state_t *s;
  bool submit;
} jump_job_t;

static lw_status_t jump_orch(lw_orch_t *o, void *user) {
  jump_job_t *j = user;
  if (j->submit) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, &j->s->gate, sizeof(uint32_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, &j->s->entered, sizeof(uint32_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
    lw_test_wait_nonzero(&j->s->entered);  // the task runs on the chip
  }
  longjmp(*j->env, 1);
}

static lw_status_t ok_orch(lw_orch_t *o, void *user) {
  (void)o;
  (void)user;
  return LW_OK;
}

// Runs jump_orch through lw_worker_run on this thread; returns once its longjmp came back here.
static __attribute__((noinline)) void run_and_jump(jump_job_t *j) {
  jmp_buf env;
  j->env = &env;
  if (setjmp(env) == 0) {
    lw_run_report_t rep;
    lw_status_t st = lw_worker_run(w, jump_orch, j, &rep);
    cr_assert(false, "lw_worker_run returned %s instead of jumping", lw_status_name(st));
  }
}

static void expect_left_by_longjmp(lw_status_t st, const char *call, uint64_t run) {
  char want[64];
  snprintf(want, sizeof(want), "the orch function of run %llu", (unsigned long long)run);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "%s -> %s: %s", call, lw_status_name(st),
               lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, want), "%s", lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "never returned (a longjmp out of it?)"), "%s",
            lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "Exceptions and longjmp"), "%s",
            lw_last_error()->message);
}

static lw_worker_stats_t stats(void) {
  lw_worker_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  LW_ASSERT_OK(lw_worker_stats(w, &s));
  return s;
}

Test(orch_longjmp, the_next_run_on_the_thread_reports_the_abandoned_run_and_the_one_after_runs,
     .timeout = 60) {
  make_worker(1, 0);
  jump_job_t j = {0};
  run_and_jump(&j);
  lw_run_report_t rep;
  expect_left_by_longjmp(lw_worker_run(w, ok_orch, NULL, &rep), "worker_run", 1);
  LW_ASSERT_OK(lw_worker_run(w, ok_orch, NULL, &rep));
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, ok_orch, NULL, &h));
  LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
  lw_handle_release(h);
  lw_worker_stats_t s = stats();
  cr_assert_eq(s.runs_failed, 1, "the abandoned run counts failed once");
  cr_assert_eq(s.runs_ok, 2);
  destroy_and_check();
}

Test(orch_longjmp, run_async_after_a_longjmp_reports_it_and_the_worker_runs_again, .timeout = 60) {
  make_worker(1, 0);
  jump_job_t j = {0};
  run_and_jump(&j);
  lw_handle_t *h = (lw_handle_t *)&j;  // must be cleared
  expect_left_by_longjmp(lw_worker_run_async(w, ok_orch, NULL, &h), "worker_run_async", 1);
  cr_assert_null(h);
  LW_ASSERT_OK(lw_worker_run_async(w, ok_orch, NULL, &h));
  LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
  lw_handle_release(h);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, ok_orch, NULL, &rep));
  destroy_and_check();
}

Test(orch_longjmp, destroy_after_a_longjmp_finishes_and_leaves_nothing_behind, .timeout = 60) {
  make_worker(1, 0);
  jump_job_t j = {0};
  run_and_jump(&j);
  destroy_and_check();
}

static void *jump_on_a_thread(void *arg) {
  run_and_jump(arg);
  return NULL;
}

Test(orch_longjmp, destroy_on_another_thread_after_a_longjmp_finishes, .timeout = 60) {
  make_worker(1, 0);
  jump_job_t j = {0};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, jump_on_a_thread, &j), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  destroy_and_check();
}

// The next call comes from deeper in the stack than the abandoned frame was: the frame is
// found gone all the same, not taken for a call from inside the orch function.
static __attribute__((noinline)) lw_status_t run_from_deeper(int depth) {
  volatile char pad[512];
  pad[0] = (char)depth;
  lw_run_report_t rep;
  lw_status_t st = depth == 0 ? lw_worker_run(w, ok_orch, NULL, &rep) : run_from_deeper(depth - 1);
  return pad[0] == (char)depth ? st : LW_INTERNAL;
}

Test(orch_longjmp, a_call_from_deeper_in_the_stack_still_finds_the_frame_gone, .timeout = 60) {
  make_worker(1, 0);
  jump_job_t j = {0};
  run_and_jump(&j);
  expect_left_by_longjmp(run_from_deeper(16), "worker_run", 1);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, ok_orch, NULL, &rep));
  destroy_and_check();
}

Test(orch_longjmp, a_task_in_flight_at_the_longjmp_ends_once_when_the_run_is_stopped,
     .timeout = 60) {
  make_worker(1, 0);
  jump_job_t j = {.gate = wreg("gate"), .s = new_shared(), .submit = true};
  run_and_jump(&j);
  lw_run_report_t rep;
  expect_left_by_longjmp(lw_worker_run(w, ok_orch, NULL, &rep), "worker_run", 1);
  // Runs finish in order: once this one returns, run 1 has ended, its task with it (the gate
  // never opened: the run's stop cancelled it).
  LW_ASSERT_OK(lw_worker_run(w, ok_orch, NULL, &rep));
  lw_worker_stats_t s = stats();
  cr_assert_eq(s.tasks_submitted, 1);
  cr_assert_eq(s.child[0].tasks_cancelled, 1, "the gate task ends once, cancelled");
  cr_assert_eq(s.child[0].tasks_run + s.child[0].tasks_failed + s.tasks_poisoned +
                   s.tasks_skipped,
               0);
  cr_assert_eq(s.runs_failed, 1);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Calls from inside an orch function of the same worker

typedef struct nested_job {
  lw_status_t sync_st;
  char sync_msg[LW_ERROR_MESSAGE_BYTES];
  lw_status_t async_st;
  lw_handle_t *async_h;
} nested_job_t;

static lw_status_t nesting_orch(lw_orch_t *o, void *user) {
  (void)o;
  nested_job_t *n = user;
  lw_run_report_t rep;
  n->sync_st = lw_worker_run(w, ok_orch, NULL, &rep);
  snprintf(n->sync_msg, sizeof(n->sync_msg), "%s", lw_last_error()->message);
  n->async_st = lw_worker_run_async(w, ok_orch, NULL, &n->async_h);
  return LW_OK;
}

static void expect_nested(const nested_job_t *n) {
  cr_assert_eq(n->sync_st, LW_FAILED_PRECONDITION, "%s", n->sync_msg);
  cr_assert(strstr(n->sync_msg, "from inside the orch function of run 1"), "%s", n->sync_msg);
  cr_assert(strstr(n->sync_msg, "it would wait for itself"), "%s", n->sync_msg);
  // run_async from inside queues behind the running function, as it always did.
  cr_assert_eq(n->async_st, LW_OK);
  LW_ASSERT_OK(lw_handle_wait(n->async_h, LW_WAIT_FOREVER));
  lw_handle_release(n->async_h);
}

Test(orch_longjmp, a_sync_run_from_inside_an_inline_orch_function_is_refused_at_once,
     .timeout = 60) {
  make_worker(1, 0);
  nested_job_t n = {0};
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, nesting_orch, &n, &rep));
  expect_nested(&n);
  destroy_and_check();
}

Test(orch_longjmp, a_sync_run_from_inside_an_orch_function_on_the_orchestrator_is_refused,
     .timeout = 60) {
  make_worker(1, 0);
  nested_job_t n = {0};
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, nesting_orch, &n, &h));
  LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
  lw_handle_release(h);
  expect_nested(&n);
  destroy_and_check();
}
