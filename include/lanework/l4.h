// lanework/l4.h — the L4 worker: the orch API over L3 workers on several hosts, launched and
// connected by Open MPI (docs/l4.md, DESIGN §11).
//
// Shape: `mpirun -np 1+K prog`. Every rank runs the same program and calls lw_l4_create; rank 0 is
// the L4: it alone runs orch functions (lw_l4_run) and owns the tensors; ranks 1..K each run an L3
// worker (lw_worker_create with cfg->l3) and serve the L4's tasks in lw_l4_serve until the L4 ends.
// Callables, sub functions and L3 orch functions are referred to across ranks by the names every
// rank registers them under (lw_l4_register, lw_l4_register_sub, lw_l4_register_orch), never by
// pointers.
//
// Tensors live at L4 level as tokens (lw_l4_tensor_create): each has a home rank and a version. A
// task runs where the data it writes lives (the home of its first written tensor) unless the submit
// names a rank; a task reading a version its rank does not hold gets it rank to rank with
// non-blocking two-sided MPI (never through the L4; a version at most 16 KiB held only by rank 0
// rides inside the task message); a rank keeps a read copy until the tensor is written again.
// Dependencies are those of orch.h (read-after-write, write-after-write, write-after-read) across
// ranks (a tensor tagged LW_TAG_NO_DEP is brought at the version current when its task is posted,
// with no ordering: the caller's to keep safe, as at L3). When a run succeeds, every tensor created
// with rank-0 memory holds its current version there before lw_l4_run returns (a version lost
// earlier, and reported then, stays lost).
//
// Failure (docs/l4.md): no blocking MPI call is made. A rank that dies, hangs (no heartbeat for
// hung_ns), leaves or breaks the protocol fails every task it held with an error naming the rank,
// its host and pid; its work is never run again anywhere, a version only it held is lost (a later
// read of it fails naming it), and lw_l4_destroy then returns a non-zero exit status (Open MPI 4.1
// would exit 0). A task that fails fails its run as at L3: every task not yet posted is skipped
// (POISONED) and every posted one is cancelled on its rank. A rank whose L4 dies leaves lw_l4_serve
// with UNAVAILABLE naming it.
//
// Threads: lw_l4_create, lw_l4_serve and lw_l4_destroy from one thread (a program's main thread,
// typically); runs, the tensor calls and handles from any thread of rank 0; lw_l4_cancel from any
// thread, also inside a signal handler.
// Built only where Open MPI is found, in its own library (liblanework_l4.a, CMake target
// lanework::l4; docs/packaging.md): a program that does not use the L4 does not link MPI.
#ifndef LANEWORK_L4_H_
#define LANEWORK_L4_H_

#include <stdint.h>

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/config.h"
#include "lanework/handle.h"
#include "lanework/status.h"
#include "lanework/worker.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_l4 lw_l4_t;
typedef struct lw_l4_orch lw_l4_orch_t;

#define LW_L4_ANY_RANK (-1)
#define LW_L4_NAME_MAX 63        // a registered name's bytes, without its NUL
#define LW_L4_MAX_IN_FLIGHT 128  // tasks posted to one rank at once, at most
#define LW_L4_EXIT_PEER_LOST 3   // lw_l4_destroy's status when a rank or the L4 was lost

// Grows like the structs of config.h: struct_size first, set by the _default function. The L3
// worker's config is embedded, so its layout is part of this struct's: l3.struct_size must be
// sizeof(lw_worker_config_t) (the _default function sets it), as worker.h's chip template.
typedef struct lw_l4_config {
  uint32_t struct_size;        // sizeof(lw_l4_config_t); set by lw_l4_config_default
  uint32_t max_in_flight;      // tasks posted to one rank at once
                               // (1..LW_L4_MAX_IN_FLIGHT)
  lw_worker_config_t l3;       // each L3 rank's worker (its chips, arena, liveness, ...)
  int64_t startup_timeout_ns;  // every rank connected and its L3 worker up
                               // within this
  int64_t period_ns;           // heartbeat period between the L4 and each rank
  int64_t hung_ns;             // silence after which a rank (or the L4) counts as hung
  int64_t message_timeout_ns;  // a task message not taken by MPI within this
                               // fails its task
} lw_l4_config_t;

LW_API void lw_l4_config_default_sized(lw_l4_config_t *c, uint32_t struct_size);
// 64 in flight per rank; l3 = lw_worker_config_default; 30 s startup; 100 ms period; 2 s hung; 10 s
// message timeout.
static inline void lw_l4_config_default(lw_l4_config_t *c) {
  lw_l4_config_default_sized(c, (uint32_t)sizeof(*c));
}

// Every rank: starts MPI (MPI_THREAD_MULTIPLE) unless the program did, the liveness channel, and on
// ranks >= 1 the L3 worker; one deadline for all of it (startup_timeout_ns). argc/argv may be NULL.
// 2..64 ranks. INVALID_ARGUMENT for a bad config or size; UNAVAILABLE naming what failed (a rank that
// never connected, the L3 worker); DEADLINE_EXCEEDED at the deadline.
LW_API LW_MUST_USE lw_status_t lw_l4_create(int *argc, char ***argv, const lw_l4_config_t *cfg,
                                            lw_l4_t **out);
LW_API int32_t lw_l4_rank(const lw_l4_t *l4);
LW_API int32_t lw_l4_size(const lw_l4_t *l4);
// The rank's L3 worker (ranks >= 1; NULL on rank 0), e.g. to allocate or register more.
LW_API lw_worker_t *lw_l4_worker(lw_l4_t *l4);

// Every rank, the same names: a chip callable under name (1..LW_L4_NAME_MAX printable bytes). Ranks
// >= 1 register it on their L3 worker (lw_worker_register); rank 0 records the name and gives the
// handle that lw_l4_submit takes. ALREADY_EXISTS for a name taken on this rank.
LW_API LW_MUST_USE lw_status_t lw_l4_register(lw_l4_t *l4, const char *name, const lw_callable_t *c,
                                              lw_callable_handle_t *out);
// Every rank, the same names: a sub function (lw_worker_register_sub: it runs in a sub child of
// the rank's L3 worker, so cfg->l3.n_subs must be > 0 there, and it must be in the program's own
// code or a library loaded before lw_l4_create). A task of it takes its tensors and scalars as a
// kernel task does; the rank names no chip. On rank 0, fn is not called (NULL is allowed there).
LW_API LW_MUST_USE lw_status_t lw_l4_register_sub(lw_l4_t *l4, const char *name, lw_sub_fn fn,
                                                  lw_callable_handle_t *out);
// Every rank, the same names: an L3 orch function. A task of it runs as one L3 run on its rank,
// fn(orch, user) with user = a const lw_kernel_args_t * holding the task's tensors (in the rank's
// worker arena, so fn may pass them to lw_args_add_tensor) and scalars. On rank 0, fn is not called
// (NULL is allowed there).
LW_API LW_MUST_USE lw_status_t lw_l4_register_orch(lw_l4_t *l4, const char *name, lw_orch_fn fn,
                                                   lw_callable_handle_t *out);

// Ranks >= 1: serves the L4's tasks until it ends. OK when it ended with a goodbye; UNAVAILABLE
// naming the L4 (rank 0, host, pid) when it died or hung, or naming what broke; FAILED_PRECONDITION
// on rank 0.
LW_API LW_MUST_USE lw_status_t lw_l4_serve(lw_l4_t *l4);

// Rank 0: a tensor of bytes (> 0) whose first version is data's bytes (rank-0 memory that must stay
// valid until lw_l4_tensor_free; the last version lands there when a run succeeds), or all zeros
// when data is NULL (then nothing lands on rank 0). home_rank is where its writers run by default
// until it is written: then its home is the rank that last wrote it (the data moved there), so a
// write on a named rank moves later LW_L4_ANY_RANK writers with it (1..size-1, or LW_L4_ANY_RANK:
// spread round-robin). *out is a token, not memory: pass it as the
// data of lw_args_add_tensor (with these bytes) in an L4 orch function, never dereference it.
LW_API LW_MUST_USE lw_status_t lw_l4_tensor_create(lw_l4_t *l4, void *data, uint64_t bytes,
                                                   int32_t home_rank, void **out);
// Rank 0, between runs: data was changed by the program; its bytes are the tensor's new version.
LW_API LW_MUST_USE lw_status_t lw_l4_tensor_written(lw_l4_t *l4, void *tensor);
// Rank 0, between runs: forgets the tensor; every rank holding a copy frees it. NULL ignored.
LW_API LW_MUST_USE lw_status_t lw_l4_tensor_free(lw_l4_t *l4, void *tensor);
// Rank 0: which rank holds the tensor's current version (0 for rank 0's data, -1 when its only copy
// was lost with a rank or a failed writer), and that version (counts writes from 0).
LW_API LW_MUST_USE lw_status_t lw_l4_tensor_where(lw_l4_t *l4, void *tensor, int32_t *rank,
                                                  uint64_t *version);

typedef lw_status_t (*lw_l4_orch_fn)(lw_l4_orch_t *orch, void *user);

// Rank 0: queues a run of fn(orch, user) and returns its handle (lanework/handle.h: wait,
// cancel, release). Runs go one at a time in submission order on the L4's run thread (started
// by the first run); a run's handle finishes once all its tasks finished and, when it
// succeeded, its results are on rank 0 (lw_l4_handle_report: lw_worker_run's report, wall_ns
// from fn's start). lw_handle_cancel stops that run (queued: it finishes CANCELLED without
// running). The tensor calls of this header wait for a run in progress when made from another
// thread, and may be made from the orch function itself (lw_l4_tensor_create there; the
// between-runs calls refuse FAILED_PRECONDITION).
LW_API LW_MUST_USE lw_status_t lw_l4_run_async(lw_l4_t *l4, lw_l4_orch_fn fn, void *user,
                                               lw_handle_t **out);
// The report of a finished L4 run handle. INVALID_ARGUMENT for another kind of handle,
// FAILED_PRECONDITION while it runs.
LW_API LW_MUST_USE lw_status_t lw_l4_handle_report(const lw_handle_t *h, lw_run_report_t *out);
// Rank 0: runs fn and waits for the run: returns the run's status, its report in *out (may be
// NULL). When no run is queued it runs on the calling thread, after the run in progress if there
// is one (in order all the same); otherwise it is lw_l4_run_async and a wait. From an orch function of this L4:
// FAILED_PRECONDITION (it would wait for itself).
LW_API LW_MUST_USE lw_status_t lw_l4_run(lw_l4_t *l4, lw_l4_orch_fn fn, void *user,
                                         lw_run_report_t *out);
// Cancels every run submitted before this call, running or queued: each finishes CANCELLED
// (tasks not posted are skipped, posted ones are cancelled on their ranks; a queued run does not
// start). Any thread; async-signal-safe. A run whose tasks all finished and whose results are
// coming back to rank 0 is not stopped any more.
LW_API void lw_l4_cancel(lw_l4_t *l4);

// Inside an L4 orch function: one task of the callable, sub function or L3 orch function c
// (lw_l4_register*) on rank (1..size-1, or LW_L4_ANY_RANK: the home of the first tensor it
// writes; a task that writes nothing runs where its first input lives). args' tensors are tokens of lw_l4_tensor_create with
// their bytes; their tags give the dependencies. cfg may be NULL (its timeout_ns bounds the task on
// its rank). Refuses what it can before anything is sent: INVALID_ARGUMENT naming the tensor, the
// rank or a negative timeout, NOT_FOUND for an unknown callable, UNAVAILABLE for a named rank
// that was lost, POISONED once the run failed. A task whose input was lost, or placed on a rank
// lost meanwhile, is accepted and fails when it would be posted (its run with it), naming why.
LW_API LW_MUST_USE lw_status_t lw_l4_submit(lw_l4_orch_t *o, lw_callable_handle_t c,
                                            const lw_args_t *args, const lw_run_config_t *cfg,
                                            int32_t rank);
// The id of the task the last successful submit on o created (1.. per run); 0 before any.
LW_API uint64_t lw_l4_last_task(const lw_l4_orch_t *o);

// Every rank: ends it. Rank 0 says goodbye to every rank (their lw_l4_serve returns OK); a rank
// stops its L3 worker. MPI is finalized when it was started here and no peer was lost. Returns the
// exit status the process should end with: 0, or LW_L4_EXIT_PEER_LOST when a rank or the L4 was
// lost (MPI then stays initialized: end the process with it at once, e.g. _exit). NULL: 0.
LW_API int lw_l4_destroy(lw_l4_t *l4);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_L4_H_
