// tests/child/test_backends.c — the table of backends built into this library: the lookup by
// name, the names in messages and the L2 "unknown backend" error all come from it, so what a
// message lists is what the build has. Nothing here names a backend: the list is the build's.
#include <criterion/criterion.h>
#include <string.h>

#include "child/backend.h"
#include "child/chip_impl.h"
#include "lanes/error.h"
#include "lanework/chip.h"

// Splits a "a, b, c" list (at most cap names, each < 32 bytes) into out; returns the count.
static uint32_t split_names(const char *list, char out[][32], uint32_t cap) {
  uint32_t n = 0;
  const char *p = list;
  while (*p != '\0' && n < cap) {
    const char *end = strstr(p, ", ");
    size_t len = end ? (size_t)(end - p) : strlen(p);
    cr_assert_lt(len, 32u, "a name of %zu bytes in '%s'", len, list);
    memcpy(out[n], p, len);
    out[n][len] = '\0';
    ++n;
    p += len;
    if (end) p += 2;
  }
  return n;
}

// The names listed after "(known: " up to the closing parenthesis of message.
static uint32_t known_in(const char *message, char out[][32], uint32_t cap) {
  const char *start = strstr(message, "(known: ");
  cr_assert_not_null(start, "no list of backends in '%s'", message);
  start += strlen("(known: ");
  const char *close = strchr(start, ')');
  cr_assert_not_null(close, "'%s'", message);
  char list[LW_BACKEND_NAMES_BYTES];
  size_t len = (size_t)(close - start);
  cr_assert_lt(len, sizeof(list));
  memcpy(list, start, len);
  list[len] = '\0';
  return split_names(list, out, cap);
}

// The listed names are exactly the backends of the build, in its order, each found by name.
static void assert_lists_the_build(char names[][32], uint32_t n, const char *where) {
  uint32_t n_built = 0;
  const lw_backend_ops_t *const *built = lw__backend_list(&n_built);
  cr_assert_eq(n, n_built, "%s lists %u backends; the build has %u", where, n, n_built);
  for (uint32_t i = 0; i < n; ++i) {
    cr_assert_str_eq(names[i], built[i]->name, "%s: backend %u", where, i);
    cr_assert_eq(lw__backend_find(names[i]), built[i], "%s: '%s' is not found by its name",
                 where, names[i]);
  }
}

Test(backends, every_backend_of_the_build_is_found_by_its_name_and_sim_is_first) {
  uint32_t n = 0;
  const lw_backend_ops_t *const *built = lw__backend_list(&n);
  cr_assert_geq(n, 1u);
  cr_assert_str_eq(built[0]->name, "sim", "the default backend leads the list");
  for (uint32_t i = 0; i < n; ++i) {
    cr_assert_not_null(built[i]->name);
    cr_assert_eq(lw__backend_find(built[i]->name), built[i]);
  }
  cr_assert_null(lw__backend_find("cuda9"));
  cr_assert_null(lw__backend_find(""));
  cr_assert_null(lw__backend_find(NULL));
}

Test(backends, the_names_in_messages_are_the_builds_backends) {
  char names[8][32];
  uint32_t n = split_names(lw__backend_names(), names, 8);
  assert_lists_the_build(names, n, "lw__backend_names");
}

Test(backends, an_unknown_backend_at_l2_lists_every_backend_of_the_build) {
  lw_chip_config_t cc;
  lw_chip_config_default(&cc);
  strcpy(cc.backend, "cuda9");
  lw_chip_t *chip = NULL;
  lw_error_t err;
  cr_assert_eq(lw__chip_open(&cc, &chip, &err), LW_INVALID_ARGUMENT);
  cr_assert_null(chip);
  cr_assert(strstr(err.message, "'cuda9'"), "the name asked for is quoted: %s", err.message);
  char names[8][32];
  uint32_t n = known_in(err.message, names, 8);
  assert_lists_the_build(names, n, err.message);
  // The public call says the same.
  cr_assert_eq(lw_chip_open(&cc, &chip), LW_INVALID_ARGUMENT);
  cr_assert_str_eq(lw_last_error()->message, err.message);
}
