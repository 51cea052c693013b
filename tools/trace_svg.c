// tools/trace_svg.c — `lanework trace svg TRACE.json -o OUT.svg`: the swimlane picture of a
// lanework trace (the Chrome Trace Event JSON the recorder writes). One band per process, one
// row per thread track, spans as rectangles coloured by callable, instants as markers, "dep"
// flows as arrows, so a reader sees without any viewer that registers ran beside runs.
// docs/observability.md ("Pictures") describes what the picture shows.
//
// Reading: a trace of a million events is ~170 MB of JSON, and jansson's tree of it takes
// ~2 GB. So the top level is walked here with a small structural scanner and each element of
// "traceEvents" is parsed by jansson on its own, copied into compact records and freed. When
// the scanner or an element parse fails, or no "traceEvents" array turns up, the whole file is
// parsed by jansson once more and its verdict stands: its line/column message is the one
// reported, and should it accept what the scanner did not, the events are taken from its tree,
// so the scanner never decides what is valid JSON or what the document holds.
//
// Exit codes: 0 picture written; 2 bad arguments or a trace that cannot be read (nothing is
// written); 1 the output could not be written (the partial file is removed).
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lanes/error.h"
#include "tools/cli.h"
#include "tools/tool.h"

// ---------------------------------------------------------------------------------------------
// Picture geometry (pixels). A level is one nesting depth of spans inside a row.

#define SVG_DEFAULT_WIDTH 1600
#define SVG_MIN_WIDTH 400
#define SVG_MAX_WIDTH 100000
#define SVG_LEVEL_H 16.0      // one nesting level of a row
#define SVG_ROW_GAP 4.0       // below each row
#define SVG_BAND_HEAD_H 18.0  // the process name line above a band's rows
#define SVG_BAND_GAP 6.0
#define SVG_TOP 76.0           // first band; above: the title lines and the time axis
#define SVG_RIGHT_MARGIN 40.0  // room for the last tick label, centred on the plot's end
#define SVG_CHAR_W_10 6.0      // estimated advance of a 10 px sans-serif character
#define SVG_CHAR_W_11 6.5      // ... of an 11 px one
#define SVG_MAX_LEVELS 8       // deeper spans are drawn on the last level
// Spans narrower than this are merged with their narrow neighbours on the same level into one
// grey run, so the number of shapes follows the picture's width, not the trace's length.
#define SVG_NARROW_PX 0.5
#define SVG_MERGE_GAP_PX 1.0  // narrow spans closer than this join the same run
// Hard caps on shapes, for traces whose rows are so many that merging is not enough.
#define SVG_MAX_RECTS 250000
#define SVG_MAX_ARROWS 20000
#define SVG_MAX_LEGEND 64
#define SVG_FAIL_COLOUR "#d7191c"
#define SVG_CONTROL_COLOUR "#2b5fad"
#define SVG_MERGED_COLOUR "#9a9a9a"

// ---------------------------------------------------------------------------------------------
// The model: what the picture needs of the trace, in compact records. Strings are interned.

enum { HAS_RUN = 1, HAS_TASK = 2, HAS_CHIP = 4, HAS_FRAME = 8 };

typedef struct span {
  double ts, dur;  // µs since the trace's start
  const char *name, *cat, *callable, *status;
  int64_t run, task, chip, frame;
  uint32_t track;
  uint16_t depth;  // nesting depth on its track (0 = outermost)
  uint8_t has;     // HAS_* bits: which of run, task, chip, frame the event carried
} span_t;

typedef struct instant {
  double ts;
  const char *name, *cat, *detail;
  int64_t run, task, chip;
  uint32_t track;
  uint8_t has;
} instant_t;

// One "s", "t" or "f" event; the events of one (name, id) form a chain drawn as arrows.
typedef struct flow_point {
  const char *name, *id;
  double ts;
  uint32_t track;
  char ph;
} flow_point_t;

typedef struct proc {
  int64_t pid;
  const char *name;  // NULL without a process_name record
  int64_t sort_index;
  bool has_sort;
  double first_ts;  // earliest event: orders a respawned chip after the one it replaces
  bool has_ts;
} proc_t;

typedef struct track {
  int64_t pid, tid;
  uint32_t proc;
  const char *name;  // NULL without a thread_name record
  int64_t sort_index;
  bool has_sort;
  // Layout: the track's spans and instants are contiguous after sorting.
  size_t span_first, span_count, inst_first, inst_count;
  uint32_t levels;
  bool shown;
  double y;  // top of the row
} track_t;

typedef struct strtab {
  char **slots;
  size_t cap, count;
} strtab_t;

typedef struct model {
  strtab_t strings;
  proc_t *procs;
  size_t nprocs, procs_cap;
  track_t *tracks;
  size_t ntracks, tracks_cap;
  uint32_t *track_slots;  // open addressing: (pid, tid) -> track index + 1
  size_t slots_cap;
  span_t *spans;
  size_t nspans, spans_cap;
  instant_t *instants;
  size_t ninstants, instants_cap;
  flow_point_t *flows;
  size_t nflows, flows_cap;
  int64_t dropped;  // otherData.dropped_events
  size_t events;    // elements of traceEvents seen
  size_t ignored;   // events of a drawn phase that lacked a field
  char ignored_first[160];
  bool oom;
} model_t;

static void *grow(void *items, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return items;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *p = realloc(items, n * size);
  if (p) *cap = n;
  return p;
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

// The one copy of s, or NULL (and m->oom) when memory ran out.
static const char *intern(model_t *m, const char *s) {
  strtab_t *t = &m->strings;
  if ((t->count + 1) * 2 > t->cap) {
    size_t ncap = t->cap ? t->cap * 2 : 256;
    char **ns = calloc(ncap, sizeof(char *));
    if (!ns) {
      m->oom = true;
      return NULL;
    }
    for (size_t i = 0; i < t->cap; ++i) {
      if (!t->slots[i]) continue;
      size_t j = fnv1a(t->slots[i]) & (ncap - 1);
      while (ns[j]) j = (j + 1) & (ncap - 1);
      ns[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
  }
  size_t j = fnv1a(s) & (t->cap - 1);
  while (t->slots[j]) {
    if (strcmp(t->slots[j], s) == 0) return t->slots[j];
    j = (j + 1) & (t->cap - 1);
  }
  char *c = strdup(s);
  if (!c) {
    m->oom = true;
    return NULL;
  }
  t->slots[j] = c;
  t->count++;
  return c;
}

static void model_deinitialize(model_t *m) {
  for (size_t i = 0; i < m->strings.cap; ++i) free(m->strings.slots[i]);
  free(m->strings.slots);
  free(m->procs);
  free(m->tracks);
  free(m->track_slots);
  free(m->spans);
  free(m->instants);
  free(m->flows);
  memset(m, 0, sizeof(*m));
}

static uint32_t proc_get(model_t *m, int64_t pid) {
  for (size_t i = 0; i < m->nprocs; ++i) {
    if (m->procs[i].pid == pid) return (uint32_t)i;
  }
  proc_t *p = grow(m->procs, &m->procs_cap, m->nprocs + 1, sizeof(*p));
  if (!p) {
    m->oom = true;
    return UINT32_MAX;
  }
  m->procs = p;
  m->procs[m->nprocs] = (proc_t){.pid = pid};
  return (uint32_t)m->nprocs++;
}

static size_t track_hash(int64_t pid, int64_t tid, size_t cap) {
  uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull ^ ((uint64_t)tid + 0x632be59bd9b4e019ull);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return (size_t)h & (cap - 1);
}

// The track of (pid, tid), created (with its process) on first sight; UINT32_MAX on oom.
static uint32_t track_get(model_t *m, int64_t pid, int64_t tid) {
  if (m->slots_cap) {
    for (size_t j = track_hash(pid, tid, m->slots_cap); m->track_slots[j];
         j = (j + 1) & (m->slots_cap - 1)) {
      const track_t *t = &m->tracks[m->track_slots[j] - 1];
      if (t->pid == pid && t->tid == tid) return m->track_slots[j] - 1;
    }
  }
  if ((m->ntracks + 1) * 2 > m->slots_cap) {
    size_t ncap = m->slots_cap ? m->slots_cap * 2 : 64;
    uint32_t *ns = calloc(ncap, sizeof(uint32_t));
    if (!ns) {
      m->oom = true;
      return UINT32_MAX;
    }
    for (size_t i = 0; i < m->ntracks; ++i) {
      size_t j = track_hash(m->tracks[i].pid, m->tracks[i].tid, ncap);
      while (ns[j]) j = (j + 1) & (ncap - 1);
      ns[j] = (uint32_t)i + 1;
    }
    free(m->track_slots);
    m->track_slots = ns;
    m->slots_cap = ncap;
  }
  uint32_t proc = proc_get(m, pid);
  track_t *t = grow(m->tracks, &m->tracks_cap, m->ntracks + 1, sizeof(*t));
  if (proc == UINT32_MAX || !t) {
    if (!t) m->oom = true;
    return UINT32_MAX;
  }
  m->tracks = t;
  m->tracks[m->ntracks] = (track_t){.pid = pid, .tid = tid, .proc = proc};
  size_t j = track_hash(pid, tid, m->slots_cap);
  while (m->track_slots[j]) j = (j + 1) & (m->slots_cap - 1);
  m->track_slots[j] = (uint32_t)m->ntracks + 1;
  return (uint32_t)m->ntracks++;
}

// ---------------------------------------------------------------------------------------------
// One event -> the model.

static void ignore_event(model_t *m, size_t index, const char *ph, const char *why) {
  if (m->ignored++ == 0) {
    snprintf(m->ignored_first, sizeof(m->ignored_first), "event %zu (ph \"%s\"): %s", index, ph,
             why);
  }
}

static bool get_i64(json_t *o, const char *key, int64_t *out) {
  json_t *v = json_object_get(o, key);
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return true;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (isfinite(d) && d == floor(d) && fabs(d) < 9e18) {
      *out = (int64_t)d;
      return true;
    }
  }
  return false;
}

static bool get_num(json_t *o, const char *key, double *out) {
  json_t *v = json_object_get(o, key);
  if (!json_is_number(v)) return false;
  *out = json_number_value(v);
  return isfinite(*out);
}

static const char *get_str(model_t *m, json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? intern(m, s) : NULL;
}

static void note_ts(model_t *m, uint32_t track, double ts) {
  proc_t *p = &m->procs[m->tracks[track].proc];
  if (!p->has_ts || ts < p->first_ts) p->first_ts = ts;
  p->has_ts = true;
}

static void ingest_metadata(model_t *m, json_t *ev, json_t *args, size_t index) {
  const char *name = json_string_value(json_object_get(ev, "name"));
  int64_t pid = 0, tid = 0, sort = 0;
  if (!name) return;
  bool is_process = strncmp(name, "process_", 8) == 0;
  bool is_thread = strncmp(name, "thread_", 7) == 0;
  if (!is_process && !is_thread) return;
  if (!get_i64(ev, "pid", &pid) || (is_thread && !get_i64(ev, "tid", &tid))) {
    ignore_event(m, index, "M", is_thread ? "no integer pid and tid" : "no integer pid");
    return;
  }
  if (strcmp(name, "process_name") == 0 || strcmp(name, "thread_name") == 0) {
    const char *value = get_str(m, args, "name");
    if (!value) {
      ignore_event(m, index, "M", "no args.name");
      return;
    }
    if (is_process) {
      uint32_t p = proc_get(m, pid);
      if (p != UINT32_MAX) m->procs[p].name = value;
    } else {
      uint32_t t = track_get(m, pid, tid);
      if (t != UINT32_MAX) m->tracks[t].name = value;
    }
  } else if (strcmp(name, "process_sort_index") == 0 || strcmp(name, "thread_sort_index") == 0) {
    if (!get_i64(args, "sort_index", &sort)) {
      ignore_event(m, index, "M", "no integer args.sort_index");
      return;
    }
    if (is_process) {
      uint32_t p = proc_get(m, pid);
      if (p != UINT32_MAX) m->procs[p].sort_index = sort, m->procs[p].has_sort = true;
    } else {
      uint32_t t = track_get(m, pid, tid);
      if (t != UINT32_MAX) m->tracks[t].sort_index = sort, m->tracks[t].has_sort = true;
    }
  }
}

static void ingest_event(model_t *m, json_t *ev, size_t index) {
  m->events++;
  if (!json_is_object(ev)) {
    ignore_event(m, index, "?", "not an object");
    return;
  }
  const char *ph = json_string_value(json_object_get(ev, "ph"));
  if (!ph || !ph[0] || ph[1]) return;  // no phase this picture draws
  json_t *args = json_object_get(ev, "args");
  if (ph[0] == 'M') {
    ingest_metadata(m, ev, args, index);
    return;
  }
  bool span = ph[0] == 'X', inst = ph[0] == 'i' || ph[0] == 'I';
  bool flow = ph[0] == 's' || ph[0] == 't' || ph[0] == 'f';
  if (!span && !inst && !flow) return;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;
  if (!get_i64(ev, "pid", &pid) || !get_i64(ev, "tid", &tid)) {
    ignore_event(m, index, ph, "no integer pid and tid");
    return;
  }
  if (!get_num(ev, "ts", &ts)) {
    ignore_event(m, index, ph, "no finite ts");
    return;
  }
  if (span && (!get_num(ev, "dur", &dur) || dur < 0)) {
    ignore_event(m, index, ph, "no finite dur >= 0");
    return;
  }
  json_t *id = json_object_get(ev, "id");
  char id_text[32];
  const char *id_str = NULL;
  if (flow) {
    if (json_is_integer(id)) {
      snprintf(id_text, sizeof(id_text), "%" JSON_INTEGER_FORMAT, json_integer_value(id));
      id_str = id_text;
    } else {
      id_str = json_string_value(id);
    }
    if (!id_str) {
      ignore_event(m, index, ph, "no id");
      return;
    }
  }
  uint32_t track = track_get(m, pid, tid);
  if (track == UINT32_MAX) return;
  note_ts(m, track, ts);
  const char *name = get_str(m, ev, "name");
  if (span) {
    span_t *s = grow(m->spans, &m->spans_cap, m->nspans + 1, sizeof(*s));
    if (!s) {
      m->oom = true;
      return;
    }
    m->spans = s;
    span_t *x = &m->spans[m->nspans++];
    *x = (span_t){.ts = ts, .dur = dur, .name = name, .cat = get_str(m, ev, "cat"), .track = track};
    x->callable = get_str(m, args, "callable");
    x->status = get_str(m, args, "status");
    if (get_i64(args, "run", &x->run)) x->has |= HAS_RUN;
    if (get_i64(args, "task", &x->task)) x->has |= HAS_TASK;
    if (get_i64(args, "chip", &x->chip)) x->has |= HAS_CHIP;
    if (get_i64(args, "frame", &x->frame)) x->has |= HAS_FRAME;
  } else if (inst) {
    instant_t *i = grow(m->instants, &m->instants_cap, m->ninstants + 1, sizeof(*i));
    if (!i) {
      m->oom = true;
      return;
    }
    m->instants = i;
    instant_t *x = &m->instants[m->ninstants++];
    *x = (instant_t){.ts = ts, .name = name, .cat = get_str(m, ev, "cat"), .track = track};
    x->detail = get_str(m, args, "detail");
    if (get_i64(args, "run", &x->run)) x->has |= HAS_RUN;
    if (get_i64(args, "task", &x->task)) x->has |= HAS_TASK;
    if (get_i64(args, "chip", &x->chip)) x->has |= HAS_CHIP;
  } else {
    flow_point_t *f = grow(m->flows, &m->flows_cap, m->nflows + 1, sizeof(*f));
    if (!f) {
      m->oom = true;
      return;
    }
    m->flows = f;
    m->flows[m->nflows++] = (flow_point_t){.name = name ? name : intern(m, ""),
                                           .id = intern(m, id_str),
                                           .ts = ts,
                                           .track = track,
                                           .ph = ph[0]};
  }
}

static void ingest_other_data(model_t *m, json_t *other) {
  int64_t dropped = 0;
  if (get_i64(other, "dropped_events", &dropped)) m->dropped = dropped;
}

// ---------------------------------------------------------------------------------------------
// Reading the file.

// The structural scanner: it only finds where values begin and end; jansson checks them.
typedef struct scan {
  const char *p, *end;
} scan_t;

static void scan_ws(scan_t *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
    ++s->p;
  }
}

static bool scan_string(scan_t *s) {
  if (s->p >= s->end || *s->p != '"') return false;
  for (++s->p; s->p < s->end; ++s->p) {
    if (*s->p == '\\') {
      ++s->p;
    } else if (*s->p == '"') {
      ++s->p;
      return true;
    }
  }
  return false;
}

static bool scan_value(scan_t *s) {
  if (s->p >= s->end) return false;
  if (*s->p == '"') return scan_string(s);
  if (*s->p == '{' || *s->p == '[') {
    int depth = 0;
    while (s->p < s->end) {
      char c = *s->p;
      if (c == '"') {
        if (!scan_string(s)) return false;
        continue;
      }
      ++s->p;
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return true;
      }
    }
    return false;
  }
  const char *start = s->p;
  while (s->p < s->end && !strchr(",]} \t\r\n", *s->p)) ++s->p;
  return s->p > start;
}

static bool scan_char(scan_t *s, char c) {
  scan_ws(s);
  if (s->p >= s->end || *s->p != c) return false;
  ++s->p;
  return true;
}

// The elements of the array at s->p, each parsed and ingested on its own.
static bool scan_events(scan_t *s, model_t *m) {
  if (!scan_char(s, '[')) return false;
  scan_ws(s);
  if (s->p < s->end && *s->p == ']') {
    ++s->p;
    return true;
  }
  for (size_t index = 0;; ++index) {
    scan_ws(s);
    const char *start = s->p;
    if (!scan_value(s)) return false;
    json_error_t jerr;
    json_t *ev = json_loadb(start, (size_t)(s->p - start), JSON_DECODE_ANY, &jerr);
    if (!ev) return false;
    ingest_event(m, ev, index);
    json_decref(ev);
    if (m->oom) return true;  // reported by the caller
    scan_ws(s);
    if (s->p < s->end && *s->p == ']') {
      ++s->p;
      return true;
    }
    if (!scan_char(s, ',')) return false;
  }
}

// The fast path: true when the document was read, events and all (or memory ran out: m->oom);
// false when jansson must give the verdict (invalid JSON, no "traceEvents" array, or anything
// the scanner does not expect).
static bool read_fast(const char *buf, size_t len, model_t *m) {
  scan_t s = {buf, buf + len};
  bool found = false;
  scan_ws(&s);
  if (s.p < s.end && *s.p == '[') {
    // The JSON Array Format of the Trace Event Format: the document is the event list.
    if (!scan_events(&s, m)) return false;
    found = true;
  } else {
    if (!scan_char(&s, '{')) return false;
    scan_ws(&s);
    if (s.p < s.end && *s.p == '}') {
      ++s.p;
    } else {
      for (;;) {
        scan_ws(&s);
        const char *key = s.p;
        if (!scan_string(&s)) return false;
        size_t key_len = (size_t)(s.p - key);
        if (!scan_char(&s, ':')) return false;
        scan_ws(&s);
        bool is_events = key_len == 13 && memcmp(key, "\"traceEvents\"", 13) == 0;
        if (is_events && s.p < s.end && *s.p == '[') {
          if (!scan_events(&s, m)) return false;
          if (m->oom) return true;
          found = true;
        } else {
          if (is_events) return false;  // not an array: read_tree says what it is
          const char *start = s.p;
          if (!scan_value(&s)) return false;
          json_error_t jerr;
          json_t *v = json_loadb(start, (size_t)(s.p - start), JSON_DECODE_ANY, &jerr);
          if (!v) return false;
          if (key_len == 11 && memcmp(key, "\"otherData\"", 11) == 0) {
            ingest_other_data(m, v);
          }
          json_decref(v);
        }
        scan_ws(&s);
        if (s.p < s.end && *s.p == '}') {
          ++s.p;
          break;
        }
        if (!scan_char(&s, ',')) return false;
      }
    }
  }
  scan_ws(&s);
  return s.p == s.end && found;
}

// The slow path: jansson's whole tree, for its error message (and its verdict).
static lw_status_t read_tree(const char *buf, size_t len, model_t *m, lw_error_t *err) {
  json_error_t jerr;
  json_t *root = json_loadb(buf, len, 0, &jerr);
  if (!root) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "not valid JSON: line %d, column %d: %s",
                         jerr.line, jerr.column, jerr.text);
  }
  json_t *events = root;
  if (json_is_object(root)) {
    events = json_object_get(root, "traceEvents");
    ingest_other_data(m, json_object_get(root, "otherData"));
  }
  if (!json_is_array(events)) {
    lw_status_t st = events ? lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                                            "no \"traceEvents\" array (\"traceEvents\" is %s)",
                                            json_is_object(events)    ? "an object"
                                            : json_is_string(events)  ? "a string"
                                            : json_is_number(events)  ? "a number"
                                            : json_is_boolean(events) ? "a boolean"
                                                                      : "null")
                            : lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                                            "no \"traceEvents\" array in the top-level object");
    json_decref(root);
    return st;
  }
  for (size_t i = 0; i < json_array_size(events) && !m->oom; ++i) {
    ingest_event(m, json_array_get(events, i), i);
  }
  json_decref(root);
  return LW_OK;
}

static lw_status_t read_trace(const char *path, model_t *m, lw_error_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return lw__error_set(err, LW_NOT_FOUND, -1, 0, "cannot read: %s", strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "cannot read: not a regular file");
  }
  size_t len = (size_t)sb.st_size;
  char *buf = malloc(len ? len : 1);
  if (!buf) {
    close(fd);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "cannot read: no memory for %zu bytes",
                         len);
  }
  size_t got = 0;
  while (got < len) {
    ssize_t r = read(fd, buf + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int e = r < 0 ? errno : EIO;
      free(buf);
      close(fd);
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "cannot read: %s", strerror(e));
    }
    got += (size_t)r;
  }
  close(fd);
  lw_status_t st = LW_OK;
  if (!read_fast(buf, len, m) && !m->oom) {
    model_deinitialize(m);
    st = read_tree(buf, len, m, err);
  }
  free(buf);
  if (st == LW_OK && m->oom) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "out of memory after %zu events",
                       m->events);
  }
  return st;
}

// ---------------------------------------------------------------------------------------------
// Layout.

typedef struct options {
  const char *in, *out;
  int width;
  bool has_from, has_to, flows, all_flows;
  double from, to;
} options_t;

static int cmp_span(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  if (x->track != y->track) return x->track < y->track ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1;  // the container first
  return 0;
}

static int cmp_instant(const void *a, const void *b) {
  const instant_t *x = a, *y = b;
  if (x->track != y->track) return x->track < y->track ? -1 : 1;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

static int flow_rank(char ph) { return ph == 's' ? 0 : ph == 't' ? 1 : 2; }

static int cmp_flow(const void *a, const void *b) {
  const flow_point_t *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c == 0) c = strcmp(x->id, y->id);
  if (c == 0) c = flow_rank(x->ph) - flow_rank(y->ph);
  if (c == 0) c = (x->ts > y->ts) - (x->ts < y->ts);
  return c;
}

// Process order: the parent, then chips by index, then subs, then anything else; a respawned
// chip (same name, new pid) right after the one it replaced, by its first event.
static int proc_class(const proc_t *p, long *index) {
  *index = 0;
  if (!p->name) return 3;
  if (strcmp(p->name, "lanework parent") == 0) return 0;
  if (sscanf(p->name, "chip %ld", index) == 1) return 1;
  if (sscanf(p->name, "sub %ld", index) == 1) return 2;
  return 3;
}

// qsort with a NULL base is undefined even for zero items (an empty trace has no arrays).
static void sort_items(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n > 1) qsort(base, n, size, cmp);
}

// qsort has no context argument; the tool is single-threaded, so the comparators read these.
static const model_t *g_sort_model;
static const uint32_t *g_proc_rank;  // proc index -> position in the band order

static int cmp_proc(const void *a, const void *b) {
  const proc_t *x = &g_sort_model->procs[*(const uint32_t *)a];
  const proc_t *y = &g_sort_model->procs[*(const uint32_t *)b];
  long xi, yi;
  int xc = proc_class(x, &xi), yc = proc_class(y, &yi);
  if (xc != yc) return xc - yc;
  if (xi != yi) return xi < yi ? -1 : 1;
  if (xc == 3 && x->has_sort != y->has_sort) return x->has_sort ? -1 : 1;
  if (xc == 3 && x->sort_index != y->sort_index) return x->sort_index < y->sort_index ? -1 : 1;
  double xt = x->has_ts ? x->first_ts : INFINITY, yt = y->has_ts ? y->first_ts : INFINITY;
  if (xt != yt) return xt < yt ? -1 : 1;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

typedef struct layout {
  double from, to;  // the window, µs
  double x0, x1;    // the plot's horizontal extent
  double label_w;
  uint32_t *proc_order;   // nprocs
  uint32_t *proc_rank;    // proc index -> position in proc_order
  uint32_t *track_order;  // ntracks
  double rows_bottom;
} layout_t;

static int cmp_track(const void *a, const void *b) {
  const track_t *x = &g_sort_model->tracks[*(const uint32_t *)a];
  const track_t *y = &g_sort_model->tracks[*(const uint32_t *)b];
  if (x->proc != y->proc) return g_proc_rank[x->proc] < g_proc_rank[y->proc] ? -1 : 1;
  if (x->has_sort != y->has_sort) return x->has_sort ? -1 : 1;
  if (x->sort_index != y->sort_index) return x->sort_index < y->sort_index ? -1 : 1;
  return (x->tid > y->tid) - (x->tid < y->tid);
}

static double span_end(const span_t *s) { return s->ts + s->dur; }

static bool in_window(const layout_t *l, double t0, double t1) {
  return t1 >= l->from && t0 <= l->to;
}

static double xpos(const layout_t *l, double t) {
  if (t < l->from) t = l->from;
  if (t > l->to) t = l->to;
  return l->x0 + (t - l->from) / (l->to - l->from) * (l->x1 - l->x0);
}

// Code points of a UTF-8 string (what the width estimates count).
static size_t utf8_len(const char *s) {
  size_t n = 0;
  for (; *s; ++s) n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

static void proc_label(const proc_t *p, char *buf, size_t n) {
  if (p->name) {
    snprintf(buf, n, "%s", p->name);
  } else {
    snprintf(buf, n, "pid %lld", (long long)p->pid);
  }
}

static void row_label(const model_t *m, const track_t *t, char *buf, size_t n) {
  char proc[160];
  proc_label(&m->procs[t->proc], proc, sizeof(proc));
  if (t->name) {
    snprintf(buf, n, "%s \xc2\xb7 %s", proc, t->name);
  } else {
    snprintf(buf, n, "%s \xc2\xb7 tid %lld", proc, (long long)t->tid);
  }
}

static lw_status_t layout_compute(model_t *m, const options_t *o, layout_t *l, lw_error_t *err) {
  memset(l, 0, sizeof(*l));
  sort_items(m->spans, m->nspans, sizeof(span_t), cmp_span);
  sort_items(m->instants, m->ninstants, sizeof(instant_t), cmp_instant);
  sort_items(m->flows, m->nflows, sizeof(flow_point_t), cmp_flow);
  // The data's range: spans and instants, so a death after the last span stays in view.
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < m->nspans; ++i) {
    lo = fmin(lo, m->spans[i].ts);
    hi = fmax(hi, span_end(&m->spans[i]));
  }
  for (size_t i = 0; i < m->ninstants; ++i) {
    lo = fmin(lo, m->instants[i].ts);
    hi = fmax(hi, m->instants[i].ts);
  }
  if (!isfinite(lo)) lo = hi = 0;
  l->from = o->has_from ? o->from : lo;
  l->to = o->has_to ? o->to : hi;
  if (!(l->to > l->from)) {
    // One point in time (a lone instant, a zero-length span, or a window given on one side
    // past the data): give it a microsecond so positions stay finite.
    if (o->has_to) {
      l->from = l->to - 1;
    } else {
      l->to = l->from + 1;
    }
  }
  // Spans and instants per track, nesting depths, and which rows have anything in the window.
  for (size_t i = 0; i < m->nspans; ++i) {
    track_t *t = &m->tracks[m->spans[i].track];
    if (t->span_count++ == 0) t->span_first = i;
  }
  for (size_t i = 0; i < m->ninstants; ++i) {
    track_t *t = &m->tracks[m->instants[i].track];
    if (t->inst_count++ == 0) t->inst_first = i;
  }
  double *stack = NULL;
  size_t stack_cap = 0;
  for (size_t ti = 0; ti < m->ntracks; ++ti) {
    track_t *t = &m->tracks[ti];
    size_t depth = 0;
    uint32_t levels = 0;
    for (size_t i = t->span_first; i < t->span_first + t->span_count; ++i) {
      span_t *s = &m->spans[i];
      // Timestamps carry 3 decimals: a span that starts within a nanosecond of the end of
      // the one below it follows it rather than nesting in it.
      while (depth > 0 && stack[depth - 1] <= s->ts + 0.0005) --depth;
      double *ns = grow(stack, &stack_cap, depth + 1, sizeof(double));
      if (!ns) {
        free(stack);
        return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "out of memory (layout)");
      }
      stack = ns;
      s->depth = (uint16_t)(depth < SVG_MAX_LEVELS ? depth : SVG_MAX_LEVELS - 1);
      stack[depth++] = span_end(s);
      if (in_window(l, s->ts, span_end(s))) {
        t->shown = true;
        if ((uint32_t)s->depth + 1 > levels) levels = (uint32_t)s->depth + 1;
      }
    }
    for (size_t i = t->inst_first; i < t->inst_first + t->inst_count; ++i) {
      if (in_window(l, m->instants[i].ts, m->instants[i].ts)) t->shown = true;
    }
    t->levels = levels ? levels : 1;
  }
  free(stack);
  // Orders.
  l->proc_order = calloc(m->nprocs + 1, sizeof(uint32_t));
  l->proc_rank = calloc(m->nprocs + 1, sizeof(uint32_t));
  l->track_order = calloc(m->ntracks + 1, sizeof(uint32_t));
  if (!l->proc_order || !l->proc_rank || !l->track_order) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "out of memory (layout)");
  }
  for (size_t i = 0; i < m->nprocs; ++i) l->proc_order[i] = (uint32_t)i;
  g_sort_model = m;
  sort_items(l->proc_order, m->nprocs, sizeof(uint32_t), cmp_proc);
  for (size_t i = 0; i < m->nprocs; ++i) l->proc_rank[l->proc_order[i]] = (uint32_t)i;
  g_proc_rank = l->proc_rank;
  for (size_t i = 0; i < m->ntracks; ++i) l->track_order[i] = (uint32_t)i;
  sort_items(l->track_order, m->ntracks, sizeof(uint32_t), cmp_track);
  g_sort_model = NULL;
  g_proc_rank = NULL;
  // The label column fits the longest shown row label, within bounds.
  size_t longest = 0;
  for (size_t i = 0; i < m->ntracks; ++i) {
    if (!m->tracks[i].shown) continue;
    char label[400];
    row_label(m, &m->tracks[i], label, sizeof(label));
    size_t n = utf8_len(label);
    if (n > longest) longest = n;
  }
  l->label_w = fmin(fmax(16.0 + (double)longest * SVG_CHAR_W_11, 140.0), 0.35 * o->width);
  l->x0 = l->label_w;
  l->x1 = o->width - SVG_RIGHT_MARGIN;
  // Rows, band by band.
  double y = SVG_TOP;
  for (size_t pi = 0; pi < m->nprocs; ++pi) {
    uint32_t p = l->proc_order[pi];
    bool any = false;
    for (size_t i = 0; i < m->ntracks; ++i) {
      track_t *t = &m->tracks[l->track_order[i]];
      if (t->proc != p || !t->shown) continue;
      if (!any) y += SVG_BAND_HEAD_H;
      any = true;
      t->y = y;
      y += t->levels * SVG_LEVEL_H + SVG_ROW_GAP;
    }
    if (any) y += SVG_BAND_GAP;
  }
  l->rows_bottom = y;
  return LW_OK;
}

static void layout_deinitialize(layout_t *l) {
  free(l->proc_order);
  free(l->proc_rank);
  free(l->track_order);
}

// ---------------------------------------------------------------------------------------------
// Writing.

// Text for XML character data and attribute values: the five markup characters become
// entities, and what XML 1.0 forbids (control characters, U+FFFE and U+FFFF, which JSON's
// \u escapes can carry) becomes '?'. At most max_chars code points (0: all); a cut string
// ends with an ellipsis.
static void xml_text(FILE *f, const char *s, size_t max_chars) {
  size_t chars = 0, total = max_chars ? utf8_len(s) : 0;
  bool cut = max_chars && total > max_chars;
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if ((c & 0xc0) != 0x80 && cut && ++chars > max_chars - 1) {
      fputs("\xe2\x80\xa6", f);
      return;
    }
    switch (c) {
      case '&':
        fputs("&amp;", f);
        break;
      case '<':
        fputs("&lt;", f);
        break;
      case '>':
        fputs("&gt;", f);
        break;
      case '"':
        fputs("&quot;", f);
        break;
      case '\'':
        fputs("&apos;", f);
        break;
      default:
        if (c == 0xef && (unsigned char)s[1] == 0xbf && ((unsigned char)s[2] & 0xfe) == 0xbe) {
          c = '?';
          s += 2;
        }
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') c = '?';
        fputc(c, f);
    }
  }
}

// A callable's colour, the same in every picture: the FNV-1a hash of its name picks a hue
// (one of 310), a saturation and a lightness (two of each), so two names rarely look alike.
// The hues near red are left out (red marks failures), the lightness keeps black labels
// readable, and the saturation keeps every colour apart from the grey of merged runs.
static void colour_of(const char *key, char out[8]) {
  uint64_t h = fnv1a(key);
  double hue = 25.0 + (double)(h % 310), sat = (h >> 16) & 1 ? 0.75 : 0.55;
  double light = (h >> 17) & 1 ? 0.78 : 0.68;
  double c = (1 - fabs(2 * light - 1)) * sat;
  double x = c * (1 - fabs(fmod(hue / 60, 2) - 1)), m = light - c / 2;
  double r = 0, g = 0, b = 0;
  switch ((int)(hue / 60)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  snprintf(out, 8, "#%02x%02x%02x", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
           (int)lround((b + m) * 255));
}

// What colours a span: its callable, else its category, else its name.
static const char *span_key(const span_t *s) {
  if (s->callable) return s->callable;
  if (s->cat) return s->cat;
  return s->name ? s->name : "?";
}

// A time for people: the unit follows `scale` (µs below a millisecond, ms below a second).
static void fmt_time(char *buf, size_t n, double us, double scale, int decimals) {
  double div = 1;
  const char *unit = "\xc2\xb5s";
  if (scale >= 1e6) {
    div = 1e6;
    unit = "s";
  } else if (scale >= 1e3) {
    div = 1e3;
    unit = "ms";
  }
  if (decimals < 0) {
    double step = scale / div;
    decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (decimals > 6) decimals = 6;
  }
  snprintf(buf, n, "%.*f %s", decimals, us / div, unit);
}

typedef struct render_stats {
  size_t spans_drawn, narrow_merged, merged_runs, rects, rects_capped;
  size_t instants_drawn, arrows, arrows_capped;
  bool any_failed;
  const char **legend;  // distinct keys of drawn spans
  size_t nlegend, legend_cap;
} render_stats_t;

static void legend_add(render_stats_t *st, const char *key) {
  for (size_t i = 0; i < st->nlegend; ++i) {
    if (st->legend[i] == key) return;  // interned
  }
  const char **l = grow(st->legend, &st->legend_cap, st->nlegend + 1, sizeof(*l));
  if (!l) return;  // the legend misses an entry; the picture is still right
  st->legend = l;
  st->legend[st->nlegend++] = key;
}

static void span_title(FILE *f, const span_t *s) {
  fputs("<title>", f);
  xml_text(f, s->name ? s->name : "(no name)", 0);
  fputs("\ncat: ", f);
  xml_text(f, s->cat ? s->cat : "-", 0);
  if (s->callable) {
    fputs(" \xc2\xb7 callable: ", f);
    xml_text(f, s->callable, 0);
  }
  if (s->has & (HAS_RUN | HAS_TASK | HAS_CHIP | HAS_FRAME)) fputc('\n', f);
  const char *sep = "";
  if (s->has & HAS_RUN) fprintf(f, "run %lld", (long long)s->run), sep = " \xc2\xb7 ";
  if (s->has & HAS_TASK) fprintf(f, "%stask %lld", sep, (long long)s->task), sep = " \xc2\xb7 ";
  if (s->has & HAS_CHIP) fprintf(f, "%schip %lld", sep, (long long)s->chip), sep = " \xc2\xb7 ";
  if (s->has & HAS_FRAME) fprintf(f, "%sframe %lld", sep, (long long)s->frame);
  fprintf(f, "\nts %.3f \xc2\xb5s \xc2\xb7 dur %.3f \xc2\xb5s", s->ts, s->dur);
  if (s->status) {
    fputs("\nstatus: ", f);
    xml_text(f, s->status, 0);
  }
  fputs("</title>", f);
}

static bool span_failed(const span_t *s) { return s->status && strcmp(s->status, "LW_OK") != 0; }

static void draw_span(FILE *f, const span_t *s, double x0, double x1, double y,
                      render_stats_t *st) {
  if (st->rects >= SVG_MAX_RECTS) {
    st->rects_capped++;
    return;
  }
  double w = fmax(x1 - x0, SVG_NARROW_PX);
  const char *key = span_key(s);
  char colour[8];
  colour_of(key, colour);
  legend_add(st, key);
  bool failed = span_failed(s);
  st->any_failed |= failed;
  fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"", x0, y, w,
          SVG_LEVEL_H - 2, colour);
  if (failed) {
    fputs(" stroke=\"" SVG_FAIL_COLOUR "\" stroke-width=\"2\"", f);
  } else if (w >= 3) {
    fputs(" stroke=\"#333333\" stroke-opacity=\"0.35\" stroke-width=\"0.5\"", f);
  }
  fputc('>', f);
  span_title(f, s);
  fputs("</rect>\n", f);
  st->rects++;
  st->spans_drawn++;
  // The name inside when at least a few characters fit.
  const char *name = s->name ? s->name : key;
  size_t fit = (size_t)fmax((w - 4) / SVG_CHAR_W_10, 0);
  size_t len = utf8_len(name);
  if (len > 0 && (fit >= len || fit >= 4)) {
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\">", x0 + 2, y + 10.5);
    xml_text(f, name, fit >= len ? 0 : fit);
    fputs("</text>\n", f);
  }
}

// Narrow spans of one level waiting to be drawn as one run.
typedef struct pending {
  size_t count, first;  // spans merged; index of the first
  double x0, x1, t0, t1;
} pending_t;

static void flush_pending(FILE *f, const model_t *m, pending_t *p, double y, render_stats_t *st) {
  if (p->count == 0) return;
  if (p->count == 1) {
    draw_span(f, &m->spans[p->first], p->x0, p->x1, y, st);
  } else if (st->rects >= SVG_MAX_RECTS) {
    st->rects_capped += p->count;
  } else {
    fprintf(f,
            "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.1f\" fill=\"" SVG_MERGED_COLOUR
            "\"><title>%zu spans, each narrower than %.1f px, merged\n"
            "ts %.3f \xe2\x80\x93 %.3f \xc2\xb5s</title></rect>\n",
            p->x0, y, fmax(p->x1 - p->x0, SVG_NARROW_PX), SVG_LEVEL_H - 2, p->count, SVG_NARROW_PX,
            p->t0, p->t1);
    st->rects++;
    st->narrow_merged += p->count;
    st->merged_runs++;
  }
  p->count = 0;
}

static void draw_track_spans(FILE *f, const model_t *m, const layout_t *l, const track_t *t,
                             render_stats_t *st) {
  pending_t pend[SVG_MAX_LEVELS] = {{0}};
  for (size_t i = t->span_first; i < t->span_first + t->span_count; ++i) {
    const span_t *s = &m->spans[i];
    if (!in_window(l, s->ts, span_end(s))) continue;
    double x0 = xpos(l, s->ts), x1 = xpos(l, span_end(s));
    double y = t->y + 1 + s->depth * SVG_LEVEL_H;
    pending_t *p = &pend[s->depth];
    // A failure is never merged away: it keeps its own outlined rectangle however narrow.
    if (x1 - x0 >= SVG_NARROW_PX || span_failed(s)) {
      flush_pending(f, m, p, y, st);
      draw_span(f, s, x0, x1, y, st);
      continue;
    }
    if (p->count > 0 && x0 - p->x1 > SVG_MERGE_GAP_PX) flush_pending(f, m, p, y, st);
    if (p->count++ == 0) {
      p->first = i;
      p->x0 = x0;
      p->x1 = x1;
      p->t0 = s->ts;
      p->t1 = span_end(s);
    } else {
      p->x1 = fmax(p->x1, x1);
      p->t1 = fmax(p->t1, span_end(s));
    }
  }
  for (int d = 0; d < SVG_MAX_LEVELS; ++d) {
    flush_pending(f, m, &pend[d], t->y + 1 + d * SVG_LEVEL_H, st);
  }
}

static void draw_track_instants(FILE *f, const model_t *m, const layout_t *l, const track_t *t,
                                render_stats_t *st) {
  double bottom = t->y + t->levels * SVG_LEVEL_H;
  for (size_t i = t->inst_first; i < t->inst_first + t->inst_count; ++i) {
    const instant_t *in = &m->instants[i];
    if (!in_window(l, in->ts, in->ts)) continue;
    double x = xpos(l, in->ts);
    const char *colour =
        in->cat && strcmp(in->cat, "fault") == 0 ? SVG_FAIL_COLOUR : SVG_CONTROL_COLOUR;
    fprintf(f,
            "<g><line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
            "stroke-dasharray=\"2,2\"/>"
            "<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>"
            "<text x=\"%.2f\" y=\"%.2f\" font-size=\"9\" fill=\"%s\">",
            x, t->y, x, bottom, colour, x - 4, t->y, x + 4, t->y, x, t->y + 7, colour, x + 5,
            t->y + 8, colour);
    xml_text(f, in->name ? in->name : "(instant)", 0);
    fputs("</text><title>", f);
    xml_text(f, in->name ? in->name : "(instant)", 0);
    fputs("\ncat: ", f);
    xml_text(f, in->cat ? in->cat : "-", 0);
    if (in->has & HAS_CHIP) fprintf(f, " \xc2\xb7 chip %lld", (long long)in->chip);
    if (in->has & HAS_RUN) fprintf(f, " \xc2\xb7 run %lld", (long long)in->run);
    if (in->has & HAS_TASK) fprintf(f, " \xc2\xb7 task %lld", (long long)in->task);
    fprintf(f, "\nts %.3f \xc2\xb5s", in->ts);
    if (in->detail) {
      fputs("\ndetail: ", f);
      xml_text(f, in->detail, 0);
    }
    fputs("</title></g>\n", f);
    st->instants_drawn++;
  }
}

// The innermost span of track that contains ts (flow points bind to their enclosing slice),
// or NULL. Spans are sorted by start; walking back from the last one that starts by ts, every
// container of ts is met before the first outermost span, which ends the walk.
static const span_t *enclosing_span(const model_t *m, const track_t *t, double ts) {
  size_t lo = t->span_first, hi = t->span_first + t->span_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->spans[mid].ts <= ts + 0.0005) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  const span_t *best = NULL;
  for (size_t i = lo, steps = 0; i > t->span_first && steps < 4096; --i, ++steps) {
    const span_t *s = &m->spans[i - 1];
    if (ts <= span_end(s) + 0.0005 && (!best || s->depth > best->depth)) best = s;
    if (s->depth == 0) break;
  }
  return best;
}

static void flow_anchor(const model_t *m, const flow_point_t *p, bool out, double *t_out,
                        double *y_out) {
  const track_t *t = &m->tracks[p->track];
  const span_t *s = enclosing_span(m, t, p->ts);
  *t_out = s ? (out ? span_end(s) : s->ts) : p->ts;
  *y_out = t->y + 1 + (s ? s->depth : 0) * SVG_LEVEL_H + (SVG_LEVEL_H - 2) / 2;
}

static void draw_flows(FILE *f, const model_t *m, const layout_t *l, const options_t *o,
                       render_stats_t *st) {
  for (size_t i = 0; i + 1 < m->nflows; ++i) {
    const flow_point_t *a = &m->flows[i], *b = &m->flows[i + 1];
    if (a->name != b->name || a->id != b->id) continue;  // interned: pointer equality
    bool dep = strcmp(a->name, "dep") == 0;
    if (!dep && !o->all_flows) continue;
    if (b->ph == 's') continue;  // a second chain reusing the id starts at b
    const track_t *ta = &m->tracks[a->track], *tb = &m->tracks[b->track];
    if (!ta->shown || !tb->shown) continue;
    double t0, y0, t1, y1;
    flow_anchor(m, a, true, &t0, &y0);
    flow_anchor(m, b, false, &t1, &y1);
    if (!in_window(l, fmin(t0, t1), fmax(t0, t1))) continue;
    if (st->arrows >= SVG_MAX_ARROWS) {
      st->arrows_capped++;
      continue;
    }
    double x0 = xpos(l, t0), x1 = xpos(l, t1);
    double dx = fmin(40.0, fabs(x1 - x0) / 2 + 10);
    fprintf(f,
            "<path d=\"M%.2f,%.2f C%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"none\" "
            "stroke=\"%s\" stroke-width=\"%s\" stroke-opacity=\"0.8\" "
            "marker-end=\"url(#lw-arrow)\"><title>",
            x0, y0, x0 + dx, y0, x1 - dx, y1, x1, y1, dep ? "#444444" : "#8c8c8c",
            dep ? "0.9" : "0.6");
    xml_text(f, a->name, 0);
    fputs(" flow ", f);
    xml_text(f, a->id, 0);
    fprintf(f, "\n%.3f \xe2\x86\x92 %.3f \xc2\xb5s</title></path>\n", t0, t1);
    st->arrows++;
  }
}

static void draw_axis(FILE *f, const layout_t *l) {
  double range = l->to - l->from;
  double n_target = fmax((l->x1 - l->x0) / 110.0, 2.0);
  double raw = range / n_target, mag = pow(10, floor(log10(raw))), norm = raw / mag;
  double step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * mag;
  fputs("<g id=\"axis\" font-size=\"10\" fill=\"#444444\">\n", f);
  double first = ceil(l->from / step - 1e-9);
  for (int i = 0; i < 1000; ++i) {
    double t = (first + i) * step;
    if (t > l->to + step * 1e-9) break;
    double x = xpos(l, t);
    char label[48];
    fmt_time(label, sizeof(label), fabs(t) < step * 1e-9 ? 0 : t, step, -1);
    fprintf(f,
            "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#dddddd\" "
            "stroke-width=\"0.6\"/><text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">",
            x, SVG_TOP - 8, x, l->rows_bottom, x, SVG_TOP - 12);
    xml_text(f, label, 0);
    fputs("</text>\n", f);
  }
  fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#888888\"/>\n</g>\n",
          l->x0, SVG_TOP - 8, l->x1, SVG_TOP - 8);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The legend below the rows; returns the y below it.
static double draw_legend(FILE *f, render_stats_t *st, double y, int width) {
  if (st->nlegend == 0 && st->instants_drawn == 0) return y + 8;
  sort_items(st->legend, st->nlegend, sizeof(char *), cmp_str);
  fprintf(f,
          "<g id=\"legend\" font-size=\"11\">\n<text x=\"8\" y=\"%.1f\" "
          "font-weight=\"bold\">legend</text>\n",
          y + 12);
  double x = 70, row_y = y;
  size_t shown = st->nlegend < SVG_MAX_LEGEND ? st->nlegend : SVG_MAX_LEGEND;
  // Entries: callables, then the marks that are not callables, when the picture has them.
  enum { EXTRA_MERGED, EXTRA_FAILED, EXTRA_INSTANT, EXTRA_ARROW, EXTRA_MORE, EXTRA_COUNT };
  for (size_t i = 0; i < shown + EXTRA_COUNT; ++i) {
    char text[200];
    int extra = i < shown ? -1 : (int)(i - shown);
    if (extra == EXTRA_MERGED && !st->merged_runs) continue;
    if (extra == EXTRA_FAILED && !st->any_failed) continue;
    if (extra == EXTRA_INSTANT && !st->instants_drawn) continue;
    if (extra == EXTRA_ARROW && !st->arrows) continue;
    if (extra == EXTRA_MORE && st->nlegend <= shown) continue;
    if (extra < 0) {
      snprintf(text, sizeof(text), "%s", st->legend[i]);
    } else if (extra == EXTRA_MERGED) {
      snprintf(text, sizeof(text), "merged spans < %.1f px", SVG_NARROW_PX);
    } else if (extra == EXTRA_FAILED) {
      snprintf(text, sizeof(text), "status not LW_OK");
    } else if (extra == EXTRA_INSTANT) {
      snprintf(text, sizeof(text), "instant (red: fault)");
    } else if (extra == EXTRA_ARROW) {
      snprintf(text, sizeof(text), "dependency");
    } else {
      snprintf(text, sizeof(text), "+%zu more callables", st->nlegend - shown);
    }
    double w = 22 + (double)utf8_len(text) * SVG_CHAR_W_11 + 14;
    if (x + w > width - SVG_RIGHT_MARGIN && x > 70) {
      x = 70;
      row_y += 16;
    }
    fputs("<g>", f);
    if (extra < 0) {
      char colour[8];
      colour_of(st->legend[i], colour);
      fprintf(f,
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"11\" fill=\"%s\" "
              "stroke=\"#333333\" stroke-opacity=\"0.35\" stroke-width=\"0.5\"/>",
              x, row_y + 3, colour);
    } else if (extra == EXTRA_MERGED) {
      fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"11\" fill=\"%s\"/>", x,
              row_y + 3, SVG_MERGED_COLOUR);
    } else if (extra == EXTRA_FAILED) {
      fprintf(f,
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"11\" fill=\"#ffffff\" "
              "stroke=\"" SVG_FAIL_COLOUR "\" stroke-width=\"2\"/>",
              x, row_y + 3);
    } else if (extra == EXTRA_INSTANT) {
      fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>", x + 4,
              row_y + 3, x + 12, row_y + 3, x + 8, row_y + 10, SVG_CONTROL_COLOUR);
    } else if (extra == EXTRA_ARROW) {
      fprintf(f,
              "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\" "
              "stroke-width=\"0.9\" marker-end=\"url(#lw-arrow)\"/>",
              x, row_y + 8, x + 14, row_y + 8);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 22, row_y + 12);
    xml_text(f, text, 0);
    fputs("</text></g>\n", f);
    x += w;
  }
  fputs("</g>\n", f);
  return row_y + 24;
}

// The body (everything below the title lines) into f; returns the picture's height.
static double render_body(FILE *f, const model_t *m, const layout_t *l, const options_t *o,
                          render_stats_t *st) {
  if (m->nspans == 0 && m->ninstants == 0) {
    fputs("<text x=\"8\" y=\"80\" font-size=\"16\" fill=\"#666666\">no spans</text>\n", f);
    return 100;
  }
  draw_axis(f, l);
  fputs("<g id=\"rows\">\n", f);
  bool shade = false;
  for (size_t pi = 0; pi < m->nprocs; ++pi) {
    uint32_t p = l->proc_order[pi];
    double top = -1, bottom = 0;
    for (size_t i = 0; i < m->ntracks; ++i) {
      const track_t *t = &m->tracks[l->track_order[i]];
      if (t->proc != p || !t->shown) continue;
      if (top < 0) top = t->y - SVG_BAND_HEAD_H;
      bottom = t->y + t->levels * SVG_LEVEL_H + SVG_ROW_GAP;
    }
    if (top < 0) continue;
    char name[160];
    proc_label(&m->procs[p], name, sizeof(name));
    fprintf(f,
            "<g class=\"band\"><rect x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" "
            "fill=\"%s\"/><text x=\"6\" y=\"%.1f\" font-size=\"11\" font-weight=\"bold\">",
            top, o->width, bottom - top + SVG_BAND_GAP / 2, shade ? "#f3f3f3" : "#fbfbfb",
            top + 13);
    xml_text(f, name, 0);
    fprintf(f, " (pid %lld)</text>\n", (long long)m->procs[p].pid);
    shade = !shade;
    for (size_t i = 0; i < m->ntracks; ++i) {
      const track_t *t = &m->tracks[l->track_order[i]];
      if (t->proc != p || !t->shown) continue;
      char label[400];
      row_label(m, t, label, sizeof(label));
      size_t max_chars = (size_t)((l->label_w - 16) / SVG_CHAR_W_11);
      fprintf(f, "<text x=\"8\" y=\"%.1f\" font-size=\"11\" class=\"row\">", t->y + 12);
      xml_text(f, label, utf8_len(label) > max_chars ? max_chars : 0);
      fprintf(f,
              "</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
              "stroke=\"#e2e2e2\"/>\n",
              l->x0, t->y + t->levels * SVG_LEVEL_H + SVG_ROW_GAP / 2, l->x1,
              t->y + t->levels * SVG_LEVEL_H + SVG_ROW_GAP / 2);
      draw_track_spans(f, m, l, t, st);
      draw_track_instants(f, m, l, t, st);
    }
    fputs("</g>\n", f);
  }
  fputs("</g>\n", f);
  if (o->flows) {
    fputs("<g id=\"flows\">\n", f);
    draw_flows(f, m, l, o, st);
    fputs("</g>\n", f);
  }
  if (st->spans_drawn == 0 && st->narrow_merged == 0) {
    char a[48], b[48];
    fmt_time(a, sizeof(a), l->from, l->to - l->from, 3);
    fmt_time(b, sizeof(b), l->to, l->to - l->from, 3);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" fill=\"#666666\">", l->x0 + 8,
            l->rows_bottom + 24);
    fprintf(f, "no spans between %s and %s</text>\n", a, b);
    return draw_legend(f, st, l->rows_bottom + 40, o->width);
  }
  return draw_legend(f, st, l->rows_bottom + 4, o->width);
}

static void render_header(FILE *f, const model_t *m, const layout_t *l, const options_t *o,
                          const render_stats_t *st, double height) {
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
          "height=\"%.0f\" viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n"
          "<defs><marker id=\"lw-arrow\" markerWidth=\"6\" markerHeight=\"6\" refX=\"5\" "
          "refY=\"3\" orient=\"auto\" markerUnits=\"strokeWidth\">"
          "<path d=\"M0,0 L6,3 L0,6 z\" fill=\"#444444\"/></marker></defs>\n"
          "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
          o->width, height, o->width, height, o->width, height);
  const char *base = strrchr(o->in, '/');
  base = base ? base + 1 : o->in;
  fputs("<text id=\"title\" x=\"8\" y=\"22\" font-size=\"14\"><tspan font-weight=\"bold\">", f);
  xml_text(f, base, 0);
  fprintf(f, "</tspan>: %zu span%s \xc2\xb7 %zu instant%s", m->nspans, m->nspans == 1 ? "" : "s",
          m->ninstants, m->ninstants == 1 ? "" : "s");
  if (st->arrows) fprintf(f, " \xc2\xb7 %zu flow arrow%s", st->arrows, st->arrows == 1 ? "" : "s");
  if (m->dropped != 0) {
    fprintf(f,
            " \xc2\xb7 <tspan fill=\"" SVG_FAIL_COLOUR
            "\" font-weight=\"bold\">%lld events "
            "dropped by the recorder</tspan>",
            (long long)m->dropped);
  }
  fputs("</text>\n<text id=\"subtitle\" x=\"8\" y=\"40\" font-size=\"11\" fill=\"#444444\">", f);
  if (m->nspans == 0 && m->ninstants == 0) {
    fprintf(f, "%zu events read; no spans or instants to draw</text>\n", m->events);
    return;
  }
  char a[48], b[48];
  fmt_time(a, sizeof(a), l->from, l->to - l->from, 3);
  fmt_time(b, sizeof(b), l->to, l->to - l->from, 3);
  size_t in_view = st->spans_drawn + st->narrow_merged + st->rects_capped;
  fprintf(f, "%s %s \xe2\x80\x93 %s since the trace's start \xc2\xb7 %zu span%s in view",
          o->has_from || o->has_to ? "window" : "spans", a, b, in_view, in_view == 1 ? "" : "s");
  if (st->narrow_merged) {
    fprintf(f, " \xc2\xb7 %zu spans narrower than %.1f px merged into %zu grey runs",
            st->narrow_merged, SVG_NARROW_PX, st->merged_runs);
  }
  if (st->rects_capped) {
    fprintf(f,
            " \xc2\xb7 <tspan fill=\"" SVG_FAIL_COLOUR
            "\">%zu spans not drawn (cap of %d "
            "shapes; narrow the window with --from/--to)</tspan>",
            st->rects_capped, SVG_MAX_RECTS);
  }
  if (st->arrows_capped) {
    fprintf(f, " \xc2\xb7 %zu arrows not drawn (cap of %d)", st->arrows_capped, SVG_MAX_ARROWS);
  }
  if (m->ignored) {
    fprintf(f,
            " \xc2\xb7 <tspan fill=\"" SVG_FAIL_COLOUR
            "\">%zu malformed event%s ignored"
            "</tspan>",
            m->ignored, m->ignored == 1 ? "" : "s");
  }
  fputs("</text>\n", f);
}

// Writes the picture to o->out through a temporary file beside it, renamed into place only
// when complete, so a failed run leaves no half-written picture.
static int write_svg(const model_t *m, const layout_t *l, const options_t *o) {
  render_stats_t st = {0};
  char *body = NULL;
  size_t body_len = 0;
  FILE *b = open_memstream(&body, &body_len);
  if (!b) {
    fprintf(stderr, "lanework trace svg: out of memory\n");
    return 1;
  }
  double height = render_body(b, m, l, o, &st);
  bool body_ok = !ferror(b);
  if (fclose(b) != 0 || !body_ok) {
    fprintf(stderr, "lanework trace svg: out of memory rendering the picture\n");
    free(body);
    free(st.legend);
    return 1;
  }
  size_t n = strlen(o->out) + 8;
  char *tmp = malloc(n);
  int fd = -1;
  if (tmp) {
    snprintf(tmp, n, "%s.XXXXXX", o->out);
    fd = mkstemp(tmp);
  }
  if (fd < 0) {
    fprintf(stderr, "lanework trace svg: cannot create %s: %s\n", o->out,
            tmp ? strerror(errno) : "out of memory");
    free(tmp);
    free(body);
    free(st.legend);
    return 1;
  }
  // mkstemp makes the file private; a picture gets the usual permissions.
  mode_t mask = umask(0);
  umask(mask);
  (void)fchmod(fd, 0666 & ~mask);
  FILE *f = fdopen(fd, "w");
  bool ok = f != NULL;
  if (ok) {
    render_header(f, m, l, o, &st, height);
    fwrite(body, 1, body_len, f);
    fputs("</svg>\n", f);
    ok = !ferror(f);
    ok = (fclose(f) == 0) && ok;
  } else {
    close(fd);
  }
  int e = errno;
  if (ok && rename(tmp, o->out) != 0) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    fprintf(stderr, "lanework trace svg: cannot write %s: %s\n", o->out, strerror(e));
    unlink(tmp);
  }
  free(tmp);
  free(body);
  free(st.legend);
  return ok ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// The command.

#define SVG_STR_(x) #x
#define SVG_STR(x) SVG_STR_(x)

enum { K_OUTPUT = 1, K_WIDTH, K_FROM, K_TO, K_NO_FLOWS, K_ALL_FLOWS };

static const lw_cli_opt_t svg_opts[] = {
    {.name = "output", .short_name = 'o', .kind = LW_CLI_STRING, .metavar = "OUT.svg",
     .key = K_OUTPUT, .help = "the picture (SVG 1.1; required)"},
    {.name = "width", .kind = LW_CLI_INT, .min = SVG_MIN_WIDTH, .max = SVG_MAX_WIDTH,
     .metavar = "PX", .def = SVG_STR(SVG_DEFAULT_WIDTH), .key = K_WIDTH,
     .help = "picture width in pixels"},
    {.name = "from", .kind = LW_CLI_NUMBER, .metavar = "US", .key = K_FROM,
     .def = "the first span or instant",
     .help = "window start, in microseconds since the trace's\nstart"},
    {.name = "to", .kind = LW_CLI_NUMBER, .metavar = "US", .key = K_TO,
     .def = "the last span or instant", .help = "window end, in microseconds"},
    {.name = "no-flows", .kind = LW_CLI_FLAG, .key = K_NO_FLOWS, .help = "no dependency arrows"},
    {.name = "all-flows", .kind = LW_CLI_FLAG, .key = K_ALL_FLOWS,
     .help = "also draw dispatch flows (submit -> dispatch -> run)"},
    {.name = NULL},
};

static const lw_cli_cmd_t svg_cmd = {
    .name = "trace svg",
    .synopsis = "TRACE.json -o OUT.svg [options]",
    .about = "Draws the trace as swimlanes: one band per process, one row per thread track,\n"
             "spans coloured by callable, instants as markers, dependencies as arrows.",
    .opts = svg_opts,
    .max_positional = 1,
};

static int svg_on_opt(void *user, const lw_cli_opt_t *opt, const lw_cli_value_t *v) {
  options_t *o = user;
  switch (opt->key) {
    case K_OUTPUT: o->out = v->text; break;
    case K_WIDTH: o->width = (int)v->n; break;
    case K_FROM:
      o->from = v->x;
      o->has_from = true;
      break;
    case K_TO:
      o->to = v->x;
      o->has_to = true;
      break;
    case K_NO_FLOWS: o->flows = false; break;
    case K_ALL_FLOWS: o->all_flows = true; break;
    default: break;
  }
  return LW_CLI_OK;
}

static int trace_svg(int argc, char **argv) {
  options_t o = {.width = SVG_DEFAULT_WIDTH, .flows = true};
  int first = 0;
  int prc = lw__cli_parse(&svg_cmd, argc, argv, svg_on_opt, &o, &first);
  if (prc == LW_CLI_HELP) return 0;
  if (prc != LW_CLI_OK) return 2;
  if (first < argc) o.in = argv[first];
  if (!o.in) return lw__cli_error(&svg_cmd, "no trace file given");
  if (!o.out) return lw__cli_error(&svg_cmd, "no output file given (-o OUT.svg)");
  if (o.has_from && o.has_to && !(o.to > o.from)) {
    return lw__cli_error(&svg_cmd, "--from %g must be before --to %g", o.from, o.to);
  }
  model_t m = {0};
  lw_error_t err;
  lw__error_clear(&err);
  if (read_trace(o.in, &m, &err) != LW_OK) {
    fprintf(stderr, "lanework trace svg: %s: %s\n", o.in, err.message);
    model_deinitialize(&m);
    return 2;
  }
  if (m.ignored) {
    fprintf(stderr, "lanework trace svg: %s: %zu malformed event%s ignored (first: %s)\n", o.in,
            m.ignored, m.ignored == 1 ? "" : "s", m.ignored_first);
  }
  layout_t l;
  int rc = 2;
  if (layout_compute(&m, &o, &l, &err) != LW_OK) {
    fprintf(stderr, "lanework trace svg: %s: %s\n", o.in, err.message);
  } else {
    rc = write_svg(&m, &l, &o);
  }
  layout_deinitialize(&l);
  model_deinitialize(&m);
  return rc;
}

static void trace_usage(FILE *f) {
  fprintf(f,
          "usage: lanework trace <subcommand> [options]\n"
          "\n"
          "subcommands:\n"
          "  svg TRACE.json -o OUT.svg   swimlane picture of a trace\n"
          "                              (`lanework trace svg --help`)\n");
}

int lw__tool_trace(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "svg") == 0) return trace_svg(argc - 1, argv + 1);
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    trace_usage(stdout);
    return 0;
  }
  if (argc >= 2) {
    fprintf(stderr, "lanework trace: unknown subcommand '%s' (the one there is: svg)\n\n",
            argv[1]);
  } else {
    fprintf(stderr, "lanework trace: which subcommand? (the one there is: svg)\n\n");
  }
  trace_usage(stderr);
  return 2;
}
