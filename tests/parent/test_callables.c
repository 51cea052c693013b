// tests/parent/test_callables.c — worker-level callables: unregister while tasks still
// reference a callable (sub and chip), ops that complete in bulk, concurrent register_sub,
// and reports that must only ever complete the op they were posted for.
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "worker_test_util.h"

static void make_worker_queue(uint32_t chips, uint32_t subs, uint32_t register_queue_depth) {
  lw_worker_config_t cfg;
  wt_config(&cfg, chips, subs);
  if (register_queue_depth) cfg.chip.register_queue_depth = register_queue_depth;
  wt_create(&cfg);
}

static lw_wc_state_t wc_state(lw_callable_handle_t h) {
  pthread_mutex_lock(&w->calls.mu);
  lw_wcallable_t *c = &w->calls.table[(h.id & 0xffffffffu) - 1];
  lw_wc_state_t st = c->id == h.id ? c->state : LW_WC_FREE;
  pthread_mutex_unlock(&w->calls.mu);
  return st;
}

// Loads the prepare_gate kernel named so that its prepare hook waits for `path` to exist.
static lw_callable_t prepare_gate_kernel(const char *path) {
  lw_callable_t c = lw_test_kernel("prepare_gate");
  free((void *)c.name);
  size_t n = strlen("prepare_gate:") + strlen(path) + 1;
  char *name = malloc(n);
  cr_assert_not_null(name);
  snprintf(name, n, "prepare_gate:%s", path);
  c.name = name;
  return c;
}

static void gate_path(char *buf, size_t bytes, const char *what) {
  snprintf(buf, bytes, "/tmp/lw-prepare-gate-%d-%s", (int)getpid(), what);
  unlink(buf);
}

static void open_gate_file(const char *path) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "cannot create %s", path);
  fclose(f);
}

// Registers a prepare_gate kernel on the file path (gate_path(what), created open), into
// *held (free it with lw_callable_free_loaded). Registered first, a respawned chip replays it
// first: once the file is gone, it holds that replay.
static lw_callable_handle_t register_replay_gate(const char *what, char *path, size_t bytes,
                                                 lw_callable_t *held) {
  gate_path(path, bytes, what);
  open_gate_file(path);
  *held = prepare_gate_kernel(path);
  lw_callable_handle_t g;
  LW_ASSERT_OK(lw_worker_register(w, held, &g));
  return g;
}

// Waits until ep's child is no longer `old` and is READY but does not take work yet: it is
// taking its replay. (accepting changes under the DAG owner's token.)
static void wait_replaying(lw_endpoint_t *ep, pid_t old) {
  for (;;) {
    lw__sched_pass_lock(&w->sched);
    bool replaying = atomic_load(&ep->pid) != old && atomic_load(&ep->state) == LW_EP_READY &&
                     !ep->accepting;
    lw__sched_pass_unlock(&w->sched);
    if (replaying) return;
    lw_test_sleep_us(100);
  }
}

// Waits until ep's child was respawned at least once and takes work again.
static void wait_respawned(lw_endpoint_t *ep) {
  for (;;) {
    lw__sched_pass_lock(&w->sched);
    bool back = atomic_load(&ep->stats.respawns) > 0 && ep->accepting;
    lw__sched_pass_unlock(&w->sched);
    if (back) return;
    lw_test_sleep_us(100);
  }
}

// ---------------------------------------------------------------------------------------------
// Sub callables: unregister tombstones at once and frees only after the queued tasks ran.

typedef struct sub_state {
  _Atomic uint32_t gate;
  _Atomic uint32_t entered;
  uint8_t dep[64];  // the chip gate task's output, the sub tasks' input
  int64_t out[16];
} sub_state_t;

static lw_status_t sub_write_111(const lw_kernel_args_t *a) {
  *(int64_t *)a->tensor[0].data = 111;
  return LW_OK;
}

static lw_status_t sub_write_222(const lw_kernel_args_t *a) {
  *(int64_t *)a->tensor[0].data = 222;
  return LW_OK;
}

typedef struct sub_queue_job {
  lw_callable_handle_t gate, writer;
  sub_state_t *s;
  int n;                     // writer tasks, one per out[] slot
  bool with_gate;
  _Atomic uint32_t submitted;
  _Atomic uint32_t orch_returned;  // set by returning_orch
  lw_status_t submit_status;  // of the last submit
  char message[LW_ERROR_MESSAGE_BYTES];
} sub_queue_job_t;

static lw_status_t sub_queue_orch(lw_orch_t *o, void *user) {
  sub_queue_job_t *j = user;
  lw_args_t a;
  if (j->with_gate) {
    // A chip task holds the sub tasks back (they read its output): queued, not posted, while
    // the sub children stay idle (a sub child serves controls only between tasks).
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->gate, 4, LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, (void *)&j->s->entered, 4, LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->s->dep, sizeof(j->s->dep), LW_TAG_OUTPUT));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 0));
  }
  for (int i = 0; i < j->n; ++i) {
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, &j->s->out[i], sizeof(int64_t), LW_TAG_NO_DEP));
    if (j->with_gate) {
      LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->s->dep, sizeof(j->s->dep), LW_TAG_INPUT));
    }
    j->submit_status = lw_orch_submit_sub(o, j->writer, &a);
    if (j->submit_status != LW_OK) {
      snprintf(j->message, sizeof(j->message), "%s", lw_last_error()->message);
      return j->submit_status;
    }
  }
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

// sub_queue_orch, then a flag: the test can look at what the submits said while the run's
// handle still waits for an earlier run (run handles finish in submission order).
static lw_status_t returning_orch(lw_orch_t *o, void *user) {
  sub_queue_job_t *j = user;
  lw_status_t st = sub_queue_orch(o, user);
  atomic_store(&j->orch_returned, 1);
  return st;
}

typedef struct unregister_call {
  lw_callable_handle_t h;
  lw_status_t st;
  _Atomic uint32_t returned;
} unregister_call_t;

static void *unregister_thread(void *arg) {
  unregister_call_t *u = arg;
  u->st = lw_worker_unregister(w, u->h);
  atomic_store(&u->returned, 1);
  return NULL;
}

Test(callables, register_sub_on_a_worker_without_sub_children_is_refused_naming_n_subs) {
  make_worker_queue(1, 0, 0);
  lw_callable_handle_t h = {7};
  lw_status_t st = lw_worker_register_sub(w, sub_write_111, "write_111", &h);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "got %s", lw_status_name(st));
  cr_assert_not_null(strstr(lw_last_error()->message, "n_subs is 0"), "%s",
                     lw_last_error()->message);
  cr_assert_eq(h.id, 0, "no handle");
  destroy_and_check();
}

Test(callables, sub_unregister_waits_for_queued_tasks_which_run_the_original_function,
     .timeout = 60) {
  make_worker(1, 2);
  sub_state_t *s = lw_worker_alloc(w, sizeof(*s));
  cr_assert_not_null(s);
  memset(s, 0, sizeof(*s));
  sub_queue_job_t j = {.s = s, .n = 8, .with_gate = true, .gate = wreg("gate")};
  LW_ASSERT_OK(lw_worker_register_sub(w, sub_write_111, "write_111", &j.writer));
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, sub_queue_orch, &j, &run));
  lw_test_wait_nonzero(&j.submitted);
  lw_test_wait_nonzero(&s->entered);  // the chip gate task runs; the writers wait for it

  // Unregister while the eight writer tasks are queued; it must wait for them.
  unregister_call_t u = {.h = j.writer};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, unregister_thread, &u), 0);
  while (wc_state(j.writer) == LW_WC_LIVE) lw_test_sleep_us(50);

  // A new sub function now: it must not take over what the queued tasks run.
  lw_callable_handle_t other;
  LW_ASSERT_OK(lw_worker_register_sub(w, sub_write_222, "write_222", &other));
  cr_assert_neq(other.id, j.writer.id);

  // Submits with the tombstoned callable fail at once. (Async: a sync run would wait for the
  // gated run's handle, which finishes first.)
  sub_queue_job_t late = {.s = s, .n = 1, .writer = j.writer};
  lw_run_report_t rep;
  lw_handle_t *late_run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, returning_orch, &late, &late_run));
  lw_test_wait_nonzero(&late.orch_returned);
  cr_assert_eq(late.submit_status, LW_FAILED_PRECONDITION, "got %s: %s",
               lw_status_name(late.submit_status), late.message);
  cr_assert(strstr(late.message, "pending unregister"), "message: %s", late.message);

  cr_assert_eq(atomic_load(&u.returned), 0,
               "the unregister returned while tasks that use the callable were still queued");
  atomic_store(&s->gate, 1);
  pthread_join(th, NULL);
  LW_ASSERT_OK(u.st);
  // It returned only after the queued tasks ran, and they ran the original function.
  for (int i = 0; i < j.n; ++i) {
    cr_assert_eq(s->out[i], 111, "out[%d] = %lld", i, (long long)s->out[i]);
  }
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  LW_ASSERT_OK(lw_handle_run_report(run, &rep));
  cr_assert_eq(rep.n_completed, 1u + (uint32_t)j.n);
  lw_handle_release(run);
  cr_assert_eq(lw_handle_wait(late_run, LW_WAIT_FOREVER), LW_FAILED_PRECONDITION);
  lw_handle_release(late_run);

  // Once unregistered, the handle is unknown; the other function works on its own.
  late.submit_status = LW_OK;
  cr_assert_neq(lw_worker_run(w, sub_queue_orch, &late, &rep), LW_OK);
  cr_assert_eq(late.submit_status, LW_NOT_FOUND, "got %s: %s",
               lw_status_name(late.submit_status), late.message);
  sub_queue_job_t b = {.s = s, .n = 4, .writer = other};
  LW_ASSERT_OK(lw_worker_run(w, sub_queue_orch, &b, NULL));
  for (int i = 0; i < b.n; ++i) cr_assert_eq(s->out[i], 222);
  // The async form refuses sub callables and says why.
  lw_handle_t *h = NULL;
  cr_assert_eq(lw_worker_unregister_async(w, other, &h), LW_INVALID_ARGUMENT);
  cr_assert(strstr(lw_last_error()->message, "chip callables only"), "message: %s",
            lw_last_error()->message);
  cr_assert_null(h);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Chip callables: a deferred unregister whose tasks never dispatch (their run was cancelled)
// is still posted and finishes.

typedef struct chip_job {
  lw_callable_handle_t gate, rec;
  _Atomic uint32_t *gate_word, *entered;
  int64_t *log;  // 64 entries
  uint8_t *dep;  // 64-byte dependency carrier
  _Atomic uint32_t submitted;
} chip_job_t;

static lw_status_t chip_queue_orch(lw_orch_t *o, void *user) {
  chip_job_t *j = user;
  LW_RETURN_IF_ERROR(lw_test_submit_gate(o, j->gate, j->gate_word, j->entered, j->dep, 0));
  for (int i = 0; i < 3; ++i) {
    // INPUT of the gate task's output: pending (never posted) until the gate task finished.
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, 64 * sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->dep, 64, LW_TAG_INPUT));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)i));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->rec, &a, NULL, 0));
  }
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

// A worker with one chip where a gate runs and three record tasks wait for its output (so
// they pin the record callable without being posted), and an unregister of record that is
// therefore deferred.
static lw_handle_t *start_deferred_unregister(chip_job_t *j, lw_handle_t **unreg) {
  make_worker(1, 0);
  uint8_t *mem = lw_worker_alloc(w, 4096);
  cr_assert_not_null(mem);
  memset(mem, 0, 4096);
  *j = (chip_job_t){.gate = wreg("gate"), .rec = wreg("record"),
                    .gate_word = (_Atomic uint32_t *)mem, .entered = (_Atomic uint32_t *)(mem + 64),
                    .log = (int64_t *)(mem + 1024), .dep = mem + 128};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, chip_queue_orch, j, &run));
  lw_test_wait_nonzero(&j->submitted);
  lw_test_wait_nonzero(j->entered);
  LW_ASSERT_OK(lw_worker_unregister_async(w, j->rec, unreg));
  return run;
}

Test(callables, chip_unregister_deferred_behind_tasks_that_never_dispatch_still_finishes,
     .timeout = 60) {
  chip_job_t j;
  lw_handle_t *unreg = NULL;
  lw_handle_t *run = start_deferred_unregister(&j, &unreg);
  // The three record tasks pin the callable; cancelling the run skips them undispatched.
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  LW_ASSERT_OK(lw_handle_wait(unreg, LW_WAIT_FOREVER));
  cr_assert_eq(j.log[0], 0, "a record task ran after its run was cancelled");
  cr_assert_eq(wc_state(j.rec), LW_WC_FREE);
  lw_handle_release(unreg);
  lw_handle_release(run);
  destroy_and_check();
}

// A register of the same image while an unregister of it waits for queued tasks (they wait
// for the gate's output, so none is posted and the chip child still has the callable live) is
// refused by the worker, as the chip refuses it once the unregister reached it: the answer no
// longer depends on whether the scheduler posted the unregister yet. After the free, the
// image registers again.
Test(callables, same_image_register_while_its_unregister_is_deferred_is_refused,
     .timeout = 60) {
  chip_job_t j;
  lw_handle_t *unreg = NULL;
  lw_handle_t *run = start_deferred_unregister(&j, &unreg);
  cr_assert_eq(wc_state(j.rec), LW_WC_UNREGISTERING);
  lw_callable_t same = lw_test_kernel("record");
  lw_callable_handle_t dup = {0};
  lw_status_t st = lw_worker_register(w, &same, &dup);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "%s: %s", lw_status_name(st),
               lw_last_error()->message);
  cr_assert(strstr(lw_last_error()->message, "pending unregister"), "%s",
            lw_last_error()->message);
  cr_assert_eq(dup.id, 0);
  atomic_store(j.gate_word, 1);  // the gate finishes; the record tasks run, then the free
  LW_ASSERT_OK(lw_handle_wait(run, LW_WAIT_FOREVER));
  LW_ASSERT_OK(lw_handle_wait(unreg, LW_WAIT_FOREVER));
  cr_assert_eq(j.log[0], 3, "the tasks accepted before the unregister ran");
  LW_ASSERT_OK(lw_worker_register(w, &same, &dup));
  cr_assert_neq(dup.id, j.rec.id);
  lw_callable_free_loaded(&same);
  lw_handle_release(unreg);
  lw_handle_release(run);
  destroy_and_check();
}

// A deferred chip unregister whose tasks are dropped while the chip is being respawned: it
// must not post the dead child's local id to the new child; the new child ends up without the
// callable either way, and the unregister finishes without waiting for the replay.

typedef struct gate_and_g_job {
  lw_callable_handle_t gate, g;
  uint8_t *mem;
} gate_and_g_job_t;

// One task of each callable on chip 0.
static lw_status_t gate_and_g_orch(lw_orch_t *o, void *user) {
  gate_and_g_job_t *k = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, k->mem, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, k->gate, &a, NULL, 0));
  lw_args_init(&a);
  return lw_orch_submit_next_level(o, k->g, &a, NULL, 0);
}

typedef struct respawn_job {
  lw_callable_handle_t gate, rec;
  uint8_t *mem;  // gate word at 0, entered at 64, dep at 128, log at 1024
  _Atomic uint32_t submitted;
} respawn_job_t;

static lw_status_t respawn_orch(lw_orch_t *o, void *user) {
  respawn_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->mem, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->mem + 64, 4, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->mem + 128, 64, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->gate, &a, NULL, 1));  // held on chip 1
  for (int i = 0; i < 3; ++i) {
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->mem + 1024, 64 * sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->mem + 128, 64, LW_TAG_INPUT));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, (uint64_t)i));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->rec, &a, NULL, 0));  // for chip 0
  }
  atomic_store(&j->submitted, 1);
  return LW_OK;
}

Test(callables, deferred_unregister_started_while_its_chip_is_respawned_finishes_cleanly,
     .timeout = 60) {
  make_worker(2, 0);
  char path[96];
  lw_callable_t held;
  lw_callable_handle_t g = register_replay_gate("replay", path, sizeof(path), &held);
  uint8_t *mem = lw_worker_alloc(w, 4096);
  cr_assert_not_null(mem);
  memset(mem, 0, 4096);
  respawn_job_t j = {.gate = wreg("gate"), .rec = wreg("record"), .mem = mem};
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_worker_run_async(w, respawn_orch, &j, &run));
  lw_test_wait_nonzero(&j.submitted);
  lw_test_wait_nonzero((_Atomic uint32_t *)(mem + 64));
  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_worker_unregister_async(w, j.rec, &unreg));  // deferred: 3 tasks pin it

  // Chip 0 dies; its new child is READY and stuck replaying the first callable.
  unlink(path);
  lw_endpoint_t *ep = &w->eps[0];
  pid_t old = atomic_load(&ep->pid);
  cr_assert_eq(kill(old, SIGKILL), 0);
  wait_replaying(ep, old);
  // The record tasks are dropped undispatched: the unregister is posted now.
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_status_t st = lw_handle_wait(unreg, LW_WAIT_FOREVER);
  cr_assert_eq(st, LW_OK, "%s: %s", lw_status_name(st), lw_last_error()->message);
  cr_assert_eq(wc_state(j.rec), LW_WC_FREE);
  lw_handle_release(unreg);
  lw_handle_release(run);

  // Let the replay finish; the chip works again with what is still registered.
  open_gate_file(path);
  wait_respawned(ep);
  memset(mem, 0, 4096);
  atomic_store((_Atomic uint32_t *)mem, 1u);  // gate open: the gate task returns at once
  gate_and_g_job_t k = {j.gate, g, mem};
  LW_ASSERT_OK(lw_worker_run(w, gate_and_g_orch, &k, NULL));
  LW_ASSERT_OK(lw_worker_unregister(w, g));
  lw_callable_free_loaded(&held);
  unlink(path);
  destroy_and_check();
}

// A deferred unregister whose callable's last pin goes while its chip is being respawned is due:
// the replay does not give the callable to the new child (no task of it is left to run there),
// and the unregister is queued for its post once. (The replay used to pin it, give it to the new
// child and queue the unregister a second time when it dropped that pin: the queue then linked
// the op to itself, and the scheduler posted it for ever; or, taken between the two, the slot
// was freed under the replay's pin.)
Test(callables, a_due_unregister_is_not_replayed_into_a_respawned_chip_nor_queued_twice,
     .timeout = 60) {
  make_worker(1, 0);
  char path[96];
  lw_callable_t held;
  lw_callable_handle_t g = register_replay_gate("due", path, sizeof(path), &held);
  // k and l come after the gate in the table, in this order.
  lw_callable_handle_t k = wreg("record");
  lw_callable_handle_t l = wreg("gate");
  uint32_t wg = (uint32_t)(g.id & 0xffffffffu) - 1, wk = (uint32_t)(k.id & 0xffffffffu) - 1,
           wl = (uint32_t)(l.id & 0xffffffffu) - 1;
  cr_assert(wg < wk && wk < wl, "table slots %u %u %u", wg, wk, wl);
  // A pin of k the test holds, as a queued task would: k's unregister is deferred.
  pthread_mutex_lock(&w->calls.mu);
  w->calls.table[wk].pins++;
  pthread_mutex_unlock(&w->calls.mu);
  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_worker_unregister_async(w, k, &unreg));
  cr_assert_eq(wc_state(k), LW_WC_UNREGISTERING);

  // Chip 0 dies; its new child is READY and stuck replaying g.
  unlink(path);
  lw_endpoint_t *ep = &w->eps[0];
  pid_t old = atomic_load(&ep->pid);
  cr_assert_eq(kill(old, SIGKILL), 0);
  wait_replaying(ep, old);
  // From here no pass runs (the test holds the DAG owner's token), so nothing takes the due
  // unregister off its queue. k's last pin goes: the unregister is due.
  lw__sched_pass_lock(&w->sched);
  pthread_mutex_lock(&w->calls.mu);
  uint64_t l_gen = w->calls.table[wl].gen[0];
  uint64_t k_gen = w->calls.table[wk].gen[0];
  lw__wc_unpin(&w->calls, wk);
  pthread_mutex_unlock(&w->calls.mu);
  // The replay goes on, past k, to l: l's record names the new child once it has it.
  open_gate_file(path);
  bool past_l = false;
  while (!past_l) {
    pthread_mutex_lock(&w->calls.mu);
    past_l = w->calls.table[wl].gen[0] != l_gen;
    pthread_mutex_unlock(&w->calls.mu);
    if (!past_l) lw_test_sleep_us(100);
  }
  pthread_mutex_lock(&w->calls.mu);
  lw_wop_t *due = atomic_load(&w->calls.due_unregisters);
  bool once = due != NULL && due->wc == wk && due->next_done == NULL;
  uint32_t pins = w->calls.table[wk].pins;
  bool k_replayed = w->calls.table[wk].gen[0] != k_gen;
  pthread_mutex_unlock(&w->calls.mu);
  lw__sched_pass_unlock(&w->sched);
  cr_assert(once, "the due unregister is not queued exactly once");
  cr_assert_eq(pins, 0u, "the replay left %u pins on k", pins);
  cr_assert_not(k_replayed, "the new child was given k, whose unregister was due");

  // The unregister is posted and ends; the chip takes work again with g and l.
  lw_status_t st = lw_handle_wait(unreg, LW_WAIT_FOREVER);
  cr_assert_eq(st, LW_OK, "%s: %s", lw_status_name(st), lw_last_error()->message);
  lw_handle_release(unreg);
  cr_assert_eq(wc_state(k), LW_WC_FREE);
  wait_respawned(ep);
  LW_ASSERT_OK(lw_worker_unregister(w, l));
  LW_ASSERT_OK(lw_worker_unregister(w, g));
  lw_callable_free_loaded(&held);
  unlink(path);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// More than 64 ops completing at once: none is dropped.

Test(callables, hundred_registers_outstanding_on_a_chip_that_dies_each_finish_once,
     .timeout = 60) {
  make_worker_queue(1, 0, 256);  // the chip queues all of them on its register lane
  char path[96];
  gate_path(path, sizeof(path), "bulk");
  lw_callable_t c = prepare_gate_kernel(path);
  enum { N = 100 };
  lw_handle_t *h[N];
  // The first register's prepare hook holds the chip's register lane: all N stay unanswered.
  for (int i = 0; i < N; ++i) LW_ASSERT_OK(lw_worker_register_async(w, &c, &h[i]));
  pid_t pid = atomic_load(&w->eps[0].pid);
  cr_assert_gt(pid, 0);
  cr_assert_eq(kill(pid, SIGKILL), 0);
  for (int i = 0; i < N; ++i) {
    lw_status_t st = lw_handle_wait(h[i], LW_WAIT_FOREVER);
    cr_assert_eq(st, LW_CHILD_EXITED, "register %d: %s: %s", i, lw_status_name(st),
                 lw_last_error()->message);
    lw_handle_release(h[i]);
  }
  pthread_mutex_lock(&w->calls.mu);
  uint32_t live_ops = w->calls.live_ops;
  bool ops_left = w->calls.ops != NULL;
  pthread_mutex_unlock(&w->calls.mu);
  cr_assert_eq(live_ops, 0u);
  cr_assert_not(ops_left);
  // The respawned chip takes registers again.
  wait_respawned(&w->eps[0]);
  open_gate_file(path);
  lw_callable_handle_t ok;
  LW_ASSERT_OK(lw_worker_register(w, &c, &ok));
  LW_ASSERT_OK(lw_worker_unregister(w, ok));
  lw_callable_free_loaded(&c);
  unlink(path);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Concurrent register_sub: every sub child gets the same functions in the same order.

#define PUT_FN(k)                                          \
  static lw_status_t put_##k(const lw_kernel_args_t *a) {  \
    *(int64_t *)a->tensor[0].data = 1000 + (k);            \
    return LW_OK;                                          \
  }
PUT_FN(0) PUT_FN(1) PUT_FN(2) PUT_FN(3) PUT_FN(4) PUT_FN(5) PUT_FN(6) PUT_FN(7)
PUT_FN(8) PUT_FN(9) PUT_FN(10) PUT_FN(11) PUT_FN(12) PUT_FN(13) PUT_FN(14) PUT_FN(15)
PUT_FN(16) PUT_FN(17) PUT_FN(18) PUT_FN(19) PUT_FN(20) PUT_FN(21) PUT_FN(22) PUT_FN(23)
PUT_FN(24) PUT_FN(25) PUT_FN(26) PUT_FN(27) PUT_FN(28) PUT_FN(29) PUT_FN(30) PUT_FN(31)

static const lw_sub_fn put_fns[32] = {
    put_0,  put_1,  put_2,  put_3,  put_4,  put_5,  put_6,  put_7,  put_8,  put_9,  put_10,
    put_11, put_12, put_13, put_14, put_15, put_16, put_17, put_18, put_19, put_20, put_21,
    put_22, put_23, put_24, put_25, put_26, put_27, put_28, put_29, put_30, put_31};

enum { REG_THREADS = 8, REG_ROUNDS = 4 };

typedef struct reg_thread {
  int id;
  pthread_barrier_t *barrier;
  lw_callable_handle_t h[REG_ROUNDS];
  lw_status_t st[REG_ROUNDS];
  char message[REG_ROUNDS][LW_ERROR_MESSAGE_BYTES];
} reg_thread_t;

static void *register_sub_thread(void *arg) {
  reg_thread_t *t = arg;
  for (int r = 0; r < REG_ROUNDS; ++r) {
    pthread_barrier_wait(t->barrier);
    int k = r * REG_THREADS + t->id;
    char name[32];
    snprintf(name, sizeof(name), "put_%d", k);
    t->st[r] = lw_worker_register_sub(w, put_fns[k], name, &t->h[r]);
    snprintf(t->message[r], sizeof(t->message[r]), "%s", lw_last_error()->message);
  }
  return NULL;
}

typedef struct put_job {
  lw_callable_handle_t h;
  int64_t *out;  // 24 slots
} put_job_t;

static lw_status_t put_orch(lw_orch_t *o, void *user) {
  put_job_t *j = user;
  for (int i = 0; i < 24; ++i) {
    lw_args_t a;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, &j->out[i], sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_orch_submit_sub(o, j->h, &a));
  }
  return LW_OK;
}

Test(callables, concurrent_register_sub_keeps_every_sub_child_in_step, .timeout = 120) {
  make_worker(1, 3);
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, REG_THREADS);
  reg_thread_t t[REG_THREADS];
  pthread_t th[REG_THREADS];
  for (int i = 0; i < REG_THREADS; ++i) {
    t[i] = (reg_thread_t){.id = i, .barrier = &barrier};
    cr_assert_eq(pthread_create(&th[i], NULL, register_sub_thread, &t[i]), 0);
  }
  for (int i = 0; i < REG_THREADS; ++i) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < REG_THREADS; ++i) {
    for (int r = 0; r < REG_ROUNDS; ++r) {
      cr_assert_eq(t[i].st[r], LW_OK, "thread %d round %d: %s: %s", i, r,
                   lw_status_name(t[i].st[r]), t[i].message[r]);
    }
  }
  int64_t *out = lw_worker_alloc(w, 24 * sizeof(int64_t));
  cr_assert_not_null(out);
  // Every function, run on whichever sub children are idle: each task runs its own function.
  for (int i = 0; i < REG_THREADS; ++i) {
    for (int r = 0; r < REG_ROUNDS; ++r) {
      int k = r * REG_THREADS + i;
      for (int s = 0; s < 24; ++s) out[s] = -1;
      put_job_t j = {t[i].h[r], out};
      LW_ASSERT_OK(lw_worker_run(w, put_orch, &j, NULL));
      for (int s = 0; s < 24; ++s) {
        cr_assert_eq(out[s], 1000 + k, "put_%d task %d ran put_%lld", k, s,
                     (long long)(out[s] - 1000));
      }
    }
  }
  destroy_and_check();
}

// A sub child that is down when a sub function is registered: the live ones take it, and the
// tables stay in step for every later registration.
static void register_sub_with_a_dead_sub_child(bool respawn) {
  fds_before = lw_test_fd_count();
  children_before = lw_test_child_count();
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.n_subs = 2;
  cfg.arena_bytes = 64ull << 20;
  cfg.respawn = respawn;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
  lw_endpoint_t *dead = &w->eps[cfg.n_chips + 1];
  cr_assert_eq(kill(atomic_load(&dead->pid), SIGKILL), 0);
  // Respawn off: it is gone for good. Respawn on: registering starts at once, while the child
  // is found dead, respawned and replayed, whichever step it has reached.
  while (!respawn && atomic_load(&dead->state) != LW_EP_DEAD) lw_test_sleep_us(100);
  lw_callable_handle_t h[3];
  for (int k = 0; k < 3; ++k) LW_ASSERT_OK(lw_worker_register_sub(w, put_fns[k], "put", &h[k]));
  // Tasks only once the child is back (or known dead): a task posted to a child that died but
  // was not yet noticed would fail CHILD_EXITED, which is not what this test is about.
  if (respawn) wait_respawned(dead);
  int64_t *out = lw_worker_alloc(w, 24 * sizeof(int64_t));
  cr_assert_not_null(out);
  for (int k = 0; k < 3; ++k) {
    for (int s = 0; s < 24; ++s) out[s] = -1;
    put_job_t j = {h[k], out};
    LW_ASSERT_OK(lw_worker_run(w, put_orch, &j, NULL));
    for (int s = 0; s < 24; ++s) {
      cr_assert_eq(out[s], 1000 + k, "put_%d task %d: %lld", k, s, (long long)out[s]);
    }
  }
  destroy_and_check();
}

Test(callables, register_sub_with_a_sub_child_down_for_good_keeps_the_others_in_step,
     .timeout = 60) {
  register_sub_with_a_dead_sub_child(false);
}

Test(callables, register_sub_while_a_sub_child_is_respawned_keeps_every_table_in_step,
     .timeout = 60) {
  register_sub_with_a_dead_sub_child(true);
}

// A sub task names its function by index and tag: a sub child refuses a task whose index
// names another function (here forced by pointing the parent's entry at the wrong index),
// instead of running that function.
Test(callables, sub_child_refuses_a_task_whose_function_tag_does_not_match, .timeout = 60) {
  make_worker(1, 1);
  lw_callable_handle_t a, b;
  LW_ASSERT_OK(lw_worker_register_sub(w, put_fns[0], "put_0", &a));
  LW_ASSERT_OK(lw_worker_register_sub(w, put_fns[1], "put_1", &b));
  pthread_mutex_lock(&w->calls.mu);
  lw_wcallable_t *wa = &w->calls.table[(a.id & 0xffffffffu) - 1];
  lw_wcallable_t *wb = &w->calls.table[(b.id & 0xffffffffu) - 1];
  wb->sub_index = wa->sub_index;
  pthread_mutex_unlock(&w->calls.mu);
  int64_t *out = lw_worker_alloc(w, 24 * sizeof(int64_t));
  cr_assert_not_null(out);
  for (int s = 0; s < 24; ++s) out[s] = -1;
  put_job_t j = {b, out};
  lw_run_report_t rep;
  cr_assert_neq(lw_worker_run(w, put_orch, &j, &rep), LW_OK);
  cr_assert_eq(rep.error.code, LW_FAILED_PRECONDITION, "got %s: %s",
               lw_status_name(rep.error.code), rep.error.message);
  cr_assert(strstr(rep.error.message, "refused"), "message: %s", rep.error.message);
  for (int s = 0; s < 24; ++s) {
    cr_assert_eq(out[s], -1, "task %d ran put_%lld", s, (long long)(out[s] - 1000));
  }
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Late reports for ops that already finished never complete a later op, even one that reuses
// a finished op's memory.

Test(callables, late_reports_for_finished_ops_never_complete_a_later_op, .timeout = 60) {
  make_worker(1, 0);
  char path[96];
  gate_path(path, sizeof(path), "late");
  lw_callable_t held = prepare_gate_kernel(path);
  lw_callable_t k = lw_test_kernel("vector_add");
  // Register/unregister cycles: every op is freed once it finished, so the later op is likely
  // to be allocated where one of them was. Each control id the chip saw is kept (the control
  // frame keeps the last one after the ack).
  enum { CYCLES = 16 };
  uint64_t stale[2 * CYCLES];
  for (int i = 0; i < CYCLES; ++i) {
    lw_callable_handle_t h;
    LW_ASSERT_OK(lw_worker_register(w, &k, &h));
    stale[2 * i] = w->eps[0].mb->control.control_id;
    LW_ASSERT_OK(lw_worker_unregister(w, h));
    stale[2 * i + 1] = w->eps[0].mb->control.control_id;
  }
  lw_handle_t *b = NULL;
  LW_ASSERT_OK(lw_worker_register_async(w, &held, &b));  // held on the register lane
  // Late failure reports for all of them arrive, as a child would push them.
  lw_mailbox_t *mb = w->eps[0].mb;
  for (int i = 0; i < 2 * CYCLES; ++i) {
    lw_mb_completion_t c;
    memset(&c, 0, sizeof(c));
    c.kind = LW_MB_COMPLETION_CONTROL;
    c.control_id = stale[i];
    c.status = LW_INTERNAL;
    lw__error_set(&c.error, LW_INTERNAL, 0, 0, "a late report for an op that already finished");
    bool wake = false;
    lw_error_t err;
    LW_ASSERT_OK(lw__mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err));
  }
  lw__worker_kick(w);
  while (atomic_load(&mb->ring_tail.value) != atomic_load(&mb->ring_head.value)) {
    lw_test_sleep_us(50);
  }
  open_gate_file(path);
  lw_status_t st = lw_handle_wait(b, LW_WAIT_FOREVER);
  cr_assert_eq(st, LW_OK, "the later register finished %s: %s", lw_status_name(st),
               lw_last_error()->message);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_handle_callable(b, &h));
  LW_ASSERT_OK(lw_worker_unregister(w, h));
  lw_handle_release(b);
  lw_callable_free_loaded(&held);
  lw_callable_free_loaded(&k);
  unlink(path);
  destroy_and_check();
}

// ---------------------------------------------------------------------------------------------
// Pin credits (lw_pin_credit_t): an orch function's submits take pins ahead, and give back
// what is left.

static uint32_t pins_of(lw_callable_handle_t h) {
  pthread_mutex_lock(&w->calls.mu);
  lw_wcallable_t *c = &w->calls.table[(h.id & 0xffffffffu) - 1];
  uint32_t n = c->id == h.id ? c->pins : 0;
  pthread_mutex_unlock(&w->calls.mu);
  return n;
}

typedef struct credit_job {
  lw_callable_handle_t h[6];
  int n_callables;
  int rounds;
  lw_handle_t *unregister;     // unregister_async of h[0] after the first round, when set
  bool unregister_midway;
  lw_status_t late_status;     // the submit of h[0] after that unregister
  char late_message[256];
} credit_job_t;

static lw_status_t credit_orch(lw_orch_t *o, void *user) {
  credit_job_t *j = user;
  for (int r = 0; r < j->rounds; ++r) {
    for (int c = 0; c < j->n_callables; ++c) {
      LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->h[c], NULL, NULL, LW_ANY_CHIP));
    }
    if (r < 2 && j->unregister_midway) continue;  // three submits: the later ones take credit
    if (r == 2 && j->unregister_midway) {
      LW_RETURN_IF_ERROR(lw_worker_unregister_async(w, j->h[0], &j->unregister));
      j->late_status = lw_orch_submit_next_level(o, j->h[0], NULL, NULL, LW_ANY_CHIP);
      snprintf(j->late_message, sizeof(j->late_message), "%s", lw_last_error()->message);
      return LW_OK;
    }
  }
  return LW_OK;
}

Test(callables, a_submit_after_an_unregister_began_in_the_same_orch_function_fails_pending,
     .timeout = 60) {
  make_worker(2, 0);
  credit_job_t j = {.n_callables = 1, .rounds = 4, .unregister_midway = true};
  j.h[0] = wreg("noop");
  // The second submit pinned noop for more tasks than it needed (its credit); the unregister
  // must take that credit back, or the next submit would still find pins to take.
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, credit_orch, &j, &rep));
  // Refused either way: pending unregister while the unregister waits, or an unknown handle
  // once it finished (with nothing pinning noop, it may finish before the next submit).
  bool pending = j.late_status == LW_FAILED_PRECONDITION &&
                 strstr(j.late_message, "pending unregister") != NULL;
  bool gone = j.late_status == LW_NOT_FOUND && strstr(j.late_message, "unknown") != NULL;
  cr_assert(pending || gone, "the submit after the unregister got %s: %s",
            lw_status_name(j.late_status), j.late_message);
  cr_assert_eq(rep.n_completed, 3u, "the tasks submitted before the unregister ran");
  cr_assert_not_null(j.unregister);
  LW_ASSERT_OK(lw_handle_wait(j.unregister, LW_WAIT_FOREVER));
  lw_handle_release(j.unregister);
  destroy_and_check();
}

Test(callables, credits_of_more_callables_than_entries_all_go_back_when_the_run_ends,
     .timeout = 60) {
  make_worker(2, 0);
  credit_job_t j = {.n_callables = 6, .rounds = 40};
  // Six registrations of the same kernel under different names: six callables, more than the
  // LW_PIN_CREDITS entries, so refills empty entries that still hold pins.
  for (int c = 0; c < j.n_callables; ++c) {
    lw_callable_t k = lw_test_kernel("noop");
    char name[32];
    snprintf(name, sizeof(name), "noop_%d", c);
    free((void *)k.name);
    k.name = strdup(name);
    LW_ASSERT_OK(lw_worker_register(w, &k, &j.h[c]));
    lw_callable_free_loaded(&k);
  }
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, credit_orch, &j, &rep));
  cr_assert_eq(rep.n_completed, (uint32_t)(j.n_callables * j.rounds));
  for (int c = 0; c < j.n_callables; ++c) {
    cr_assert_eq(pins_of(j.h[c]), 0u, "callable %d keeps %u pins after its run", c,
                 pins_of(j.h[c]));
  }
  // And so each one unregisters (a pin left behind would defer it forever).
  for (int c = 0; c < j.n_callables; ++c) LW_ASSERT_OK(lw_worker_unregister(w, j.h[c]));
  destroy_and_check();
}
