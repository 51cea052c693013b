// lanes/json.c — see json.h.
#include "lanes/json.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "lanes/error.h"

void lw__json_initialize(lw_json_t *j, FILE *out, bool pretty) {
  memset(j, 0, sizeof(*j));
  j->out = out;
  j->pretty = pretty;
}

// Remembers the first misuse only: later calls are usually consequences of the first one, and
// the first is what the caller has to fix.
static void misuse(lw_json_t *j, const char *what) {
  if (!j->misuse) j->misuse = what;
}

static void put_raw(lw_json_t *j, const char *s, size_t n) {
  if (n > 0) fwrite(s, 1, n, j->out);
}

static void put_str(lw_json_t *j, const char *s) { put_raw(j, s, strlen(s)); }

// Pretty output starts every item of a container on its own line, indented by its level.
static void newline_indent(lw_json_t *j, int level) {
  if (!j->pretty) return;
  fputc('\n', j->out);
  for (int i = 0; i < level; ++i) put_raw(j, "  ", 2);
}

// Everything a value needs before its first byte: the grammar check, and inside an array the
// comma and the line break. Inside an object the key already wrote them (and the colon).
// Returns false when the value must not be written.
static bool value_begin(lw_json_t *j) {
  if (j->misuse) return false;
  if (j->depth == 0) {
    if (j->done) {
      misuse(j, "a second value at the top level");
      return false;
    }
    return true;
  }
  int top = j->depth - 1;
  if (j->in_object[top]) {
    if (!j->key_pending) {
      misuse(j, "a value in an object without a key");
      return false;
    }
    j->key_pending = false;
    return true;
  }
  if (j->has_items[top]) fputc(',', j->out);
  j->has_items[top] = true;
  newline_indent(j, j->depth);
  return true;
}

// A scalar at the top level is the whole text; it ends the line like a closed container does.
static void value_end(lw_json_t *j) {
  if (j->depth == 0) {
    j->done = true;
    fputc('\n', j->out);
  }
}

// Writes s (at most n bytes, stopping at a NUL) as a JSON string. Runs of bytes that need no
// escape go out in one fwrite. Bytes >= 0x80 are copied, so UTF-8 stays as it was.
static void put_escaped(lw_json_t *j, const char *s, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  fputc('"', j->out);
  size_t run = 0;  // start of the bytes not written yet
  size_t i = 0;
  for (; i < n && s[i] != '\0'; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    put_raw(j, s + run, i - run);
    run = i + 1;
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      put_raw(j, esc, 2);
    } else {
      char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      put_raw(j, esc, 6);
    }
  }
  put_raw(j, s + run, i - run);
  fputc('"', j->out);
}

// Numbers are formatted in the "C" locale whatever the process chose with setlocale: a
// program that sets LC_NUMERIC to a locale with a decimal comma would otherwise get "1,5",
// which is not JSON. uselocale changes only the calling thread, so other threads are not
// affected; the locale object is made once and kept for the life of the process.
static locale_t c_numeric;
static pthread_once_t c_numeric_once = PTHREAD_ONCE_INIT;

static void c_numeric_create(void) { c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static void put_double(lw_json_t *j, const char *fmt, int precision, double v) {
  pthread_once(&c_numeric_once, c_numeric_create);
  // Without the locale object (newlocale failed for lack of memory) the thread's own locale
  // is used: right for every program that never called setlocale.
  locale_t old = c_numeric ? uselocale(c_numeric) : (locale_t)0;
  fprintf(j->out, fmt, precision, v);
  if (old) uselocale(old);
}

static void container_begin(lw_json_t *j, bool object) {
  // Checked before value_begin, which may already write a comma.
  if (j->depth == LW_JSON_MAX_DEPTH) {
    misuse(j, "more than LW_JSON_MAX_DEPTH (32) nested containers");
    return;
  }
  if (!value_begin(j)) return;
  fputc(object ? '{' : '[', j->out);
  j->in_object[j->depth] = object;
  j->has_items[j->depth] = false;
  ++j->depth;
}

static void container_end(lw_json_t *j, bool object) {
  if (j->misuse) return;
  if (j->depth == 0) {
    misuse(j, object ? "lw__json_end_object with no container open"
                     : "lw__json_end_array with no container open");
    return;
  }
  int top = j->depth - 1;
  if (j->in_object[top] != object) {
    misuse(j, object ? "lw__json_end_object closes an array"
                     : "lw__json_end_array closes an object");
    return;
  }
  if (j->key_pending) {
    misuse(j, "lw__json_end_object after a key without its value");
    return;
  }
  // An empty container stays on one line: {} and [].
  if (j->has_items[top]) newline_indent(j, top);
  fputc(object ? '}' : ']', j->out);
  --j->depth;
  value_end(j);
}

void lw__json_begin_object(lw_json_t *j) { container_begin(j, true); }
void lw__json_end_object(lw_json_t *j) { container_end(j, true); }
void lw__json_begin_array(lw_json_t *j) { container_begin(j, false); }
void lw__json_end_array(lw_json_t *j) { container_end(j, false); }

void lw__json_key(lw_json_t *j, const char *key) {
  if (j->misuse) return;
  if (j->depth == 0 || !j->in_object[j->depth - 1]) {
    misuse(j, "lw__json_key outside an object");
    return;
  }
  if (j->key_pending) {
    misuse(j, "lw__json_key after a key without its value");
    return;
  }
  if (!key) {
    misuse(j, "lw__json_key with a NULL key");
    return;
  }
  int top = j->depth - 1;
  if (j->has_items[top]) fputc(',', j->out);
  j->has_items[top] = true;
  newline_indent(j, j->depth);
  put_escaped(j, key, SIZE_MAX);
  put_str(j, j->pretty ? ": " : ":");
  j->key_pending = true;
}

void lw__json_string_n(lw_json_t *j, const char *s, size_t n) {
  if (!value_begin(j)) return;
  if (s) {
    put_escaped(j, s, n);
  } else {
    put_str(j, "null");
  }
  value_end(j);
}

void lw__json_string(lw_json_t *j, const char *s) { lw__json_string_n(j, s, SIZE_MAX); }

void lw__json_int(lw_json_t *j, int64_t v) {
  if (!value_begin(j)) return;
  fprintf(j->out, "%" PRId64, v);
  value_end(j);
}

void lw__json_uint(lw_json_t *j, uint64_t v) {
  if (!value_begin(j)) return;
  fprintf(j->out, "%" PRIu64, v);
  value_end(j);
}

void lw__json_double_digits(lw_json_t *j, double v, int digits) {
  if (digits < 1 || digits > 17) {
    misuse(j, "lw__json_double_digits with digits outside 1..17");
    return;
  }
  if (!value_begin(j)) return;
  if (isfinite(v)) {
    put_double(j, "%.*g", digits, v);
  } else {
    put_str(j, "null");
  }
  value_end(j);
}

void lw__json_double(lw_json_t *j, double v) { lw__json_double_digits(j, v, 17); }

void lw__json_fixed(lw_json_t *j, double v, int decimals) {
  if (decimals < 0 || decimals > 17) {
    misuse(j, "lw__json_fixed with decimals outside 0..17");
    return;
  }
  if (!value_begin(j)) return;
  if (isfinite(v)) {
    put_double(j, "%.*f", decimals, v);
  } else {
    put_str(j, "null");
  }
  value_end(j);
}

void lw__json_bool(lw_json_t *j, bool v) {
  if (!value_begin(j)) return;
  put_str(j, v ? "true" : "false");
  value_end(j);
}

void lw__json_null(lw_json_t *j) {
  if (!value_begin(j)) return;
  put_str(j, "null");
  value_end(j);
}

void lw__json_kv_string(lw_json_t *j, const char *key, const char *s) {
  lw__json_key(j, key);
  lw__json_string(j, s);
}

void lw__json_kv_int(lw_json_t *j, const char *key, int64_t v) {
  lw__json_key(j, key);
  lw__json_int(j, v);
}

void lw__json_kv_uint(lw_json_t *j, const char *key, uint64_t v) {
  lw__json_key(j, key);
  lw__json_uint(j, v);
}

void lw__json_kv_double(lw_json_t *j, const char *key, double v) {
  lw__json_key(j, key);
  lw__json_double(j, v);
}

void lw__json_kv_fixed(lw_json_t *j, const char *key, double v, int decimals) {
  lw__json_key(j, key);
  lw__json_fixed(j, v, decimals);
}

void lw__json_kv_bool(lw_json_t *j, const char *key, bool v) {
  lw__json_key(j, key);
  lw__json_bool(j, v);
}

lw_status_t lw__json_finish(lw_json_t *j, lw_error_t *err) {
  if (!j->misuse && j->depth > 0) {
    misuse(j, j->in_object[j->depth - 1] ? "an object was not closed"
                                         : "an array was not closed");
  }
  if (!j->misuse && !j->done) misuse(j, "no value was written");
  // Flush even after a misuse, so what was written before it reaches the stream.
  errno = 0;
  int flushed = fflush(j->out);
  int flush_errno = errno;
  if (j->misuse) {
    return lw__error_set(err, LW_INTERNAL, -1, 0, "json: %s (%d container%s open)", j->misuse,
                         j->depth, j->depth == 1 ? "" : "s");
  }
  if (flushed != 0 || ferror(j->out)) {
    // A failure during an earlier buffered write leaves only the stream's error flag; the
    // errno of that moment is gone, so only a failing flush can say why.
    if (flushed != 0 && flush_errno != 0) {
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "json: write failed: %s",
                           strerror(flush_errno));
    }
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "json: write failed");
  }
  return LW_OK;
}
