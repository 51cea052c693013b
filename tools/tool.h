// tools/tool.h — subcommands of the `lanework` program. Each takes the arguments after its
// own name (argv[0] is the subcommand) and returns the process exit code.
#ifndef LANEWORK_TOOLS_TOOL_H_
#define LANEWORK_TOOLS_TOOL_H_

#include <stddef.h>

// The "schema_version" of every JSON object the program prints (bench --json, info --json):
// raised when a field documented as stable (docs/benchmarks.md) changes meaning or goes away.
// 2: the benches' JSON comes from one driver per bench over every backend (the opencl
// overlap's register_c2_min_us / _max_us are register_c2_us_min / _max, its c2_max_rel_err is
// max_rel_err; cancel's default level is 3 on every backend).
#define LW_TOOL_JSON_SCHEMA_VERSION 2

int lw__tool_info(int argc, char **argv);  // tools/info.c
int lw__tool_pack(int argc, char **argv);
int lw__tool_bench(int argc, char **argv);
int lw__tool_trace(int argc, char **argv);  // tools/trace_svg.c: `trace svg`
int lw__tool_targets(int argc, char **argv);  // tools/targets.c

// The folder holding the kernel images (tools/kernel_dir.c): $LW_KERNEL_DIR, else the build
// tree's folder for the build tree's binary, else the installed folder found relative to the
// program itself (<bindir>/../<libdir>/lanework/kernels).
const char *lw__tool_kernel_dir(void);

// The first line of a small /sys file, without its newline; "" when it cannot be read
// (tools/info.c).
void lw__tool_read_line(const char *path, char *buf, size_t size);

#endif  // LANEWORK_TOOLS_TOOL_H_
