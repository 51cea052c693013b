/* tests/headers/must_use_consumer.c — a program's cleanup code that drops statuses on
 * purpose: each (void) cast must silence LW_MUST_USE under -Wall -Wextra -Werror -pedantic, in
 * C and (compiled with -x c++) in C++. Compiled by check_must_use.cmake, never linked. */
#include <lanework/lanework.h>

void cleanup(lw_worker_t *w, lw_callable_handle_t h, lw_args_t *a);

void cleanup(lw_worker_t *w, lw_callable_handle_t h, lw_args_t *a) {
  (void)lw_args_add_scalar(a, 1);
  (void)lw_args_validate(a);
  (void)lw_worker_unregister(w, h);
  lw_worker_destroy(w);
}
