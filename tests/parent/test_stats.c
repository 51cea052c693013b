// tests/parent/test_stats.c — lw_worker_stats: each task counts once on the child it reached
// (run, failed, cancelled) or in the worker's poisoned/skipped counts; runs by outcome;
// registers and unregisters per child; a death and its respawn; arena bytes; the struct_size
// contract (a shorter struct gets its prefix, 0 is refused).
#include <signal.h>
#include <stddef.h>

#include "faults/fault_util.h"
#include "lanework/kernel.h"
#include "lanework/stats.h"

static fx_t f;

// The worker's tasks, each counted in exactly one place, once nothing is in flight.
static void assert_every_task_counted_once(const lw_worker_stats_t *s) {
  uint64_t ended = s->tasks_poisoned + s->tasks_skipped;
  for (uint32_t i = 0; i < s->n_chips + s->n_subs; ++i) {
    ended += s->child[i].tasks_run + s->child[i].tasks_failed + s->child[i].tasks_cancelled;
  }
  cr_assert_eq(s->dag_tasks_alive, 0u);
  cr_assert_eq(ended, s->tasks_submitted, "%llu tasks counted as ended, %llu submitted",
               (unsigned long long)ended, (unsigned long long)s->tasks_submitted);
}

// ---------------------------------------------------------------------------------------------
// Tasks and runs

typedef struct outcome_job {
  lw_callable_handle_t rec, gate;
  shared_t *s;
  int64_t *log;            // the record kernel's log (in the arena)
  void *buf;               // a buffer the failing task writes and its dependent reads
  _Atomic uint32_t submitted;
} outcome_job_t;

static lw_status_t add_record(lw_orch_t *o, const outcome_job_t *j, uint64_t value,
                              lw_tag_t buf_tag, bool with_scalar) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * sizeof(int64_t), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->buf, 64, buf_tag));
  // Without its scalar the record kernel returns -22: the task fails.
  if (with_scalar) LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, value));
  return lw_orch_submit_next_level(o, j->rec, &a, NULL, 0);
}

static lw_status_t three_ok_orch(lw_orch_t *o, void *user) {
  const outcome_job_t *j = user;
  for (int i = 0; i < 3; ++i) {
    LW_RETURN_IF_ERROR(add_record(o, j, (uint64_t)i + 1, LW_TAG_NO_DEP, true));
  }
  return LW_OK;
}

// A gate holds the chip while a failing task and its dependent are submitted, so the dependent
// is accepted before its producer fails and is then poisoned without reaching the chip.
static lw_status_t fail_and_poison_orch(lw_orch_t *o, void *user) {
  outcome_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  LW_RETURN_IF_ERROR(add_record(o, j, 0, LW_TAG_OUTPUT, false));
  LW_RETURN_IF_ERROR(add_record(o, j, 9, LW_TAG_INPUT, true));
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

static lw_status_t gate_orch(lw_orch_t *o, void *user) {
  outcome_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
  return lw_orch_submit_next_level(o, j->gate, &a, NULL, 0);
}

Test(stats, each_task_counts_once_as_run_failed_cancelled_or_poisoned, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.cancel_grace_ns = 30ll * 1000 * 1000 * 1000;  // the gate cooperates: no escalation
  fx_create(&f, &cfg);
  lw_worker_stats_t s = fx_stats(&f);
  cr_assert_eq(s.n_chips, 1u);
  cr_assert_eq(s.n_subs, 0u);
  cr_assert_eq(s.tasks_submitted, 0u);
  cr_assert_eq(s.child[0].tasks_run, 0u);

  outcome_job_t j = {fx_reg(&f, "record"), fx_reg(&f, "gate"), fx_shared(&f), NULL, NULL, 0};
  j.log = lw_worker_alloc(f.w, 64 * sizeof(int64_t));
  j.buf = lw_worker_alloc(f.w, 64);
  cr_assert(j.log && j.buf);
  memset(j.log, 0, 64 * sizeof(int64_t));

  // Three tasks that finish OK.
  LW_ASSERT_OK(lw_worker_run(f.w, three_ok_orch, &j, NULL));
  s = fx_stats(&f);
  cr_assert_eq(s.child[0].tasks_run, 3u);
  cr_assert_eq(s.child[0].tasks_failed, 0u);
  cr_assert_eq(s.child[0].queue_depth, 0u);
  cr_assert_geq(s.child[0].queue_depth_max, 1u);
  cr_assert_eq(s.runs_started, 1u);
  cr_assert_eq(s.runs_ok, 1u);
  assert_every_task_counted_once(&s);

  // A gate (OK), a failing task, and its dependent, poisoned without being dispatched.
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, fail_and_poison_orch, &j, &run));
  lw_test_wait_nonzero(&j.submitted);
  lw_test_wait_nonzero(&j.s->entered);
  atomic_store(&j.s->gate, 1);
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_TASK_FAILED);
  lw_handle_release(run);
  s = fx_stats(&f);
  cr_assert_eq(s.child[0].tasks_run, 4u);
  cr_assert_eq(s.child[0].tasks_failed, 1u);
  cr_assert_eq(s.tasks_poisoned, 1u, "the dependent counts as poisoned, on no chip");
  cr_assert_eq(s.runs_failed, 1u);
  assert_every_task_counted_once(&s);

  // A running task whose run is cancelled.
  atomic_store(&j.s->gate, 0);
  atomic_store(&j.s->entered, 0);
  LW_ASSERT_OK(lw_worker_run_async(f.w, gate_orch, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(run);
  s = fx_stats(&f);
  cr_assert_eq(s.child[0].tasks_cancelled, 1u);
  cr_assert_eq(s.child[0].tasks_run, 4u);
  cr_assert_eq(s.child[0].tasks_failed, 1u);
  cr_assert_eq(s.runs_cancelled, 1u);
  cr_assert_eq(s.runs_started, 3u);
  cr_assert_eq(s.tasks_submitted, 7u);
  cr_assert_eq(s.tasks_skipped, 0u);
  cr_assert_eq(s.child[0].queue_depth, 0u, "nothing is in flight once the worker is idle");
  cr_assert_leq(s.child[0].queue_depth_max, (uint32_t)LW_MB_TASK_FRAMES);
  cr_assert_eq(s.child[0].deaths, 0u);
  cr_assert_eq(s.child[0].escalations, 0u);
  assert_every_task_counted_once(&s);
  fx_destroy(&f);
}

// A kernel that returned OK after its run stopped counts cancelled (as its run report says),
// not run: the cancel racing the completion decides the count the same way as the status.
Test(stats, a_kernel_finishing_ok_after_its_run_was_cancelled_counts_cancelled, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.cancel_grace_ns = 30ll * 1000 * 1000 * 1000;  // the latch is opened long before
  fx_create(&f, &cfg);
  outcome_job_t j = {{0}, fx_reg(&f, "latch"), fx_shared(&f), NULL, NULL, 0};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, gate_orch, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  LW_ASSERT_OK(lw_handle_cancel(run));
  // The parent wrote the cancel word before the latch opens: cancel_at is set on its pass.
  while (atomic_load(&f.w->eps[0].mb->task[0].cancel_dispatch) == 0 &&
         atomic_load(&f.w->eps[0].mb->task[1].cancel_dispatch) == 0) {
    lw_test_sleep_us(200);
  }
  atomic_store(&j.s->gate, 1);  // the latch returns 0
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(run);
  lw_worker_stats_t s = fx_stats(&f);
  cr_assert_eq(s.child[0].tasks_cancelled, 1u);
  cr_assert_eq(s.child[0].tasks_run, 0u);
  assert_every_task_counted_once(&s);
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------
// Registers

static lw_status_t sub_ok(const lw_kernel_args_t *args) {
  (void)args;
  return LW_OK;
}

Test(stats, registers_and_unregisters_count_on_every_child_of_their_kind, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 1);
  fx_create(&f, &cfg);
  lw_callable_handle_t rec = fx_reg(&f, "record");
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  (void)rec;
  lw_callable_handle_t sub;
  LW_ASSERT_OK(lw_worker_register_sub(f.w, sub_ok, "sub_ok", &sub));
  lw_worker_stats_t s = fx_stats(&f);
  for (uint32_t i = 0; i < 2; ++i) {
    cr_assert_eq(s.child[i].registers, 2u, "chip %u", i);
    cr_assert_eq(s.child[i].callables, 2u, "chip %u", i);
    cr_assert_eq(s.child[i].unregisters, 0u, "chip %u", i);
  }
  cr_assert_eq(s.child[2].registers, 1u, "the sub child holds the sub function only");
  cr_assert_eq(s.child[2].callables, 1u);

  LW_ASSERT_OK(lw_worker_unregister(f.w, gate));
  LW_ASSERT_OK(lw_worker_unregister(f.w, sub));
  static const char text[] = "definitely not an ELF image";
  lw_callable_t bad = {.name = "text", .image = text, .image_bytes = sizeof(text)};
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register(f.w, &bad, &h), LW_INVALID_ARGUMENT);
  int32_t named = lw_last_error()->worker_id;
  cr_assert(named == 0 || named == 1, "the error names chip %d", named);

  s = fx_stats(&f);
  for (uint32_t i = 0; i < 2; ++i) {
    cr_assert_eq(s.child[i].registers, 2u, "a failed register is no register (chip %u)", i);
    cr_assert_eq(s.child[i].unregisters, 1u, "chip %u", i);
    cr_assert_eq(s.child[i].callables, 1u, "chip %u", i);
    cr_assert_eq(s.child[i].register_failures, (uint64_t)(i == (uint32_t)named),
                 "chip %u (the error named chip %d)", i, named);
  }
  cr_assert_eq(s.child[2].unregisters, 1u);
  cr_assert_eq(s.child[2].callables, 0u);
  cr_assert_eq(s.child[2].register_failures, 0u);
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------
// Deaths, respawns, escalations

Test(stats, a_killed_child_counts_one_death_and_one_respawn, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *sh = fx_shared(&f);
  pid_t pid = fx_pid(&f, 0);
  cr_assert_gt(pid, 0);
  cr_assert_eq(kill(pid, SIGKILL), 0);
  fx_wait_respawned(&f, 0, 1);
  lw_worker_stats_t s = fx_stats(&f);
  cr_assert_eq(s.child[0].deaths, 1u);
  cr_assert_eq(s.child[0].respawns, 1u);
  cr_assert_eq(s.child[0].escalations, 0u);
  cr_assert_eq(s.child[0].liveness_kills, 0u);
  // The replay into the new child is no new register.
  cr_assert_eq(s.child[0].registers, 1u);
  cr_assert_eq(s.child[0].callables, 1u);
  fx_run_vadd_ok(&f, vadd, sh, 0);
  s = fx_stats(&f);
  cr_assert_eq(s.child[0].tasks_run, 1u);
  fx_destroy(&f);
}

Test(stats, a_kernel_ignoring_its_cancel_counts_one_escalation_and_a_cancelled_task,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);  // grace 200 ms
  fx_create(&f, &cfg);
  lw_callable_handle_t hang = fx_reg(&f, "hang");
  job_t j = {hang, NULL, JOB_NONE, 0, 0, 0, 1, NULL};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &run));
  while (atomic_load(&f.w->eps[0].mb->task[0].started_ns) == 0) lw_test_sleep_us(200);
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(run);
  fx_wait_respawned(&f, 0, 1);
  lw_worker_stats_t s = fx_stats(&f);
  cr_assert_eq(s.child[0].escalations, 1u);
  cr_assert_eq(s.child[0].deaths, 1u);
  cr_assert_eq(s.child[0].respawns, 1u);
  cr_assert_eq(s.child[0].tasks_cancelled, 1u, "the killed kernel's task counts once");
  cr_assert_eq(s.child[0].tasks_failed, 0u);
  assert_every_task_counted_once(&s);
  fx_destroy(&f);
}

Test(stats, a_stopped_child_holding_work_counts_one_liveness_kill, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.liveness_timeout_ns = 200ll * 1000 * 1000;
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *sh = fx_shared(&f);
  pid_t pid = fx_pid(&f, 0);
  cr_assert_eq(lw_test_stop_process(pid), 0);
  job_t j = {vadd, sh, JOB_VADD, 0, 0, 0, 1, NULL};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED, "%s", rep.error.message);
  fx_wait_respawned(&f, 0, 1);
  lw_worker_stats_t s = fx_stats(&f);
  cr_assert_eq(s.child[0].liveness_kills, 1u);
  cr_assert_eq(s.child[0].deaths, 1u);
  cr_assert_eq(s.child[0].respawns, 1u);
  cr_assert_eq(s.child[0].escalations, 0u);
  cr_assert_eq(s.child[0].tasks_failed, 1u, "the task it held failed with it, once");
  cr_assert_eq(s.runs_failed, 1u);
  assert_every_task_counted_once(&s);
  fx_destroy(&f);
}

// ---------------------------------------------------------------------------------------------
// Arena and struct_size

Test(stats, arena_bytes_in_use_rise_after_alloc_and_fall_after_free, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_worker_stats_t s0 = fx_stats(&f);
  cr_assert_geq(s0.arena_bytes, 64ull << 20);
  void *p = lw_worker_alloc(f.w, 1000);
  cr_assert_not_null(p);
  lw_worker_stats_t s1 = fx_stats(&f);
  cr_assert_eq(s1.arena_bytes_in_use, s0.arena_bytes_in_use + 1024, "1000 bytes round up to 1024");
  cr_assert_geq(s1.arena_bytes_peak, s1.arena_bytes_in_use);
  lw_worker_free(f.w, p);
  lw_worker_stats_t s2 = fx_stats(&f);
  cr_assert_eq(s2.arena_bytes_in_use, s0.arena_bytes_in_use);
  cr_assert_eq(s2.arena_bytes_peak, s1.arena_bytes_peak, "the peak stays");
  fx_destroy(&f);
}

Test(stats, a_shorter_struct_gets_its_prefix_and_no_byte_more, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  (void)fx_reg(&f, "record");
  // An "older" struct that ends right after tasks_submitted.
  size_t older = offsetof(lw_worker_stats_t, tasks_submitted) + sizeof(uint64_t);
  unsigned char buf[sizeof(lw_worker_stats_t)];
  memset(buf, 0xab, sizeof(buf));
  lw_worker_stats_t *s = (lw_worker_stats_t *)buf;
  s->struct_size = (uint32_t)older;
  LW_ASSERT_OK(lw_worker_stats(f.w, s));
  cr_assert_eq(s->struct_size, (uint32_t)older, "struct_size stays the caller's");
  cr_assert_eq(s->n_chips, 2u);
  cr_assert_eq(s->runs_started, 0u);
  cr_assert_eq(s->tasks_submitted, 0u);
  for (size_t i = older; i < sizeof(buf); ++i) {
    cr_assert_eq(buf[i], 0xab, "byte %zu past the caller's struct was written", i);
  }
  // The full struct reaches the children's entries.
  lw_worker_stats_t full = fx_stats(&f);
  cr_assert_eq(full.child[1].registers, 1u);
  cr_assert_eq(full.child[1].struct_size, (uint32_t)sizeof(lw_chip_stats_t));
  fx_destroy(&f);
}

Test(stats, struct_size_zero_or_too_small_is_invalid_argument, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_worker_stats_t s;
  memset(&s, 0, sizeof(s));
  cr_assert_eq(lw_worker_stats(f.w, &s), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "struct_size 0"), "%s", lw_last_error()->message);
  s.struct_size = 8;  // struct_size and n_chips, no counter
  cr_assert_eq(lw_worker_stats(f.w, &s), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_worker_stats(NULL, &s), LW_INVALID_ARGUMENT);
  cr_assert_eq(lw_worker_stats(f.w, NULL), LW_INVALID_ARGUMENT);
  fx_destroy(&f);
}
