// tests/tsan_shim/criterion/criterion.h — a minimal stand-in for Criterion, used only when
// the tests build with LW_TSAN=ON (lw_add_test puts this folder first on the include path).
//
// Why: Criterion cannot start under ThreadSanitizer ("Could not initialize inheritable
// arena", Snaipe/Criterion#274): its fixed-address arena collides with TSan's shadow
// mappings. This shim supports the subset the tests use (Test and TestSuite with .timeout,
// .init and .fini; cr_assert* and cr_expect* with optional printf-style messages that start
// with a string literal; cr_skip) so that the very same sources run under TSan. Each
// test runs in its own forked process with an alarm() for its timeout, like Criterion does;
// a TSan report makes that process exit non-zero, which fails the test.
#ifndef LANEWORK_TESTS_TSAN_SHIM_CRITERION_H_
#define LANEWORK_TESTS_TSAN_SHIM_CRITERION_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// An assertion without a message passes "" as its format; that is intended.
#pragma GCC diagnostic ignored "-Wformat-zero-length"

typedef struct shim_test_opts {
  double timeout;
  void (*init)(void);
  void (*fini)(void);
} shim_test_opts_t;

typedef struct shim_suite {
  const char *name;
  shim_test_opts_t opts;
} shim_suite_t;

#define SHIM_MAX_SUITES 64
static shim_suite_t shim_suites[SHIM_MAX_SUITES];
static int shim_n_suites;
static bool shim_expect_failed;

static inline void shim_register_suite(const char *name, shim_test_opts_t opts) {
  if (shim_n_suites < SHIM_MAX_SUITES) shim_suites[shim_n_suites++] = (shim_suite_t){name, opts};
}

#define TestSuite(suite, ...)                                                           \
  __attribute__((constructor)) static void shim_suite_##suite(void) {                   \
    shim_register_suite(#suite, (shim_test_opts_t){__VA_ARGS__});                       \
  }

typedef struct shim_test {
  const char *suite;
  const char *name;
  void (*fn)(void);
  shim_test_opts_t opts;
} shim_test_t;

#define SHIM_MAX_TESTS 256
static shim_test_t shim_tests[SHIM_MAX_TESTS];
static int shim_n_tests;

static inline void shim_register(const char *suite, const char *name, void (*fn)(void),
                                 shim_test_opts_t opts) {
  if (shim_n_tests < SHIM_MAX_TESTS) {
    shim_tests[shim_n_tests++] = (shim_test_t){suite, name, fn, opts};
  }
}

#define Test(suite, name, ...)                                                          \
  static void suite##_##name(void);                                                     \
  __attribute__((constructor)) static void shim_reg_##suite##_##name(void) {            \
    shim_register(#suite, #name, suite##_##name, (shim_test_opts_t){__VA_ARGS__});      \
  }                                                                                     \
  static void suite##_##name(void)

__attribute__((format(printf, 6, 7))) static inline void shim_check(bool fatal, bool ok,
                                                                     const char *expr,
                                                                     const char *file, int line,
                                                                     const char *fmt, ...) {
  if (ok) return;
  fprintf(stderr, "%s:%d: assertion failed: %s", file, line, expr);
  if (fmt[0] != '\0') {
    va_list ap;
    va_start(ap, fmt);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  fflush(stderr);
  if (fatal) _exit(1);
  shim_expect_failed = true;
}

// The optional message must start with a string literal (as in every lanes test).
#define cr_assert(cond, ...) shim_check(true, !!(cond), #cond, __FILE__, __LINE__, "" __VA_ARGS__)
// Informational logs go to stderr.
#define cr_log_info(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
#define cr_expect(cond, ...) shim_check(false, !!(cond), #cond, __FILE__, __LINE__, "" __VA_ARGS__)
#define cr_expect_eq(a, b, ...) cr_expect((a) == (b), __VA_ARGS__)
#define cr_expect_neq(a, b, ...) cr_expect((a) != (b), __VA_ARGS__)
#define cr_expect_gt(a, b, ...) cr_expect((a) > (b), __VA_ARGS__)
#define cr_expect_geq(a, b, ...) cr_expect((a) >= (b), __VA_ARGS__)
#define cr_expect_lt(a, b, ...) cr_expect((a) < (b), __VA_ARGS__)
#define cr_expect_leq(a, b, ...) cr_expect((a) <= (b), __VA_ARGS__)
#define cr_assert_fail(...) cr_assert(0, __VA_ARGS__)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(strcmp((a), (b)) != 0, __VA_ARGS__)
#define cr_assert_str_empty(a, ...) cr_assert((a)[0] == '\0', __VA_ARGS__)

// A skipped test ends its process with this status; it is reported SKIP, never as a pass.
#define SHIM_SKIP_STATUS 77
// Like Criterion's cr_skip: ends the test here (its .fini does not run: the test's process
// exits, and what it started dies with it).
#define cr_skip(...)                                                                    \
  (fprintf(stderr, "%s:%d: skipped: ", __FILE__, __LINE__),                             \
   fprintf(stderr, "" __VA_ARGS__), fputc('\n', stderr), fflush(stderr),                \
   _exit(SHIM_SKIP_STATUS))

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;  // Criterion options such as --jobs=1 are accepted and ignored
  int failed = 0, n_skipped = 0;
  for (int i = 0; i < shim_n_tests; ++i) {
    const shim_test_t *t = &shim_tests[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      shim_test_opts_t o = t->opts;
      for (int k = 0; k < shim_n_suites; ++k) {
        if (strcmp(shim_suites[k].name, t->suite) != 0) continue;
        if (o.timeout <= 0) o.timeout = shim_suites[k].opts.timeout;
        o.init = shim_suites[k].opts.init;
        o.fini = shim_suites[k].opts.fini;
      }
      if (o.timeout > 0) alarm((unsigned)(o.timeout + 0.999));
      if (o.init) o.init();
      t->fn();
      if (o.fini) o.fini();
      exit(shim_expect_failed ? 1 : 0);  // exit (not _exit) so TSan's end-of-process checks run
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
    }
    bool skipped = WIFEXITED(ws) && WEXITSTATUS(ws) == SHIM_SKIP_STATUS;
    bool ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    if (skipped) {
      n_skipped++;
      fprintf(stderr, "[SKIP] %s::%s\n", t->suite, t->name);
      continue;
    }
    if (!ok) failed++;
    fprintf(stderr, "[%s] %s::%s", ok ? "PASS" : "FAIL", t->suite, t->name);
    if (WIFSIGNALED(ws)) fprintf(stderr, " (signal %d)", WTERMSIG(ws));
    if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) fprintf(stderr, " (exit %d)", WEXITSTATUS(ws));
    fputc('\n', stderr);
  }
  fprintf(stderr, "Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d\n",
          shim_n_tests, shim_n_tests - failed - n_skipped, failed, n_skipped);
  return failed == 0 ? 0 : 1;
}

#endif  // LANEWORK_TESTS_TSAN_SHIM_CRITERION_H_
