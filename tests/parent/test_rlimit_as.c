// tests/parent/test_rlimit_as.c — liblanework under a finite RLIMIT_AS (`ulimit -v`): its
// address reservation must not take the program's address space, and a worker that does not
// fit says why and what to change. rlimit_as_probe is exec'd under the limit (the reservation
// is made when the library is loaded). Not built with sanitizers, which cannot run under such
// a limit (tests/parent/CMakeLists.txt).
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parent/arena.h"
#include "test_util.h"

// Runs the probe with args under an RLIMIT_AS of limit_bytes; its stdout in out (n bytes,
// NUL-terminated); returns its wait status.
static int run_probe(uint64_t limit_bytes, const char *arg1, const char *arg2, char *out,
                     size_t n) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], 1) < 0) _exit(125);
    struct rlimit rl = {limit_bytes, limit_bytes};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(126);
    execl(LW_RLIMIT_PROBE_PATH, LW_RLIMIT_PROBE_PATH, arg1, arg2, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fds[0], out + got, n - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
    if (got == n - 1) break;
  }
  out[got] = '\0';
  close(fds[0]);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  return ws;
}

Test(rlimit_as, a_program_under_an_address_space_limit_keeps_most_of_it, .timeout = 60) {
  char out[256];
  // 48 of the 72 GiB for the program's own use: a 64 GiB reservation would leave it 8.
  int ws = run_probe(72ull << 30, "48", NULL, out, sizeof(out));
  cr_assert(WIFEXITED(ws), "probe died: wait status 0x%x", (unsigned)ws);
  cr_assert_eq(WEXITSTATUS(ws), 0, "probe failed at step %d", WEXITSTATUS(ws));
}

Test(rlimit_as, an_arena_beyond_the_limit_fails_with_the_errno_and_what_to_change,
     .timeout = 60) {
  char out[1024];
  // A 2 GiB arena under a 1 GiB limit cannot be mapped.
  int ws = run_probe(1ull << 30, "arena", "2048", out, sizeof(out));
  cr_assert(WIFEXITED(ws), "probe died: wait status 0x%x", (unsigned)ws);
  cr_assert_eq(WEXITSTATUS(ws), 0, "probe exit %d (20: the create succeeded)", WEXITSTATUS(ws));
  cr_assert(strncmp(out, "LW_RESOURCE_EXHAUSTED\n", 22) == 0, "%s", out);
  char want[128];
  snprintf(want, sizeof(want), "cannot map the arena (2 GiB): %s", strerror(ENOMEM));
  cr_assert(strstr(out, want), "no '%s' in: %s", want, out);
  cr_assert(strstr(out, "RLIMIT_AS is 1 GiB"), "the limit is named: %s", out);
  cr_assert(strstr(out, "arena_bytes in lw_worker_config_t"), "the knob is named: %s", out);
  cr_assert(strstr(out, "ulimit -v"), "%s", out);
}

// The helper worker_create uses for its other shared areas too (the mailboxes, the trace
// areas): the same shape for any of them, a hint only for ENOMEM.
Test(rlimit_as, a_failed_map_is_described_with_its_size_errno_and_hint) {
  // Under a finite limit (this test's own process; well above what it uses).
  struct rlimit rl = {64ull << 30, 64ull << 30};
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
  char buf[LW_ERROR_MESSAGE_BYTES];
  lw__arena_describe_failure(buf, sizeof(buf), "map", "the trace areas", 5ull << 20, ENOMEM);
  char want[160];
  snprintf(want, sizeof(want), "cannot map the trace areas (5 MiB): %s (RLIMIT_AS is 64 GiB, ",
           strerror(ENOMEM));
  cr_assert(strncmp(buf, want, strlen(want)) == 0, "'%s' does not start with '%s'", buf, want);
  cr_assert(strstr(buf, " of it in use: lower arena_bytes in lw_worker_config_t or raise "
                        "ulimit -v)"),
            "%s", buf);
  // Another errno: its text, no hint.
  lw__arena_describe_failure(buf, sizeof(buf), "create", "the mailboxes", 1536ull << 10, EMFILE);
  snprintf(want, sizeof(want), "cannot create the mailboxes (1.5 MiB): %s", strerror(EMFILE));
  cr_assert_str_eq(buf, want);
  // A buffer too small is cut and terminated.
  char small[12];
  lw__arena_describe_failure(small, sizeof(small), "map", "the arena", 4096, ENOMEM);
  cr_assert_eq(strlen(small), sizeof(small) - 1);
}

Test(rlimit_as, without_an_address_space_limit_enomem_points_at_memory_and_arena_bytes) {
  struct rlimit rl;
  cr_assert_eq(getrlimit(RLIMIT_AS, &rl), 0);
  if (rl.rlim_max != RLIM_INFINITY) cr_skip_test("RLIMIT_AS has a hard limit here");
  rl.rlim_cur = RLIM_INFINITY;
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
  char buf[LW_ERROR_MESSAGE_BYTES];
  lw__arena_describe_failure(buf, sizeof(buf), "map", "the arena", 3ull << 30, ENOMEM);
  cr_assert(strstr(buf, "cannot map the arena (3 GiB): "), "%s", buf);
  cr_assert(strstr(buf, "lower arena_bytes in lw_worker_config_t"), "%s", buf);
  cr_assert_null(strstr(buf, "RLIMIT_AS"), "%s", buf);
}
