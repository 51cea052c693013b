// tests/faults/test_stale_ids.c — a child-local callable id is only ever posted to the child
// that gave it. Respawned children hand out the same ids in the same order, so an id of a dead
// child posted to its successor names nothing there, or another callable; and a child keeps
// no callable the worker dropped. The interleavings are driven by prepare_gate and
// prepare_count callables (their prepare hook holds a chip's register lane, and so a replay,
// until a file exists; prepare_count also counts fresh loads), SIGSTOP and SIGKILL at known
// points: no timing.
#include <unistd.h>

#include "fault_util.h"

static fx_t f;

static void gate_path(char *buf, size_t bytes, const char *what) {
  snprintf(buf, bytes, "/tmp/lw-stale-ids-%d-%s", (int)getpid(), what);
  unlink(buf);
}

static void open_gate_file(const char *path) {
  FILE *file = fopen(path, "w");
  cr_assert_not_null(file, "cannot create %s", path);
  fclose(file);
}

static const uint8_t kScalarParam[1] = {LW_PARAM_SCALAR};

// The prepare_gate kernel, named so that its prepare hook waits for `path` to exist. A
// different signature (with_param) gives a different digest, so the chip children load two
// such callables separately instead of sharing one slot.
static lw_callable_t prepare_gate_kernel(const char *path, bool with_param) {
  lw_callable_t c = lw_test_kernel("prepare_gate");
  free((void *)c.name);
  size_t n = strlen("prepare_gate:") + strlen(path) + 1;
  char *name = malloc(n);
  cr_assert_not_null(name);
  snprintf(name, n, "prepare_gate:%s", path);
  c.name = name;
  if (with_param) {
    c.n_params = 1;
    c.param_dirs = kScalarParam;
  }
  return c;
}

// Waits until chip's endpoint runs a child other than `old` that is READY but does not take
// work yet: it is taking its replay.
static void wait_replaying(uint32_t chip, pid_t old) {
  lw_endpoint_t *ep = &f.w->eps[chip];
  for (;;) {
    lw__sched_pass_lock(&f.w->sched);
    bool replaying = atomic_load(&ep->pid) != old && atomic_load(&ep->pid) > 0 &&
                     atomic_load(&ep->state) == LW_EP_READY && !ep->accepting;
    lw__sched_pass_unlock(&f.w->sched);
    if (replaying) return;
    lw_test_sleep_us(100);
  }
}

// Whether chip's report on the one pending register op is in (under the callables' lock).
static bool register_reported_by(uint32_t chip) {
  bool in = false;
  pthread_mutex_lock(&f.w->calls.mu);
  for (lw_wop_t *op = f.w->calls.ops; op; op = op->next_pending) {
    if (op->kind == LW_WOP_REGISTER && op->reported[chip]) in = true;
  }
  pthread_mutex_unlock(&f.w->calls.mu);
  return in;
}

// Waits until no register, unregister or rollback is in flight.
static void wait_no_ops(void) {
  for (;;) {
    pthread_mutex_lock(&f.w->calls.mu);
    bool idle = f.w->calls.live_ops == 0;
    pthread_mutex_unlock(&f.w->calls.mu);
    if (idle) return;
    lw_test_sleep_us(200);
  }
}

typedef struct reg_thread {
  lw_callable_t *c;
  lw_status_t st;
  char message[LW_ERROR_MESSAGE_BYTES];
} reg_thread_t;

static void *register_in_thread(void *arg) {
  reg_thread_t *r = arg;
  lw_callable_handle_t h;
  r->st = lw_worker_register(f.w, r->c, &h);
  snprintf(r->message, sizeof(r->message), "%s", lw_last_error()->message);
  return NULL;
}

// The reported bug: `register; unregister` failed NOT_FOUND from a chip child after respawns.
// Chip 0's new child took a register while it was still taking its replay, and died before the
// replay finished; the register then failed on chip 1 and its rollback named, to chip 0's next
// child, the local id the dead child had given. Both children replayed the same callables in
// the same order, so that id was the second callable's in the new child: the rollback took it
// away there, and its own unregister later found nothing.
Test(stale_ids, a_rollback_never_names_a_local_id_of_a_child_that_died_in_its_replay,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 2, 0);
  cfg.liveness_timeout_ns = 0;  // chip 1 is stopped on purpose below
  fx_create(&f, &cfg);
  char path_a[96], path_b[96];
  gate_path(path_a, sizeof(path_a), "a");
  gate_path(path_b, sizeof(path_b), "b");
  open_gate_file(path_a);
  open_gate_file(path_b);
  lw_callable_t ga = prepare_gate_kernel(path_a, false);
  lw_callable_t gb = prepare_gate_kernel(path_b, true);
  lw_callable_handle_t ha, hb;
  LW_ASSERT_OK(lw_worker_register(f.w, &ga, &ha));  // replayed first
  LW_ASSERT_OK(lw_worker_register(f.w, &gb, &hb));  // replayed second

  // Chip 0's next child is held in its replay of ga.
  unlink(path_a);
  pid_t first = fx_pid(&f, 0);
  cr_assert_eq(kill(first, SIGKILL), 0);
  wait_replaying(0, first);
  // Chip 1 answers no control: the register below waits there after chip 0 was handled.
  pid_t chip1 = fx_pid(&f, 1);
  cr_assert_eq(lw_test_stop_process(chip1), 0);
  lw_callable_t noop = lw_test_kernel("noop");
  reg_thread_t r = {&noop, LW_OK, ""};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, register_in_thread, &r), 0);
  // The register posts to the chips in order: once its request waits in chip 1's control
  // frame, chip 0 was dealt with.
  while (atomic_load(&f.w->eps[1].mb->control.state) != LW_MB_CONTROL_REQUEST) {
    lw_test_sleep_us(200);
  }
  // Let ga's replay finish and hold the replay at gb instead: a register that chip 0's child
  // took meanwhile was queued on its register lane before gb, so it finishes there first.
  unlink(path_b);
  open_gate_file(path_a);
  while (!register_reported_by(0)) lw_test_sleep_us(200);
  // The child taking the replay dies before it finished (gb still waits for its file).
  pid_t second = fx_pid(&f, 0);
  cr_assert_eq(kill(second, SIGKILL), 0);
  while (fx_pid(&f, 0) == second || fx_pid(&f, 0) <= 0) lw_test_sleep_us(200);
  open_gate_file(path_b);
  fx_wait_respawned(&f, 0, 1);  // the third child: ga and gb replayed, takes work

  // The register fails on chip 1, and its rollback runs.
  cr_assert_eq(kill(chip1, SIGKILL), 0);
  pthread_join(t, NULL);
  cr_assert_eq(r.st, LW_CHILD_EXITED, "got %s: %s", lw_status_name(r.st), r.message);
  wait_no_ops();
  fx_wait_respawned(&f, 1, 1);

  // Every callable is still where the parent thinks it is.
  lw_status_t st = lw_worker_unregister(f.w, hb);
  cr_assert_eq(st, LW_OK, "unregister of gb: %s: %s", lw_status_name(st),
               lw_last_error()->message);
  st = lw_worker_unregister(f.w, ha);
  cr_assert_eq(st, LW_OK, "unregister of ga: %s: %s", lw_status_name(st),
               lw_last_error()->message);
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(f.w, &noop, &h));
  LW_ASSERT_OK(lw_worker_unregister(f.w, h));
  unlink(path_a);
  unlink(path_b);
  lw_callable_free_loaded(&ga);
  lw_callable_free_loaded(&gb);
  lw_callable_free_loaded(&noop);
  fx_destroy(&f);
}

// A child taking its replay is told nothing else: a register that finds its chip there fails
// at once ("being respawned; retry later"), as for a chip that is down. Posted to that child,
// it would wait for a report that never comes if the child died before its replay finished
// (only the supervisor sees that death), and a report that did come would carry a local id no
// later child has.
Test(stale_ids, a_register_while_a_chip_takes_its_replay_fails_at_once_naming_the_chip,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);  // the register waits on no other chip
  fx_create(&f, &cfg);
  char path[96];
  gate_path(path, sizeof(path), "replay");
  open_gate_file(path);
  lw_callable_t held = prepare_gate_kernel(path, false);
  lw_callable_handle_t g;
  LW_ASSERT_OK(lw_worker_register(f.w, &held, &g));
  unlink(path);
  pid_t first = fx_pid(&f, 0);
  cr_assert_eq(kill(first, SIGKILL), 0);
  wait_replaying(0, first);

  lw_callable_t noop = lw_test_kernel("noop");
  lw_handle_t *reg = NULL;
  LW_ASSERT_OK(lw_worker_register_async(f.w, &noop, &reg));
  // Finished by the time register_async returned: nothing was left waiting on chip 0.
  cr_assert(lw_handle_done(reg), "the register waits on chip 0's child in its replay");
  lw_status_t st = lw_handle_wait(reg, 0);
  cr_assert_eq(st, LW_CHILD_EXITED, "got %s", lw_status_name(st));
  const lw_error_t *e = lw_handle_error(reg);
  ASSERT_MSG_HAS(e->message, "chip 0");
  ASSERT_MSG_HAS(e->message, "being respawned; retry later");
  lw_handle_release(reg);

  // The child in its replay dies too; the next one finishes it and takes work.
  pid_t second = fx_pid(&f, 0);
  cr_assert_eq(kill(second, SIGKILL), 0);
  while (fx_pid(&f, 0) == second || fx_pid(&f, 0) <= 0) lw_test_sleep_us(200);
  open_gate_file(path);
  fx_wait_respawned(&f, 0, 1);
  wait_no_ops();
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(f.w, &noop, &h));
  shared_t *s = fx_shared(&f);
  lw_callable_handle_t vadd = fx_reg(&f, "vector_add");
  fx_run_vadd_ok(&f, vadd, s, 0);
  LW_ASSERT_OK(lw_worker_unregister(f.w, h));
  LW_ASSERT_OK(lw_worker_unregister(f.w, vadd));
  LW_ASSERT_OK(lw_worker_unregister(f.w, g));
  unlink(path);
  lw_callable_free_loaded(&held);
  lw_callable_free_loaded(&noop);
  fx_destroy(&f);
}

// The prepare_count kernel, named so that each fresh load by a chip child appends a byte to
// `count` and then, if `gate` is given, waits for that file. with_param: as for
// prepare_gate_kernel, another digest.
static lw_callable_t prepare_count_kernel(const char *count, const char *gate, bool with_param) {
  lw_callable_t c = lw_test_kernel("prepare_count");
  free((void *)c.name);
  size_t n = strlen("prepare_count:") + strlen(count) + 1 + (gate ? strlen(gate) : 0) + 1;
  char *name = malloc(n);
  cr_assert_not_null(name);
  snprintf(name, n, "prepare_count:%s%s%s", count, gate ? ":" : "", gate ? gate : "");
  c.name = name;
  if (with_param) {
    c.n_params = 1;
    c.param_dirs = kScalarParam;
  }
  return c;
}

// How many times chip children loaded a prepare_count callable afresh.
static long loads(const char *path) {
  FILE *file = fopen(path, "r");
  if (!file) return 0;
  fseek(file, 0, SEEK_END);
  long n = ftell(file);
  fclose(file);
  return n;
}

typedef struct replay_setup {
  char count[96];       // loads of `counted`
  char held_count[96];  // loads of `held`: its replay began
  char gate[96];        // holds `held` while missing
  lw_callable_t counted, held;
  lw_callable_handle_t hc, hg;
} replay_setup_t;

// Registers `counted` and then `held`, kills chip 0, and waits until its new child's replay is
// done with `counted` (the replay asks for `held` only then) and held on `held`.
static void replay_past_counted(replay_setup_t *r) {
  gate_path(r->count, sizeof(r->count), "count");
  gate_path(r->held_count, sizeof(r->held_count), "held-count");
  gate_path(r->gate, sizeof(r->gate), "gate");
  open_gate_file(r->gate);
  r->counted = prepare_count_kernel(r->count, NULL, false);
  r->held = prepare_count_kernel(r->held_count, r->gate, true);
  LW_ASSERT_OK(lw_worker_register(f.w, &r->counted, &r->hc));  // replayed first
  LW_ASSERT_OK(lw_worker_register(f.w, &r->held, &r->hg));     // replayed second
  cr_assert_eq(loads(r->count), 1);
  cr_assert_eq(loads(r->held_count), 1);
  unlink(r->gate);
  pid_t first = fx_pid(&f, 0);
  cr_assert_eq(kill(first, SIGKILL), 0);
  wait_replaying(0, first);
  while (loads(r->held_count) < 2) lw_test_sleep_us(200);
  cr_assert_eq(loads(r->count), 2);
}

static void replay_setup_free(replay_setup_t *r) {
  unlink(r->count);
  unlink(r->held_count);
  unlink(r->gate);
  lw_callable_free_loaded(&r->counted);
  lw_callable_free_loaded(&r->held);
}

// An unregister that starts after the replay gave the new child the callable, but before that
// child takes work, is posted to that child (bound to it): the child keeps no copy of a
// callable the parent dropped. Before, the chip was skipped and the copy stayed loaded in the
// child for its whole life; a later register of the same image found it there.
Test(stale_ids, an_unregister_during_a_replay_that_passed_the_callable_reaches_that_child,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  replay_setup_t r;
  replay_past_counted(&r);

  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_worker_unregister_async(f.w, r.hc, &unreg));
  open_gate_file(r.gate);  // the replay finishes; the child takes work
  lw_status_t st = lw_handle_wait(unreg, LW_WAIT_FOREVER);
  cr_assert_eq(st, LW_OK, "%s: %s", lw_status_name(st), lw_handle_error(unreg)->message);
  lw_handle_release(unreg);
  fx_wait_respawned(&f, 0, 1);

  // Registered again, the image is loaded afresh: the child did not keep the old copy.
  lw_callable_handle_t again;
  LW_ASSERT_OK(lw_worker_register(f.w, &r.counted, &again));
  cr_assert_eq(loads(r.count), 3, "chip 0's child kept the unregistered callable loaded");
  LW_ASSERT_OK(lw_worker_unregister(f.w, again));
  LW_ASSERT_OK(lw_worker_unregister(f.w, r.hg));
  replay_setup_free(&r);
  fx_destroy(&f);
}

// The same unregister, posted to a child that then dies before its replay finished (a death
// only the supervisor sees): it finishes, the chip counting as done, and the next child does
// not get the callable.
Test(stale_ids, an_unregister_posted_to_a_child_that_dies_in_its_replay_finishes,
     .timeout = 60) {
  lw_worker_config_t cfg;
  fx_config(&cfg, 1, 0);
  fx_create(&f, &cfg);
  replay_setup_t r;
  replay_past_counted(&r);

  // Posted by the time unregister_async returns (no task pins the callable); the child
  // answers only once its register lane is free, which the gate prevents.
  lw_handle_t *unreg = NULL;
  LW_ASSERT_OK(lw_worker_unregister_async(f.w, r.hc, &unreg));
  pid_t second = fx_pid(&f, 0);
  cr_assert_eq(kill(second, SIGKILL), 0);
  lw_status_t st = lw_handle_wait(unreg, LW_WAIT_FOREVER);
  cr_assert_eq(st, LW_OK, "%s: %s", lw_status_name(st), lw_handle_error(unreg)->message);
  lw_handle_release(unreg);
  open_gate_file(r.gate);
  fx_wait_respawned(&f, 0, 1);
  cr_assert_eq(loads(r.count), 2, "the next child got the unregistered callable in its replay");

  lw_callable_handle_t again;
  LW_ASSERT_OK(lw_worker_register(f.w, &r.counted, &again));
  cr_assert_eq(loads(r.count), 3);
  LW_ASSERT_OK(lw_worker_unregister(f.w, again));
  LW_ASSERT_OK(lw_worker_unregister(f.w, r.hg));
  replay_setup_free(&r);
  fx_destroy(&f);
}
