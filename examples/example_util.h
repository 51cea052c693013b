// examples/example_util.h — small helpers the examples share: where the kernels are, and
// dying with the library's own error message.
#ifndef LANEWORK_EXAMPLES_EXAMPLE_UTIL_H_
#define LANEWORK_EXAMPLES_EXAMPLE_UTIL_H_

#include <stdio.h>
#include <stdlib.h>

#include "lanework/lanework.h"

// Exits with the failing call, its status and lw_last_error()'s message.
#define CHECK(expr)                                                                          \
  do {                                                                                       \
    lw_status_t st_ = (expr);                                                                \
    if (st_ != LW_OK) {                                                                      \
      fprintf(stderr, "%s failed: %s: %s\n", #expr, lw_status_name(st_),                    \
              lw_last_error()->message);                                                     \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

// Loads <dir>/<name>.so, where dir is argv[1], $LW_KERNEL_DIR or "kernels".
static inline lw_callable_t example_kernel(int argc, char **argv, const char *name) {
  const char *dir = argc > 1 ? argv[1] : getenv("LW_KERNEL_DIR");
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s.so", dir ? dir : "kernels", name);
  lw_callable_t c;
  CHECK(lw_callable_load_file(path, &c));
  return c;
}

#endif  // LANEWORK_EXAMPLES_EXAMPLE_UTIL_H_
