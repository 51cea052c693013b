// tests/faults/test_protocol.c — a child that breaks the mailbox protocol (garbage in its
// completion ring, task frames, control frame or header) is killed and handled like a death:
// its work fails CHILD_EXITED naming the chip (from the parent's own records) and the
// violation, the scheduler keeps serving, the child is respawned; and lw_worker_destroy
// finishes every run handle, whatever state the run was in.
//
// The garbage is written from the test (the parent's side of the shared mapping), which is
// what a stray kernel write in the child would leave behind.
#include <inttypes.h>
#include <stdio.h>

#include "fault_util.h"
#include "lanes/sys.h"

static fx_t f;

// Values no parent-written field ever holds; if a message repeats one, it named the child
// from memory the child can write.
#define GARBAGE_INDEX 0x56786461u
#define GARBAGE_PID 0x42424242
#define GARBAGE_STATE 0x43434343u

static lw_mailbox_t *fx_mailbox(fx_t *fx, uint32_t slot) { return fx->w->eps[slot].mb; }

static void assert_no_garbage_names(const char *msg) {
  char v[4][32];
  snprintf(v[0], sizeof(v[0]), "%u", GARBAGE_INDEX);
  snprintf(v[1], sizeof(v[1]), "%x", GARBAGE_INDEX);
  snprintf(v[2], sizeof(v[2]), "%d", GARBAGE_PID);
  snprintf(v[3], sizeof(v[3]), "%x", GARBAGE_PID);
  for (int i = 0; i < 4; ++i) {
    cr_assert(!strstr(msg, v[i]), "message repeats the garbage value %s: %s", v[i], msg);
  }
}

// A worker of n_chips chips with gate and vector_add registered, and one run whose gate task
// holds chip `chip`'s run lane (its kernel has started) until the test opens the gate.
typedef struct gated {
  lw_callable_handle_t gate, vadd;
  shared_t *s;
  job_t job;
  lw_handle_t *h;
} gated_t;

static void start_gated(gated_t *g, uint32_t n_chips, int32_t chip) {
  lw_worker_config_t cfg;
  fx_config(&cfg, n_chips, 0);
  fx_create(&f, &cfg);
  g->gate = fx_reg(&f, "gate");
  g->vadd = fx_reg(&f, "vector_add");
  g->s = fx_shared(&f);
  g->job = (job_t){g->gate, g->s, JOB_GATE, chip, 0, 0, 1};
  g->h = NULL;
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &g->job, &g->h));
  lw_test_wait_nonzero(&g->s->entered);
}

Test(protocol, corrupt_completion_ring_mid_run_fails_the_run_and_the_chip_comes_back,
     .timeout = 60) {
  gated_t g;
  start_gated(&g, 2, 1);
  lw_callable_handle_t vadd = g.vadd;
  shared_t *s = g.s;
  lw_handle_t *h = g.h;
  // The child is inside the kernel and pushes nothing: the head is the test's to break. A head
  // a thousand entries past the tail can never be drained.
  lw_mailbox_t *mb = fx_mailbox(&f, 1);
  atomic_store(&mb->ring_head.value, atomic_load(&mb->ring_tail.value) + 1000);
  lw__worker_kick(f.w);
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CHILD_EXITED, "%s",
               lw_handle_error(h)->message);
  const lw_error_t *e = lw_handle_error(h);
  ASSERT_MSG_HAS(e->message, "chip 1");
  ASSERT_MSG_HAS(e->message, "protocol violation");
  ASSERT_MSG_HAS(e->message, "completion ring head");
  ASSERT_MSG_HAS(e->message, "child killed");
  cr_assert_eq(e->worker_id, 1);
  lw_handle_release(h);
  // The scheduler was not stuck on the bad ring: it saw the death, the supervisor respawned
  // the chip, and both chips serve runs again.
  fx_wait_respawned(&f, 1, 1);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

// A child that finds the parent breaking the protocol exits with a status of its own
// (child/child_exit.h); the failure of the work it held names that status and what it means.
Test(protocol, doorbell_without_a_post_fails_the_run_naming_the_childs_exit_reason,
     .timeout = 60) {
  gated_t g;
  start_gated(&g, 2, 1);
  lw_callable_handle_t vadd = g.vadd;
  shared_t *s = g.s;
  lw_handle_t *h = g.h;
  // The kernel runs on chip 1's run lane; its mailbox thread waits for the next post. Announce
  // one that no frame holds.
  lw_mailbox_t *mb = fx_mailbox(&f, 1);
  atomic_fetch_add(&mb->doorbell.post_seq, 1);
  lw__waitword_wake(&mb->doorbell.word, true);
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CHILD_EXITED, "%s",
               lw_handle_error(h)->message);
  const lw_error_t *e = lw_handle_error(h);
  ASSERT_MSG_HAS(e->message, "chip 1");
  char want[128];
  snprintf(want, sizeof(want), "exited with status %d (%s)", LW_CHILD_EXIT_POST_MISSING,
           lw__child_exit_reason(LW_CHILD_EXIT_POST_MISSING));
  ASSERT_MSG_HAS(e->message, want);
  ASSERT_MSG_HAS(e->message, "the doorbell announced a post no frame holds");
  lw_handle_release(h);
  fx_wait_respawned(&f, 1, 1);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

Test(protocol, garbage_task_frame_state_fails_the_next_task_and_the_chip_comes_back,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  fx_run_vadd_ok(&f, vadd, s, 1);
  // Idle chip 1: every frame is IDLE and free in the parent's record; the search for a free
  // frame starts at next_frame (the run above finished, so nothing changes it meanwhile).
  uint32_t next = f.w->sched.child[1].next_frame;
  atomic_store(&fx_mailbox(&f, 1)->task[next].state, GARBAGE_STATE);
  job_t j = {vadd, s, JOB_VADD, 1, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED, "%s",
               rep.error.message);
  ASSERT_MSG_HAS(rep.error.message, "chip 1: protocol violation");
  char want[48];
  snprintf(want, sizeof(want), "task frame %u is UNKNOWN", next);
  ASSERT_MSG_HAS(rep.error.message, want);
  cr_assert_eq(rep.error.worker_id, 1);
  // Not failed forever: the chip is respawned with its callables and takes tasks again.
  fx_wait_respawned(&f, 1, 1);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

Test(protocol, garbage_header_fails_the_next_task_naming_the_chip_from_the_parent,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  shared_t *s = fx_shared(&f);
  lw_mailbox_t *mb = fx_mailbox(&f, 1);
  mb->header.child_index = GARBAGE_INDEX;
  atomic_store(&mb->header.child_pid, GARBAGE_PID);
  atomic_store(&mb->task[0].state, GARBAGE_STATE);
  atomic_store(&mb->task[1].state, GARBAGE_STATE);
  job_t j = {vadd, s, JOB_VADD, 1, 0, 0, 1};
  lw_run_report_t rep;
  cr_assert_eq(lw_worker_run(f.w, job_orch, &j, &rep), LW_CHILD_EXITED, "%s",
               rep.error.message);
  ASSERT_MSG_HAS(rep.error.message, "chip 1");
  ASSERT_MSG_HAS(rep.error.message, "protocol violation");
  assert_no_garbage_names(rep.error.message);
  cr_assert_eq(rep.error.worker_id, 1);
  fx_wait_respawned(&f, 1, 1);
  // The death's description (what later failures of this chip quote) names no garbage either.
  char desc[192];
  lw__ep_exit_desc(&f.w->eps[1], desc, sizeof(desc));
  ASSERT_MSG_HAS(desc, "protocol violation");
  assert_no_garbage_names(desc);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

Test(protocol, garbage_control_frame_fails_the_register_naming_the_chip_and_respawns,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  shared_t *s = fx_shared(&f);
  atomic_store(&fx_mailbox(&f, 1)->control.state, GARBAGE_STATE);
  lw_callable_t c = lw_test_kernel("vector_add");
  lw_handle_t *reg = NULL;
  LW_ASSERT_OK(lw_worker_register_async(f.w, &c, &reg));
  cr_assert_eq(lw_handle_wait(reg, LW_WAIT_FOREVER), LW_CHILD_EXITED, "%s",
               lw_handle_error(reg)->message);
  ASSERT_MSG_HAS(lw_handle_error(reg)->message, "chip 1");
  ASSERT_MSG_HAS(lw_handle_error(reg)->message, "protocol violation");
  ASSERT_MSG_HAS(lw_handle_error(reg)->message, "control frame is UNKNOWN");
  lw_handle_release(reg);
  fx_wait_respawned(&f, 1, 1);
  lw_callable_handle_t vadd;
  LW_ASSERT_OK(lw_worker_register(f.w, &c, &vadd));
  lw_callable_free_loaded(&c);
  fx_run_vadd_ok(&f, vadd, s, 1);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_destroy(&f);
}

Test(protocol, destroy_right_after_a_ring_corruption_finishes_the_run_in_flight,
     .timeout = 60) {
  gated_t g;
  start_gated(&g, 1, 0);
  lw_handle_t *h = g.h;
  lw_mailbox_t *mb = fx_mailbox(&f, 0);
  atomic_store(&mb->ring_head.value, atomic_load(&mb->ring_tail.value) + 1000);
  fx_destroy(&f);
  // The handle outlives the worker; its wait answers at once (a bounded wait, so a handle
  // left unfinished fails here instead of hanging).
  lw_status_t st = lw_handle_wait(h, 5ll * 1000 * 1000 * 1000);
  cr_assert(st != LW_OK && st != LW_DEADLINE_EXCEEDED, "run ended %s: %s", lw_status_name(st),
            lw_handle_error(h)->message);
  lw_handle_release(h);
}

Test(protocol, destroy_finishes_runs_the_scheduler_can_no_longer_finish, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  lw_callable_handle_t gate = fx_reg(&f, "gate");
  shared_t *s = fx_shared(&f);
  job_t j = {gate, s, JOB_GATE, 0, 0, 0, 1};
  lw_handle_t *h[2] = {NULL, NULL};
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &h[0]));
  lw_test_wait_nonzero(&s->entered);
  LW_ASSERT_OK(lw_worker_run_async(f.w, job_orch, &j, &h[1]));
  // Both runs hold posted tasks (the second waits behind the first on the chip's run lane)
  // when nothing is left to see them through: the scheduler is gone. Destroy must still
  // finish both handles.
  for (;;) {
    lw__sched_pass_lock(&f.w->sched);
    uint32_t busy = f.w->sched.child[0].busy;
    lw__sched_pass_unlock(&f.w->sched);
    if (busy == 2) break;
    lw_test_sleep_us(500);
  }
  lw__sched_stop(&f.w->sched);
  fx_destroy(&f);
  for (int i = 0; i < 2; ++i) {
    lw_status_t st = lw_handle_wait(h[i], 5ll * 1000 * 1000 * 1000);
    cr_assert_eq(st, LW_UNAVAILABLE, "run %d ended %s: %s", i, lw_status_name(st),
                 lw_handle_error(h[i])->message);
    ASSERT_MSG_HAS(lw_handle_error(h[i])->message, "worker destroyed");
    lw_handle_release(h[i]);
  }
}

typedef struct reg_call {
  lw_worker_t *w;
  lw_callable_t *c;
  lw_handle_t *h;
  lw_status_t st;
} reg_call_t;

static void *register_thread(void *arg) {
  reg_call_t *r = arg;
  r->st = lw_worker_register_async(r->w, r->c, &r->h);
  return NULL;
}

// The register op the worker lists once a register thread posted it (chip 0 is stopped, so
// it stays listed until chip 0 answers).
static lw_wop_t *wait_listed_op(void) {
  lw_wop_t *op = NULL;
  while (!op) {
    pthread_mutex_lock(&f.w->calls.mu);
    op = f.w->calls.ops;
    pthread_mutex_unlock(&f.w->calls.mu);
    if (!op) lw_test_sleep_us(200);
  }
  return op;
}

// Pushes into mb's completion ring a well-formed report of op for chip 0 (the control id chip 0
// was given, a bogus callable id 0x7777), as a child that speaks for another would, and wakes
// the scheduler.
static void push_fake_chip0_report(lw_mailbox_t *mb, const lw_wop_t *op) {
  lw_mb_completion_t fake;
  memset(&fake, 0, sizeof(fake));
  fake.kind = LW_MB_COMPLETION_CONTROL;
  fake.control_id = (op->serial << 8) | 0;
  fake.status = LW_OK;
  fake.value = 0x7777;
  bool wake = false;
  lw_error_t err;
  LW_ASSERT_OK(lw__mailbox_push_completion(mb, &fake, lw__now_ns() + 5000000000ll, &wake, &err));
  lw__worker_kick(f.w);
}

Test(protocol, a_control_report_counts_only_for_the_chip_whose_ring_held_it, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  fx_create(&f, &cfg);
  shared_t *s = fx_shared(&f);
  lw_callable_t c = lw_test_kernel("vector_add");
  // Chip 0 is stopped, so the register waits for chip 0's ack with its op listed.
  pid_t pid0 = fx_pid(&f, 0);
  cr_assert_eq(lw_test_stop_process(pid0), 0);
  reg_call_t r = {f.w, &c, NULL, LW_OK};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, register_thread, &r), 0);
  lw_wop_t *op = wait_listed_op();
  // Chip 1 "reports" the op on chip 0's behalf: the control id chip 0 was given, a bogus
  // callable id. It must count for nothing (chip 1's ring speaks only for chip 1).
  lw_mailbox_t *mb1 = fx_mailbox(&f, 1);
  push_fake_chip0_report(mb1, op);
  while (atomic_load(&mb1->ring_tail.value) != atomic_load(&mb1->ring_head.value)) {
    lw_test_sleep_us(200);
  }
  cr_assert_eq(kill(pid0, SIGCONT), 0);
  cr_assert_eq(pthread_join(th, NULL), 0);
  LW_ASSERT_OK(r.st);
  LW_ASSERT_OK(lw_handle_wait(r.h, LW_WAIT_FOREVER));
  lw_callable_handle_t vadd;
  LW_ASSERT_OK(lw_handle_callable(r.h, &vadd));
  // Chip 0's own report (its real callable id) is the one that counted.
  cr_assert_neq(f.w->calls.table[(vadd.id & 0xffffffffu) - 1].local[0], 0x7777u);
  fx_run_vadd_ok(&f, vadd, s, 0);
  fx_run_vadd_ok(&f, vadd, s, 1);
  lw_handle_release(r.h);
  lw_callable_free_loaded(&c);
  fx_destroy(&f);
}

// A sub child never reports a control asynchronously (its REGISTER_SUB is answered in the
// control frame), and its index is not a chip's: a control report in its ring is a protocol
// violation, never a report for the chip with the same index.
Test(protocol, a_control_report_in_a_sub_childs_ring_counts_for_no_chip, .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 1);
  fx_create(&f, &cfg);
  shared_t *s = fx_shared(&f);
  lw_callable_t c = lw_test_kernel("vector_add");
  pid_t pid0 = fx_pid(&f, 0), sub_pid = fx_pid(&f, 1);
  cr_assert_eq(lw_test_stop_process(pid0), 0);
  reg_call_t r = {f.w, &c, NULL, LW_OK};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, register_thread, &r), 0);
  lw_wop_t *op = wait_listed_op();
  // Sub 0 "reports" the op with the control id chip 0 was given.
  push_fake_chip0_report(fx_mailbox(&f, 1), op);
  // The sub child is killed for it and comes back.
  fx_wait_respawned(&f, 1, 1);
  cr_assert_neq(fx_pid(&f, 1), sub_pid);
  cr_assert_eq(kill(pid0, SIGCONT), 0);
  cr_assert_eq(pthread_join(th, NULL), 0);
  LW_ASSERT_OK(r.st);
  LW_ASSERT_OK(lw_handle_wait(r.h, LW_WAIT_FOREVER));
  lw_callable_handle_t vadd;
  LW_ASSERT_OK(lw_handle_callable(r.h, &vadd));
  cr_assert_neq(f.w->calls.table[(vadd.id & 0xffffffffu) - 1].local[0], 0x7777u);
  fx_run_vadd_ok(&f, vadd, s, 0);
  lw_handle_release(r.h);
  lw_callable_free_loaded(&c);
  fx_destroy(&f);
}

typedef struct control_thread {
  lw_endpoint_t *ep;
  lw_status_t st;
} control_thread_t;

static void *control_in_thread(void *arg) {
  control_thread_t *c = arg;
  lw_mb_control_post_t p;
  memset(&p, 0, sizeof(p));
  p.command = LW_MB_CMD_CANCEL;  // answered at once by a running child
  lw_mb_control_ack_t ack;
  lw_error_t err;
  c->st = lw__ep_control(c->ep, &p, &ack, &err);
  return NULL;
}

// A control round trip that sees its child's death (in the fork server's exit table) before
// the scheduler does gives up and leaves its request in the control frame. A control posted
// next, still before the scheduler handled the death, finds the frame not IDLE: that is the
// death, not a protocol violation, and the death keeps its own description ("killed by
// SIGKILL"), with the reports in the dead child's ring still read.
Test(protocol, a_request_left_by_a_control_that_saw_its_child_die_is_no_violation,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  cfg.liveness_timeout_ns = 0;  // the child is stopped on purpose below
  fx_create(&f, &cfg);
  lw_endpoint_t *ep = &f.w->eps[0];
  pid_t victim = fx_pid(&f, 0);
  cr_assert_eq(lw_test_stop_process(victim), 0);
  control_thread_t first = {ep, LW_OK};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, control_in_thread, &first), 0);
  while (atomic_load(&fx_mailbox(&f, 0)->control.state) != LW_MB_CONTROL_REQUEST) {
    lw_test_sleep_us(200);
  }
  // The scheduler handles a death holding the DAG owner's token (on_child_death): held here, it
  // cannot, so the endpoint stays READY with the first request in its frame. Nothing below
  // takes the token.
  lw__sched_pass_lock(&f.w->sched);
  cr_assert_eq(kill(victim, SIGKILL), 0);
  pthread_join(t, NULL);
  cr_assert_eq(first.st, LW_CHILD_EXITED);
  cr_assert_eq(atomic_load(&ep->state), LW_EP_READY);
  control_thread_t second = {ep, LW_OK};
  control_in_thread(&second);
  bool violated = atomic_load(&ep->violated);
  lw__sched_pass_unlock(&f.w->sched);
  cr_assert_eq(second.st, LW_CHILD_EXITED);
  cr_assert_not(violated, "the dead child was taken for a protocol violation");
  fx_wait_respawned(&f, 0, 1);
  char desc[256];
  lw__ep_exit_desc(ep, desc, sizeof(desc));
  ASSERT_MSG_HAS(desc, "killed by SIGKILL");
  cr_assert_null(strstr(desc, "protocol violation"), "%s", desc);
  fx_destroy(&f);
}
