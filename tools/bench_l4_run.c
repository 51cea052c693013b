// tools/bench_l4_run.c — `lanework bench l4`: the L4 worker's figures (docs/l4.md): remote
// tasks, and its transport's. The `lanework` program never links MPI: it runs
// `mpirun -np 3 lanework-bench-l4 MODE` (the helper built where MPI is found, tools/bench_l4.c)
// once per mode — tasks, tasks-death, tasks-hung, figures, death, hung — and reads the JSON
// line rank 0 prints. The helper is $LW_BENCH_L4_EXE, else this build
// tree's, else the installed one.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/bench_sim_only.h"
#include "tools/tool.h"

#ifndef LW_BENCH_L4_BUILD_PATH
#define LW_BENCH_L4_BUILD_PATH ""
#endif
#ifndef LW_BENCH_L4_INSTALL_PATH
#define LW_BENCH_L4_INSTALL_PATH ""
#endif

static const char *helper_path(void) {
  const char *env = getenv("LW_BENCH_L4_EXE");
  if (env && *env) return env;
  if (*LW_BENCH_L4_BUILD_PATH && access(LW_BENCH_L4_BUILD_PATH, X_OK) == 0) {
    return LW_BENCH_L4_BUILD_PATH;
  }
  if (*LW_BENCH_L4_INSTALL_PATH && access(LW_BENCH_L4_INSTALL_PATH, X_OK) == 0) {
    return LW_BENCH_L4_INSTALL_PATH;
  }
  return NULL;
}

// Runs the helper in mode under mpirun and keeps the line of rank 0 that starts with
// {"bench": "l4" in line. 0 when found; mpirun's own status does not count (death and hung end
// the job on purpose).
static int run_mode(const char *helper, const char *mode, char *line, size_t cap) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    if (getuid() == 0) {
      // Open MPI refuses to run as root unless told it is meant.
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    setenv("LW_KERNEL_DIR", lw__tool_kernel_dir(), 1);  // the task modes' kernels
    // A fault run ends the job on purpose: mpirun's report of it (-quiet) is not news.
    const char *args[32];
    int n = 0;
    const char *fixed[] = {"timeout", "-s", "KILL", "120", "mpirun"};
    for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); ++k) args[n++] = fixed[k];
    if (strcmp(mode, "figures") != 0 && strcmp(mode, "tasks") != 0) args[n++] = "-quiet";
    const char *job[] = {"-np",   "3",   "--oversubscribe", "--bind-to", "none",
                         "--mca", "btl", "self,vader",      "-x",        "LW_KERNEL_DIR"};
    for (size_t k = 0; k < sizeof(job) / sizeof(job[0]); ++k) args[n++] = job[k];
    args[n++] = helper;
    args[n++] = mode;
    args[n] = NULL;
    execvp("timeout", (char *const *)args);
    _exit(127);
  }
  close(p[1]);
  FILE *f = fdopen(p[0], "r");
  char buf[4096];
  int found = -1;
  while (f && fgets(buf, sizeof(buf), f)) {
    size_t n = strcspn(buf, "\n");
    if (strncmp(buf, "{\"bench\": \"l4\"", 14) == 0 && n < cap) {
      memcpy(line, buf, n);
      line[n] = '\0';
      found = 0;
    }
  }
  if (f) fclose(f);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return found;
}

// The number after "key": in a JSON line, or -1.
static double field(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\": ", key);
  const char *at = strstr(line, pat);
  return at ? strtod(at + strlen(pat), NULL) : -1.0;
}

int lw__bench_l4(const lw_bench_opts_t *o) {
  const char *helper = helper_path();
  if (!helper) {
    fprintf(stderr,
            "lanework bench l4: lanework-bench-l4 is not here: this lanework was built without "
            "MPI (install openmpi-bin and libopenmpi-dev, then reconfigure), or name it with "
            "LW_BENCH_L4_EXE\n");
    return 2;
  }
  static const char *modes[] = {"tasks", "tasks-death", "tasks-hung", "figures", "death", "hung"};
  enum { N_MODES = sizeof(modes) / sizeof(modes[0]) };
  char lines[N_MODES][2048];
  for (int i = 0; i < N_MODES; ++i) {
    if (!o->quiet) fprintf(stderr, "l4: mpirun -np 3 %s %s\n", helper, modes[i]);
    if (run_mode(helper, modes[i], lines[i], sizeof(lines[i])) != 0) {
      fprintf(stderr, "lanework bench l4: the %s run printed no result (is mpirun there?)\n",
              modes[i]);
      return 1;
    }
  }
  const char *t = lines[0];
  printf(
      "remote tasks through the L4 worker, mpirun -np 3 (rank 0 the L4; ranks 1 and 2 each an "
      "L3 worker, 1 sim chip):\n");
  printf("  startup (every rank's L3 up, rank 0) %8.1f ms\n", field(t, "startup_ms"));
  printf("  empty task round trip p50 / p99     %8.2f / %.2f us\n",
         field(t, "task_round_trip_p50_us"), field(t, "task_round_trip_p99_us"));
  printf("  per task, %d in flight            %8.2f us\n", (int)field(t, "in_flight"),
         field(t, "per_task_in_flight_us"));
  printf("  4 MB tensor rank 1 -> rank 2         %8.2f GB/s (min %.2f)\n",
         field(t, "tensor_4mb_gbs"), field(t, "tensor_4mb_gbs_min"));
  printf("  rank killed -> its task's run fails  %8.2f ms\n", field(lines[1], "to_error_ms"));
  printf("  rank stopped -> its run fails (hung) %8.2f ms\n", field(lines[2], "to_error_ms"));
  printf("  clean shutdown (lw_l4_destroy)       %8.1f ms\n", field(t, "shutdown_ms"));
  const char *f = lines[3];
  printf("its transport alone (messages between rank 0 and the ranks, no L3):\n");
  printf("  startup (open, in rank 0)           %8.1f ms\n", field(f, "startup_ms"));
  printf("  message round trip p50 / p99        %8.2f / %.2f us\n", field(f, "round_trip_p50_us"),
         field(f, "round_trip_p99_us"));
  printf("  per message, %d in flight          %8.2f us\n", (int)field(f, "in_flight"),
         field(f, "per_message_in_flight_us"));
  printf("  4 MB tensor rank 1 -> rank 2         %8.2f GB/s (min %.2f)\n",
         field(f, "tensor_4mb_gbs"), field(f, "tensor_4mb_gbs_min"));
  printf("  rank killed -> reported             %8.2f ms\n", field(lines[4], "to_error_ms"));
  printf("  rank stopped -> reported hung       %8.2f ms\n", field(lines[5], "to_error_ms"));
  printf("  clean shutdown                      %8.1f ms\n", field(f, "shutdown_ms"));
  if (o->json) {
    printf(
        "{\"bench\": \"l4\", \"tasks\": %s, \"tasks_death\": %s, \"tasks_hung\": %s, "
        "\"figures\": %s, \"death\": %s, \"hung\": %s}\n",
        lines[0], lines[1], lines[2], lines[3], lines[4], lines[5]);
  }
  return 0;
}
