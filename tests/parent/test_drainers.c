// tests/parent/test_drainers.c — while an orch function runs, its thread holds the drainer
// role (parent/sched.h, lw__sched_drainer_enter): the children do not ring the scheduler and
// the scheduler does not spin. What finishes meanwhile must still move on: a task on another
// chip that waits for a finished producer is dispatched while the orch function computes
// between submits, without a submit or a wait of the caller to drain the rings.
#include <pthread.h>
#include <stdlib.h>

#include "lanework/orch.h"
#include "parent/sched.h"
#include "parent/worker_impl.h"
#include "worker_test_util.h"

typedef struct drain_job {
  lw_callable_handle_t record;
  shared_state_t *s;  // the record kernel's log
  uint8_t *x;
  bool consumer_ran_inside;  // the consumer's record appeared before the function returned
} drain_job_t;

static lw_status_t add_rec(lw_orch_t *o, const drain_job_t *j, int64_t value, uint32_t tag,
                           uint32_t chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)value));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, tag));
  return lw_orch_submit_next_level(o, j->record, &a, NULL, chip);
}

// The producer on chip 0, its consumer on chip 1 (so it waits for the producer's completion
// to be drained: no wait elision across chips); then the function computes, submitting
// nothing, until the consumer ran (bounded by the test's timeout).
static lw_status_t produce_then_compute(lw_orch_t *o, void *user) {
  drain_job_t *j = user;
  LW_RETURN_IF_ERROR(add_rec(o, j, 1, LW_TAG_OUTPUT, 0));
  LW_RETURN_IF_ERROR(add_rec(o, j, 2, LW_TAG_INPUT, 1));
  while (log_pos(j->s, 2) < 0) lw_test_sleep_us(100);
  j->consumer_ran_inside = true;
  return LW_OK;
}

Test(drainers, a_dependent_is_dispatched_while_the_orch_function_computes_between_submits,
     .timeout = 60) {
  make_worker(2, 0);
  drain_job_t j = {.record = wreg("record"), .s = new_shared()};
  j.x = lw_worker_alloc(w, 64);
  cr_assert_not_null(j.x);
  for (int round = 0; round < 20; ++round) {
    j.consumer_ran_inside = false;
    memset(j.s->log, 0, sizeof(j.s->log));  // a slot still 0 is not yet written (log_pos)
    lw_run_report_t rep;
    LW_ASSERT_OK(lw_worker_run(w, produce_then_compute, &j, &rep));
    cr_assert(j.consumer_ran_inside, "round %d", round);
    cr_assert_eq(rep.n_completed, 2u);
    cr_assert_eq(j.s->log[1], 1, "round %d: the producer first", round);
    cr_assert_eq(j.s->log[2], 2, "round %d: then the consumer", round);
  }
  lw_worker_free(w, j.s);
  lw_worker_free(w, j.x);
  destroy_and_check();
}

// A drainer that arrives while the scheduler is in a long sleep (it went to sleep with no
// drainer: the children armed, up to 100 ms) kicks it: the children stop ringing once a drainer
// holds the rings, so the scheduler must sleep the short way (a look every millisecond)
// instead, or an orch function computing between submits would wait up to the long timeout.
Test(drainers, a_drainer_arriving_while_the_scheduler_sleeps_long_kicks_it, .timeout = 60) {
  make_worker(1, 0);
  for (int round = 0; round < 5; ++round) {
    // An idle worker's scheduler spins, then sleeps the long way. A wake of its own (a timeout)
    // between the look and the drainer's arrival makes the attempt inconclusive: again.
    bool kicked = false;
    for (int attempt = 0; attempt < 20 && !kicked; ++attempt) {
      while (atomic_load(&w->sched.long_sleep) == 0) lw_test_sleep_us(200);
      uint64_t wakes = atomic_load(&w->sched.n_wakes);
      uint64_t kicks = atomic_load(&w->sched.kick_seq);
      lw__sched_drainer_enter(&w->sched);
      kicked = atomic_load(&w->sched.kick_seq) > kicks;
      cr_assert(kicked || atomic_load(&w->sched.n_wakes) != wakes, "round %d: no kick", round);
      if (!kicked) lw__sched_drainer_leave(&w->sched);
    }
    cr_assert(kicked, "round %d: the scheduler woke on its own at every attempt", round);
    // Woken, it sleeps again the short way while the drainer stays.
    while (!(atomic_load(&w->sched.sleeping) == 1 && atomic_load(&w->sched.long_sleep) == 0)) {
      lw_test_sleep_us(100);
    }
    lw__sched_drainer_leave(&w->sched);
  }
  destroy_and_check();
}

typedef struct gate_job {
  lw_callable_handle_t gate;
  shared_state_t *s;
} gate_job_t;

// One task: the gate kernel on s->gate, marking s->entered when it starts.
static lw_status_t submit_gate(lw_orch_t *o, void *user) {
  gate_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, &j->s->gate, sizeof(j->s->gate), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, &j->s->entered, sizeof(j->s->entered), LW_TAG_NO_DEP));
  return lw_orch_submit_next_level(o, j->gate, &a, NULL, 0);
}

// lw_handle_wait on an async run's handle drains the rings itself while it spins, as a sync
// lw_worker_run does (parent/sched.h, lw__sched_wait_draining): seen by the drainer's kick of
// a scheduler in its long sleep (nothing else kicks an idle worker whose one task runs), and
// the wait's timeout bounds the drain.
Test(drainers, a_wait_on_an_async_runs_handle_drains_within_its_timeout, .timeout = 60) {
  make_worker(1, 0);
  gate_job_t j = {.gate = wreg("gate"), .s = new_shared()};
  for (int round = 0; round < 3; ++round) {
    atomic_store(&j.s->gate, 0);
    atomic_store(&j.s->entered, 0);
    lw_handle_t *h = NULL;
    LW_ASSERT_OK(lw_worker_run_async(w, submit_gate, &j, &h));
    while (atomic_load(&j.s->entered) == 0) lw_test_sleep_us(100);
    // The orchestrator's drain after the function ends is over, and the scheduler idles in its
    // long sleep. It may still wake on a timeout between this look and the wait's arrival (its
    // sleeps last up to 100 ms): such an attempt proves nothing and is made again.
    bool kicked = false;
    for (int attempt = 0; attempt < 20 && !kicked; ++attempt) {
      while (atomic_load(&w->sched.long_sleep) == 0 || atomic_load(&w->sched.drainers) != 0) {
        lw_test_sleep_us(200);
      }
      uint64_t wakes = atomic_load(&w->sched.n_wakes);
      uint64_t kicks = atomic_load(&w->sched.kick_seq);
      cr_assert_eq(lw_handle_wait(h, 2 * 1000 * 1000), LW_DEADLINE_EXCEEDED, "round %d", round);
      kicked = atomic_load(&w->sched.kick_seq) > kicks;
      cr_assert(kicked || atomic_load(&w->sched.n_wakes) != wakes,
                "round %d: the wait did not drain (no kick of the sleeping scheduler)", round);
      cr_assert_eq(atomic_load(&w->sched.drainers), 0u, "round %d: the drain outlived the wait",
                   round);
    }
    cr_assert(kicked, "round %d: the scheduler woke on its own at every attempt", round);
    atomic_store(&j.s->gate, 1);
    LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
    lw_handle_release(h);
  }
  lw_worker_free(w, j.s);
  destroy_and_check();
}

typedef struct waiter {
  lw_handle_t *h;
  bool cancel;  // cancel first: the wait then spins up to LW_SPIN_CANCEL_BUDGET_NS
  lw_status_t st;
} waiter_t;

static void *wait_thread(void *arg) {
  waiter_t *wt = arg;
  if (wt->cancel) (void)lw_handle_cancel(wt->h);
  wt->st = lw_handle_wait(wt->h, LW_WAIT_FOREVER);
  return NULL;
}

// Threads that wait for runs' handles, draining the worker's rings (some after a cancel, so
// their spin is the long one), while another thread destroys the worker: each wait returns
// with its run finished (destroy finishes every handle), without a hang and without leaving a
// child or an fd. A drain that outlived the worker would be a use after free; the window is
// narrow (a drain ends at its next look once its handle is done, and destroy has children to
// reap before it frees), so this loop rarely reaches it: the guard is the run's wait gate and
// destroy's wait for the drainers (parent/runs.h), and ASan and TSan runs of it are the check.
Test(drainers, waiters_draining_while_the_worker_is_destroyed_return_and_touch_nothing_after,
     .timeout = 120) {
  for (int round = 0; round < 12; ++round) {
    make_worker(1, 0);
    gate_job_t j = {.gate = wreg("gate"), .s = new_shared()};
    enum { N = 3 };
    waiter_t wt[N];
    pthread_t th[N];
    for (int i = 0; i < N; ++i) {
      wt[i] = (waiter_t){.cancel = (round + i) % 2 == 0};
      LW_ASSERT_OK(lw_worker_run_async(w, submit_gate, &j, &wt[i].h));
    }
    for (int i = 0; i < N; ++i) cr_assert_eq(pthread_create(&th[i], NULL, wait_thread, &wt[i]), 0);
    // Destroy at a different point of the waits each round: before, during or after their spins.
    lw_test_sleep_us((round % 4) * 300);
    // The runs hold the gate task, which stops when cancelled (destroy cancels it): the shared
    // words may go with the worker.
    destroy_and_check();
    for (int i = 0; i < N; ++i) {
      pthread_join(th[i], NULL);
      cr_assert(wt[i].st == LW_CANCELLED || wt[i].st == LW_UNAVAILABLE, "round %d waiter %d: %s",
                round, i, lw_status_name(wt[i].st));
      cr_assert(lw_handle_done(wt[i].h));
      lw_handle_release(wt[i].h);
    }
  }
}

// A wait on a run's handle from a thread that holds the DAG owner's token (not something the
// public API does today; an internal caller might) must not try to become a drainer, which
// takes the token: the token is not recursive, and the wait would never return.
Test(drainers, a_wait_from_the_token_holder_does_not_drain, .timeout = 60) {
  make_worker(1, 0);
  gate_job_t j = {.gate = wreg("gate"), .s = new_shared()};
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, submit_gate, &j, &h));
  while (atomic_load(&j.s->entered) == 0) lw_test_sleep_us(100);
  lw__sched_pass_lock(&w->sched);
  cr_assert_eq(lw_handle_wait(h, 1000 * 1000), LW_DEADLINE_EXCEEDED);
  lw__sched_pass_unlock(&w->sched);
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
  lw_handle_release(h);
  lw_worker_free(w, j.s);
  destroy_and_check();
}

// On a worker of one chip, the orch function's passes after its submits may leave the children's
// completions in their rings for later (parent/sched.h, LW_SCHED_DRAIN_EVERY), for no more than
// that many passes: once a task's completion is in the ring, it is drained (the chip's tasks_run
// counts it) within LW_SCHED_DRAIN_EVERY further submits. An attempt proves nothing, and is
// not counted, when the completion was drained before those submits (by the scheduler's look,
// or a pass of the orch thread's own), or when a submit's pass did not run on the orch thread
// (the token was busy, so the submit kicked the scheduler: kick_seq moved).
typedef struct bound_job {
  lw_callable_handle_t record, gate;
  shared_state_t *s;
  uint8_t *bufs;  // 64-byte buffers, one for each task of a run
  uint64_t kicks_before, kicks_after;
  uint64_t wakes_before, wakes_after;  // the scheduler's (frame_test)
  // The chip's tasks_run: at the start, before the submits that may defer, after them.
  uint64_t run_start, run_before, run_after;
} bound_job_t;

static lw_status_t submit_alone_on(lw_orch_t *o, const bound_job_t *j, int64_t value, int k,
                                   int32_t chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)value));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  // A buffer of its own: no task of the run waits for another (lw__dag_n_waiting stays 0).
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->bufs + 64 * k, 64, LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, j->record, &a, NULL, chip);
}

static lw_status_t submit_alone(lw_orch_t *o, const bound_job_t *j, int64_t value, int k) {
  return submit_alone_on(o, j, value, k, 0);
}

static uint64_t chip0_tasks_run(void) {
  lw_worker_stats_t st = {.struct_size = sizeof(st)};
  LW_ASSERT_OK(lw_worker_stats(w, &st));
  return st.child[0].tasks_run;
}

static lw_status_t complete_one_then_submit(lw_orch_t *o, void *user) {
  bound_job_t *j = user;
  j->run_start = chip0_tasks_run();
  LW_RETURN_IF_ERROR(submit_alone(o, j, 1, 0));
  LW_RETURN_IF_ERROR(submit_alone(o, j, 2, 1));
  // The chip runs its tasks in order and pushes a task's completion before it takes the next:
  // task 2 recorded, so task 1's completion is in the ring.
  wait_logged(j->s, 2);
  j->kicks_before = atomic_load(&w->sched.kick_seq);
  j->run_before = chip0_tasks_run();
  for (int k = 0; k < (int)LW_SCHED_DRAIN_EVERY; ++k) {
    LW_RETURN_IF_ERROR(submit_alone(o, j, 3 + k, 2 + k));
  }
  j->run_after = chip0_tasks_run();
  j->kicks_after = atomic_load(&w->sched.kick_seq);
  return LW_OK;
}

Test(drainers, a_completion_in_the_ring_is_drained_within_the_submits_that_may_defer_it,
     .timeout = 60) {
  make_worker(1, 0);
  bound_job_t j = {.record = wreg("record"), .s = new_shared()};
  j.bufs = lw_worker_alloc(w, 64 * (2 + LW_SCHED_DRAIN_EVERY));
  cr_assert_not_null(j.bufs);
  int conclusive = 0;
  for (int attempt = 0; attempt < 40 && conclusive < 5; ++attempt) {
    memset(j.s->log, 0, sizeof(j.s->log));
    lw_run_report_t rep;
    LW_ASSERT_OK(lw_worker_run(w, complete_one_then_submit, &j, &rep));
    cr_assert_eq(rep.n_completed, 2 + LW_SCHED_DRAIN_EVERY);
    // Task 1 drained already, or a pass was the scheduler's.
    if (j.run_before != j.run_start || j.kicks_after != j.kicks_before) continue;
    conclusive++;
    cr_assert_geq(j.run_after, j.run_start + 1,
                  "attempt %d: task 1's completion was still in the ring after %u submits", attempt,
                  LW_SCHED_DRAIN_EVERY);
  }
  cr_assert_gt(conclusive, 0, "no attempt left task 1 in the ring without a kick");
  lw_worker_free(w, j.s);
  lw_worker_free(w, j.bufs);
  destroy_and_check();
}

// A ready task that waits for a task frame is a reason to read the rings: a submitter's pass
// that finds one queued after its dispatch drains, which may free the frame, and dispatches
// again. Here an LW_ANY_CHIP task waits because the one chip holds 16 tasks (a gate and 15
// records behind it); the gate opens and those end, but nobody drains (the orch function waits,
// submitting nothing); then one more submit: its pass must post the waiting task. An attempt
// counts only when nothing was drained before that submit (so the waiting task was still
// queued) and the scheduler neither woke nor was kicked from that submit until the task ran
// (so the submit's pass posted it); without the drain for it, only the scheduler's look posts
// it and no attempt counts.
// Records behind the gate: with it, the 16 tasks on the chip an LW_ANY_CHIP task waits behind.
#define FRAME_TEST_HELD 15

static lw_status_t ready_task_waits_for_a_frame(lw_orch_t *o, void *user) {
  bound_job_t *j = user;
  j->run_start = chip0_tasks_run();
  LW_RETURN_IF_ERROR(lw_test_submit_gate(o, j->gate, &j->s->gate, &j->s->entered, NULL, 0));
  for (int k = 0; k < FRAME_TEST_HELD; ++k) {
    LW_RETURN_IF_ERROR(submit_alone(o, j, 100 + k, k));
  }
  LW_RETURN_IF_ERROR(submit_alone_on(o, j, 1, FRAME_TEST_HELD, LW_ANY_CHIP));
  atomic_store(&j->s->gate, 1);
  wait_logged(j->s, 100 + FRAME_TEST_HELD - 1);
  j->run_before = chip0_tasks_run();
  j->kicks_before = atomic_load(&w->sched.kick_seq);
  j->wakes_before = atomic_load(&w->sched.n_wakes);
  LW_RETURN_IF_ERROR(submit_alone(o, j, 2, FRAME_TEST_HELD + 1));
  wait_logged(j->s, 1);
  j->wakes_after = atomic_load(&w->sched.n_wakes);
  j->kicks_after = atomic_load(&w->sched.kick_seq);
  return LW_OK;
}

Test(drainers, a_submits_pass_drains_when_a_ready_task_waits_for_a_frame, .timeout = 60) {
  make_worker(1, 0);
  bound_job_t j = {.record = wreg("record"), .gate = wreg("gate"), .s = new_shared()};
  j.bufs = lw_worker_alloc(w, 64 * (FRAME_TEST_HELD + 2));
  cr_assert_not_null(j.bufs);
  int conclusive = 0;
  for (int attempt = 0; attempt < 40 && conclusive < 3; ++attempt) {
    memset(j.s->log, 0, sizeof(j.s->log));
    atomic_store(&j.s->gate, 0);
    atomic_store(&j.s->entered, 0);
    lw_run_report_t rep;
    LW_ASSERT_OK(lw_worker_run(w, ready_task_waits_for_a_frame, &j, &rep));
    cr_assert_eq(rep.n_completed, FRAME_TEST_HELD + 3);
    cr_assert_gt(log_pos(j.s, 1), log_pos(j.s, 100 + FRAME_TEST_HELD - 1),
                 "the waiting task ran before the ones ahead of it");
    if (j.run_before == j.run_start && j.kicks_after == j.kicks_before &&
        j.wakes_after == j.wakes_before) {
      conclusive++;
    }
  }
  cr_assert_gt(conclusive, 0,
               "in no attempt did the next submit's pass post the task waiting for a frame");
  lw_worker_free(w, j.s);
  lw_worker_free(w, j.bufs);
  destroy_and_check();
}
