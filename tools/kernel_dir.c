// tools/kernel_dir.c — the kernel folder of the `lanework` program (see kernel_dir.h).
#include "tools/kernel_dir.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tool.h"

static bool put(char *out, size_t cap, const char *s) {
  int n = snprintf(out, cap, "%s", s);
  return n >= 0 && (size_t)n < cap;
}

// The folder part of path, canonical (symbolic links resolved), or false.
static bool canonical_dir_of(const char *path, char *out, size_t cap) {
  char dir[PATH_MAX];
  if (!put(dir, sizeof(dir), path)) return false;
  char *slash = strrchr(dir, '/');
  if (slash == NULL) return false;
  *slash = '\0';
  if (dir[0] == '\0') return put(out, cap, "/");
  char real[PATH_MAX];
  if (realpath(dir, real) == NULL) return false;
  return put(out, cap, real);
}

bool lw__kernel_dir_resolve(const lw_kernel_dir_inputs_t *in, char *out, size_t cap) {
  if (in->env != NULL && in->env[0] != '\0') return put(out, cap, in->env);
  char exe_dir[PATH_MAX];
  if (in->exe == NULL || !canonical_dir_of(in->exe, exe_dir, sizeof(exe_dir))) {
    return put(out, cap, in->installed_kernel_dir);
  }
  // The build tree's binary uses the build tree's kernels, so a developer's `build/tools/
  // lanework` never runs an older installed copy. A copy anywhere else is an installed one.
  char build_dir[PATH_MAX];
  if (realpath(in->build_tool_dir, build_dir) != NULL && strcmp(build_dir, exe_dir) == 0) {
    return put(out, cap, in->build_kernel_dir);
  }
  char joined[PATH_MAX];
  int n = snprintf(joined, sizeof(joined), "%s/%s", exe_dir, in->bin_to_kernels);
  if (n < 0 || (size_t)n >= sizeof(joined)) return false;
  char real[PATH_MAX];
  // A folder that is missing is still named (the caller reports it), as it would be found.
  return put(out, cap, realpath(joined, real) != NULL ? real : joined);
}

static char kernel_dir[PATH_MAX];

static void kernel_dir_init(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n >= 0) exe[n] = '\0';
  lw_kernel_dir_inputs_t in = {
      .env = getenv("LW_KERNEL_DIR"),
      .exe = n >= 0 ? exe : NULL,
      .build_tool_dir = LW_BUILD_TOOL_DIR,
      .build_kernel_dir = LW_KERNEL_DIR,
      .bin_to_kernels = LW_BIN_TO_KERNEL_DIR,
      .installed_kernel_dir = LW_INSTALLED_KERNEL_DIR,
  };
  if (!lw__kernel_dir_resolve(&in, kernel_dir, sizeof(kernel_dir))) {
    put(kernel_dir, sizeof(kernel_dir), LW_INSTALLED_KERNEL_DIR);
  }
}

const char *lw__tool_kernel_dir(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, kernel_dir_init);
  return kernel_dir;
}
