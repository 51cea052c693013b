// tests/tools/tools_probe.h — what the tools probes (tools_l2_probe.c, tools_l3_probe.c) share:
// the kernel folder, loading a kernel, and failing with a message. The probes are ordinary
// programs on the public API that test_tools_valgrind_* and test_tools_gdb_* run under
// valgrind and gdb (tests/tools/run_under_tool.sh); they exit 0 when every check held, and
// 1 with a "FAIL:" line on stderr otherwise.
#ifndef LANEWORK_TESTS_TOOLS_TOOLS_PROBE_H_
#define LANEWORK_TESTS_TOOLS_TOOLS_PROBE_H_

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "lanework/lanework.h"

__attribute__((format(printf, 1, 2), noreturn)) static inline void tp_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

// Fails with the status's name and the thread's last error when st is not LW_OK.
static inline void tp_check(lw_status_t st, const char *what) {
  if (st != LW_OK) tp_fail("%s: %s: %s", what, lw_status_name(st), lw_last_error()->message);
}

// This build's kernels (LW_KERNEL_DIR), or $LW_TEST_KERNEL_DIR when set, as the tests do.
static inline const char *tp_kernel_dir(void) {
  const char *v = getenv("LW_TEST_KERNEL_DIR");
  return v != NULL && v[0] != '\0' ? v : LW_KERNEL_DIR;
}

// Loads <kernel dir>/<name>.so; the caller frees it with lw_callable_free_loaded.
static inline void tp_load_kernel(const char *name, lw_callable_t *out) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s.so", tp_kernel_dir(), name);
  lw_status_t st = lw_callable_load_file(path, out);
  if (st != LW_OK) {
    tp_fail("loading %s: %s: %s", path, lw_status_name(st), lw_last_error()->message);
  }
}

#endif  // LANEWORK_TESTS_TOOLS_TOOLS_PROBE_H_
