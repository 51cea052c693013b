// tools/tool.h — subcommands of the `lanework` program. Each takes the arguments after its
// own name (argv[0] is the subcommand) and returns the process exit code.
#ifndef LANEWORK_TOOLS_TOOL_H_
#define LANEWORK_TOOLS_TOOL_H_

// The "schema_version" of every JSON object the program prints (bench --json, info --json):
// raised when a field documented as stable (docs/benchmarks.md) changes meaning or goes away.
#define LW_TOOL_JSON_SCHEMA_VERSION 1

int lw__tool_info(int argc, char **argv);  // tools/info.c
int lw__tool_pack(int argc, char **argv);
int lw__tool_bench(int argc, char **argv);
int lw__tool_trace(int argc, char **argv);  // tools/trace_svg.c: `trace svg`

// The folder holding the kernel images (tools/kernel_dir.c): $LW_KERNEL_DIR, else the build
// tree's folder for the build tree's binary, else the installed folder found relative to the
// program itself (<bindir>/../<libdir>/lanework/kernels).
const char *lw__tool_kernel_dir(void);

#endif  // LANEWORK_TOOLS_TOOL_H_
