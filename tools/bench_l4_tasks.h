// tools/bench_l4_tasks.h — lanework-bench-l4's task modes (tools/bench_l4_tasks.c): remote
// tasks through the L4 worker. Internal to the helper.
#ifndef LANEWORK_TOOLS_BENCH_L4_TASKS_H_
#define LANEWORK_TOOLS_BENCH_L4_TASKS_H_

// Orders doubles for qsort (both files of the helper sort their figures with it).
static inline int lw__bench_l4_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Runs mode ("tasks", "tasks-death", "tasks-hung") on this rank; the helper's exit status.
int lw__bench_l4_tasks(int *argc, char ***argv, const char *mode);

#endif  // LANEWORK_TOOLS_BENCH_L4_TASKS_H_
