// tools/bench_l4_tasks.c — lanework-bench-l4's task modes: what a remote task costs through
// the L4 worker itself (lanework/l4.h), under mpirun -np 3 (rank 0 the L4, ranks 1 and 2 each
// an L3 worker with one sim chip). Kernels come from $LW_KERNEL_DIR (`lanework bench l4` sets
// it). Modes:
//   tasks        startup (lw_l4_create on rank 0, every rank's L3 worker up), an empty task's
//                round trip (one noop task per run, p50/p99), the marginal cost per task with
//                1024 in flight over both ranks, a 4 MB tensor written on rank 1 then read on
//                rank 2 (it moves rank 1 -> rank 2 directly: the read's run minus the empty
//                round trip), and the clean shutdown (lw_l4_destroy);
//   tasks-death  rank 2 stamps the time and SIGKILLs itself while a task of it runs: how long
//                until rank 0's run fails naming it;
//   tasks-hung   the same with SIGSTOP.
// One JSON line on rank 0's stdout, as the transport's modes.
#include "tools/bench_l4_tasks.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "lanework/l4.h"

#define ROUND_TRIPS 300
#define MANY 1024
#define BIG (4u << 20)
#define MOVES 10

typedef struct bench {
  lw_l4_t *l4;
  lw_callable_handle_t noop, sleep;
  void *big;
  int32_t rank;  // where the one task goes (0: spread over every L3 rank)
  int32_t last;  // the last L3 rank (size - 1)
  uint32_t n;    // how many
  lw_tag_t tag;  // the big tensor's tag, when big is set
} bench_t;

static void fail(const char *what) {
  fprintf(stderr, "lanework-bench-l4: %s: %s: %s\n", what, lw_status_name(lw_last_error()->code),
          lw_last_error()->message);
  _exit(2);
}

static void reg(lw_l4_t *l4, const char *name, lw_callable_handle_t *out) {
  const char *dir = getenv("LW_KERNEL_DIR");
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s.so", dir && *dir ? dir : LW_BENCH_KERNEL_DIR, name);
  lw_callable_t c;
  if (lw_callable_load_file(path, &c) != LW_OK) fail(path);
  lw_status_t st = lw_l4_register(l4, name, &c, out);
  lw_callable_free_loaded(&c);
  if (st != LW_OK) fail(name);
}

static lw_status_t orch(lw_l4_orch_t *o, void *user) {
  bench_t *b = user;
  lw_args_t a;
  for (uint32_t i = 0; i < b->n; ++i) {
    lw_args_init(&a);
    if (b->big) LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, b->big, BIG, b->tag));
    int32_t rank = b->rank > 0 ? b->rank : (int32_t)(1 + (int32_t)i % b->last);
    LW_RETURN_IF_ERROR(lw_l4_submit(o, b->noop, &a, NULL, rank));
  }
  return LW_OK;
}

static int64_t run(bench_t *b) {
  int64_t t0 = lw__now_ns();
  lw_run_report_t rep;
  if (lw_l4_run(b->l4, orch, b, &rep) != LW_OK) fail("run");
  return lw__now_ns() - t0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void figures(bench_t *b, int64_t startup_ns) {
  static int64_t rtt[ROUND_TRIPS];
  b->n = 1;
  b->rank = 1;
  for (int i = 0; i < 20; ++i) (void)run(b);  // warm up both sides
  for (int i = 0; i < ROUND_TRIPS; ++i) rtt[i] = run(b);
  qsort(rtt, ROUND_TRIPS, sizeof(rtt[0]), cmp_i64);
  double p50 = (double)rtt[ROUND_TRIPS / 2] / 1e3, p99 = (double)rtt[ROUND_TRIPS * 99 / 100] / 1e3;
  b->n = MANY;
  b->rank = 0;
  int64_t many[5];
  for (int i = 0; i < 5; ++i) many[i] = run(b);
  qsort(many, 5, sizeof(many[0]), cmp_i64);
  double per_task = (double)many[2] / 1e3 / MANY;
  // The 4 MB move: written on rank 1, read on the last rank (none with one L3 rank: 0 GB/s).
  if (lw_l4_tensor_create(b->l4, NULL, BIG, 1, &b->big) != LW_OK) fail("tensor");
  b->n = 1;
  double gbs[MOVES] = {0};
  for (int i = 0; i < MOVES && b->last > 1; ++i) {
    b->rank = 1;
    b->tag = LW_TAG_OUTPUT;
    (void)run(b);
    b->rank = b->last;
    b->tag = LW_TAG_INPUT;
    int64_t t = run(b) - rtt[ROUND_TRIPS / 2];
    gbs[i] = t > 0 ? (double)BIG / (double)t : 0.0;
  }
  qsort(gbs, MOVES, sizeof(gbs[0]), lw__bench_l4_cmp_double);
  if (lw_l4_tensor_free(b->l4, b->big) != LW_OK) fail("free");
  int64_t t_close = lw__now_ns();
  int rc = lw_l4_destroy(b->l4);
  double shutdown_ms = (double)(lw__now_ns() - t_close) / 1e6;
  printf(
      "{\"bench\": \"l4\", \"mode\": \"tasks\", \"ranks\": %d, \"startup_ms\": %.1f, "
      "\"task_round_trip_p50_us\": %.2f, \"task_round_trip_p99_us\": %.2f, "
      "\"per_task_in_flight_us\": %.2f, \"in_flight\": %d, \"tensor_4mb_gbs\": %.2f, "
      "\"tensor_4mb_gbs_min\": %.2f, \"shutdown_ms\": %.1f, \"exit\": %d}\n",
      (int)(b->last + 1), (double)startup_ns / 1e6, p50, p99, per_task, MANY, gbs[MOVES / 2],
      gbs[0], shutdown_ms, rc);
  fflush(stdout);
}

// The fault modes: rank 2 writes when it raised the signal here (same host, same clock).
static const char *stamp_path(void) {
  static char path[256];  // every rank's parent is the job's mpirun (or its daemon)
  snprintf(path, sizeof(path), "/tmp/lanework-bench-l4-%d.stamp", (int)getppid());
  return path;
}

static void *fault_main(void *arg) {
  int sig = *(int *)arg;
  struct timespec ts = {0, 500000000};  // the long task runs by then
  nanosleep(&ts, NULL);
  FILE *f = fopen(stamp_path(), "w");
  if (f) {
    fprintf(f, "%lld\n", (long long)lw__now_ns());
    fclose(f);
  }
  raise(sig);
  return NULL;
}

static lw_status_t long_orch(lw_l4_orch_t *o, void *user) {
  bench_t *b = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 60ull * 1000000ull));  // 60 s unless cancelled
  return lw_l4_submit(o, b->sleep, &a, NULL, 2);
}

static void fault(bench_t *b, bool stop) {
  lw_run_report_t rep;
  lw_status_t st = lw_l4_run(b->l4, long_orch, b, &rep);
  int64_t t_error = lw__now_ns();
  long long t_sig = 0;
  FILE *f = fopen(stamp_path(), "r");
  if (!f || fscanf(f, "%lld", &t_sig) != 1) t_sig = 0;
  if (f) fclose(f);
  unlink(stamp_path());
  char why[LW_ERROR_MESSAGE_BYTES];
  snprintf(why, sizeof(why), "%s", rep.error.message);
  for (char *p = why; *p; ++p) {
    if (*p == '"' || *p == '\\') *p = '\'';
  }
  printf(
      "{\"bench\": \"l4\", \"mode\": \"%s\", \"status\": \"%s\", \"to_error_ms\": %.2f, "
      "\"error\": \"%s\"}\n",
      stop ? "tasks-hung" : "tasks-death", lw_status_name(st),
      t_sig ? (double)(t_error - t_sig) / 1e6 : -1.0, why);
  fflush(stdout);
  _exit(lw_l4_destroy(b->l4));
}

int lw__bench_l4_tasks(int *argc, char ***argv, const char *mode) {
  int64_t t0 = lw__now_ns();
  lw_l4_config_t cfg;
  lw_l4_config_default(&cfg);
  cfg.max_in_flight = LW_L4_MAX_IN_FLIGHT;
  cfg.l3.arena_bytes = 64ull << 20;
  bench_t b = {0};
  if (lw_l4_create(argc, argv, &cfg, &b.l4) != LW_OK) fail("lw_l4_create");
  int64_t startup = lw__now_ns() - t0;
  reg(b.l4, "noop", &b.noop);
  reg(b.l4, "sleep", &b.sleep);
  int32_t rank = lw_l4_rank(b.l4);
  b.last = lw_l4_size(b.l4) - 1;
  bool stop = strcmp(mode, "tasks-hung") == 0;
  bool faulty = stop || strcmp(mode, "tasks-death") == 0;
  if (rank > 0) {
    static int sig;
    sig = stop ? SIGSTOP : SIGKILL;
    pthread_t t;
    if (faulty && rank == 2 && pthread_create(&t, NULL, fault_main, &sig) != 0) fail("thread");
    lw_status_t st = lw_l4_serve(b.l4);
    int rc = lw_l4_destroy(b.l4);
    return st == LW_OK && rc == 0 ? 0 : 4;
  }
  if (faulty) fault(&b, stop);
  figures(&b, startup);
  return 0;
}
