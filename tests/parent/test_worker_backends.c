// tests/parent/test_worker_backends.c — the L3 worker's "unknown backend" error lists the
// backends of this build (child/backend.c's table), as the L2 chip's does: nothing here names
// a backend.
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "child/backend.h"
#include "lanework/worker.h"

Test(worker_backends, an_unknown_backend_at_l3_lists_every_backend_of_the_build) {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  strcpy(cfg.chip.backend, "cuda9");
  lw_worker_t *w = NULL;
  cr_assert_eq(lw_worker_create(&cfg, &w), LW_INVALID_ARGUMENT);
  cr_assert_null(w);
  const char *message = lw_last_error()->message;
  cr_assert(strstr(message, "'cuda9'"), "the name asked for is quoted: %s", message);
  char want[128];
  snprintf(want, sizeof(want), "(known: %s)", lw__backend_names());
  cr_assert(strstr(message, want), "no '%s' in: %s", want, message);
  uint32_t n = 0;
  const lw_backend_ops_t *const *built = lw__backend_list(&n);
  for (uint32_t i = 0; i < n; ++i) {
    cr_assert(strstr(message, built[i]->name), "backend %s is not listed: %s", built[i]->name,
              message);
  }
}
