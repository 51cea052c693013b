// tests/lanes/test_log.c — the log sink (lanework/log.h): a function receives events up to its
// level and none above, NULL goes back to the default, LW_LOG's values parse, and a message
// longer than the buffer is cut, never overrun.
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "lanes/log.h"

typedef struct seen {
  int n;
  lw_log_level_t level[8];
  char message[8][600];
} seen_t;

static void record(lw_log_level_t level, const char *message, void *user) {
  seen_t *s = user;
  if (s->n < 8) {
    s->level[s->n] = level;
    snprintf(s->message[s->n], sizeof(s->message[0]), "%s", message);
  }
  s->n++;
}

static void reset(void) { lw_set_log_fn(NULL, NULL, LW_LOG_OFF); }

TestSuite(log, .fini = reset);

Test(log, a_function_gets_events_up_to_its_level_and_none_above) {
  seen_t s = {0};
  lw_set_log_fn(record, &s, LW_LOG_INFO);
  lw__log(LW_LOG_WARN, "chip %d: %s", 0, "died");
  lw__log(LW_LOG_INFO, "chip 0: respawned");
  lw__log(LW_LOG_DEBUG, "chip 0: details nobody asked for");
  cr_assert_eq(s.n, 2);
  cr_assert_eq(s.level[0], LW_LOG_WARN);
  cr_assert_str_eq(s.message[0], "chip 0: died");
  cr_assert_eq(s.level[1], LW_LOG_INFO);
  cr_assert_str_eq(s.message[1], "chip 0: respawned");
}

Test(log, setting_null_stops_delivery_to_the_old_function) {
  seen_t s = {0};
  lw_set_log_fn(record, &s, LW_LOG_DEBUG);
  lw__log(LW_LOG_WARN, "one");
  lw_set_log_fn(NULL, NULL, LW_LOG_DEBUG);
  lw__log(LW_LOG_WARN, "two");  // goes to the default (LW_LOG), not to record
  cr_assert_eq(s.n, 1);
}

Test(log, a_long_message_is_cut_to_the_buffer) {
  seen_t s = {0};
  lw_set_log_fn(record, &s, LW_LOG_WARN);
  char big[2000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  lw__log(LW_LOG_WARN, "%s", big);
  cr_assert_eq(s.n, 1);
  cr_assert_eq(strlen(s.message[0]), 511, "cut to the 512-byte buffer");
}

Test(log, lw_log_values_parse_and_anything_else_is_off) {
  cr_assert_eq(lw__log_parse_level("warn"), LW_LOG_WARN);
  cr_assert_eq(lw__log_parse_level("info"), LW_LOG_INFO);
  cr_assert_eq(lw__log_parse_level("debug"), LW_LOG_DEBUG);
  cr_assert_eq(lw__log_parse_level("off"), LW_LOG_OFF);
  cr_assert_eq(lw__log_parse_level(NULL), LW_LOG_OFF);
  cr_assert_eq(lw__log_parse_level("verbose"), LW_LOG_OFF);
  cr_assert_str_eq(lw_log_level_name(LW_LOG_INFO), "info");
  cr_assert_str_eq(lw_log_level_name((lw_log_level_t)9), "unknown");
}
