// tools/kernel_dir.h — where the `lanework` program finds its kernel images. Internal to tools/
// (and its test).
#ifndef LANEWORK_TOOLS_KERNEL_DIR_H_
#define LANEWORK_TOOLS_KERNEL_DIR_H_

#include <stdbool.h>
#include <stddef.h>

// What the lookup depends on, so a test can state every case without moving binaries.
typedef struct lw_kernel_dir_inputs {
  const char *env;              // $LW_KERNEL_DIR (NULL or "": unset)
  const char *exe;              // this program's path (/proc/self/exe); NULL if unknown
  const char *build_tool_dir;   // the folder the build tree's `lanework` is built into
  const char *build_kernel_dir; // the build tree's kernel folder
  const char *bin_to_kernels;   // relative path from the installed bindir to the installed
                                // kernel folder, e.g. "../lib/x86_64-linux-gnu/lanework/kernels"
  const char *installed_kernel_dir;  // the configured <prefix>/<libdir>/lanework/kernels
} lw_kernel_dir_inputs_t;

// The kernel folder for these inputs, in out (cap bytes): $LW_KERNEL_DIR when set; else the
// build tree's folder when the program is the build tree's own binary; else the folder the
// install put beside the program (its folder + bin_to_kernels, made canonical when it exists),
// wherever the install tree was moved; else, with no program path, installed_kernel_dir.
// False when the path does not fit in cap.
bool lw__kernel_dir_resolve(const lw_kernel_dir_inputs_t *in, char *out, size_t cap);

#endif  // LANEWORK_TOOLS_KERNEL_DIR_H_
