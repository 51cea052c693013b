// tools/main.c — the `lanework` command-line program.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child/backend.h"
#include "lanework/kernel.h"
#include "lanework/lanework.h"
#include "mailbox/mailbox.h"
#include "tools/tool.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: lanework <command> [options]\n"
          "       lanework --version | --help\n"
          "\n"
          "commands:\n"
          "  info [--json]                 version, backends, kernel folder, machine facts\n"
          "  pack KERNEL.so -o OUT.lwk     write a zstd-compressed kernel image\n"
          "  bench <name>                  measurements: overlap, dispatch, wait, idle, cancel,\n"
          "                                crash, trace (`lanework bench --help` lists them)\n"
          "  trace svg TRACE.json -o OUT.svg\n"
          "                                swimlane picture of a trace: lanes per chip over\n"
          "                                time\n"
          "  targets [--json] GPU_CHECK_JSON\n"
          "                                the open issues' targets, each held, missed or not\n"
          "                                measured, from a scripts/gpu-check run\n"
          "  help                          this text\n"
          "\n"
          "Every command takes --help: `lanework <command> --help` lists its options with\n"
          "their defaults and ranges.\n");
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
  if (strcmp(cmd, "targets") == 0) return lw__tool_targets(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    printf("lanework %s\n", lw_version());
    printf("kernel ABI %u, mailbox protocol %u\n", LW_KERNEL_ABI_VERSION, LW_MB_VERSION);
    return 0;
  }
  if (cmd[0] == '-') {
    fprintf(stderr, "lanework: unknown option '%s' (options come after the command)\n\n", cmd);
  } else {
    fprintf(stderr, "lanework: unknown command '%s'\n\n", cmd);
  }
  usage(stderr);
  return 2;
}
