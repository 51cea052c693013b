// tools/bench_dispatch.c — the `lanework bench dispatch` driver (see bench_dispatch.h).
//
// Kinds, in this order: the workload's floors, L2, L3 and (another backend than sim) L3 sim.
// Every kind keeps its chip, worker or floor open for the whole run, warms up once (PoCL
// compiles a kernel's machine code at its first enqueue, and first runs touch cold pages;
// neither belongs to a dispatch figure), then is sampled in ROUNDS interleaved rounds. The
// p50s and p99s are over every sample; the per-round p50 ratios give their spread.
#include "tools/bench_dispatch.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanework/worker.h"
#include "tools/dispatch_l3.h"
#include "tools/tool.h"

#define ROUNDS 10
#define WARMUP 200
#define MAX_KINDS (LW_DISPATCH_MAX_FLOORS + 3)

typedef struct sides {
  const lw_dispatch_workload_t *w, *ref;
  void *floor[LW_DISPATCH_MAX_FLOORS];
  lw_chip_t *chip;
  lw_callable_handle_t h2;
  lw_dispatch_l3_side_t l3, l3ref;
  int n_kinds, k_l2, k_l3, k_ref;  // k_ref -1 without a reference
} sides_t;

// One measurement of every kind (quiet, or under load).
typedef struct phase {
  double p50[MAX_KINDS], p99[MAX_KINDS];
  double round_p50[MAX_KINDS][ROUNDS];
  int dag_rc;  // 0: dag measured
  lw_dispatch_l3_result_t dag;
} phase_t;

static const char *kind_name(const sides_t *s, int k) {
  if (k < s->w->n_floors) return s->w->floors[k].name;
  return k == s->k_l2 ? "L2" : k == s->k_l3 ? "L3" : "L3 sim";
}

// n samples of kind k into v (NULL: warm-up, not kept). false after printing why.
static bool sample(sides_t *s, int k, long n, double *v) {
  static double scratch[WARMUP];
  if (!v) {
    if (n > WARMUP) n = WARMUP;
    v = scratch;
  }
  if (k < s->w->n_floors) return s->w->floors[k].sample(s->floor[k], n, v);
  lw_status_t st = LW_OK;
  if (k == s->k_l2) {
    for (long i = 0; st == LW_OK && i < n; ++i) {
      double t0 = lw__bench_now_us();
      st = lw_chip_run(s->chip, s->h2, NULL, NULL, NULL);
      v[i] = lw__bench_now_us() - t0;
    }
  } else {
    st = lw__dispatch_l3_sample(k == s->k_l3 ? &s->l3 : &s->l3ref, n, v);
  }
  if (st != LW_OK) {
    lw__bench_fail(kind_name(s, k), st);
    return false;
  }
  return true;
}

static int measure(sides_t *s, long per_round, double **v, phase_t *p, const char *when) {
  memset(p, 0, sizeof(*p));
  long total = per_round * ROUNDS;
  lw__bench_progress("%swarm-up", when);
  for (int k = 0; k < s->n_kinds; ++k) {
    if (!sample(s, k, WARMUP, NULL)) return 1;
  }
  // Each round starts with another kind: whatever the kind before leaves behind (threads that
  // spin a while before they sleep, caches) then falls on every kind alike.
  for (int r = 0; r < ROUNDS; ++r) {
    lw__bench_progress("%sround %d/%d", when, r + 1, ROUNDS);
    for (int i = 0; i < s->n_kinds; ++i) {
      int k = (r + i) % s->n_kinds;
      if (!sample(s, k, per_round, v[k] + r * per_round)) return 1;
      p->round_p50[k][r] = lw__bench_median(v[k] + r * per_round, (size_t)per_round);
    }
  }
  for (int k = 0; k < s->n_kinds; ++k) {
    p->p50[k] = lw__bench_quantile(v[k], (size_t)total, 0.5);
    p->p99[k] = lw__bench_quantile(v[k], (size_t)total, 0.99);
  }
  p->dag_rc = 1;
  p->dag.why = "not measured on this backend";
  if (s->w->dag) {
    lw__bench_progress("%sL3 DAGs", when);
    p->dag_rc = lw__dispatch_l3_dags(&s->l3, &p->dag);
  }
  return 0;
}

// What a task's own steps cost on this machine, beside the cross-core figures: the clock the
// lanes read a few times per task (a VM's clocksource can make it a system call) and the
// spin's pause. Medians of 9 batches.
typedef struct machine {
  double clock_ns, pause_ns;
  char clocksource[32];
} machine_t;

static void machine_measure(machine_t *m) {
  enum { BATCHES = 9, CLOCK_READS = 20000, PAUSES = 2000 };
  double c[BATCHES], p[BATCHES];
  for (int b = 0; b < BATCHES; ++b) {
    int64_t t0 = lw__now_ns();
    for (int i = 0; i < CLOCK_READS; ++i) (void)lw__now_ns();  // a call into another file
    int64_t t1 = lw__now_ns();
    for (int i = 0; i < PAUSES; ++i) lw__cpu_relax();
    int64_t t2 = lw__now_ns();
    c[b] = (double)(t1 - t0) / CLOCK_READS;
    p[b] = (double)(t2 - t1) / PAUSES;
  }
  m->clock_ns = lw__bench_median(c, BATCHES);
  m->pause_ns = lw__bench_median(p, BATCHES);
  lw__tool_read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                     m->clocksource, sizeof(m->clocksource));
  if (!m->clocksource[0]) snprintf(m->clocksource, sizeof(m->clocksource), "unknown");
}

// n processes that spin until killed: the "CPUs busy with other work" of issue 8's table.
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

// ---------------------------------------------------------------------------------------------
// Output

// The launch-floor ratios of a phase (launch_floor >= 0): L2 / floor, and with a reference
// (L3 - L3 sim) / floor; per round for their spread.
typedef struct ratios {
  double l2, l2_lo, l2_hi;
  double l3x, l3x_lo, l3x_hi;
  double l3_target;
  bool l2_ok, l3_ok;
} ratios_t;

static double l2_target(const lw_dispatch_workload_t *w) {
  return w->l2_target > 0 ? w->l2_target : 1.5;
}

static void ratios_of(const sides_t *s, const phase_t *p, ratios_t *r) {
  int f = s->w->launch_floor;
  r->l2 = p->p50[s->k_l2] / p->p50[f];
  r->l2_lo = r->l3x_lo = INFINITY;
  r->l2_hi = r->l3x_hi = -INFINITY;
  for (int i = 0; i < ROUNDS; ++i) {
    double l2 = p->round_p50[s->k_l2][i] / p->round_p50[f][i];
    r->l2_lo = fmin(r->l2_lo, l2);
    r->l2_hi = fmax(r->l2_hi, l2);
    if (s->k_ref >= 0) {
      double x = (p->round_p50[s->k_l3][i] - p->round_p50[s->k_ref][i]) / p->round_p50[f][i];
      r->l3x_lo = fmin(r->l3x_lo, x);
      r->l3x_hi = fmax(r->l3x_hi, x);
    }
  }
  r->l2_ok = r->l2 <= l2_target(s->w);
  if (s->k_ref >= 0) {
    r->l3x = (p->p50[s->k_l3] - p->p50[s->k_ref]) / p->p50[f];
    r->l3_target = p->p50[s->k_ref] + p->p50[f];
    r->l3_ok = p->p50[s->k_l3] <= r->l3_target;
  }
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

static void print_phase(const sides_t *s, const char *when, const phase_t *p, long total) {
  const lw_dispatch_workload_t *w = s->w;
  printf("%s %s, %ld samples of each in %d interleaved rounds:\n", when, w->empty_name, total,
         ROUNDS);
  for (int k = 0; k < s->n_kinds; ++k) {
    char what[160];
    if (k < w->n_floors) {
      snprintf(what, sizeof(what), "%s", w->floors[k].what);
    } else if (k == s->k_l2) {
      snprintf(what, sizeof(what), "lw_chip_run on a %s chip", w->backend);
    } else if (k == s->k_l3) {
      snprintf(what, sizeof(what), "lw_worker_run of 1 task, %s chip child", w->backend);
    } else {
      snprintf(what, sizeof(what), "lw_worker_run of 1 task, sim chip child (%s)",
               s->ref->empty_name);
    }
    printf("  %-8s p50 %8.2f us  p99 %8.2f us  (%s)\n", kind_name(s, k), p->p50[k], p->p99[k],
           what);
  }
  if (w->launch_floor >= 0) {
    ratios_t r;
    ratios_of(s, p, &r);
    printf("  L2 / %s = %.2f (rounds %.2f-%.2f; target <= %.1f: %s)\n",
           w->floors[w->launch_floor].name, r.l2, r.l2_lo, r.l2_hi, l2_target(w),
           r.l2_ok ? "holds" : "missed");
    if (s->k_ref >= 0) {
      printf("  L3 - L3 sim = %.2f us = %.2f x %s (rounds %.2f-%.2f); L3 %.2f us vs L3 sim + "
             "%s %.2f us: %s\n",
             p->p50[s->k_l3] - p->p50[s->k_ref], r.l3x, w->floors[w->launch_floor].name,
             r.l3x_lo, r.l3x_hi, p->p50[s->k_l3], w->floors[w->launch_floor].name, r.l3_target,
             r.l3_ok ? "holds" : "missed");
    }
  }
  if (!w->dag) return;
  if (p->dag_rc != 0) {
    printf("  L3 DAGs: not measured (%s)\n", p->dag.why);
    return;
  }
  printf("  L3 per task in a %d-task layered DAG:    %.2f us\n", p->dag.dag_tasks,
         p->dag.per_task_us);
  printf("  L3 per task, same DAG, RAW edges only:    %.2f us (the hazard ordering costs the "
         "difference)\n",
         p->dag.raw_only_per_task_us);
  printf("  L3 per task in a %d-task chain (chip 0): %.2f us\n", p->dag.dag_tasks,
         p->dag.chain_per_task_us);
  print_where(&p->dag);
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

static void json_phase(lw_json_t *j, const sides_t *s, const phase_t *p) {
  const lw_dispatch_workload_t *w = s->w;
  for (int f = 0; f < w->n_floors; ++f) {
    lw__json_kv_fixed(j, w->floors[f].json_p50, p->p50[f], 3);
    if (w->floors[f].json_p99) lw__json_kv_fixed(j, w->floors[f].json_p99, p->p99[f], 3);
  }
  lw__json_kv_fixed(j, "l2_empty_run_p50_us", p->p50[s->k_l2], 3);
  lw__json_kv_fixed(j, "l2_empty_run_p99_us", p->p99[s->k_l2], 3);
  lw__json_kv_fixed(j, "l3_empty_run_p50_us", p->p50[s->k_l3], 3);
  lw__json_kv_fixed(j, "l3_empty_run_p99_us", p->p99[s->k_l3], 3);
  if (s->k_ref >= 0) {
    lw__json_kv_fixed(j, "l3_sim_empty_run_p50_us", p->p50[s->k_ref], 3);
    lw__json_kv_fixed(j, "l3_sim_empty_run_p99_us", p->p99[s->k_ref], 3);
  }
  if (w->launch_floor >= 0) {
    ratios_t r;
    ratios_of(s, p, &r);
    lw__json_kv_fixed(j, "l2_over_floor", r.l2, 3);
    lw__json_kv_fixed(j, "l2_over_floor_round_min", r.l2_lo, 3);
    lw__json_kv_fixed(j, "l2_over_floor_round_max", r.l2_hi, 3);
    lw__json_kv_fixed(j, "l2_target", l2_target(w), 2);
    lw__json_kv_bool(j, "l2_target_holds", r.l2_ok);
    if (s->k_ref >= 0) {
      lw__json_kv_fixed(j, "l3_minus_l3_sim_us", p->p50[s->k_l3] - p->p50[s->k_ref], 3);
      lw__json_kv_fixed(j, "l3_minus_l3_sim_over_floor", r.l3x, 3);
      lw__json_kv_fixed(j, "l3_minus_l3_sim_over_floor_round_min", r.l3x_lo, 3);
      lw__json_kv_fixed(j, "l3_minus_l3_sim_over_floor_round_max", r.l3x_hi, 3);
      lw__json_kv_fixed(j, "l3_target_us", r.l3_target, 3);
      lw__json_kv_bool(j, "l3_target_holds", r.l3_ok);
    }
  }
  if (!w->dag) return;
  bool ok = p->dag_rc == 0;
  lw__json_kv_fixed(j, "l3_per_task_us", ok ? p->dag.per_task_us : NAN, 3);
  lw__json_kv_fixed(j, "l3_chain_per_task_us", ok ? p->dag.chain_per_task_us : NAN, 3);
  lw__json_kv_fixed(j, "l3_raw_only_per_task_us", ok ? p->dag.raw_only_per_task_us : NAN, 3);
  if (ok) {
    json_where(j, &p->dag);
  } else {
    lw__json_key(j, "l3_per_task_where");
    lw__json_null(j);
  }
}

// ---------------------------------------------------------------------------------------------

static lw_status_t sides_open(sides_t *s, lw_callable_t *empty, lw_callable_t *ref_empty,
                              const char **what) {
  const lw_dispatch_workload_t *w = s->w;
  *what = "a floor";
  for (int f = 0; f < w->n_floors; ++f) {
    if (!(s->floor[f] = w->floors[f].open())) return LW_UNAVAILABLE;
  }
  lw_chip_config_t cc;
  lw_chip_config_default(&cc);
  snprintf(cc.backend, sizeof(cc.backend), "%s", w->backend);
  *what = "the L2 chip";
  LW_RETURN_IF_ERROR(lw_chip_open(&cc, &s->chip));
  LW_RETURN_IF_ERROR(lw_chip_register(s->chip, empty, &s->h2));
  *what = "the L3 worker";
  LW_RETURN_IF_ERROR(lw__dispatch_l3_open(w->backend, empty, &s->l3));
  if (s->ref) {
    *what = "the L3 sim worker";
    LW_RETURN_IF_ERROR(lw__dispatch_l3_open("sim", ref_empty, &s->l3ref));
  }
  return LW_OK;
}

static void sides_close(sides_t *s) {
  lw_worker_destroy(s->l3ref.w);
  lw_worker_destroy(s->l3.w);
  lw_chip_close(s->chip);
  for (int f = 0; f < s->w->n_floors; ++f) {
    if (s->floor[f]) s->w->floors[f].close(s->floor[f]);
  }
}

int lw__bench_dispatch(const lw_bench_opts_t *o, const lw_dispatch_workload_t *w,
                       const lw_dispatch_workload_t *ref) {
  long iters = o->iters > 0 ? o->iters : w->default_iters;
  long per_round = iters / ROUNDS > 0 ? iters / ROUNDS : 1;
  long total = per_round * ROUNDS;
  sides_t s = {.w = w, .ref = ref};
  s.k_l2 = w->n_floors;
  s.k_l3 = s.k_l2 + 1;
  s.k_ref = ref ? s.k_l3 + 1 : -1;
  s.n_kinds = ref ? s.k_ref + 1 : s.k_l3 + 1;
  int rc = 1;
  lw_callable_t empty = {0}, ref_empty = {0};
  bool have_empty = false, have_ref = false;
  double *v[MAX_KINDS] = {0};
  phase_t quiet, loaded;
  const char *what = "setup";
  for (int k = 0; k < s.n_kinds; ++k) {
    if (!(v[k] = malloc(sizeof(double) * (size_t)total))) {
      fprintf(stderr, "lanework bench dispatch: out of memory\n");
      goto out;
    }
  }
  if (!(have_empty = w->load_empty(&empty))) goto out;
  if (ref && !(have_ref = ref->load_empty(&ref_empty))) goto out;
  lw_status_t st = sides_open(&s, &empty, &ref_empty, &what);
  if (st != LW_OK) {
    if (st != LW_UNAVAILABLE || strcmp(what, "a floor") != 0) rc = lw__bench_fail(what, st);
    goto out;
  }
  if (measure(&s, per_round, v, &quiet, "") != 0) goto out;
  if (o->load > 0) {
    pid_t pids[LW_BENCH_MAX_LOAD];
    if (load_start(o->load, pids, o->load_in_session) != 0) {
      fprintf(stderr, "lanework bench dispatch: cannot start the load processes\n");
      goto out;
    }
    int mrc = measure(&s, per_round, v, &loaded, "under load: ");
    load_stop(o->load, pids);
    if (mrc != 0) goto out;
  }

  lw__bench_progress_end();
  for (int f = 0; f < w->n_floors; ++f) {
    const char *dev = w->floors[f].describe ? w->floors[f].describe(s.floor[f]) : NULL;
    if (dev) printf("%s: %s\n", w->floors[f].name, dev);
  }
  printf("spin policy: a futex wake costs %.1f us here; waits spin up to %.1f us before they "
         "block (lanes/spin.h)\n",
         (double)lw__spin_wake_ns() / 1e3, (double)lw__spin_budget_ns() / 1e3);
  machine_t mach;
  machine_measure(&mach);
  printf("machine: a clock read %.1f ns (clocksource %s), a spin pause %.1f ns\n", mach.clock_ns,
         mach.clocksource, mach.pause_ns);
  print_phase(&s, "quiet: empty kernel", &quiet, total);
  if (o->load > 0) {
    char when[128];
    snprintf(when, sizeof(when), "with %d busy-loop process%s beside it (--load %d%s): empty "
             "kernel", o->load, o->load == 1 ? "" : "es", o->load,
             o->load_in_session ? ", in this session" : ", each in its own session");
    print_phase(&s, when, &loaded, total);
  }
  rc = 0;
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "dispatch");
    lw__json_kv_int(&j, "iters", total);
    lw__json_kv_int(&j, "rounds", ROUNDS);
    lw__json_kv_fixed(&j, "spin_wake_us", (double)lw__spin_wake_ns() / 1e3, 3);
    lw__json_kv_fixed(&j, "spin_budget_us", (double)lw__spin_budget_ns() / 1e3, 3);
    lw__json_kv_fixed(&j, "clock_read_ns", mach.clock_ns, 1);
    lw__json_kv_string(&j, "clocksource", mach.clocksource);
    lw__json_kv_fixed(&j, "pause_ns", mach.pause_ns, 1);
    json_phase(&j, &s, &quiet);
    if (w->load) lw__json_kv_int(&j, "load", o->load);
    if (o->load > 0) {
      lw__json_kv_bool(&j, "load_in_session", o->load_in_session);
      lw__json_key(&j, "loaded");
      lw__json_begin_object(&j);
      json_phase(&j, &s, &loaded);
      lw__json_end_object(&j);
    }
    rc = lw__bench_json_end(&j, "dispatch");
  }
out:
  sides_close(&s);
  if (have_empty) lw_callable_free_loaded(&empty);
  if (have_ref) lw_callable_free_loaded(&ref_empty);
  for (int k = 0; k < MAX_KINDS; ++k) free(v[k]);
  return rc;
}
