// tests/child/test_cuda_fake.c — the cuda backend at L2 over the fake driver and NVRTC
// (fake_cuda/fake_cuda.h): the register-without-stall rule told by the fake's events (the
// compile on the register lane with no context current, the module load on the run lane before
// the first launch, unloads never on the register lane), results and argument packing, cancel
// through the mapped stop word, deadlines, sticky errors and failed loads.
#include <dlfcn.h>
#include <sys/prctl.h>

#include "child/chip_impl.h"
#include "lanes/trace.h"
#include "cuda_test_util.h"

static lw_chip_t *chip;

// Opens chip on the cuda backend (device 0).
static lw_status_t try_open(void) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
  return lw_chip_open(&cfg, &chip);
}

static void open_chip(void) {
  lw_status_t st = try_open();
  cr_assert_eq(st, LW_OK, "open: %s", lw_last_error()->message);
}

// Closes chip and opens it again with name=value in the environment, which the chip and the
// backend read at open.
static void reopen_chip_with(const char *name, const char *value) {
  lw_chip_close(chip);
  setenv(name, value, 1);
  open_chip();
  unsetenv(name);
}

// Closes chip; an open with name=value in the environment fails INVALID_ARGUMENT with a message
// holding want.
static void assert_open_refuses(const char *name, const char *value, const char *want) {
  lw_chip_close(chip);
  chip = NULL;
  setenv(name, value, 1);
  lw_status_t st = try_open();
  unsetenv(name);
  cr_assert_eq(st, LW_INVALID_ARGUMENT, "%s=%s: %s", name, value, lw_status_name(st));
  cr_assert_not_null(strstr(lw_last_error()->message, want), "%s", lw_last_error()->message);
}

// A function of the fake driver the backend loaded (a test knob or probe of its own).
static void *fake_symbol(const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/libfake_cuda.so", ct_fake_dir());
  void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(lib, "the backend loaded the fake");
  void *fn = dlsym(lib, name);
  cr_assert_not_null(fn, "the fake exports %s", name);
  dlclose(lib);  // the backend keeps it loaded
  return fn;
}

static void setup(void) {
  ct_use_fake(true);
  // Runs go to the run lane, whose thread the events name.
  setenv("LW_L2_RUN_HERE", "0", 1);
  open_chip();
}

static void teardown(void) {
  if (chip) lw_chip_close(chip);
  chip = NULL;
  ct_assert_no_contextless_call();
  unlink(ct_log_path);
}

TestSuite(cuda_fake, .init = setup, .fini = teardown, .timeout = 60);

static lw_callable_handle_t reg(const char *name, const char *source, const char *entry,
                                uint32_t n_params, const uint8_t *dirs, const char *options) {
  lw_callable_t c = ct_cuda_c(name, source, entry, n_params, dirs);
  c.build_options = options;
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, &c, &h);
  cr_assert_eq(st, LW_OK, "register %s: %s", name, lw_last_error()->message);
  return h;
}

// Runs vector_add over n floats and checks every sum.
static void run_vadd(lw_callable_handle_t k, uint64_t n) {
  float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float)), *c = calloc(n, sizeof(float));
  for (uint64_t i = 0; i < n; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
    c[i] = -1.0f;
  }
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, n * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, n * sizeof(float), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, n * sizeof(float), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, n));
  uint64_t global[3] = {n, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&args, 1, global, NULL));
  lw_run_timing_t timing;
  lw_status_t st = lw_chip_run(chip, k, &args, NULL, &timing);
  cr_assert_eq(st, LW_OK, "run: %s", lw_last_error()->message);
  for (uint64_t i = 0; i < n; ++i) {
    cr_assert_eq(c[i], a[i] + b[i], "c[%llu] = %f, want %f", (unsigned long long)i, c[i],
                 a[i] + b[i]);
  }
  free(a);
  free(b);
  free(c);
}

Test(cuda_fake, register_compiles_off_context_on_the_register_lane_and_the_run_lane_loads_first) {
  lw_callable_handle_t k = reg("vadd", CT_SOURCE_ALL, "vector_add", 4, ct_vadd_dirs,
                               "-DN=4  --use_fast_math '-DLABEL=a b'");
  char line[700];
  int compile = ct_find("compile", line, sizeof(line), "thread=lw-reg-0", "ctx=0", NULL);
  cr_assert_geq(compile, 0, "the compile ran on the register lane with no context current");
  cr_assert_not_null(
      strstr(line, "opts=--gpu-architecture=sm_90|-DN=4|--use_fast_math|-DLABEL=a b"),
      "the device's arch, then the build options split into words: %s", line);
  cr_assert_eq(ct_count("module_load"), 0, "the register loaded nothing into the context");

  run_vadd(k, 1000);
  int load = ct_find("module_load", line, sizeof(line), "thread=lw-run-0", "ctx=1", "vector_add",
                     NULL);
  cr_assert_geq(load, 0, "the module was loaded on the run lane");
  cr_assert_not_null(strstr(line, "waited=0"), "no kernel was running at the load: %s", line);
  int launch = ct_find("launch", NULL, 0, "thread=lw-run-0", "vector_add", NULL);
  cr_assert_gt(launch, load, "the load came before the first launch");
  cr_assert_gt(load, compile);

  // Later runs reuse the module.
  run_vadd(k, 7);
  cr_assert_eq(ct_count("module_load"), 1);
}

Test(cuda_fake, vector_add_results_are_exact_with_mapped_tensors) {
  reopen_chip_with("LW_CUDA_TENSORS", "mapped");
  lw_callable_handle_t k = reg("vadd", CT_SOURCE_ALL, "vector_add", 4, ct_vadd_dirs, NULL);
  run_vadd(k, 4097);
}

// Mapped tensors outside an arena are registered per run; the unregister is the run lane's
// work after the handle finished (child/cuda_hostreg.h): a run whose unregister is held still
// finishes, and the next run of the same memory registers it again (the table's rules are
// tests/child/test_cuda_hostreg.c's).
Test(cuda_fake, a_mapped_runs_handle_finishes_before_its_memory_is_unregistered) {
  reopen_chip_with("LW_CUDA_TENSORS", "mapped");
  lw_callable_handle_t k = reg("vadd", CT_SOURCE_ALL, "vector_add", 4, ct_vadd_dirs, NULL);
  void (*hold)(int) = (void (*)(int))fake_symbol("lw_fake_cuda_hold_unregisters");
  int registers = ct_count("host_register"), unregisters = ct_count("host_unregister");
  enum { N = 1024 };
  float *a = calloc(N, sizeof(float)), *b = calloc(N, sizeof(float)), *c = calloc(N, sizeof(float));
  for (int i = 0; i < N; ++i) a[i] = (float)i, b[i] = 2.0f;
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, sizeof(float) * N, LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, sizeof(float) * N, LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, sizeof(float) * N, LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, N));
  uint64_t global[3] = {N, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&args, 1, global, NULL));

  hold(1);
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, k, &args, NULL, &h));
  lw_status_t st = lw_handle_wait(h, 10ll * 1000 * 1000 * 1000);
  cr_assert_eq(st, LW_OK, "the run finished while its unregister waited: %s", lw_status_name(st));
  lw_handle_release(h);
  cr_assert_eq(ct_count("host_register"), registers + 3, "a, b and c were registered");
  cr_assert_eq(ct_count("host_unregister"), unregisters, "none unregistered yet (held)");
  for (int i = 0; i < N; ++i) cr_assert_eq(c[i], a[i] + 2.0f);
  hold(0);

  // The same memory again: registered afresh, and the kernel reaches all of it (the fake
  // fails a kernel touching unregistered memory with an illegal address).
  memset(c, 0, sizeof(float) * N);
  LW_ASSERT_OK(lw_chip_run(chip, k, &args, NULL, NULL));
  for (int i = 0; i < N; ++i) cr_assert_eq(c[i], a[i] + 2.0f);
  cr_assert_eq(ct_count("host_register"), registers + 6, "the second run registered them again");
  lw_chip_close(chip);
  chip = NULL;
  cr_assert_eq(ct_count("host_unregister"), unregisters + 6, "every registration released");
  cr_assert_eq(ct_count("illegal_address"), 0);
  free(a);
  free(b);
  free(c);
}

Test(cuda_fake, an_unknown_tensor_mode_fails_open_naming_it) {
  assert_open_refuses("LW_CUDA_TENSORS", "zero-copy", "LW_CUDA_TENSORS=zero-copy");
}

// Copied tensors (the default): a finished run's device buffers are kept for the next runs, a
// spare serving a tensor of half its size up to its own; close frees them.
Test(cuda_fake, copied_tensors_reuse_the_device_buffers_of_earlier_runs_and_close_frees_them) {
  static const uint8_t dirs[4] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};
  lw_callable_handle_t k = reg("vadd", CT_SOURCE_ALL, "vector_add", 4, dirs, NULL);
  int allocs = ct_count("mem_alloc"), frees = ct_count("mem_free");
  run_vadd(k, 1024);
  cr_assert_eq(ct_count("mem_alloc"), allocs + 3, "a buffer a tensor");
  run_vadd(k, 1024);
  run_vadd(k, 1024);
  cr_assert_eq(ct_count("mem_alloc"), allocs + 3, "the same shapes reuse them");
  run_vadd(k, 4096);
  cr_assert_eq(ct_count("mem_alloc"), allocs + 6, "4 KiB buffers cannot hold 16 KiB tensors");
  run_vadd(k, 1024);
  cr_assert_eq(ct_count("mem_alloc"), allocs + 6, "the 4 KiB spares serve 4 KiB tensors");
  run_vadd(k, 64);
  cr_assert_eq(ct_count("mem_alloc"), allocs + 9, "a spare serves at most twice its tensor");
  cr_assert_eq(ct_count("mem_free"), frees, "no buffer was freed while the chip is open");
  lw_chip_close(chip);
  chip = NULL;
  // The 9 spares and the stop word (in device memory by default).
  cr_assert_eq(ct_count("mem_free"), frees + 10, "close frees every spare");
}

Test(cuda_fake, tensors_and_scalars_are_packed_in_signature_order) {
  static const uint8_t dirs[5] = {LW_PARAM_OUT, LW_PARAM_SCALAR, LW_PARAM_IN, LW_PARAM_SCALAR,
                                  LW_PARAM_SCALAR};
  lw_callable_handle_t k = reg("pack", CT_SOURCE_ALL, "pack_probe", 5, dirs, NULL);
  uint64_t out[4] = {0}, in[2] = {0x1111222233334444ull, 7};
  lw_args_t args;
  lw_args_init(&args);
  // Tensors in their order (out, in), scalars in theirs (a, f, b): the signature interleaves.
  LW_ASSERT_OK(lw_args_add_tensor(&args, out, sizeof(out), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, in, sizeof(in), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, 0xa0a0a0a0a0a0a0a0ull));
  LW_ASSERT_OK(lw_args_add_f32(&args, 1.5f));
  LW_ASSERT_OK(lw_args_add_i64(&args, -3));
  lw_status_t st = lw_chip_run(chip, k, &args, NULL, NULL);
  cr_assert_eq(st, LW_OK, "%s", lw_last_error()->message);
  float f = 1.5f;
  uint32_t fbits;
  memcpy(&fbits, &f, 4);
  cr_assert_eq(out[0], 0xa0a0a0a0a0a0a0a0ull, "parameter 1 is scalar 0");
  cr_assert_eq(out[1], in[0], "parameter 2 is tensor 1, a device pointer to its bytes");
  cr_assert_eq(out[2], fbits, "a float parameter gets the f32 scalar's 4 bytes");
  cr_assert_eq(out[3], (uint64_t)-3, "parameter 4 is scalar 2");
}

// Two runs of the polling kernel k, each cancelled once the kernel runs (the fake logs its
// launch; no other kernel is launched meanwhile): both end CANCELLED, while running.
static void cancel_polling_twice(lw_callable_handle_t k) {
  int launched = ct_count("launch");
  for (int round = 0; round < 2; ++round) {
    lw_handle_t *h = NULL;
    LW_ASSERT_OK(lw_chip_run_async(chip, k, NULL, NULL, &h));
    while (ct_count("launch") < launched + round + 1) usleep(200);
    LW_ASSERT_OK(lw_handle_cancel(h));
    cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CANCELLED,
                 "round %d: a stop requested while the kernel ran: %s", round,
                 lw_handle_error(h)->message);
    cr_assert_not_null(strstr(lw_handle_error(h)->message, "cancelled while running"), "%s",
                       lw_handle_error(h)->message);
    lw_handle_release(h);
  }
}

// A run of the polling kernel k with a 50 ms deadline: the deadline stops it. what says why.
static void poll_until_deadline(lw_callable_handle_t k, const char *what) {
  lw_run_config_t rc;
  lw_run_config_default(&rc);
  rc.timeout_ns = 50 * 1000 * 1000;
  cr_assert_eq(lw_chip_run(chip, k, NULL, &rc, NULL), LW_DEADLINE_EXCEEDED, "%s: %s", what,
               lw_last_error()->message);
}

// The default stop word is in device memory: set by a 4-byte copy on a stream of its own while
// the kernel runs, reset by one on the chip's stream before the next launch, and only after a
// stop (a run after unstopped runs queues no copy).
Test(cuda_fake, cancel_of_a_polling_kernel_ends_cancelled_through_the_device_word) {
  lw_callable_handle_t k = reg("poll", CT_SOURCE_ALL, "poll_stop", 0, NULL, NULL);
  lw_callable_handle_t e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));  // loaded: its lw__cuda_stop set
  int copies = ct_count("htod_async");
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  cr_assert_eq(ct_count("htod_async"), copies, "no stop was sent: nothing to reset");
  cancel_polling_twice(k);
  // k's load sets its lw__cuda_stop (1 copy); each cancel: the copy that set the word (2);
  // the second run: the reset of the first's stop (1).
  cr_assert_eq(ct_count("htod_async"), copies + 4, "a stop copy per cancel, a reset between");
  // The word is reset before the next launch: a run that is not cancelled is not stopped.
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  cr_assert_eq(ct_count("htod_async"), copies + 5, "one reset, then none");
  poll_until_deadline(k, "a run after the cancels polls a word that was reset");
}

Test(cuda_fake, a_deadline_stops_a_polling_kernel_and_ends_deadline_exceeded) {
  lw_callable_handle_t k = reg("poll", CT_SOURCE_ALL, "poll_stop", 0, NULL, NULL);
  poll_until_deadline(k, "the deadline");
}

// The stop word in device memory after a cancelled run: the next launch queues the word's
// reset on the chip's stream, and a cancel of that run must not send its stop copy (on a
// stream of its own) before the reset has landed, or the reset undoes it and the kernel never
// sees the stop. The fake holds the reset; the cancel comes meanwhile; a backend that sent
// the stop at once would leave the kernel polling a reset word (the fake's poll gives up
// after 30 s), while the guard sends it after the reset and the run ends CANCELLED at once.
Test(cuda_fake, a_cancel_while_the_stop_words_reset_is_pending_still_stops_the_kernel) {
  lw_callable_handle_t k = reg("poll", CT_SOURCE_ALL, "poll_stop", 0, NULL, NULL);
  int launched = ct_count("launch");
  lw_handle_t *h = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, k, NULL, NULL, &h));
  while (ct_count("launch") < launched + 1) usleep(200);
  LW_ASSERT_OK(lw_handle_cancel(h));
  cr_assert_eq(lw_handle_wait(h, LW_WAIT_FOREVER), LW_CANCELLED);
  lw_handle_release(h);

  void (*hold)(int) = (void (*)(int))fake_symbol("lw_fake_cuda_hold_zero_word_copies");
  hold(1);
  LW_ASSERT_OK(lw_chip_run_async(chip, k, NULL, NULL, &h));
  while (ct_count("launch") < launched + 2) usleep(200);  // reset, ev_start, kernel queued
  LW_ASSERT_OK(lw_handle_cancel(h));
  usleep(50 * 1000);  // time for a backend without the guard to send its stop early
  hold(0);
  // Finite, not timed: the run ends at once with the guard, after ~30 s without it.
  lw_status_t st = lw_handle_wait(h, 10ll * 1000 * 1000 * 1000);
  cr_assert_eq(st, LW_CANCELLED, "the held reset's run: %s", lw_status_name(st));
  lw_handle_release(h);
}

// LW_CUDA_STOP=host: the word in mapped pinned host memory, stored to by the run lane and
// reset before each launch with no copy. A cancel still ends the polling kernel, twice; the
// next run is not stopped by the word a cancel left (it runs until its deadline); and the chip
// closes with nothing left.
Test(cuda_fake, a_stop_word_in_mapped_host_memory_ends_a_polling_kernel_and_is_reset_for_the_next) {
  reopen_chip_with("LW_CUDA_STOP", "host");
  lw_callable_handle_t k = reg("poll", CT_SOURCE_ALL, "poll_stop", 0, NULL, NULL);
  int copies = ct_count("htod_async");
  cancel_polling_twice(k);
  cr_assert_eq(ct_count("htod_async"), copies + 1, "k's load sets its lw__cuda_stop; the host "
               "word itself takes no copy");
  poll_until_deadline(k, "a run after the cancels polls a word that was reset");
}

// A run's kernel time (LW_CUDA_KERNEL_TIME): by default (auto) the host's clock, no events,
// while no trace records, and two events around the launch while one does; `events` always
// records them, `host` never; each way a run reports a kernel time.
static int events_of_one_run(lw_callable_handle_t e) {
  int before = ct_count("event_record");
  lw_run_timing_t t;
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, &t));
  cr_assert_gt(t.kernel_wall_ns, 0, "a kernel time either way");
  return ct_count("event_record") - before;
}

Test(cuda_fake, kernel_time_takes_events_only_while_a_trace_records_or_when_asked) {
  lw_callable_handle_t e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  cr_assert_eq(events_of_one_run(e), 0, "auto, no trace: the host's clock");
  char path[] = "/tmp/lw_cuda_fake_trace_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  LW_ASSERT_OK(lw_trace_start(path));
  cr_assert_eq(events_of_one_run(e), 2, "auto, a trace records: two events");
  LW_ASSERT_OK(lw_trace_stop(NULL));
  unlink(path);
  cr_assert_eq(events_of_one_run(e), 0, "auto after the trace: none again");

  static const char *const modes[2] = {"events", "host"};
  static const int want[2] = {2, 0};
  for (int i = 0; i < 2; ++i) {
    reopen_chip_with("LW_CUDA_KERNEL_TIME", modes[i]);
    e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
    cr_assert_eq(events_of_one_run(e), want[i], "LW_CUDA_KERNEL_TIME=%s", modes[i]);
  }
  assert_open_refuses("LW_CUDA_KERNEL_TIME", "device",
                      "LW_CUDA_KERNEL_TIME=device: expected auto, events or host");
}

Test(cuda_fake, an_unknown_stop_word_place_fails_open_naming_it) {
  assert_open_refuses("LW_CUDA_STOP", "gpu", "LW_CUDA_STOP=gpu: expected host or device");
}

Test(cuda_fake, a_register_completes_while_a_kernel_runs) {
  lw_callable_handle_t k = reg("poll", CT_SOURCE_ALL, "poll_stop", 0, NULL, NULL);
  lw_handle_t *run = NULL;
  LW_ASSERT_OK(lw_chip_run_async(chip, k, NULL, NULL, &run));
  while (ct_count("launch") < 1) usleep(200);
  // A second program, compiled while the kernel runs: its register finishes first.
  lw_callable_t c = ct_cuda_c("other", CT_SOURCE_ALL "// another program\n", "empty", 0, NULL);
  lw_handle_t *r = NULL;
  LW_ASSERT_OK(lw_chip_register_async(chip, &c, &r));
  LW_ASSERT_OK(lw_handle_wait(r, LW_WAIT_FOREVER));
  cr_assert_not(lw_handle_done(run), "the register finished while the kernel still ran");
  cr_assert_eq(ct_count("module_load"), 1, "the new program is not loaded while it runs");
  lw_callable_handle_t other;
  LW_ASSERT_OK(lw_handle_callable(r, &other));
  LW_ASSERT_OK(lw_handle_cancel(run));
  cr_assert_eq(lw_handle_wait(run, LW_WAIT_FOREVER), LW_CANCELLED);
  // Its load happens before its first launch, with no kernel running.
  LW_ASSERT_OK(lw_chip_run(chip, other, NULL, NULL, NULL));
  char line[700];
  cr_assert_geq(ct_find("module_load", line, sizeof(line), "thread=lw-run-0", "waited=0", NULL),
                0);
  cr_assert_eq(ct_count("module_load"), 2);
  lw_handle_release(run);
  lw_handle_release(r);
}

Test(cuda_fake, a_sticky_error_fails_its_run_naming_it_and_every_later_run_at_once) {
  lw_callable_handle_t bad = reg("bad", CT_SOURCE_ALL, "illegal_address", 0, NULL, NULL);
  lw_callable_handle_t e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  cr_assert_eq(lw_chip_run(chip, bad, NULL, NULL, NULL), LW_TASK_FAILED);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access"), "%s", m);
  cr_assert_not_null(strstr(m, "kernel 'illegal_address' of callable bad"), "%s", m);
  cr_assert_not_null(strstr(m, "context is lost"), "%s", m);
  int launches = ct_count("launch");
  cr_assert_eq(lw_chip_run(chip, e, NULL, NULL, NULL), LW_UNAVAILABLE);
  m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "device 0 is lost (CUDA_ERROR_ILLEGAL_ADDRESS"), "%s", m);
  cr_assert_not_null(strstr(m, "callable empty not run"), "%s", m);
  cr_assert_eq(ct_count("launch"), launches, "nothing more was launched");
  const lw_backend_ops_t *be = chip->backend;
  cr_assert(be->device_lost(chip->device), "the backend says the device is lost");
}

Test(cuda_fake, a_failed_load_fails_the_run_and_every_later_run_of_the_callable) {
  lw_callable_handle_t k =
      reg("noimage", "extern \"C\" __global__ void empty() {} // FAKE_LOAD_FAIL\n", "empty", 0,
          NULL, NULL);
  for (int i = 0; i < 2; ++i) {
    lw_status_t st = lw_chip_run(chip, k, NULL, NULL, NULL);
    cr_assert_neq(st, LW_OK);
    const char *m = lw_last_error()->message;
    cr_assert_not_null(strstr(m, "cannot load callable noimage (CUDA C"), "%s", m);
    cr_assert_not_null(strstr(m, "CUDA_ERROR_NO_BINARY_FOR_GPU"), "%s", m);
    if (i == 1) cr_assert_not_null(strstr(m, "its load failed before"), "%s", m);
  }
  cr_assert_eq(ct_count("module_load"), 1, "the load is not retried");
  cr_assert_eq(ct_count("launch"), 0);
  // Another callable still runs: a failed load is the callable's, not the device's.
  lw_callable_handle_t e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
}

Test(cuda_fake, a_compile_error_fails_the_register_with_the_nvrtc_log) {
  lw_callable_t c = ct_cuda_c("broken", "extern \"C\" __global__ void empty() { FAKE_COMPILE_ERROR; }\n",
                              "empty", 0, NULL);
  lw_callable_handle_t h;
  cr_assert_eq(lw_chip_register(chip, &c, &h), LW_INVALID_ARGUMENT);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "NVRTC could not compile callable broken for sm_90"), "%s", m);
  cr_assert_not_null(strstr(m, "NVRTC_ERROR_COMPILATION"), "%s", m);
  cr_assert_not_null(
      strstr(m, "broken.cu(3): error: identifier \"FAKE_COMPILE_ERROR\" is undefined"),
      "the log from its first error line on: %s", m);
}

// NVRTC sees no include folder it is not given: the backend hands it lanework/kernel_cuda.h in
// memory, so a kernel including it registers and runs with no build option.
Test(cuda_fake, a_kernel_including_kernel_cuda_h_registers_with_no_build_option) {
  lw_callable_handle_t h =
      reg("with_header", CT_SOURCE_ALL, "empty", 0, NULL, NULL);  // it includes the header
  cr_assert_geq(ct_find("compile", NULL, 0, "name=with_header.cu",
                        "headers=lanework/kernel_cuda.h", NULL),
                0, "the header went to NVRTC in memory");
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
}

Test(cuda_fake, a_missing_kernel_or_a_wrong_parameter_count_fails_the_first_run_naming_it) {
  lw_callable_handle_t k = reg("nokernel", CT_SOURCE_ALL, "absent_kernel", 0, NULL, NULL);
  cr_assert_eq(lw_chip_run(chip, k, NULL, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "has no kernel 'absent_kernel'"), "%s",
                     lw_last_error()->message);
  static const uint8_t three[3] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT};
  lw_callable_handle_t v = reg("vadd3", CT_SOURCE_ALL, "vector_add", 3, three, NULL);
  float x[4] = {0};
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, x, sizeof(x), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, x, sizeof(x), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, x, sizeof(x), LW_TAG_OUTPUT));
  cr_assert_eq(lw_chip_run(chip, v, &args, NULL, NULL), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message,
                            "kernel 'vector_add' of callable vadd3 takes 4 parameters but its "
                            "signature declares 3"),
                     "%s", lw_last_error()->message);
}

// A CUBIN (given, or what NVRTC and nvJitLink write: real ones are CUBINs, the fake's are
// not) is looked into at register: a kernel it does not hold fails the register, naming the
// ones it does, and nothing reaches the driver. (A fat binary or PTX for the driver's JIT is
// looked into at load: the test above.)
Test(cuda_fake, a_cubin_without_the_kernel_fails_the_register_naming_the_kernels_it_holds) {
  uint8_t cubin[CT_CUBIN_BYTES];
  lw_callable_t b = {.name = "cubin_empty", .format = LW_IMAGE_CUBIN, .entry = "vector_add"};
  b.image = cubin;
  b.image_bytes = ct_cubin(cubin, "empty");
  lw_callable_handle_t h;
  cr_assert_eq(lw_chip_register(chip, &b, &h), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message,
                            "callable cubin_empty has no kernel 'vector_add' (extern \"C\" "
                            "__global__); its CUBIN holds: empty"),
                     "%s", lw_last_error()->message);
  cr_assert_eq(ct_count("module_load"), 0, "the driver never got it");
  b.entry = "empty";
  LW_ASSERT_OK(lw_chip_register(chip, &b, &h));
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
}

Test(cuda_fake, unloads_happen_on_the_run_lane_or_at_close_never_on_the_register_lane) {
  lw_callable_handle_t a = reg("a", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  lw_callable_handle_t b = reg("b", CT_SOURCE_ALL "// b\n", "empty", 0, NULL, NULL);
  LW_ASSERT_OK(lw_chip_run(chip, a, NULL, NULL, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, b, NULL, NULL, NULL));
  LW_ASSERT_OK(lw_chip_unregister(chip, a));
  cr_assert_eq(ct_count("module_unload"), 0, "queued for the run lane");
  LW_ASSERT_OK(lw_chip_run(chip, b, NULL, NULL, NULL));
  cr_assert_geq(ct_find("module_unload", NULL, 0, "thread=lw-run-0", "ctx=1", NULL), 0);
  lw_chip_close(chip);
  chip = NULL;
  cr_assert_eq(ct_count("module_unload"), 2, "close unloads the rest");
  cr_assert_eq(ct_find("module_unload", NULL, 0, "thread=lw-reg", NULL), -1);
}

Test(cuda_fake, a_run_with_nothing_to_copy_back_waits_for_its_stream_once) {
  lw_callable_handle_t e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));  // the first run loads the module
  int before = ct_count("stream_sync");
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  cr_assert_eq(ct_count("stream_sync"), before,
               "the stream query that saw the kernel end is its only wait: no synchronize");
  // A run with an output (copied per run, the default) copies it back and waits for that copy.
  lw_callable_handle_t k = reg("vadd", CT_SOURCE_ALL, "vector_add", 4, ct_vadd_dirs, NULL);
  run_vadd(k, 64);
  before = ct_count("stream_sync");
  run_vadd(k, 64);
  cr_assert_gt(ct_count("stream_sync"), before, "the output's copy back is waited for");
}

Test(cuda_fake, a_run_on_the_callers_thread_leaves_its_context_as_it_was) {
  reopen_chip_with("LW_L2_RUN_HERE", "1");
  lw_callable_handle_t e = reg("empty", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  // The fake the backend loaded, asked about this thread.
  int (*current)(void) = (int (*)(void))fake_symbol("lw_fake_cuda_context_current");
  cr_assert_eq(current(), 0, "the chip's context is not left current on the caller's thread");
}

// A run that waits long enough to nap lowers its thread's timer slack for the naps (a 20 us
// nap lasted ~100 us with Linux's default 50 us slack) and puts the caller's own back: an L2
// run on the caller's thread leaves the thread as it found it.
Test(cuda_fake, a_napping_run_on_the_callers_thread_leaves_its_timer_slack_as_it_was) {
  reopen_chip_with("LW_L2_RUN_HERE", "1");
  static const uint8_t dirs[1] = {LW_PARAM_SCALAR};
  lw_callable_handle_t k = reg("sleep", CT_SOURCE_ALL, "sleep_ms", 1, dirs, NULL);
  cr_assert_eq(prctl(PR_SET_TIMERSLACK, 77000), 0);
  lw_args_t a;
  lw_args_init(&a);
  LW_ASSERT_OK(lw_args_add_scalar(&a, 20));  // 20 ms: far past the spin, so the lane naps
  LW_ASSERT_OK(lw_chip_run(chip, k, &a, NULL, NULL));
  cr_assert_eq(prctl(PR_GET_TIMERSLACK), 77000, "the caller's timer slack is back");
  (void)prctl(PR_SET_TIMERSLACK, 0);  // the default again
}

Test(cuda_fake, compile_and_load_are_separate_spans_inside_the_register_and_the_first_run) {
  lw_error_t err;
  LW_ASSERT_OK(lw__trace_begin(NULL, &err));
  lw_callable_handle_t e = reg("traced", CT_SOURCE_ALL, "empty", 0, NULL, NULL);
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  LW_ASSERT_OK(lw_chip_run(chip, e, NULL, NULL, NULL));
  lw_trace_capture_t cap;
  lw_trace_summary_t sum;
  LW_ASSERT_OK(lw__trace_end(&cap, &sum, &err));
  const lw_trace_record_t *reg_span = NULL, *compile = NULL, *load = NULL, *runs[2] = {0};
  int n_runs = 0, n_loads = 0;
  for (size_t i = 0; i < cap.n; ++i) {
    const lw_trace_record_t *r = &cap.rec[i];
    if (r->ev.kind == LW_TRACE_REGISTER) reg_span = r;
    if (r->ev.kind == LW_TRACE_COMPILE) compile = r;
    if (r->ev.kind == LW_TRACE_LOAD) load = r, n_loads++;
    if (r->ev.kind == LW_TRACE_RUN && n_runs < 2) runs[n_runs++] = r;
  }
  cr_assert(reg_span && compile && load && n_runs == 2, "register, compile, load and two runs");
  cr_assert_eq(n_loads, 1, "only the first run loads");
  cr_assert_eq(compile->track, reg_span->track, "the compile is on the register lane");
  cr_assert_geq(compile->ev.ts_ns, reg_span->ev.ts_ns);
  cr_assert_leq(compile->ev.ts_ns + compile->ev.dur_ns, reg_span->ev.ts_ns + reg_span->ev.dur_ns);
  cr_assert_eq(load->track, runs[0]->track, "the load is on the run lane");
  cr_assert_neq(load->track, compile->track);
  cr_assert_geq(load->ev.ts_ns, runs[0]->ev.ts_ns, "inside the first run's span");
  cr_assert_leq(load->ev.ts_ns + load->ev.dur_ns, runs[0]->ev.ts_ns + runs[0]->ev.dur_ns);
  cr_assert_eq(load->ev.run_id, runs[0]->ev.run_id);
  cr_assert_str_eq(load->ev.name, "traced");
  cr_assert_str_eq(compile->ev.name, "traced");
  lw__trace_capture_free(&cap);
}

// A PTX callable of one empty kernel, "empty".
static lw_callable_t ptx_empty(void) {
  static const char ptx[] = ".version 8.5\n.target sm_90\n.address_size 64\n"
                            ".visible .entry empty()\n{\n\tret;\n}\n";
  lw_callable_t p;
  memset(&p, 0, sizeof(p));
  p.name = "ptx";
  p.image = ptx;
  p.image_bytes = sizeof(ptx) - 1;
  p.entry = "empty";
  p.format = LW_IMAGE_PTX;
  return p;
}

Test(cuda_fake, ptx_is_refused_without_nvjitlink_and_the_driver_jit_runs_it_when_asked) {
  lw_callable_t p = ptx_empty();
  lw_callable_handle_t h;
  cr_assert_eq(lw_chip_register(chip, &p, &h), LW_UNAVAILABLE);
  cr_assert_not_null(strstr(lw_last_error()->message, "or the build option --lw-driver-jit"),
                     "%s", lw_last_error()->message);
  p.build_options = "--lw-driver-jit";
  LW_ASSERT_OK(lw_chip_register(chip, &p, &h));
  cr_assert_eq(ct_count("ptx_jit"), 0, "not on the register lane");
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
  cr_assert_geq(ct_find("ptx_jit", NULL, 0, "thread=lw-run-0", "ctx=1", NULL), 0,
                "the driver's JIT ran at the first run, on the run lane");
}

Test(cuda_fake, ptx_is_linked_by_nvjitlink_off_context_on_the_register_lane_and_runs) {
  char path[512];
  snprintf(path, sizeof(path), "%s/libfake_nvjitlink.so", ct_fake_dir());
  setenv("LW_NVJITLINK_LIBRARY", path, 1);
  lw_callable_t p = ptx_empty();
  p.build_options = "-O3";
  lw_callable_handle_t h;
  lw_status_t st = lw_chip_register(chip, &p, &h);
  cr_assert_eq(st, LW_OK, "%s", lw_last_error()->message);
  char line[700];
  cr_assert_geq(ct_find("link", line, sizeof(line), "thread=lw-reg-0", "ctx=0", NULL), 0,
                "nvJitLink ran on the register lane with no context current");
  cr_assert_not_null(strstr(line, "opts=-arch=sm_90|-O3"), "%s", line);
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
  cr_assert_eq(ct_count("ptx_jit"), 0, "the driver got a CUBIN, not PTX to compile");
  cr_assert_geq(ct_find("module_load", NULL, 0, "thread=lw-run-0", "empty", NULL), 0);
}

Test(cuda_fake, lw_cuda_devices_names_a_chips_device_by_uuid) {
  lw_chip_close(chip);
  chip = NULL;
  setenv("LW_FAKE_CUDA_DEVICES", "2", 1);
  // The fake's device i has UUID f0f1...fe0i; chip 0 is named by device 1's.
  setenv("LW_CUDA_DEVICES", "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfe01,0", 1);
  open_chip();
  cr_assert_geq(ct_find("ctx_create", NULL, 0, "dev=1", NULL), 0);
  lw_chip_close(chip);
  chip = NULL;
  setenv("LW_CUDA_DEVICES", "MIG-00000000-0000-0000-0000-000000000000", 1);
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
  cr_assert_eq(lw_chip_open(&cfg, &chip), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message,
                            "no visible device has UUID MIG-00000000-0000-0000-0000-000000000000"),
                     "%s", lw_last_error()->message);
  unsetenv("LW_CUDA_DEVICES");
  cfg.device_id = 2;
  cr_assert_eq(lw_chip_open(&cfg, &chip), LW_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(lw_last_error()->message, "device_id 2 is out of range: 2 CUDA devices"),
                     "%s", lw_last_error()->message);
}

Test(cuda_fake, a_launch_the_driver_refuses_fails_its_run_and_the_chip_runs_on) {
  lw_callable_handle_t k = reg("vadd", CT_SOURCE_ALL, "vector_add", 4, ct_vadd_dirs, NULL);
  float x[2048] = {0};
  lw_args_t args;
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, x, sizeof(x), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, x, sizeof(x), LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, x, sizeof(x), LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, 2048));
  // A block of 2048 threads: more than a CUDA block holds.
  const uint64_t g[3] = {2048, 0, 0}, l[3] = {2048, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&args, 1, g, l));
  cr_assert_eq(lw_chip_run(chip, k, &args, NULL, NULL), LW_TASK_FAILED);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "at cuLaunchKernel: CUDA_ERROR_INVALID_VALUE"), "%s", m);
  cr_assert_null(strstr(m, "context is lost"), "not a sticky error: %s", m);
  run_vadd(k, 64);
}
