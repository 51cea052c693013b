// tests/parent/test_rlimit_as.c — liblanework's address reservation under a finite
// RLIMIT_AS: it must not take the program's address space. rlimit_as_probe is exec'd under
// the limit (the reservation is made when the library is loaded). Not built with sanitizers,
// which cannot run under such a limit (tests/parent/CMakeLists.txt).
#include <criterion/criterion.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

Test(rlimit_as, a_program_under_an_address_space_limit_keeps_most_of_it, .timeout = 60) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    struct rlimit rl = {72ull << 30, 72ull << 30};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(126);
    // 48 of the 72 GiB for the program's own use: a 64 GiB reservation would leave it 8.
    execl(LW_RLIMIT_PROBE_PATH, LW_RLIMIT_PROBE_PATH, "48", (char *)NULL);
    _exit(127);
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  cr_assert(WIFEXITED(ws), "probe died: wait status 0x%x", (unsigned)ws);
  cr_assert_eq(WEXITSTATUS(ws), 0, "probe failed at step %d", WEXITSTATUS(ws));
}
