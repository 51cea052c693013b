// tests/trace_capture_util.h — hand-made trace captures (lanes/trace.h) for tests of what is
// computed from recorded events (containment, the overlap proof): a few tracks and spans
// written by hand, no session and no timing. Used by tests/lanes/test_trace.c and
// tests/tools/test_overlap_proof.c.
#ifndef LANEWORK_TESTS_TRACE_CAPTURE_UTIL_H_
#define LANEWORK_TESTS_TRACE_CAPTURE_UTIL_H_

#include <criterion/criterion.h>
#include <string.h>

#include "lanes/trace.h"

#define TC_MAX_RECORDS 8
#define TC_MAX_TRACKS 4

typedef struct tc_hand {
  lw_trace_capture_t c;
  lw_trace_record_t rec[TC_MAX_RECORDS];
  lw_trace_track_t tracks[TC_MAX_TRACKS];
} tc_hand_t;

// An empty capture over the n given tracks.
static inline void tc_hand_init(tc_hand_t *h, const lw_trace_track_t *tracks, size_t n) {
  cr_assert_leq(n, TC_MAX_TRACKS);
  memset(h, 0, sizeof(*h));
  h->c.rec = h->rec;
  h->c.tracks = h->tracks;
  memcpy(h->tracks, tracks, n * sizeof(*tracks));
  h->c.n_tracks = n;
}

// Appends a span [a, b) of kind on track and chip, named name (NULL: no name); returns it.
static inline lw_trace_record_t *tc_hand_span(tc_hand_t *h, uint32_t track, lw_trace_kind_t kind,
                                              int16_t chip, int64_t a, int64_t b,
                                              const char *name) {
  cr_assert_lt(h->c.n, TC_MAX_RECORDS);
  lw_trace_record_t *r = &h->rec[h->c.n++];
  memset(r, 0, sizeof(*r));
  r->ev.kind = (uint16_t)kind;
  r->ev.chip = chip;
  r->ev.ts_ns = a;
  r->ev.dur_ns = b - a;
  // Cut at the event's room as the recorder cuts it (the record is zeroed: NUL-terminated).
  if (name) memcpy(r->ev.name, name, strnlen(name, sizeof(r->ev.name) - 1));
  r->track = track;
  return r;
}

#endif  // LANEWORK_TESTS_TRACE_CAPTURE_UTIL_H_
