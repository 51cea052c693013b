// tools/compare/starpu_dispatch.c — StarPU's figures for what `lanework bench dispatch` measures,
// so the two can be compared in one run on one machine (scripts/compare_starpu builds and runs
// it; it is not part of lanework's build and lanework does not link StarPU).
//
// The same work as tools/dispatch_l3.c: an empty task (a CPU codelet that does nothing) as a
// synchronous round trip; a 1000-task layered DAG (10 wide; each task reads one buffer of the
// layer before and writes one that the layer before read and the one before that wrote, so
// StarPU's sequential consistency infers the read-after-write, write-after-read and
// write-after-write edges, as lanework's tensor tags do); and a 1000-task chain on one buffer
// (read-write). One CPU worker, not bound to a CPU (lanework's threads are not either), the eager
// scheduler, no performance models (set in the environment by scripts/compare_starpu before
// starpu_init). StarPU's idle worker polls for work (Debian's build defines
// STARPU_NON_BLOCKING_DRIVERS), so it keeps a CPU busy even when idle; lanework's threads sleep. --load N adds N busy loops, each in
// a session of its own, as `bench dispatch --load` does. The last stdout line is one JSON object.
#include <signal.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DAG_TASKS 1000
#define DAG_WIDTH 10
#define DAG_RUNS 9
#define MAX_LOAD 64

static void noop(void *buffers[], void *arg) {
  (void)buffers;
  (void)arg;
}

static struct starpu_codelet empty_cl = {.cpu_funcs = {noop}, .nbuffers = 0};
static struct starpu_codelet write_cl = {.cpu_funcs = {noop}, .nbuffers = 1, .modes = {STARPU_W}};
static struct starpu_codelet read_write_cl = {
    .cpu_funcs = {noop}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W}};
static struct starpu_codelet rw_cl = {.cpu_funcs = {noop}, .nbuffers = 1, .modes = {STARPU_RW}};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// As lw__bench_quantile (tools/bench.c): the index rounded to the nearest.
static double quantile(double *v, size_t n, double q) {
  qsort(v, n, sizeof(*v), cmp_double);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static void submit_or_die(struct starpu_task *t) {
  int rc = starpu_task_submit(t);
  if (rc != 0) {
    fprintf(stderr, "starpu_dispatch: starpu_task_submit failed (%d)\n", rc);
    exit(1);
  }
}

typedef struct figures {
  double empty_p50_us, empty_p99_us, per_task_us, chain_per_task_us;
} figures_t;

static void measure(long iters, starpu_data_handle_t *bufs, starpu_data_handle_t chain_buf,
                    figures_t *f) {
  double *v = malloc(sizeof(double) * (size_t)iters);
  if (!v) exit(1);
  // Timed from before the task is created, as lanework's whole lw_worker_run is.
  for (long i = 0; i < 200 + iters; ++i) {
    double t0 = now_us();
    struct starpu_task *t = starpu_task_create();
    t->cl = &empty_cl;
    t->synchronous = 1;
    submit_or_die(t);
    if (i >= 200) v[i - 200] = now_us() - t0;
  }
  f->empty_p50_us = quantile(v, (size_t)iters, 0.5);
  f->empty_p99_us = quantile(v, (size_t)iters, 0.99);
  free(v);

  double per[DAG_RUNS];
  for (int r = 0; r < DAG_RUNS; ++r) {
    double t0 = now_us();
    for (int i = 0; i < DAG_TASKS; ++i) {
      int layer = i / DAG_WIDTH, col = i % DAG_WIDTH, next = (col + 1) % DAG_WIDTH;
      struct starpu_task *t = starpu_task_create();
      starpu_data_handle_t out = bufs[(layer % 2) * DAG_WIDTH + col];
      if (i < DAG_WIDTH) {
        t->cl = &write_cl;
        t->handles[0] = out;
      } else {
        t->cl = &read_write_cl;
        t->handles[0] = bufs[((layer + 1) % 2) * DAG_WIDTH + next];
        t->handles[1] = out;
      }
      submit_or_die(t);
    }
    starpu_task_wait_for_all();
    per[r] = (now_us() - t0) / DAG_TASKS;
  }
  f->per_task_us = quantile(per, DAG_RUNS, 0.5);

  for (int r = 0; r < DAG_RUNS; ++r) {
    double t0 = now_us();
    for (int i = 0; i < DAG_TASKS; ++i) {
      struct starpu_task *t = starpu_task_create();
      t->cl = &rw_cl;
      t->handles[0] = chain_buf;
      submit_or_die(t);
    }
    starpu_task_wait_for_all();
    per[r] = (now_us() - t0) / DAG_TASKS;
  }
  f->chain_per_task_us = quantile(per, DAG_RUNS, 0.5);
}

static void print_figures(const char *key, const figures_t *f) {
  printf("\"%s\": {\"empty_run_p50_us\": %.3f, \"empty_run_p99_us\": %.3f, "
         "\"per_task_us\": %.3f, \"chain_per_task_us\": %.3f}",
         key, f->empty_p50_us, f->empty_p99_us, f->per_task_us, f->chain_per_task_us);
}

int main(int argc, char **argv) {
  long iters = 20000;
  int load = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = strtol(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--load") == 0 && i + 1 < argc) {
      load = (int)strtol(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: starpu_dispatch [--iters N] [--load N]\n");
      return 2;
    }
  }
  if (iters < 1 || iters > 100000000 || load < 0 || load > MAX_LOAD) {
    fprintf(stderr, "starpu_dispatch: --iters 1..100000000, --load 0..%d\n", MAX_LOAD);
    return 2;
  }
  if (starpu_init(NULL) != 0) {
    fprintf(stderr, "starpu_dispatch: starpu_init failed\n");
    return 1;
  }
  static char mem[2 * DAG_WIDTH + 1][64];
  starpu_data_handle_t bufs[2 * DAG_WIDTH], chain_buf;
  for (int i = 0; i < 2 * DAG_WIDTH; ++i) {
    starpu_vector_data_register(&bufs[i], STARPU_MAIN_RAM, (uintptr_t)mem[i], 64, 1);
  }
  starpu_vector_data_register(&chain_buf, STARPU_MAIN_RAM, (uintptr_t)mem[2 * DAG_WIDTH], 64, 1);

  figures_t quiet, loaded;
  measure(iters, bufs, chain_buf, &quiet);
  if (load > 0) {
    pid_t pids[MAX_LOAD], self = getpid();
    for (int i = 0; i < load; ++i) {
      pids[i] = fork();
      if (pids[i] == 0) {
        // In a session of its own (Ctrl-C does not reach it): it dies with this process.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self) _exit(0);
        (void)setsid();
        volatile unsigned long spin = 0;
        for (;;) ++spin;
      }
      if (pids[i] < 0) {
        for (int k = 0; k < i; ++k) kill(pids[k], SIGKILL);
        return 1;
      }
    }
    measure(iters, bufs, chain_buf, &loaded);
    for (int i = 0; i < load; ++i) kill(pids[i], SIGKILL);
    for (int i = 0; i < load; ++i) waitpid(pids[i], NULL, 0);
  }

  for (int i = 0; i < 2 * DAG_WIDTH; ++i) starpu_data_unregister(bufs[i]);
  starpu_data_unregister(chain_buf);
  starpu_shutdown();

  printf("{\"schema\": \"lanework.compare.starpu_dispatch\", \"starpu_version\": \"%d.%d.%d\", "
         "\"iters\": %ld, \"load\": %d, ",
         STARPU_MAJOR_VERSION, STARPU_MINOR_VERSION, STARPU_RELEASE_VERSION, iters, load);
  print_figures("quiet", &quiet);
  if (load > 0) {
    printf(", ");
    print_figures("loaded", &loaded);
  }
  printf("}\n");
  return 0;
}
