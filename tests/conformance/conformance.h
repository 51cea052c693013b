// tests/conformance/conformance.h — the conformance suite (DESIGN §7, IREE CTS style): the
// behaviours of DESIGN §3.3–§4 written once (test_conformance.c) and run on every backend at
// L2 (lw_chip) and L3 (lw_worker with chip children).
//
// Three parts, each in its own file, meet here (a test binary is one translation unit:
// test_conformance.c includes the other two):
//   - the level driver (level_l2.c, level_l3.c): one chip seen through the level's public API.
//     A test binary holds exactly one of them (LW_CONF_LEVEL);
//   - the backend's kernels (backends.c): the conformance kernels of every backend, as a table
//     per backend. A test binary is built for one backend (LW_CONF_BACKEND, from the CMake list
//     LW_CONFORMANCE_BACKENDS in CMakeLists.txt);
//   - the cases (test_conformance.c), which only use what this header declares.
//
// Adding a backend: its name to LW_CONFORMANCE_BACKENDS, and its row to the table in
// backends.c (the kernels below, in that backend's own format). A kernel the backend cannot
// provide gets a reason instead; the cases that need it skip with that reason. A backend
// missing from the table fails every case: a whole backend is never skipped.
#ifndef LANEWORK_TESTS_CONFORMANCE_CONFORMANCE_H_
#define LANEWORK_TESTS_CONFORMANCE_CONFORMANCE_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanework/lanework.h"

#ifndef LW_CONF_BACKEND
#error "LW_CONF_BACKEND must name the backend under test"
#endif

// ---------------------------------------------------------------------------------------------
// The conformance kernels. Their behaviour and signature are the same on every backend; only
// the image differs. Tensors are host memory the test reads and writes while the kernel runs
// (conf_alloc).

typedef enum conf_kernel {
  // (INOUT int64 log[], SCALAR value): claims slot n = log[0]++ atomically and stores value
  // in log[1 + n]. The order of the log is the order in which runs executed.
  CONF_K_RECORD = 0,
  // (IN|LIVE uint32 gate, OUT|LIVE uint32 entered): stores entered = 1, then waits until
  // gate != 0 (returns 0) or until its run is asked to stop (returns LW_KERNEL_CANCELLED).
  // Holds the run lane for as long as the test needs, without any timing. Both words are live
  // tensors (LW_PARAM_LIVE): the test's store to gate reaches the kernel, and the kernel's to
  // entered the test, while the run runs, also on a device that does not share memory with
  // the host (at the next slice boundary there: opencl/gate.cl).
  CONF_K_GATE = 1,
  // (INOUT any, SCALAR code): returns code (non-zero): a kernel that fails. The tensor is not
  // read; it carries a dependency at L3.
  CONF_K_FAIL = 2,
  // (): its register does not finish until the file named after the first ':' of the
  // callable's name exists ("conf_hold:/tmp/x"). Holds the register lane as long as the test
  // needs.
  CONF_K_HOLD = 3,
  CONF_K_COUNT = 4,
} conf_kernel_t;

// Loads kernel k of the backend under test into *out, with its signature, named `name` (NULL:
// the kernel's own name). Skips the calling test (cr_skip) with the backend's reason when the
// backend has no such kernel. Release with conf_kernel_free.
void conf_kernel_load(conf_kernel_t k, const char *name, lw_callable_t *out);
void conf_kernel_free(lw_callable_t *c);

// Sets the launch geometry a run of kernel k needs on the backend under test (none on most:
// the geometry is part of the backend's row in backends.c, like the image). h is kernel k as
// registered on the chip under test: a row whose range is sized on the device (the opencl
// gate) runs its probe with h the first time, before any run of the case (backends.c).
void conf_kernel_geometry(conf_kernel_t k, lw_callable_handle_t h, lw_args_t *args);

// The backend under test ("sim", ...).
const char *conf_backend(void);

// ---------------------------------------------------------------------------------------------
// The level driver: one chip (device 0 of the backend) and its lanes.

// 2 or 3.
int conf_level(void);

// Opens the chip (L2) or creates a worker of one chip child (L3) on the backend under test,
// counting fds and children first. conf_close tears it down and checks that no fd and no
// child process was left behind.
void conf_open(void);
void conf_close(void);

// Zeroed memory that kernels read and write (L2: the heap; L3: the worker's arena). Freed by
// conf_close.
void *conf_alloc(size_t bytes);

// Register / unregister through the level's public API. On failure, err (when not NULL) gets
// the error the level reported (lw_last_error, or the handle's error).
lw_status_t conf_register(const lw_callable_t *c, lw_callable_handle_t *out, lw_error_t *err);
lw_status_t conf_register_async(const lw_callable_t *c, lw_handle_t **out);
lw_status_t conf_unregister_async(lw_callable_handle_t h, lw_handle_t **out);

// One kernel launch: the callable, its args (with tags: they make dependencies at L3) and a
// timeout (0: none).
typedef struct conf_task {
  lw_callable_handle_t callable;
  lw_args_t args;
  int64_t timeout_ns;
} conf_task_t;

// Whether a run may hold several dependent tasks (L3: an orch function's DAG). L2 runs hold
// one kernel each and never depend on one another.
bool conf_level_has_dags(void);

// Submits one run of n tasks (n > 1 only where conf_level_has_dags) on the chip and returns
// once the run was accepted or refused: at L2 lw_chip_run_async, at L3 lw_worker_run_async
// whose orch function submits the tasks (the call waits until the orch function's submits
// returned, so an accepted run's callables are pinned, as at L2). LW_OK: *out is the run's
// handle (release with lw_handle_release). Otherwise *out is NULL and err (may be NULL) says
// why the submit was refused.
lw_status_t conf_run_async(const conf_task_t *tasks, int n, lw_handle_t **out, lw_error_t *err);

// The level's sync run of one task (lw_chip_run, lw_worker_run): the run's status; err (may
// be NULL) gets its error.
lw_status_t conf_run(const conf_task_t *task, lw_error_t *err);

// conf_run, also giving the kernel's own time as the chip measured it (L2: the run timing's
// kernel_wall_ns; L3: the task report's kernel_ns); 0 when the backend measured none.
lw_status_t conf_run_timed(const conf_task_t *task, uint64_t *out_kernel_ns, lw_error_t *err);

// Whether every task of the run finished. At L2 the same as lw_handle_done; at L3 a run's
// handle also waits for every earlier run's handle, so its tasks may have finished while its
// handle has not.
bool conf_run_settled(lw_handle_t *run);

// Waits until at least n runs (L2) or tasks (L3) are accepted and not yet finished: at L2 the
// chip's pinned runs, at L3 the worker's live tasks. Lets a case know that a run submitted on
// another thread (a sync run) is queued, by an event rather than a sleep.
void conf_wait_in_flight(uint32_t n);

// The run's failed and completed task counts once its handle finished (L2: one task).
void conf_run_counts(lw_handle_t *run, uint32_t *out_completed, uint32_t *out_failed);

// ---------------------------------------------------------------------------------------------
// Helpers shared by the cases.

// A gate kernel's words.
typedef struct conf_gate {
  _Atomic uint32_t open;
  _Atomic uint32_t entered;
} conf_gate_t;

// A record kernel's log: log[0] = count, log[1 + i] = the i-th recorded value.
#define CONF_LOG_LEN 130
typedef struct conf_log {
  _Atomic int64_t v[CONF_LOG_LEN];
} conf_log_t;

// Sleeps (briefly) until *word != 0; bounded by the test's .timeout.
void conf_wait_nonzero(_Atomic uint32_t *word);
// Sleeps until conf_run_settled(run).
void conf_wait_settled(lw_handle_t *run);

#endif  // LANEWORK_TESTS_CONFORMANCE_CONFORMANCE_H_
