// tools/bench_dispatch.c — `lanework bench dispatch`: the empty-run round trip at L2 (and L3
// once the worker exists), next to the floors measured in the same run: a raw shared-memory
// spin round trip and a raw futex round trip between two processes.
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "tools/bench.h"
#include "tools/dispatch_l3.h"

typedef struct pingpong {
  _Atomic uint32_t ping;
  char pad1[60];
  _Atomic uint32_t pong;
  char pad2[60];
} pingpong_t;

// Round trip between this process and a forked one over a shared page. futex = false: both
// sides spin on the words; true: both sides sleep in FUTEX_WAIT on shared words.
static double pingpong_rtt_us(long iters, bool futex) {
  pingpong_t *pp = mmap(NULL, sizeof(*pp), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
  if (pp == MAP_FAILED) return -1.0;
  atomic_store(&pp->ping, 0);
  atomic_store(&pp->pong, 0);
  pid_t pid = fork();
  if (pid < 0) {
    munmap(pp, sizeof(*pp));
    return -1.0;
  }
  if (pid == 0) {
    for (uint32_t i = 1; i <= (uint32_t)iters; ++i) {
      while (atomic_load_explicit(&pp->ping, memory_order_acquire) != i) {
        if (futex) {
          (void)lw__sys_futex_wait(&pp->ping, i - 1, LW_DEADLINE_NEVER, true);
        } else {
          lw__cpu_relax();
        }
      }
      atomic_store_explicit(&pp->pong, i, memory_order_release);
      if (futex) (void)lw__sys_futex_wake(&pp->pong, 1, true);
    }
    _exit(0);
  }
  double *rtt = malloc(sizeof(double) * (size_t)iters);
  for (uint32_t i = 1; i <= (uint32_t)iters; ++i) {
    double t0 = lw__bench_now_us();
    atomic_store_explicit(&pp->ping, i, memory_order_release);
    if (futex) (void)lw__sys_futex_wake(&pp->ping, 1, true);
    while (atomic_load_explicit(&pp->pong, memory_order_acquire) != i) {
      if (futex) {
        (void)lw__sys_futex_wait(&pp->pong, i - 1, LW_DEADLINE_NEVER, true);
      } else {
        lw__cpu_relax();
      }
    }
    if (rtt) rtt[i - 1] = lw__bench_now_us() - t0;
  }
  int status;
  waitpid(pid, &status, 0);
  munmap(pp, sizeof(*pp));
  double p50 = rtt ? lw__bench_quantile(rtt, (size_t)iters, 0.5) : -1.0;
  free(rtt);
  return p50;
}

static int l2_empty_run(long iters, double *out_p50, double *out_p99) {
  lw_callable_t noop;
  if (!lw__bench_load_kernel("noop", &noop)) return 1;
  lw_chip_t *chip = NULL;
  lw_callable_handle_t h;
  double *v = malloc(sizeof(double) * (size_t)iters);
  int rc = 1;
  lw_status_t st = lw_chip_open(NULL, &chip);
  if (st == LW_OK) st = lw_chip_register(chip, &noop, &h);
  for (long i = 0; st == LW_OK && i < 1000; ++i) st = lw_chip_run(chip, h, NULL, NULL, NULL);
  for (long i = 0; st == LW_OK && v && i < iters; ++i) {
    double t0 = lw__bench_now_us();
    st = lw_chip_run(chip, h, NULL, NULL, NULL);
    v[i] = lw__bench_now_us() - t0;
  }
  if (st != LW_OK) {
    lw__bench_fail("L2 empty run", st);
  } else if (v) {
    *out_p50 = lw__bench_quantile(v, (size_t)iters, 0.5);
    *out_p99 = lw__bench_quantile(v, (size_t)iters, 0.99);
    rc = 0;
  }
  free(v);
  lw_chip_close(chip);
  lw_callable_free_loaded(&noop);
  return rc;
}

// The figures that are measured quiet and, with --load, again under load.
typedef struct figures {
  double l2_p50, l2_p99;
  int l3_rc;
  lw_dispatch_l3_result_t l3;
} figures_t;

static int measure(long iters, figures_t *f, const char *when) {
  memset(f, 0, sizeof(*f));
  lw__bench_progress("%sL2 empty runs (%ld)", when, iters);
  if (l2_empty_run(iters, &f->l2_p50, &f->l2_p99) != 0) return 1;
  lw__bench_progress("%sL3 empty runs and DAGs (%ld)", when, iters);
  f->l3_rc = lw__dispatch_l3(iters, &f->l3);
  return 0;
}

// n processes that spin until killed: the "CPUs busy with other work" of the table.
// Each starts a session of its own (setsid), as another program on the machine would be: with
// the kernel's autogroup scheduling (on by default), CPU time is shared fairly between
// sessions first and among a session's threads second. in_session keeps them in the
// benchmark's session instead, the case of a program that oversubscribes its own CPUs.
static int load_start(int n, pid_t *pids, bool in_session) {
  for (int i = 0; i < n; ++i) {
    pids[i] = fork();
    if (pids[i] < 0) {
      for (int k = 0; k < i; ++k) kill(pids[k], SIGKILL);
      for (int k = 0; k < i; ++k) waitpid(pids[k], NULL, 0);
      return -1;
    }
    if (pids[i] == 0) {
      if (!in_session) (void)setsid();
      volatile uint64_t spin = 0;
      for (;;) ++spin;
    }
  }
  return 0;
}

static void load_stop(int n, const pid_t *pids) {
  for (int i = 0; i < n; ++i) kill(pids[i], SIGKILL);
  for (int i = 0; i < n; ++i) waitpid(pids[i], NULL, 0);
}

// Where the layered DAG's time went (lw_dispatch_l3_result_t.where_ok and what follows it).
static void print_where(const lw_dispatch_l3_result_t *r) {
  if (!r->where_ok) {
    printf("  where its time went: not measured (a thread's schedstat in /proc could not be "
           "read)\n");
    return;
  }
  static const char *const label[LW_BENCH_ROLE_COUNT] = {"caller", "scheduler", "run lane",
                                                         "mailbox loop", "other"};
  printf("  the DAG's runs, us per task:");
  for (size_t i = 0; i < sizeof(r->runs_per_task_us) / sizeof(r->runs_per_task_us[0]); ++i) {
    printf(" %.2f", r->runs_per_task_us[i]);
  }
  printf("\n  where their time went, us per task (mean %.2f): on a CPU / waiting for one "
         "(sleeps per 1000 tasks)\n",
         r->mean_per_task_us);
  printf("   ");
  for (int role = 0; role < LW_BENCH_ROLE_COUNT; ++role) {
    printf(" %s %.2f/%.2f (%.0f)%s", label[role], r->cpu_us_per_task[role],
           r->wait_us_per_task[role], r->sleeps_per_1000_tasks[role],
           role + 1 < LW_BENCH_ROLE_COUNT ? "," : "\n");
  }
}

static void print_figures(const char *when, const figures_t *f, long iters) {
  printf("%s\n", when);
  printf("  L2 empty run (lw_chip_run of noop):       p50 %.2f us, p99 %.2f us (%ld runs)\n",
         f->l2_p50, f->l2_p99, iters);
  if (f->l3_rc == 0) {
    printf("  L3 empty run (lw_worker_run, 1 noop task): p50 %.2f us, p99 %.2f us\n",
           f->l3.empty_p50_us, f->l3.empty_p99_us);
    printf("  L3 per task in a %d-task layered DAG:    %.2f us\n", f->l3.dag_tasks,
           f->l3.per_task_us);
    printf("  L3 per task, same DAG, RAW edges only:    %.2f us (the hazard ordering costs the "
           "difference)\n",
           f->l3.raw_only_per_task_us);
    printf("  L3 per task in a %d-task chain (chip 0): %.2f us\n", f->l3.dag_tasks,
           f->l3.chain_per_task_us);
    print_where(&f->l3);
  } else {
    printf("  L3: not measured (%s)\n", f->l3.why);
  }
}

// "l3_per_task_where": {"mean_us": m, "runs_us": [nine figures], "caller": {"cpu_us": c,
// "wait_us": w, "sleeps_per_1000_tasks": s}, "scheduler": {...}, ...}, or null.
static void json_where(lw_json_t *j, const lw_dispatch_l3_result_t *r) {
  lw__json_key(j, "l3_per_task_where");
  if (!r->where_ok) {
    lw__json_null(j);
    return;
  }
  lw__json_begin_object(j);
  lw__json_kv_fixed(j, "mean_us", r->mean_per_task_us, 3);
  lw__json_key(j, "runs_us");
  lw__json_begin_array(j);
  for (size_t i = 0; i < sizeof(r->runs_per_task_us) / sizeof(r->runs_per_task_us[0]); ++i) {
    lw__json_fixed(j, r->runs_per_task_us[i], 3);
  }
  lw__json_end_array(j);
  for (int role = 0; role < LW_BENCH_ROLE_COUNT; ++role) {
    lw__json_key(j, lw__bench_role_name((lw_bench_role_t)role));
    lw__json_begin_object(j);
    lw__json_kv_fixed(j, "cpu_us", r->cpu_us_per_task[role], 3);
    lw__json_kv_fixed(j, "wait_us", r->wait_us_per_task[role], 3);
    lw__json_kv_fixed(j, "sleeps_per_1000_tasks", r->sleeps_per_1000_tasks[role], 1);
    lw__json_end_object(j);
  }
  lw__json_end_object(j);
}

static void json_figures(lw_json_t *j, const figures_t *f) {
  lw__json_kv_fixed(j, "l2_empty_run_p50_us", f->l2_p50, 3);
  lw__json_kv_fixed(j, "l2_empty_run_p99_us", f->l2_p99, 3);
  if (f->l3_rc == 0) {
    lw__json_kv_fixed(j, "l3_empty_run_p50_us", f->l3.empty_p50_us, 3);
    lw__json_kv_fixed(j, "l3_empty_run_p99_us", f->l3.empty_p99_us, 3);
    lw__json_kv_fixed(j, "l3_per_task_us", f->l3.per_task_us, 3);
    lw__json_kv_fixed(j, "l3_chain_per_task_us", f->l3.chain_per_task_us, 3);
    lw__json_kv_fixed(j, "l3_raw_only_per_task_us", f->l3.raw_only_per_task_us, 3);
    json_where(j, &f->l3);
  } else {
    lw__json_key(j, "l3_empty_run_p50_us");
    lw__json_null(j);
    lw__json_key(j, "l3_empty_run_p99_us");
    lw__json_null(j);
    lw__json_key(j, "l3_per_task_us");
    lw__json_null(j);
    lw__json_key(j, "l3_chain_per_task_us");
    lw__json_null(j);
    lw__json_key(j, "l3_raw_only_per_task_us");
    lw__json_null(j);
    lw__json_key(j, "l3_per_task_where");
    lw__json_null(j);
  }
}

int lw__bench_dispatch(const lw_bench_opts_t *o) {
  long iters = o->iters > 0 ? o->iters : 20000;
  figures_t quiet, loaded;
  if (measure(iters, &quiet, "") != 0) return 1;
  lw__bench_progress("shared-memory spin and futex floors");
  double spin = pingpong_rtt_us(iters, false);
  double futex = pingpong_rtt_us(iters < 20000 ? iters : 20000, true);
  if (o->load > 0) {
    pid_t pids[LW_BENCH_MAX_LOAD];
    if (load_start(o->load, pids, o->load_in_session) != 0) {
      fprintf(stderr, "lanework bench dispatch: cannot start the load processes\n");
      return 1;
    }
    int rc = measure(iters, &loaded, "under load: ");
    load_stop(o->load, pids);
    if (rc != 0) return 1;
  }

  lw__bench_progress_end();
  print_figures("quiet:", &quiet, iters);
  if (o->load > 0) {
    char when[96];
    snprintf(when, sizeof(when), "with %d busy-loop process%s beside it (--load %d%s):",
             o->load, o->load == 1 ? "" : "es", o->load,
             o->load_in_session ? ", in this session" : ", each in its own session");
    print_figures(when, &loaded, iters);
  }
  printf("floor: shared-memory spin round trip:  p50 %.2f us\n", spin);
  printf("floor: futex round trip (2 processes): p50 %.2f us\n", futex);
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "dispatch");
    lw__json_kv_int(&j, "iters", iters);
    json_figures(&j, &quiet);
    lw__json_kv_fixed(&j, "shm_spin_rtt_us", spin, 3);
    lw__json_kv_fixed(&j, "futex_rtt_us", futex, 3);
    lw__json_kv_int(&j, "load", o->load);
    if (o->load > 0) {
      lw__json_kv_bool(&j, "load_in_session", o->load_in_session);
      lw__json_key(&j, "loaded");
      lw__json_begin_object(&j);
      json_figures(&j, &loaded);
      lw__json_end_object(&j);
    }
    return lw__bench_json_end(&j, "dispatch");
  }
  return 0;
}
