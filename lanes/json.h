// lanes/json.h — a small streaming JSON writer: the one place the library and its tools write
// JSON (traces, bench results, `lanework info --json`). It writes to a FILE * as it goes,
// keeps the nesting itself (so commas and colons are never hand-placed), escapes every string
// (quotes, backslashes, control characters as \u00XX; bytes >= 0x80 pass through, so valid
// UTF-8 stays valid), and never prints a non-finite number: NaN and +-inf become null.
//
// Use: lw__json_begin_object(j) ... lw__json_key(j, "n"); lw__json_uint(j, 3); ...
// lw__json_end_object(j). Inside an object every value is preceded by a key; the writer
// checks the grammar (a value where a key is due, a key outside an object, an end that does
// not match its begin, more than LW_JSON_MAX_DEPTH levels, a second value at the top level) and
// remembers the first misuse: lw__json_finish reports it (INTERNAL "json: ...") and also
// reports a write error of the stream (UNAVAILABLE "json: write failed"). After a misuse the
// writer writes nothing more. The writer writes one JSON text: when its top-level value is
// complete it ends the line with '\n' (so `--json` output is one line, and a file ends with a
// newline).
//
// Lifecycle: initialize (on a caller-owned struct) -> writes -> finish. Thread safety: one
// thread at a time per writer. Numbers: integers exactly; doubles with lw__json_double's
// precision (%.*g, 17 significant digits by default, so a double reads back equal; fewer with
// lw__json_double_digits) or a fixed number of decimals with lw__json_fixed (timestamps in µs
// with 3 decimals). Numbers are formatted in the "C" locale whatever setlocale chose, so the
// decimal separator is always '.'.
#ifndef LANEWORK_LANES_JSON_H_
#define LANEWORK_LANES_JSON_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_JSON_MAX_DEPTH 32

typedef struct lw_json {
  FILE *out;
  int depth;                           // open containers
  bool in_object[LW_JSON_MAX_DEPTH];   // per level: object (true) or array (false)
  bool has_items[LW_JSON_MAX_DEPTH];   // per level: a comma is due before the next item
  bool key_pending;                    // a key was written; its value is due
  bool pretty;                         // newline + two-space indent per level
  bool done;                           // the top-level value is complete
  const char *misuse;                  // the first grammar error, NULL while none
} lw_json_t;

// pretty: indent nested containers (human-facing output); false: one line.
void lw__json_initialize(lw_json_t *j, FILE *out, bool pretty);

void lw__json_begin_object(lw_json_t *j);
void lw__json_end_object(lw_json_t *j);
void lw__json_begin_array(lw_json_t *j);
void lw__json_end_array(lw_json_t *j);
// The key of the next value (only inside an object). Escaped like a string.
void lw__json_key(lw_json_t *j, const char *key);

void lw__json_string(lw_json_t *j, const char *s);   // NULL writes null
// At most n bytes of s (stops early at a NUL): names copied from fixed-size fields.
void lw__json_string_n(lw_json_t *j, const char *s, size_t n);
void lw__json_int(lw_json_t *j, int64_t v);
void lw__json_uint(lw_json_t *j, uint64_t v);
void lw__json_double(lw_json_t *j, double v);                  // non-finite: null
// %.{digits}g (digits 1..17, else a misuse): a figure that means only a few digits, written
// short. Non-finite: null.
void lw__json_double_digits(lw_json_t *j, double v, int digits);
// %.{decimals}f (decimals 0..17, else a misuse); non-finite: null.
void lw__json_fixed(lw_json_t *j, double v, int decimals);
void lw__json_bool(lw_json_t *j, bool v);
void lw__json_null(lw_json_t *j);

// Key + value in one call, for the common case.
void lw__json_kv_string(lw_json_t *j, const char *key, const char *s);
void lw__json_kv_int(lw_json_t *j, const char *key, int64_t v);
void lw__json_kv_uint(lw_json_t *j, const char *key, uint64_t v);
void lw__json_kv_double(lw_json_t *j, const char *key, double v);
void lw__json_kv_fixed(lw_json_t *j, const char *key, double v, int decimals);
void lw__json_kv_bool(lw_json_t *j, const char *key, bool v);

// Checks that every container was closed and that a value was written, flushes (also after a
// misuse, so what came before it is not lost), and reports the first misuse (INTERNAL, naming
// it) or a write error (UNAVAILABLE). LW_OK otherwise. Does not close the stream.
LW_MUST_USE lw_status_t lw__json_finish(lw_json_t *j, lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_JSON_H_
