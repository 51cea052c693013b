// tests/callables/test_kernels.c — the example kernels, called directly after loading them
// from memory: their results, their size checks and how they answer cancellation.
#include <math.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "callables/image.h"
#include "callables/kernels/start_mark.h"
#include "callables_test_util.h"

TestSuite(kernels, .timeout = 60);

typedef struct loaded {
  lw_loaded_image_t img;
  test_ctx_t t;
} loaded_t;

static void load(loaded_t *k, const char *name) {
  size_t n = 0;
  uint8_t *elf = test_read_kernel(name, &n);
  lw_error_t err;
  cr_assert_eq(lw__image_load(elf, n, NULL, name, &k->img, &err), LW_OK, "%s", err.message);
  free(elf);
  test_ctx_init(&k->t, name);
}

static lw_kernel_args_t three_tensors(void *a, void *b, void *c, uint64_t bytes) {
  lw_kernel_args_t args = {.n_tensors = 3};
  args.tensor[0].data = a, args.tensor[0].bytes = bytes;
  args.tensor[1].data = b, args.tensor[1].bytes = bytes;
  args.tensor[2].data = c, args.tensor[2].bytes = bytes;
  return args;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

Test(kernels, repeat_vector_add_gives_exact_sums_after_many_repeats) {
  loaded_t k;
  load(&k, "repeat_vector_add");
  enum { N = 40000 };  // more than one 64 KiB block
  float *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4);
  for (int i = 0; i < N; i++) a[i] = (float)i, b[i] = 0.25f * (float)i, c[i] = 0;
  lw_kernel_args_t args = three_tensors(a, b, c, N * 4);
  args.n_scalars = 1;
  args.scalar[0] = 7;
  cr_assert_eq(k.img.main(&k.t.ctx, &args), 0);
  for (int i = 0; i < N; i++) cr_assert_eq(c[i], a[i] + b[i], "c[%d]", i);
  args.n_scalars = 0;
  cr_assert_lt(k.img.main(&k.t.ctx, &args), 0, "the repeat count is required");
  free(a), free(b), free(c);
  lw__image_unload(&k.img);
}

Test(kernels, repeat_vector_add_stops_when_cancelled) {
  loaded_t k;
  load(&k, "repeat_vector_add");
  enum { N = 1 << 16 };
  float *a = calloc(N, 4), *b = calloc(N, 4), *c = calloc(N, 4);
  lw_kernel_args_t args = three_tensors(a, b, c, N * 4);
  args.n_scalars = 1;
  args.scalar[0] = UINT64_MAX;  // would never finish on its own
  test_ctx_cancel(&k.t);
  cr_assert_eq(k.img.main(&k.t.ctx, &args), LW_KERNEL_CANCELLED);
  args.scalar[0] = 0;
  cr_assert_eq(k.img.main(&k.t.ctx, &args), LW_KERNEL_CANCELLED,
               "a cancel before the start is seen even with nothing to do");
  free(a), free(b), free(c);
  lw__image_unload(&k.img);
}

Test(kernels, vector_add_rejects_too_few_tensors_and_odd_sizes) {
  loaded_t k;
  load(&k, "vector_add");
  float x[4] = {0};
  lw_kernel_args_t args = three_tensors(x, x, x, 6);
  cr_assert_lt(k.img.main(&k.t.ctx, &args), 0);
  args.n_tensors = 2;
  cr_assert_lt(k.img.main(&k.t.ctx, &args), 0);
  lw__image_unload(&k.img);
}

Test(kernels, gemm_matches_a_reference_product_and_checks_sizes) {
  loaded_t k;
  load(&k, "gemm");
  enum { M = 37, N = 29, K = 131 };
  float *a = malloc(M * K * 4), *b = malloc(K * N * 4), *c = malloc(M * N * 4);
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 11) - 5.0f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 13) * 0.5f;
  lw_kernel_args_t args = {.n_tensors = 3, .n_scalars = 3, .scalar = {M, N, K}};
  args.tensor[0].data = a, args.tensor[0].bytes = M * K * 4;
  args.tensor[1].data = b, args.tensor[1].bytes = K * N * 4;
  args.tensor[2].data = c, args.tensor[2].bytes = M * N * 4;
  cr_assert_eq(k.img.main(&k.t.ctx, &args), 0);
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double ref = 0;
      for (int kk = 0; kk < K; kk++) ref += (double)a[i * K + kk] * b[kk * N + j];
      cr_assert_leq(fabs(c[i * N + j] - ref), 1e-3 * (1 + fabs(ref)), "C[%d][%d]", i, j);
    }
  }
  args.scalar[2] = K + 1;
  cr_assert_lt(k.img.main(&k.t.ctx, &args), 0, "sizes that disagree with K are refused");
  args.scalar[2] = K;
  test_ctx_cancel(&k.t);
  cr_assert_eq(k.img.main(&k.t.ctx, &args), LW_KERNEL_CANCELLED);
  free(a), free(b), free(c);
  lw__image_unload(&k.img);
}

// Kernel name, given scalar[0] = 2000 us, returns 0 no sooner; given an hour with its run
// cancelled, it returns LW_KERNEL_CANCELLED.
static void expect_waits_and_cancels(const char *name) {
  loaded_t k;
  load(&k, name);
  lw_kernel_args_t args = {.n_scalars = 1, .scalar = {2000}};
  uint64_t t0 = now_ns();
  cr_assert_eq(k.img.main(&k.t.ctx, &args), 0);
  cr_assert_geq(now_ns() - t0, 2000000u, "%s returned before its 2 ms", name);
  args.scalar[0] = 3600ull * 1000000ull;  // an hour: only the cancel can end it
  test_ctx_cancel(&k.t);
  cr_assert_eq(k.img.main(&k.t.ctx, &args), LW_KERNEL_CANCELLED);
  lw__image_unload(&k.img);
}

Test(kernels, spin_waits_its_time_and_stops_when_cancelled) {
  expect_waits_and_cancels("spin");
}

Test(kernels, sleep_waits_its_time_and_stops_when_cancelled) {
  expect_waits_and_cancels("sleep");
}

// The start mark is what lets `lanework bench cancel` and `crash` cancel or kill only a kernel
// of the run they measure: it must name the process the kernel runs in.
Test(kernels, spin_sets_its_start_mark_with_its_pid_and_start_time) {
  loaded_t k;
  load(&k, "spin");
  start_mark_t mark;
  memset(&mark, 0, sizeof(mark));
  lw_kernel_args_t args = {.n_tensors = 1, .n_scalars = 1, .scalar = {0}};
  args.tensor[0].data = &mark, args.tensor[0].bytes = sizeof(mark);
  uint64_t t0 = now_ns();
  cr_assert_eq(k.img.main(&k.t.ctx, &args), 0);
  cr_assert_eq(atomic_load(&mark.started), 1u, "spin did not set its start mark");
  cr_assert_eq(mark.pid, (int32_t)getpid());
  cr_assert_geq((uint64_t)mark.start_ns, t0, "the mark was set by this run");
  // Without the tensor (or with one too small for a mark) spin runs as before.
  args.tensor[0].bytes = sizeof(mark) - 1;
  memset(&mark, 0, sizeof(mark));
  cr_assert_eq(k.img.main(&k.t.ctx, &args), 0);
  cr_assert_eq(atomic_load(&mark.started), 0u, "spin wrote past a tensor too small for a mark");
  lw__image_unload(&k.img);
}

Test(kernels, fail_returns_its_scalar_or_minus_three) {
  loaded_t k;
  load(&k, "fail");
  lw_kernel_args_t args = {0};
  cr_assert_eq(k.img.main(&k.t.ctx, &args), -3);
  args.n_scalars = 1;
  args.scalar[0] = (uint64_t)(int64_t)-11;
  cr_assert_eq(k.img.main(&k.t.ctx, &args), -11);
  args.scalar[0] = 0;
  cr_assert_eq(k.img.main(&k.t.ctx, &args), -3);
  lw__image_unload(&k.img);
}

Test(kernels, noop_returns_zero) {
  loaded_t k;
  load(&k, "noop");
  lw_kernel_args_t args = {0};
  cr_assert_eq(k.img.main(&k.t.ctx, &args), 0);
  lw__image_unload(&k.img);
}

// Runs the kernel's main in a forked child (the kernel is loaded before the fork), so a kernel
// that kills its process takes only the child.
static pid_t spawn_main(loaded_t *k) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    // Die by the signal itself, not through a sanitizer's report-and-exit handler.
    signal(SIGSEGV, SIG_DFL);
    lw_kernel_args_t args = {0};
    _exit(k->img.main(&k->t.ctx, &args) & 0x7f);
  }
  return pid;
}

static int wait_child(pid_t pid) {
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  return status;
}

Test(kernels, crash_dies_with_sigsegv) {
  loaded_t k;
  load(&k, "crash");
  int status = wait_child(spawn_main(&k));
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status 0x%x", status);
  lw__image_unload(&k.img);
}

Test(kernels, abort_dies_with_sigabrt) {
  loaded_t k;
  load(&k, "abort");
  int status = wait_child(spawn_main(&k));
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status 0x%x", status);
  lw__image_unload(&k.img);
}

Test(kernels, hang_sets_its_start_mark_in_the_process_it_runs_in) {
  loaded_t k;
  load(&k, "hang");
  start_mark_t *mark = mmap(NULL, sizeof(*mark), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(mark, MAP_FAILED);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    // Dies with the test process, should the test fail (time out) before it kills it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    lw_kernel_args_t args = {.n_tensors = 1};
    args.tensor[0].data = mark, args.tensor[0].bytes = sizeof(*mark);
    _exit(k.img.main(&k.t.ctx, &args) & 0x7f);
  }
  // Bounded by the suite's timeout.
  const struct timespec nap = {0, 100 * 1000};
  while (atomic_load_explicit(&mark->started, memory_order_acquire) == 0) nanosleep(&nap, NULL);
  cr_assert_eq(mark->pid, (int32_t)pid, "the mark names the child, where hang runs");
  cr_assert_eq(kill(pid, SIGKILL), 0);
  int status = wait_child(pid);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
  munmap(mark, sizeof(*mark));
  lw__image_unload(&k.img);
}

// hang must outlive its cancel: still running after the cancel was set, until killed.
Test(kernels, hang_ignores_cancellation_until_killed) {
  loaded_t k;
  load(&k, "hang");
  test_ctx_cancel(&k.t);
  pid_t pid = spawn_main(&k);
  const struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, WNOHANG), 0, "hang returned (status 0x%x)", status);
  cr_assert_eq(kill(pid, SIGKILL), 0);
  status = wait_child(pid);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
  lw__image_unload(&k.img);
}
