// lanes/trace.c — rings, areas and sessions (see trace.h); the JSON is in trace_json.c.
#include "lanes/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/log.h"
#include "lanes/sys.h"

struct lw_trace_area {
  lw_trace_area_header_t header;
};

// The parent's own heap rings hold more events than a child's: the parent's threads (orch
// functions, the scheduler) record several events per task.
#define HEAP_RING_EVENTS 16384
// The session keeps at most this many events (~200 MiB); past it, events are dropped and
// counted like those of a full ring.
#define SESSION_MAX_EVENTS (2u << 20)
#define DRAIN_PERIOD_NS (5 * 1000 * 1000)
#define MAX_AREAS 64

typedef struct heap_ring {
  struct heap_ring *next;  // g.mu
  lw_trace_ring_header_t *ring;
} heap_ring_t;

typedef struct area_entry {
  lw_trace_area_t *area;
  char name[LW_TRACE_NAME_BYTES];
} area_entry_t;

static _Atomic uint32_t local_flag;
const _Atomic uint32_t *lw__trace_flag = &local_flag;

static struct {
  pthread_mutex_t mu;  // everything below but the child's fields
  heap_ring_t *rings;
  area_entry_t areas[MAX_AREAS];
  uint32_t n_areas;
  // The session.
  bool running;
  bool env_tried;
  bool stop_drainer;
  pthread_t drainer;
  pthread_cond_t cv;
  FILE *file;
  char path[512];
  lw_trace_capture_t cap;
  // A child's area (set once in the child; never in the parent).
  lw_trace_area_t *child_area;
  _Atomic uint64_t epoch;  // bumped by child attach: rings found before it are the parent's
  pthread_key_t key;
  pthread_once_t key_once;
  pid_t env_pid;  // the process whose exit writes the LW_TRACE session
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .key_once = PTHREAD_ONCE_INIT};
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

// The drainer's deadlines come from lw__now_ns: its condvar runs on the monotonic clock.
static void cv_init(void) { lw__cond_init_monotonic(&g.cv); }

static _Thread_local struct {
  lw_trace_ring_header_t *ring;
  uint64_t epoch;
  const char *role;
  int32_t chip;
  bool role_set;
} tl;

static inline lw_trace_event_t *ring_events(lw_trace_ring_header_t *r) {
  return (lw_trace_event_t *)(r + 1);
}

static lw_trace_ring_header_t *area_ring(lw_trace_area_t *a, uint32_t i) {
  return (lw_trace_ring_header_t *)((uint8_t *)a + sizeof(lw_trace_area_header_t) +
                                    (size_t)i * LW_TRACE_RING_BYTES);
}

static int32_t current_tid(void) { return (int32_t)syscall(SYS_gettid); }

static void ring_name(lw_trace_ring_header_t *r) {
  memset(r->role, 0, sizeof(r->role));
  if (tl.role) {
    size_t n = strnlen(tl.role, sizeof(r->role) - 1);
    memcpy(r->role, tl.role, n);
  }
  r->chip = tl.chip;
}

void lw__trace_role(const char *role, int32_t chip) {
  // Names the ring this thread finds next; a ring it already has keeps its name (the drainer
  // reads the name without a lock, so it is written only before the ring is published).
  tl.role = role;
  tl.chip = chip;
  tl.role_set = true;
}

// ---------------------------------------------------------------------------------------------
// Finding the calling thread's ring

static void heap_ring_orphan(void *p) {
  lw_trace_ring_header_t *r = p;
  // The drainer frees it once drained (see drain_heap_rings).
  atomic_store_explicit(&r->state, LW_TRACE_RING_ORPHANED, memory_order_release);
}

static void key_create(void) { (void)pthread_key_create(&g.key, heap_ring_orphan); }

static lw_trace_ring_header_t *heap_ring_new(void) {
  lw_trace_ring_header_t *r =
      calloc(1, sizeof(*r) + (size_t)HEAP_RING_EVENTS * sizeof(lw_trace_event_t));
  heap_ring_t *node = malloc(sizeof(*node));
  if (!r || !node) {
    free(r);
    free(node);
    return NULL;
  }
  r->capacity = HEAP_RING_EVENTS;
  r->pid = (int32_t)getpid();
  r->tid = current_tid();
  if (!tl.role_set) tl.chip = -1;
  ring_name(r);
  atomic_store(&r->state, LW_TRACE_RING_CLAIMED);
  node->ring = r;
  (void)pthread_once(&g.key_once, key_create);
  pthread_mutex_lock(&g.mu);
  node->next = g.rings;
  g.rings = node;
  pthread_mutex_unlock(&g.mu);
  (void)pthread_setspecific(g.key, r);
  return r;
}

static lw_trace_ring_header_t *area_ring_claim(lw_trace_area_t *a) {
  uint32_t n = a->header.n_rings;
  if (n > LW_TRACE_AREA_RINGS) n = LW_TRACE_AREA_RINGS;
  for (uint32_t i = 0; i < n; ++i) {
    lw_trace_ring_header_t *r = area_ring(a, i);
    uint32_t expected = LW_TRACE_RING_FREE;
    if (atomic_compare_exchange_strong(&r->state, &expected, LW_TRACE_RING_CLAIMING)) {
      // Named while CLAIMING, which the drainer skips; CLAIMED publishes the name.
      r->pid = (int32_t)getpid();
      r->tid = current_tid();
      if (!tl.role_set) tl.chip = -1;
      ring_name(r);
      atomic_store_explicit(&r->state, LW_TRACE_RING_CLAIMED, memory_order_release);
      return r;
    }
  }
  return NULL;
}

static lw_trace_ring_header_t *my_ring(void) {
  uint64_t epoch = atomic_load_explicit(&g.epoch, memory_order_relaxed);
  if (tl.ring && tl.epoch == epoch) return tl.ring;
  tl.ring = g.child_area ? area_ring_claim(g.child_area) : heap_ring_new();
  tl.epoch = epoch;
  return tl.ring;
}

void lw__trace_emit(const lw_trace_event_t *e) {
  lw_trace_ring_header_t *r = my_ring();
  if (!r) {
    // Every ring of the area is taken (or the heap is out): the event is lost, and counted.
    if (g.child_area) atomic_fetch_add_explicit(&g.child_area->header.no_ring, 1,
                                                memory_order_relaxed);
    return;
  }
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  if (head - tail >= r->capacity) {
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
    return;
  }
  ring_events(r)[head % r->capacity] = *e;
  atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

static void copy_name(char *dst, const char *src) {
  memset(dst, 0, LW_TRACE_NAME_BYTES);
  if (src) {
    size_t n = strnlen(src, LW_TRACE_NAME_BYTES - 1);
    memcpy(dst, src, n);
  }
}

static void emit_span(lw_trace_kind_t kind, int64_t t0_ns, int64_t t1_ns, uint64_t run_id,
                      uint64_t task_id, int32_t chip, lw_status_t status, const char *name,
                      uint64_t arg0, uint64_t arg1) {
  lw_trace_event_t e;
  e.ts_ns = t0_ns;
  e.dur_ns = t1_ns > t0_ns ? t1_ns - t0_ns : 0;
  e.run_id = run_id;
  e.task_id = task_id;
  e.arg[0] = arg0;
  e.arg[1] = arg1;
  e.kind = (uint16_t)kind;
  e.chip = (int16_t)chip;
  e.status = (int32_t)status;
  copy_name(e.name, name);
  lw__trace_emit(&e);
}

void lw__trace_span(lw_trace_kind_t kind, int64_t t0_ns, int64_t t1_ns, uint64_t run_id,
                    uint64_t task_id, int32_t chip, lw_status_t status, const char *name) {
  if (!lw__trace_on()) return;
  emit_span(kind, t0_ns, t1_ns, run_id, task_id, chip, status, name, 0, 0);
}

void lw__trace_instant(lw_trace_kind_t kind, int32_t chip, uint64_t run_id, uint64_t task_id,
                       const char *detail) {
  if (!lw__trace_on()) return;
  lw__trace_span(kind, lw__now_ns(), 0, run_id, task_id, chip, LW_OK, detail);
}

void lw__trace_slice(int64_t t0_ns, int64_t t1_ns, uint64_t run_id, uint64_t task_id,
                     int32_t chip, uint64_t index, uint64_t items, const char *name) {
  if (!lw__trace_on()) return;
  emit_span(LW_TRACE_SLICE, t0_ns, t1_ns, run_id, task_id, chip, LW_OK, name, index, items);
}

void lw__trace_dep(uint64_t run_id, uint64_t task_id, uint64_t producer_run,
                   uint64_t producer_task) {
  if (!lw__trace_on()) return;
  lw_trace_event_t e;
  memset(&e, 0, sizeof(e));
  e.ts_ns = lw__now_ns();
  e.run_id = run_id;
  e.task_id = task_id;
  e.arg[0] = producer_task;
  e.arg[1] = producer_run;
  e.kind = LW_TRACE_DEP;
  e.chip = -1;
  lw__trace_emit(&e);
}

// ---------------------------------------------------------------------------------------------
// Draining (g.mu held)

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap * 2 : 1024;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

static void copy_role(char *dst, const char *src) {
  memset(dst, 0, LW_TRACE_ROLE_BYTES);
  memcpy(dst, src, strnlen(src, LW_TRACE_ROLE_BYTES - 1));
}

static const char *proc_name_of(const area_entry_t *a) {
  return a ? a->name : "lanework parent";
}

static int32_t proc_sort(const char *name) {
  int idx = 0;
  if (sscanf(name, "chip %d", &idx) == 1) return 1 + idx;
  if (sscanf(name, "sub %d", &idx) == 1) return 100 + idx;
  return 0;
}

static void note_process(int32_t pid, const char *name) {
  lw_trace_capture_t *c = &g.cap;
  for (size_t i = 0; i < c->n_procs; ++i) {
    if (c->procs[i].pid == pid) return;
  }
  if (!grow((void **)&c->procs, &c->cap_procs, c->n_procs + 1, sizeof(*c->procs))) return;
  lw_trace_process_t *p = &c->procs[c->n_procs++];
  memset(p, 0, sizeof(*p));
  p->pid = pid;
  copy_name(p->name, name);
  p->sort = proc_sort(name);
}

// The role a ring's thread gave it, NUL-terminated (a child writes it).
static void ring_role(const lw_trace_ring_header_t *r, char role[LW_TRACE_ROLE_BYTES]) {
  memcpy(role, r->role, LW_TRACE_ROLE_BYTES);
  role[LW_TRACE_ROLE_BYTES - 1] = '\0';
}

// The process and thread a ring's events belong to. A child writes these: its tid is kept out
// of the range the writer uses for virtual tracks (Linux tids stay below 2^22).
static void ring_ids(const lw_trace_ring_header_t *r, int32_t *pid, int32_t *tid) {
  *pid = r->pid;
  *tid = r->tid;
  if (*tid <= 0 || *tid >= 0x40000000) *tid = 0x3fffffff;
}

static uint32_t note_track_named(int32_t pid, int32_t tid, const char *role, int32_t chip) {
  lw_trace_capture_t *c = &g.cap;
  for (size_t i = 0; i < c->n_tracks; ++i) {
    if (c->tracks[i].pid == pid && c->tracks[i].tid == tid) {
      // A role set after the first events names the whole track.
      if (role[0] && strcmp(c->tracks[i].role, role) != 0) {
        copy_role(c->tracks[i].role, role);
        c->tracks[i].chip = chip;
      }
      return (uint32_t)i;
    }
  }
  if (!grow((void **)&c->tracks, &c->cap_tracks, c->n_tracks + 1, sizeof(*c->tracks))) {
    return UINT32_MAX;
  }
  lw_trace_track_t *t = &c->tracks[c->n_tracks];
  t->pid = pid;
  t->tid = tid;
  t->chip = chip;
  copy_role(t->role, role);
  return (uint32_t)c->n_tracks++;
}

static uint32_t note_track(const lw_trace_ring_header_t *r, int32_t pid, int32_t tid) {
  char role[LW_TRACE_ROLE_BYTES];
  ring_role(r, role);
  return note_track_named(pid, tid, role, r->chip);
}

// Moves ring r's events into the session (or discards them when none runs). r may be a child's
// ring: every counter is checked against the capacity its owner wrote.
static void drain_ring(lw_trace_ring_header_t *r, uint32_t capacity, const area_entry_t *area) {
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  if (head == tail) return;
  lw_trace_capture_t *c = &g.cap;
  if (head < tail || head - tail > capacity) {
    // Garbage from a broken child: skip to its head, counting the gap when it is plausible.
    if (g.running && head > tail) c->dropped += capacity;
    atomic_store_explicit(&r->tail, head, memory_order_release);
    return;
  }
  if (!g.running) {
    atomic_store_explicit(&r->tail, head, memory_order_release);
    return;
  }
  int32_t pid, tid;
  ring_ids(r, &pid, &tid);
  note_process(pid, proc_name_of(area));
  uint32_t track = note_track(r, pid, tid);
  uint64_t n = head - tail;
  if (track == UINT32_MAX || c->n + n > SESSION_MAX_EVENTS ||
      !grow((void **)&c->rec, &c->cap, c->n + n, sizeof(*c->rec))) {
    c->dropped += n;
    atomic_store_explicit(&r->tail, head, memory_order_release);
    return;
  }
  lw_trace_event_t *ev = ring_events(r);
  for (uint64_t i = tail; i < head; ++i) {
    lw_trace_record_t *out = &c->rec[c->n];
    out->ev = ev[i % capacity];
    out->track = track;
    // Events from before this session (recorded as the previous one stopped) and kinds this
    // build does not know are not part of it; nor are times no recorder writes (a negative
    // duration, an end past INT64_MAX), which a broken child can, and which would make the
    // writer add past int64 and put negative durations in the file.
    if (out->ev.ts_ns < c->t0_ns || out->ev.kind == 0 || out->ev.kind >= LW_TRACE_KIND_COUNT_ ||
        out->ev.dur_ns < 0 || out->ev.dur_ns > INT64_MAX - out->ev.ts_ns) {
      continue;
    }
    out->ev.name[LW_TRACE_NAME_BYTES - 1] = '\0';
    c->n++;
  }
  atomic_store_explicit(&r->tail, head, memory_order_release);
}

static void drain_dropped(lw_trace_ring_header_t *r) {
  uint64_t d = atomic_exchange_explicit(&r->dropped, 0, memory_order_relaxed);
  if (g.running) g.cap.dropped += d;
}

static void drain_area(const area_entry_t *a) {
  uint32_t lost = atomic_exchange_explicit(&a->area->header.no_ring, 0, memory_order_relaxed);
  if (g.running) g.cap.dropped += lost;
  uint32_t n = a->area->header.n_rings;
  if (n > LW_TRACE_AREA_RINGS) n = LW_TRACE_AREA_RINGS;
  for (uint32_t i = 0; i < n; ++i) {
    lw_trace_ring_header_t *r = area_ring(a->area, i);
    // FREE: nobody records there; CLAIMING: its thread is naming it. Any other value (a
    // broken child's) is drained like CLAIMED: its counters are checked anyway.
    uint32_t state = atomic_load_explicit(&r->state, memory_order_acquire);
    if (state == LW_TRACE_RING_FREE || state == LW_TRACE_RING_CLAIMING) continue;
    drain_ring(r, LW_TRACE_RING_EVENTS, a);
    drain_dropped(r);
  }
}

static void drain_all(void) {
  for (heap_ring_t **pp = &g.rings; *pp;) {
    heap_ring_t *node = *pp;
    lw_trace_ring_header_t *r = node->ring;
    // Orphaned before the drain: its thread wrote its last event before marking it.
    bool orphaned =
        atomic_load_explicit(&r->state, memory_order_acquire) == LW_TRACE_RING_ORPHANED;
    drain_ring(r, r->capacity, NULL);
    drain_dropped(r);
    if (orphaned) {
      *pp = node->next;
      free(r);
      free(node);
    } else {
      pp = &node->next;
    }
  }
  for (uint32_t i = 0; i < g.n_areas; ++i) drain_area(&g.areas[i]);
}

static void *drainer_main(void *arg) {
  (void)arg;
  lw__trace_role("trace drainer", -1);
  pthread_mutex_lock(&g.mu);
  while (!g.stop_drainer) {
    (void)lw__cond_wait_until(&g.cv, &g.mu, lw__now_ns() + DRAIN_PERIOD_NS);
    if (!g.stop_drainer) drain_all();
  }
  pthread_mutex_unlock(&g.mu);
  return NULL;
}

// ---------------------------------------------------------------------------------------------
// Areas

void lw__trace_area_initialize(lw_trace_area_t *a) {
  a->header.n_rings = LW_TRACE_AREA_RINGS;
  a->header.ring_events = LW_TRACE_RING_EVENTS;
  for (uint32_t i = 0; i < LW_TRACE_AREA_RINGS; ++i) {
    area_ring(a, i)->capacity = LW_TRACE_RING_EVENTS;
  }
}

void lw__trace_area_attach(lw_trace_area_t *a, const char *process_name) {
  pthread_mutex_lock(&g.mu);
  if (g.n_areas < MAX_AREAS) {
    area_entry_t *e = &g.areas[g.n_areas++];
    e->area = a;
    copy_name(e->name, process_name);
    atomic_store(&a->header.on, g.running ? 1u : 0u);
  } else {
    lw__log(LW_LOG_WARN, "trace: more than %d child processes at once; %s is not traced",
            MAX_AREAS, process_name);
  }
  pthread_mutex_unlock(&g.mu);
}

static void area_reset_locked(lw_trace_area_t *a) {
  area_entry_t *entry = NULL;
  for (uint32_t i = 0; i < g.n_areas; ++i) {
    if (g.areas[i].area == a) entry = &g.areas[i];
  }
  if (entry) drain_area(entry);
  for (uint32_t i = 0; i < LW_TRACE_AREA_RINGS; ++i) {
    lw_trace_ring_header_t *r = area_ring(a, i);
    atomic_store(&r->tail, atomic_load(&r->head));
    r->capacity = LW_TRACE_RING_EVENTS;
    atomic_store(&r->state, LW_TRACE_RING_FREE);
  }
}

void lw__trace_area_reset(lw_trace_area_t *a) {
  pthread_mutex_lock(&g.mu);
  area_reset_locked(a);
  pthread_mutex_unlock(&g.mu);
}

void lw__trace_area_detach(lw_trace_area_t *a) {
  pthread_mutex_lock(&g.mu);
  area_reset_locked(a);
  for (uint32_t i = 0; i < g.n_areas; ++i) {
    if (g.areas[i].area == a) {
      g.areas[i] = g.areas[--g.n_areas];
      break;
    }
  }
  atomic_store(&a->header.on, 0u);
  pthread_mutex_unlock(&g.mu);
}

void lw__trace_child_attach(lw_trace_area_t *a) {
  // Never g.mu here: a fork may have copied it locked. The parent's heap rings this process
  // inherited are abandoned (the epoch makes every thread find a ring in the area).
  g.child_area = a;
  g.rings = NULL;
  g.n_areas = 0;
  g.running = false;
  lw__trace_flag = &a->header.on;
  atomic_fetch_add(&g.epoch, 1);
}

// A dead child's run span goes on the track of its thread of the given role. When that thread
// recorded nothing (no ring of that role), the span gets a track of its own in the child's
// process, with this tid: below the writer's virtual tracks, above any Linux tid, and not the
// one a child's garbage tid is mapped to (ring_ids).
#define DEAD_RUN_TID 0x3ffffffe

// Whether the session holds a run span of (run_id, task_id) recorded in process pid (g.mu held).
static bool session_has_run(int32_t pid, uint64_t run_id, uint64_t task_id) {
  const lw_trace_capture_t *c = &g.cap;
  // From the newest: a run the child ended just before it died was drained last.
  for (size_t i = c->n; i-- > 0;) {
    const lw_trace_event_t *e = &c->rec[i].ev;
    if (e->kind == LW_TRACE_RUN && e->run_id == run_id && e->task_id == task_id &&
        c->tracks[c->rec[i].track].pid == pid) {
      return true;
    }
  }
  return false;
}

// Appends e on track to the session (g.mu held), or counts it dropped.
static void session_append(const lw_trace_event_t *e, uint32_t track) {
  lw_trace_capture_t *c = &g.cap;
  if (track == UINT32_MAX || c->n + 1 > SESSION_MAX_EVENTS ||
      !grow((void **)&c->rec, &c->cap, c->n + 1, sizeof(*c->rec))) {
    c->dropped++;
    return;
  }
  c->rec[c->n].ev = *e;
  c->rec[c->n].track = track;
  c->n++;
}

void lw__trace_area_record_dead_run(lw_trace_area_t *a, int32_t pid, const char *role,
                                    const lw_trace_dead_run_t *r) {
  if (!lw__trace_on()) return;
  pthread_mutex_lock(&g.mu);
  const area_entry_t *entry = NULL;
  for (uint32_t i = 0; i < g.n_areas; ++i) {
    if (g.areas[i].area == a) entry = &g.areas[i];
  }
  if (!g.running || !entry) {
    pthread_mutex_unlock(&g.mu);
    return;
  }
  // Everything the child recorded first: its own span of this run, if it wrote one, and the
  // track of its thread of that role.
  drain_area(entry);
  int32_t tid = DEAD_RUN_TID;
  int32_t chip = r->chip;
  uint32_t n = a->header.n_rings;
  if (n > LW_TRACE_AREA_RINGS) n = LW_TRACE_AREA_RINGS;
  for (uint32_t i = 0; i < n; ++i) {
    const lw_trace_ring_header_t *q = area_ring(a, i);
    uint32_t state = atomic_load_explicit(&q->state, memory_order_acquire);
    if (state == LW_TRACE_RING_FREE || state == LW_TRACE_RING_CLAIMING) continue;
    char q_role[LW_TRACE_ROLE_BYTES];
    ring_role(q, q_role);
    if (strcmp(q_role, role) != 0) continue;
    ring_ids(q, &pid, &tid);
    chip = q->chip;
    break;
  }
  if (!session_has_run(pid, r->run_id, r->task_id)) {
    note_process(pid, entry->name);
    uint32_t track = note_track_named(pid, tid, role, chip);
    lw_trace_event_t e;
    memset(&e, 0, sizeof(e));
    // A kernel that started before the session did: the session shows the part it saw.
    e.ts_ns = r->t0_ns > g.cap.t0_ns ? r->t0_ns : g.cap.t0_ns;
    e.dur_ns = r->t1_ns > e.ts_ns ? r->t1_ns - e.ts_ns : 0;
    e.run_id = r->run_id;
    e.task_id = r->task_id;
    e.arg[0] = r->start_from;
    e.kind = LW_TRACE_RUN;
    e.chip = (int16_t)r->chip;
    e.status = (int32_t)r->status;
    copy_name(e.name, r->callable);
    session_append(&e, track);
    // The death at the span's end, on the same track, naming the run it cut.
    e.ts_ns += e.dur_ns;
    e.dur_ns = 0;
    e.arg[0] = 0;
    e.kind = LW_TRACE_DEATH;
    e.status = LW_OK;
    copy_name(e.name, r->death);
    session_append(&e, track);
  }
  pthread_mutex_unlock(&g.mu);
}

// ---------------------------------------------------------------------------------------------
// Sessions

lw_status_t lw__trace_begin(const char *path, lw_error_t *err) {
  if (path && !path[0]) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "trace: empty path");
  }
  if (g.child_area) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "trace: a lanework child process cannot start a session");
  }
  FILE *f = NULL;
  if (path) {
    if (strlen(path) >= sizeof(g.path)) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "trace: path longer than %zu bytes",
                           sizeof(g.path) - 1);
    }
    f = fopen(path, "we");
    if (!f) {
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "trace: cannot write %s: %s", path,
                           strerror(errno));
    }
  }
  pthread_mutex_lock(&g.mu);
  if (g.running) {
    pthread_mutex_unlock(&g.mu);
    if (f) {
      fclose(f);
    }
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "trace: a session is already running (writing %s)",
                         g.path[0] ? g.path : "to memory");
  }
  memset(&g.cap, 0, sizeof(g.cap));
  g.cap.t0_ns = lw__now_ns();
  g.cap.parent_pid = (int32_t)getpid();
  g.file = f;
  snprintf(g.path, sizeof(g.path), "%s", path ? path : "");
  // Whatever rings hold from before belongs to no session.
  drain_all();
  g.running = true;
  g.stop_drainer = false;
  note_process(g.cap.parent_pid, "lanework parent");
  for (uint32_t i = 0; i < g.n_areas; ++i) atomic_store(&g.areas[i].area->header.on, 1u);
  atomic_store(&local_flag, 1u);
  (void)pthread_once(&cv_once, cv_init);
  int rc = lw__sys_thread_start(&g.drainer, "lw-trace", drainer_main, NULL);
  if (rc != 0) {
    g.running = false;
    atomic_store(&local_flag, 0u);
    for (uint32_t i = 0; i < g.n_areas; ++i) atomic_store(&g.areas[i].area->header.on, 0u);
    pthread_mutex_unlock(&g.mu);
    if (f) fclose(f);
    lw__trace_capture_free(&g.cap);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "trace: cannot start the drainer thread (error %d)", rc);
  }
  pthread_mutex_unlock(&g.mu);
  return LW_OK;
}

lw_status_t lw__trace_end(lw_trace_capture_t *out, lw_trace_summary_t *summary,
                          lw_error_t *err) {
  pthread_mutex_lock(&g.mu);
  if (!g.running) {
    pthread_mutex_unlock(&g.mu);
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0, "trace: no session is running");
  }
  atomic_store(&local_flag, 0u);
  for (uint32_t i = 0; i < g.n_areas; ++i) atomic_store(&g.areas[i].area->header.on, 0u);
  g.stop_drainer = true;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  (void)pthread_join(g.drainer, NULL);
  pthread_mutex_lock(&g.mu);
  drain_all();
  g.running = false;
  lw_trace_capture_t cap = g.cap;
  memset(&g.cap, 0, sizeof(g.cap));
  FILE *f = g.file;
  g.file = NULL;
  char path[sizeof(g.path)];
  memcpy(path, g.path, sizeof(path));
  pthread_mutex_unlock(&g.mu);

  lw_status_t st = LW_OK;
  uint64_t written = 0;
  if (f) {
    st = lw__trace_write_json(&cap, f, &written, err);
    if (fclose(f) != 0 && st == LW_OK) {
      st = lw__error_set(err, LW_UNAVAILABLE, -1, 0, "trace: writing %s failed: %s", path,
                         strerror(errno));
    } else if (st != LW_OK) {
      lw_error_t inner = *err;
      st = lw__error_set(err, st, -1, 0, "trace: writing %s failed: %s", path, inner.message);
    }
  }
  if (cap.dropped) {
    lw__log(LW_LOG_WARN, "trace: %llu events dropped (full rings)",
            (unsigned long long)cap.dropped);
  }
  if (summary) {
    summary->events = f ? written : cap.n;
    summary->dropped_events = cap.dropped;
  }
  if (out) {
    *out = cap;
  } else {
    lw__trace_capture_free(&cap);
  }
  return st;
}

void lw__trace_flush(void) {
  pthread_mutex_lock(&g.mu);
  drain_all();
  pthread_mutex_unlock(&g.mu);
}

void lw__trace_capture_free(lw_trace_capture_t *c) {
  free(c->rec);
  free(c->tracks);
  free(c->procs);
  memset(c, 0, sizeof(*c));
}

static void env_session_exit(void) {
  if (getpid() != g.env_pid || !lw_trace_active()) return;
  lw_error_t err;
  lw_trace_summary_t s;
  if (lw__trace_end(NULL, &s, &err) != LW_OK) {
    lw__log(LW_LOG_WARN, "%s", err.message);
  }
}

void lw__trace_from_env(void) {
  pthread_mutex_lock(&g.mu);
  bool tried = g.env_tried;
  g.env_tried = true;
  pthread_mutex_unlock(&g.mu);
  if (tried || g.child_area) return;
  const char *path = getenv("LW_TRACE");
  if (!path || !path[0]) return;
  lw_error_t err;
  if (lw__trace_begin(path, &err) != LW_OK) {
    lw__log(LW_LOG_WARN, "LW_TRACE: %s", err.message);
    return;
  }
  g.env_pid = getpid();
  atexit(env_session_exit);
}

// ---------------------------------------------------------------------------------------------
// Public API

lw_status_t lw_trace_start(const char *path) {
  lw_error_t err;
  if (!path) return lw__fail(LW_INVALID_ARGUMENT, "lw_trace_start: path is NULL");
  lw_status_t st = lw__trace_begin(path, &err);
  return st == LW_OK ? st : lw__last_error_store(&err);
}

lw_status_t lw_trace_stop(lw_trace_summary_t *summary) {
  lw_error_t err;
  lw_status_t st = lw__trace_end(NULL, summary, &err);
  return st == LW_OK ? st : lw__last_error_store(&err);
}

bool lw_trace_active(void) {
  pthread_mutex_lock(&g.mu);
  bool r = g.running;
  pthread_mutex_unlock(&g.mu);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Overlap from events

typedef struct span {
  int64_t a, b;
} span_t;

static int span_cmp(const void *x, const void *y) {
  const span_t *p = x, *q = y;
  return (p->a > q->a) - (p->a < q->a);
}

// The fraction of register span c->rec[i] covered by the run spans of its chip and process,
// merged into disjoint intervals; runs is scratch room for c->n spans.
static double covered(const lw_trace_capture_t *c, size_t i, span_t *runs) {
  const lw_trace_event_t *reg = &c->rec[i].ev;
  int32_t pid = c->tracks[c->rec[i].track].pid;
  size_t n = 0;
  for (size_t k = 0; k < c->n; ++k) {
    const lw_trace_event_t *e = &c->rec[k].ev;
    if (e->kind != LW_TRACE_RUN || e->chip != reg->chip) continue;
    if (c->tracks[c->rec[k].track].pid != pid) continue;
    runs[n++] = (span_t){e->ts_ns, e->ts_ns + e->dur_ns};
  }
  qsort(runs, n, sizeof(*runs), span_cmp);
  int64_t a = reg->ts_ns, b = reg->ts_ns + reg->dur_ns, sum = 0, cur_a = 0, cur_b = 0;
  bool open = false;
  for (size_t k = 0; k <= n; ++k) {
    if (k < n && open && runs[k].a <= cur_b) {
      if (runs[k].b > cur_b) cur_b = runs[k].b;
      continue;
    }
    if (open) {
      int64_t lo = cur_a > a ? cur_a : a, hi = cur_b < b ? cur_b : b;
      if (hi > lo) sum += hi - lo;
    }
    if (k < n) {
      cur_a = runs[k].a;
      cur_b = runs[k].b;
      open = true;
    }
  }
  return (double)sum / (double)(b - a);
}

static bool is_register_span(const lw_trace_capture_t *c, size_t i) {
  return i < c->n && c->rec[i].ev.kind == LW_TRACE_REGISTER && c->rec[i].ev.dur_ns > 0;
}

double lw__trace_register_covered(const lw_trace_capture_t *c, size_t index) {
  if (!is_register_span(c, index)) return -1;
  span_t *runs = malloc(c->n * sizeof(*runs));
  if (!runs) return -1;
  double f = covered(c, index, runs);
  free(runs);
  return f;
}

double lw__trace_overlap_by_events(const lw_trace_capture_t *c, size_t *n_spans) {
  double sum = 0;
  size_t count = 0;
  span_t *runs = malloc((c->n ? c->n : 1) * sizeof(*runs));
  if (!runs) return -1;
  for (size_t i = 0; i < c->n; ++i) {
    if (!is_register_span(c, i)) continue;
    sum += covered(c, i, runs);
    ++count;
  }
  free(runs);
  if (n_spans) *n_spans = count;
  return count ? sum / (double)count : -1;
}
