// lanework/trace.h — trace sessions: what ran where and when, in every process of the program.
//
// A session records every chip and worker of this process and every chip or sub child they
// run: kernel runs, registers and unregisters on the register lanes, queue waits, the parent's
// submits and dispatches, orch functions, and instants for cancels, timeouts, escalations,
// child deaths and respawns. lw_trace_stop writes it as Chrome Trace Event JSON, which
// Perfetto (ui.perfetto.dev) and chrome://tracing open; `lanework trace svg` draws it.
// docs/observability.md describes the file.
//
// A session starts with lw_trace_start(path), or when the first worker or chip of a process
// whose environment has LW_TRACE=path.json is created; the latter is stopped (and written) at
// exit if the program does not call lw_trace_stop. One session at a time per process.
//
// Cost: with no session, each recording point is one predictable branch. During a session an
// event is written into a ring owned by the recording thread (in shared memory for a child),
// without a lock or a syscall; a ring that is full drops the event and counts it, and the
// count is in the file ("otherData": {"dropped_events": N}) and in the summary. A child that
// dies loses at most the events it recorded since the last drain (every few milliseconds).
//
// Threads: lw_trace_start and lw_trace_stop may be called from any thread, not concurrently
// with each other. Workers and chips may be created, used and destroyed during a session.
#ifndef LANEWORK_TRACE_H_
#define LANEWORK_TRACE_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_trace_summary {
  uint64_t events;          // events written to the file
  uint64_t dropped_events;  // events lost to full rings (or to the session's event limit)
} lw_trace_summary_t;

// Starts a session that lw_trace_stop writes to path. The file is created (truncated) here,
// so a path that cannot be written fails now: UNAVAILABLE naming the path and the reason.
// FAILED_PRECONDITION when a session is already running; INVALID_ARGUMENT for a NULL or empty
// path.
LW_API LW_MUST_USE lw_status_t lw_trace_start(const char *path);

// Ends the session and writes its file. summary may be NULL. FAILED_PRECONDITION when no
// session runs; UNAVAILABLE when the file could not be written (the session ends anyway).
LW_API LW_MUST_USE lw_status_t lw_trace_stop(lw_trace_summary_t *summary);

// True while a session runs.
LW_API bool lw_trace_active(void);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_TRACE_H_
