// tests/lanes/test_error.c — status names, error records and the thread-local last error.
#include <criterion/criterion.h>
#include <pthread.h>
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

Test(error, long_messages_are_truncated_and_terminated) {
  char big[1000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  lw_error_t e;
  (void)lw__error_set(&e, LW_INTERNAL, -1, 0, "%s", big);
  cr_assert_eq(strlen(e.message), LW_ERROR_MESSAGE_BYTES - 1);
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
