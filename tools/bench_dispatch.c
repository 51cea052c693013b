// tools/bench_dispatch.c — `lanework bench dispatch`: the empty-run round trip at L2 (and L3
// once the worker exists), next to the floors measured in the same run: a raw shared-memory
// spin round trip and a raw futex round trip between two processes.
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
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

int lw__bench_dispatch(const lw_bench_opts_t *o) {
  long iters = o->iters > 0 ? o->iters : 20000;
  double l2_p50 = 0, l2_p99 = 0;
  if (l2_empty_run(iters, &l2_p50, &l2_p99) != 0) return 1;
  lw_dispatch_l3_result_t l3 = {0};
  int l3_rc = lw__dispatch_l3(iters, &l3);
  double spin = pingpong_rtt_us(iters, false);
  double futex = pingpong_rtt_us(iters < 20000 ? iters : 20000, true);

  printf("L2 empty run (lw_chip_run of noop):  p50 %.2f us, p99 %.2f us (%ld runs)\n", l2_p50,
         l2_p99, iters);
  if (l3_rc == 0) {
    printf("L3 empty run (lw_worker_run, 1 noop task): p50 %.2f us, p99 %.2f us\n", l3.empty_p50_us,
           l3.empty_p99_us);
    printf("L3 per task in a %d-task DAG:          %.2f us\n", l3.dag_tasks, l3.per_task_us);
  } else {
    printf("L3: not measured (%s)\n", l3.why);
  }
  printf("floor: shared-memory spin round trip:  p50 %.2f us\n", spin);
  printf("floor: futex round trip (2 processes): p50 %.2f us\n", futex);
  if (o->json) {
    lw_json_t j;
    lw__bench_json_begin(&j, "dispatch");
    lw__json_kv_int(&j, "iters", iters);
    lw__json_kv_fixed(&j, "l2_empty_run_p50_us", l2_p50, 3);
    lw__json_kv_fixed(&j, "l2_empty_run_p99_us", l2_p99, 3);
    if (l3_rc == 0) {
      lw__json_kv_fixed(&j, "l3_empty_run_p50_us", l3.empty_p50_us, 3);
      lw__json_kv_fixed(&j, "l3_empty_run_p99_us", l3.empty_p99_us, 3);
      lw__json_kv_fixed(&j, "l3_per_task_us", l3.per_task_us, 3);
    } else {
      lw__json_key(&j, "l3_empty_run_p50_us");
      lw__json_null(&j);
      lw__json_key(&j, "l3_per_task_us");
      lw__json_null(&j);
    }
    lw__json_kv_fixed(&j, "shm_spin_rtt_us", spin, 3);
    lw__json_kv_fixed(&j, "futex_rtt_us", futex, 3);
    return lw__bench_json_end(&j, "dispatch");
  }
  return 0;
}
