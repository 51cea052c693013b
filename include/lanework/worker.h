// lanework/worker.h — the L3 worker: a parent process that runs orch functions, builds a DAG
// of tasks from them and dispatches the tasks to forked chip children and sub children
// through shared-memory mailboxes.
//
// Processes (docs/processes.md): none exists before the program asks (lw_init or the first
// lw_worker_create), and none is ever a child of the program. lw_worker_create maps the shared
// arena and the mailboxes, then starts the worker's fork servers: chip children come from an
// exec'd helper (they hold none of the program's memory; a create from any thread works), sub
// children from the zygote, a copy of the program made after its static constructors while it
// had one thread (lw_init). Children exit when the worker is destroyed or the program dies.
// Every thread lanework starts blocks the program's asynchronous signals.
//
// Lifecycle: create -> register callables -> run / run_async ... -> destroy. Handles from a
// worker may outlive it (destroy finishes or cancels every operation first).
//
// Thread safety: every function but lw_worker_destroy may be called from any thread.
// lw_worker_cancel_all is also async-signal-safe. Orch functions run one run at a time, in
// submission order: on the worker's orchestrator thread, except that lw_worker_run runs its
// orch function inline on the calling thread when no earlier run is queued or running (no
// hand-off). An orch function therefore MUST NOT assume which thread it runs on.
#ifndef LANEWORK_WORKER_H_
#define LANEWORK_WORKER_H_

#include <stddef.h>
#include <stdint.h>

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/config.h"
#include "lanework/handle.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_worker lw_worker_t;
typedef struct lw_orch lw_orch_t;

// The user's orchestration function: submits the tasks of one run. Returning an error fails
// the run with it: tasks that already finished keep their outcome, the others are skipped
// (never dispatched) or cancelled (in flight) and count as failed (see orch.h).
// It MUST return: a C++ exception or a longjmp must not leave it (lanework's frames lie between
// it and any handler or setjmp). One that does anyway is reported, and the worker stays usable:
// an exception stops at the frame that called the function, and the run fails
// FAILED_PRECONDITION naming it (the exception reaches no caller); after a longjmp out of an
// inline run, the thread's next lw_worker_run / run_async on the worker stops the abandoned run
// and fails FAILED_PRECONDITION saying so (lw_worker_destroy stops it too). Details and
// limits: docs/api.md, "Exceptions and longjmp".
typedef lw_status_t (*lw_orch_fn)(lw_orch_t *orch, void *user);
// A sub function: runs in a sub child on the task's args. Return LW_OK or an error.
typedef lw_status_t (*lw_sub_fn)(const lw_kernel_args_t *args);

#define LW_MAX_CHIPS 16
#define LW_MAX_SUBS 16

// Grows like the structs of config.h: struct_size first, set by the _default function. The
// chip template is embedded, so its layout is part of this struct's: chip.struct_size must be
// sizeof(lw_chip_config_t) (the _default function sets it).
typedef struct lw_worker_config {
  uint32_t struct_size;         // sizeof(lw_worker_config_t); set by lw_worker_config_default
  uint32_t n_chips;             // chip children (1..LW_MAX_CHIPS)
  uint32_t n_subs;              // sub children (0..LW_MAX_SUBS)
  lw_chip_config_t chip;        // template; chip i gets device_id = chip.device_id + i
                                // (its index; its device: see n_devices)
  uint64_t arena_bytes;         // shared memory for tensors (lw_worker_alloc)
  uint32_t task_ring;           // tasks alive at once (back-pressure beyond)
  int64_t submit_timeout_ns;    // how long a submit blocks on a full ring before
                                // RESOURCE_EXHAUSTED (-1: forever)
  int64_t startup_timeout_ns;   // all children must report INIT_READY within this
  uint32_t respawn;             // 1: respawn a dead child and replay its callables;
                                // 0: a dead chip stays failed and its tasks fail at once
  uint32_t respawn_max;         // a child that dies this many times within respawn_window_ns
                                // is failed for good (crash loop); at most 16; 0: no bound
  int64_t respawn_window_ns;
  // How long a cancelled or timed-out kernel may ignore its cancel word before its child is
  // killed (and respawned): cancel always ends in bounded time.
  int64_t cancel_grace_ns;
  // Liveness: a child that holds work (posted tasks, a control waiting for its answer) and
  // whose mailbox loop shows no heartbeat for this long is stopped (SIGSTOP) or wedged; it is
  // killed and handled like a death ("no heartbeat for N ms (stopped or wedged)"). A long
  // kernel does not count: the heartbeat comes from the mailbox loop, not the run lane.
  // 0: no liveness check. Default 5 s.
  int64_t liveness_timeout_ns;
  // Fields appended after the first release (0 is each one's default).
  // Devices the chips share: 0 (default) gives every chip its own device, chip i on device
  // chip.device_id + i. n > 0 puts chip i on device chip.device_id + i % n, so with more chips
  // than n, several chips time-share one device, each in its own process and its own context
  // (on one GPU: n_devices = 1). A chip keeps its own index, chip.device_id + i, in messages,
  // traces and stats; only the backend opens the shared device (a sim kernel's ctx->chip_id is
  // that device). At most LW_MAX_CHIPS.
  uint32_t n_devices;
  uint32_t reserved;  // 0; keeps sizeof at the end of a field (docs/packaging.md)
} lw_worker_config_t;

// What a finished run reports.
typedef struct lw_run_report {
  lw_status_t status;
  uint32_t n_tasks;        // tasks the orch function submitted
  uint32_t n_completed;    // finished successfully
  uint32_t n_failed;       // failed, poisoned, cancelled or skipped
  uint64_t wall_ns;        // from the orch function's start to the last task's end
  lw_error_t error;        // the first error (code LW_OK when none)
} lw_run_report_t;

// What one task of a finished run did (lw_handle_run_tasks). Times are nanoseconds of
// CLOCK_MONOTONIC. The parent measures wait_ns and host_ns on its own clock; the child measures
// queue_ns and kernel_ns and hands them back with the task's result. A task that was never
// dispatched (POISONED, skipped or cancelled before dispatch, failed at once because its chip
// was down) has worker_id -1, wait_ns from its submit to the moment it was given up, and
// queue_ns, kernel_ns and host_ns 0. A task whose child died before it reported has queue_ns
// and kernel_ns 0 (the child never handed them back) and host_ns up to the death. On a worker of
// one chip, an orch function submitting in a stream may leave completions in their ring for up
// to 8 submits before it reads them together (or, when it stops submitting, up to ~1 ms):
// host_ns then includes that wait.
typedef enum lw_task_kind {
  LW_TASK_CHIP = 1,  // lw_orch_submit_next_level(_group): a chip kernel
  LW_TASK_SUB = 2,   // lw_orch_submit_sub: a sub function
} lw_task_kind_t;

#define LW_TASK_CALLABLE_BYTES 48

typedef struct lw_task_report {
  uint64_t task_id;     // 1.. in submission order within the run (lw_orch_last_task)
  int32_t worker_id;    // the chip (LW_TASK_CHIP) or sub child (LW_TASK_SUB) index it was
                        // dispatched to; -1 when it never was
  uint32_t kind;        // lw_task_kind_t
  lw_status_t status;   // LW_OK, or why it failed (TASK_FAILED, POISONED, CHILD_EXITED, ...)
  uint32_t reserved;
  uint64_t submit_ns;   // when the orch function submitted it (absolute)
  uint64_t wait_ns;     // submit -> dispatch, in the parent: dependencies, free task frames, a
                        // full task ring
  uint64_t queue_ns;    // in the child: handed to its run lane -> kernel start (0 when the
                        // run lane, idle, took the task itself: it starts at once)
  uint64_t kernel_ns;   // kernel start -> end, measured by the child
  uint64_t host_ns;     // dispatch -> the parent saw the completion: the whole round trip
  char callable[LW_TASK_CALLABLE_BYTES];  // the callable's name, truncated, NUL-terminated
} lw_task_report_t;

// Fills the first struct_size bytes of *c with the defaults (see config.h, "Growing structs");
// call it through lw_worker_config_default.
LW_API void lw_worker_config_default_sized(lw_worker_config_t *c, uint32_t struct_size);
// 1 chip, 0 subs, backend "sim", 256 MiB arena, 4096-task ring, 10 s submit and startup
// timeouts, respawn on (at most 5 deaths in 10 s), 1 s cancel grace, 5 s liveness timeout.
static inline void lw_worker_config_default(lw_worker_config_t *c) {
  lw_worker_config_default_sized(c, (uint32_t)sizeof(*c));
}

// Optional early start (docs/processes.md). Starts the zygote now: a copy of the program as it
// is at this call, after its static constructors, from which the sub children of every later
// worker are forked. Call it from main before the program starts threads when a worker will
// have sub children (n_subs > 0) and the first lw_worker_create may come from a threaded
// program. Without it the first lw_worker_create starts the zygote if the process is
// single-threaded then. Idempotent; thread-safe. FAILED_PRECONDITION when the process already
// has other threads and no zygote (the message says how many and what to do); UNAVAILABLE when
// the zygote cannot be started (the message names the step). Workers without sub children
// never need it.
LW_API LW_MUST_USE lw_status_t lw_init(void);

LW_API LW_MUST_USE lw_status_t lw_worker_create(const lw_worker_config_t *cfg,
                                                lw_worker_t **out);

// The processes lanework runs for w; none of them is a child of the program
// (docs/processes.md). out[i] for i < n_chips is chip i's child, then come the sub children,
// then the chip children's fork server, the sub children's fork server and the zygote; 0 for
// one that does not exist (no subs, no zygote) or is being respawned. Fills min(cap, count)
// entries and returns count (n_chips + n_subs + 3); w NULL: 0. For tools that watch them (CPU
// times, debuggers). Thread-safe; the pids may change at any time (a respawn).
LW_API uint32_t lw_worker_process_ids(const lw_worker_t *w, int32_t *out, uint32_t cap);
// Cancels queued runs, lets running ones finish or cancels them, stops every child, and
// frees everything: no child process (nor any process a kernel forked), fd or shared memory is
// left behind. A kernel that ignores its cancel word keeps its child for cancel_grace_ns, as
// after lw_handle_cancel: destroy waits that long plus a small margin, then kills it (its run
// finishes CANCELLED, "ignored cancellation"). Every handle of the worker is finished before
// it returns (a run that could not end otherwise: UNAVAILABLE "worker destroyed ..."), so a
// later lw_handle_wait on a handle the caller still holds returns at once. NULL is ignored.
LW_API void lw_worker_destroy(lw_worker_t *w);

// Chip callables: registered on every chip child, all-or-nothing (a failure rolls back the
// children that succeeded and the error names the failing child). A failed register returns,
// and its handle finishes, once the rollback is done: the same callable may be registered
// again at once.
LW_API LW_MUST_USE lw_status_t lw_worker_register(lw_worker_t *w, const lw_callable_t *c,
                                                  lw_callable_handle_t *out);
LW_API LW_MUST_USE lw_status_t lw_worker_register_async(lw_worker_t *w, const lw_callable_t *c,
                                                        lw_handle_t **out);
// Unregisters a chip or a sub callable; one rule for both. The callable is tombstoned at once:
// tasks submitted with it from then on fail FAILED_PRECONDITION "pending unregister". Tasks
// accepted earlier still run it (never another callable); the call returns, and the handle's
// slot is freed, only after every such task has finished. NOT_FOUND for an unknown or
// released handle, FAILED_PRECONDITION while it is still registering or already being
// unregistered.
LW_API LW_MUST_USE lw_status_t lw_worker_unregister(lw_worker_t *w, lw_callable_handle_t h);
// Chip callables only (same rule as lw_worker_unregister): a sub callable handle gives
// INVALID_ARGUMENT with a message saying so.
LW_API LW_MUST_USE lw_status_t lw_worker_unregister_async(lw_worker_t *w, lw_callable_handle_t h,
                                                          lw_handle_t **out);
// Sub callables: fn must be code that was mapped when the worker was created (checked with
// dladdr); INVALID_ARGUMENT otherwise. FAILED_PRECONDITION on a worker with no sub children
// (n_subs 0), naming that. name is copied. Safe to call from several threads at
// once: registrations are applied one at a time, so every sub child holds the same functions
// in the same order (a sub child that is down gets the table replayed when it is respawned).
// On failure no sub child keeps the function.
LW_API LW_MUST_USE lw_status_t lw_worker_register_sub(lw_worker_t *w, lw_sub_fn fn,
                                                      const char *name,
                                                      lw_callable_handle_t *out);

// Runs fn(orch, user) after every earlier run started, and waits for all its tasks. out may
// be NULL. When no earlier run is queued or running, fn runs right here on the calling thread;
// otherwise the run is queued and fn runs on the orchestrator thread while this call waits.
//
// Run handles finish in submission order: a run's handle finishes once all its tasks are
// terminal, its orch function returned, and every earlier run's handle (sync or async) has
// finished. So lw_worker_run returns only after every earlier lw_worker_run_async handle has
// finished, and waiting on a later handle also waits for the earlier runs. (Tasks of
// different runs still execute concurrently; only the handles are ordered.)
//
// From inside an orch function of the same worker, lw_worker_run fails FAILED_PRECONDITION at
// once (it would wait for itself); lw_worker_run_async queues a run that starts after the
// current one. A run whose fn threw fails FAILED_PRECONDITION (lw_orch_fn).
LW_API LW_MUST_USE lw_status_t lw_worker_run(lw_worker_t *w, lw_orch_fn fn, void *user,
                                             lw_run_report_t *out);
LW_API LW_MUST_USE lw_status_t lw_worker_run_async(lw_worker_t *w, lw_orch_fn fn, void *user,
                                                   lw_handle_t **out);
// The report of a finished worker-run handle. FAILED_PRECONDITION while running.
LW_API LW_MUST_USE lw_status_t lw_handle_run_report(const lw_handle_t *h, lw_run_report_t *out);
// The per-task reports of a finished worker-run handle: fills out[0 .. min(cap, n) - 1] with
// the first reports in task-id order (task i + 1 in out[i]) and sets *n_out to n, the number
// of tasks of the run, so a call with cap 0 (out may then be NULL) sizes the array.
// INVALID_ARGUMENT when h is not a worker-run handle or n_out is NULL (or out is NULL with
// cap > 0); FAILED_PRECONDITION "run N has not finished" while it runs; RESOURCE_EXHAUSTED
// when the worker ran out of memory recording them (*n_out is still n, nothing is filled).
// Memory: the worker keeps sizeof(lw_task_report_t) = 112 bytes per task of the run (in one
// array grown by doubling, so at most twice that) until the handle is released; recording
// takes no lock beyond the one the scheduler already holds, and three clock reads per task.
LW_API LW_MUST_USE lw_status_t lw_handle_run_tasks(const lw_handle_t *h, lw_task_report_t *out,
                                                   size_t cap, size_t *n_out);

// Shared memory every child maps at the same address; tensors must live here. 64-byte
// aligned. NULL (and lw_last_error) when the arena is exhausted.
LW_API void *lw_worker_alloc(lw_worker_t *w, size_t bytes);
LW_API void lw_worker_free(lw_worker_t *w, void *p);

// Cancels every queued and running run. Async-signal-safe.
LW_API void lw_worker_cancel_all(lw_worker_t *w);
// Readable (EPOLLIN) when any handle of w finished since the last read; read 8 bytes to
// reset. Owned by the worker: do not close it. The worker writes it only from the first call
// on (a write is a system call per finished handle); that call makes it readable if a handle
// finished before it. Any thread.
LW_API int lw_worker_event_fd(lw_worker_t *w);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_WORKER_H_
