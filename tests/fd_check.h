// tests/fd_check.h — fd-leak checks that tell a leak from the fds a device driver keeps for the
// life of the process.
//
// A chip's close must give back every fd it opened. But a driver may open fds when its first
// context is made and keep them until the process exits (NVIDIA's OpenCL keeps /dev/nvidia*
// open after the last context is released): counted against a baseline taken before the first
// chip ever opened, they look like a leak that is not one. So the baseline is taken after a
// warm-up cycle: `cycle` opens a chip, uses it as the tests do, and closes it, once per process
// (lw_test_fds_warm_baseline). A chip that leaks gives back fewer fds than it took on every
// open/close, so the count keeps growing cycle after cycle: lw_test_fds_growth runs n more
// cycles and measures that, and it still fails on a leak of one fd a cycle.
//
// Both helpers only count; a test decides what to assert. Every helper that reports a leak
// names each extra fd and what it points at ("fd 9 -> /dev/nvidia-uvm"), so a failure on a
// machine one cannot log into says whose fd it is.
#ifndef LANEWORK_TESTS_FD_CHECK_H_
#define LANEWORK_TESTS_FD_CHECK_H_

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// fds above this number are counted but not named (a test process holds a few dozen).
#define LW_TEST_FD_MAX 4096

// The fds open in this process at one moment.
typedef struct lw_test_fds {
  int count;
  uint64_t open[LW_TEST_FD_MAX / 64];
} lw_test_fds_t;

// Fills *out with this process's open fds (the directory stream's own fd excluded).
static inline void lw_test_fds_snapshot(lw_test_fds_t *out) {
  memset(out, 0, sizeof(*out));
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    out->count = -1;
    return;
  }
  int own = dirfd(d);
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == own) continue;
    out->count++;
    if (fd >= 0 && fd < LW_TEST_FD_MAX) out->open[fd / 64] |= UINT64_C(1) << (fd % 64);
  }
  closedir(d);
}

// How many more fds are open now than in *base (0 when there are as many or fewer). When there
// are more, msg (cap > 0) names each fd that *base did not have and its target, cut to fit.
static inline int lw_test_fds_excess(const lw_test_fds_t *base, char *msg, size_t cap) {
  lw_test_fds_t now;
  lw_test_fds_snapshot(&now);
  msg[0] = '\0';
  int excess = now.count - base->count;
  if (excess <= 0) return 0;
  size_t used = 0;
  for (int fd = 0; fd < LW_TEST_FD_MAX && used + 1 < cap; ++fd) {
    uint64_t bit = UINT64_C(1) << (fd % 64);
    if (!(now.open[fd / 64] & bit) || (base->open[fd / 64] & bit)) continue;
    char path[64], target[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    int w = snprintf(msg + used, cap - used, "%sfd %d -> %s", used ? ", " : "", fd,
                     n > 0 ? target : "?");
    if (w < 0) break;
    used += (size_t)w < cap - used ? (size_t)w : cap - used - 1;
  }
  return excess;
}

// The fds after one warm-up cycle, taken once per process (every later call returns the same
// snapshot and runs nothing): fds the driver opened in the first cycle and keeps are part of
// it. cycle must open a chip, use it the way the process's tests do, and close it.
static inline const lw_test_fds_t *lw_test_fds_warm_baseline(void (*cycle)(void *), void *ctx) {
  static lw_test_fds_t baseline;
  static bool taken;
  if (!taken) {
    cycle(ctx);
    lw_test_fds_snapshot(&baseline);
    taken = true;
  }
  return &baseline;
}

// Runs cycle once (the warm-up, when this process has not had one), snapshots, runs it n times
// more and returns by how many fds the count grew over those n cycles: 0 for a chip that gives
// back what it takes, at least n for one that leaks an fd a cycle. msg as lw_test_fds_excess.
static inline int lw_test_fds_growth(void (*cycle)(void *), void *ctx, int n, char *msg,
                                     size_t cap) {
  cycle(ctx);
  lw_test_fds_t after_first;
  lw_test_fds_snapshot(&after_first);
  for (int i = 0; i < n; ++i) cycle(ctx);
  return lw_test_fds_excess(&after_first, msg, cap);
}

#endif  // LANEWORK_TESTS_FD_CHECK_H_
