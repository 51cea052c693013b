// tests/parent/test_signature.c — L3: a task whose argument counts differ from its chip
// callable's signature is refused by lw_orch_submit_next_level (and the group form) itself,
// INVALID_ARGUMENT naming the callable, the expected and the given counts; its kernel never
// runs, and the run goes on (a refused submit is not a task failure). A callable without a
// signature stays unchecked.
//
// "Never ran" by order: after the refused submits the orch function submits one valid record
// on the same chip; the run reports exactly one task and the log holds only its value.
#include <string.h>

#include "lanework/orch.h"
#include "worker_test_util.h"

// The record kernel (tests/kernels/record.c) reads tensor[0] and scalar[0].
static const uint8_t k_record_sig[2] = {LW_PARAM_INOUT, LW_PARAM_SCALAR};

static lw_callable_handle_t wreg_record(bool with_signature) {
  lw_callable_t c = lw_test_kernel("record");
  if (with_signature) {
    c.n_params = 2;
    c.param_dirs = k_record_sig;
  }
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_worker_register(w, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

typedef struct count_case {
  int tensors, scalars;
  const char *given;
} count_case_t;

static const count_case_t k_cases[] = {
    {2, 1, "given 2 tensors and 1 scalar"},  // too many tensors
    {0, 1, "given 0 tensors and 1 scalar"},  // too few tensors
    {1, 2, "given 1 tensor and 2 scalars"},  // too many scalars
    {1, 0, "given 1 tensor and 0 scalars"},  // too few scalars
};
enum { N_CASES = sizeof(k_cases) / sizeof(k_cases[0]) };

typedef struct sig_job {
  lw_callable_handle_t rec;
  shared_state_t *s;
  int64_t *spare;  // a second arena buffer for the extra tensor
  bool group;      // submit through lw_orch_submit_next_level_group
  lw_status_t st[N_CASES];
  char message[N_CASES][256];
} sig_job_t;

static lw_status_t make_args(const sig_job_t *j, lw_args_t *a, int tensors, int scalars,
                             uint64_t value) {
  lw_args_init(a);
  for (int i = 0; i < tensors; ++i) {
    void *p = i == 0 ? (void *)j->s->log : (void *)j->spare;
    uint64_t bytes = i == 0 ? sizeof(j->s->log) : 64;
    LW_RETURN_IF_ERROR(lw_args_add_tensor(a, p, bytes, LW_TAG_NO_DEP));
  }
  for (int i = 0; i < scalars; ++i) LW_RETURN_IF_ERROR(lw_args_add_scalar(a, i ? 0 : value));
  return LW_OK;
}

static lw_status_t sig_orch(lw_orch_t *o, void *user) {
  sig_job_t *j = user;
  for (int i = 0; i < N_CASES; ++i) {
    lw_args_t a;
    LW_RETURN_IF_ERROR(make_args(j, &a, k_cases[i].tensors, k_cases[i].scalars, 100 + i));
    if (j->group) {
      const lw_args_t *args[1] = {&a};
      const int32_t chips[1] = {0};
      j->st[i] = lw_orch_submit_next_level_group(o, j->rec, args, chips, 1);
    } else {
      j->st[i] = lw_orch_submit_next_level(o, j->rec, &a, NULL, 0);
    }
    snprintf(j->message[i], sizeof(j->message[i]), "%s", lw_last_error()->message);
  }
  lw_args_t ok;
  LW_RETURN_IF_ERROR(make_args(j, &ok, 1, 1, 77));
  return lw_orch_submit_next_level(o, j->rec, &ok, NULL, 0);
}

static void expect_refused_and_only_valid_task_ran(bool group) {
  make_worker(1, 0);
  sig_job_t j = {.rec = wreg_record(true), .s = new_shared(), .group = group};
  j.spare = lw_worker_alloc(w, 64);
  cr_assert_not_null(j.spare);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, sig_orch, &j, &rep));
  for (int i = 0; i < N_CASES; ++i) {
    cr_assert_eq(j.st[i], LW_INVALID_ARGUMENT, "case %s: %s", k_cases[i].given,
                 lw_status_name(j.st[i]));
    cr_assert(strstr(j.message[i], "callable record expects 1 tensor and 1 scalar"),
              "message: %s", j.message[i]);
    cr_assert(strstr(j.message[i], k_cases[i].given), "message: %s", j.message[i]);
  }
  cr_assert_eq(rep.n_tasks, 1, "a refused submit became a task");
  cr_assert_eq(rep.n_completed, 1);
  cr_assert_eq(rep.n_failed, 0);
  cr_assert_eq(log_count(j.s), 1, "a refused task reached the kernel");
  cr_assert_eq(j.s->log[1], 77);
  destroy_and_check();
}

Test(worker_signature, submit_with_wrong_counts_is_refused_and_never_runs, .timeout = 60) {
  expect_refused_and_only_valid_task_ran(false);
}

Test(worker_signature, group_submit_with_wrong_counts_is_refused_and_never_runs,
     .timeout = 60) {
  expect_refused_and_only_valid_task_ran(true);
}

typedef struct unchecked_job {
  lw_callable_handle_t rec;
  shared_state_t *s;
  int64_t *spare;
} unchecked_job_t;

static lw_status_t unchecked_orch(lw_orch_t *o, void *user) {
  unchecked_job_t *j = user;
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->spare, 64, LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 5));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&a, 0));
  return lw_orch_submit_next_level(o, j->rec, &a, NULL, 0);
}

Test(worker_signature, callable_without_signature_is_not_checked, .timeout = 60) {
  make_worker(1, 0);
  unchecked_job_t j = {wreg_record(false), new_shared(), NULL};
  j.spare = lw_worker_alloc(w, 64);
  cr_assert_not_null(j.spare);
  lw_run_report_t rep;
  LW_ASSERT_OK(lw_worker_run(w, unchecked_orch, &j, &rep));
  cr_assert_eq(rep.n_completed, 1);
  cr_assert_eq(log_count(j.s), 1);
  cr_assert_eq(j.s->log[1], 5);
  destroy_and_check();
}

typedef struct group_job {
  lw_callable_handle_t rec;
  shared_state_t *s;
  lw_status_t st;
  char message[256];
} group_job_t;

static lw_status_t late_member_orch(lw_orch_t *o, void *user) {
  group_job_t *j = user;
  lw_args_t good, bad;
  lw_args_init(&good);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&good, j->s->log, sizeof(j->s->log), LW_TAG_NO_DEP));
  LW_RETURN_IF_ERROR(lw_args_add_scalar(&good, 1));
  bad = good;
  bad.n_scalars = 0;
  const lw_args_t *args[2] = {&good, &bad};
  const int32_t chips[2] = {0, 0};
  j->st = lw_orch_submit_next_level_group(o, j->rec, args, chips, 2);
  snprintf(j->message, sizeof(j->message), "%s", lw_last_error()->message);
  return LW_OK;
}

// A group is all-or-nothing: a later member refused refuses the whole group at the submit,
// before any member is handed to the DAG, so none is built, none runs, and the run (whose orch
// function ignored the error) finishes OK with no task.
Test(worker_signature, group_with_a_refused_later_member_runs_no_member, .timeout = 60) {
  make_worker(1, 0);
  group_job_t j = {wreg_record(true), new_shared(), LW_OK, ""};
  lw_run_report_t rep;
  lw_status_t st = lw_worker_run(w, late_member_orch, &j, &rep);
  cr_assert_eq(j.st, LW_INVALID_ARGUMENT, "%s", lw_status_name(j.st));
  cr_assert(strstr(j.message, "given 1 tensor and 0 scalars"), "message: %s", j.message);
  cr_assert(strstr(j.message, "group member 1 refused, so is the whole group"), "message: %s",
            j.message);
  cr_assert_eq(st, LW_OK, "%s", lw_status_name(st));
  cr_assert_eq(rep.n_tasks, 0, "a member of the refused group was built");
  cr_assert_eq(log_count(j.s), 0, "a member of a refused group reached the kernel");
  destroy_and_check();
}
