// tools/bench_fault.c — `lanework bench fault` (cuda, L3): a kernel's sticky device error on one
// chip while another chip of the same GPU runs (issue 22's "a kernel's illegal address fails
// only its own task and chip, the other chip's run finishes").
//
// A worker of two cuda chips on one device (n_devices 1: each chip its own child process and
// its own context, the driver time-slicing the GPU between them). Each trial starts two runs
// of one task each: chip 0 runs cuda/sleep_ms.cu for --run-ms, then chip 1 runs
// cuda/fault_after_ms.cu, which stores to an illegal address after --fault-ms. (Two runs: a
// run's first error cancels the run's other tasks in flight, by design; the fault must not
// reach another run.) Each trial then checks, from the runs' task reports and the worker's
// stats:
//   fault named    the faulting task failed TASK_FAILED and its run's error names a CUDA error
//                  ("CUDA_ERROR_..."), the one reported as fault_error;
//   other chip     the other run finished OK, its kernel ran its whole length (kernel_ns at
//                  least 90% of --run-ms) and it ended after the failure was seen (else the
//                  trial is invalid: the fault did not come while it ran);
//   own chip only  chip 1's child died once and was replaced, chip 0's never died;
//   chip back      a 1 ms sleep_ms on chip 1 after its respawn finishes OK.
// target_holds: every check of every trial held. A check that failed is a result (printed,
// target missed, exit 0); a trial that could not measure what it names is an error (exit 1).
// Figures, medians over the trials: fault_detect_ms (the faulting task's dispatch -> its
// failure seen by the parent, less --fault-ms: the fault's own delay), respawn_ms (the failure
// seen -> the worker's stats count chip 1's new child, its callables replayed: it takes work).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/orch.h"
#include "lanework/stats.h"
#include "lanework/worker.h"
#include "tools/bench_sim_only.h"

#define MAX_TRIALS 100
#define FAULT_CHIP 1
#define OTHER_CHIP 0

// How long a trial waits for the faulting chip's respawn before it says the chip is not back:
// well inside gpu-check's 30 s for the whole bench, so a chip that is not replaced reads
// "missed", naming why, rather than a step that timed out.
static const double kRespawnWaitUs = 10e6;

static const uint8_t kMsDirs[1] = {LW_PARAM_SCALAR};

// What a run submits: the other chip's long kernel, the fault, or the 1 ms probe of chip 1.
typedef enum job_kind { JOB_OTHER, JOB_FAULT, JOB_PROBE } job_kind_t;

typedef struct fault_job {
  lw_callable_handle_t sleep, fault;
  uint64_t run_ms, fault_ms;
  job_kind_t kind;
} fault_job_t;

static lw_status_t submit_ms(lw_orch_t *o, lw_callable_handle_t k, uint64_t ms, int32_t chip) {
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, ms));
  return lw_orch_submit_next_level(o, k, &a, NULL, chip);
}

static lw_status_t fault_orch(lw_orch_t *o, void *user) {
  const fault_job_t *j = user;
  switch (j->kind) {
    case JOB_OTHER:
      return submit_ms(o, j->sleep, j->run_ms, OTHER_CHIP);
    case JOB_FAULT:
      return submit_ms(o, j->fault, j->fault_ms, FAULT_CHIP);
    case JOB_PROBE:
      break;
  }
  return submit_ms(o, j->sleep, 1, FAULT_CHIP);
}

// Starts one run of kind k. The orch function reads its job when the run starts, which may be
// after this returns: each run gets a job of its own, which outlives the run.
static lw_status_t start(lw_worker_t *w, fault_job_t *j, job_kind_t k, lw_handle_t **out) {
  j->kind = k;
  return lw_worker_run_async(w, fault_orch, j, out);
}

// Waits for a run of one task and takes its reports; releases the handle.
static lw_status_t finish(lw_handle_t *h, lw_run_report_t *rep, lw_task_report_t *task) {
  (void)lw_handle_wait(h, LW_WAIT_FOREVER);
  size_t n = 0;
  lw_status_t st = lw_handle_run_report(h, rep);
  if (st == LW_OK) st = lw_handle_run_tasks(h, task, 1, &n);
  lw_handle_release(h);
  return st == LW_OK && n != 1 ? LW_INTERNAL : st;
}

// LW_NOT_FOUND when the kernel's file could not be loaded (the loader said why already).
static lw_status_t reg(lw_worker_t *w, const char *name, lw_callable_handle_t *out) {
  lw_callable_t c;
  if (!lw__bench_load_cuda_kernel(name, 1, kMsDirs, &c)) return LW_NOT_FOUND;
  c.entry = name;  // these two kernels carry the file's name (callables/kernels/cuda)
  lw_status_t st = lw_worker_register(w, &c, out);
  lw_callable_free_loaded(&c);
  return st;
}

static bool child_counts(lw_worker_t *w, uint64_t deaths[2], uint64_t respawns[2]) {
  lw_worker_stats_t s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  if (lw_worker_stats(w, &s) != LW_OK) return false;
  for (int c = 0; c < 2; ++c) {
    deaths[c] = s.child[c].deaths;
    respawns[c] = s.child[c].respawns;
  }
  return true;
}

// When the parent saw the task end: its dispatch plus the round trip (CLOCK_MONOTONIC ns).
static uint64_t seen_end_ns(const lw_task_report_t *t) {
  return t->submit_ns + t->wait_ns + t->host_ns;
}

typedef struct trial {
  bool fault_named, other_ok, own_chip_only, chip_back;
  char fault_error[48];                     // the CUDA error's name as the run's error gave it
  char miss[LW_ERROR_MESSAGE_BYTES + 128];  // the first check that failed, "" when none
  double detect_ms, respawn_ms, other_kernel_ms;
} trial_t;

// Records the first check of the trial that failed.
__attribute__((format(printf, 2, 3))) static void missed(trial_t *t, const char *fmt, ...) {
  if (t->miss[0] != '\0') return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->miss, sizeof(t->miss), fmt, ap);
  va_end(ap);
}

// The CUDA error's name in msg ("CUDA_ERROR_ILLEGAL_ADDRESS"), or false.
static bool cuda_error_name(const char *msg, char *out, size_t size) {
  const char *p = strstr(msg, "CUDA_ERROR_");
  if (p == NULL) return false;
  size_t n = 0;
  while (p[n] == '_' || (p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= '0' && p[n] <= '9')) ++n;
  snprintf(out, size, "%.*s", (int)n, p);
  return true;
}

// One trial. Returns 0, or 1 after printing why the trial measured nothing.
static int one_trial(lw_worker_t *w, const fault_job_t *job, int i, trial_t *t) {
  memset(t, 0, sizeof(*t));
  uint64_t d0[2], r0[2], d1[2], r1[2];
  if (!child_counts(w, d0, r0)) return lw__bench_fail("fault: stats", lw_last_error()->code);
  // Two runs: a run's first error cancels its own tasks in flight (DESIGN §4.4), so the other
  // chip's kernel is a run of its own, started first; the fault must not reach it.
  lw_handle_t *h_other = NULL, *h_bad = NULL;
  fault_job_t other_job = *job, bad_job = *job, probe_job = *job;
  lw_status_t st = start(w, &other_job, JOB_OTHER, &h_other);
  if (st != LW_OK) return lw__bench_fail("fault: the other chip's run", st);
  st = start(w, &bad_job, JOB_FAULT, &h_bad);
  if (st != LW_OK) {
    (void)lw_handle_cancel(h_other);
    (void)lw_handle_wait(h_other, LW_WAIT_FOREVER);
    lw_handle_release(h_other);
    return lw__bench_fail("fault: the faulting run", st);
  }
  // The faulting chip's child is replaced while the other run still runs: its respawn is
  // watched from here (the stats' count), since the faulting run's handle finishes only after
  // the other's (a worker's run handles finish in order), and the child's exit (a process with
  // a CUDA context, or one under a sanitizer, can take a while) may come after that. The watch
  // ends at the respawn, or once the faulting run ended without a failure (no fault came), or
  // after kRespawnWaitUs.
  double t_respawn_us = 0;
  double t0 = lw__bench_now_us();
  for (;;) {
    if (!child_counts(w, d1, r1)) break;
    if (r1[FAULT_CHIP] > r0[FAULT_CHIP]) {
      t_respawn_us = lw__bench_now_us();
      break;
    }
    if ((lw_handle_done(h_bad) && lw_handle_wait(h_bad, 0) == LW_OK) ||
        lw__bench_now_us() - t0 > kRespawnWaitUs) {
      break;
    }
    lw__bench_sleep_ms(1);
  }
  lw_run_report_t rep_other, rep_bad;
  lw_task_report_t other_task, bad_task;
  lw_status_t st_other = finish(h_other, &rep_other, &other_task);
  lw_status_t st_bad = finish(h_bad, &rep_bad, &bad_task);
  if (st_other != LW_OK || st_bad != LW_OK) {
    return lw__bench_fail("fault: the runs' reports", st_other != LW_OK ? st_other : st_bad);
  }
  const lw_task_report_t *other = &other_task, *bad = &bad_task;

  // The faulting task: TASK_FAILED, on its chip, its run's error naming a CUDA error.
  if (bad->status != LW_TASK_FAILED || bad->worker_id != FAULT_CHIP) {
    missed(t, "the faulting task ended %s on chip %d (not TASK_FAILED on chip 1): %s",
           lw_status_name(bad->status), (int)bad->worker_id, rep_bad.error.message);
  } else if (!cuda_error_name(rep_bad.error.message, t->fault_error, sizeof(t->fault_error))) {
    missed(t, "the faulting task's error names no CUDA error: %s", rep_bad.error.message);
  } else {
    t->fault_named = true;
  }

  // The other chip's task: OK, whole, and still running when the failure was seen.
  t->other_kernel_ms = (double)other->kernel_ns / 1e6;
  if (other->status != LW_OK || other->worker_id != OTHER_CHIP) {
    missed(t, "the other chip's task ended %s on chip %d: %s", lw_status_name(other->status),
           (int)other->worker_id, rep_other.error.message);
  } else if (t->other_kernel_ms < 0.9 * (double)job->run_ms) {
    missed(t, "the other chip's kernel ran %.1f ms of its %llu", t->other_kernel_ms,
           (unsigned long long)job->run_ms);
  } else {
    t->other_ok = true;
  }
  if (t->fault_named && t->other_ok && seen_end_ns(other) <= seen_end_ns(bad)) {
    return lw__bench_invalid(
        "trial %d: the other chip's task ended before the fault was seen "
        "(--run-ms %llu is too short beside --fault-ms %llu here)",
        i, (unsigned long long)job->run_ms, (unsigned long long)job->fault_ms);
  }
  // Only for a fault that came: dispatch to the failure seen, less the kernel's own delay (the
  // launch, and the module's load, which a fresh child does at its first launch, included).
  t->detect_ms =
      t->fault_named && bad->host_ns > 0 ? (double)bad->host_ns / 1e6 - (double)job->fault_ms : NAN;

  if (!child_counts(w, d1, r1)) return lw__bench_fail("fault: stats", lw_last_error()->code);
  if (d1[FAULT_CHIP] != d0[FAULT_CHIP] + 1 || d1[OTHER_CHIP] != d0[OTHER_CHIP]) {
    missed(t, "deaths during the trial: %llu of chip 1's child and %llu of chip 0's, not 1 and 0",
           (unsigned long long)(d1[FAULT_CHIP] - d0[FAULT_CHIP]),
           (unsigned long long)(d1[OTHER_CHIP] - d0[OTHER_CHIP]));
  } else if (r1[FAULT_CHIP] <= r0[FAULT_CHIP]) {
    missed(t, "chip 1 was not respawned within %.0f s", kRespawnWaitUs / 1e6);
  } else {
    t->own_chip_only = true;
  }
  if (!t->own_chip_only) return 0;
  probe_job.kind = JOB_PROBE;
  lw_run_report_t prep;
  memset(&prep, 0, sizeof(prep));  // not written when the run cannot start
  st = lw_worker_run(w, fault_orch, &probe_job, &prep);
  if (st != LW_OK) {
    missed(t, "chip 1's first run after its respawn failed %s: %s", lw_status_name(st),
           prep.error.message[0] ? prep.error.message : lw_last_error()->message);
  } else {
    t->chip_back = true;
    t->respawn_ms = (t_respawn_us * 1e3 - (double)seen_end_ns(bad)) / 1e6;
  }
  return 0;
}

int lw__bench_fault(const lw_bench_opts_t *o) {
  lw__bench_progress_start("fault", "cuda", o->quiet);  // its JSON: lanework.bench.fault.cuda
  int n = o->trials_given ? o->trials : 3;
  if (n > MAX_TRIALS) n = MAX_TRIALS;
  fault_job_t job = {.run_ms = (uint64_t)o->run_ms, .fault_ms = (uint64_t)o->fault_ms};
  if (job.fault_ms >= job.run_ms) {
    fprintf(stderr,
            "lanework bench fault: --fault-ms %llu must be below --run-ms %llu (the "
            "fault must come while the other chip runs)\n",
            (unsigned long long)job.fault_ms, (unsigned long long)job.run_ms);
    return 2;
  }
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 2;
  cfg.n_devices = 1;  // both chips on the first GPU: two contexts, time-sliced
  snprintf(cfg.chip.backend, sizeof(cfg.chip.backend), "cuda");
  cfg.arena_bytes = 1u << 20;  // no tensors
  cfg.respawn_max = 0;         // the bench faults on purpose: no crash-loop bound
  lw_worker_t *w = NULL;
  lw__bench_progress("fault: two cuda chips on one device");
  lw_status_t st = lw_worker_create(&cfg, &w);
  if (st != LW_OK) return lw__bench_fail("fault: worker of two cuda chips", st);
  st = reg(w, "sleep_ms", &job.sleep);
  if (st == LW_OK) st = reg(w, "fault_after_ms", &job.fault);
  if (st != LW_OK) {
    int rc = st == LW_NOT_FOUND ? 1 : lw__bench_fail("fault: register", st);
    lw_worker_destroy(w);
    return rc;
  }
  static trial_t trials[MAX_TRIALS];
  double detect[MAX_TRIALS], respawn[MAX_TRIALS], other_ms[MAX_TRIALS];
  int rc = 0, done = 0, n_detect = 0;
  bool holds = true;
  const char *miss = NULL;
  for (int i = 0; i < n && rc == 0; ++i) {
    lw__bench_progress("fault %d/%d", i + 1, n);
    rc = one_trial(w, &job, i, &trials[i]);
    if (rc != 0) break;
    trial_t *t = &trials[i];
    if (!isnan(t->detect_ms)) detect[n_detect++] = t->detect_ms;
    respawn[done] = t->respawn_ms;
    other_ms[done] = t->other_kernel_ms;
    ++done;
    if (t->miss[0] != '\0') {
      holds = false;
      miss = t->miss;
      break;  // a chip may be down now: what follows would measure that
    }
  }
  lw_worker_destroy(w);
  if (rc != 0) return rc;
  lw__bench_progress_end();
  double d50 = n_detect > 0 ? lw__bench_median(detect, (size_t)n_detect) : NAN;
  double r50 = holds ? lw__bench_median(respawn, (size_t)done) : NAN;
  double k50 = lw__bench_median(other_ms, (size_t)done);
  printf(
      "L3, two cuda chips on device 0 (time-sliced): cuda/fault_after_ms stores to an illegal "
      "address after %llu ms on chip 1 while cuda/sleep_ms runs %llu ms on chip 0, %d "
      "trial%s\n",
      (unsigned long long)job.fault_ms, (unsigned long long)job.run_ms, done, done == 1 ? "" : "s");
  if (isnan(d50)) {
    printf("  the fault:       none came (%s)\n",
           trials[0].fault_error[0] ? trials[0].fault_error : "no CUDA error named");
  } else {
    printf(
        "  the fault:       %s, detected %.2f ms after it was due (median; the launch and the "
        "module's load included)\n",
        trials[0].fault_error[0] ? trials[0].fault_error : "(not named)", d50);
  }
  printf("  the other chip:  its %llu ms kernel ran %.1f ms (median) and finished OK: %s\n",
         (unsigned long long)job.run_ms, k50, trials[done - 1].other_ok ? "yes" : "no");
  if (holds) {
    printf(
        "  chip 1 back:     %.2f ms from the failure to its new child taking work (median), "
        "and ran a task; chip 0's child never died\n",
        r50);
  }
  printf(
      "  target (the fault fails only its own task and chip; the other chip's run "
      "finishes): %s%s%s\n",
      holds ? "holds" : "missed", holds ? "" : ": ", holds ? "" : miss);
  if (!o->json) return 0;
  lw_json_t j;
  lw__bench_json_begin(&j, "fault");
  lw__json_kv_int(&j, "level", 3);
  lw__json_kv_int(&j, "trials", done);
  lw__json_kv_uint(&j, "run_ms", job.run_ms);
  lw__json_kv_uint(&j, "fault_ms", job.fault_ms);
  lw__json_kv_string(&j, "fault_error", trials[0].fault_error[0] ? trials[0].fault_error : NULL);
  lw__json_kv_fixed(&j, "fault_detect_ms", d50, 3);
  lw__json_kv_fixed(&j, "respawn_ms", r50, 3);
  lw__json_kv_fixed(&j, "other_kernel_ms", k50, 3);
  bool named = true, other = true, own = true, back = true;
  for (int i = 0; i < done; ++i) {
    named = named && trials[i].fault_named;
    other = other && trials[i].other_ok;
    own = own && trials[i].own_chip_only;
    back = back && trials[i].chip_back;
  }
  lw__json_kv_bool(&j, "fault_named", named);
  lw__json_kv_bool(&j, "other_chip_ok", other);
  lw__json_kv_bool(&j, "own_chip_only", own);
  lw__json_kv_bool(&j, "chip_back", back);
  lw__json_kv_bool(&j, "target_holds", holds);
  lw__json_kv_string(&j, "missed", holds ? NULL : miss);
  return lw__bench_json_end(&j, "fault");
}
