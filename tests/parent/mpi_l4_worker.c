// tests/parent/mpi_l4_worker.c — the L4 worker (lanework/l4.h) under a real mpirun -np 3, run by
// tests/parent/run_mpi.sh. Rank 0 is the L4, ranks 1 and 2 serve. What is checked is chosen by the
// environment:
//   LW_L4_TEST_CASE=dag     a DAG across both ranks whose results are exact
//   only if every
//                           read-after-write, write-after-read and
//                           write-after-write between ranks was kept, with
//                           tensors from rank 0 (inline and transferred),
//                           all-zero tensors, rank-to-rank moves, an L3 orch
//                           function by name, and 256 independent tasks in
//                           flight; every result checked on rank 0
//   LW_L4_TEST_CASE=fail    a failing task on rank 1: its dependent is skipped,
//   a long task on
//                           rank 2 is cancelled there, the error names the
//                           rank, host and pid; the next run works
//   LW_L4_TEST_CASE=async   three runs queued with lw_l4_run_async: the first (a 60 s task) and
//                           the second (queued behind it) cancelled through their handles, the
//                           third runs; each handle finishes with its own outcome, in order, and
//                           lw_l4_run from inside an orch function is refused
//   LW_L4_TEST_CASE=args    every refusal says what was wrong: a name taken twice, a tensor of
//                           0 bytes or a bad home, serving on rank 0, a submit with a handle
//                           lw_l4_register did not give, a token that is not a tensor, the wrong
//                           size, a bad rank, a negative timeout; a between-runs call during a
//                           run; a report of a handle of another kind; each refused call changes
//                           nothing and the run goes on
//   LW_L4_TEST_CASE=cancel  lw_l4_cancel with a long task running on a rank:
//   CANCELLED, and
//                           the next run works
//   LW_L4_TEST_FAULT=kill:R rank R SIGKILLs itself while a long task of it
//   runs: the run fails
//                           naming it, lw_l4_destroy says a peer was lost (exit
//                           3)
//   LW_L4_TEST_FAULT=stop:R rank R SIGSTOPs itself: the run fails naming it
//   hung (exit 3) LW_L4_TEST_FAULT=kill:0 the L4 SIGKILLs itself while tasks
//   run: every rank leaves
//                           lw_l4_serve naming it (exit 4)
// Every rank prints what it saw, one line each, for the script to match.
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/l4.h"
#include "lanework/orch.h"

#define N 8192  // floats: 32 KiB, more than rides inside a task message
#define SMALL 64
#define MANY 256

static int g_rank;
static int g_fault_rank = -1;
static char g_fault_kind[8] = "";
static const char *g_case = "dag";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  printf("rank %d: %s\n", g_rank, line);
  fflush(stdout);
}

static void die(const char *what) {
  say("FAILED %s: %s: %s", what, lw_status_name(lw_last_error()->code), lw_last_error()->message);
  _exit(2);
}

typedef struct names {
  lw_callable_handle_t vadd, saxpy, fail, sleep, noop, orch_vadd;
} names_t;

static void reg(lw_l4_t *l4, const char *name, lw_callable_handle_t *out) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s.so", LW_KERNEL_DIR, name);
  lw_callable_t c;
  if (lw_callable_load_file(path, &c) != LW_OK) die(path);
  lw_status_t st = lw_l4_register(l4, name, &c, out);
  lw_callable_free_loaded(&c);
  if (st != LW_OK) die(name);
}

// vector_add on this rank's own L3 worker (ranks >= 1), for orch_vadd.
static lw_callable_handle_t g_l3_vadd;

// An L3 orch function registered by name: vector_add of its three tensors on the rank's L3.
static lw_status_t orch_vadd(lw_orch_t *o, void *user) {
  const lw_kernel_args_t *k = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, k->tensor[0].data, k->tensor[0].bytes, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, k->tensor[1].data, k->tensor[1].bytes, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, k->tensor[2].data, k->tensor[2].bytes, LW_TAG_OUTPUT));
  return lw_orch_submit_next_level(o, g_l3_vadd, &a, NULL, LW_ANY_CHIP);
}

static void register_all(lw_l4_t *l4, names_t *n) {
  reg(l4, "vector_add", &n->vadd);
  reg(l4, "saxpy", &n->saxpy);
  reg(l4, "fail", &n->fail);
  reg(l4, "sleep", &n->sleep);
  reg(l4, "noop", &n->noop);
  if (lw_l4_register_orch(l4, "orch_vadd", orch_vadd, &n->orch_vadd) != LW_OK) die("orch_vadd");
  if (g_rank > 0) {
    // The L3 orch function submits the rank's own vector_add: the handle lw_l4_register made on
    // this rank's worker is internal, so register it here once more (same digest, same slot).
    char path[512];
    snprintf(path, sizeof(path), "%s/vector_add.so", LW_KERNEL_DIR);
    lw_callable_t c;
    if (lw_callable_load_file(path, &c) != LW_OK) die(path);
    lw_status_t st = lw_worker_register(lw_l4_worker(l4), &c, &g_l3_vadd);
    lw_callable_free_loaded(&c);
    if (st != LW_OK) die("vector_add on L3");
  }
}

// ---------------------------------------------------------------------------------------------
// Rank 0's runs

typedef struct ctx {
  lw_l4_t *l4;
  names_t *n;
  lw_l4_orch_t *o;  // the run's, while dag_orch submits
  void *t[16];
  void *many_x[MANY], *many_y[MANY];
} ctx_t;

static void add(lw_args_t *a, void *t, uint64_t bytes, lw_tag_t tag) {
  if (lw_args_add_tensor(a, t, bytes, tag) != LW_OK) die("add tensor");
}

static void submit(ctx_t *c, lw_callable_handle_t h, lw_args_t *a, int32_t rank) {
  if (lw_l4_submit(c->o, h, a, NULL, rank) != LW_OK) die("submit");
}

enum { A, B, C, D, E, Z, F, G, H, I };
#define INLINE_N 4096  // floats: 16 KiB, the most that rides inside a task message

static lw_status_t dag_orch(lw_l4_orch_t *o, void *user) {
  ctx_t *c = user;
  c->o = o;
  const uint64_t bytes = N * sizeof(float);
  lw_args_t a;
  // 1: C = A + B (on C's home, rank 1; A and B come from rank 0, transferred).
  lw_args_init(&a);
  add(&a, c->t[A], bytes, LW_TAG_INPUT);
  add(&a, c->t[B], bytes, LW_TAG_INPUT);
  add(&a, c->t[C], bytes, LW_TAG_OUTPUT);
  submit(c, c->n->vadd, &a, LW_L4_ANY_RANK);
  // 2: D = 2 C + D on rank 2 (C moves rank 1 -> rank 2 directly).
  lw_args_init(&a);
  add(&a, c->t[C], bytes, LW_TAG_INPUT);
  add(&a, c->t[D], bytes, LW_TAG_INOUT);
  (void)lw_args_add_f32(&a, 2.0f);
  submit(c, c->n->saxpy, &a, 2);
  // 3: C = A + A on rank 1: must wait for 2's read of C (write-after-read).
  lw_args_init(&a);
  add(&a, c->t[A], bytes, LW_TAG_INPUT);
  add(&a, c->t[A], bytes, LW_TAG_INPUT);
  add(&a, c->t[C], bytes, LW_TAG_OUTPUT);
  submit(c, c->n->vadd, &a, 1);
  // 4: C = A + C on rank 2: after 3 (write-after-write, read-after-write across ranks).
  lw_args_init(&a);
  add(&a, c->t[A], bytes, LW_TAG_INPUT);
  add(&a, c->t[C], bytes, LW_TAG_INOUT);
  (void)lw_args_add_f32(&a, 1.0f);
  submit(c, c->n->saxpy, &a, 2);
  // 5: E = D + Z on E's home (rank 1): D moves 2 -> 1, Z is all zeros (nothing moves).
  lw_args_init(&a);
  add(&a, c->t[D], bytes, LW_TAG_INPUT);
  add(&a, c->t[Z], bytes, LW_TAG_INPUT);
  add(&a, c->t[E], bytes, LW_TAG_OUTPUT);
  submit(c, c->n->vadd, &a, LW_L4_ANY_RANK);
  // 6: F = A + A through the L3 orch function "orch_vadd" on rank 2.
  lw_args_init(&a);
  add(&a, c->t[A], bytes, LW_TAG_INPUT);
  add(&a, c->t[A], bytes, LW_TAG_INPUT);
  add(&a, c->t[F], bytes, LW_TAG_OUTPUT);
  submit(c, c->n->orch_vadd, &a, 2);
  // 7: I = G + H on rank 1 with G and H inside the task message (two 16 KiB tensors: a message
  // larger than the transport sends at once).
  lw_args_init(&a);
  add(&a, c->t[G], INLINE_N * sizeof(float), LW_TAG_INPUT);
  add(&a, c->t[H], INLINE_N * sizeof(float), LW_TAG_INPUT);
  add(&a, c->t[I], INLINE_N * sizeof(float), LW_TAG_OUTPUT);
  submit(c, c->n->vadd, &a, 1);
  // 256 independent y = 3 x + y on small tensors (inline), spread over both ranks.
  for (int i = 0; i < MANY; ++i) {
    lw_args_init(&a);
    add(&a, c->many_x[i], SMALL * sizeof(float), LW_TAG_INPUT);
    add(&a, c->many_y[i], SMALL * sizeof(float), LW_TAG_INOUT);
    (void)lw_args_add_f32(&a, 3.0f);
    submit(c, c->n->saxpy, &a, LW_L4_ANY_RANK);
  }
  return LW_OK;
}

static int check(const char *what, const float *v, size_t n, float (*want)(size_t)) {
  for (size_t i = 0; i < n; ++i) {
    if (v[i] != want(i)) {
      say("FAILED %s[%zu] = %g, expected %g", what, i, (double)v[i], (double)want(i));
      return 1;
    }
  }
  return 0;
}
static float want_c(size_t i) { return 3.0f * (float)i; }
static float want_d(size_t i) { return 2.0f * 3.0f * (float)i + 1.0f; }
static float want_f(size_t i) { return 2.0f * (float)i; }
static float want_i(size_t i) { return (float)i + 0.5f; }

static int run_dag(lw_l4_t *l4, names_t *n) {
  static float a[N], b[N], cc[N], d[N], e[N], f[N];
  static float mx[MANY][SMALL], my[MANY][SMALL];
  static float g[INLINE_N], h[INLINE_N], out_i[INLINE_N];
  for (size_t i = 0; i < INLINE_N; ++i) {
    g[i] = (float)i;
    h[i] = 0.5f;
    out_i[i] = -1.0f;
  }
  for (size_t i = 0; i < N; ++i) {
    a[i] = (float)i;
    b[i] = 2.0f * (float)i;
    cc[i] = -1.0f;
    d[i] = 1.0f;
    e[i] = -1.0f;
    f[i] = -1.0f;
  }
  ctx_t c = {.l4 = l4, .n = n};
  const uint64_t bytes = N * sizeof(float);
  if (lw_l4_tensor_create(l4, a, bytes, 1, &c.t[A]) != LW_OK ||
      lw_l4_tensor_create(l4, b, bytes, 2, &c.t[B]) != LW_OK ||
      lw_l4_tensor_create(l4, cc, bytes, 1, &c.t[C]) != LW_OK ||
      lw_l4_tensor_create(l4, d, bytes, 2, &c.t[D]) != LW_OK ||
      lw_l4_tensor_create(l4, e, bytes, 1, &c.t[E]) != LW_OK ||
      lw_l4_tensor_create(l4, NULL, bytes, 2, &c.t[Z]) != LW_OK ||
      lw_l4_tensor_create(l4, f, bytes, 2, &c.t[F]) != LW_OK ||
      lw_l4_tensor_create(l4, g, sizeof(g), 1, &c.t[G]) != LW_OK ||
      lw_l4_tensor_create(l4, h, sizeof(h), 1, &c.t[H]) != LW_OK ||
      lw_l4_tensor_create(l4, out_i, sizeof(out_i), 1, &c.t[I]) != LW_OK) {
    die("tensor_create");
  }
  for (int i = 0; i < MANY; ++i) {
    for (int k = 0; k < SMALL; ++k) {
      mx[i][k] = (float)(i + k);
      my[i][k] = (float)k;
    }
    if (lw_l4_tensor_create(l4, mx[i], sizeof(mx[i]), LW_L4_ANY_RANK, &c.many_x[i]) != LW_OK ||
        lw_l4_tensor_create(l4, my[i], sizeof(my[i]), LW_L4_ANY_RANK, &c.many_y[i]) != LW_OK) {
      die("tensor_create many");
    }
  }
  lw_run_report_t rep;
  if (lw_l4_run(l4, dag_orch, &c, &rep) != LW_OK) die("dag run");
  int bad = check("C", cc, N, want_c) + check("D", d, N, want_d) + check("E", e, N, want_d) +
            check("F", f, N, want_f) + check("I", out_i, INLINE_N, want_i);
  for (int i = 0; i < MANY && !bad; ++i) {
    for (int k = 0; k < SMALL; ++k) {
      if (my[i][k] != 3.0f * (float)(i + k) + (float)k) {
        say("FAILED many[%d][%d] = %g", i, k, (double)my[i][k]);
        bad = 1;
        break;
      }
    }
  }
  int32_t where_c = -1, where_e = -1;
  uint64_t v_c = 0, v_e = 0;
  if (lw_l4_tensor_where(l4, c.t[C], &where_c, &v_c) != LW_OK ||
      lw_l4_tensor_where(l4, c.t[E], &where_e, &v_e) != LW_OK) {
    die("where");
  }
  // A rank holds each written version; rank 0 got a copy of each back.
  if (v_c != 3 || v_e != 1 || where_c != 2 || where_e != 1) {
    say("FAILED C is version %llu on rank %d (3 on 2 expected), E version %llu "
        "on rank %d (1 on "
        "1 expected)",
        (unsigned long long)v_c, (int)where_c, (unsigned long long)v_e, (int)where_e);
    bad = 1;
  }
  if (bad) return 1;
  // A second run reads the results where they are and rank 0's copy changed in between.
  d[0] = 100.0f;
  if (lw_l4_tensor_written(l4, c.t[D]) != LW_OK) die("written");
  if (lw_l4_run(l4, dag_orch, &c, &rep) != LW_OK) die("second dag run");
  if (rep.n_tasks != 7 + MANY || rep.n_completed != rep.n_tasks) {
    say("FAILED second run: %u of %u tasks completed", rep.n_completed, rep.n_tasks);
    return 1;
  }
  for (int i = 0; i <= I; ++i) {
    if (lw_l4_tensor_free(l4, c.t[i]) != LW_OK) die("free");
  }
  say("ok dag: %u tasks, results exact, C version %llu on rank %d", rep.n_tasks,
      (unsigned long long)v_c, (int)where_c);
  return 0;
}

typedef struct fail_ctx {
  names_t *n;
  void *x, *y, *w, *q;
  bool cancel_self;
  lw_l4_t *l4;
} fail_ctx_t;

static lw_status_t fail_orch(lw_l4_orch_t *o, void *user) {
  fail_ctx_t *f = user;
  lw_args_t a;
  // A long task on rank 2, unrelated: it is cancelled there when the run fails.
  lw_args_init(&a);
  add(&a, f->w, 64, LW_TAG_OUTPUT);
  (void)lw_args_add_scalar(&a, 60ull * 1000000ull);  // 60 s
  if (lw_l4_submit(o, f->n->sleep, &a, NULL, 2) != LW_OK) die("submit sleep");
  if (f->cancel_self) {
    lw_l4_cancel(f->l4);
    return LW_OK;
  }
  // x gets a version on rank 1 only; then fail writes it there and fails, which loses it; its
  // reader is skipped.
  lw_args_init(&a);
  add(&a, f->x, 64, LW_TAG_OUTPUT);
  if (lw_l4_submit(o, f->n->noop, &a, NULL, 1) != LW_OK) die("submit writer");
  lw_args_init(&a);
  add(&a, f->x, 64, LW_TAG_INOUT);
  (void)lw_args_add_scalar(&a, 7);
  if (lw_l4_submit(o, f->n->fail, &a, NULL, 1) != LW_OK) die("submit fail");
  lw_args_init(&a);
  add(&a, f->x, 64, LW_TAG_INPUT);
  add(&a, f->y, 64, LW_TAG_OUTPUT);
  lw_status_t st = lw_l4_submit(o, f->n->noop, &a, NULL, LW_L4_ANY_RANK);
  if (st != LW_OK && st != LW_POISONED) die("submit dependent");
  return LW_OK;
}

static lw_status_t one_noop(lw_l4_orch_t *o, void *user) {
  fail_ctx_t *f = user;
  lw_args_t a;
  lw_args_init(&a);
  add(&a, f->q, 64, LW_TAG_OUTPUT);
  return lw_l4_submit(o, f->n->noop, &a, NULL, LW_L4_ANY_RANK);
}

static int run_fail(lw_l4_t *l4, names_t *n, bool cancel) {
  fail_ctx_t f = {.n = n, .cancel_self = cancel, .l4 = l4};
  static float x0[16];
  if (lw_l4_tensor_create(l4, x0, 64, 1, &f.x) != LW_OK ||
      lw_l4_tensor_create(l4, NULL, 64, 1, &f.y) != LW_OK ||
      lw_l4_tensor_create(l4, NULL, 64, 2, &f.w) != LW_OK ||
      lw_l4_tensor_create(l4, NULL, 64, 1, &f.q) != LW_OK) {
    die("tensor_create");
  }
  lw_run_report_t rep;
  lw_status_t st = lw_l4_run(l4, fail_orch, &f, &rep);
  char first[LW_ERROR_MESSAGE_BYTES];
  snprintf(first, sizeof(first), "%s", rep.error.message);
  lw_status_t want = cancel ? LW_CANCELLED : LW_TASK_FAILED;
  uint32_t want_ok = cancel ? 0 : 1;  // the first writer of x
  if (st != want || rep.status != want || rep.n_completed != want_ok ||
      rep.n_failed != rep.n_tasks - want_ok) {
    say("FAILED the run gave %s (%s), %u of %u completed; %s expected, %u "
        "completed",
        lw_status_name(st), rep.error.message, rep.n_completed, rep.n_tasks, lw_status_name(want),
        want_ok);
    return 1;
  }
  // The failed writer's tensor is lost (its only copy was on the failed writer's rank).
  int32_t where = 0;
  if (!cancel && (lw_l4_tensor_where(l4, f.x, &where, NULL) != LW_OK || where != -1)) {
    say("FAILED the failed writer's tensor is said to be on rank %d", (int)where);
    return 1;
  }
  // The L4 and both ranks go on.
  if (lw_l4_run(l4, one_noop, &f, &rep) != LW_OK) die("run after the failure");
  say("ok %s: %s: %s", cancel ? "cancel" : "fail", lw_status_name(st), first);
  return 0;
}

// The order the async case's runs started in, and where the last sync run ran.
static _Atomic int g_started;
static int g_nested_at, g_sync_at;
static pthread_t g_sync_ran_on;

// The async case's runs: a long sleep on rank 1, one that must never start, and a short one that
// also checks that lw_l4_run from an orch function is refused.
static lw_status_t long_sleep_orch(lw_l4_orch_t *o, void *user) {
  fail_ctx_t *f = user;
  ++g_started;
  lw_args_t a;
  lw_args_init(&a);
  (void)lw_args_add_scalar(&a, 60ull * 1000000ull);  // 60 s unless cancelled
  return lw_l4_submit(o, f->n->sleep, &a, NULL, 1);
}

static int g_never_ran;
static lw_status_t never_orch(lw_l4_orch_t *o, void *user) {
  (void)o;
  (void)user;
  g_never_ran = 1;
  return LW_OK;
}

static lw_status_t sync_orch(lw_l4_orch_t *o, void *user) {
  (void)o;
  (void)user;
  g_sync_at = ++g_started;
  g_sync_ran_on = pthread_self();
  return LW_OK;
}

typedef struct sync_call {
  lw_l4_t *l4;
  lw_status_t st;
} sync_call_t;

static void *sync_call_main(void *arg) {
  sync_call_t *c = arg;
  c->st = lw_l4_run(c->l4, sync_orch, NULL, NULL);
  return NULL;
}

static lw_status_t nested_orch(lw_l4_orch_t *o, void *user) {
  fail_ctx_t *f = user;
  g_nested_at = ++g_started;
  if (lw_l4_run(f->l4, never_orch, NULL, NULL) != LW_FAILED_PRECONDITION) {
    say("FAILED lw_l4_run from an orch function was not refused");
    return LW_INTERNAL;
  }
  return one_noop(o, user);
}

static int run_async(lw_l4_t *l4, names_t *n) {
  fail_ctx_t f = {.n = n, .l4 = l4};
  if (lw_l4_tensor_create(l4, NULL, 64, 2, &f.q) != LW_OK) die("tensor_create");
  lw_handle_t *h[3] = {NULL, NULL, NULL};
  if (lw_l4_run_async(l4, long_sleep_orch, &f, &h[0]) != LW_OK ||
      lw_l4_run_async(l4, never_orch, &f, &h[1]) != LW_OK ||
      lw_l4_run_async(l4, nested_orch, &f, &h[2]) != LW_OK) {
    die("run_async");
  }
  if (lw_handle_cancel(h[1]) != LW_OK) die("cancel queued");
  if (lw_handle_wait(h[0], 0) != LW_DEADLINE_EXCEEDED) {
    say("FAILED the 60 s run finished at once");
    return 1;
  }
  // A sync run from another thread while runs are queued: it runs after them, in order.
  sync_call_t call = {l4, LW_INTERNAL};
  pthread_t t;
  if (pthread_create(&t, NULL, sync_call_main, &call) != 0) die("pthread_create");
  if (lw_handle_cancel(h[0]) != LW_OK) die("cancel running");
  lw_status_t want[3] = {LW_CANCELLED, LW_CANCELLED, LW_OK};
  for (int i = 0; i < 3; ++i) {
    lw_status_t st = lw_handle_wait(h[i], 60ll * 1000000000ll);
    lw_run_report_t rep;
    if (lw_l4_handle_report(h[i], &rep) != LW_OK) die("handle_report");
    if (st != want[i] || rep.status != want[i]) {
      say("FAILED run %d gave %s (%s), %s expected", i + 1, lw_status_name(st), rep.error.message,
          lw_status_name(want[i]));
      return 1;
    }
    if (i == 1 && (rep.n_tasks != 0 || g_never_ran)) {
      say("FAILED the run cancelled while queued ran");
      return 1;
    }
    lw_handle_release(h[i]);
  }
  pthread_join(t, NULL);
  if (call.st != LW_OK || g_sync_at <= g_nested_at) {
    say("FAILED the sync run gave %s and started %d-th, the third async run %d-th",
        lw_status_name(call.st), g_sync_at, g_nested_at);
    return 1;
  }
  // Nothing queued or running now: lw_l4_run runs its run on the calling thread.
  if (lw_l4_run(l4, sync_orch, NULL, NULL) != LW_OK) die("idle sync run");
  if (!pthread_equal(g_sync_ran_on, pthread_self())) {
    say("FAILED a sync run on an idle L4 did not run on the calling thread");
    return 1;
  }
  say("ok async: running and queued runs cancelled through their handles, the third ran; sync "
      "runs in order, on the caller's thread when idle");
  return 0;
}

// The sub case: sub functions by name. y = 2 x + 1, in a sub child of the rank's L3 worker.
static lw_status_t sub_affine(const lw_kernel_args_t *k) {
  if (k->n_tensors != 2 || k->tensor[0].bytes != k->tensor[1].bytes) return LW_INVALID_ARGUMENT;
  const float *x = k->tensor[0].data;
  float *y = k->tensor[1].data;
  for (size_t i = 0; i < k->tensor[0].bytes / sizeof(float); ++i) y[i] = 2.0f * x[i] + 1.0f;
  return LW_OK;
}

typedef struct sub_ctx {
  lw_callable_handle_t affine, vadd;
  void *x, *y, *w, *v;
} sub_ctx_t;

static lw_status_t sub_orch(lw_l4_orch_t *o, void *user) {
  sub_ctx_t *c = user;
  const uint64_t bytes = N * sizeof(float);
  lw_args_t a;
  // Y = 2 X + 1 on rank 1 (a sub function), W = 2 Y + 1 on rank 2 (Y moves rank 1 -> 2), and
  // V = Y + Y on rank 1 (a kernel beside the sub functions).
  lw_args_init(&a);
  add(&a, c->x, bytes, LW_TAG_INPUT);
  add(&a, c->y, bytes, LW_TAG_OUTPUT);
  LW_RETURN_IF_ERROR(lw_l4_submit(o, c->affine, &a, NULL, 1));
  lw_args_init(&a);
  add(&a, c->y, bytes, LW_TAG_INPUT);
  add(&a, c->w, bytes, LW_TAG_OUTPUT);
  LW_RETURN_IF_ERROR(lw_l4_submit(o, c->affine, &a, NULL, 2));
  lw_args_init(&a);
  add(&a, c->y, bytes, LW_TAG_INPUT);
  add(&a, c->y, bytes, LW_TAG_INPUT);
  add(&a, c->v, bytes, LW_TAG_OUTPUT);
  return lw_l4_submit(o, c->vadd, &a, NULL, 1);
}

static float want_sub_y(size_t i) { return 2.0f * (float)i + 1.0f; }
static float want_sub_w(size_t i) { return 4.0f * (float)i + 3.0f; }
static float want_sub_v(size_t i) { return 4.0f * (float)i + 2.0f; }

static int run_sub(lw_l4_t *l4, names_t *n, lw_callable_handle_t affine) {
  static float x[N], y[N], w[N], v[N];
  for (size_t i = 0; i < N; ++i) {
    x[i] = (float)i;
    y[i] = w[i] = v[i] = -1.0f;
  }
  sub_ctx_t c = {.affine = affine, .vadd = n->vadd};
  const uint64_t bytes = N * sizeof(float);
  if (lw_l4_tensor_create(l4, x, bytes, 1, &c.x) != LW_OK ||
      lw_l4_tensor_create(l4, y, bytes, 1, &c.y) != LW_OK ||
      lw_l4_tensor_create(l4, w, bytes, 2, &c.w) != LW_OK ||
      lw_l4_tensor_create(l4, v, bytes, 1, &c.v) != LW_OK) {
    die("tensor_create");
  }
  lw_run_report_t rep;
  lw_status_t st = lw_l4_run(l4, sub_orch, &c, &rep);
  if (st != LW_OK) {
    say("FAILED sub run: %s: %s", lw_status_name(st), rep.error.message);
    return 1;
  }
  int bad = check("Y", y, N, want_sub_y) + check("W", w, N, want_sub_w) + check("V", v, N, want_sub_v);
  if (bad) return 1;
  say("ok sub: sub functions by name on two ranks, results exact");
  return 0;
}

// The args case.
static int g_refusals;
static void refused(lw_status_t got, lw_status_t want, const char *needle, const char *what) {
  const char *msg = lw_last_error()->message;
  if (got != want || !strstr(msg, needle)) {
    say("FAILED %s: %s (%s), expected %s naming '%s'", what, lw_status_name(got), msg,
        lw_status_name(want), needle);
    _exit(2);
  }
  g_refusals++;
}

typedef struct args_ctx {
  lw_l4_t *l4;
  names_t *n;
  void *t;
} args_ctx_t;

static lw_status_t args_orch(lw_l4_orch_t *o, void *user) {
  args_ctx_t *c = user;
  lw_args_t a;
  lw_args_init(&a);
  add(&a, c->t, 64, LW_TAG_OUTPUT);
  lw_callable_handle_t bogus = {.id = 12345};
  refused(lw_l4_submit(o, bogus, &a, NULL, 1), LW_NOT_FOUND, "is not one lw_l4_register gave",
          "an unknown handle");
  refused(lw_l4_submit(o, c->n->noop, &a, NULL, 7), LW_INVALID_ARGUMENT, "rank 7 (1..2",
          "a rank out of range");
  lw_run_config_t rc;
  lw_run_config_default(&rc);
  rc.timeout_ns = -5;
  refused(lw_l4_submit(o, c->n->noop, &a, &rc, 1), LW_INVALID_ARGUMENT, "timeout_ns -5",
          "a negative timeout");
  lw_args_t wrong;
  lw_args_init(&wrong);
  add(&wrong, c->t, 32, LW_TAG_OUTPUT);
  refused(lw_l4_submit(o, c->n->noop, &wrong, NULL, 1), LW_INVALID_ARGUMENT,
          "is 64 bytes, the args say 32", "the wrong size");
  static float plain[16];
  lw_args_init(&wrong);
  add(&wrong, plain, sizeof(plain), LW_TAG_INPUT);
  refused(lw_l4_submit(o, c->n->noop, &wrong, NULL, 1), LW_INVALID_ARGUMENT,
          "is not a token of lw_l4_tensor_create", "plain memory as a tensor");
  refused(lw_l4_tensor_free(c->l4, c->t), LW_FAILED_PRECONDITION, "a run is in progress",
          "a free during the run");
  if (lw_l4_last_task(o) != 0) {
    say("FAILED a refused submit counted as a task");
    _exit(2);
  }
  return lw_l4_submit(o, c->n->noop, &a, NULL, LW_L4_ANY_RANK);
}

static int run_args(lw_l4_t *l4, names_t *n) {
  lw_callable_handle_t again;
  lw_callable_t none = {0};
  refused(lw_l4_register(l4, "noop", &none, &again), LW_ALREADY_EXISTS, "'noop' is already",
          "a name taken twice");
  refused(lw_l4_register(l4, "has space", &none, &again), LW_INVALID_ARGUMENT,
          "printable bytes without spaces", "a name with a space");
  void *t = NULL;
  refused(lw_l4_tensor_create(l4, NULL, 0, 1, &t), LW_INVALID_ARGUMENT, "0 bytes",
          "a tensor of no bytes");
  refused(lw_l4_tensor_create(l4, NULL, 64, 9, &t), LW_INVALID_ARGUMENT, "home rank 9",
          "a home rank out of range");
  refused(lw_l4_serve(l4), LW_FAILED_PRECONDITION, "rank 0 is the L4", "serving on rank 0");
  args_ctx_t c = {.l4 = l4, .n = n};
  if (lw_l4_tensor_create(l4, NULL, 64, 1, &c.t) != LW_OK) die("tensor_create");
  lw_run_report_t rep;
  if (lw_l4_run(l4, args_orch, &c, &rep) != LW_OK || rep.n_tasks != 1 || rep.n_completed != 1) {
    say("FAILED the run after the refusals: %s, %u of %u tasks", rep.error.message, rep.n_completed,
        rep.n_tasks);
    return 1;
  }
  lw_handle_t *h = NULL;
  if (lw_l4_run_async(l4, args_orch, &c, &h) != LW_OK) die("run_async");
  (void)lw_handle_wait(h, LW_WAIT_FOREVER);
  lw_run_report_t r2;
  refused(lw_l4_handle_report(NULL, &r2), LW_INVALID_ARGUMENT, "not an L4 run handle",
          "a report of no handle");
  lw_handle_release(h);
  say("ok args: %d refusals, each naming what was wrong", g_refusals);
  return 0;
}

// The move fault: X's only copy is on rank 1, which stops (its fault thread, at 1.5 s); a task on
// rank 2 reads X once rank 1 stopped, before the L4 can know (2 s of silence).
typedef struct move_ctx {
  names_t *n;
  void *x;
  int32_t rank;
  lw_tag_t tag;
} move_ctx_t;

static lw_status_t move_orch(lw_l4_orch_t *o, void *user) {
  move_ctx_t *m = user;
  lw_args_t a;
  lw_args_init(&a);
  add(&a, m->x, 4u << 20, m->tag);
  return lw_l4_submit(o, m->n->noop, &a, NULL, m->rank);
}

static int run_move_fault(lw_l4_t *l4, names_t *n) {
  move_ctx_t m = {.n = n, .rank = 1, .tag = LW_TAG_OUTPUT};
  if (lw_l4_tensor_create(l4, NULL, 4u << 20, 1, &m.x) != LW_OK) die("tensor_create");
  lw_run_report_t rep;
  if (lw_l4_run(l4, move_orch, &m, &rep) != LW_OK) die("writer run");
  struct timespec ts = {1, 800000000};  // rank 1 is stopped by then, not yet found hung
  nanosleep(&ts, NULL);
  m.rank = 2;
  m.tag = LW_TAG_INPUT;
  lw_status_t st = lw_l4_run(l4, move_orch, &m, &rep);
  say("run: %s: %s", lw_status_name(st), rep.error.message);
  return st == LW_OK;
}

// A fault run: a long task on every rank, then the fault lands in the chosen rank.
static lw_status_t long_orch(lw_l4_orch_t *o, void *user) {
  fail_ctx_t *f = user;
  lw_args_t a;
  for (int32_t r = 1; r <= 2; ++r) {
    lw_args_init(&a);
    (void)lw_args_add_scalar(&a, 30ull * 1000000ull);  // 30 s, unless cancelled
    if (lw_l4_submit(o, f->n->sleep, &a, NULL, r) != LW_OK) die("submit sleep");
  }
  return LW_OK;
}

static void *fault_main(void *arg) {
  (void)arg;
  struct timespec ts = {1, 500000000};  // while the long tasks run
  nanosleep(&ts, NULL);
  if (strcmp(g_fault_kind, "kill") == 0) raise(SIGKILL);
  if (strcmp(g_fault_kind, "stop") == 0) raise(SIGSTOP);
  return NULL;
}

int main(int argc, char **argv) {
  const char *f = getenv("LW_L4_TEST_FAULT");
  if (f && *f) {
    const char *colon = strchr(f, ':');
    if (colon && (size_t)(colon - f) < sizeof(g_fault_kind)) {
      memcpy(g_fault_kind, f, (size_t)(colon - f));
      g_fault_rank = atoi(colon + 1);
    }
  }
  const char *cs = getenv("LW_L4_TEST_CASE");
  if (cs && *cs) g_case = cs;
  lw_l4_config_t cfg;
  lw_l4_config_default(&cfg);
  cfg.l3.n_chips = 2;
  cfg.l3.arena_bytes = 64ull << 20;
  bool subs = strcmp(g_case, "sub") == 0;
  if (subs) cfg.l3.n_subs = 1;
  lw_l4_t *l4 = NULL;
  if (lw_l4_create(&argc, &argv, &cfg, &l4) != LW_OK) die("lw_l4_create");
  g_rank = lw_l4_rank(l4);
  names_t n;
  register_all(l4, &n);
  lw_callable_handle_t affine = {0};
  if (subs && lw_l4_register_sub(l4, "affine", sub_affine, &affine) != LW_OK) die("register_sub");
  pthread_t fault;
  bool faulty = g_fault_rank == g_rank;
  if (faulty && pthread_create(&fault, NULL, fault_main, NULL) != 0) die("fault thread");
  if (g_rank > 0) {
    lw_status_t st = lw_l4_serve(l4);
    if (st != LW_OK) say("served: %s", lw_last_error()->message);
    int rc = lw_l4_destroy(l4);
    say("done: serve %s, exit %d", lw_status_name(st), rc);
    if (rc != 0) _exit(4);
    return st == LW_OK ? 0 : 4;
  }
  int bad = 0;
  if (g_fault_rank >= 0 && strcmp(g_case, "move") == 0) {
    bad = run_move_fault(l4, &n);
  } else if (g_fault_rank >= 0) {
    fail_ctx_t fc = {.n = &n, .l4 = l4};
    lw_run_report_t rep;
    lw_status_t st = lw_l4_run(l4, long_orch, &fc, &rep);
    say("run: %s: %s", lw_status_name(st), rep.error.message);
    bad = st == LW_OK;
  } else if (strcmp(g_case, "fail") == 0) {
    bad = run_fail(l4, &n, false);
  } else if (strcmp(g_case, "args") == 0) {
    bad = run_args(l4, &n);
  } else if (strcmp(g_case, "async") == 0) {
    bad = run_async(l4, &n);
  } else if (strcmp(g_case, "cancel") == 0) {
    bad = run_fail(l4, &n, true);
  } else if (subs) {
    bad = run_sub(l4, &n, affine);
  } else {
    bad = run_dag(l4, &n);
  }
  int rc = lw_l4_destroy(l4);
  say("done: exit %d", rc);
  if (rc != 0) _exit(rc);
  return bad ? 1 : 0;
}
