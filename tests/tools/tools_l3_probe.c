// tests/tools/tools_l3_probe.c — an L3 program for the tools tests (run under valgrind's
// memcheck and gdb by run_under_tool.sh): lw_init first thing, then a worker with 2 sim chips
// and 1 sub child. Each run's orch function submits the record kernel (tests/kernels/record.c)
// on chip 0 and on chip 1, both writing one log (INOUT: chip 1's task waits for chip 0's), and
// a sub task that reads the log (INPUT: it waits for both) and writes its count and sum. Runs
// synchronously and asynchronously, checks every result, unregisters, destroys, and checks
// that none of the worker's processes (chip and sub children, their fork servers) outlives
// lw_worker_destroy. Exit 0 when every check held; 1 with a "FAIL:" line otherwise.
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "tools_probe.h"

#define N_CHIPS 2
#define N_SUBS 1
#define N_RUNS 3
#define LOG_WORDS 64

typedef struct job {
  lw_callable_handle_t record, sum;
  int64_t *log;  // in the arena: record's log
  int64_t *out;  // in the arena: out[0] the count of records, out[1] their sum
  uint64_t base;
} job_t;

// The sub function: reads the log tensor[0] and writes its count and sum into tensor[1].
static lw_status_t sub_sum(const lw_kernel_args_t *a) {
  if (a->n_tensors < 2) return LW_INVALID_ARGUMENT;
  const int64_t *log = a->tensor[0].data;
  int64_t *out = a->tensor[1].data;
  int64_t n = log[0], sum = 0;
  if (n < 0 || n >= LOG_WORDS) return LW_INVALID_ARGUMENT;
  for (int64_t i = 0; i < n; ++i) sum += log[1 + i];
  out[0] = n;
  out[1] = sum;
  return LW_OK;
}

static lw_status_t orch(lw_orch_t *o, void *user) {
  const job_t *j = user;
  lw_args_t a;
  for (int32_t chip = 0; chip < N_CHIPS; ++chip) {
    lw_args_init(&a);
    LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, LOG_WORDS * sizeof(int64_t), LW_TAG_INOUT));
    LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, j->base + (uint64_t)chip));
    LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, j->record, &a, NULL, chip));
  }
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->log, LOG_WORDS * sizeof(int64_t), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->out, 2 * sizeof(int64_t), LW_TAG_OUTPUT));
  return lw_orch_submit_sub(o, j->sum, &a);
}

static void check_run(const job_t *j, const char *what) {
  if (j->log[0] != N_CHIPS) {
    tp_fail("%s: the log holds %lld records, not %d", what, (long long)j->log[0], N_CHIPS);
  }
  for (int i = 0; i < N_CHIPS; ++i) {
    if ((uint64_t)j->log[1 + i] != j->base + (uint64_t)i) {
      tp_fail("%s: record %d is %lld, not %llu (chip 1's task must follow chip 0's)", what, i,
              (long long)j->log[1 + i], (unsigned long long)(j->base + (uint64_t)i));
    }
  }
  int64_t want_sum = (int64_t)(N_CHIPS * j->base) + N_CHIPS * (N_CHIPS - 1) / 2;
  if (j->out[0] != N_CHIPS || j->out[1] != want_sum) {
    tp_fail("%s: the sub task wrote count %lld, sum %lld; want %d, %lld", what,
            (long long)j->out[0], (long long)j->out[1], N_CHIPS, (long long)want_sum);
  }
}

static void reset(job_t *j, uint64_t base) {
  memset(j->log, 0, LOG_WORDS * sizeof(int64_t));
  memset(j->out, 0, 2 * sizeof(int64_t));
  j->base = base;
}

// /proc/<pid>/stat: the start time (field 22) of a process that has not ended; 0 when it has
// ended (gone, or a zombie waiting for its reaper).
static unsigned long long live_start(int32_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t len = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[len] = '\0';
  char *p = strrchr(buf, ')');  // the name may hold spaces and parentheses
  if (p == NULL || p[1] == '\0') return 0;
  p += 2;
  char state = p[0];
  if (state == 'Z' || state == 'X') return 0;
  // Fields after the name start at 3 (state); the start time is 22.
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (p == NULL) return 0;
    ++p;
  }
  return strtoull(p, NULL, 10);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int main(void) {
  // Before anything else: the zygote is a copy of this single-threaded program.
  tp_check(lw_init(), "lw_init");

  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = N_CHIPS;
  cfg.n_subs = N_SUBS;
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w = NULL;
  tp_check(lw_worker_create(&cfg, &w), "lw_worker_create (2 chips, 1 sub)");

  job_t j;
  memset(&j, 0, sizeof(j));
  lw_callable_t c;
  tp_load_kernel("record", &c);
  lw_status_t st = lw_worker_register(w, &c, &j.record);
  lw_callable_free_loaded(&c);
  tp_check(st, "lw_worker_register(record)");
  tp_check(lw_worker_register_sub(w, sub_sum, "sub_sum", &j.sum), "lw_worker_register_sub");
  j.log = lw_worker_alloc(w, LOG_WORDS * sizeof(int64_t));
  j.out = lw_worker_alloc(w, 2 * sizeof(int64_t));
  if (j.log == NULL || j.out == NULL) tp_fail("lw_worker_alloc: %s", lw_last_error()->message);

  for (int r = 0; r < N_RUNS; ++r) {
    reset(&j, 1000 * (uint64_t)(r + 1));
    lw_run_report_t rep;
    st = lw_worker_run(w, orch, &j, &rep);
    if (st != LW_OK) tp_fail("lw_worker_run %d: %s: %s", r, lw_status_name(st), rep.error.message);
    check_run(&j, "a synchronous run");
  }

  reset(&j, 9000);
  lw_handle_t *h = NULL;
  tp_check(lw_worker_run_async(w, orch, &j, &h), "lw_worker_run_async");
  st = lw_handle_wait(h, LW_WAIT_FOREVER);
  if (st != LW_OK) {
    const lw_error_t *e = lw_handle_error(h);
    tp_fail("the asynchronous run: %s: %s", lw_status_name(st), e != NULL ? e->message : "");
  }
  lw_handle_release(h);
  check_run(&j, "an asynchronous run");

  tp_check(lw_worker_unregister(w, j.record), "lw_worker_unregister(record)");
  tp_check(lw_worker_unregister(w, j.sum), "lw_worker_unregister(sub_sum)");
  lw_worker_free(w, j.log);
  lw_worker_free(w, j.out);

  // The worker's processes: chip children, sub children, then the two fork servers; the last
  // entry is the zygote, which lives as long as the program.
  int32_t pids[N_CHIPS + N_SUBS + 3];
  uint32_t n = lw_worker_process_ids(w, pids, N_CHIPS + N_SUBS + 3);
  if (n != N_CHIPS + N_SUBS + 3) tp_fail("lw_worker_process_ids returned %u entries", n);
  unsigned long long starts[N_CHIPS + N_SUBS + 2];
  for (uint32_t i = 0; i + 1 < n; ++i) {
    if (pids[i] <= 0) tp_fail("lw_worker_process_ids: entry %u is %d", i, (int)pids[i]);
    starts[i] = live_start(pids[i]);
    if (starts[i] == 0) {
      tp_fail("process %d (entry %u) is not running before destroy", (int)pids[i], i);
    }
  }
  lw_worker_destroy(w);

  // destroy returns once every child is dead and reaped (its fork server reaps it before it
  // answers STOP) ...
  for (uint32_t i = 0; i < N_CHIPS + N_SUBS; ++i) {
    if (live_start(pids[i]) == starts[i]) {
      tp_fail("child %d (entry %u) still runs after lw_worker_destroy returned", (int)pids[i], i);
    }
  }
  // ... but a fork server, not this program's child, may take a moment to finish exiting
  // after its last answer: polled, up to 10 s.
  for (int tries = 0;; ++tries) {
    int32_t alive = 0;
    for (uint32_t i = 0; i + 1 < n; ++i) {
      if (live_start(pids[i]) == starts[i]) alive = pids[i];
    }
    if (alive == 0) break;
    if (tries == 1000) {
      tp_fail("10 s after lw_worker_destroy, process %d of the worker still runs", (int)alive);
    }
    sleep_ms(10);
  }
  printf("tools_l3_probe: ok (%d runs on %d chips and %d sub)\n", N_RUNS + 1, N_CHIPS, N_SUBS);
  return 0;
}
