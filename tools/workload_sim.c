// tools/workload_sim.c — what the benches run on a `sim` chip (bench_backend.h): the kernels
// of <kernel dir>, ELF images run on the run lane's thread.
//
// overlap: C1 = repeat_vector_add, its add repeated over 16 Ki elements (192 KiB: resident in a
//          core's L2, like the seed's repeat_count = 1e6 runs), a long run that does not fight
//          C2's prepare for cache and memory bandwidth, so the table shows lane overlap rather
//          than contention; C2 = big_vector_add over 1 Mi elements, an ~8 MiB image with a real
//          prepare hook. C1 lasts max(25 ms, 2 x register(C2)).
// cancel:  spin (polls its cancel word every 100 us, runs a minute unless stopped) and hang
//          (ignores cancellation: escalation at L3), both leaving a start mark (pid, time) in
//          a tensor of the run (callables/kernels/start_mark.h).
// dispatch: noop; the floors are a shared-memory spin and a futex round trip between two
//          processes, what any cross-process dispatch costs at least.
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "callables/kernels/start_mark.h"
#include "lanes/sys.h"
#include "tools/bench_backend.h"

// ---------------------------------------------------------------------------------------------
// overlap

#define N_ELEMS (1u << 20)
#define C1_ELEMS (1u << 14)

typedef struct overlap_sim {
  lw_callable_t c1, c2;
  bool c1_loaded, c2_loaded;
  float *a, *b, *c1_out, *c2_out;
} overlap_sim_t;

static lw_status_t ov_open(const lw_bench_opts_t *o, void **out) {
  (void)o;
  overlap_sim_t *s = calloc(1, sizeof(*s));
  if (!s) return LW_RESOURCE_EXHAUSTED;
  *out = s;
  s->c1_loaded = lw__bench_load_kernel("repeat_vector_add", &s->c1);
  s->c2_loaded = s->c1_loaded && lw__bench_load_kernel("big_vector_add", &s->c2);
  return s->c2_loaded ? LW_OK : LW_NOT_FOUND;
}

static const lw_callable_t *ov_c1(void *s) { return &((overlap_sim_t *)s)->c1; }
static const lw_callable_t *ov_c2(void *s) { return &((overlap_sim_t *)s)->c2; }

static lw_status_t ov_alloc(void *p, lw_bench_chip_t *d) {
  overlap_sim_t *s = p;
  s->a = d->alloc(d, N_ELEMS * sizeof(float));
  s->b = d->alloc(d, N_ELEMS * sizeof(float));
  s->c1_out = d->alloc(d, N_ELEMS * sizeof(float));
  s->c2_out = d->alloc(d, N_ELEMS * sizeof(float));
  if (!s->a || !s->b || !s->c1_out || !s->c2_out) return LW_RESOURCE_EXHAUSTED;
  for (uint32_t i = 0; i < N_ELEMS; ++i) {
    s->a[i] = (float)(i % 1000) * 0.5f;
    s->b[i] = (float)(i % 333) * 0.25f;
  }
  return LW_OK;
}

static lw_status_t vadd_args(const overlap_sim_t *s, float *out, uint32_t n, long repeat,
                             lw_args_t *a) {
  lw_args_init(a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, s->a, n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, s->b, n * sizeof(float), LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, out, n * sizeof(float), LW_TAG_OUTPUT));
  if (repeat > 0) LW_RETURN_IF_ERROR(lw_args_add_scalar(a, (uint64_t)repeat));
  return LW_OK;
}

static lw_status_t ov_args_c1(void *p, long repeat, lw_args_t *a) {
  overlap_sim_t *s = p;
  return vadd_args(s, s->c1_out, C1_ELEMS, repeat, a);
}

static lw_status_t ov_args_c2(void *p, lw_args_t *a) {
  overlap_sim_t *s = p;
  return vadd_args(s, s->c2_out, N_ELEMS, 0, a);
}

static void ov_clear(void *p) {
  overlap_sim_t *s = p;
  memset(s->c1_out, 0, C1_ELEMS * sizeof(float));
  memset(s->c2_out, 0, N_ELEMS * sizeof(float));
}

static double vadd_diff(const overlap_sim_t *s, const float *c, uint32_t n) {
  double m = 0.0;
  for (uint32_t i = 0; i < n; ++i) {
    double d = fabs((double)c[i] - (double)(s->a[i] + s->b[i]));
    if (isnan(d)) d = INFINITY;
    if (d > m) m = d;
  }
  return m;
}

static void ov_check(void *p, long repeat, lw_overlap_check_t *c) {
  (void)repeat;
  overlap_sim_t *s = p;
  c->max_diff = fmax(c->max_diff, fmax(vadd_diff(s, s->c1_out, C1_ELEMS),
                                       vadd_diff(s, s->c2_out, N_ELEMS)));
}

static void ov_describe(void *p, long repeat, FILE *f) {
  overlap_sim_t *s = p;
  fprintf(f,
          "  C1 = repeat_vector_add (%u elements, repeat_count=%ld), C2 = big_vector_add (%u "
          "elements, %zu-byte image, prepare hook)\n",
          C1_ELEMS, repeat, N_ELEMS, s->c2.image_bytes);
}

static void ov_json(void *p, lw_json_t *j) {
  overlap_sim_t *s = p;
  lw__json_kv_uint(j, "c2_image_bytes", s->c2.image_bytes);
}

static void ov_close(void *p, lw_bench_chip_t *d) {
  overlap_sim_t *s = p;
  if (d) {
    d->free(d, s->a);
    d->free(d, s->b);
    d->free(d, s->c1_out);
    d->free(d, s->c2_out);
  }
  if (s->c1_loaded) lw_callable_free_loaded(&s->c1);
  if (s->c2_loaded) lw_callable_free_loaded(&s->c2);
  free(s);
}

static const lw_overlap_workload_t kOverlapSim = {
    .backend = "sim",
    .default_delays = "0,2",
    .arena_bytes = N_ELEMS * sizeof(float) * 4,
    .initial_repeat = 16,
    .register_samples = 3,
    .target_factor = 2.0,
    .target_floor_us = 25000.0,
    .target_cap_us = INFINITY,
    .rel_tol = 0.0,
    .open = ov_open,
    .c1 = ov_c1,
    .c2 = ov_c2,
    .alloc = ov_alloc,
    .args_c1 = ov_args_c1,
    .args_c2 = ov_args_c2,
    .clear = ov_clear,
    .check = ov_check,
    .describe = ov_describe,
    .json = ov_json,
    .close = ov_close,
};

// ---------------------------------------------------------------------------------------------
// cancel

enum {
  kSpinUs = 60 * 1000 * 1000,  // long enough never to end by itself during a trial
  kPollUs = 100,               // the cooperative kernel's block: one cancel poll per 100 us
                               // (--poll-us changes it)
  kMarks = 64,                 // marks in a ring: a mark is reused only long after its run
};

// How long a trial waits for its kernel to start (a respawn and replay come first sometimes).
#define START_TIMEOUT_US 30e6

typedef struct cancel_sim {
  lw_callable_t spin, hang;
  bool spin_loaded, hang_loaded;
  lw_callable_handle_t spin_h, hang_h;
  start_mark_t *marks;  // kMarks, in the chip's memory
  unsigned next;
  start_mark_t *armed;  // the mark of the run armed last
  long poll_us;         // the spin kernel's poll interval (kPollUs, or --poll-us)
} cancel_sim_t;

static lw_status_t ca_open(void **out) {
  cancel_sim_t *s = calloc(1, sizeof(*s));
  if (!s) return LW_RESOURCE_EXHAUSTED;
  *out = s;
  s->poll_us = kPollUs;
  s->spin_loaded = lw__bench_load_kernel("spin", &s->spin);
  s->hang_loaded = s->spin_loaded && lw__bench_load_kernel("hang", &s->hang);
  return s->hang_loaded ? LW_OK : LW_NOT_FOUND;
}

static void ca_configure(void *p, const lw_bench_opts_t *o) {
  cancel_sim_t *s = p;
  if (o->poll_us > 0) s->poll_us = o->poll_us;
}

static lw_status_t ca_setup(void *p, lw_bench_chip_t *d) {
  cancel_sim_t *s = p;
  s->marks = d->alloc(d, kMarks * sizeof(start_mark_t));
  if (!s->marks) return LW_RESOURCE_EXHAUSTED;
  LW_RETURN_IF_ERROR(d->register_sync(d, &s->spin, &s->spin_h));
  return d->register_sync(d, &s->hang, &s->hang_h);
}

// A fresh, zeroed mark for the next run, as tensor 0 of a.
static lw_status_t mark_args(cancel_sim_t *s, lw_args_t *a) {
  s->armed = &s->marks[s->next++ % kMarks];
  memset(s->armed, 0, sizeof(*s->armed));
  lw_args_init(a);
  return lw_args_add_tensor(a, s->armed, sizeof(*s->armed), LW_TAG_NO_DEP);
}

static lw_status_t ca_arm(void *p, lw_callable_handle_t *h, lw_args_t *a) {
  cancel_sim_t *s = p;
  *h = s->spin_h;
  LW_RETURN_IF_ERROR(mark_args(s, a));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(a, kSpinUs));
  return lw_args_add_scalar(a, (uint64_t)s->poll_us);
}

static lw_status_t ca_arm_hang(void *p, lw_callable_handle_t *h, lw_args_t *a) {
  cancel_sim_t *s = p;
  *h = s->hang_h;
  return mark_args(s, a);
}

static lw_cancel_seen_t ca_seen(void *p, double waited_us, char *why, size_t n) {
  cancel_sim_t *s = p;
  // Acquire: pairs with the kernel's release store (start_mark.h).
  if (atomic_load_explicit(&s->armed->started, memory_order_acquire) != 0) {
    return LW_CANCEL_RUNNING;
  }
  if (waited_us < START_TIMEOUT_US) return LW_CANCEL_NOT_YET;
  snprintf(why, n, "its kernel did not start within %.0f s", START_TIMEOUT_US / 1e6);
  return LW_CANCEL_NEVER;
}

static lw_status_t ca_run_short(void *p, lw_bench_chip_t *d) {
  cancel_sim_t *s = p;
  lw_args_t a;
  LW_RETURN_IF_ERROR(mark_args(s, &a));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 0));  // spin 0 us
  return d->run(d, s->spin_h, &a);
}

// The spin kernel runs kSpinUs unless stopped: a run that finished (now) sooner than that after
// its kernel's start mark was stopped before its end.
static bool ca_stopped_early(void *p, char *why, size_t n) {
  cancel_sim_t *s = p;
  double ran_us = lw__bench_now_us() - (double)s->armed->start_ns / 1e3;
  if (ran_us < (double)kSpinUs) return true;
  snprintf(why, n, "the kernel ran %.0f ms, its whole %d ms: the cancel did not stop it",
           ran_us / 1e3, kSpinUs / 1000);
  return false;
}

static void ca_describe(void *p, FILE *f) {
  const cancel_sim_t *s = p;
  fprintf(f,
          "  kernel: spin, polling its cancel word every %ld us (a start mark shows it runs); "
          "escalation: hang, which never polls\n",
          s->poll_us);
}

static void ca_json(void *p, lw_json_t *j) {
  const cancel_sim_t *s = p;
  lw__json_kv_int(j, "poll_us", s->poll_us);
}

static void ca_close(void *p, lw_bench_chip_t *d) {
  cancel_sim_t *s = p;
  if (d) d->free(d, s->marks);
  if (s->spin_loaded) lw_callable_free_loaded(&s->spin);
  if (s->hang_loaded) lw_callable_free_loaded(&s->hang);
  free(s);
}

static const lw_cancel_workload_t kCancelSim = {
    .backend = "sim",
    .arena_bytes = 1u << 20,
    .max_pause_us = 0,
    .target_p50_us = 0,
    .open = ca_open,
    .configure = ca_configure,
    .setup = ca_setup,
    .arm = ca_arm,
    .seen = ca_seen,
    .stopped_early = ca_stopped_early,
    .arm_hang = ca_arm_hang,
    .run_short = ca_run_short,
    .describe = ca_describe,
    .json = ca_json,
    .close = ca_close,
};

// ---------------------------------------------------------------------------------------------
// dispatch

typedef struct pingpong {
  _Atomic uint32_t ping;
  char pad1[60];
  _Atomic uint32_t pong;
  char pad2[60];
} pingpong_t;

// Round trips between this process and a forked one over a shared page, n of them into v.
// futex = false: both sides spin on the words; true: both sides sleep in FUTEX_WAIT on shared
// words.
static bool pingpong(long n, double *v, bool futex) {
  pingpong_t *pp = mmap(NULL, sizeof(*pp), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
  if (pp == MAP_FAILED) {
    perror("lanework bench dispatch: mmap");
    return false;
  }
  atomic_store(&pp->ping, 0);
  atomic_store(&pp->pong, 0);
  pid_t pid = fork();
  if (pid < 0) {
    perror("lanework bench dispatch: fork");
    munmap(pp, sizeof(*pp));
    return false;
  }
  if (pid == 0) {
    for (uint32_t i = 1; i <= (uint32_t)n; ++i) {
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
  for (uint32_t i = 1; i <= (uint32_t)n; ++i) {
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
    v[i - 1] = lw__bench_now_us() - t0;
  }
  int status;
  waitpid(pid, &status, 0);
  munmap(pp, sizeof(*pp));
  return true;
}

// The floors keep no state: each sample forks its partner.
static void *floor_open(void) { return (void *)1; }
static void floor_close(void *f) { (void)f; }
static bool spin_sample(void *f, long n, double *v) {
  (void)f;
  return pingpong(n, v, false);
}
static bool futex_sample(void *f, long n, double *v) {
  (void)f;
  return pingpong(n, v, true);
}

static bool load_noop(lw_callable_t *out) { return lw__bench_load_kernel("noop", out); }

static const lw_dispatch_workload_t kDispatchSim = {
    .backend = "sim",
    .default_iters = 20000,
    .empty_name = "noop",
    .load_empty = load_noop,
    .floors = {{.name = "shm spin",
                .what = "a shared-memory spin round trip between two processes",
                .json_p50 = "shm_spin_rtt_us",
                .json_p99 = "shm_spin_rtt_p99_us",
                .open = floor_open,
                .sample = spin_sample,
                .close = floor_close},
               {.name = "futex",
                .what = "a futex round trip between two processes",
                .json_p50 = "futex_rtt_us",
                .json_p99 = "futex_rtt_p99_us",
                .open = floor_open,
                .sample = futex_sample,
                .close = floor_close}},
    .n_floors = 2,
    .launch_floor = -1,
    .dag = true,
    .load = true,
};

const lw_bench_backend_t lw__bench_backend_sim = {
    .name = "sim",
    .env = NULL,
    .overlap = &kOverlapSim,
    .dispatch = &kDispatchSim,
    .cancel = &kCancelSim,
};
