// parent/orch_guard.c — the frame that calls a user's orch function, which no exception
// leaves, and the check whether such a frame is still on the stack; contract and reasons in
// parent/orch_guard.h.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

#include "parent/orch_guard.h"

// The exception that lw__orch_guard_personality stopped at a guard frame, handed to that
// guard on the same thread: set just before the unwinder resumes the guard, taken by the guard
// right after. volatile: the compiler must read it after the call, whatever it can prove
// about who writes it.
static _Thread_local struct _Unwind_Exception *volatile caught;

// The personality routine of lw__orch_call_guarded's frame (and of no other), named by the
// .cfi_personality directive in its body. Not static so that the directive can name it
// across any renaming; hidden like every symbol of the library.
_Unwind_Reason_Code lw__orch_guard_personality(int version, _Unwind_Action actions,
                                               _Unwind_Exception_Class exception_class,
                                               struct _Unwind_Exception *exception,
                                               struct _Unwind_Context *context);

__attribute__((used)) _Unwind_Reason_Code lw__orch_guard_personality(
    int version, _Unwind_Action actions, _Unwind_Exception_Class exception_class,
    struct _Unwind_Exception *exception, struct _Unwind_Context *context) {
  (void)exception_class;
  (void)context;
  if (version != 1) return _URC_FATAL_PHASE1_ERROR;
  // pthread_exit and cancellation unwind the thread for good: not ours to stop.
  if (actions & _UA_FORCE_UNWIND) return _URC_CONTINUE_UNWIND;
  // Search phase: this frame handles every exception, as a catch (...) would. The frames in
  // between (the orch function's own) get their cleanups run in the next phase.
  if (actions & _UA_SEARCH_PHASE) return _URC_HANDLER_FOUND;
  if (actions & _UA_HANDLER_FRAME) {
    // Resume this frame where the context stands, right after its call of the orch function,
    // as though the call had returned; the guard finds the exception in `caught`. The
    // registers the compiler keeps across a call (callee-saved, the stack pointer) are the
    // frame's own again, restored by the unwinder as for any landing pad.
    caught = exception;
    return _URC_INSTALL_CONTEXT;
  }
  return _URC_CONTINUE_UNWIND;
}

// Exception classes of the two C++ runtimes (the first seven bytes, "GNUCC++" for GNU
// libstdc++ and "CLNGC++" for LLVM libc++abi; the last byte is 0, or 1 for an exception that
// std::rethrow_exception threw).
static uint64_t exception_vendor(const char *name) {
  uint64_t v = 0;
  for (int i = 0; i < 7; ++i) v = (v << 8) | (uint8_t)name[i];
  return v;
}

static bool is_cxx_exception(_Unwind_Exception_Class c) {
  uint64_t vendor = (uint64_t)c >> 8, kind = (uint64_t)c & 0xff;
  return kind <= 1 &&
         (vendor == exception_vendor("GNUCC++") || vendor == exception_vendor("CLNGC++"));
}

// A function of the C++ runtime already in the process, or NULL (none loaded, or one linked
// statically and not exported). POSIX lets a dlsym result become a function pointer; C does
// not, hence the memcpy.
static void *runtime_fn(const char *name) {
  void *p = dlsym(RTLD_DEFAULT, name);
  (void)dlerror();
  return p;
}

// Ends a caught exception as a C++ handler would end it: __cxa_begin_catch (the thread's count
// of uncaught exceptions goes back down), the type's name, __cxa_end_catch (the object is
// destroyed). An exception of another language, or with no C++ runtime to reach, is only
// deleted (_Unwind_DeleteException).
static void end_exception(struct _Unwind_Exception *e, char *type, size_t type_bytes) {
  void *(*begin_catch)(void *) = NULL;
  void (*end_catch)(void) = NULL;
  void *(*current_type)(void) = NULL;
  char *(*demangle)(const char *, char *, size_t *, int *) = NULL;
  if (is_cxx_exception(e->exception_class)) {
    void *p = runtime_fn("__cxa_begin_catch");
    memcpy(&begin_catch, &p, sizeof p);
    p = runtime_fn("__cxa_end_catch");
    memcpy(&end_catch, &p, sizeof p);
  }
  if (!begin_catch || !end_catch) {
    _Unwind_DeleteException(e);
    return;
  }
  begin_catch(e);
  void *p = runtime_fn("__cxa_current_exception_type");
  memcpy(&current_type, &p, sizeof p);
  // A std::type_info is {vtable, const char *name} in the Itanium C++ ABI; the name is the
  // mangled type, '*'-prefixed for a type local to its object.
  const void *info = current_type ? current_type() : NULL;
  const char *name = info ? ((const char *const *)info)[1] : NULL;
  if (name) {
    if (*name == '*') name++;
    p = runtime_fn("__cxa_demangle");
    memcpy(&demangle, &p, sizeof p);
    int status = -1;
    char *readable = demangle ? demangle(name, NULL, NULL, &status) : NULL;
    snprintf(type, type_bytes, "%s", status == 0 && readable ? readable : name);
    free(readable);
  }
  end_catch();
}

#if defined(__clang__)
#define LW__GUARD_ATTRS __attribute__((noinline))
#else
#define LW__GUARD_ATTRS __attribute__((noipa))  // not inlined, cloned or analysed across
#endif

LW__GUARD_ATTRS void lw__orch_call_guarded(lw__orch_call_t *call, uintptr_t *out_frame) {
  // This frame's personality: the unwinder asks it about every exception that reaches here.
  // pcrel|sdata4 (0x1b): the routine is in this object, so no indirection is needed.
  __asm__ volatile(".cfi_personality 0x1b, lw__orch_guard_personality");
  *out_frame = (uintptr_t)__builtin_dwarf_cfa();
  call->threw = false;
  call->exception_type[0] = '\0';
  lw_status_t st = call->fn(call->o, call->user);
  struct _Unwind_Exception *e = caught;
  if (e) {
    caught = NULL;
    call->threw = true;
    call->status = LW_OK;
    end_exception(e, call->exception_type, sizeof(call->exception_type));
    return;
  }
  call->status = st;
}

// Both addresses on this thread's own stack (the one pthread knows), so that comparing them
// says which frame is nearer the base.
static bool on_own_stack(uintptr_t a, uintptr_t b) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
  void *base = NULL;
  size_t size = 0;
  int rc = pthread_attr_getstack(&attr, &base, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0) return false;
  uintptr_t lo = (uintptr_t)base, hi = lo + size;
  return a >= lo && a <= hi && b >= lo && b <= hi;
}

typedef struct frame_walk {
  uintptr_t frame;        // the guard frame's address looked for
  uintptr_t prev_region;  // the function of the context visited before
  lw__orch_frame_state_t state;
} frame_walk_t;

static _Unwind_Reason_Code frame_walk_step(struct _Unwind_Context *context, void *arg) {
  frame_walk_t *k = arg;
  uintptr_t cfa = _Unwind_GetCFA(context), region = _Unwind_GetRegionStart(context);
  uintptr_t guard = (uintptr_t)&lw__orch_call_guarded;
  // Unwinders differ in which frame a context's CFA belongs to (libgcc's is that of the frame
  // visited before, whose call this context's code made); either way a live guard frame shows
  // as its address next to the guard's code, in this context or the one before.
  if (cfa == k->frame && (region == guard || k->prev_region == guard)) {
    k->state = LW__ORCH_FRAME_LIVE;
    return _URC_NORMAL_STOP;
  }
  // Frames lie ever nearer the stack's base along the walk: past the address, the guard frame
  // was not met and is not there.
  if (cfa > k->frame) {
    k->state = LW__ORCH_FRAME_GONE;
    return _URC_NORMAL_STOP;
  }
  k->prev_region = region;
  return _URC_NO_REASON;
}

lw__orch_frame_state_t lw__orch_frame_state(uintptr_t frame) {
  if (frame == 0) return LW__ORCH_FRAME_UNKNOWN;
  frame_walk_t k = {frame, 0, LW__ORCH_FRAME_UNKNOWN};
  (void)_Unwind_Backtrace(frame_walk_step, &k);
  // A guard frame met at that address is live wherever the stacks are. Passing the address
  // proves the frame gone only when both lie on this thread's own stack (asked only then: on
  // the main thread pthread reads /proc/self/maps to answer).
  if (k.state == LW__ORCH_FRAME_GONE && !on_own_stack((uintptr_t)__builtin_dwarf_cfa(), frame)) {
    return LW__ORCH_FRAME_UNKNOWN;
  }
  return k.state;
}
