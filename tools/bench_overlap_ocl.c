// tools/bench_overlap_ocl.c — `lanework bench overlap --backend opencl`: seed 004's table with
// a real device compile as the register, at L2 (an opencl chip in this process) or L3 (a
// worker whose chip child opens the OpenCL device).
//
//   serial  = run(C1) + register(C2) + run(C2)
//   overlap = run_async(C1), [delay], register_async(C2) while C1 runs, then run(C2) once C1
//             and the register are both done, wait
//
// C2 = kernels/opencl/big_program.cl (-DSTAGES=64 unless --stages): its register is a cold
// LLVM build (PoCL's program cache is off: POCL_KERNEL_CACHE=0, see bench_ocl.h), unregistered
// after every use so each trial pays the whole build. C1 = kernels/opencl/repeat_vector_add.cl,
// a kernel that has already run (PoCL compiles a kernel's machine code at its first enqueue,
// under the same process-wide lock as a build, so only a warm C1 can run beside a build), its
// repeat count calibrated so one run lasts 1.5x a cold build of C2 unless --repeat is given.
//
// Two hidden fractions, (serial - overlap) / min(run(C1), register(C2)):
//   hidden_fraction                 seed 004's, over the whole serial and overlap times;
//   hidden_fraction_register_phase  over run(C1) + register(C2) against the time from C1's
//                                   submit to both being done: run(C2) left out.
// On PoCL run(C2) is C2's first enqueue, where PoCL generates the machine code (seconds for
// big_program, twice: once per global-offset specialization, the first slice at offset 0 and
// the rest not). It is the same work in both arms, but its spread from trial to trial on a
// shared machine is larger than the register itself, so the seed's fraction measures mostly
// that noise; the register-phase one measures what the overlap is about.
//
// Correctness: C1 computes in exact uint arithmetic and is compared with a host reference
// (closed form, not the loop: see c1_reference); max_diff is the largest difference over every
// run of the benchmark, and the target is 0. C2 computes sin and cos in float, which a device's
// math library need not round as the host's does: C2 is compared with a host reference in
// double (c2_max_rel_err, reported; above C2_REL_TOL the bench fails) and, bit for bit, with
// its first run (any difference counts in max_diff), so an overlapped run that computed
// anything else is caught.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench.h"
#include "tools/bench_ocl.h"
#include "tools/overlap_events.h"
#include "tools/overlap_driver.h"

#define C1_ELEMS (1u << 12)
#define C2_ELEMS (1u << 12)
#define C2_DEFAULT_STAGES 64
// C2's device results against the double-precision host reference: worse than this relative
// error (of the output's magnitude) is a wrong result, not rounding.
#define C2_REL_TOL 1e-3
#define C1_FLOOR_US 100000.0
#define C1_CAP_US 4000000.0

static const uint8_t kC1Dirs[5] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR,
                                   LW_PARAM_SCALAR};
static const uint8_t kC2Dirs[3] = {LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR};

typedef struct bufs {
  uint32_t *a, *b, *c1, *ref1;
  float *x, *c2, *first2;
  bool have_first2;
  long ref1_repeat;  // the repeat count ref1 was computed for
  long stages;       // C2's -DSTAGES
} bufs_t;

typedef struct check {
  double max_diff;     // C1 vs host, C2 vs its first run
  double c2_rel_err;   // C2 vs the double host reference
} check_t;

// repeat_vector_add.cl: acc = a; repeat r times acc = 3 acc + b (mod 2^32). The map
// x -> 3x + b composed r times is x -> A x + B; (A, B) by squaring, O(log r) per element.
static uint32_t c1_one(uint32_t a, uint32_t b, uint64_t r) {
  uint32_t ra = 1, rb = 0, ba = 3, bb = b;
  while (r) {
    if (r & 1) {
      rb = ba * rb + bb;
      ra = ba * ra;
    }
    bb = ba * bb + bb;
    ba = ba * ba;
    r >>= 1;
  }
  return ra * a + rb;
}

static void c1_reference(bufs_t *b, long repeat) {
  if (b->ref1_repeat == repeat) return;
  for (uint32_t i = 0; i < C1_ELEMS; ++i) b->ref1[i] = c1_one(b->a[i], b->b[i], (uint64_t)repeat);
  b->ref1_repeat = repeat;
}

// big_program.cl's lw_kernel_main for one element, in double.
static double c2_reference(float xf, long stages) {
  double x = xf, acc = 0.0;
  for (int k = 0; k < stages; ++k) {
    double y = x * (1.0 + (double)k / 1024.0);
    for (int j = 0; j < (k % 5) + 2; ++j) {
      y = y * 0.5 + sin(y + (double)k) * cos(x - (double)j) + (double)(k % 3);
    }
    acc += y;
  }
  return acc;
}

static void check_outputs(bufs_t *b, long repeat, check_t *c) {
  c1_reference(b, repeat);
  for (uint32_t i = 0; i < C1_ELEMS; ++i) {
    double d = fabs((double)b->c1[i] - (double)b->ref1[i]);
    if (d > c->max_diff) c->max_diff = d;
  }
  if (!b->have_first2) {
    memcpy(b->first2, b->c2, C2_ELEMS * sizeof(float));
    b->have_first2 = true;
    for (uint32_t i = 0; i < C2_ELEMS; ++i) {
      double ref = c2_reference(b->x[i], b->stages);
      double rel = fabs((double)b->c2[i] - ref) / fmax(fabs(ref), 1.0);
      if (isnan(rel)) rel = INFINITY;  // a NaN output is a wrong one
      if (rel > c->c2_rel_err) c->c2_rel_err = rel;
    }
  }
  for (uint32_t i = 0; i < C2_ELEMS; ++i) {
    // Bit for bit: a NaN in both is the same result, a NaN in one only is not.
    if (memcmp(&b->c2[i], &b->first2[i], sizeof(float)) == 0) continue;
    double d = fabs((double)b->c2[i] - (double)b->first2[i]);
    if (isnan(d)) d = INFINITY;
    if (d > c->max_diff) c->max_diff = d;
  }
}

static lw_status_t c1_args(lw_args_t *a, const bufs_t *b, long repeat) {
  const uint64_t g[3] = {C1_ELEMS, 0, 0};
  lw_args_init(a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, b->a, C1_ELEMS * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, b->b, C1_ELEMS * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, b->c1, C1_ELEMS * 4, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(a, C1_ELEMS));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(a, (uint64_t)repeat));
  return lw_args_set_launch(a, 1, g, NULL);
}

static lw_status_t c2_args(lw_args_t *a, const bufs_t *b) {
  const uint64_t g[3] = {C2_ELEMS, 0, 0};
  lw_args_init(a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, b->x, C2_ELEMS * 4, LW_TAG_INPUT));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(a, b->c2, C2_ELEMS * 4, LW_TAG_OUTPUT));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(a, C2_ELEMS));
  return lw_args_set_launch(a, 1, g, NULL);
}

typedef struct row {
  long delay_ms;
  double run_c1, reg_c2, run_c2, serial, overlap, hidden;
  // The register phase alone: serial run(C1) + register(C2), overlapped from the start to
  // both done (run(C2) left out, see the file comment).
  double serial_reg, overlap_reg, hidden_reg;
  // In the overlap arm, from C1's submit: C1 done, the register done.
  double overlap_c1, overlap_reg_done;
  // overlap_by_events over the row's trials: median, min, max (-1: no register span seen)
  double by_events, by_events_min, by_events_max;
} row_t;

static lw_status_t one_trial(lw_overlap_driver_t *d, const lw_callable_t *c2,
                             lw_callable_handle_t h1, bufs_t *b, long repeat, long delay,
                             const lw_overlap_trial_opts_t *to, row_t *r, check_t *chk) {
  lw_args_t a1, a2;
  LW_RETURN_IF_ERROR(c1_args(&a1, b, repeat));
  LW_RETURN_IF_ERROR(c2_args(&a2, b));
  lw_callable_handle_t h2;

  // Serial.
  memset(b->c1, 0, C1_ELEMS * 4);
  memset(b->c2, 0, C2_ELEMS * 4);
  double t0 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->run(d, h1, &a1));
  double t1 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->register_sync(d, c2, &h2));
  double t2 = lw__bench_now_us();
  LW_RETURN_IF_ERROR(d->run(d, h2, &a2));
  double t3 = lw__bench_now_us();
  r->delay_ms = delay;
  r->run_c1 = t1 - t0;
  r->reg_c2 = t2 - t1;
  r->run_c2 = t3 - t2;
  r->serial = t3 - t0;
  r->serial_reg = t2 - t0;
  check_outputs(b, repeat, chk);
  LW_RETURN_IF_ERROR(d->unregister(d, h2));

  // Overlap. C2 is submitted once C1 and the register are both done (the chip runs one kernel
  // at a time, so queueing it behind C1 earlier would start it no sooner): the instant both
  // are done ends the register phase.
  memset(b->c1, 0, C1_ELEMS * 4);
  memset(b->c2, 0, C2_ELEMS * 4);
  lw_handle_t *run1 = NULL, *reg = NULL, *run2 = NULL;
  lw_status_t st = lw__overlap_phase_start(d, to, h1, &a1, c2, delay, &t0, &run1, &reg);
  if (st != LW_OK && !run1) return st;
  // When each of the two finished (for the table's diagnosis: how much each slowed the other),
  // polled every 200 us: a third busy thread would take a core from them.
  double reg_done = 0, c1_done = 0;
  while (st == LW_OK && (reg_done == 0 || c1_done == 0)) {
    if (reg_done == 0 && lw_handle_done(reg)) reg_done = lw__bench_now_us();
    if (c1_done == 0 && lw_handle_done(run1)) c1_done = lw__bench_now_us();
    if (reg_done == 0 || c1_done == 0) usleep(200);
  }
  if (st == LW_OK) st = lw_handle_wait(reg, LW_WAIT_FOREVER);
  lw_status_t s1 = lw_handle_wait(run1, LW_WAIT_FOREVER);
  t1 = lw__bench_now_us();
  r->overlap_c1 = c1_done - t0;
  r->overlap_reg_done = reg_done - t0;
  if (st == LW_OK) st = s1;
  bool have_h2 = false;
  if (st == LW_OK) st = lw_handle_callable(reg, &h2);
  if (st == LW_OK) have_h2 = true;
  if (st == LW_OK) st = d->run_async(d, h2, &a2, &run2);
  if (st == LW_OK) st = lw_handle_wait(run2, LW_WAIT_FOREVER);
  t2 = lw__bench_now_us();
  lw_status_t ev_st = lw__overlap_events_end(to->ev, to->keep);
  if (st == LW_OK) st = ev_st;
  r->overlap = t2 - t0;
  r->overlap_reg = t1 - t0;
  r->hidden = lw__bench_hidden_fraction(r->serial, r->overlap, r->run_c1, r->reg_c2);
  r->hidden_reg = lw__bench_hidden_fraction(r->serial_reg, r->overlap_reg, r->run_c1, r->reg_c2);
  lw_handle_release(run1);
  lw_handle_release(run2);
  lw_handle_release(reg);
  if (st != LW_OK) {
    if (have_h2) (void)d->unregister(d, h2);
    return st;
  }
  check_outputs(b, repeat, chk);
  return d->unregister(d, h2);
}

// Median of five C1 runs at repeat.
static lw_status_t time_c1(lw_overlap_driver_t *d, lw_callable_handle_t h1, const bufs_t *b,
                           long repeat, double *out_us) {
  lw_args_t a;
  LW_RETURN_IF_ERROR(c1_args(&a, b, repeat));
  double us[5];
  for (int i = 0; i < 5; ++i) {
    double t0 = lw__bench_now_us();
    LW_RETURN_IF_ERROR(d->run(d, h1, &a));
    us[i] = lw__bench_now_us() - t0;
  }
  *out_us = lw__bench_median(us, 5);
  return LW_OK;
}

// Scales repeat so one C1 run takes about target_us (two rounds: the first runs also warm C1).
static lw_status_t calibrate(lw_overlap_driver_t *d, lw_callable_handle_t h1, const bufs_t *b,
                             double target_us, long *repeat) {
  for (int round = 0; round < 2; ++round) {
    double m;
    LW_RETURN_IF_ERROR(time_c1(d, h1, b, *repeat, &m));
    double next = (double)*repeat * target_us / (m > 1.0 ? m : 1.0);
    *repeat = next < 1.0 ? 1 : next > 1e9 ? 1000000000L : (long)next;
  }
  return LW_OK;
}

static void spread(const double *v, int n, double *lo, double *hi) {
  *lo = v[0];
  *hi = v[0];
  for (int i = 1; i < n; ++i) {
    *lo = fmin(*lo, v[i]);
    *hi = fmax(*hi, v[i]);
  }
}

int lw__bench_overlap_ocl(const lw_bench_opts_t *o) {
  long delays[8];
  int n_delays = 0;
  // A 2 ms delay means little next to a build of hundreds of ms: by default one row, delay 0.
  const char *list = o->delays_given ? o->delays : "0";
  n_delays = lw__bench_parse_delays(list, delays, 8);
  if (n_delays < 0) return 2;

  lw_callable_t c1, c2;
  if (!lw__bench_ocl_load("repeat_vector_add", 5, kC1Dirs, &c1)) return 1;
  if (!lw__bench_ocl_load("big_program", 3, kC2Dirs, &c2)) {
    lw_callable_free_loaded(&c1);
    return 1;
  }
  bufs_t b = {0};
  b.ref1_repeat = -1;
  b.stages = o->stages > 0 ? o->stages : C2_DEFAULT_STAGES;
  // Part of C2's digest: another stage count is another program.
  static char c2_options[32];
  snprintf(c2_options, sizeof(c2_options), "-DSTAGES=%ld", b.stages);
  c2.build_options = c2_options;
  b.ref1 = malloc(C1_ELEMS * 4);
  b.first2 = malloc(C2_ELEMS * 4);
  lw_overlap_driver_t *d = NULL;
  int rc = 1;
  bool pin = o->pin == 1 || (o->pin == -1 && sysconf(_SC_NPROCESSORS_ONLN) >= 2);
  double t_open = lw__bench_now_us();
  lw_status_t st = lw__overlap_driver_open(o->level, "opencl", 1u << 20, pin, &d);
  if (st != LW_OK) {
    rc = lw__bench_fail("opening an opencl chip", st);
    goto out;
  }
  double open_ms = (lw__bench_now_us() - t_open) / 1e3;
  b.a = d->alloc(d, C1_ELEMS * 4);
  b.b = d->alloc(d, C1_ELEMS * 4);
  b.c1 = d->alloc(d, C1_ELEMS * 4);
  b.x = d->alloc(d, C2_ELEMS * 4);
  b.c2 = d->alloc(d, C2_ELEMS * 4);
  if (!b.a || !b.b || !b.c1 || !b.x || !b.c2 || !b.ref1 || !b.first2) {
    fprintf(stderr, "lanework bench overlap: out of memory\n");
    goto out;
  }
  for (uint32_t i = 0; i < C1_ELEMS; ++i) {
    b.a[i] = i * 2654435761u;
    b.b[i] = (i % 1000) + 1;
  }
  for (uint32_t i = 0; i < C2_ELEMS; ++i) b.x[i] = (float)(i % 1000) * 0.01f - 5.0f;

  lw_callable_handle_t h1;
  st = d->register_sync(d, &c1, &h1);
  if (st != LW_OK) {
    rc = lw__bench_fail("register C1", st);
    goto out;
  }
  long repeat = o->repeat > 0 ? o->repeat : 4096;
  check_t chk = {0.0, 0.0};
  row_t warm;
  static lw_overlap_events_t ev[8];  // big: not on the stack
  char stem[64];
  snprintf(stem, sizeof(stem), "overlap_l%d_opencl%s", o->level, o->serial ? "_serial" : "");
  lw__overlap_events_init(&ev[0], NULL, stem);
  lw_overlap_trial_opts_t warm_opts = {o->serial, &ev[0], false};
  if (o->repeat <= 0) {
    // A first C1 of about 50 ms, then one untimed trial (its cold build of C2 sets C1's
    // length; it also keeps first-touch and first-enqueue costs out of the table), then C1
    // at 1.5x that build.
    lw__bench_progress("calibrating C1 and a warm-up trial");
    st = calibrate(d, h1, &b, 50000.0, &repeat);
    if (st == LW_OK) st = one_trial(d, &c2, h1, &b, repeat, 0, &warm_opts, &warm, &chk);
    if (st == LW_OK) {
      double target = fmin(fmax(1.5 * warm.reg_c2, C1_FLOOR_US), C1_CAP_US);
      st = calibrate(d, h1, &b, target, &repeat);
    }
  } else {
    st = one_trial(d, &c2, h1, &b, repeat, 0, &warm_opts, &warm, &chk);
  }
  if (st != LW_OK) {
    rc = lw__bench_fail("calibration and warm-up trial", st);
    goto out;
  }

  row_t rows[8];
  double hid_lo[8], hid_hi[8], hreg_lo[8], hreg_hi[8], reg_lo = 0, reg_hi = 0;
  int trials = o->trials;
  static double run_c1[1000], reg_c2[1000], run_c2[1000], serial[1000], overlap[1000],
      hidden[1000], serial_reg[1000], overlap_reg[1000], hidden_reg[1000], ov_c1[1000],
      ov_reg[1000];
  for (int di = 0; di < n_delays; ++di) {
    // Only the first row's first trial is kept as a picture.
    lw__overlap_events_init(&ev[di], di == 0 ? o->trace_dir : NULL, stem);
    lw_overlap_trial_opts_t topts = {o->serial, &ev[di], true};
    for (int t = 0; t < trials; ++t) {
      lw__bench_progress("delay %ld ms: trial %d/%d", delays[di], t + 1, trials);
      row_t r;
      st = one_trial(d, &c2, h1, &b, repeat, delays[di], &topts, &r, &chk);
      if (st != LW_OK) {
        rc = lw__bench_fail("trial", st);
        goto out;
      }
      if (getenv("LW_BENCH_VERBOSE")) {
        fprintf(stderr,
                "trial %d delay %ld: run_c1 %.0f reg_c2 %.0f run_c2 %.0f serial %.0f overlap "
                "%.0f hidden %.3f; register phase: serial %.0f overlap %.0f hidden %.3f; in the "
                "overlap C1 done at %.0f, register done at %.0f\n",
                t, delays[di], r.run_c1, r.reg_c2, r.run_c2, r.serial, r.overlap, r.hidden,
                r.serial_reg, r.overlap_reg, r.hidden_reg, r.overlap_c1, r.overlap_reg_done);
      }
      run_c1[t] = r.run_c1;
      reg_c2[t] = r.reg_c2;
      run_c2[t] = r.run_c2;
      serial[t] = r.serial;
      overlap[t] = r.overlap;
      hidden[t] = r.hidden;
      serial_reg[t] = r.serial_reg;
      overlap_reg[t] = r.overlap_reg;
      hidden_reg[t] = r.hidden_reg;
      ov_c1[t] = r.overlap_c1;
      ov_reg[t] = r.overlap_reg_done;
    }
    size_t n = (size_t)trials;
    row_t *x = &rows[di];
    *x = (row_t){.delay_ms = delays[di],
                 .run_c1 = lw__bench_median(run_c1, n),
                 .reg_c2 = lw__bench_median(reg_c2, n),
                 .run_c2 = lw__bench_median(run_c2, n),
                 .serial = lw__bench_median(serial, n),
                 .overlap = lw__bench_median(overlap, n),
                 .serial_reg = lw__bench_median(serial_reg, n),
                 .overlap_reg = lw__bench_median(overlap_reg, n),
                 .overlap_c1 = lw__bench_median(ov_c1, n),
                 .overlap_reg_done = lw__bench_median(ov_reg, n)};
    x->hidden = lw__bench_hidden_fraction(x->serial, x->overlap, x->run_c1, x->reg_c2);
    x->hidden_reg = lw__bench_hidden_fraction(x->serial_reg, x->overlap_reg, x->run_c1, x->reg_c2);
    x->by_events = x->by_events_min = x->by_events_max = -1;
    (void)lw__overlap_events_summary(&ev[di], &x->by_events, &x->by_events_min,
                                     &x->by_events_max);
    spread(hidden, trials, &hid_lo[di], &hid_hi[di]);
    spread(hidden_reg, trials, &hreg_lo[di], &hreg_hi[di]);
    if (di == 0) spread(reg_c2, trials, &reg_lo, &reg_hi);
  }

  lw__bench_progress_end();
  printf("L%d %s, opencl device 0, builds %s\n", o->level,
         o->level == 2 ? "direct chip worker" : "worker (forked chip child)", LW_BENCH_OCL_BUILDS);
  printf("C1 = opencl/repeat_vector_add (%u work-items, repeat_count=%ld, warm), C2 = "
         "opencl/big_program (%u work-items, %zu-byte source, -DSTAGES=%ld), trials=%d\n",
         C1_ELEMS, repeat, C2_ELEMS, c2.image_bytes, b.stages, trials);
  printf("  chip open %.0f ms (the device compiler's start-up included)\n", open_ms);
  printf("  run(C1) %.1f ms, register(C2) %.1f ms (cold build; trials %.1f-%.1f), run(C2) %.1f "
         "ms (its first enqueue: PoCL generates the machine code then) (medians, delay %ld ms)\n",
         rows[0].run_c1 / 1e3, rows[0].reg_c2 / 1e3, reg_lo / 1e3, reg_hi / 1e3,
         rows[0].run_c2 / 1e3, rows[0].delay_ms);
  printf("  lanes: %s\n\n", pin ? "run lane on CPU 0, register lane on CPU 1" : "placed by the OS");
  if (o->serial) {
    printf("--serial: C2 is registered only after C1 finished (the negative control: hidden "
           "and by events should read ~0)\n");
  }
  printf("Register phase: serial = run(C1) + register(C2); overlap = run(C1) || register(C2)\n");
  printf("| Delay before C2 register | Serial median | Overlap median | Speedup | "
         "Hidden (median) | Hidden (trials, min-max) | By events (median, min-max) |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int di = 0; di < n_delays; ++di) {
    const row_t *r = &rows[di];
    printf("| %ld ms | %.1f ms | %.1f ms | %.2fx | %.3f | %.3f-%.3f | %.3f, %.3f-%.3f |\n",
           r->delay_ms, r->serial_reg / 1e3, r->overlap_reg / 1e3, r->serial_reg / r->overlap_reg,
           r->hidden_reg, hreg_lo[di], hreg_hi[di], r->by_events, r->by_events_min,
           r->by_events_max);
  }
  printf("By events: the share of each trial's register span (the build on the register lane) "
         "inside a\nrun span of the same chip, from the trial's trace events.\n");
  printf("In the overlap (medians, delay %ld ms): C1 done %.1f ms and the register done %.1f ms "
         "after C1's submit (alone: %.1f and %.1f ms)\n",
         rows[0].delay_ms, rows[0].overlap_c1 / 1e3, rows[0].overlap_reg_done / 1e3,
         rows[0].run_c1 / 1e3, rows[0].reg_c2 / 1e3);
  printf("\nSeed table: serial = run(C1) + register(C2) + run(C2); overlap adds run(C2) too\n");
  printf("| Delay before C2 register | Serial median | Overlap median | Reduction | Speedup | "
         "Hidden (median) | Hidden (trials, min-max) |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int di = 0; di < n_delays; ++di) {
    const row_t *r = &rows[di];
    printf("| %ld ms | %.1f ms | %.1f ms | %.1f%% | %.2fx | %.3f | %.3f-%.3f |\n", r->delay_ms,
           r->serial / 1e3, r->overlap / 1e3, 100.0 * (r->serial - r->overlap) / r->serial,
           r->serial / r->overlap, r->hidden, hid_lo[di], hid_hi[di]);
  }
  printf("\nCorrectness: max_diff=%.3e (C1 against the host reference, C2 against its first "
         "run); C2 against the host reference in double: max relative error %.3e\n",
         chk.max_diff, chk.c2_rel_err);
  int json_rc = 0;
  if (o->json) {
    const row_t *r = &rows[0];
    lw_json_t j;
    lw__bench_json_begin(&j, "overlap");
    lw__json_kv_string(&j, "backend", "opencl");
    lw__json_kv_int(&j, "level", o->level);
    lw__json_kv_string(&j, "builds", "cold");
    lw__json_kv_int(&j, "pocl_kernel_cache", 0);
    lw__json_kv_int(&j, "c2_stages", b.stages);
    lw__json_kv_int(&j, "trials", trials);
    lw__json_kv_int(&j, "repeat_count", repeat);
    lw__json_kv_bool(&j, "pinned", pin);
    lw__json_kv_fixed(&j, "chip_open_ms", open_ms, 1);
    lw__json_kv_int(&j, "delay_ms", r->delay_ms);
    lw__json_kv_fixed(&j, "run_c1_us", r->run_c1, 1);
    lw__json_kv_fixed(&j, "register_c2_us", r->reg_c2, 1);
    lw__json_kv_fixed(&j, "register_c2_min_us", reg_lo, 1);
    lw__json_kv_fixed(&j, "register_c2_max_us", reg_hi, 1);
    lw__json_kv_bool(&j, "serial_control", o->serial);
    lw__json_kv_fixed(&j, "overlap_by_events", r->by_events, 3);
    lw__json_kv_fixed(&j, "overlap_by_events_min", r->by_events_min, 3);
    lw__json_kv_fixed(&j, "overlap_by_events_max", r->by_events_max, 3);
    lw__json_kv_uint(&j, "trace_dropped_events", ev[0].dropped);
    lw__json_kv_fixed(&j, "run_c2_us", r->run_c2, 1);
    lw__json_kv_fixed(&j, "serial_median_us", r->serial, 1);
    lw__json_kv_fixed(&j, "overlap_median_us", r->overlap, 1);
    lw__json_kv_fixed(&j, "speedup", r->serial / r->overlap, 3);
    lw__json_kv_fixed(&j, "hidden_fraction", r->hidden, 3);
    lw__json_kv_fixed(&j, "hidden_fraction_min", hid_lo[0], 3);
    lw__json_kv_fixed(&j, "hidden_fraction_max", hid_hi[0], 3);
    lw__json_kv_fixed(&j, "register_phase_serial_median_us", r->serial_reg, 1);
    lw__json_kv_fixed(&j, "register_phase_overlap_median_us", r->overlap_reg, 1);
    lw__json_kv_fixed(&j, "hidden_fraction_register_phase", r->hidden_reg, 3);
    lw__json_kv_fixed(&j, "hidden_fraction_register_phase_min", hreg_lo[0], 3);
    lw__json_kv_fixed(&j, "hidden_fraction_register_phase_max", hreg_hi[0], 3);
    lw__json_kv_fixed(&j, "overlap_c1_done_us", r->overlap_c1, 1);
    lw__json_kv_fixed(&j, "overlap_register_done_us", r->overlap_reg_done, 1);
    // Errors with four significant digits, as the table prints them.
    lw__json_key(&j, "max_diff");
    lw__json_double_digits(&j, chk.max_diff, 4);
    lw__json_key(&j, "c2_max_rel_err");
    lw__json_double_digits(&j, chk.c2_rel_err, 4);
    lw__json_key(&j, "rows");
    lw__json_begin_array(&j);
    for (int di = 0; di < n_delays; ++di) {
      const row_t *x = &rows[di];
      lw__json_begin_object(&j);
      lw__json_kv_int(&j, "delay_ms", x->delay_ms);
      lw__json_kv_fixed(&j, "serial_median_us", x->serial, 1);
      lw__json_kv_fixed(&j, "overlap_median_us", x->overlap, 1);
      lw__json_kv_fixed(&j, "speedup", x->serial / x->overlap, 3);
      lw__json_kv_fixed(&j, "hidden_fraction", x->hidden, 3);
      lw__json_kv_fixed(&j, "hidden_fraction_min", hid_lo[di], 3);
      lw__json_kv_fixed(&j, "hidden_fraction_max", hid_hi[di], 3);
      lw__json_kv_fixed(&j, "hidden_fraction_register_phase", x->hidden_reg, 3);
      lw__json_kv_fixed(&j, "hidden_fraction_register_phase_min", hreg_lo[di], 3);
      lw__json_kv_fixed(&j, "hidden_fraction_register_phase_max", hreg_hi[di], 3);
      lw__json_end_object(&j);
    }
    lw__json_end_array(&j);
    json_rc = lw__bench_json_end(&j, "overlap");
  }
  rc = chk.max_diff == 0.0 && chk.c2_rel_err <= C2_REL_TOL ? json_rc : 1;
  if (rc) {
    fprintf(stderr,
            "lanework bench overlap: results differ from the reference (max_diff %.3e, C2 "
            "relative error %.3e, tolerance %.0e)\n",
            chk.max_diff, chk.c2_rel_err, C2_REL_TOL);
  }
out:
  if (d) {
    d->free(d, b.a);
    d->free(d, b.b);
    d->free(d, b.c1);
    d->free(d, b.x);
    d->free(d, b.c2);
    d->close(d);
  }
  free(b.ref1);
  free(b.first2);
  lw_callable_free_loaded(&c1);
  lw_callable_free_loaded(&c2);
  return rc;
}
