// tests/lanes/test_error.c — status names, error records and the thread-local last error.
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lanes/error.h"
#include "lanework/status.h"

Test(error, every_status_has_its_name_and_unknown_values_are_unknown) {
  cr_assert_str_eq(lw_status_name(LW_OK), "LW_OK");
  cr_assert_str_eq(lw_status_name(LW_TASK_FAILED), "LW_TASK_FAILED");
  cr_assert_str_eq(lw_status_name(LW_INTERNAL), "LW_INTERNAL");
  for (int s = 0; s < LW_STATUS_COUNT_; ++s) {
    const char *name = lw_status_name((lw_status_t)s);
    cr_assert_not_null(name);
    cr_assert_str_neq(name, "LW_UNKNOWN", "status %d has no name", s);
  }
  cr_assert_str_eq(lw_status_name(LW_STATUS_COUNT_), "LW_UNKNOWN");
  cr_assert_str_eq(lw_status_name((lw_status_t)-1), "LW_UNKNOWN");
  cr_assert_str_eq(lw_status_name((lw_status_t)1000), "LW_UNKNOWN");
}

Test(error, last_error_starts_ok_on_a_new_thread) {
  cr_assert_eq(lw_last_error()->code, LW_OK);
  cr_assert_eq(lw_last_error()->worker_id, -1);
  cr_assert_str_eq(lw_last_error()->message, "");
}

Test(error, error_set_fills_the_record_and_returns_the_code) {
  lw_error_t e;
  cr_assert_eq(lw__error_set(&e, LW_CHILD_EXITED, 2, 17, "chip %d: child pid %d killed", 2, 99),
               LW_CHILD_EXITED);
  cr_assert_eq(e.code, LW_CHILD_EXITED);
  cr_assert_eq(e.worker_id, 2);
  cr_assert_eq(e.task_id, 17);
  cr_assert_str_eq(e.message, "chip 2: child pid 99 killed");
  cr_assert_eq(lw__error_set(NULL, LW_INTERNAL, -1, 0, "x"), LW_INTERNAL);
  lw__error_clear(&e);
  cr_assert_eq(e.code, LW_OK);
  cr_assert_eq(e.worker_id, -1);
  cr_assert_eq(e.task_id, 0);
  cr_assert_str_eq(e.message, "");
}

// "…" in UTF-8, what a message cut to fit ends with.
#define ELLIPSIS "\xE2\x80\xA6"

static bool ends_with_ellipsis(const char *s) {
  size_t n = strlen(s), e = strlen(ELLIPSIS);
  return n >= e && strcmp(s + n - e, ELLIPSIS) == 0;
}

// Words of 7 or 8 bytes ("word-17 ", "word-123 ") up to n bytes, NUL-terminated.
static void words(char *out, size_t n) {
  size_t at = 0;
  for (int i = 0; at + 1 < n; ++i) at += (size_t)snprintf(out + at, n - at, "word-%d ", i);
  out[n - 1] = '\0';
}

Test(error, a_long_message_is_cut_after_a_whole_word_and_ends_with_an_ellipsis) {
  char full[1000];
  words(full, sizeof(full));
  lw_error_t e;
  (void)lw__error_set(&e, LW_INTERNAL, -1, 0, "%s", full);
  size_t n = strlen(e.message);
  cr_assert_lt(n, (size_t)LW_ERROR_MESSAGE_BYTES);
  cr_assert(ends_with_ellipsis(e.message), "no ellipsis: '%s'", e.message);
  size_t kept = n - strlen(ELLIPSIS);
  cr_assert_eq(strncmp(e.message, full, kept), 0, "the kept text is the message's start");
  // Cut at a word's end: the kept text ends with a word and the full message has a space next.
  cr_assert_neq(e.message[kept - 1], ' ', "'%s'", e.message);
  cr_assert_eq(full[kept], ' ', "cut inside a word: '%s'", e.message);
  // No more than one word was dropped beyond what the ellipsis needs.
  cr_assert_gt(kept, (size_t)LW_ERROR_MESSAGE_BYTES - 1 - strlen(ELLIPSIS) - 10);
  // The thread's last error is cut the same way.
  (void)lw__fail(LW_INTERNAL, "%s", full);
  cr_assert_str_eq(lw_last_error()->message, e.message);
}

Test(error, a_message_that_fits_is_unchanged) {
  char full[LW_ERROR_MESSAGE_BYTES];
  words(full, sizeof(full));  // exactly LW_ERROR_MESSAGE_BYTES - 1 bytes: the most that fits
  cr_assert_eq(strlen(full), (size_t)LW_ERROR_MESSAGE_BYTES - 1);
  lw_error_t e;
  (void)lw__error_set(&e, LW_INTERNAL, -1, 0, "%s", full);
  cr_assert_str_eq(e.message, full);
  (void)lw__error_set(&e, LW_INTERNAL, -1, 0, "short: %d words", 2);
  cr_assert_str_eq(e.message, "short: 2 words");
}

Test(error, a_message_one_byte_too_long_loses_its_last_word) {
  char full[LW_ERROR_MESSAGE_BYTES + 1];
  words(full, sizeof(full));
  full[LW_ERROR_MESSAGE_BYTES - 1] = 'x';  // no trailing space: the last word runs to the end
  lw_error_t e;
  (void)lw__error_set(&e, LW_INTERNAL, -1, 0, "%s", full);
  cr_assert(ends_with_ellipsis(e.message), "'%s'", e.message);
  size_t kept = strlen(e.message) - strlen(ELLIPSIS);
  cr_assert_eq(full[kept], ' ', "cut inside a word: '%s'", e.message);
}

Test(error, a_word_longer_than_the_cut_is_cut_on_a_character_boundary) {
  // One word of 2-byte characters ("é") with nothing to break it: it is cut inside, but never
  // inside a character, and still ends with the ellipsis.
  char big[1001];
  for (size_t i = 0; i + 1 < sizeof(big); i += 2) memcpy(big + i, "\xC3\xA9", 2);
  big[sizeof(big) - 1] = '\0';
  lw_error_t e;
  (void)lw__error_set(&e, LW_INTERNAL, -1, 0, "%s", big);
  cr_assert_lt(strlen(e.message), (size_t)LW_ERROR_MESSAGE_BYTES);
  cr_assert(ends_with_ellipsis(e.message));
  size_t kept = strlen(e.message) - strlen(ELLIPSIS);
  cr_assert_eq(kept % 2, 0u, "a character was split: %zu bytes kept", kept);
  cr_assert_gt(kept, (size_t)LW_ERROR_MESSAGE_BYTES / 2);
}

Test(error, fail_and_store_set_this_threads_last_error) {
  cr_assert_eq(lw__fail(LW_NOT_FOUND, "no callable %d", 5), LW_NOT_FOUND);
  cr_assert_eq(lw_last_error()->code, LW_NOT_FOUND);
  cr_assert_str_eq(lw_last_error()->message, "no callable 5");
  lw_error_t e;
  (void)lw__error_set(&e, LW_POISONED, 1, 2, "upstream task 1 failed");
  cr_assert_eq(lw__last_error_store(&e), LW_POISONED);
  cr_assert_eq(lw_last_error()->task_id, 2);
  cr_assert_str_eq(lw_last_error()->message, "upstream task 1 failed");
}

static void *fail_on_other_thread(void *arg) {
  (void)arg;
  (void)lw__fail(LW_INTERNAL, "other thread");
  return NULL;
}

Test(error, last_error_is_per_thread, .timeout = 10) {
  (void)lw__fail(LW_CANCELLED, "main thread");
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, fail_on_other_thread, NULL), 0);
  pthread_join(th, NULL);
  cr_assert_eq(lw_last_error()->code, LW_CANCELLED);
  cr_assert_str_eq(lw_last_error()->message, "main thread");
}
