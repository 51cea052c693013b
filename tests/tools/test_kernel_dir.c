// tests/tools/test_kernel_dir.c — where the `lanework` program looks for kernels
// (tools/kernel_dir.c): $LW_KERNEL_DIR first; the build tree's folder for the build tree's own
// binary; otherwise the folder installed beside the program, found from the program's path, so
// an install tree that was moved (or installed with --prefix) still finds its own kernels.
// Real folders under a scratch directory stand in for the build and install trees.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "tools/kernel_dir.h"

static char g_root[64];

static void make_root(void) {
  snprintf(g_root, sizeof(g_root), "/tmp/lw_kernel_dir_XXXXXX");
  cr_assert_not_null(mkdtemp(g_root), "mkdtemp: %s", strerror(errno));
}

static void remove_root(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
  cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

// Creates every folder of root/rel, as mkdir -p would.
static void make_dirs(const char *rel) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", g_root, rel);
  for (char *p = path + strlen(g_root) + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
    *p = '/';
  }
  cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

static void path_of(char *out, size_t cap, const char *rel) {
  snprintf(out, cap, "%s/%s", g_root, rel);
}

TestSuite(tools_kernel_dir, .init = make_root, .fini = remove_root, .timeout = 10);

Test(tools_kernel_dir, env_wins_over_build_and_install_trees) {
  make_dirs("build/tools");
  char exe[PATH_MAX], tool_dir[PATH_MAX];
  path_of(exe, sizeof(exe), "build/tools/lanework");
  path_of(tool_dir, sizeof(tool_dir), "build/tools");
  lw_kernel_dir_inputs_t in = {.env = "/somewhere/kernels", .exe = exe,
                               .build_tool_dir = tool_dir, .build_kernel_dir = "/build/kernels",
                               .bin_to_kernels = "../lib/lanework/kernels",
                               .installed_kernel_dir = "/usr/lib/lanework/kernels"};
  char out[PATH_MAX];
  cr_assert(lw__kernel_dir_resolve(&in, out, sizeof(out)));
  cr_assert_str_eq(out, "/somewhere/kernels");
}

Test(tools_kernel_dir, build_tree_binary_uses_build_tree_kernels) {
  make_dirs("build/tools");
  make_dirs("prefix/lib/lanework/kernels");
  char exe[PATH_MAX], tool_dir[PATH_MAX];
  path_of(exe, sizeof(exe), "build/tools/lanework");
  path_of(tool_dir, sizeof(tool_dir), "build/tools");
  lw_kernel_dir_inputs_t in = {.env = "", .exe = exe, .build_tool_dir = tool_dir,
                               .build_kernel_dir = "/the/build/kernels",
                               .bin_to_kernels = "../lib/lanework/kernels",
                               .installed_kernel_dir = "/usr/lib/lanework/kernels"};
  char out[PATH_MAX];
  cr_assert(lw__kernel_dir_resolve(&in, out, sizeof(out)));
  cr_assert_str_eq(out, "/the/build/kernels");
}

Test(tools_kernel_dir, installed_binary_finds_kernels_beside_itself_even_when_moved) {
  make_dirs("build/tools");
  make_dirs("usr/bin");
  make_dirs("usr/lib/x86_64-linux-gnu/lanework/kernels");
  char exe[PATH_MAX], tool_dir[PATH_MAX], want[PATH_MAX + 64];
  path_of(exe, sizeof(exe), "usr/bin/lanework");
  path_of(tool_dir, sizeof(tool_dir), "build/tools");
  lw_kernel_dir_inputs_t in = {.env = NULL, .exe = exe, .build_tool_dir = tool_dir,
                               .build_kernel_dir = "/the/build/kernels",
                               .bin_to_kernels = "../lib/x86_64-linux-gnu/lanework/kernels",
                               .installed_kernel_dir = "/configured/prefix/lib/lanework/kernels"};
  char out[PATH_MAX];
  cr_assert(lw__kernel_dir_resolve(&in, out, sizeof(out)));
  char real_root[PATH_MAX];
  cr_assert_not_null(realpath(g_root, real_root));
  snprintf(want, sizeof(want), "%s/usr/lib/x86_64-linux-gnu/lanework/kernels", real_root);
  cr_assert_str_eq(out, want, "got %s", out);

  // The whole install tree moved: the program follows it, not the configured prefix.
  char from[PATH_MAX], to[PATH_MAX];
  path_of(from, sizeof(from), "usr");
  path_of(to, sizeof(to), "opt");
  cr_assert_eq(rename(from, to), 0, "rename: %s", strerror(errno));
  path_of(exe, sizeof(exe), "opt/bin/lanework");
  cr_assert(lw__kernel_dir_resolve(&in, out, sizeof(out)));
  snprintf(want, sizeof(want), "%s/opt/lib/x86_64-linux-gnu/lanework/kernels", real_root);
  cr_assert_str_eq(out, want, "got %s", out);
}

Test(tools_kernel_dir, installed_binary_with_build_tree_gone_uses_its_install) {
  make_dirs("prefix/bin");
  make_dirs("prefix/lib/lanework/kernels");
  char exe[PATH_MAX], gone[PATH_MAX], want[PATH_MAX + 64], real_root[PATH_MAX];
  path_of(exe, sizeof(exe), "prefix/bin/lanework");
  path_of(gone, sizeof(gone), "no-build-here/tools");
  lw_kernel_dir_inputs_t in = {.exe = exe, .build_tool_dir = gone,
                               .build_kernel_dir = "/the/build/kernels",
                               .bin_to_kernels = "../lib/lanework/kernels",
                               .installed_kernel_dir = "/configured/lib/lanework/kernels"};
  char out[PATH_MAX];
  cr_assert(lw__kernel_dir_resolve(&in, out, sizeof(out)));
  cr_assert_not_null(realpath(g_root, real_root));
  snprintf(want, sizeof(want), "%s/prefix/lib/lanework/kernels", real_root);
  cr_assert_str_eq(out, want, "got %s", out);
}

Test(tools_kernel_dir, unknown_program_path_falls_back_to_configured_install) {
  lw_kernel_dir_inputs_t in = {.exe = NULL, .build_tool_dir = "/b/tools",
                               .build_kernel_dir = "/b/kernels",
                               .bin_to_kernels = "../lib/lanework/kernels",
                               .installed_kernel_dir = "/configured/lib/lanework/kernels"};
  char out[PATH_MAX];
  cr_assert(lw__kernel_dir_resolve(&in, out, sizeof(out)));
  cr_assert_str_eq(out, "/configured/lib/lanework/kernels");
}

Test(tools_kernel_dir, path_that_does_not_fit_is_refused) {
  lw_kernel_dir_inputs_t in = {.env = "/a/rather/long/kernel/folder"};
  char out[8];
  cr_assert_not(lw__kernel_dir_resolve(&in, out, sizeof(out)));
}
