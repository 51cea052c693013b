// tests/parent/test_worker.c — the L3 worker: forked children over mailboxes, the DAG engine,
// register/unregister broadcast, runs, and clean teardown.
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "lanework/kernel.h"
#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "worker_test_util.h"

// ---------------------------------------------------------------------------------------------

typedef struct vadd_job {
  lw_callable_handle_t k;
  float *a, *b, *c;
  uint32_t n;
  int32_t chip;
} vadd_job_t;

static lw_status_t vadd_orch(lw_orch_t *o, void *user) {
  vadd_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->a, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->b, j->n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->c, j->n * sizeof(float), LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, j->chip);
}

Test(worker, runs_vector_add_in_a_chip_child_with_exact_results, .timeout = 60) {
  make_worker(2, 0);
  vadd_job_t j = {wreg("vector_add"), NULL, NULL, NULL, 4099, 1};
  j.a = lw_worker_alloc(w, j.n * sizeof(float));
  j.b = lw_worker_alloc(w, j.n * sizeof(float));
  j.c = lw_worker_alloc(w, j.n * sizeof(float));
  for (uint32_t i = 0; i < j.n; ++i) {
    j.a[i] = (float)i * 0.25f;
    j.b[i] = 3.0f - (float)i;
    j.c[i] = -1;
  }
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, vadd_orch, &j, &rep));
  cr_assert_eq(rep.n_tasks, 1);
  cr_assert_eq(rep.n_completed, 1);
  for (uint32_t i = 0; i < j.n; ++i) cr_assert_eq(j.c[i], j.a[i] + j.b[i], "index %u", i);
  destroy_and_check();
}

typedef struct launch_job {
  lw_callable_handle_t k;
  uint64_t *out;
} launch_job_t;

static lw_status_t launch_orch(lw_orch_t *o, void *user) {
  launch_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->out, 16 * sizeof(uint64_t), LW_TAG_OUTPUT));
  const uint64_t g[3] = {96, 20, 7};
  const uint64_t l[3] = {32, 4, 7};
  LW_RETURN_IF_ERROR(lw_args_set_launch(&a, 3, g, l));
  return lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
}

Test(worker, launch_geometry_crosses_the_mailbox_to_the_sim_kernel, .timeout = 60) {
  make_worker(1, 0);
  launch_job_t j = {wreg("launch_probe"), NULL};
  j.out = lw_worker_alloc(w, 16 * sizeof(uint64_t));
  cr_assert_not_null(j.out);
  memset(j.out, 0, 16 * sizeof(uint64_t));
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, launch_orch, &j, &rep));
  cr_assert_eq(rep.n_completed, 1);
  const uint64_t want[16] = {3, 96, 20, 7, 32, 4, 7, LW_KERNEL_ABI_VERSION,
                             3, 96, 20, 7, 32, 4, 7, 1};
  for (int i = 0; i < 16; ++i) cr_assert_eq(j.out[i], want[i], "out[%d] = %lu", i, j.out[i]);
  destroy_and_check();
}

static const char k_ocl_src[] = "__kernel void k(__global int *a) { a[0] = 1; }";

Test(worker, register_carries_format_and_options_to_the_chip_child, .timeout = 60) {
  make_worker(1, 0);
  // Given as ELF, the source must be checked as ELF in the child: only a carried format says
  // "not an ELF image" (AUTO would detect OpenCL C and the sim backend would refuse that).
  lw_callable_t c = {.name = "src_as_elf", .image = k_ocl_src, .image_bytes = sizeof k_ocl_src,
                     .format = LW_IMAGE_ELF, .build_options = "-DN=1"};
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register(w, &c, &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "not an ELF image"), "%s",
            lw_last_error()->message);
  c.format = LW_IMAGE_AUTO;
  c.name = "src";
  cr_assert_eq(lw_worker_register(w, &c, &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "backend sim cannot load callable src"), "%s",
            lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "OpenCL C (detected)"), "%s",
            lw_last_error()->message);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Helpers for event-ordered tests: a shared log (record kernel) and a gate (gate kernel), both
// in the worker's arena so chip children write them.


typedef struct rec {
  int64_t value;
  int64_t spin_us;
  int32_t chip;
  struct {
    void *p;
    lw_tag_t tag;
  } dep[3];
} rec_t;

static lw_status_t submit_record(lw_orch_t *o, lw_callable_handle_t k, shared_state_t *s,
                                 const rec_t *r) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, s->log, sizeof(s->log), LW_TAG_NO_DEP));
  for (int i = 0; i < 3 && r->dep[i].p; ++i) {
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, r->dep[i].p, 64, r->dep[i].tag));
  }
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)r->value));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)r->spin_us));
  return lw_orch_submit_next_level(o, k, &a, NULL, r->chip);
}

static lw_status_t submit_gate(lw_orch_t *o, lw_callable_handle_t g, shared_state_t *s,
                               int32_t chip) {
  return lw_test_submit_gate(o, g, &s->gate, &s->entered, NULL, chip);
}

typedef struct gate_job {
  lw_callable_handle_t gate;
  shared_state_t *s;
  int32_t chip;
} gate_job_t;

static lw_status_t gate_orch(lw_orch_t *o, void *user) {
  gate_job_t *j = user;
  return submit_gate(o, j->gate, j->s, j->chip);
}

Test(worker, register_posted_while_a_task_runs_completes_before_that_task, .timeout = 60) {
  make_worker(1, 0);
  shared_state_t *s = new_shared();
  gate_job_t j = {wreg("gate"), s, 0};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, gate_orch, &j, &run));
  lw_test_wait_nonzero(&s->entered);  // TASK_RUNNING: the kernel is executing

  lw_callable_t big = lw_test_kernel("big_vector_add");
  lw_handle_t *reg = NULL;
  LW_ASSERT_OK(lw_worker_register_async(w, &big, &reg));
  lw_callable_free_loaded(&big);
  LW_ASSERT_OK(lw_handle_wait(reg, LW_WAIT_FOREVER));
  cr_assert_not(lw_handle_done(run), "the register waited for the running task");
  atomic_store(&s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  lw_callable_handle_t h2;
  LW_ASSERT_OK(lw_handle_callable(reg, &h2));
  LW_ASSERT_OK(lw_worker_unregister(w, h2));
  lw_handle_release(reg);
  lw_handle_release(run);
  destroy_and_check();
}

typedef struct probe_job {
  gate_job_t gate;
  _Atomic int tried;   // set once the orch function's submit returned
  lw_status_t st;      // written before tried
  char message[LW_ERROR_MESSAGE_BYTES];
} probe_job_t;

static lw_status_t probe_orch(lw_orch_t *o, void *user) {
  probe_job_t *j = user;
  j->st = submit_gate(o, j->gate.gate, j->gate.s, j->gate.chip);
  snprintf(j->message, sizeof(j->message), "%s", lw_last_error()->message);
  atomic_store(&j->tried, 1);
  return j->st;
}

Test(worker, unregister_posted_after_a_run_is_applied_after_that_run_pinned, .timeout = 60) {
  make_worker(1, 0);
  shared_state_t *s = new_shared();
  gate_job_t j = {wreg("gate"), s, 0};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, gate_orch, &j, &run));
  lw_test_wait_nonzero(&s->entered);
  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_worker_unregister_async(w, j.gate, &unreg));
  // New work with the callable is refused at once. (A later run's handle finishes only after
  // the gated run's, so the refusal is observed inside the orch function.)
  probe_job_t p = {j, 0, LW_OK, ""};
  lw_handle_t *refused = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, probe_orch, &p, &refused));
  while (!atomic_load(&p.tried)) lw_test_sleep_us(100);
  cr_assert_eq(p.st, LW_FAILED_PRECONDITION, "got %s: %s", lw_status_name(p.st), p.message);
  cr_assert(strstr(p.message, "pending unregister"), "message: %s", p.message);
  cr_assert_not(lw_handle_done(unreg), "the child freed a callable its running task pinned");
  atomic_store(&s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(unreg, LW_WAIT_FOREVER));
  cr_assert(lw_handle_done(run), "the unregister finished before the run that pinned it");
  LW_ASSERT_OK(lw_handle_wait(run, 0));
  cr_assert_eq(lw_handle_wait(refused, LW_WAIT_FOREVER), LW_FAILED_PRECONDITION);
  lw_handle_release(refused);
  lw_handle_release(unreg);
  lw_handle_release(run);
  destroy_and_check();
}

typedef struct dag_job {
  lw_callable_handle_t rec;
  shared_state_t *s;
  uint8_t *bufs;  // 64-byte dependency carriers in the arena
} dag_job_t;

static void *buf(dag_job_t *j, int i) { return j->bufs + 64 * i; }

static lw_status_t diamond_orch(lw_orch_t *o, void *user) {
  dag_job_t *j = user;
  void *X = buf(j, 0), *Y = buf(j, 1), *Z = buf(j, 2);
  // A writes X slowly; B and C read X on two chips; D reads what B and C wrote.
  rec_t A = {1, 3000, 0, {{X, LW_TAG_OUTPUT}}};
  rec_t B = {2, 0, 0, {{X, LW_TAG_INPUT}, {Y, LW_TAG_OUTPUT}}};
  rec_t C = {3, 0, 1, {{X, LW_TAG_INPUT}, {Z, LW_TAG_OUTPUT}}};
  rec_t D = {4, 0, 1, {{Y, LW_TAG_INPUT}, {Z, LW_TAG_INPUT}}};
  // RAW alone: E reads X on chip 1 while A still writes it on chip 0.
  rec_t E = {5, 0, 1, {{X, LW_TAG_INPUT}}};
  // WAW: F rewrites X in place after A; G reads F's X.
  rec_t F = {6, 2000, 1, {{X, LW_TAG_OUTPUT_EXISTING}}};
  rec_t G = {7, 0, 0, {{X, LW_TAG_INPUT}}};
  const rec_t *all[] = {&A, &B, &C, &D, &E, &F, &G};
  for (int i = 0; i < 7; ++i) LW_RETURN_IF_ERROR(submit_record(o, j->rec, j->s, all[i]));
  return LW_OK;
}

Test(worker, raw_waw_and_diamond_dependencies_run_in_a_valid_order, .timeout = 60) {
  make_worker(2, 0);
  dag_job_t j = {wreg("record"), new_shared(), lw_worker_alloc(w, 64 * 8)};
  for (int round = 0; round < 5; ++round) {
    memset(j.s->log, 0, sizeof(j.s->log));
    lw_run_report_t rep;
    LW_ASSERT_OK(lw_worker_run(w, diamond_orch, &j, &rep));
    cr_assert_eq(rep.n_completed, 7);
    cr_assert_eq(j.s->log[0], 7);
    int a = log_pos(j.s, 1), b = log_pos(j.s, 2), c = log_pos(j.s, 3), d = log_pos(j.s, 4);
    int e = log_pos(j.s, 5), f = log_pos(j.s, 6), g = log_pos(j.s, 7);
    cr_assert(a < b && a < c, "RAW: B (%d) and C (%d) must follow A (%d)", b, c, a);
    cr_assert(b < d && c < d, "diamond: D (%d) must follow B (%d) and C (%d)", d, b, c);
    cr_assert(a < e, "RAW across chips: E (%d) must follow A (%d)", e, a);
    cr_assert(a < f, "WAW: F (%d) must follow A (%d)", f, a);
    cr_assert(f < g, "RAW after WAW: G (%d) must follow F (%d)", g, f);
  }
  destroy_and_check();
}

typedef struct group_job {
  lw_callable_handle_t rec, gate;
  shared_state_t *s;
  int phase;
} group_job_t;

static lw_status_t blockers_orch(lw_orch_t *o, void *user) {
  group_job_t *j = user;
  // Fill every task frame of chip 1: the gate runs, the records wait behind it.
  LW_RETURN_IF_ERROR(submit_gate(o, j->gate, j->s, 1));
  for (int i = 0; i < (int)LW_MB_TASK_FRAMES - 1; ++i) {
    rec_t r = {1000 + i, 0, 1, {{NULL, 0}}};  // apart from 200, 201, 300, 301
    LW_RETURN_IF_ERROR(submit_record(o, j->rec, j->s, &r));
  }
  return LW_OK;
}

static lw_status_t group_orch(lw_orch_t *o, void *user) {
  group_job_t *j = user;
  lw_args_t a0, a1;
  lw_args_init(&a0);
  lw_args_init(&a1);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a0, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a0, 200));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a1, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a1, 201));
  const lw_args_t *args[2] = {&a0, &a1};
  int32_t chips[2] = {0, 1};
  return lw_orch_submit_next_level_group(o, j->rec, args, chips, 2);
}

static lw_status_t marker_orch(lw_orch_t *o, void *user) {
  group_job_t *j = user;
  rec_t r = {300 + j->phase, 0, 0, {{NULL, 0}}};
  return submit_record(o, j->rec, j->s, &r);
}

Test(worker, group_launches_all_or_nothing, .timeout = 60) {
  make_worker(2, 0);
  group_job_t j = {wreg("record"), wreg("gate"), new_shared(), 0};
  lw_handle_t *blockers = NULL, *group = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, blockers_orch, &j, &blockers));
  lw_test_wait_nonzero(&j.s->entered);
  LW_ASSERT_OK(lw_worker_run_async(w, group_orch, &j, &group));
  // Two later runs on the idle chip 0 go through while the group must still wait: chip 1 has
  // no free frame, so its member cannot launch, so neither may the chip 0 member. (Their
  // handles finish only after the earlier runs', so their tasks are watched in the log.)
  group_job_t markers[2] = {j, j};
  lw_handle_t *mh[2];
  for (int i = 0; i < 2; ++i) {
    markers[i].phase = i;
    LW_ASSERT_OK(lw_worker_run_async(w, marker_orch, &markers[i], &mh[i]));
  }
  wait_logged(j.s, 300);
  wait_logged(j.s, 301);
  cr_assert_eq(log_pos(&*j.s, 200), -1, "a group member launched before the whole group could");
  cr_assert_eq(log_pos(&*j.s, 201), -1);
  cr_assert_not(lw_handle_done(mh[1]), "a later run's handle finished before the group's");
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(blockers, LW_WAIT_FOREVER));
  LW_ASSERT_OK(lw_handle_wait(group, LW_WAIT_FOREVER));
  for (int i = 0; i < 2; ++i) {
    LW_ASSERT_OK(lw_handle_wait(mh[i], LW_WAIT_FOREVER));
    lw_handle_release(mh[i]);
  }
  int m = log_pos(j.s, 301), g0 = log_pos(j.s, 200), g1 = log_pos(j.s, 201);
  cr_assert(g0 > m && g1 > m, "group members (%d, %d) must follow the markers (%d)", g0, g1, m);
  lw_handle_release(blockers);
  lw_handle_release(group);
  destroy_and_check();
}

// Whether a ready group waits in the scheduler's group queue (it waits there for frames).
static bool group_waits_for_frames(void) {
  lw__sched_pass_lock(&w->sched);  // the DAG changes only in its owner's pass
  bool waits = w->dag.groups_head != NULL;
  lw__sched_pass_unlock(&w->sched);
  return waits;
}

// Skipping a stopped run's group takes every member at once (one member's skip poisons the
// others): the scheduler must not skip a member that is already finished and retired.
Test(worker, cancelled_group_waiting_for_a_frame_finishes_cancelled, .timeout = 60) {
  make_worker(2, 0);
  group_job_t j = {wreg("record"), wreg("gate"), new_shared(), 0};
  lw_handle_t *blockers = NULL, *group = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, blockers_orch, &j, &blockers));
  lw_test_wait_nonzero(&j.s->entered);
  LW_ASSERT_OK(lw_worker_run_async(w, group_orch, &j, &group));
  // Chip 1 has no free frame: the group is ready and waits whole.
  while (!group_waits_for_frames()) lw_test_sleep_us(100);
  LW_ASSERT_OK(lw_handle_cancel(group));
  // The group's run settles while the blockers still hold chip 1; its handle finishes once the
  // blockers' (earlier) handle has.
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(blockers, LW_WAIT_FOREVER));
  cr_assert_eq(lw_handle_wait(group, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(group, &rep));
  cr_assert_eq(rep.n_tasks, 2);
  cr_assert_eq(rep.n_failed, 2, "both members end failed (%u)", rep.n_failed);
  cr_assert_eq(rep.n_completed, 0);
  cr_assert_eq(log_pos(j.s, 200), -1, "a member of the cancelled group ran");
  cr_assert_eq(log_pos(j.s, 201), -1, "a member of the cancelled group ran");
  lw_handle_release(blockers);
  lw_handle_release(group);
  destroy_and_check();
}

// The same when a member's chip is down for good: the first member fails down, poisoning the
// rest, and the scheduler must not fail down a member that is already retired.
Test(worker, group_waiting_for_a_chip_that_dies_for_good_fails_child_exited, .timeout = 60) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 2;
  cfg.arena_bytes = 64ull << 20;
  cfg.respawn = false;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
  group_job_t j = {wreg("record"), wreg("gate"), new_shared(), 0};
  lw_handle_t *blockers = NULL, *group = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, blockers_orch, &j, &blockers));
  lw_test_wait_nonzero(&j.s->entered);
  LW_ASSERT_OK(lw_worker_run_async(w, group_orch, &j, &group));
  while (!group_waits_for_frames()) lw_test_sleep_us(100);
  cr_assert_eq(kill(atomic_load(&w->eps[1].pid), SIGKILL), 0);
  cr_assert_eq(lw_handle_wait(blockers, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  cr_assert_eq(lw_handle_wait(group, LW_WAIT_FOREVER), LW_CHILD_EXITED);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(group, &rep));
  cr_assert_eq(rep.n_tasks, 2);
  cr_assert_eq(rep.n_failed, 2, "both members end failed (%u)", rep.n_failed);
  cr_assert_eq(log_pos(j.s, 200), -1, "a member of the group ran without its chip 1 member");
  lw_handle_release(blockers);
  lw_handle_release(group);
  destroy_and_check();
}

typedef struct gbuild_job {
  lw_callable_handle_t rec, gate;
  shared_state_t *s1, *s2;  // s1: P's gate and the members' log; s2: R's gate
  void *x, *y;
  _Atomic uint32_t in_group;
} gbuild_job_t;

static lw_status_t gate_writing(lw_orch_t *o, const gbuild_job_t *j, shared_state_t *s, void *out) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&s->gate, sizeof(s->gate), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&s->entered, sizeof(s->entered), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, out, 64, LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, j->gate, &a, NULL, 0);
}

// P (chip 0) writes X, R (chip 0, behind P) writes Y; the group's member 0 reads X and member 1
// reads Y. With a ring of 3 tasks, the group can take its second slot only once P retired.
static lw_status_t gbuild_orch(lw_orch_t *o, void *user) {
  gbuild_job_t *j = user;
  LW_RETURN_IF_ERROR(gate_writing(o, j, j->s1, j->x));
  LW_RETURN_IF_ERROR(gate_writing(o, j, j->s2, j->y));
  lw_args_t a0, a1;
  lw_args_init(&a0);
  lw_args_init(&a1);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a0, j->s1->log, sizeof(j->s1->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a0, j->x, 64, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a0, 200));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a1, j->s1->log, sizeof(j->s1->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a1, j->y, 64, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a1, 201));
  const lw_args_t *args[2] = {&a0, &a1};
  int32_t chips[2] = {0, 1};
  atomic_store(&j->in_group, 1);
  return lw_orch_submit_next_level_group(o, j->rec, args, chips, 2);
}

// A group submitted while the task ring is full must not let a member become ready (or be
// poisoned and freed) while its other members are still being built: member 1 still waits for
// R when the group is complete, so the group must not launch.
Test(worker, group_built_on_a_full_ring_waits_for_every_members_dependencies, .timeout = 60) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 2;
  cfg.arena_bytes = 64ull << 20;
  cfg.task_ring = 3;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
  gbuild_job_t j = {wreg("record"), wreg("gate"), new_shared(), new_shared(),
                    lw_worker_alloc(w, 64), lw_worker_alloc(w, 64), 0};
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, gbuild_orch, &j, &h));
  lw_test_wait_nonzero(&j.in_group);
  // The group's submit waits for ring slots (the ring of 3 holds P and R): only then open P.
  while (atomic_load(&w->dag.space_waiters) == 0) lw_test_sleep_us(100);
  atomic_store(&j.s1->gate, 1);  // P finishes and frees a slot; R starts on chip 0
  lw_test_wait_nonzero(&j.s2->entered);
  lw_run_t *run = (lw_run_t *)h;
  for (;;) {
    lw__sched_pass_lock(&w->sched);
    bool done = run->orch_done;
    lw__sched_pass_unlock(&w->sched);
    if (done) break;
    lw_test_sleep_us(100);
  }
  lw__sched_pass_lock(&w->sched);
  lw_task_state_t member1 = LW_TS_FREE;
  for (uint32_t i = 0; i < w->dag.n_tasks_cap; ++i) {
    if (w->dag.tasks[i].run == run && w->dag.tasks[i].task_id == 4) member1 = w->dag.tasks[i].state;
  }
  lw__sched_pass_unlock(&w->sched);
  cr_assert_eq(member1, LW_TS_PENDING, "group member 1 must wait for R (its state: %d)",
               (int)member1);
  cr_assert_eq(log_pos(j.s1, 201), -1, "group member 1 ran before R, which writes its input");
  atomic_store(&j.s2->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(h, LW_WAIT_FOREVER));
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_handle_run_report(h, &rep));
  cr_assert_eq(rep.n_completed, 4);
  cr_assert_neq(log_pos(j.s1, 200), -1);
  cr_assert_neq(log_pos(j.s1, 201), -1);
  lw_handle_release(h);
  destroy_and_check();
}

// An unregister names a child's local id, so wop_post binds its post to the child it read the
// id from: once that child was replaced (died, respawned), the control is refused unposted.
Test(worker, control_bound_to_a_replaced_child_is_refused_unposted, .timeout = 60) {
  make_worker(1, 0);
  lw_endpoint_t *ep = &w->eps[0];
  pthread_mutex_lock(&ep->post_mu);
  uint64_t gen = ep->generation;
  pthread_mutex_unlock(&ep->post_mu);
  lw_mb_control_post_t p;
  memset(&p, 0, sizeof(p));
  p.command = LW_MB_CMD_PING;
  lw_mb_control_ack_t ack;
  lw_error_t err;
  cr_assert_eq(lw__ep_control_gen(ep, gen + 1, &p, &ack, &err), LW_CHILD_EXITED);
  cr_assert(strstr(err.message, "replaced"), "message: %s", err.message);
  cr_assert_eq(atomic_load(&ep->mb->control.state), LW_MB_CONTROL_IDLE, "it was posted");
  LW_ASSERT_OK(lw__ep_control_gen(ep, gen, &p, &ack, &err));
  LW_ASSERT_OK(lw__ep_control_gen(ep, 0, &p, &ack, &err));
  destroy_and_check();
}

typedef struct bp_job {
  lw_callable_handle_t rec, gate;
  shared_state_t *s;
  int n;
  _Atomic int submitted;
  _Atomic lw_status_t last;  // read by the test thread while the orch thread submits
  char message[LW_ERROR_MESSAGE_BYTES];  // read only after the run finished
} bp_job_t;

static lw_status_t backpressure_orch(lw_orch_t *o, void *user) {
  bp_job_t *j = user;
  lw_status_t st = submit_gate(o, j->gate, j->s, 0);
  if (st == LW_OK) atomic_fetch_add(&j->submitted, 1);
  for (int i = 1; i < j->n && st == LW_OK; ++i) {
    rec_t r = {i, 0, 0, {{NULL, 0}}};
    st = submit_record(o, j->rec, j->s, &r);
    if (st == LW_OK) atomic_fetch_add(&j->submitted, 1);
  }
  if (st != LW_OK) snprintf(j->message, sizeof(j->message), "%s", lw_last_error()->message);
  atomic_store(&j->last, st);
  return LW_OK;  // the test inspects the submit result itself
}

static void make_small_ring_worker(int64_t submit_timeout_ns) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 16ull << 20;
  cfg.task_ring = 4;
  cfg.submit_timeout_ns = submit_timeout_ns;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
}

Test(worker, full_task_ring_blocks_submit_then_fails_with_a_clear_error, .timeout = 60) {
  make_small_ring_worker(50ll * 1000 * 1000);
  bp_job_t j = {wreg("record"), wreg("gate"), new_shared(), 5, 0, LW_OK, ""};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, backpressure_orch, &j, &run));
  // The gate holds the only chip: four tasks fill the ring and none can retire.
  lw_test_wait_nonzero(&j.s->entered);
  // The fifth submit times out while the gate still holds the chip.
  while (!lw_handle_done(run) && atomic_load(&j.last) == LW_OK) lw_test_sleep_us(200);
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  cr_assert_eq(atomic_load(&j.last), LW_RESOURCE_EXHAUSTED, "got %s", lw_status_name(atomic_load(&j.last)));
  cr_assert_eq(atomic_load(&j.submitted), 4);
  cr_assert(strstr(j.message, "task ring is full"), "message: %s", j.message);
  cr_assert(strstr(j.message, "nothing was dropped"), "message: %s", j.message);
  cr_assert_eq(j.s->log[0], 3, "the accepted tasks all ran");
  lw_handle_release(run);
  destroy_and_check();
}

Test(worker, full_task_ring_blocks_submit_until_a_task_retires, .timeout = 60) {
  make_small_ring_worker(-1);
  bp_job_t j = {wreg("record"), wreg("gate"), new_shared(), 9, 0, LW_OK, ""};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, backpressure_orch, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  while (atomic_load(&j.submitted) < 4) lw_test_sleep_us(200);
  cr_assert_lt(atomic_load(&j.submitted), 5, "a fifth task entered a full ring of 4");
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  LW_ASSERT_OK(atomic_load(&j.last));
  cr_assert_eq(atomic_load(&j.submitted), 9);
  cr_assert_eq(j.s->log[0], 8);
  for (int i = 0; i < 8; ++i) cr_assert_eq(j.s->log[1 + i], i + 1, "tasks on one chip stay FIFO");
  lw_handle_release(run);
  destroy_and_check();
}

typedef struct full_ring_job {
  lw_callable_handle_t rec, gate;
  shared_state_t *s;
  lw_status_t bad_handle, bad_group;
  char bad_handle_msg[LW_ERROR_MESSAGE_BYTES], bad_group_msg[LW_ERROR_MESSAGE_BYTES];
} full_ring_job_t;

// Fills the ring of 4 (a gate holding the chip and three tasks behind it), then submits what
// must be refused: an unknown callable handle and a group with five members on chip 0.
static lw_status_t full_ring_orch(lw_orch_t *o, void *user) {
  full_ring_job_t *j = user;
  LW_RETURN_IF_ERROR(submit_gate(o, j->gate, j->s, 0));
  for (int i = 1; i < 4; ++i) {
    rec_t r = {i, 0, 0, {{NULL, 0}}};
    LW_RETURN_IF_ERROR(submit_record(o, j->rec, j->s, &r));
  }
  rec_t r = {99, 0, 0, {{NULL, 0}}};
  lw_callable_handle_t unknown = {j->rec.id + 0x10000};
  j->bad_handle = submit_record(o, unknown, j->s, &r);
  snprintf(j->bad_handle_msg, sizeof(j->bad_handle_msg), "%s", lw_last_error()->message);
  lw_args_t a;
  lw_args_init(&a);
  const lw_args_t *args[2] = {&a, &a};
  int32_t chips[2] = {0, 0};
  j->bad_group = lw_orch_submit_next_level_group(o, unknown, args, chips, 2);
  snprintf(j->bad_group_msg, sizeof(j->bad_group_msg), "%s", lw_last_error()->message);
  atomic_store(&j->s->gate, 1);  // the refusals came back while the ring was still full
  return LW_OK;
}

static lw_status_t crowded_group_orch(lw_orch_t *o, void *user) {
  full_ring_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 7));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 0));
  enum { N = LW_MB_TASK_FRAMES + 1 };
  const lw_args_t *args[N];
  int32_t chips[N];
  for (int i = 0; i < N; ++i) {
    args[i] = &a;
    chips[i] = 0;
  }
  j->bad_group = lw_orch_submit_next_level_group(o, j->rec, args, chips, N);
  snprintf(j->bad_group_msg, sizeof(j->bad_group_msg), "%s", lw_last_error()->message);
  chips[N - 1] = 1;  // a frame's worth on chip 0, one on chip 1: fits
  return lw_orch_submit_next_level_group(o, j->rec, args, chips, N);
}

// A chip holds LW_MB_TASK_FRAMES posted tasks: a group with more members on one chip could
// never launch and would hold back every later group; it is refused at the submit.
Test(worker, group_with_more_members_on_one_chip_than_it_has_frames_is_refused, .timeout = 60) {
  make_worker(2, 0);
  full_ring_job_t j = {.rec = wreg("record"), .s = new_shared()};
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, crowded_group_orch, &j, &rep));
  cr_assert_eq(j.bad_group, LW_INVALID_ARGUMENT, "%s: %s", lw_status_name(j.bad_group),
               j.bad_group_msg);
  char want[64];
  snprintf(want, sizeof(want), "more than %u members on chip 0", LW_MB_TASK_FRAMES);
  cr_assert(strstr(j.bad_group_msg, want), "%s", j.bad_group_msg);
  cr_assert_eq(rep.n_tasks, LW_MB_TASK_FRAMES + 1, "only the group that fits was built");
  cr_assert_eq(rep.n_completed, LW_MB_TASK_FRAMES + 1);
  destroy_and_check();
}

// With the submit timeout at "forever", a submit that waited for a ring slot before checking
// its callable would hang here (the gate opens only after the refusals came back): what can
// be refused is refused at once, with its own reason, never as "ring full".
Test(worker, bad_submits_on_a_full_ring_are_refused_at_once_with_their_reason, .timeout = 60) {
  make_small_ring_worker(-1);
  full_ring_job_t j = {.rec = wreg("record"), .gate = wreg("gate"), .s = new_shared()};
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, full_ring_orch, &j, &rep));
  cr_assert_eq(j.bad_handle, LW_NOT_FOUND, "%s: %s", lw_status_name(j.bad_handle),
               j.bad_handle_msg);
  cr_assert(strstr(j.bad_handle_msg, "unknown or released callable"), "%s", j.bad_handle_msg);
  cr_assert_eq(j.bad_group, LW_NOT_FOUND, "%s: %s", lw_status_name(j.bad_group),
               j.bad_group_msg);
  cr_assert(strstr(j.bad_group_msg, "unknown or released callable"), "%s", j.bad_group_msg);
  cr_assert_eq(rep.n_tasks, 4);
  cr_assert_eq(rep.n_completed, 4);
  destroy_and_check();
}

typedef struct fifo_job {
  int *order;
  _Atomic int *next;
  int me;
} fifo_job_t;

static lw_status_t fifo_orch(lw_orch_t *o, void *user) {
  (void)o;
  fifo_job_t *j = user;
  j->order[atomic_fetch_add(j->next, 1)] = j->me;
  return LW_OK;
}

Test(worker, runs_start_in_submission_order, .timeout = 60) {
  make_worker(1, 0);
  enum { N = 32 };
  int order[N];
  _Atomic int next = 0;
  fifo_job_t jobs[N];
  lw_handle_t *h[N];
  for (int i = 0; i < N; ++i) {
    jobs[i] = (fifo_job_t){order, &next, i};
    if (i % 4 == 3) {
      LW_ASSERT_OK(lw_worker_run(w, fifo_orch, &jobs[i], NULL));  // sync runs share the queue
      h[i] = NULL;
    } else {
      LW_ASSERT_OK(lw_worker_run_async(w, fifo_orch, &jobs[i], &h[i]));
    }
  }
  for (int i = 0; i < N; ++i) {
    if (h[i]) LW_ASSERT_OK(lw_handle_wait(h[i], LW_WAIT_FOREVER));
    lw_handle_release(h[i]);
  }
  for (int i = 0; i < N; ++i) cr_assert_eq(order[i], i, "run %d started at position %d", order[i], i);
  destroy_and_check();
}

static lw_status_t double_it(const lw_kernel_args_t *args) {
  if (args->n_tensors < 1) return LW_INVALID_ARGUMENT;
  float *x = args->tensor[0].data;
  for (uint64_t i = 0; i < args->tensor[0].bytes / sizeof(float); ++i) x[i] *= 2.0f;
  return LW_OK;
}

Test(worker, sub_callable_handles_are_refused_by_unregister_async, .timeout = 60) {
  make_worker(1, 1);
  lw_callable_handle_t s;
  LW_ASSERT_OK(lw_worker_register_sub(w, double_it, "double_it", &s));
  lw_handle_t *h = NULL;
  cr_assert_eq(lw_worker_unregister_async(w, s, &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "chip callables only"), "message: %s",
            lw_last_error()->message);
  cr_assert_null(h);
  LW_ASSERT_OK(lw_worker_unregister(w, s));
  destroy_and_check();
}

typedef struct bad_tensor_job {
  lw_callable_handle_t k;
  lw_status_t st;
  char message[LW_ERROR_MESSAGE_BYTES];
} bad_tensor_job_t;

static lw_status_t bad_tensor_orch(lw_orch_t *o, void *user) {
  bad_tensor_job_t *j = user;
  float on_stack[16] = {0};
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, on_stack, sizeof(on_stack), LW_TAG_INPUT));
  j->st = lw_orch_submit_next_level(o, j->k, &a, NULL, 0);
  snprintf(j->message, sizeof(j->message), "%s", lw_last_error()->message);
  return LW_OK;
}

Test(worker, tensor_outside_shared_memory_is_invalid_argument, .timeout = 60) {
  make_worker(1, 0);
  bad_tensor_job_t j = {wreg("vector_add"), LW_OK, ""};
  LW_ASSERT_OK(lw_worker_run(w, bad_tensor_orch, &j, NULL));
  cr_assert_eq(j.st, LW_INVALID_ARGUMENT);
  cr_assert(strstr(j.message, "lw_worker_alloc"), "message: %s", j.message);
  destroy_and_check();
}

typedef struct sub_job {
  lw_callable_handle_t s;
  float *x;
} sub_job_t;

static lw_status_t sub_orch(lw_orch_t *o, void *user) {
  sub_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 8 * sizeof(float), LW_TAG_INOUT));
  LW_RETURN_IF_ERROR(lw_orch_submit_sub(o, j->s, &a));
  return lw_orch_submit_sub(o, j->s, &a);  // INOUT: runs after the first
}

Test(worker, sub_functions_run_in_a_sub_child_in_dependency_order, .timeout = 60) {
  make_worker(1, 2);
  sub_job_t j;
  LW_ASSERT_OK(lw_worker_register_sub(w, double_it, "double_it", &j.s));
  j.x = lw_worker_alloc(w, 8 * sizeof(float));
  for (int i = 0; i < 8; ++i) j.x[i] = (float)i;
  LW_ASSERT_OK(lw_worker_run(w, sub_orch, &j, NULL));
  for (int i = 0; i < 8; ++i) cr_assert_eq(j.x[i], 4.0f * (float)i);
  destroy_and_check();
}

Test(worker, destroy_with_work_in_flight_finishes_every_handle_and_leaves_nothing, .timeout = 60) {
  make_worker(2, 1);
  shared_state_t *s = new_shared();
  gate_job_t j = {wreg("gate"), s, 0};
  lw_handle_t *hs[6];
  for (int i = 0; i < 6; ++i) LW_ASSERT_OK(lw_worker_run_async(w, gate_orch, &j, &hs[i]));
  lw_test_wait_nonzero(&s->entered);
  lw_callable_t big = lw_test_kernel("big_vector_add");
  lw_handle_t *reg = NULL;
  LW_ASSERT_OK(lw_worker_register_async(w, &big, &reg));
  lw_callable_free_loaded(&big);
  destroy_and_check();  // the gate never opens: destroy must cancel it
  for (int i = 0; i < 6; ++i) {
    cr_assert(lw_handle_done(hs[i]), "run %d was left unfinished", i);
    lw_status_t st = lw_handle_wait(hs[i], 0);
    cr_assert(st == LW_CANCELLED || st == LW_CHILD_EXITED || st == LW_OK, "run %d: %s", i,
              lw_status_name(st));
    lw_handle_release(hs[i]);
  }
  cr_assert(lw_handle_done(reg));
  lw_handle_release(reg);
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[512];
  while (fgets(line, sizeof(line), maps)) {
    cr_assert_null(strstr(line, "lw-arena"), "arena still mapped: %s", line);
    cr_assert_null(strstr(line, "lw-mailboxes"), "mailboxes still mapped: %s", line);
  }
  fclose(maps);
}

Test(worker, two_workers_in_one_process_work_side_by_side, .timeout = 60) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_t *ws[2];
  vadd_job_t jobs[2];
  for (int k = 0; k < 2; ++k) {
    lw_worker_config_t cfg;
    lw_worker_config_default(&cfg);
    cfg.arena_bytes = 16ull << 20;
    LW_ASSERT_OK(lw_worker_create(&cfg, &ws[k]));
    w = ws[k];
    jobs[k] = (vadd_job_t){wreg("vector_add"), NULL, NULL, NULL, 1000, LW_ANY_CHIP};
    jobs[k].a = lw_worker_alloc(w, 4000);
    jobs[k].b = lw_worker_alloc(w, 4000);
    jobs[k].c = lw_worker_alloc(w, 4000);
    for (int i = 0; i < 1000; ++i) {
      jobs[k].a[i] = (float)(i + k);
      jobs[k].b[i] = 1.0f;
    }
  }
  lw_handle_t *h[2];
  for (int k = 0; k < 2; ++k) LW_ASSERT_OK(lw_worker_run_async(ws[k], vadd_orch, &jobs[k], &h[k]));
  for (int k = 0; k < 2; ++k) {
    LW_ASSERT_OK(lw_handle_wait(h[k], LW_WAIT_FOREVER));
    lw_handle_release(h[k]);
    for (int i = 0; i < 1000; ++i) cr_assert_eq(jobs[k].c[i], (float)(i + k) + 1.0f);
  }
  lw_worker_destroy(ws[0]);
  lw_worker_destroy(ws[1]);
  w = NULL;
  cr_expect_eq(lw_test_child_count(), children_before);
  cr_expect_eq(lw_test_fd_count(), fds_before);
}

Test(worker, register_of_a_corrupt_image_fails_on_every_chip_and_names_one, .timeout = 60) {
  make_worker(2, 0);
  static const char text[] = "definitely not an ELF image";
  lw_callable_t c = {.name = "text", .image = text, .image_bytes = sizeof(text)};
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register(w, &c, &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "chip "), "the error names a chip: %s",
            lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "ELF"), "and says why: %s", lw_last_error()->message);
  cr_assert_eq(h.id, 0);
  // The worker is still fine.
  lw_callable_handle_t ok = wreg("noop");
  cr_assert_neq(ok.id, 0);
  destroy_and_check();
}

Test(worker, event_fd_becomes_readable_when_a_handle_finishes, .timeout = 60) {
  make_worker(1, 0);
  int efd = lw_worker_event_fd(w);
  cr_assert_geq(efd, 0);
  uint64_t v;
  while (read(efd, &v, sizeof(v)) > 0) {
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  cr_assert_eq(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
  vadd_job_t j = {wreg("vector_add"), NULL, NULL, NULL, 64, 0};
  j.a = lw_worker_alloc(w, 256);
  j.b = lw_worker_alloc(w, 256);
  j.c = lw_worker_alloc(w, 256);
  while (read(efd, &v, sizeof(v)) > 0) {
  }
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, vadd_orch, &j, &h));
  // Wait only on the fd. A handle notifies right after it becomes done, so the register
  // above may still ring it once after the drain; a few wake-ups are allowed for that.
  struct epoll_event out;
  int wakeups = 0;
  while (!lw_handle_done(h)) {
    cr_assert_eq(epoll_wait(ep, &out, 1, 30000), 1, "the event fd never became readable");
    cr_assert_lt(++wakeups, 4, "the fd keeps waking without the run finishing");
    while (read(efd, &v, sizeof(v)) > 0) {
    }
  }
  if (wakeups == 0) {
    // Done before the first wait: its notification follows the done signal.
    cr_assert_eq(epoll_wait(ep, &out, 1, 30000), 1, "the run finished but the fd never rang");
  }
  close(ep);
  lw_handle_release(h);
  destroy_and_check();
}

// The fd is written only once it was asked for; what finished before that makes it readable
// on the first ask (the run below ended before any call of lw_worker_event_fd).
Test(worker, event_fd_asked_for_after_a_run_finished_is_readable_at_once, .timeout = 60) {
  make_worker(1, 0);
  vadd_job_t j = {wreg("vector_add"), NULL, NULL, NULL, 64, 0};
  j.a = lw_worker_alloc(w, 256);
  j.b = lw_worker_alloc(w, 256);
  j.c = lw_worker_alloc(w, 256);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, vadd_orch, &j, &rep));
  cr_assert_not(atomic_load(&w->user_fd_armed), "nobody asked for the fd yet");
  int efd = lw_worker_event_fd(w);
  cr_assert_geq(efd, 0);
  // The run's handle notifies right after it is done, which may be after lw_worker_run
  // returned: then the notification itself writes the now armed fd. Either way it is written.
  struct pollfd p = {.fd = efd, .events = POLLIN};
  cr_assert_eq(poll(&p, 1, 30000), 1, "the finished run never made the fd readable");
  uint64_t v;
  cr_assert_eq(read(efd, &v, sizeof(v)), (ssize_t)sizeof(v));
  cr_assert(atomic_load(&w->user_fd_armed));
  cr_assert_eq(lw_worker_event_fd(w), efd, "the same fd on every ask");
  destroy_and_check();
}

typedef struct scope_job {
  lw_callable_handle_t rec, gate;
  shared_state_t *s;
  uint8_t *x;
  bool use_scope;
} scope_job_t;

static lw_status_t scope_orch(lw_orch_t *o, void *user) {
  scope_job_t *j = user;
  if (j->use_scope) LW_RETURN_IF_ERROR(lw_orch_scope_begin(o));
  // The gate writes X on chip 0 and holds it until the test opens the gate.
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, sizeof(j->s->gate), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, sizeof(j->s->entered), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->x, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  if (j->use_scope) LW_RETURN_IF_ERROR(lw_orch_scope_end(o));
  // A reader of X on chip 1: it depends on the gate only if X is still remembered.
  rec_t r = {42, 0, 1, {{j->x, LW_TAG_INPUT}}};
  return submit_record(o, j->rec, j->s, &r);
}

static lw_status_t marker_on_chip1_orch(lw_orch_t *o, void *user) {
  group_job_t *j = user;
  rec_t r = {300 + j->phase, 0, 1, {{NULL, 0}}};
  return submit_record(o, j->rec, j->s, &r);
}

Test(worker, scope_end_forgets_buffers_first_written_inside_it, .timeout = 60) {
  make_worker(2, 0);
  scope_job_t j = {wreg("record"), wreg("gate"), new_shared(), lw_worker_alloc(w, 64), true};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, scope_orch, &j, &run));
  // The reader runs while the gate still holds X's writer: no edge was made.
  // The record kernel claims its slot, then writes the value: wait for the value.
  while (atomic_load((_Atomic int64_t *)&j.s->log[1]) == 0) lw_test_sleep_us(100);
  cr_assert_eq(atomic_load((_Atomic int64_t *)&j.s->log[1]), 42);
  cr_assert_not(lw_handle_done(run));
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  lw_handle_release(run);

  // Without the scope the reader waits for the writer.
  memset(j.s, 0, sizeof(*j.s));
  j.use_scope = false;
  LW_ASSERT_OK(lw_worker_run_async(w, scope_orch, &j, &run));
  lw_test_wait_nonzero(&j.s->entered);
  // Give the reader every chance to (wrongly) run: a task of a later run on chip 1 first (a
  // chip runs its tasks in post order). Its handle finishes only after the gated run's, so
  // the task is watched in its own log.
  group_job_t later = {j.rec, j.gate, new_shared(), 0};
  lw_handle_t *marker = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, marker_on_chip1_orch, &later, &marker));
  wait_logged(later.s, 300);
  cr_assert_eq(atomic_load((_Atomic int64_t *)&j.s->log[0]), 0, "the reader ran before its writer");
  atomic_store(&j.s->gate, 1);
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  cr_assert_eq(j.s->log[1], 42);
  LW_ASSERT_OK(lw_handle_wait(marker, LW_WAIT_FOREVER));
  lw_handle_release(marker);
  lw_handle_release(run);
  destroy_and_check();
}

static lw_status_t scope_misuse_orch(lw_orch_t *o, void *user) {
  lw_status_t *out = user;
  out[0] = lw_orch_scope_end(o);
  for (int i = 0; i < 16; ++i) LW_RETURN_IF_ERROR(lw_orch_scope_begin(o));
  out[1] = lw_orch_scope_begin(o);
  return LW_OK;
}

Test(worker, scope_misuse_is_invalid_argument, .timeout = 60) {
  make_worker(1, 0);
  lw_status_t st[2] = {LW_OK, LW_OK};
  LW_ASSERT_OK(lw_worker_run(w, scope_misuse_orch, st, NULL));
  cr_assert_eq(st[0], LW_INVALID_ARGUMENT, "scope_end without begin");
  cr_assert_eq(st[1], LW_INVALID_ARGUMENT, "a 17th nested scope");
  destroy_and_check();
}

// With the zygote, children are copies of the program as the zygote saw it, so a library
// opened after that is refused even when it was opened before create.
Test(worker, register_sub_refuses_a_library_opened_after_the_zygote_started, .timeout = 60) {
  // The test binary made its zygote before main (tests/test_util.h, lw_init).
  cr_assert(lw__forkserver_zygote_ensure(), "no zygote");
  char path[512];
  snprintf(path, sizeof(path), "%s/noop.so", lw_test_kernel_dir());
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(dl, "%s", dlerror());
  make_worker(1, 1);
  lw_sub_fn early = (lw_sub_fn)(uintptr_t)dlsym(dl, "lw_kernel_main");
  cr_assert_not_null(early);
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register_sub(w, early, "early", &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "mapped when lanework's zygote was made"),
            "message: %s", lw_last_error()->message);
  LW_ASSERT_OK(lw_worker_register_sub(w, double_it, "double_it", &h));
  destroy_and_check();
  dlclose(dl);
}

Test(worker, register_sub_refuses_code_loaded_after_create, .timeout = 60) {
  make_worker(1, 1);
  char path[512];
  snprintf(path, sizeof(path), "%s/noop.so", lw_test_kernel_dir());
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(dl, "%s", dlerror());
  lw_sub_fn late = (lw_sub_fn)(uintptr_t)dlsym(dl, "lw_kernel_main");
  cr_assert_not_null(late);
  lw_callable_handle_t h;
  cr_assert_eq(lw_worker_register_sub(w, late, "late", &h), LW_INVALID_ARGUMENT);
  // Sub children are copies of the program as it was when the zygote was made, so a library
  // opened later is refused whether it was opened before or after create.
  cr_assert(strstr(lw_last_error()->message, "mapped when lanework's zygote was made"),
            "message: %s", lw_last_error()->message);
  dlclose(dl);
  LW_ASSERT_OK(lw_worker_register_sub(w, double_it, "double_it", &h));  // code from the image
  destroy_and_check();
}

// lw_worker_process_ids names the worker's processes: each child is its server's child, the
// servers and the zygote exist, and none of them is this program's child.
static pid_t ppid_of(pid_t pid) {
  char st;
  pid_t ppid;
  unsigned long long start;
  return lw_test_proc_stat(pid, &st, &ppid, &start) ? ppid : -1;
}

Test(worker, process_ids_name_children_servers_and_zygote_none_a_child_of_the_program,
     .timeout = 60) {
  make_worker(2, 1);
  int32_t ids[8] = {0};
  cr_assert_eq(lw_worker_process_ids(w, ids, 8), 2 + 1 + 3);
  cr_assert_eq(lw_worker_process_ids(w, NULL, 0), 6, "the count without room");
  cr_assert_eq(lw_worker_process_ids(NULL, ids, 8), 0);
  for (int i = 0; i < 6; ++i) {
    cr_assert_gt(ids[i], 0, "entry %d names no process", i);
    cr_assert_neq(ppid_of(ids[i]), getpid(), "entry %d (pid %d) is the program's child", i,
                  ids[i]);
  }
  cr_assert_eq(ppid_of(ids[0]), ids[3], "chip 0's parent is the chip server");
  cr_assert_eq(ppid_of(ids[1]), ids[3], "chip 1's parent is the chip server");
  cr_assert_eq(ppid_of(ids[2]), ids[4], "the sub child's parent is the sub server");
  cr_assert_eq(ppid_of(ids[4]), ids[5], "the sub server's parent is the zygote");
  cr_assert_eq(ids[5], lw__forkserver_zygote_pid());
  cr_assert_eq(lw_test_child_count(), 0, "the program has no child");
  destroy_and_check();
}
