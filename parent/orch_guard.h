// parent/orch_guard.h — the one frame that calls a user's orch function (parent/runs.c only),
// and the check that tells whether such a frame is still on the stack.
//
// Why: nothing the orch function does on its way out may skip lanework's own frames above it
// (the orchestrator token, the run's end, the caller's handle). A C++ exception that leaves the
// function is caught here, on either path (the orchestrator thread, where nothing else would
// catch it, and a sync lw_worker_run inline, where the program's own handler would otherwise
// take it past lanework); a longjmp cannot be stopped, so the frame records where it stands and
// runs.c asks later whether it is still there. What lanework then does is in docs/api.md,
// "Exceptions and longjmp".
//
// How (no C++ in the library, no libstdc++ needed to load it): the guard function carries a
// personality routine of its own, written in C against the language-neutral unwind interface
// (<unwind.h>, the Itanium ABI's level 1). The unwinder asks it during its search phase, like a
// C++ catch(...) clause, and it claims every exception; in the cleanup phase it resumes the
// guard right after the call, where the guard sees that the call did not return. Frames in
// between (the user's C++ destructors) run as usual. A forced unwind (pthread_exit,
// cancellation) is not an exception: it passes through untouched. A C++ exception is then
// ended the way a C++ handler ends it (__cxa_begin_catch / __cxa_end_catch, found with dlsym in
// whichever C++ runtime threw it), so std::uncaught_exceptions() is right afterwards and the
// exception object is destroyed; its type name goes into the run's error.
//
// Threads: both calls run on the thread of the orch function (the guard is called by the
// orchestrator token's holder; lw__orch_frame_state by that same thread later).
#ifndef LANEWORK_PARENT_ORCH_GUARD_H_
#define LANEWORK_PARENT_ORCH_GUARD_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/orch.h"
#include "lanework/worker.h"

// The exception's type as the run's error names it ("std::runtime_error"); cut to fit.
#define LW__ORCH_EXCEPTION_TYPE_BYTES 96

// One call of an orch function: fn(o, user), and how it ended.
typedef struct lw__orch_call {
  lw_orch_fn fn;
  lw_orch_t *o;
  void *user;
  lw_status_t status;  // what fn returned (when !threw)
  bool threw;          // an exception left fn: caught here, status is LW_OK
  // The exception's type when it was a C++ one and the runtime could name it (demangled);
  // "" otherwise (a foreign exception, a runtime lanework cannot reach).
  char exception_type[LW__ORCH_EXCEPTION_TYPE_BYTES];
} lw__orch_call_t;

// Calls call->fn(call->o, call->user) and fills call's outcome. Before the call it writes its
// own frame's address (the canonical frame address of the unwind tables) to *out_frame, so a
// later lw__orch_frame_state on this thread can tell whether this frame is still there.
// Never inlined (its frame is what lw__orch_frame_state looks for).
void lw__orch_call_guarded(lw__orch_call_t *call, uintptr_t *out_frame);

typedef enum lw__orch_frame_state {
  LW__ORCH_FRAME_LIVE,     // the guard frame is below the caller: the call comes from inside fn
  LW__ORCH_FRAME_GONE,     // it is not on this thread's stack any more: fn was left by a longjmp
  LW__ORCH_FRAME_UNKNOWN,  // cannot tell (no unwind tables on the way, or another stack)
} lw__orch_frame_state_t;

// Whether the guard frame whose address lw__orch_call_guarded wrote (frame) is still on the
// calling thread's stack, the one it was written on. Walks the stack with the unwinder
// (_Unwind_Backtrace) from here up to that address: the frame is live when the walk meets the
// guard there, gone when the walk passes the address without meeting it (frames only grow
// towards the stack's base). UNKNOWN when the walk stops early (a frame without unwind
// tables), or passes the address while either address lies outside this thread's own stack
// (fibers, a signal stack), where the order of addresses proves nothing. Costs a stack walk:
// called only when the orchestrator token is held by this same thread.
lw__orch_frame_state_t lw__orch_frame_state(uintptr_t frame);

#endif  // LANEWORK_PARENT_ORCH_GUARD_H_
