// tests/parent/guest_probe.c — an ordinary program that uses lanework, run by test_guest.c to
// check that lanework is a good guest in it (DESIGN §5.1, "A good guest in the host program").
// It uses the public API only, so the same source is built against liblanework.a
// (lw_guest_probe) and liblanework.so (lw_guest_probe_shared). argv[1] picks what it does:
//
//   idle            links lanework, calls lw_version: no child, one thread, no large mapping
//   l2              opens a sim chip in-process, runs a kernel, closes it: the same
//   children [init] a worker with 2 chips and 1 sub, runs, a chip child crash and respawn:
//                   the program never has a child (init: lw_init first thing in main)
//   wait [init]     the same worker: a wait(NULL) loop and waitpid(-1, WNOHANG) say ECHILD
//   system          a SIGCHLD handler that reaps, tasks running on another thread, system()
//                   called many times: every call returns 0
//   sigmask_l3      a traced worker: every thread of lanework's blocks asynchronous signals
//   sigmask_l2      an L2 chip: the same
//   park            a worker with 2 chips and 1 sub; prints READY and waits to be killed
//   destroy         a worker's processes and fds are gone once lw_worker_destroy returns
//
// Findings go to stdout (guest_probe_util.h); the exit status is 0 when there were none. Every
// step runs under an alarm, so a hang ends the probe with a FAIL naming the step.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd_check.h"
#include "lanework/lanework.h"
#include "parent/guest_probe_util.h"

#define STEP_SECONDS 30

// ---------------------------------------------------------------------------------------------
// A worker with record (tests/kernels/record.c) and crash (callables/kernels/crash.c) on its
// chips and one sub function.

typedef struct probe_worker {
  lw_worker_t *w;
  uint32_t n_chips, n_subs;
  lw_callable_handle_t record, crash, sub;
  int64_t *log;      // record's log, 64 entries, in the arena
  int64_t *sub_out;  // what sub_count writes, in the arena
} probe_worker_t;

static lw_status_t sub_count(const lw_kernel_args_t *a) {
  *(int64_t *)a->tensor[0].data += 1;
  return LW_OK;
}

static bool load_and_register(probe_worker_t *p, const char *name, lw_callable_handle_t *out) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s.so", LW_KERNEL_DIR, name);
  lw_callable_t c;
  if (lw_callable_load_file(path, &c) != LW_OK) {
    gp_fail("loading %s: %s", path, lw_last_error()->message);
    return false;
  }
  lw_status_t st = lw_worker_register(p->w, &c, out);
  lw_callable_free_loaded(&c);
  if (st != LW_OK) {
    gp_fail("registering %s: %s: %s", name, lw_status_name(st), lw_last_error()->message);
    return false;
  }
  return true;
}

static bool worker_open(probe_worker_t *p, uint32_t chips, uint32_t subs) {
  memset(p, 0, sizeof(*p));
  p->n_chips = chips;
  p->n_subs = subs;
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = chips;
  cfg.n_subs = subs;
  cfg.arena_bytes = 16ull << 20;
  gp_arm("lw_worker_create", STEP_SECONDS);
  lw_status_t st = lw_worker_create(&cfg, &p->w);
  if (st != LW_OK) {
    gp_fail("lw_worker_create (%u chips, %u subs): %s: %s", chips, subs, lw_status_name(st),
            lw_last_error()->message);
    return false;
  }
  gp_arm("register", STEP_SECONDS);
  if (!load_and_register(p, "record", &p->record)) return false;
  if (!load_and_register(p, "crash", &p->crash)) return false;
  if (subs > 0) {
    st = lw_worker_register_sub(p->w, sub_count, "sub_count", &p->sub);
    if (st != LW_OK) {
      gp_fail("lw_worker_register_sub: %s: %s", lw_status_name(st), lw_last_error()->message);
      return false;
    }
  }
  p->log = lw_worker_alloc(p->w, 64 * sizeof(int64_t));
  p->sub_out = lw_worker_alloc(p->w, 64);
  if (p->log == NULL || p->sub_out == NULL) {
    gp_fail("lw_worker_alloc: %s", lw_last_error()->message);
    return false;
  }
  memset(p->log, 0, 64 * sizeof(int64_t));
  memset(p->sub_out, 0, 64);
  alarm(0);
  return true;
}

static void worker_close(probe_worker_t *p) {
  gp_arm("lw_worker_destroy", STEP_SECONDS);
  lw_worker_destroy(p->w);
  p->w = NULL;
  alarm(0);
}

typedef struct run_job {
  probe_worker_t *p;
  int32_t only_chip;  // -1: record on every chip; else record on this chip only
  bool crash;         // crash on only_chip instead of record
  bool sub;           // and one sub task
} run_job_t;

static lw_status_t probe_orch(lw_orch_t *o, void *user) {
  run_job_t *j = user;
  probe_worker_t *p = j->p;
  lw_args_t a;
  for (uint32_t c = 0; c < p->n_chips; ++c) {
    if (j->only_chip >= 0 && (int32_t)c != j->only_chip) continue;
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->log, 64 * sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 100 + c));
    LW_RETURN_IF_ERROR(
        lw_orch_submit_next_level(o, j->crash ? p->crash : p->record, &a, NULL, (int32_t)c));
  }
  if (j->sub && p->n_subs > 0) {
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, p->sub_out, sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw_orch_submit_sub(o, p->sub, &a));
  }
  return LW_OK;
}

// One run; the log is emptied first (runs of a probe never overlap).
static lw_status_t run_once(probe_worker_t *p, int32_t only_chip, bool crash, bool sub,
                            lw_run_report_t *rep) {
  atomic_store((_Atomic int64_t *)&p->log[0], 0);
  run_job_t j = {p, only_chip, crash, sub};
  return lw_worker_run(p->w, probe_orch, &j, rep);
}

static bool run_ok(probe_worker_t *p, const char *what) {
  gp_arm(what, STEP_SECONDS);
  lw_run_report_t rep;
  lw_status_t st = run_once(p, -1, false, true, &rep);
  alarm(0);
  if (st != LW_OK) {
    gp_fail("%s: the run failed: %s: %s", what, lw_status_name(st), rep.error.message);
    return false;
  }
  return true;
}

// Crashes chip 1's child, then runs on chip 1 until its respawned child answers.
static bool crash_and_respawn(probe_worker_t *p) {
  gp_arm("a run whose kernel crashes its chip child", STEP_SECONDS);
  lw_run_report_t rep;
  lw_status_t st = run_once(p, 1, true, false, &rep);
  if (st == LW_OK) {
    gp_fail("a run of the crash kernel succeeded");
    return false;
  }
  gp_arm("waiting for the crashed chip child's respawn", STEP_SECONDS);
  while ((st = run_once(p, 1, false, false, &rep)) != LW_OK) gp_sleep_ms(20);
  alarm(0);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Modes

static void mode_idle(void) {
  gp_expect_one_thread("at main");
  gp_expect_no_child("at main");
  gp_expect_no_big_mapping("at main");
  const char *v = lw_version();
  if (v == NULL || v[0] == '\0') gp_fail("lw_version returned nothing");
  gp_expect_one_thread("after lw_version");
  gp_expect_no_child("after lw_version");
  gp_expect_no_big_mapping("after lw_version");
}

static bool l2_use(lw_chip_t **out_chip, int64_t *log) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  lw_status_t st = lw_chip_open(&cfg, out_chip);
  if (st != LW_OK) {
    gp_fail("lw_chip_open: %s: %s", lw_status_name(st), lw_last_error()->message);
    return false;
  }
  char path[512];
  snprintf(path, sizeof(path), "%s/record.so", LW_KERNEL_DIR);
  lw_callable_t c;
  if (lw_callable_load_file(path, &c) != LW_OK) {
    gp_fail("loading %s: %s", path, lw_last_error()->message);
    return false;
  }
  lw_callable_handle_t h;
  st = lw_chip_register(*out_chip, &c, &h);
  lw_callable_free_loaded(&c);
  if (st != LW_OK) {
    gp_fail("lw_chip_register: %s: %s", lw_status_name(st), lw_last_error()->message);
    return false;
  }
  lw_args_t a;
  lw_args_init(&a);
  if (lw_args_add_tensor(&a, log, 64 * sizeof(int64_t), LW_TAG_NO_DEP) != LW_OK ||
      lw_args_add_scalar(&a, 7) != LW_OK) {
    gp_fail("args: %s", lw_last_error()->message);
    return false;
  }
  st = lw_chip_run(*out_chip, h, &a, NULL, NULL);
  if (st != LW_OK || log[0] != 1 || log[1] != 7) {
    gp_fail("lw_chip_run: %s (log %lld, %lld): %s", lw_status_name(st), (long long)log[0],
            (long long)log[1], lw_last_error()->message);
    return false;
  }
  return true;
}

static void mode_l2(void) {
  gp_expect_one_thread("at main");
  gp_expect_no_child("at main");
  gp_arm("L2 use", STEP_SECONDS);
  static int64_t log[64];
  lw_chip_t *chip = NULL;
  bool ok = l2_use(&chip, log);
  gp_expect_no_child("with an L2 chip open");
  lw_chip_close(chip);
  alarm(0);
  if (!ok) return;
  gp_expect_one_thread("after lw_chip_close");
  gp_expect_no_child("after lw_chip_close");
  gp_expect_no_big_mapping("after lw_chip_close");
}

// lw_init when init; check_children: the program must still have no child after it.
static bool maybe_init(bool init, bool check_children) {
  if (!init) return true;
  gp_arm("lw_init", STEP_SECONDS);
  lw_status_t st = lw_init();
  alarm(0);
  if (st != LW_OK) {
    gp_fail("lw_init: %s: %s", lw_status_name(st), lw_last_error()->message);
    return false;
  }
  if (check_children) gp_expect_no_child("after lw_init");
  return true;
}

static void mode_children(bool init) {
  gp_expect_no_child("at main");
  if (!maybe_init(init, true)) return;
  probe_worker_t p;
  if (!worker_open(&p, 2, 1)) return;
  gp_expect_no_child("after lw_worker_create (2 chips, 1 sub)");
  if (run_ok(&p, "a run on both chips and the sub")) gp_expect_no_child("after a run");
  if (crash_and_respawn(&p)) {
    gp_expect_no_child("after a chip child crashed and was respawned");
    if (run_ok(&p, "a run after the respawn")) gp_expect_no_child("after a run after the respawn");
  }
  worker_close(&p);
  gp_expect_no_child("after lw_worker_destroy");
}

static volatile sig_atomic_t wait_interrupted;
static void on_wait_alarm(int sig) {
  (void)sig;
  wait_interrupted = 1;
}

// `while (wait(NULL) > 0)`, as a shell does, under an alarm: it must end at once with ECHILD.
static void expect_wait_loop_echild(const char *when) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_wait_alarm;  // no SA_RESTART: the alarm interrupts a blocked wait
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, &old);
  wait_interrupted = 0;
  alarm(5);
  int reaped = 0, st = 0;
  pid_t pid;
  while ((pid = wait(NULL)) > 0) ++reaped;
  int err = errno;
  alarm(0);
  sigaction(SIGALRM, &old, NULL);
  if (reaped > 0) gp_fail("%s: wait(NULL) reaped %d process(es) of lanework's", when, reaped);
  if (wait_interrupted || err != ECHILD) {
    gp_fail("%s: the wait(NULL) loop %s (errno %d %s), not -1 with ECHILD at once", when,
            wait_interrupted ? "was still blocked after 5 s" : "ended", err, strerror(err));
  }
  errno = 0;
  pid = waitpid(-1, &st, WNOHANG);
  if (pid != -1 || errno != ECHILD) {
    gp_fail("%s: waitpid(-1, WNOHANG) returned %d (errno %d %s), not -1 with ECHILD", when,
            (int)pid, errno, strerror(errno));
  }
}

static void mode_wait(bool init) {
  if (!maybe_init(init, true)) return;
  probe_worker_t p;
  if (!worker_open(&p, 2, 1)) return;
  expect_wait_loop_echild("after lw_worker_create (2 chips, 1 sub)");
  if (gp_failures > 0) {
    // The loop may have reaped or waited for lanework's own processes: the worker cannot be
    // trusted any more, and what the probe had to show is shown.
    gp_note("leaving without destroy");
    return;
  }
  if (run_ok(&p, "a run on both chips and the sub")) expect_wait_loop_echild("after a run");
  if (gp_failures == 0 && crash_and_respawn(&p)) {
    expect_wait_loop_echild("after a chip child crashed and was respawned");
  }
  if (gp_failures > 0) return;
  worker_close(&p);
  expect_wait_loop_echild("after lw_worker_destroy");
}

// --- system() beside a SIGCHLD handler that reaps ---

static _Atomic int handler_reaped;
static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  pid_t pid;
  while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) atomic_fetch_add(&handler_reaped, 1);
  errno = saved;
}

typedef struct tasks_thread {
  probe_worker_t *p;
  _Atomic int stop;
  _Atomic long runs;
  _Atomic int failed;
  char message[LW_ERROR_MESSAGE_BYTES + 64];
} tasks_thread_t;

static void *tasks_main(void *arg) {
  tasks_thread_t *t = arg;
  while (!atomic_load(&t->stop)) {
    lw_run_report_t rep;
    lw_status_t st = run_once(t->p, -1, false, true, &rep);
    if (st != LW_OK) {
      snprintf(t->message, sizeof(t->message), "%s: %s", lw_status_name(st), rep.error.message);
      atomic_store(&t->failed, 1);
      return NULL;
    }
    atomic_fetch_add(&t->runs, 1);
  }
  return NULL;
}

static void mode_system(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);

  probe_worker_t p;
  if (!worker_open(&p, 2, 1)) return;
  // The program's own task thread blocks the asynchronous signals, as a program that handles
  // SIGCHLD on its main thread does: the handler can then run only on the main thread (which
  // system() makes block SIGCHLD while it waits) or on a thread of lanework's.
  tasks_thread_t t;
  memset(&t, 0, sizeof(t));
  t.p = &p;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_t th;
  int rc = pthread_create(&th, NULL, tasks_main, &t);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    gp_fail("pthread_create: %d", rc);
    worker_close(&p);
    return;
  }
  // At least 24 calls, and as many as it takes for the task thread to finish 24 runs while
  // they are made, so lanework's threads are busy dispatching and completing all along.
  gp_arm("system() while tasks run", 60);
  while (atomic_load(&t.runs) == 0 && !atomic_load(&t.failed)) gp_sleep_ms(1);
  long runs_before = atomic_load(&t.runs);
  int calls = 0, bad = 0;
  char first_bad[256] = "";
  while (!atomic_load(&t.failed) &&
         (calls < 24 || atomic_load(&t.runs) - runs_before < 24)) {
    errno = 0;
    int r = system("true");
    int err = errno;
    ++calls;
    if (r != 0) {
      if (bad++ == 0) {
        snprintf(first_bad, sizeof(first_bad), "call %d returned %d (errno %d %s)", calls, r,
                 err, strerror(err));
      }
    }
  }
  long runs_during = atomic_load(&t.runs) - runs_before;
  atomic_store(&t.stop, 1);
  gp_arm("joining the task thread", STEP_SECONDS);
  pthread_join(th, NULL);
  alarm(0);
  if (atomic_load(&t.failed)) gp_fail("a run of the task thread failed: %s", t.message);
  if (bad > 0) {
    gp_fail("system(\"true\") failed in %d of %d calls made while %ld runs completed (first: %s);"
            " the SIGCHLD handler reaped %d process(es)",
            bad, calls, runs_during, first_bad, atomic_load(&handler_reaped));
  }
  gp_note("%d system() calls, %ld runs completed meanwhile", calls, runs_during);
  worker_close(&p);
}

// --- signal masks ---

static sigset_t main_mask_at_start;

static void expect_main_mask_unchanged(const char *when) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  for (int s = 1; s < NSIG; ++s) {
    if (sigismember(&now, s) != sigismember(&main_mask_at_start, s)) {
      gp_fail("%s: lanework changed the main thread's mask (signal %d)", when, s);
      return;
    }
  }
}

static void expect_lanework_threads_block(const char *when, int min_lw) {
  int lw = 0;
  int checked = gp_check_thread_masks(when, &lw);
  if (lw < min_lw) {
    gp_fail("%s: %d thread(s) named lw-* found (of %d checked); expected at least %d", when, lw,
            checked, min_lw);
  }
  gp_note("%s: %d thread(s) checked, %d named lw-*", when, checked, lw);
}

static void mode_sigmask_l3(void) {
  pthread_sigmask(SIG_BLOCK, NULL, &main_mask_at_start);
  // The trace session starts a thread: lw_init first, as a threaded program with sub children
  // must (worker.h).
  if (!maybe_init(true, false)) return;
  char path[] = "/tmp/lw_guest_trace_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    gp_fail("mkstemp: %s", strerror(errno));
    return;
  }
  close(fd);
  lw_status_t st = lw_trace_start(path);
  if (st != LW_OK) {
    gp_fail("lw_trace_start: %s: %s", lw_status_name(st), lw_last_error()->message);
    unlink(path);
    return;
  }
  probe_worker_t p;
  if (worker_open(&p, 2, 1)) {
    if (run_ok(&p, "a run on both chips and the sub")) {
      // An async run: the orchestrator thread runs it when another run is queued.
      gp_arm("two async runs", STEP_SECONDS);
      run_job_t j = {&p, -1, false, true};
      lw_handle_t *h[2] = {NULL, NULL};
      for (int i = 0; i < 2; ++i) {
        if (lw_worker_run_async(p.w, probe_orch, &j, &h[i]) != LW_OK) {
          gp_fail("lw_worker_run_async: %s", lw_last_error()->message);
        }
      }
      for (int i = 0; i < 2; ++i) {
        if (h[i] != NULL) {
          (void)lw_handle_wait(h[i], LW_WAIT_FOREVER);
          lw_handle_release(h[i]);
        }
      }
      alarm(0);
      expect_lanework_threads_block("a traced worker after its runs", 2);
      expect_main_mask_unchanged("after the worker's runs");
    }
    worker_close(&p);
  }
  lw_trace_summary_t sum;
  if (lw_trace_stop(&sum) != LW_OK) gp_fail("lw_trace_stop: %s", lw_last_error()->message);
  unlink(path);
  expect_main_mask_unchanged("after destroy and lw_trace_stop");
}

static void mode_sigmask_l2(void) {
  pthread_sigmask(SIG_BLOCK, NULL, &main_mask_at_start);
  gp_arm("L2 use", STEP_SECONDS);
  static int64_t log[64];
  lw_chip_t *chip = NULL;
  if (l2_use(&chip, log)) {
    expect_lanework_threads_block("an open L2 chip", 2);
    expect_main_mask_unchanged("with an L2 chip open");
  }
  lw_chip_close(chip);
  alarm(0);
}

// --- parent death and destroy ---

static void mode_park(void) {
  probe_worker_t p;
  if (!worker_open(&p, 2, 1)) return;
  if (!run_ok(&p, "a run on both chips and the sub")) return;
  printf("READY %d\n", (int)getpid());
  // test_guest.c kills the probe now; the alarm only ends a probe it forgot.
  gp_arm("parked, waiting to be killed", 120);
  for (;;) pause();
}

// Waits (bounded) until no process of worker's set still runs; FAIL naming those that do.
static void expect_gone(const gp_procs_t *set, const char *when) {
  gp_procs_t left;
  for (int tries = 0;; ++tries) {
    left.n = 0;
    for (int i = 0; i < set->n; ++i) {
      if (gp_alive(&set->p[i])) left.p[left.n++] = set->p[i];
    }
    if (left.n == 0 || tries == 1000) break;
    gp_sleep_ms(10);
  }
  if (left.n > 0) {
    char desc[2048];
    gp_describe(&left, desc, sizeof(desc));
    gp_fail("%s: %d process(es) of the worker still run 10 s later: %s", when, left.n, desc);
  }
}

static void mode_destroy(void) {
  if (!maybe_init(true, false)) return;
  // A first worker, so that whatever lanework keeps for the program's lifetime (its zygote,
  // a helper) exists before the one that is checked.
  probe_worker_t p;
  if (!worker_open(&p, 2, 1)) return;
  if (!run_ok(&p, "the first worker's run")) return;
  worker_close(&p);

  gp_procs_t before;
  gp_lanework_procs(&before);
  lw_test_fds_t fds;
  lw_test_fds_snapshot(&fds);
  if (!worker_open(&p, 2, 1)) return;
  bool ok = run_ok(&p, "a run on both chips and the sub") && crash_and_respawn(&p) &&
            run_ok(&p, "a run after the respawn");
  gp_procs_t during, mine;
  gp_lanework_procs(&during);
  mine.n = 0;
  for (int i = 0; i < during.n; ++i) {
    if (!gp_contains(&before, &during.p[i]) && gp_alive(&during.p[i])) {
      mine.p[mine.n++] = during.p[i];
    }
  }
  worker_close(&p);
  if (!ok) return;
  if (mine.n < 3) {
    char desc[2048];
    gp_describe(&during, desc, sizeof(desc));
    gp_fail("found %d process(es) of the worker (2 chips, 1 sub), expected at least 3; "
            "lanework's processes: %s",
            mine.n, desc);
  }
  expect_gone(&mine, "after lw_worker_destroy");
  char msg[1024];
  int extra = lw_test_fds_excess(&fds, msg, sizeof(msg));
  if (extra > 0) gp_fail("lw_worker_destroy left %d fd(s) open: %s", extra, msg);
}

int main(int argc, char **argv) {
  gp_start();
  if (argc < 2) {
    gp_fail("usage: %s MODE [init]", argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  bool init = argc > 2 && strcmp(argv[2], "init") == 0;
  if (strcmp(mode, "idle") == 0) {
    mode_idle();
  } else if (strcmp(mode, "l2") == 0) {
    mode_l2();
  } else if (strcmp(mode, "children") == 0) {
    mode_children(init);
  } else if (strcmp(mode, "wait") == 0) {
    mode_wait(init);
  } else if (strcmp(mode, "system") == 0) {
    mode_system();
  } else if (strcmp(mode, "sigmask_l3") == 0) {
    mode_sigmask_l3();
  } else if (strcmp(mode, "sigmask_l2") == 0) {
    mode_sigmask_l2();
  } else if (strcmp(mode, "park") == 0) {
    mode_park();
  } else if (strcmp(mode, "destroy") == 0) {
    mode_destroy();
  } else {
    gp_fail("unknown mode %s", mode);
    return 2;
  }
  printf("%s %s: %d finding(s)\n", argv[0], mode, gp_failures);
  return gp_failures == 0 ? 0 : 1;
}
