// lanework/handle.h — the caller's view of an async operation (register, unregister, run).
//
// Lifecycle:
//   - An *_async call returns a handle the caller owns one reference to.
//   - The operation finishes the handle exactly once, with a status and, on failure, an
//     lw_error_t. After that the handle never changes.
//   - The caller drops its reference with lw_handle_release, before or after the operation
//     finishes; releasing early does not cancel the operation. The caller MUST NOT use the
//     handle after releasing it.
//
// Thread safety: every function here may be called from any thread, concurrently with the
// operation finishing. lw_handle_done is one acquire load (no syscall, no lock); waiting on a
// finished handle is the same load plus a copy of the status.
#ifndef LANEWORK_HANDLE_H_
#define LANEWORK_HANDLE_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/callable.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_handle lw_handle_t;

#define LW_WAIT_FOREVER ((int64_t)-1)

// Timing of one run, in nanoseconds of CLOCK_MONOTONIC.
typedef struct lw_run_timing {
  uint64_t host_wall_ns;    // from accepting the submit to the handle finishing
  uint64_t queue_ns;        // from accepting the submit to the run lane starting it
  uint64_t kernel_wall_ns;  // the kernel's own execution: device time on opencl (profiling);
                            // on cuda device time by events or the host's clock around the
                            // launch (LW_CUDA_KERNEL_TIME, docs/cuda.md)
} lw_run_timing_t;

typedef enum lw_handle_kind {
  LW_HANDLE_REGISTER = 1,
  LW_HANDLE_UNREGISTER = 2,
  LW_HANDLE_RUN = 3,         // an L2 run of one kernel
  LW_HANDLE_WORKER_RUN = 4,  // an L3 run of an orch function
  LW_HANDLE_L4_RUN = 5,      // an L4 run (lanework/l4.h, lw_l4_run_async)
} lw_handle_kind_t;

// True once the operation finished (successfully or not). Acquire: after it returns true the
// status, error, timing and callable of the handle may be read.
LW_API bool lw_handle_done(const lw_handle_t *h);

// Waits until the handle finishes or timeout_ns passes (LW_WAIT_FOREVER: no limit; 0: poll).
// Returns the operation's status, or LW_DEADLINE_EXCEEDED if the wait timed out (the operation
// goes on). Idempotent: waiting again on a finished handle returns the same status at once.
// A failed operation's error is also copied to this thread's lw_last_error().
// Waits spin briefly, then yield, then sleep on a futex with an absolute deadline. The wait on
// an L3 run's handle drains the worker's completion rings itself while it spins, so a run
// that ends then costs no thread a wake-up. After lw_handle_cancel the spin lasts up to a
// millisecond on a run's handle (a cancelled run's end is due within its kernel's poll
// interval), then it sleeps.
LW_API lw_status_t lw_handle_wait(lw_handle_t *h, int64_t timeout_ns);

// Requests cancellation. LW_OK: the operation will finish (CANCELLED if it had not started or
// stopped in time; a register/unregister already running finishes normally). A chip run still
// queued behind another run finishes CANCELLED before this call returns. LW_NOT_FOUND:
// it had already finished; nothing changes. A second cancel is harmless.
LW_API lw_status_t lw_handle_cancel(lw_handle_t *h);

// The final status once done; LW_FAILED_PRECONDITION while the operation is still running.
LW_API lw_status_t lw_handle_status(const lw_handle_t *h);

// The error of a finished, failed handle; NULL while running or when it succeeded.
LW_API const lw_error_t *lw_handle_error(const lw_handle_t *h);

LW_API lw_handle_kind_t lw_handle_kind(const lw_handle_t *h);

// For a finished register handle: the new callable handle. FAILED_PRECONDITION while running;
// the register's own status if it failed; INVALID_ARGUMENT for other kinds.
LW_API LW_MUST_USE lw_status_t lw_handle_callable(const lw_handle_t *h, lw_callable_handle_t *out);

// For a finished L2 run handle: its timing, filled for every finished run, a failed or
// cancelled one too, and returns the run's own status (LW_OK, or why it failed: LW_CANCELLED,
// ...). Times of what did not happen are 0: a run cancelled while still queued has queue_ns and
// kernel_wall_ns 0 (its wait is in host_wall_ns), a run whose launch failed has kernel_wall_ns
// 0; a kernel stopped by a cancel has the time it ran. While the run runs: FAILED_PRECONDITION,
// out untouched. A bad call (NULL h or out, another kind of handle): INVALID_ARGUMENT, out
// untouched, and the last error names it; a run may itself have failed INVALID_ARGUMENT (out
// filled then), which lw_handle_done or lw_handle_status tells apart.
LW_API LW_MUST_USE lw_status_t lw_handle_timing(const lw_handle_t *h, lw_run_timing_t *out);

// Drops the caller's reference. NULL is ignored.
LW_API void lw_handle_release(lw_handle_t *h);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_HANDLE_H_
