// lanes/trace.h — the recorder behind lanework/trace.h.
//
// Recording: a thread writes fixed-size events into its own ring (single producer), found
// through a thread-local pointer; the session's drainer thread (single consumer) moves them
// into the session's memory every few milliseconds. In the parent a ring is heap memory
// registered with the session; in a child it is one of the LW_TRACE_AREA_RINGS rings of the
// child's trace area, shared memory the parent maps too, so the parent drains a child's events
// without the child's help and keeps those it already drained when the child dies.
//
// Ring protocol: the producer writes ev[head % capacity], then stores head + 1 (release); the
// consumer reads head (acquire), copies ev[tail .. head), then stores tail (release). A full
// ring (head - tail == capacity) drops the event and adds 1 to dropped. A child's ring is
// untrusted memory: the drainer bounds every read by the capacity the parent wrote, resyncs a
// ring whose counters make no sense (counting what it skipped as dropped), and treats event
// fields as data only (names are read with their length bound).
//
// Enable flag: lw__trace_on() reads one word (relaxed): the process's own flag in the parent,
// the area's flag (set by the parent) in a child. An event recorded just as a session stops
// may land in a ring after the last drain; the next session drops it by its timestamp.
//
// Threads: lw__trace_* recording functions from any thread. Areas are attached, reset and
// detached by the worker that owns them (any thread; serialised by the session lock).
#ifndef LANEWORK_LANES_TRACE_H_
#define LANEWORK_LANES_TRACE_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lanework/status.h"
#include "lanework/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

// What an event is. Spans (X) have a duration; instants none. DEP is never drawn itself: it
// links two run spans with a flow (consumer run/task in run_id/task_id, producer in arg[0]
// (task) and arg[1] (run)).
typedef enum lw_trace_kind {
  LW_TRACE_RUN = 1,          // a kernel or sub function ran (run lane)
  LW_TRACE_REGISTER = 2,     // a register/prepare (register lane)
  LW_TRACE_UNREGISTER = 3,   // an unregister (register lane)
  LW_TRACE_QUEUE = 4,        // accepted by the chip -> kernel start
  LW_TRACE_HANDOFF = 5,      // the child's mailbox loop took a posted task
  LW_TRACE_SUBMIT = 6,       // an lw_orch_submit_* call (orch thread)
  LW_TRACE_DISPATCH = 7,     // the parent posted a task to a child's mailbox
  LW_TRACE_ORCH = 8,         // an orch function
  LW_TRACE_DEP = 9,          // a dependency edge (see above)
  // One slice of a run the backend executes in slices (opencl): recorded on the run lane,
  // inside its run's span, at the time the device executed it (lw__trace_slice). The gaps
  // between a run's slices are the time its device ran none of it: launch costs, or a stall.
  LW_TRACE_SLICE = 10,
  // A running kernel held at a poll (the sim backend's device lock test hook): recorded on the
  // run lane, inside its run's span, when a poll had to wait.
  LW_TRACE_STALL = 11,
  LW_TRACE_SPAN_KINDS_ = 12, // kinds from here on are instants
  LW_TRACE_CANCEL = 12,
  LW_TRACE_TIMEOUT = 13,
  LW_TRACE_ESCALATION = 14,
  LW_TRACE_DEATH = 15,
  LW_TRACE_RESPAWN = 16,
  LW_TRACE_LIVENESS_KILL = 17,
  LW_TRACE_FAILED_FOR_GOOD = 18,
  LW_TRACE_PROTOCOL = 19,
  // Spans again, numbered after the instants so no recorded kind changed its number (a
  // capture's kinds are checked against LW_TRACE_KIND_COUNT_ only). A backend that compiles
  // on the register lane and loads the result on the run lane (cuda) records the two apart:
  // the compile inside its register span, the load inside the run span of the first run that
  // needed the module.
  LW_TRACE_COMPILE = 20,
  LW_TRACE_LOAD = 21,
  // An instant again: a chip child's run lane looked at where it runs (child/placement.h):
  // "cpu 3: moved off (a cpu idle), 2/2" (the verdict, the machine's runnable threads / the
  // CPUs it may use).
  LW_TRACE_PLACEMENT = 22,
  LW_TRACE_KIND_COUNT_ = 23,
} lw_trace_kind_t;

#define LW_TRACE_NAME_BYTES 48

// One event; crosses process boundaries in a child's area, so fixed width only.
typedef struct lw_trace_event {
  int64_t ts_ns;     // CLOCK_MONOTONIC (lw__now_ns): start of a span, time of an instant
  int64_t dur_ns;    // spans
  uint64_t run_id;   // 0: none
  uint64_t task_id;  // 0: none
  uint64_t arg[2];   // per kind (DEP: producer task, producer run)
  uint16_t kind;     // lw_trace_kind_t
  int16_t chip;      // chip or sub index; -1: none
  int32_t status;    // lw_status_t of a span's outcome
  char name[LW_TRACE_NAME_BYTES];  // the callable, or an instant's detail; NUL-padded
} lw_trace_event_t;
_Static_assert(sizeof(lw_trace_event_t) == 104, "trace event layout (shared with children)");

// ---------------------------------------------------------------------------------------------
// Recording

extern const _Atomic uint32_t *lw__trace_flag;

static inline bool lw__trace_on(void) {
  return atomic_load_explicit(lw__trace_flag, memory_order_relaxed) != 0;
}

// Names the calling thread's track ("run lane", "scheduler", ...; a static string) and the chip
// it serves (-1: none). Cheap (thread-local stores); call it where a thread starts its work.
void lw__trace_role(const char *role, int32_t chip);

// Records one event (copied). Call only when lw__trace_on() — the helpers below check it.
void lw__trace_emit(const lw_trace_event_t *e);

void lw__trace_span(lw_trace_kind_t kind, int64_t t0_ns, int64_t t1_ns, uint64_t run_id,
                    uint64_t task_id, int32_t chip, lw_status_t status, const char *name);
void lw__trace_instant(lw_trace_kind_t kind, int32_t chip, uint64_t run_id, uint64_t task_id,
                       const char *detail);
void lw__trace_dep(uint64_t run_id, uint64_t task_id, uint64_t producer_run,
                   uint64_t producer_task);
// One slice of a run (LW_TRACE_SLICE) on the calling thread's track: [t0_ns, t1_ns), the
// slice's number in its run (0-based, in arg[0]) and its work-items (arg[1]).
void lw__trace_slice(int64_t t0_ns, int64_t t1_ns, uint64_t run_id, uint64_t task_id,
                     int32_t chip, uint64_t index, uint64_t items, const char *name);

// ---------------------------------------------------------------------------------------------
// Children's areas (shared memory)

#define LW_TRACE_AREA_RINGS 6
#define LW_TRACE_RING_EVENTS 8192
#define LW_TRACE_ROLE_BYTES 24

typedef struct lw_trace_ring_header {
  _Atomic uint64_t head;     // producer: events published
  uint8_t pad0[56];
  _Atomic uint64_t tail;     // consumer: events drained
  _Atomic uint64_t dropped;  // producer: events lost to a full ring
  _Atomic uint32_t state;    // LW_TRACE_RING_*
  int32_t pid;               // the producer's process and thread
  int32_t tid;
  int32_t chip;
  uint32_t capacity;         // events; written by the owner of the memory (the parent for areas)
  uint32_t reserved;
  char role[LW_TRACE_ROLE_BYTES];
} lw_trace_ring_header_t;
_Static_assert(sizeof(lw_trace_ring_header_t) == 128, "trace ring header layout");

// A ring's life: FREE -> CLAIMING (its thread names it) -> CLAIMED (drained from now on);
// a heap ring becomes ORPHANED when its thread exits (the drainer frees it).
enum {
  LW_TRACE_RING_FREE = 0,
  LW_TRACE_RING_CLAIMED = 1,
  LW_TRACE_RING_ORPHANED = 2,
  LW_TRACE_RING_CLAIMING = 3,
};

typedef struct lw_trace_area_header {
  _Atomic uint32_t on;        // parent: 1 while a session runs
  _Atomic uint32_t no_ring;   // child: events lost because every ring was taken
  uint32_t n_rings;           // parent-written
  uint32_t ring_events;       // parent-written
  uint8_t pad[48];
} lw_trace_area_header_t;
_Static_assert(sizeof(lw_trace_area_header_t) == 64, "trace area header layout");

#define LW_TRACE_RING_BYTES \
  (sizeof(lw_trace_ring_header_t) + (size_t)LW_TRACE_RING_EVENTS * sizeof(lw_trace_event_t))
#define LW_TRACE_AREA_BYTES \
  (sizeof(lw_trace_area_header_t) + (size_t)LW_TRACE_AREA_RINGS * LW_TRACE_RING_BYTES)

typedef struct lw_trace_area lw_trace_area_t;  // LW_TRACE_AREA_BYTES of shared memory

// Parent, before the child exists: lays out a zeroed area.
void lw__trace_area_initialize(lw_trace_area_t *a);
// Parent: the session drains this area from now on, naming its process track process_name
// ("chip 0 (sim)", "sub 1"); its flag follows the session.
void lw__trace_area_attach(lw_trace_area_t *a, const char *process_name);
// Parent, once the child that used the area is gone for good (reaped, before a respawn or
// before the memory is unmapped): drains what it left, then frees its rings for the next
// incarnation.
void lw__trace_area_reset(lw_trace_area_t *a);
// Parent: reset, then forget the area (before its memory goes).
void lw__trace_area_detach(lw_trace_area_t *a);
// Child, first thing: this process records into a (rings are claimed per thread), never into
// the parent's rings it inherited through fork.
void lw__trace_child_attach(lw_trace_area_t *a);

// A run its child never finished: the child died (a crash, an exit) or was killed (an
// escalation, a liveness kill) while it ran the kernel or sub function, so the child's own run
// span, recorded when a run ends, never came. The parent records it in the child's stead.
typedef struct lw_trace_dead_run {
  int64_t t0_ns;         // the run's start (see start_from)
  int64_t t1_ns;         // the death, as the parent saw it
  uint64_t run_id;
  uint64_t task_id;
  int32_t chip;          // chip or sub index, as in the child's own run spans
  lw_status_t status;    // the status the task finishes with
  uint32_t start_from;   // LW_TRACE_START_* : where t0_ns came from
  const char *callable;  // the span's name
  const char *death;     // the death instant's detail ("child died: killed by SIGSEGV")
} lw_trace_dead_run_t;

// arg[0] of a run span the parent recorded for a dead child (the child's own run spans hold 0
// there): where its start came from. arg[1] is 0.
enum {
  LW_TRACE_START_KERNEL = 1,    // the kernel's start, as the child stamped it (started_ns)
  LW_TRACE_START_DISPATCH = 2,  // the parent's post of the task (the child stamped none)
};

// Parent, for each run a child left unfinished when it died: records the run span
// [t0_ns, t1_ns) with the task's final status, and at its end a death instant (LW_TRACE_DEATH
// with the run's ids, detail r->death), on the child's track whose role is role ("run lane",
// "sub loop": where the child's own run spans go) in the child's process, as if that thread
// had recorded them. A child whose thread of that role recorded nothing gets a track of that
// name in its process (pid: the child's). Nothing is recorded when no session runs, when the
// area is not attached, or when the session already holds a run span of the same run and task
// from the child's process (the child ended the run and recorded it before it died): a run
// never has two spans. A start before the session's start is moved to it.
// Call once the child is dead and before lw__trace_area_reset gives its rings to the next
// child. Any thread of the parent; takes the session lock (a leaf: callers may hold their own
// locks); costs a drain of the area and a pass over the session's events, so only at a death.
void lw__trace_area_record_dead_run(lw_trace_area_t *a, int32_t pid, const char *role,
                                    const lw_trace_dead_run_t *r);

// ---------------------------------------------------------------------------------------------
// Sessions and what they collected (the public API, the benches and the tests use these)

typedef struct lw_trace_track {
  int32_t pid;
  int32_t tid;
  int32_t chip;
  char role[LW_TRACE_ROLE_BYTES];
} lw_trace_track_t;

typedef struct lw_trace_process {
  int32_t pid;
  char name[LW_TRACE_NAME_BYTES];
  int32_t sort;  // parent 0, chip i 1 + i, sub i 100 + i
} lw_trace_process_t;

typedef struct lw_trace_record {
  lw_trace_event_t ev;
  uint32_t track;  // index into tracks
} lw_trace_record_t;

typedef struct lw_trace_capture {
  int64_t t0_ns;       // the session's start
  int32_t parent_pid;
  uint64_t dropped;
  lw_trace_record_t *rec;
  size_t n, cap;
  lw_trace_track_t *tracks;
  size_t n_tracks, cap_tracks;
  lw_trace_process_t *procs;
  size_t n_procs, cap_procs;
} lw_trace_capture_t;

// Starts a session. path NULL: kept in memory only (lw__trace_end hands it over).
LW_MUST_USE lw_status_t lw__trace_begin(const char *path, lw_error_t *err);
// Ends the session: writes the file if it had a path; moves the capture to *out if not NULL
// (free it with lw__trace_capture_free), else frees it.
LW_MUST_USE lw_status_t lw__trace_end(lw_trace_capture_t *out, lw_trace_summary_t *summary,
                                      lw_error_t *err);
void lw__trace_capture_free(lw_trace_capture_t *c);
// Drains every ring now (the drainer does it every few milliseconds); for benches that must
// not let a ring fill between measured batches.
void lw__trace_flush(void);
// Starts the LW_TRACE session if the environment asks for one and none ran yet (workers and
// chips call it when they are created).
void lw__trace_from_env(void);

// Writes c as Chrome Trace Event JSON (docs/observability.md).
LW_MUST_USE lw_status_t lw__trace_write_json(const lw_trace_capture_t *c, FILE *out,
                                             uint64_t *out_events, lw_error_t *err);

// Overlap proved from events: for each register span, the fraction of its duration covered by
// run spans of the same chip in the same process; the mean over register spans (weighted by
// nothing: each register counts once). n_spans: register spans seen. Returns -1 when there is
// none.
double lw__trace_overlap_by_events(const lw_trace_capture_t *c, size_t *n_spans);
// The same for one register span, c->rec[index] (-1 when it is no register span of positive
// length, or memory ran out).
double lw__trace_register_covered(const lw_trace_capture_t *c, size_t index);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_TRACE_H_
