// tests/lanes/test_json.c — the streaming JSON writer (lanes/json.h): what it writes is read
// back with jansson and compared with what was written (strings with every character that needs
// an escape, UTF-8, integers at their limits, doubles that read back equal, NaN and inf as
// null, nesting and commas, pretty and compact), and each misuse of the grammar is reported by
// lw__json_finish with nothing written after it, as is a write error of the stream.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <jansson.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/json.h"

// One document written into memory (open_memstream), closed and read back.
typedef struct doc {
  FILE *f;
  char *text;
  size_t len;
  lw_json_t j;
  lw_error_t err;
} doc_t;

static void doc_open(doc_t *d, bool pretty) {
  memset(d, 0, sizeof(*d));
  d->f = open_memstream(&d->text, &d->len);
  cr_assert_not_null(d->f);
  lw__json_initialize(&d->j, d->f, pretty);
}

// Finishes the writer, closes the stream (d->text then holds everything written) and returns
// what finish said.
static lw_status_t doc_close(doc_t *d) {
  lw_status_t st = lw__json_finish(&d->j, &d->err);
  cr_assert_eq(fclose(d->f), 0);
  d->f = NULL;
  return st;
}

// Finishes, expects LW_OK and parses the text with jansson; fails the test with the text and
// jansson's complaint when it is not one JSON value.
static json_t *doc_parse(doc_t *d, size_t flags) {
  lw_status_t st = doc_close(d);
  cr_assert_eq(st, LW_OK, "finish: %s (%s); text: %s", lw_status_name(st), d->err.message,
               d->text);
  json_error_t e;
  json_t *v = json_loads(d->text, flags | JSON_DECODE_ANY, &e);
  cr_assert_not_null(v, "jansson: %s at %d:%d in: %s", e.text, e.line, e.column, d->text);
  return v;
}

static void doc_free(doc_t *d) { free(d->text); }

// Finishes, expects an INTERNAL misuse whose message names `what`, and that exactly `written`
// reached the stream (nothing after the misuse).
static void expect_misuse(doc_t *d, const char *what, const char *written) {
  lw_status_t st = doc_close(d);
  cr_assert_eq(st, LW_INTERNAL, "status %s (%s); text: %s", lw_status_name(st), d->err.message,
               d->text);
  cr_assert_eq(d->err.code, LW_INTERNAL);
  cr_assert_eq(strncmp(d->err.message, "json: ", 6), 0, "%s", d->err.message);
  cr_assert_not_null(strstr(d->err.message, what), "expected '%s' in: %s", what, d->err.message);
  cr_assert_str_eq(d->text, written);
  doc_free(d);
}

// Every byte 0x01..0x1f, quotes, backslashes, a slash, and UTF-8 of 2, 3 and 4 bytes.
static void nasty_string(char *s, size_t cap) {
  size_t n = 0;
  for (int c = 1; c < 0x20; ++c) s[n++] = (char)c;
  static const char tail[] = "\"quoted\" back\\slash\\\\ / µs ✓ \xf0\x9f\x98\x80 \x7f end";
  cr_assert_lt(n + sizeof(tail), cap);
  memcpy(s + n, tail, sizeof(tail));
}

Test(json, strings_with_quotes_backslashes_and_control_characters_read_back_equal) {
  char s[128];
  nasty_string(s, sizeof(s));
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_kv_string(&d.j, "value", s);
  lw__json_kv_string(&d.j, s, "as a key");
  lw__json_key(&d.j, "list");
  lw__json_begin_array(&d.j);
  lw__json_string(&d.j, s);
  lw__json_string(&d.j, "");
  lw__json_end_array(&d.j);
  lw__json_end_object(&d.j);
  json_t *v = doc_parse(&d, 0);
  cr_assert_str_eq(json_string_value(json_object_get(v, "value")), s);
  cr_assert_str_eq(json_string_value(json_object_get(v, s)), "as a key");
  json_t *list = json_object_get(v, "list");
  cr_assert_eq(json_array_size(list), 2);
  cr_assert_str_eq(json_string_value(json_array_get(list, 0)), s);
  cr_assert_str_eq(json_string_value(json_array_get(list, 1)), "");
  // No raw control character inside the text: all of them went out as \u00XX; only the line
  // end that closes the document remains.
  for (size_t i = 0; i + 1 < d.len; ++i) {
    cr_assert_geq((unsigned char)d.text[i], 0x20, "raw byte 0x%02x at %zu", d.text[i], i);
  }
  cr_assert_eq(d.text[d.len - 1], '\n');
  cr_assert_not_null(strstr(d.text, "\\u001f"), "%s", d.text);
  cr_assert_not_null(strstr(d.text, "µs ✓"), "UTF-8 copied as is: %s", d.text);
  json_decref(v);
  doc_free(&d);
}

Test(json, string_n_stops_at_n_bytes_or_at_a_nul_and_null_writes_null) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_string_n(&d.j, "chip0-garbage", 5);
  char field[8] = {'s', 'u', 'b', '\0', 'x', 'x', 'x', 'x'};
  lw__json_string_n(&d.j, field, sizeof(field));
  lw__json_string_n(&d.j, "abc", 0);
  lw__json_string(&d.j, NULL);
  lw__json_end_array(&d.j);
  json_t *v = doc_parse(&d, 0);
  cr_assert_str_eq(d.text, "[\"chip0\",\"sub\",\"\",null]\n");
  cr_assert(json_is_null(json_array_get(v, 3)));
  json_decref(v);
  doc_free(&d);
}

Test(json, nan_and_infinities_become_null_in_every_number_form) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_kv_double(&d.j, "nan", NAN);
  lw__json_kv_double(&d.j, "inf", INFINITY);
  lw__json_kv_fixed(&d.j, "minus_inf", -INFINITY, 3);
  lw__json_key(&d.j, "digits");
  lw__json_double_digits(&d.j, NAN, 4);
  lw__json_kv_double(&d.j, "finite", 1.5);
  lw__json_end_object(&d.j);
  json_t *v = doc_parse(&d, 0);
  cr_assert_str_eq(d.text,
                   "{\"nan\":null,\"inf\":null,\"minus_inf\":null,\"digits\":null,"
                   "\"finite\":1.5}\n");
  cr_assert(json_is_null(json_object_get(v, "nan")));
  json_decref(v);
  doc_free(&d);
}

// What a bench computes from a failed or empty measurement: 0/0, x/0 and -x/0, written by every
// double writer, in an array and in pretty output (the --json of the tools never says nan).
Test(json, non_finite_results_of_arithmetic_are_null_in_arrays_and_in_pretty_output) {
  volatile double zero = 0.0;
  const double values[] = {zero / zero, 1.0 / zero, -1.0 / zero, -(zero / zero)};
  for (int pretty = 0; pretty < 2; ++pretty) {
    doc_t d;
    doc_open(&d, pretty == 1);
    lw__json_begin_array(&d.j);
    for (size_t i = 0; i < 4; ++i) {
      lw__json_double(&d.j, values[i]);
      lw__json_fixed(&d.j, values[i], 1);
      lw__json_double_digits(&d.j, values[i], 3);
    }
    lw__json_end_array(&d.j);
    json_t *v = doc_parse(&d, 0);
    cr_assert_eq(json_array_size(v), 12);
    for (size_t i = 0; i < 12; ++i) {
      cr_assert(json_is_null(json_array_get(v, i)), "item %zu is not null: %s", i, d.text);
    }
    cr_assert_null(strstr(d.text, "nan"), "%s", d.text);
    cr_assert_null(strstr(d.text, "inf"), "%s", d.text);
    json_decref(v);
    doc_free(&d);
  }
}

Test(json, int64_limits_and_uint64_max_are_written_exactly) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_int(&d.j, INT64_MIN);
  lw__json_int(&d.j, INT64_MAX);
  lw__json_int(&d.j, 0);
  lw__json_uint(&d.j, UINT64_MAX);
  lw__json_end_array(&d.j);
  cr_assert_eq(doc_close(&d), LW_OK, "%s", d.err.message);
  cr_assert_str_eq(d.text,
                   "[-9223372036854775808,9223372036854775807,0,18446744073709551615]\n");
  // jansson's integers are int64: it reads the first three exactly and refuses UINT64_MAX as
  // too big, so that one is read back with strtoull.
  json_error_t e;
  json_t *v = json_loads(d.text, 0, &e);
  cr_assert_null(v, "UINT64_MAX fits no jansson integer; jansson read it anyway");
  cr_assert_not_null(strstr(e.text, "too big"), "%s", e.text);
  char *last = strrchr(d.text, ',') + 1;
  cr_assert_eq(strtoull(last, NULL, 10), UINT64_MAX);
  strcpy(strrchr(d.text, ','), "]");  // the first three alone
  v = json_loads(d.text, 0, &e);
  cr_assert_not_null(v, "%s", e.text);
  cr_assert_eq(json_integer_value(json_array_get(v, 0)), INT64_MIN);
  cr_assert_eq(json_integer_value(json_array_get(v, 1)), INT64_MAX);
  json_decref(v);
  doc_free(&d);
}

Test(json, doubles_read_back_equal) {
  static const double values[] = {0.1, 1.0 / 3.0, -2.5e-300, DBL_MAX, DBL_MIN, 123456789.125,
                                  -0.0, 3.0};
  enum { N = sizeof(values) / sizeof(values[0]) };
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  for (size_t i = 0; i < N; ++i) lw__json_double(&d.j, values[i]);
  lw__json_end_array(&d.j);
  json_t *v = doc_parse(&d, 0);
  cr_assert_eq(json_array_size(v), N);
  for (size_t i = 0; i < N; ++i) {
    double got = json_number_value(json_array_get(v, i));
    cr_assert(got == values[i], "value %zu: wrote %.17g, read %.17g (%s)", i, values[i], got,
              d.text);
  }
  json_decref(v);
  doc_free(&d);
}

Test(json, fixed_writes_the_asked_decimals_and_digits_the_asked_significant_digits) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_fixed(&d.j, 12.3456, 3);
  lw__json_fixed(&d.j, 1.0, 3);
  lw__json_fixed(&d.j, -2.5, 3);
  lw__json_fixed(&d.j, 1700000000123.4567, 3);
  lw__json_fixed(&d.j, 7.6, 0);
  lw__json_double_digits(&d.j, 1.23456e-7, 4);
  lw__json_double_digits(&d.j, 0.0, 4);
  lw__json_end_array(&d.j);
  json_t *v = doc_parse(&d, 0);
  cr_assert_str_eq(d.text, "[12.346,1.000,-2.500,1700000000123.457,8,1.235e-07,0]\n");
  cr_assert(json_number_value(json_array_get(v, 0)) == 12.346);
  json_decref(v);
  doc_free(&d);
}

// The expected compact text of build_nested.
static const char kNested[] =
    "{\"empty_object\":{},\"empty_array\":[],\"rows\":[{\"delay_ms\":0,\"ok\":true},"
    "{\"delay_ms\":2,\"ok\":false,\"why\":null}],\"deep\":[[[]],[{}]],\"last\":-1}\n";

static void build_nested(lw_json_t *j) {
  lw__json_begin_object(j);
  lw__json_key(j, "empty_object");
  lw__json_begin_object(j);
  lw__json_end_object(j);
  lw__json_key(j, "empty_array");
  lw__json_begin_array(j);
  lw__json_end_array(j);
  lw__json_key(j, "rows");
  lw__json_begin_array(j);
  for (int i = 0; i < 2; ++i) {
    lw__json_begin_object(j);
    lw__json_kv_int(j, "delay_ms", 2 * i);
    lw__json_kv_bool(j, "ok", i == 0);
    if (i == 1) {
      lw__json_key(j, "why");
      lw__json_null(j);
    }
    lw__json_end_object(j);
  }
  lw__json_end_array(j);
  lw__json_key(j, "deep");
  lw__json_begin_array(j);
  lw__json_begin_array(j);
  lw__json_begin_array(j);
  lw__json_end_array(j);
  lw__json_end_array(j);
  lw__json_begin_array(j);
  lw__json_begin_object(j);
  lw__json_end_object(j);
  lw__json_end_array(j);
  lw__json_end_array(j);
  lw__json_kv_int(j, "last", -1);
  lw__json_end_object(j);
}

Test(json, nesting_places_every_comma_and_colon_in_compact_output) {
  doc_t d;
  doc_open(&d, false);
  build_nested(&d.j);
  json_t *v = doc_parse(&d, JSON_REJECT_DUPLICATES);
  cr_assert_str_eq(d.text, kNested);
  json_t *rows = json_object_get(v, "rows");
  cr_assert_eq(json_array_size(rows), 2);
  cr_assert_eq(json_integer_value(json_object_get(json_array_get(rows, 1), "delay_ms")), 2);
  json_decref(v);
  doc_free(&d);
}

Test(json, pretty_output_indents_and_reads_back_equal_to_compact) {
  doc_t pretty, compact;
  doc_open(&pretty, true);
  build_nested(&pretty.j);
  doc_open(&compact, false);
  build_nested(&compact.j);
  json_t *p = doc_parse(&pretty, JSON_REJECT_DUPLICATES);
  json_t *c = doc_parse(&compact, JSON_REJECT_DUPLICATES);
  cr_assert(json_equal(p, c), "pretty: %s\ncompact: %s", pretty.text, compact.text);
  cr_assert_str_eq(pretty.text,
                   "{\n"
                   "  \"empty_object\": {},\n"
                   "  \"empty_array\": [],\n"
                   "  \"rows\": [\n"
                   "    {\n"
                   "      \"delay_ms\": 0,\n"
                   "      \"ok\": true\n"
                   "    },\n"
                   "    {\n"
                   "      \"delay_ms\": 2,\n"
                   "      \"ok\": false,\n"
                   "      \"why\": null\n"
                   "    }\n"
                   "  ],\n"
                   "  \"deep\": [\n"
                   "    [\n"
                   "      []\n"
                   "    ],\n"
                   "    [\n"
                   "      {}\n"
                   "    ]\n"
                   "  ],\n"
                   "  \"last\": -1\n"
                   "}\n");
  json_decref(p);
  json_decref(c);
  doc_free(&pretty);
  doc_free(&compact);
}

Test(json, a_top_level_scalar_is_a_whole_document) {
  doc_t d;
  doc_open(&d, false);
  lw__json_string(&d.j, "alone");
  json_t *v = doc_parse(&d, 0);
  cr_assert_str_eq(d.text, "\"alone\"\n");
  json_decref(v);
  doc_free(&d);
}

Test(json, the_deepest_allowed_nesting_is_written_and_reads_back) {
  doc_t d;
  doc_open(&d, false);
  for (int i = 0; i < LW_JSON_MAX_DEPTH; ++i) lw__json_begin_array(&d.j);
  lw__json_int(&d.j, 7);
  for (int i = 0; i < LW_JSON_MAX_DEPTH; ++i) lw__json_end_array(&d.j);
  json_t *v = doc_parse(&d, 0);
  json_t *x = v;
  for (int i = 1; i < LW_JSON_MAX_DEPTH; ++i) x = json_array_get(x, 0);
  cr_assert_eq(json_integer_value(json_array_get(x, 0)), 7);
  json_decref(v);
  doc_free(&d);
}

Test(json, a_value_without_a_key_in_an_object_is_reported_and_ends_the_output) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_kv_int(&d.j, "a", 1);
  lw__json_int(&d.j, 2);  // no key
  lw__json_kv_int(&d.j, "b", 3);
  lw__json_end_object(&d.j);
  expect_misuse(&d, "a value in an object without a key", "{\"a\":1");
}

Test(json, a_key_in_an_array_is_reported_and_ends_the_output) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_int(&d.j, 1);
  lw__json_key(&d.j, "k");
  lw__json_int(&d.j, 2);
  lw__json_end_array(&d.j);
  expect_misuse(&d, "lw__json_key outside an object", "[1");
}

Test(json, a_key_after_a_key_is_reported) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_key(&d.j, "a");
  lw__json_key(&d.j, "b");
  lw__json_int(&d.j, 1);
  lw__json_end_object(&d.j);
  expect_misuse(&d, "lw__json_key after a key without its value", "{\"a\":");
}

Test(json, an_end_that_does_not_match_its_begin_is_reported) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_end_object(&d.j);
  lw__json_end_array(&d.j);
  expect_misuse(&d, "lw__json_end_object closes an array", "[");
}

Test(json, an_end_with_nothing_open_is_reported) {
  doc_t d;
  doc_open(&d, false);
  lw__json_end_array(&d.j);
  expect_misuse(&d, "lw__json_end_array with no container open", "");
}

Test(json, an_object_ended_after_a_key_without_its_value_is_reported) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_key(&d.j, "orphan");
  lw__json_end_object(&d.j);
  expect_misuse(&d, "after a key without its value", "{\"orphan\":");
}

Test(json, an_unclosed_container_is_reported_by_finish) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_key(&d.j, "rows");
  lw__json_begin_array(&d.j);
  lw__json_int(&d.j, 1);
  expect_misuse(&d, "an array was not closed (2 containers open)", "{\"rows\":[1");
}

Test(json, nesting_deeper_than_the_limit_is_reported_and_writes_nothing_more) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_int(&d.j, 0);
  for (int i = 1; i < LW_JSON_MAX_DEPTH; ++i) lw__json_begin_array(&d.j);
  lw__json_int(&d.j, 1);
  lw__json_begin_array(&d.j);  // level 33: refused before its comma is written
  for (int i = 0; i <= LW_JSON_MAX_DEPTH; ++i) lw__json_end_array(&d.j);
  char written[64] = "[0,";
  size_t n = strlen(written);
  for (int i = 1; i < LW_JSON_MAX_DEPTH; ++i) written[n++] = '[';
  strcpy(written + n, "1");
  expect_misuse(&d, "more than LW_JSON_MAX_DEPTH (32) nested containers", written);
}

Test(json, a_second_top_level_value_is_reported) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_object(&d.j);
  lw__json_end_object(&d.j);
  lw__json_begin_object(&d.j);
  lw__json_end_object(&d.j);
  expect_misuse(&d, "a second value at the top level", "{}\n");
}

Test(json, finishing_without_any_value_is_reported) {
  doc_t d;
  doc_open(&d, false);
  expect_misuse(&d, "no value was written", "");
}

Test(json, decimals_or_digits_out_of_range_are_reported) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_fixed(&d.j, 1.0, -1);
  lw__json_end_array(&d.j);
  expect_misuse(&d, "lw__json_fixed with decimals outside 0..17", "[");
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_double_digits(&d.j, 1.0, 18);
  lw__json_end_array(&d.j);
  expect_misuse(&d, "lw__json_double_digits with digits outside 1..17", "[");
}

Test(json, a_null_err_is_allowed_and_the_status_still_says_what_happened) {
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  cr_assert_eq(lw__json_finish(&d.j, NULL), LW_INTERNAL);
  fclose(d.f);
  doc_free(&d);
}

// /dev/full accepts the open and fails every write with ENOSPC.
static void expect_write_error(size_t filler) {
  FILE *f = fopen("/dev/full", "w");
  cr_assert_not_null(f, "/dev/full: %s", strerror(errno));
  lw_json_t j;
  lw__json_initialize(&j, f, false);
  lw__json_begin_object(&j);
  char *big = malloc(filler + 1);
  cr_assert_not_null(big);
  memset(big, 'x', filler);
  big[filler] = '\0';
  lw__json_kv_string(&j, "filler", big);
  free(big);
  lw__json_kv_int(&j, "n", 1);
  lw__json_end_object(&j);
  lw_error_t err;
  lw_status_t st = lw__json_finish(&j, &err);
  cr_assert_eq(st, LW_UNAVAILABLE, "status %s: %s", lw_status_name(st), err.message);
  cr_assert_eq(strncmp(err.message, "json: write failed", 18), 0, "%s", err.message);
  fclose(f);
}

Test(json, a_write_error_found_by_the_final_flush_is_reported) {
  expect_write_error(10);
}

Test(json, a_write_error_during_a_long_document_is_reported) {
  // Larger than any stdio buffer, so the stream fails while the document is still written.
  expect_write_error(1 << 20);
}

// Builds a decimal-comma locale (de_DE) in dir with localedef; false where the machine lacks
// localedef or the locale sources.
static bool make_decimal_comma_locale(const char *dir) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    char out[256];
    snprintf(out, sizeof(out), "%s/de_DE.UTF-8", dir);
    execlp("localedef", "localedef", "-i", "de_DE", "-f", "UTF-8", out, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

Test(json, numbers_use_a_decimal_point_under_a_decimal_comma_locale, .timeout = 120) {
  char dir[] = "/tmp/lw_json_locale_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  bool made = make_decimal_comma_locale(dir);
  setenv("LOCPATH", dir, 1);
  const char *set = made ? setlocale(LC_NUMERIC, "de_DE.UTF-8") : NULL;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (!set) {
    cr_assert_eq(system(cmd), 0);
    cr_skip("no decimal-comma locale could be built here (localedef or its sources)");
  }
  char probe[16];
  snprintf(probe, sizeof(probe), "%.1f", 1.5);
  cr_assert_str_eq(probe, "1,5", "the locale under test writes a decimal comma");
  doc_t d;
  doc_open(&d, false);
  lw__json_begin_array(&d.j);
  lw__json_double(&d.j, 1.5);
  lw__json_fixed(&d.j, 2.25, 2);
  lw__json_double_digits(&d.j, 1.5e-7, 2);
  lw__json_end_array(&d.j);
  json_t *v = doc_parse(&d, 0);
  setlocale(LC_NUMERIC, "C");
  cr_assert_eq(system(cmd), 0);
  cr_assert_str_eq(d.text, "[1.5,2.25,1.5e-07]\n");
  json_decref(v);
  doc_free(&d);
}
