// tests/lanes/tsan_shim/criterion/criterion.h — a minimal stand-in for Criterion, used only
// when the lanes tests build with LW_TSAN=ON.
//
// Why: Criterion cannot start under ThreadSanitizer ("Could not initialize inheritable
// arena", Snaipe/Criterion#274): its fixed-address arena collides with TSan's shadow
// mappings. This shim supports the subset the lanes tests use (Test with .timeout, cr_assert*
// with optional printf-style messages) so that the very same sources run under TSan. Each
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
} shim_test_opts_t;

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

__attribute__((format(printf, 5, 6))) static inline void shim_check(bool ok, const char *expr,
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
  _exit(1);
}

// The optional message must start with a string literal (as in every lanes test).
#define cr_assert(cond, ...) shim_check(!!(cond), #cond, __FILE__, __LINE__, "" __VA_ARGS__)
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

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;  // Criterion options such as --jobs=1 are accepted and ignored
  int failed = 0;
  for (int i = 0; i < shim_n_tests; ++i) {
    const shim_test_t *t = &shim_tests[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      if (t->opts.timeout > 0) alarm((unsigned)(t->opts.timeout + 0.999));
      t->fn();
      exit(0);  // exit (not _exit) so TSan's end-of-process checks run
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
    }
    bool ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    if (!ok) failed++;
    fprintf(stderr, "[%s] %s::%s", ok ? "PASS" : "FAIL", t->suite, t->name);
    if (WIFSIGNALED(ws)) fprintf(stderr, " (signal %d)", WTERMSIG(ws));
    if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) fprintf(stderr, " (exit %d)", WEXITSTATUS(ws));
    fputc('\n', stderr);
  }
  fprintf(stderr, "Synthesis: Tested: %d | Passing: %d | Failing: %d\n", shim_n_tests,
          shim_n_tests - failed, failed);
  return failed == 0 ? 0 : 1;
}

#endif  // LANEWORK_TESTS_TSAN_SHIM_CRITERION_H_
