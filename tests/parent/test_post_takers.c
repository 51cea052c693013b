// tests/parent/test_post_takers.c — a chip child's two takers of posts (child/chip_child.c): the
// run lane takes posts itself while idle and the mailbox loop takes them while it runs. Every
// post is served once, in sequence order, whoever serves it; controls are served while a kernel
// runs; the child leaves cleanly with the run lane waiting on the doorbell.
#include "faults/fault_util.h"

static fx_t f;

typedef struct rec_job {
  lw_callable_handle_t rec;
  int64_t *log;
  uint64_t value;
} rec_job_t;

static lw_status_t one_record(lw_orch_t *o, void *user) {
  rec_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 512 * sizeof(int64_t), LW_TAG_INOUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->value));
  return lw_orch_submit_next_level(o, j->rec, &a, NULL, 0);
}

// Register, run, unregister, again and again, on a chip that is idle between them: controls
// and tasks alternate in the post sequence, and either taker may serve each.
Test(post_takers, controls_and_tasks_alternating_on_an_idle_chip_are_all_served_in_order,
     .timeout = 120) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_t c = lw_test_kernel("record");
  rec_job_t j = {{0}, lw_worker_alloc(f.w, 512 * sizeof(int64_t)), 0};
  cr_assert_not_null(j.log);
  memset(j.log, 0, 512 * sizeof(int64_t));
  enum { ROUNDS = 150 };
  for (int i = 1; i <= ROUNDS; ++i) {
    LW_ASSERT_OK(lw_worker_register(f.w, &c, &j.rec));
    j.value = (uint64_t)i;
    LW_ASSERT_OK(lw_worker_run(f.w, one_record, &j, NULL));
    LW_ASSERT_OK(lw_worker_unregister(f.w, j.rec));
  }
  cr_assert_eq(j.log[0], ROUNDS, "every task ran once");
  for (int i = 1; i <= ROUNDS; ++i) cr_assert_eq(j.log[i], i, "record %d out of order", i);
  lw_callable_free_loaded(&c);
  fx_destroy(&f);
}

// While the gate kernel holds the run lane, a register is served (by the mailbox loop) and a
// task posted after it waits its turn; both finish once the gate opens.
Test(post_takers, a_register_is_served_while_the_run_lane_runs_a_kernel, .timeout = 120) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  job_t gate = {.k = fx_reg(&f, "gate"), .s = fx_shared(&f), .kind = JOB_GATE, .chip = 0};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &gate, &run));
  lw_test_wait_nonzero(&gate.s->entered);
  // The run lane is inside the gate's kernel: this register must not wait for it.
  lw_callable_t c = lw_test_kernel("record");
  rec_job_t j = {{0}, lw_worker_alloc(f.w, 512 * sizeof(int64_t)), 7};
  memset(j.log, 0, 512 * sizeof(int64_t));
  LW_ASSERT_OK(lw_worker_register(f.w, &c, &j.rec));
  cr_assert_eq(atomic_load(&gate.s->gate), 0u, "the gate is still closed");
  lw_handle_t *rec_run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, one_record, &j, &rec_run));
  cr_assert_not(lw_handle_done(rec_run), "the record waits behind the gate on the run lane");
  atomic_store(&gate.s->gate, 1);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_OK);
  cr_assert_eq(lw_handle_wait(rec_run, LW_WAIT_FOREVER), LW_OK);
  cr_assert_eq(j.log[0], 1);
  cr_assert_eq(j.log[1], 7);
  lw_handle_release(run);
  lw_handle_release(rec_run);
  lw_callable_free_loaded(&c);
  fx_destroy(&f);
}

// Destroying a worker whose chips sit idle (run lanes asleep on the doorbell) leaves no child:
// the mailbox loop wakes the run lane out of its hook before it closes the chip.
Test(post_takers, destroy_with_idle_run_lanes_asleep_on_the_doorbell_leaves_nothing,
     .timeout = 120) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  for (int round = 0; round < 5; ++round) {
    fx_create(&f, &cfg);
    lw_callable_handle_t noop = fx_reg(&f, "noop");
    job_t j = {.k = noop, .kind = JOB_NONE, .chip = round % 2};
    LW_ASSERT_OK(lw_worker_run(f.w, job_orch, &j, NULL));
    usleep(20 * 1000);  // not a timing assertion: lets the run lanes go to sleep, or not
    fx_destroy(&f);
  }
}
