// tests/callables/test_signature.c — a callable's signature against a task's argument counts
// (callables/signature.h): what is refused, what each message says, and that a callable
// without a signature is not checked.
#include <criterion/criterion.h>
#include <string.h>

#include "callables/signature.h"
#include "lanes/error.h"

TestSuite(signature, .timeout = 30);

static const uint8_t k_add[3] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT};
static const uint8_t k_rec[2] = {LW_PARAM_INOUT, LW_PARAM_SCALAR};

Test(signature, counts_split_tensors_from_scalars) {
  const uint8_t mixed[5] = {LW_PARAM_SCALAR, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR,
                            LW_PARAM_INOUT};
  uint32_t t = 99, s = 99;
  lw__signature_counts(5, mixed, &t, &s);
  cr_assert_eq(t, 3);
  cr_assert_eq(s, 2);
  lw__signature_counts(0, NULL, &t, &s);
  cr_assert_eq(t, 0);
  cr_assert_eq(s, 0);
}

Test(signature, live_parameters_count_as_tensors_and_are_named_live) {
  const uint8_t gate[3] = {LW_PARAM_IN | LW_PARAM_LIVE, LW_PARAM_OUT | LW_PARAM_LIVE,
                           LW_PARAM_SCALAR};
  uint32_t t = 99, s = 99;
  lw__signature_counts(3, gate, &t, &s);
  cr_assert_eq(t, 2);
  cr_assert_eq(s, 1);
  lw_error_t err;
  lw__error_clear(&err);
  cr_assert_eq(lw__signature_check_counts("gate", 3, gate, 1, 1, &err), LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "(signature IN|LIVE, OUT|LIVE, SCALAR)"), "%s", err.message);
}

Test(signature, matching_counts_are_accepted) {
  lw_error_t err;
  lw__error_clear(&err);
  cr_assert_eq(lw__signature_check_counts("vector_add", 3, k_add, 3, 0, &err), LW_OK);
  cr_assert_eq(lw__signature_check_counts("record", 2, k_rec, 1, 1, &err), LW_OK);
  cr_assert_eq(err.code, LW_OK, "a match must leave err alone: %s", err.message);
}

Test(signature, no_signature_accepts_any_counts) {
  // n_params 0 is "no signature given" (lanework/callable.h), not "no args".
  cr_assert_eq(lw__signature_check_counts("legacy", 0, NULL, 0, 0, NULL), LW_OK);
  cr_assert_eq(lw__signature_check_counts("legacy", 0, NULL, LW_MAX_TENSORS, LW_MAX_SCALARS,
                                          NULL),
               LW_OK);
}

typedef struct mismatch_case {
  uint32_t tensors, scalars;
  const char *given;
} mismatch_case_t;

Test(signature, every_mismatch_names_callable_expected_and_given) {
  const mismatch_case_t cases[] = {
      {2, 1, "given 2 tensors and 1 scalar"},   // a tensor too many
      {0, 1, "given 0 tensors and 1 scalar"},   // a tensor too few
      {1, 2, "given 1 tensor and 2 scalars"},   // a scalar too many
      {1, 0, "given 1 tensor and 0 scalars"},   // a scalar too few
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    lw_error_t err;
    lw__error_clear(&err);
    lw_status_t st =
        lw__signature_check_counts("record", 2, k_rec, cases[i].tensors, cases[i].scalars, &err);
    cr_assert_eq(st, LW_INVALID_ARGUMENT, "case %zu: %s", i, lw_status_name(st));
    cr_assert_eq(err.code, LW_INVALID_ARGUMENT);
    cr_assert(strstr(err.message, "callable record"), "case %zu: %s", i, err.message);
    cr_assert(strstr(err.message, "expects 1 tensor and 1 scalar"), "case %zu: %s", i,
              err.message);
    cr_assert(strstr(err.message, cases[i].given), "case %zu: %s", i, err.message);
    cr_assert(strstr(err.message, "(signature INOUT, SCALAR)"), "case %zu: %s", i, err.message);
  }
}

Test(signature, args_form_reads_the_counts_and_null_args_is_empty) {
  lw_args_t a;
  lw_args_init(&a);
  static int buf[4];
  cr_assert_eq(lw_args_add_tensor(&a, buf, sizeof(buf), LW_TAG_INOUT), LW_OK);
  cr_assert_eq(lw_args_add_scalar(&a, 7), LW_OK);
  cr_assert_eq(lw__signature_check_args("record", 2, k_rec, &a, NULL), LW_OK);
  lw_error_t err;
  cr_assert_eq(lw__signature_check_args("record", 2, k_rec, NULL, &err), LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "given 0 tensors and 0 scalars"), "%s", err.message);
}

Test(signature, long_name_and_signature_still_keep_the_counts) {
  char name[128];
  memset(name, 'n', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  uint8_t dirs[LW_MAX_PARAMS];
  for (int i = 0; i < LW_MAX_PARAMS; ++i) dirs[i] = i % 2 ? LW_PARAM_SCALAR : LW_PARAM_INOUT;
  lw_error_t err;
  cr_assert_eq(lw__signature_check_counts(name, LW_MAX_PARAMS, dirs, 1, 1, &err),
               LW_INVALID_ARGUMENT);
  cr_assert(strstr(err.message, "expects 16 tensors and 16 scalars, given 1 tensor and 1 scalar"),
            "%s", err.message);
  // With a short name the whole message fits: the list is cut with an ellipsis and closed.
  cr_assert_eq(lw__signature_check_counts("k", LW_MAX_PARAMS, dirs, 1, 1, &err),
               LW_INVALID_ARGUMENT);
  size_t n = strlen(err.message);
  cr_assert(n >= 4 && strcmp(err.message + n - 4, "...)") == 0, "%s", err.message);
}
