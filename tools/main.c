// tools/main.c — the `lanework` command-line program.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child/backend.h"
#include "lanework/lanework.h"
#include "tools/tool.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: lanework <command> [options]\n"
          "\n"
          "commands:\n"
          "  info                          version, backends, kernel folder, machine facts\n"
          "  pack KERNEL.so -o OUT.lwk     write a zstd-compressed kernel image\n"
          "  bench overlap --level 2|3     register/run overlap table (seed 004 shape)\n"
          "  bench dispatch                empty-run round trips and the shm/futex floors\n"
          "  bench wait                    cost of done / wait on a finished handle\n"
          "  bench idle                    CPU used by an idle worker and its children\n"
          "  bench cancel                  cancel latency, cooperative and escalated (L3)\n"
          "  bench crash                   child death: detection and respawn times (L3)\n"
          "  bench trace                   cost of a recorded event; dispatch with tracing on\n"
          "  trace svg TRACE.json -o OUT.svg\n"
          "                                swimlane picture of a trace: lanes per chip over\n"
          "                                time (run `lanework trace svg --help`)\n"
          "  help                          this text\n"
          "\n"
          "bench options: --json (last stdout line is one JSON object), --trials N,\n"
          "--backend sim|opencl (overlap, dispatch, cancel);\n"
          "run `lanework bench <name> --help` for the rest.\n");
}

// The OpenCL devices in device_id order (what an "opencl" chip's device_id indexes), or why
// there are none.
static void info_opencl(void) {
#ifdef LW_HAVE_OPENCL
  enum { kMax = 64 };
  lw_opencl_device_info_t devs[kMax];
  uint32_t n = 0;
  lw_error_t err;
  if (lw__opencl_list(devs, kMax, &n, &err) != LW_OK) {
    printf("opencl:     %s\n", err.message);
    return;
  }
  printf("opencl:     %u device%s (device_id: platform / device, type, compute units, "
         "version)\n",
         n, n == 1 ? "" : "s");
  for (uint32_t i = 0; i < n && i < kMax; ++i) {
    printf("  %2d: %s / %s, %s, %u CU, %s\n", devs[i].index, devs[i].platform, devs[i].device,
           devs[i].type, devs[i].compute_units, devs[i].version);
  }
#else
  printf("opencl:     %s\n", lw__backend_missing_reason("opencl"));
#endif
}

int lw__tool_info(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("lanework %s\n", LW_VERSION);
  printf("backends:   %s\n", lw__backend_names());
  printf("kernels:    %s\n", lw__tool_kernel_dir());
  printf("cpus:       %ld online\n", sysconf(_SC_NPROCESSORS_ONLN));
  info_opencl();
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "info") == 0) return lw__tool_info(argc - 1, argv + 1);
  if (strcmp(cmd, "pack") == 0) return lw__tool_pack(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0) return lw__tool_bench(argc - 1, argv + 1);
  if (strcmp(cmd, "trace") == 0) return lw__tool_trace(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "lanework: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
