// tests/tools/test_thread_times.c — the per-role time accounting behind `bench dispatch`'s where
// line (tools/thread_times.c): roles come from thread names, the measuring thread is the
// caller, a chip child's mailbox loop is its main thread only, threads are matched one by one
// between snapshots (one that starts between them counts whole, one that ends is dropped, never
// subtracted), and descendants count only for their lw-* threads. Threads burn a known amount
// of their own CPU time (their CPU clock) and hand off through pipes and condition variables;
// the bounds compare amounts of work done, never how long anything took.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "tools/thread_times.h"

#define BURN_NS (20ll * 1000 * 1000)

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Spins until this thread has spent ns more of CPU time; returns its CPU time then.
static int64_t burn(int64_t ns) {
  int64_t until = thread_cpu_ns() + ns;
  volatile uint64_t x = 0;
  int64_t now;
  while ((now = thread_cpu_ns()) < until) {
    for (int i = 0; i < 1000; ++i) x = x + 1;
  }
  return now;
}

static lw_bench_role_times_t between(lw_bench_times_t *before) {
  lw_bench_times_t after;
  cr_assert(lw__bench_times_read(gettid(), true, &after), "the second snapshot failed");
  lw_bench_role_times_t d;
  lw__bench_times_diff(&after, before, &d);
  lw__bench_times_free(&after);
  lw__bench_times_free(before);
  cr_assert(d.ok);
  return d;
}

// A thread named name that burns BURN_NS once told to go, records its CPU time in burned, says
// it is done and waits to be stopped; every wait blocks on the condition variable (no polling,
// so a thread's time between the snapshots is its burn and little else).
typedef struct named {
  const char *name;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool go, done, stop;
  int64_t burned;
  pthread_t thread;
} named_t;

static void named_wait(named_t *n, const bool *flag) {
  pthread_mutex_lock(&n->mu);
  while (!*flag) pthread_cond_wait(&n->cv, &n->mu);
  pthread_mutex_unlock(&n->mu);
}

static void named_set(named_t *n, bool *flag) {
  pthread_mutex_lock(&n->mu);
  *flag = true;
  pthread_cond_broadcast(&n->cv);
  pthread_mutex_unlock(&n->mu);
}

static void *named_main(void *arg) {
  named_t *n = arg;
  (void)pthread_setname_np(pthread_self(), n->name);
  named_wait(n, &n->go);
  int64_t burned = burn(BURN_NS);
  pthread_mutex_lock(&n->mu);
  n->burned = burned;
  pthread_mutex_unlock(&n->mu);
  named_set(n, &n->done);
  named_wait(n, &n->stop);
  return NULL;
}

static void named_start(named_t *n, const char *name, bool go) {
  memset(n, 0, sizeof(*n));
  n->name = name;
  n->go = go;
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->cv, NULL);
  cr_assert_eq(pthread_create(&n->thread, NULL, named_main, n), 0);
}

static void named_stop(named_t *n) {
  named_set(n, &n->go);
  named_set(n, &n->stop);
  pthread_join(n->thread, NULL);
  pthread_mutex_destroy(&n->mu);
  pthread_cond_destroy(&n->cv);
}

static int64_t named_burned(named_t *n) {
  pthread_mutex_lock(&n->mu);
  int64_t b = n->burned;
  pthread_mutex_unlock(&n->mu);
  return b;
}

Test(thread_times, roles_follow_thread_names_and_the_measuring_thread_is_the_caller,
     .timeout = 60) {
  named_t sched, run, chip_thread, plain;
  named_start(&sched, "lw-sched", false);
  named_start(&run, "lw-run-7", false);
  named_start(&chip_thread, "lw-chip-3", false);  // not a main thread: "other"
  named_start(&plain, "helper", false);
  lw_bench_times_t before;
  cr_assert(lw__bench_times_read(gettid(), false, &before));
  named_t *all[] = {&sched, &run, &chip_thread, &plain};
  for (int i = 0; i < 4; ++i) named_set(all[i], &all[i]->go);
  for (int i = 0; i < 4; ++i) named_wait(all[i], &all[i]->done);
  (void)burn(BURN_NS);
  lw_bench_role_times_t d = between(&before);
  for (int i = 0; i < 4; ++i) named_stop(all[i]);
  // Each burned BURN_NS of its own CPU between the snapshots; a thread of this process is read
  // from its CPU clock, so nothing it burned is missing.
  cr_assert_geq(d.cpu_ns[LW_BENCH_ROLE_CALLER], BURN_NS, "caller %lld",
                (long long)d.cpu_ns[LW_BENCH_ROLE_CALLER]);
  cr_assert_geq(d.cpu_ns[LW_BENCH_ROLE_SCHEDULER], BURN_NS, "scheduler %lld",
                (long long)d.cpu_ns[LW_BENCH_ROLE_SCHEDULER]);
  cr_assert_geq(d.cpu_ns[LW_BENCH_ROLE_RUN_LANE], BURN_NS, "run lane %lld",
                (long long)d.cpu_ns[LW_BENCH_ROLE_RUN_LANE]);
  cr_assert_geq(d.cpu_ns[LW_BENCH_ROLE_OTHER], 2 * BURN_NS, "other %lld (lw-chip-3 + helper)",
                (long long)d.cpu_ns[LW_BENCH_ROLE_OTHER]);
  cr_assert_eq(d.cpu_ns[LW_BENCH_ROLE_MAILBOX_LOOP], 0, "no chip child main thread here");
  // The caller's time is its own thread's, not the process's: that would hold the four other
  // burns as well (5 x BURN_NS); the caller itself only burned once and waited, blocked.
  cr_assert_lt(d.cpu_ns[LW_BENCH_ROLE_CALLER], 3 * BURN_NS, "caller %lld",
               (long long)d.cpu_ns[LW_BENCH_ROLE_CALLER]);
}

Test(thread_times, a_thread_started_between_snapshots_counts_whole_and_one_ended_is_dropped,
     .timeout = 60) {
  // lw-run-1 burns before the first snapshot and ends before the second; lw-run-2 starts after
  // the first and burns. Summing by role first would take lw-run-1's time from lw-run-2's.
  named_t gone, fresh;
  named_start(&gone, "lw-run-1", true);
  named_wait(&gone, &gone.done);
  lw_bench_times_t before;
  cr_assert(lw__bench_times_read(gettid(), false, &before));
  named_stop(&gone);
  named_start(&fresh, "lw-run-2", true);
  named_wait(&fresh, &fresh.done);
  lw_bench_role_times_t d = between(&before);
  int64_t fresh_burned = named_burned(&fresh);
  named_stop(&fresh);
  cr_assert_geq(d.cpu_ns[LW_BENCH_ROLE_RUN_LANE], fresh_burned,
                "run lane %lld, the new thread alone burned %lld",
                (long long)d.cpu_ns[LW_BENCH_ROLE_RUN_LANE], (long long)fresh_burned);
}

// A descendant process named name: its main thread burns BURN_NS when a byte arrives on go,
// writes its CPU time to done, then blocks reading go again until it is killed.
static pid_t child_burner(const char *name, int *go_w, int *done_r) {
  int go[2], done[2];
  cr_assert_eq(pipe(go), 0);
  cr_assert_eq(pipe(done), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, name);
    close(go[1]);
    close(done[0]);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(1);
    int64_t burned = burn(BURN_NS);
    if (write(done[1], &burned, sizeof(burned)) != (ssize_t)sizeof(burned)) _exit(1);
    for (;;) {
      if (read(go[0], &c, 1) <= 0) _exit(0);
    }
  }
  close(go[0]);
  close(done[1]);
  *go_w = go[1];
  *done_r = done[0];
  return pid;
}

// The state letter of pid ('S' asleep, 'R' running, ...), '?' when unreadable.
static char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : '?';
}

static int64_t run_child(pid_t pid, int go_w, int done_r) {
  cr_assert_eq(write(go_w, "g", 1), 1);
  int64_t burned = 0;
  cr_assert_eq(read(done_r, &burned, sizeof(burned)), (ssize_t)sizeof(burned));
  // Asleep again: its schedstat was brought up to date when it was switched out.
  while (proc_state(pid) != 'S') lw_test_sleep_us(200);
  return burned;
}

static void end_child(pid_t pid, int go_w, int done_r) {
  close(go_w);
  close(done_r);
  kill(pid, SIGKILL);
  cr_assert_eq(waitpid(pid, NULL, 0), pid);
}

Test(thread_times, a_chip_child_main_thread_is_the_mailbox_loop_and_unnamed_descendants_do_not_count,
     .timeout = 60) {
  int chip_go, chip_done, loop_go, loop_done;
  pid_t chip = child_burner("lw-chip-5", &chip_go, &chip_done);
  pid_t loop = child_burner("busy-loop", &loop_go, &loop_done);
  lw_bench_times_t before;
  cr_assert(lw__bench_times_read(gettid(), false, &before));
  int64_t chip_burned = run_child(chip, chip_go, chip_done);
  int64_t loop_burned = run_child(loop, loop_go, loop_done);
  lw_bench_role_times_t d = between(&before);
  end_child(chip, chip_go, chip_done);
  end_child(loop, loop_go, loop_done);
  // The child's own CPU clock counted from its start; between the snapshots it burned at least
  // BURN_NS of that.
  cr_assert_geq(d.cpu_ns[LW_BENCH_ROLE_MAILBOX_LOOP], BURN_NS, "mailbox loop %lld (burned %lld)",
                (long long)d.cpu_ns[LW_BENCH_ROLE_MAILBOX_LOOP], (long long)chip_burned);
  cr_assert_geq(d.sleeps[LW_BENCH_ROLE_MAILBOX_LOOP], 1, "it blocked on its pipe again");
  // busy-loop is no lw-* thread: had it counted, "other" would hold the BURN_NS it burned
  // after the first snapshot (this process has no other thread that works).
  cr_assert_lt(d.cpu_ns[LW_BENCH_ROLE_OTHER], BURN_NS / 2, "other %lld (busy-loop burned %lld)",
               (long long)d.cpu_ns[LW_BENCH_ROLE_OTHER], (long long)loop_burned);
}
