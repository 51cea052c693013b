// lanes/trace_json.c — a capture as Chrome Trace Event JSON (docs/observability.md).
//
// Tracks: each thread's ring is one track (pid, tid). Spans that would partly overlap on one
// track (Perfetto nests spans by containment only) move to an extra track of the same process,
// and queue waits, which overlap freely, are packed onto "queue N" tracks; so no track ever
// holds two spans that partly overlap. Flows are made here from the events' ids: submit ->
// dispatch -> run of one task, and producer run -> consumer run for every DEP event.
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/json.h"
#include "lanes/trace.h"
#include "lanework/status.h"

#define VIRTUAL_TID 0x40000000  // above any Linux tid (at most 2^22)
#define MAX_NEST 16

static const char *kind_cat(uint16_t k) {
  switch (k) {
    case LW_TRACE_RUN: return "run";
    case LW_TRACE_REGISTER: return "register";
    case LW_TRACE_UNREGISTER: return "unregister";
    case LW_TRACE_QUEUE: return "queue";
    case LW_TRACE_HANDOFF: return "handoff";
    case LW_TRACE_SUBMIT: return "submit";
    case LW_TRACE_DISPATCH: return "dispatch";
    case LW_TRACE_ORCH: return "orch";
    case LW_TRACE_SLICE: return "slice";
    case LW_TRACE_STALL: return "stall";
    case LW_TRACE_CANCEL: return "cancel";
    case LW_TRACE_TIMEOUT: return "timeout";
    case LW_TRACE_ESCALATION: return "escalation";
    case LW_TRACE_DEATH: return "death";
    case LW_TRACE_RESPAWN: return "respawn";
    case LW_TRACE_LIVENESS_KILL: return "liveness kill";
    case LW_TRACE_FAILED_FOR_GOOD: return "failed for good";
    case LW_TRACE_PROTOCOL: return "protocol violation";
    case LW_TRACE_COMPILE: return "compile";
    case LW_TRACE_LOAD: return "load";
    case LW_TRACE_PLACEMENT: return "placement";
  }
  return "event";
}

static bool is_span(uint16_t k) {
  return (k < LW_TRACE_SPAN_KINDS_ && k != LW_TRACE_DEP) || k == LW_TRACE_COMPILE ||
         k == LW_TRACE_LOAD;
}

// Where tracks sit inside their process: the caller's threads first, the run lane beside the
// register lane, queue waits last.
static int32_t role_sort(const char *role) {
  static const char *order[] = {"orchestrator", "scheduler", "supervisor", "mailbox loop",
                                "run lane", "register lane", "sub loop", "trace drainer"};
  for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); ++i) {
    if (strstr(role, order[i])) return 10 + (int32_t)i;
  }
  return 0;
}

typedef struct out_track {
  int32_t pid, tid, sort;
  char name[LW_TRACE_NAME_BYTES + 40];
} out_track_t;

typedef struct lane_pack {
  uint64_t key;  // (source track or queue-of-pid) identity
  int n_sub;
  struct {
    int64_t end[MAX_NEST];
    int depth;
    uint32_t out;  // index into the output tracks
  } sub[64];
} lane_pack_t;

typedef struct task_key task_key_t;

typedef struct writer {
  const lw_trace_capture_t *c;
  const task_key_t *keys;  // sorted (by_task); set before the events are written
  size_t n_keys;
  out_track_t *tracks;
  size_t n_tracks, cap_tracks;
  uint32_t *rec_track;  // per record: output track
  lane_pack_t *packs;
  size_t n_packs, cap_packs;
} writer_t;

static uint32_t add_out_track(writer_t *w, int32_t pid, int32_t tid, int32_t sort,
                              const char *name) {
  if (w->n_tracks == w->cap_tracks) {
    size_t cap = w->cap_tracks ? w->cap_tracks * 2 : 64;
    out_track_t *p = realloc(w->tracks, cap * sizeof(*p));
    if (!p) return UINT32_MAX;
    w->tracks = p;
    w->cap_tracks = cap;
  }
  out_track_t *t = &w->tracks[w->n_tracks];
  t->pid = pid;
  t->tid = tid;
  t->sort = sort;
  snprintf(t->name, sizeof(t->name), "%s", name);
  return (uint32_t)w->n_tracks++;
}

static void base_name(const writer_t *w, const lw_trace_track_t *t, char *out, size_t n) {
  if (!t->role[0]) {
    snprintf(out, n, "caller %d", t->tid);
  } else if (t->pid == w->c->parent_pid && t->chip >= 0) {
    snprintf(out, n, "chip %d %s", t->chip, t->role);
  } else {
    snprintf(out, n, "%s", t->role);
  }
}

static lane_pack_t *pack_of(writer_t *w, uint64_t key) {
  for (size_t i = 0; i < w->n_packs; ++i) {
    if (w->packs[i].key == key) return &w->packs[i];
  }
  if (w->n_packs == w->cap_packs) {
    size_t cap = w->cap_packs ? w->cap_packs * 2 : 16;
    lane_pack_t *p = realloc(w->packs, cap * sizeof(*p));
    if (!p) return NULL;
    w->packs = p;
    w->cap_packs = cap;
  }
  lane_pack_t *p = &w->packs[w->n_packs++];
  memset(p, 0, sizeof(*p));
  p->key = key;
  return p;
}

// Puts span [a, b) of source track src (or the queue tracks of its process) on the first
// sub-track where it nests or is disjoint; makes a new one when none fits.
static uint32_t place(writer_t *w, uint32_t src, bool queue, int64_t a, int64_t b) {
  const lw_trace_track_t *t = &w->c->tracks[src];
  uint64_t key = queue ? ((uint64_t)1 << 63) | (uint32_t)t->pid : src;
  lane_pack_t *p = pack_of(w, key);
  if (!p) return UINT32_MAX;
  for (int k = 0;; ++k) {
    if (k == p->n_sub) {
      if (k == 64) return p->sub[63].out;  // pathological: give up separating
      char base[LW_TRACE_NAME_BYTES + 8], name[LW_TRACE_NAME_BYTES + 40];
      int32_t tid, sort;
      if (queue) {
        snprintf(name, sizeof(name), "queue %d", k + 1);
        tid = VIRTUAL_TID + k;
        sort = 100 + k;
      } else {
        base_name(w, t, base, sizeof(base));
        if (k == 0) {
          snprintf(name, sizeof(name), "%s", base);
          tid = t->tid;
        } else {
          snprintf(name, sizeof(name), "%s (overlap %d)", base, k);
          tid = VIRTUAL_TID + 0x1000 * (int32_t)(1 + src % 0x3000) + k;
        }
        sort = role_sort(t->role) * 4 + (k ? 1 : 0);
      }
      uint32_t out = add_out_track(w, t->pid, tid, sort, name);
      if (out == UINT32_MAX) return UINT32_MAX;
      p->sub[k].out = out;
      p->sub[k].depth = 0;
      p->n_sub++;
    }
    int d = p->sub[k].depth;
    while (d > 0 && d <= MAX_NEST && p->sub[k].end[d - 1] <= a) --d;
    p->sub[k].depth = d;
    if (d < MAX_NEST && (d == 0 || b <= p->sub[k].end[d - 1])) {
      p->sub[k].end[d] = b;
      p->sub[k].depth = d + 1;
      return p->sub[k].out;
    }
  }
}

static int by_track_time(const void *x, const void *y, void *ctx) {
  const lw_trace_capture_t *c = ctx;
  const lw_trace_record_t *p = &c->rec[*(const size_t *)x];
  const lw_trace_record_t *q = &c->rec[*(const size_t *)y];
  if (p->ev.ts_ns != q->ev.ts_ns) return p->ev.ts_ns < q->ev.ts_ns ? -1 : 1;
  if (p->ev.dur_ns != q->ev.dur_ns) return p->ev.dur_ns > q->ev.dur_ns ? -1 : 1;
  return 0;
}

// Flows find spans by (run, task, kind), and a dead child's run span its death instant.
struct task_key {
  uint64_t run, task;
  uint16_t kind;
  size_t rec;
};

static int by_task(const void *x, const void *y) {
  const task_key_t *p = x, *q = y;
  if (p->run != q->run) return p->run < q->run ? -1 : 1;
  if (p->task != q->task) return p->task < q->task ? -1 : 1;
  if (p->kind != q->kind) return p->kind < q->kind ? -1 : 1;
  return p->rec < q->rec ? -1 : p->rec > q->rec;
}

static const task_key_t *find_task(const task_key_t *keys, size_t n, uint64_t run, uint64_t task,
                                   uint16_t kind) {
  task_key_t want = {run, task, kind, 0};
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (by_task(&keys[mid], &want) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < n && keys[lo].run == run && keys[lo].task == task && keys[lo].kind == kind) {
    return &keys[lo];
  }
  return NULL;
}

static double us(const lw_trace_capture_t *c, int64_t ns) {
  return (double)(ns - c->t0_ns) / 1000.0;
}

static void common_fields(lw_json_t *j, const writer_t *w, uint32_t out_track) {
  lw__json_kv_int(j, "pid", w->tracks[out_track].pid);
  lw__json_kv_int(j, "tid", w->tracks[out_track].tid);
}

static void flow(lw_json_t *j, const writer_t *w, const char *ph, const char *name, uint64_t id,
                 size_t rec) {
  const lw_trace_event_t *e = &w->c->rec[rec].ev;
  lw__json_begin_object(j);
  lw__json_kv_string(j, "ph", ph);
  if (ph[0] == 'f') lw__json_kv_string(j, "bp", "e");
  lw__json_kv_string(j, "cat", "flow");
  lw__json_kv_string(j, "name", name);
  lw__json_kv_uint(j, "id", id);
  common_fields(j, w, w->rec_track[rec]);
  lw__json_key(j, "ts");
  // The middle of the span, so the flow binds to it and not to a neighbour.
  lw__json_fixed(j, us(w->c, e->ts_ns + e->dur_ns / 2), 3);
  lw__json_end_object(j);
}

// A run span the parent recorded for a child that died while it ran: where its start came
// from, and the death that ended it (the detail of the death instant at its end).
static void dead_run_args(lw_json_t *j, const writer_t *w, const lw_trace_event_t *e) {
  if (e->arg[0] != LW_TRACE_START_KERNEL && e->arg[0] != LW_TRACE_START_DISPATCH) return;
  lw__json_kv_string(j, "start_from", e->arg[0] == LW_TRACE_START_KERNEL ? "kernel start" : "dispatch");
  const task_key_t *death = find_task(w->keys, w->n_keys, e->run_id, e->task_id, LW_TRACE_DEATH);
  if (death) lw__json_kv_string(j, "child_died", w->c->rec[death->rec].ev.name);
}

static void write_event(lw_json_t *j, const writer_t *w, size_t i) {
  const lw_trace_event_t *e = &w->c->rec[i].ev;
  bool span = is_span(e->kind);
  lw__json_begin_object(j);
  lw__json_kv_string(j, "ph", span ? "X" : "i");
  // Instants are faults but for a run lane's look at its placement, which is not one.
  lw__json_kv_string(j, "cat", span || e->kind == LW_TRACE_PLACEMENT ? kind_cat(e->kind) : "fault");
  if (span) {
    lw__json_kv_string(j, "name", e->name[0] ? e->name : kind_cat(e->kind));
  } else {
    lw__json_kv_string(j, "name", kind_cat(e->kind));
    lw__json_kv_string(j, "s", "t");
  }
  common_fields(j, w, w->rec_track[i]);
  lw__json_key(j, "ts");
  lw__json_fixed(j, us(w->c, e->ts_ns), 3);
  if (span) {
    lw__json_key(j, "dur");
    lw__json_fixed(j, (double)e->dur_ns / 1000.0, 3);
  }
  lw__json_key(j, "args");
  lw__json_begin_object(j);
  if (e->run_id) lw__json_kv_uint(j, "run", e->run_id);
  if (e->task_id) lw__json_kv_uint(j, "task", e->task_id);
  if (span && e->name[0] && e->kind != LW_TRACE_ORCH) lw__json_kv_string(j, "callable", e->name);
  if (!span && e->name[0]) lw__json_kv_string(j, "detail", e->name);
  if (e->chip >= 0) lw__json_kv_int(j, "chip", e->chip);
  if (e->kind == LW_TRACE_SLICE) {
    lw__json_kv_uint(j, "slice", e->arg[0]);
    lw__json_kv_uint(j, "work_items", e->arg[1]);
  } else if (span && e->kind != LW_TRACE_QUEUE && e->kind != LW_TRACE_SUBMIT &&
             e->kind != LW_TRACE_HANDOFF) {
    lw__json_kv_string(j, "status", lw_status_name((lw_status_t)e->status));
  }
  if (e->kind == LW_TRACE_RUN) dead_run_args(j, w, e);
  lw__json_end_object(j);
  lw__json_end_object(j);
}

static void metadata(lw_json_t *j, const char *what, int32_t pid, int32_t tid, const char *name,
                     int32_t sort) {
  lw__json_begin_object(j);
  lw__json_kv_string(j, "ph", "M");
  lw__json_kv_string(j, "name", what);
  lw__json_kv_int(j, "pid", pid);
  lw__json_kv_int(j, "tid", tid);
  lw__json_key(j, "args");
  lw__json_begin_object(j);
  if (name) {
    lw__json_kv_string(j, "name", name);
  } else {
    lw__json_kv_int(j, "sort_index", sort);
  }
  lw__json_end_object(j);
  lw__json_end_object(j);
}

lw_status_t lw__trace_write_json(const lw_trace_capture_t *c, FILE *out, uint64_t *out_events,
                                 lw_error_t *err) {
  writer_t w = {.c = c};
  size_t *order = malloc((c->n ? c->n : 1) * sizeof(*order));
  task_key_t *keys = malloc((c->n ? c->n : 1) * sizeof(*keys));
  w.rec_track = malloc((c->n ? c->n : 1) * sizeof(*w.rec_track));
  lw_status_t st = LW_OK;
  if (!order || !keys || !w.rec_track) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "trace: out of memory writing JSON");
    goto done;
  }
  // 1. Tracks: every source track gets its own output track first (so instants and the track
  //    order are stable), then spans in time order are placed.
  for (size_t t = 0; t < c->n_tracks; ++t) (void)place(&w, (uint32_t)t, false, 0, 0);
  for (size_t i = 0; i < c->n; ++i) order[i] = i;
  qsort_r(order, c->n, sizeof(*order), by_track_time, (void *)c);
  size_t n_keys = 0;
  for (size_t k = 0; k < c->n; ++k) {
    size_t i = order[k];
    const lw_trace_record_t *r = &c->rec[i];
    const lw_trace_event_t *e = &r->ev;
    uint32_t t;
    if (is_span(e->kind)) {
      t = place(&w, r->track, e->kind == LW_TRACE_QUEUE, e->ts_ns, e->ts_ns + e->dur_ns);
    } else {
      t = pack_of(&w, r->track)->sub[0].out;
    }
    if (t == UINT32_MAX) {
      st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "trace: out of memory writing JSON");
      goto done;
    }
    w.rec_track[i] = t;
    if ((e->kind == LW_TRACE_RUN || e->kind == LW_TRACE_SUBMIT || e->kind == LW_TRACE_DISPATCH ||
         e->kind == LW_TRACE_DEATH) &&
        e->run_id && e->task_id) {
      keys[n_keys++] = (task_key_t){e->run_id, e->task_id, e->kind, i};
    }
  }
  qsort(keys, n_keys, sizeof(*keys), by_task);
  w.keys = keys;
  w.n_keys = n_keys;

  // 2. The file.
  lw_json_t j;
  lw__json_initialize(&j, out, false);
  lw__json_begin_object(&j);
  lw__json_kv_string(&j, "displayTimeUnit", "ns");
  // Trace viewers read only the keys they know; these two let a script tell a lanework trace
  // and its format's version apart (docs/benchmarks.md, "JSON output").
  lw__json_kv_string(&j, "schema", "lanework.trace");
  lw__json_kv_int(&j, "schema_version", 1);
  lw__json_key(&j, "otherData");
  lw__json_begin_object(&j);
  lw__json_kv_string(&j, "producer", "lanework");
  lw__json_kv_string(&j, "clock", "CLOCK_MONOTONIC");
  lw__json_kv_int(&j, "t0_ns", c->t0_ns);
  lw__json_kv_uint(&j, "dropped_events", c->dropped);
  uint64_t n_written = 0;
  for (size_t i = 0; i < c->n; ++i) n_written += c->rec[i].ev.kind != LW_TRACE_DEP;
  lw__json_kv_uint(&j, "events", n_written);
  lw__json_end_object(&j);
  lw__json_key(&j, "traceEvents");
  lw__json_begin_array(&j);
  for (size_t p = 0; p < c->n_procs; ++p) {
    metadata(&j, "process_name", c->procs[p].pid, 0, c->procs[p].name, 0);
    metadata(&j, "process_sort_index", c->procs[p].pid, 0, NULL, c->procs[p].sort);
  }
  for (size_t t = 0; t < w.n_tracks; ++t) {
    metadata(&j, "thread_name", w.tracks[t].pid, w.tracks[t].tid, w.tracks[t].name, 0);
    metadata(&j, "thread_sort_index", w.tracks[t].pid, w.tracks[t].tid, NULL, w.tracks[t].sort);
  }
  for (size_t k = 0; k < c->n; ++k) {
    if (c->rec[order[k]].ev.kind != LW_TRACE_DEP) write_event(&j, &w, order[k]);
  }
  // Flows: submit -> dispatch -> run of each task, then the dependencies.
  uint64_t flow_id = 0;
  for (size_t k = 0; k < n_keys; ++k) {
    if (keys[k].kind != LW_TRACE_RUN) continue;
    const task_key_t *sub = find_task(keys, n_keys, keys[k].run, keys[k].task, LW_TRACE_SUBMIT);
    const task_key_t *dis =
        find_task(keys, n_keys, keys[k].run, keys[k].task, LW_TRACE_DISPATCH);
    if (!sub && !dis) continue;
    ++flow_id;
    if (sub) flow(&j, &w, "s", "dispatch", flow_id, sub->rec);
    if (dis) flow(&j, &w, sub ? "t" : "s", "dispatch", flow_id, dis->rec);
    flow(&j, &w, "f", "dispatch", flow_id, keys[k].rec);
  }
  for (size_t i = 0; i < c->n; ++i) {
    const lw_trace_event_t *e = &c->rec[i].ev;
    if (e->kind != LW_TRACE_DEP) continue;
    const task_key_t *from = find_task(keys, n_keys, e->arg[1], e->arg[0], LW_TRACE_RUN);
    const task_key_t *to = find_task(keys, n_keys, e->run_id, e->task_id, LW_TRACE_RUN);
    if (!from || !to) continue;  // a task that never ran has no span to point at
    ++flow_id;
    flow(&j, &w, "s", "dep", flow_id, from->rec);
    flow(&j, &w, "f", "dep", flow_id, to->rec);
  }
  lw__json_end_array(&j);
  lw__json_end_object(&j);
  st = lw__json_finish(&j, err);
  if (out_events) *out_events = n_written;
done:
  free(order);
  free(keys);
  free(w.rec_track);
  free(w.tracks);
  free(w.packs);
  return st;
}
