// tests/trace_test_util.h — reading a trace file (Chrome Trace Event JSON, docs/observability.md)
// back with jansson in tests: loading it, the names of processes and thread tracks, and the
// track rule checker (a span on a track either contains or is disjoint from every other span
// on it), and running a tool quietly. Used by the trace tests of tests/lanes, tests/parent and
// tests/faults.
#ifndef LANEWORK_TESTS_TRACE_TEST_UTIL_H_
#define LANEWORK_TESTS_TRACE_TEST_UTIL_H_

#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// Loads the file at path; fails the test with jansson's complaint when it is not one JSON
// object with a "traceEvents" array and an "otherData" object.
static inline json_t *tt_load(const char *path) {
  json_error_t e;
  json_t *doc = json_load_file(path, 0, &e);
  cr_assert_not_null(doc, "%s: jansson: %s at %d:%d", path, e.text, e.line, e.column);
  cr_assert(json_is_array(json_object_get(doc, "traceEvents")), "%s: no traceEvents array",
            path);
  cr_assert(json_is_object(json_object_get(doc, "otherData")), "%s: no otherData object", path);
  return doc;
}

static inline json_t *tt_events(json_t *doc) { return json_object_get(doc, "traceEvents"); }

static inline const char *tt_str(json_t *ev, const char *key) {
  return json_string_value(json_object_get(ev, key));
}

static inline bool tt_is(json_t *ev, const char *ph) {
  const char *p = tt_str(ev, "ph");
  return p && strcmp(p, ph) == 0;
}

static inline int64_t tt_int(json_t *ev, const char *key) {
  json_t *v = json_object_get(ev, key);
  cr_assert(json_is_integer(v), "'%s' is not an integer in an event of ph '%s'", key,
            json_string_value(json_object_get(ev, "ph")));
  return (int64_t)json_integer_value(v);
}

// An integer field of ev's "args", or def when it has none.
static inline int64_t tt_arg_int(json_t *ev, const char *key, int64_t def) {
  json_t *v = json_object_get(json_object_get(ev, "args"), key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static inline const char *tt_arg_str(json_t *ev, const char *key) {
  return json_string_value(json_object_get(json_object_get(ev, "args"), key));
}

static inline uint64_t tt_other_uint(json_t *doc, const char *key) {
  json_t *v = json_object_get(json_object_get(doc, "otherData"), key);
  cr_assert(json_is_integer(v), "otherData.%s is not an integer", key);
  return (uint64_t)json_integer_value(v);
}

// ts or dur (microseconds with 3 decimals) as whole nanoseconds.
static inline int64_t tt_ns(json_t *ev, const char *key) {
  json_t *v = json_object_get(ev, key);
  cr_assert(json_is_number(v), "'%s' is not a number in an event of ph '%s'", key,
            json_string_value(json_object_get(ev, "ph")));
  return (int64_t)llround(json_number_value(v) * 1000.0);
}

// The name an "M" event of kind what ("process_name", "thread_name") gives (pid, tid); tid is
// ignored for process names. NULL when there is none.
static inline const char *tt_meta_name(json_t *doc, const char *what, int64_t pid, int64_t tid) {
  size_t i;
  json_t *ev;
  bool thread = strcmp(what, "thread_name") == 0;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "M")) continue;
    const char *name = tt_str(ev, "name");
    if (!name || strcmp(name, what) != 0) continue;
    if (tt_int(ev, "pid") != pid || (thread && tt_int(ev, "tid") != tid)) continue;
    return tt_arg_str(ev, "name");
  }
  return NULL;
}

static inline const char *tt_process_name(json_t *doc, int64_t pid) {
  return tt_meta_name(doc, "process_name", pid, 0);
}

static inline const char *tt_thread_name(json_t *doc, int64_t pid, int64_t tid) {
  return tt_meta_name(doc, "thread_name", pid, tid);
}

// Every event that is not metadata has integer pid and tid, a numeric ts, and (spans) a
// numeric dur that is not negative; its process has a process_name and its track a
// thread_name. Fails the test naming the first event that breaks it.
static inline void tt_assert_all_named(json_t *doc) {
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (tt_is(ev, "M")) continue;
    int64_t pid = tt_int(ev, "pid"), tid = tt_int(ev, "tid");
    (void)tt_ns(ev, "ts");
    if (tt_is(ev, "X")) cr_assert_geq(tt_ns(ev, "dur"), 0, "negative dur in event %zu", i);
    cr_assert_not_null(tt_process_name(doc, pid), "process %lld has no process_name (event %zu)",
                       (long long)pid, i);
    cr_assert_not_null(tt_thread_name(doc, pid, tid),
                       "track %lld/%lld has no thread_name (event %zu)", (long long)pid,
                       (long long)tid, i);
  }
}

typedef struct tt_span {
  int64_t pid, tid, a, b;
  size_t index;  // in traceEvents
} tt_span_t;

static inline int tt_span_cmp(const void *x, const void *y) {
  const tt_span_t *p = x, *q = y;
  if (p->pid != q->pid) return p->pid < q->pid ? -1 : 1;
  if (p->tid != q->tid) return p->tid < q->tid ? -1 : 1;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  if (p->b != q->b) return p->b > q->b ? -1 : 1;  // the container first
  return 0;
}

// The track rule: per (pid, tid), spans sorted by start (longest first) must nest like a stack.
// Returns how many spans partly overlap an enclosing one on their track; the first is described
// in why (which may be NULL).
static inline size_t tt_partial_overlaps(json_t *doc, char *why, size_t why_bytes) {
  json_t *events = tt_events(doc);
  size_t n = 0, i;
  json_t *ev;
  tt_span_t *s = malloc((json_array_size(events) + 1) * sizeof(*s));
  int64_t *stack = malloc((json_array_size(events) + 1) * sizeof(*stack));
  cr_assert(s && stack);
  json_array_foreach(events, i, ev) {
    if (!tt_is(ev, "X")) continue;
    int64_t a = tt_ns(ev, "ts");
    s[n++] = (tt_span_t){tt_int(ev, "pid"), tt_int(ev, "tid"), a, a + tt_ns(ev, "dur"), i};
  }
  qsort(s, n, sizeof(*s), tt_span_cmp);
  size_t bad = 0, depth = 0;
  if (why && why_bytes) why[0] = '\0';
  for (size_t k = 0; k < n; ++k) {
    if (k > 0 && (s[k].pid != s[k - 1].pid || s[k].tid != s[k - 1].tid)) depth = 0;
    while (depth > 0 && stack[depth - 1] <= s[k].a) --depth;
    if (depth > 0 && s[k].b > stack[depth - 1]) {
      if (bad == 0 && why) {
        snprintf(why, why_bytes,
                 "track %lld/%lld: span [%lld, %lld) ns (event %zu) starts inside one that ends "
                 "at %lld",
                 (long long)s[k].pid, (long long)s[k].tid, (long long)s[k].a, (long long)s[k].b,
                 s[k].index, (long long)stack[depth - 1]);
      }
      ++bad;
      continue;  // keep checking against the enclosing span
    }
    stack[depth++] = s[k].b;
  }
  free(s);
  free(stack);
  return bad;
}

static inline void tt_assert_no_partial_overlap(json_t *doc) {
  char why[256];
  size_t bad = tt_partial_overlaps(doc, why, sizeof(why));
  cr_assert_eq(bad, 0, "%zu spans partly overlap another on their track; first: %s", bad, why);
}

// The "run" X span of (run, task), or NULL; fails the test when there are several.
static inline json_t *tt_run_span(json_t *doc, uint64_t run, uint64_t task) {
  size_t i;
  json_t *ev, *found = NULL;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X")) continue;
    const char *cat = tt_str(ev, "cat");
    if (!cat || strcmp(cat, "run") != 0) continue;
    if (tt_arg_int(ev, "run", 0) != (int64_t)run || tt_arg_int(ev, "task", 0) != (int64_t)task) {
      continue;
    }
    cr_assert_null(found, "two run spans for run %llu task %llu", (unsigned long long)run,
                   (unsigned long long)task);
    found = ev;
  }
  return found;
}

// The "run" X span on the flow event's track that holds its ts, or NULL.
static inline json_t *tt_run_span_at(json_t *doc, json_t *flow) {
  int64_t pid = tt_int(flow, "pid"), tid = tt_int(flow, "tid"), t = tt_ns(flow, "ts");
  size_t i;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (!tt_is(ev, "X")) continue;
    const char *cat = tt_str(ev, "cat");
    if (!cat || strcmp(cat, "run") != 0) continue;
    if (tt_int(ev, "pid") != pid || tt_int(ev, "tid") != tid) continue;
    int64_t a = tt_ns(ev, "ts");
    if (a <= t && t <= a + tt_ns(ev, "dur")) return ev;
  }
  return NULL;
}

// How many events have ph and name (either may be NULL: any).
static inline size_t tt_count(json_t *doc, const char *ph, const char *name) {
  size_t i, n = 0;
  json_t *ev;
  json_array_foreach(tt_events(doc), i, ev) {
    if (ph && !tt_is(ev, ph)) continue;
    const char *nm = tt_str(ev, "name");
    if (name && (!nm || strcmp(nm, name) != 0)) continue;
    ++n;
  }
  return n;
}

// Runs argv (argv[0] a path or a program on PATH) with its output discarded; its exit status,
// 127 when it could not be started. For `lanework trace svg` and the tools that read a picture.
static inline int tt_run_quiet(const char *const *argv) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif  // LANEWORK_TESTS_TRACE_TEST_UTIL_H_
