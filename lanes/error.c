// lanes/error.c — lw_error_t records, status names and the thread-local last error.
#include "lanes/error.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

// The last error of a failing sync call on this thread. Starts as {LW_OK, -1, 0, ""}.
static _Thread_local lw_error_t last_error = {LW_OK, -1, 0, {0}};

static const char *const status_names[LW_STATUS_COUNT_] = {
    [LW_OK] = "LW_OK",
    [LW_CANCELLED] = "LW_CANCELLED",
    [LW_INVALID_ARGUMENT] = "LW_INVALID_ARGUMENT",
    [LW_NOT_FOUND] = "LW_NOT_FOUND",
    [LW_ALREADY_EXISTS] = "LW_ALREADY_EXISTS",
    [LW_FAILED_PRECONDITION] = "LW_FAILED_PRECONDITION",
    [LW_RESOURCE_EXHAUSTED] = "LW_RESOURCE_EXHAUSTED",
    [LW_DEADLINE_EXCEEDED] = "LW_DEADLINE_EXCEEDED",
    [LW_TASK_FAILED] = "LW_TASK_FAILED",
    [LW_CHILD_EXITED] = "LW_CHILD_EXITED",
    [LW_POISONED] = "LW_POISONED",
    [LW_UNAVAILABLE] = "LW_UNAVAILABLE",
    [LW_INTERNAL] = "LW_INTERNAL",
};

const char *lw_status_name(lw_status_t status) {
  // Compare as unsigned so that a negative value read from untrusted memory is unknown too.
  if ((uint32_t)status >= (uint32_t)LW_STATUS_COUNT_) return "LW_UNKNOWN";
  return status_names[status];
}

const lw_error_t *lw_last_error(void) { return &last_error; }

lw_status_t lw__sized_struct_check(const char *what, uint32_t struct_size, size_t min_bytes,
                                   size_t full_bytes) {
  if (struct_size >= min_bytes) return LW_OK;
  return lw__fail(LW_INVALID_ARGUMENT,
                  "%s: struct_size %u is too small (at least %zu; set it to sizeof, %zu in this "
                  "library)",
                  what, struct_size, min_bytes, full_bytes);
}

void lw__sized_struct_copy(void *out, const void *snapshot, size_t full_bytes) {
  uint32_t caller_size;
  memcpy(&caller_size, out, sizeof(caller_size));
  // A caller built against a shorter struct gets its prefix; its memory past that is its own.
  size_t n = caller_size < full_bytes ? caller_size : full_bytes;
  memcpy(out, snapshot, n);
  memcpy(out, &caller_size, sizeof(caller_size));
}

lw_status_t lw__sized_config_read(const char *what, const void *in, size_t min_bytes,
                                  size_t full_bytes, void *out, lw_error_t *err) {
  uint32_t size;
  memcpy(&size, in, sizeof(size));
  if (size == 0 || size > LW__SIZED_CONFIG_MAX_BYTES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "%s: struct_size %u is not the size of any version of it (%zu in this "
                         "library); start from %.*s_default()",
                         what, size, full_bytes, (int)(strlen(what) - 2), what);
  }
  if (size < min_bytes) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "%s: struct_size %u is too small (at least %zu; %zu in this library)",
                         what, size, min_bytes, full_bytes);
  }
  if (size > full_bytes) {
    // A newer program's struct: the fields past ours must be at their defaults (zero), or it
    // asks for something this library cannot do.
    const unsigned char *tail = (const unsigned char *)in;
    for (size_t i = full_bytes; i < size; ++i) {
      if (tail[i] != 0) {
        return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                             "%s: struct_size %u is larger than this library's %zu and byte %zu "
                             "is not 0: a field this library does not know is set",
                             what, size, full_bytes, i);
      }
    }
  }
  memcpy(out, in, size < full_bytes ? size : full_bytes);
  uint32_t full = (uint32_t)full_bytes;
  memcpy(out, &full, sizeof(full));
  return LW_OK;
}

void lw__sized_config_fill(void *out, uint32_t struct_size, const void *defaults,
                           size_t full_bytes) {
  size_t n = struct_size < full_bytes ? struct_size : full_bytes;
  memcpy(out, defaults, n);
  // Fields of a newer program that this library does not know: 0 is their default.
  if (struct_size > full_bytes) {
    memset((unsigned char *)out + full_bytes, 0, struct_size - full_bytes);
  }
  if (struct_size >= sizeof(uint32_t)) memcpy(out, &struct_size, sizeof(struct_size));
}

void lw__error_clear(lw_error_t *err) {
  if (err == NULL) return;
  err->code = LW_OK;
  err->worker_id = -1;
  err->task_id = 0;
  memset(err->message, 0, sizeof(err->message));
}

// What a cut message ends with: "…" (U+2026) in UTF-8.
static const char kEllipsis[] = "\xE2\x80\xA6";
#define ELLIPSIS_BYTES (sizeof(kEllipsis) - 1)
// How far back from the cut a word boundary is looked for; a longer word (a path, a hex
// dump) is cut inside, since dropping it whole would drop what the message is about.
#define WORD_LOOKBACK (LW_ERROR_MESSAGE_BYTES / 4)

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// msg holds the first size - 1 bytes of a longer text (vsnprintf's cut). Ends it with "…"
// after the last whole word that fits with it: its first `limit` bytes are all that may stay,
// and msg[limit] (still the text's own byte) tells whether the text breaks there.
static void cut_on_a_word(char *msg, size_t size) {
  size_t limit = size - 1 - ELLIPSIS_BYTES;
  size_t at = limit;
  while (at > 0 && limit - at < WORD_LOOKBACK && !is_space(msg[at])) --at;
  if (!is_space(msg[at])) {
    // One word longer than the lookback: cut it, but not inside a UTF-8 character (msg[at] is
    // the first byte dropped; a continuation byte there means its character started before).
    at = limit;
    while (at > 0 && ((unsigned char)msg[at] & 0xC0u) == 0x80u) --at;
  }
  while (at > 0 && is_space(msg[at - 1])) --at;
  memcpy(msg + at, kEllipsis, ELLIPSIS_BYTES + 1);
}

static void error_vset(lw_error_t *err, lw_status_t code, int32_t worker_id, uint64_t task_id,
                       const char *fmt, va_list ap) {
  err->code = code;
  err->worker_id = worker_id;
  err->task_id = task_id;
  // vsnprintf never writes past the buffer and always terminates it; a longer message is cut
  // after a whole word and marked with "…", so a reader sees that something is missing.
  int n = vsnprintf(err->message, sizeof(err->message), fmt != NULL ? fmt : "", ap);
  if (n < 0) {
    err->message[0] = '\0';  // an encoding error leaves the contents unspecified
  } else if ((size_t)n >= sizeof(err->message)) {
    cut_on_a_word(err->message, sizeof(err->message));
  }
}

lw_status_t lw__error_set(lw_error_t *err, lw_status_t code, int32_t worker_id, uint64_t task_id,
                          const char *fmt, ...) {
  if (err == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  error_vset(err, code, worker_id, task_id, fmt, ap);
  va_end(ap);
  return code;
}

lw_status_t lw__last_error_store(const lw_error_t *err) {
  if (err == NULL) return LW_OK;
  // Copying onto itself (err == lw_last_error()) is harmless with memmove.
  memmove(&last_error, err, sizeof(last_error));
  last_error.message[sizeof(last_error.message) - 1] = '\0';
  return last_error.code;
}

lw_status_t lw__fail(lw_status_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_vset(&last_error, code, -1, 0, fmt, ap);
  va_end(ap);
  return code;
}
