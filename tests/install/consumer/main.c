// A program outside the project that uses the installed headers and library: it checks that
// the public API links and runs from an install tree.
#include <lanework/lanework.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  const char *name = lw_status_name(LW_INVALID_ARGUMENT);
  if (name == NULL || strcmp(name, "LW_INVALID_ARGUMENT") != 0) {
    fprintf(stderr, "consumer: lw_status_name(LW_INVALID_ARGUMENT) gave %s\n",
            name ? name : "(null)");
    return 1;
  }
  printf("consumer: %s\n", name);
  return 0;
}
