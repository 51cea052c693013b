// tests/docs/test_doc_versions.c — the numbers the docs state are the code's: the kernel ABI
// and mailbox protocol versions docs/packaging.md and docs/protocol.md name, the version
// find_package asks for in the README and docs/packaging.md, and the README's list of the
// packages a build needs against the ones scripts/common.sh installs. Each is read from the
// page where a reader finds it, so a bump that forgets a page fails here.
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/kernel.h"
#include "lanework/version.h"
#include "mailbox/mailbox.h"

// The file at LW_SOURCE_DIR/rel, NUL-terminated; the caller frees it.
static char *slurp(const char *rel) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", LW_SOURCE_DIR, rel);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  cr_assert_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  cr_assert_geq(n, 0);
  rewind(f);
  char *text = malloc((size_t)n + 1);
  cr_assert_not_null(text);
  cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = '\0';
  fclose(f);
  return text;
}

// The number right after the only occurrence of marker in text (fails when there is none or
// more than one, so a page that states it twice cannot keep a stale copy).
static unsigned long number_after(const char *text, const char *marker, const char *page) {
  const char *at = strstr(text, marker);
  cr_assert_not_null(at, "%s does not say '%s'", page, marker);
  cr_assert_null(strstr(at + 1, marker), "%s says '%s' twice", page, marker);
  char *end = NULL;
  unsigned long v = strtoul(at + strlen(marker), &end, 10);
  cr_assert_neq(end, at + strlen(marker), "%s: no number after '%s'", page, marker);
  return v;
}

Test(doc_versions, packaging_md_names_the_kernel_abi_of_kernel_h) {
  char *page = slurp("docs/packaging.md");
  unsigned long v =
      number_after(page, "`LW_KERNEL_ABI_VERSION` (`lanework/kernel.h`, now ", "packaging.md");
  cr_assert_eq(v, LW_KERNEL_ABI_VERSION, "docs/packaging.md says kernel ABI %lu, kernel.h %u", v,
               LW_KERNEL_ABI_VERSION);
  // Its list of what each ABI appended reaches the current one.
  char last[32];
  snprintf(last, sizeof(last), "ABI %u ", LW_KERNEL_ABI_VERSION);
  cr_assert_not_null(strstr(page, last), "docs/packaging.md does not say what %sappended",
                     last);
  free(page);
}

Test(doc_versions, packaging_md_names_the_mailbox_protocol_of_mailbox_h) {
  char *page = slurp("docs/packaging.md");
  unsigned long v =
      number_after(page, "`LW_MB_VERSION` (`mailbox/mailbox.h`, now ", "packaging.md");
  cr_assert_eq(v, LW_MB_VERSION, "docs/packaging.md says mailbox protocol %lu, mailbox.h %u", v,
               LW_MB_VERSION);
  free(page);
}

Test(doc_versions, protocol_md_is_the_wire_format_of_mailbox_h) {
  char *page = slurp("docs/protocol.md");
  unsigned long v = number_after(page, "# Mailbox protocol (wire format v", "protocol.md");
  cr_assert_eq(v, LW_MB_VERSION, "docs/protocol.md is v%lu, mailbox.h %u", v, LW_MB_VERSION);
  free(page);
}

Test(doc_versions, find_package_asks_for_this_major_and_minor) {
  const char *pages[] = {"README.md", "docs/packaging.md"};
  for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); ++i) {
    char *page = slurp(pages[i]);
    const char *marker = "find_package(lanework ";
    const char *at = strstr(page, marker);
    cr_assert_not_null(at, "%s does not show find_package", pages[i]);
    unsigned major = 0, minor = 0;
    cr_assert_eq(sscanf(at + strlen(marker), "%u.%u", &major, &minor), 2, "%s", pages[i]);
    cr_assert(major == LW_VERSION_MAJOR && minor == LW_VERSION_MINOR,
              "%s asks for %u.%u; this is %s", pages[i], major, minor, LW_VERSION_STRING);
    free(page);
  }
}

// Every package scripts/common.sh installs (LW_PACKAGES=(...)) is named in the README's
// "Building by hand" section, so a build by hand has all it needs.
Test(doc_versions, readme_names_every_package_the_scripts_install) {
  char *script = slurp("scripts/common.sh");
  char *readme = slurp("README.md");
  const char *list = strstr(script, "LW_PACKAGES=(");
  cr_assert_not_null(list, "scripts/common.sh has no LW_PACKAGES=(...)");
  list += strlen("LW_PACKAGES=(");
  const char *close = strchr(list, ')');
  cr_assert_not_null(close);
  const char *section = strstr(readme, "## Building by hand");
  cr_assert_not_null(section, "README.md has no 'Building by hand' section");
  const char *section_end = strstr(section + 1, "\n## ");
  size_t section_len = section_end ? (size_t)(section_end - section) : strlen(section);
  char *by_hand = strndup(section, section_len);
  int n = 0;
  for (const char *p = list; p < close;) {
    p += strspn(p, " \t\n\\");
    size_t len = strcspn(p, " \t\n\\)");
    if (len == 0 || p >= close) break;
    char name[64];
    cr_assert_lt(len, sizeof(name));
    memcpy(name, p, len);
    name[len] = '\0';
    // As a word: "zstd" must not be satisfied by "libzstd-dev".
    char word[70];
    snprintf(word, sizeof(word), "`%s`", name);
    bool found = strstr(by_hand, word) != NULL;
    for (const char *q = by_hand; !found && (q = strstr(q, name)) != NULL; q += len) {
      char before = q == by_hand ? ' ' : q[-1], after = q[len];
      found = (before == ' ' || before == '\n' || before == '`') &&
              (after == ' ' || after == '\n' || after == '`' || after == ',');
    }
    cr_assert(found,
              "README.md's 'Building by hand' does not name %s (scripts/common.sh installs it)",
              name);
    ++n;
    p += len;
  }
  cr_assert_geq(n, 5, "read only %d packages from scripts/common.sh", n);
  free(by_hand);
  free(readme);
  free(script);
}
