// A file that calls stdio after fork: test_layering_afterfork_rejects_stdio runs
// check_afterfork.cmake on its object and expects it to fail, naming the call.
#include <stdio.h>
#include <unistd.h>

void lw_afterfork_fixture(void);
void lw_afterfork_fixture(void) {
  printf("child %d\n", (int)getpid());
  _exit(0);
}
