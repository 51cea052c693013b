// parent/l4_impl.h — the L4 worker's insides, shared by parent/l4.c (create, names, destroy and
// rank 0: tensors, the DAG, dispatch) and parent/l4_serve.c (ranks >= 1: the server). The contract
// is lanework/l4.h; the messages parent/l4_wire.h; the transport parent/l4_mpi.h.
//
// Threads: one thread drives each side (lanework/l4.h); only `cancel` is touched by others.
#ifndef LANEWORK_PARENT_L4_IMPL_H_
#define LANEWORK_PARENT_L4_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/l4.h"
#include "parent/l4_mpi.h"
#include "parent/l4_wire.h"
#include "parent/thread.h"

// A registered name: a chip callable or an L3 orch function.
typedef struct l4_name {
  char name[LW_L4_NAME_BYTES];
  uint32_t kind;            // lw_l4_task_kind_t
  lw_callable_handle_t l3;  // ranks >= 1, kernels: the L3 worker's handle
  lw_orch_fn fn;            // ranks >= 1, orch functions
} l4_name_t;

// Handles lw_l4_register* gives: this tag in the high bits, the name's index + 1 below.
#define L4_HANDLE_TAG 0x4c34000000000000ull
#define L4_HANDLE_MASK 0x0000ffffffffffffull

typedef struct l4_tensor l4_tensor_t;  // rank 0 (parent/l4.c)
typedef struct l4_rank l4_rank_t;      // rank 0: what the L4 knows of each rank
typedef struct l4_run l4_run_t;        // rank 0: the run in progress

struct lw_l4 {
  lw_l4_config_t cfg;
  lw_l4_comm_t *comm;
  int32_t rank, size;
  lw_worker_t *l3;  // ranks >= 1
  l4_name_t *names;
  uint32_t n_names, cap_names;
  uint64_t *send_seq;  // per peer: the last seq sent on our stream to it
  uint64_t *recv_seq;  // per peer: the last seq received from it
  // lw_l4_cancel calls so far: a run submitted before the latest one stops.
  _Atomic uint64_t cancel_epoch;
  bool lost;  // a peer was lost (its liveness ended while we needed it)
  // Rank 0.
  l4_tensor_t **tensors;  // by id - 1 (NULL once freed)
  uint64_t n_tensors, cap_tensors;
  l4_rank_t *ranks;  // by rank (index 0 unused)
  uint32_t next_xfer;
  int32_t next_home;  // round-robin for LW_L4_ANY_RANK
  uint64_t next_run_id, next_dispatch;
  l4_run_t *run;  // the run in progress (state_mu)
  // Runs (parent/l4_runs.c). state_mu is held by the thread running a run for the whole run,
  // and by a tensor call from any other thread, so those wait for the run; the run's own
  // thread (its orch function) calls them without it. q_mu (a leaf, never held while taking
  // state_mu) guards the queue of submitted runs and the runner's state.
  pthread_mutex_t state_mu;
  pthread_mutex_t q_mu;
  pthread_cond_t q_cv;
  struct l4_op *q_head, **q_tail;
  bool q_stopping;
  // A run is being run (q_mu): by the runner, or inline by lw_l4_run on its caller's thread,
  // which does so only when nothing is queued and nothing runs, so runs keep their order.
  bool q_busy;
  lw_thread_t runner;  // started by the first run
};

// What a task does with a tensor of tag (lw_tag_t): reads it (every tag but OUTPUT: NO_DEP reads
// the current version with no ordering), writes it (OUTPUT, INOUT, OUTPUT_EXISTING).
static inline bool lw__l4_tag_reads(uint32_t tag) { return tag != LW_TAG_OUTPUT; }
static inline bool lw__l4_tag_writes(uint32_t tag) {
  return tag == LW_TAG_OUTPUT || tag == LW_TAG_INOUT || tag == LW_TAG_OUTPUT_EXISTING;
}

// Makes room for need elements of elem bytes in *p (capacity *cap, doubling from 16). False when
// out of memory (*p and *cap unchanged).
bool lw__l4_grow(void **p, uint32_t *cap, uint32_t need, size_t elem);

// Looks once at each transfer of xfers[0 .. *n - 1] and keeps the ones still under way (in
// order); the others ended (done, or their peer lost: its tasks fail elsewhere). Whether any
// ended.
bool lw__l4_xfers_poll(lw_l4_comm_t *c, lw_l4_xfer_t **xfers, uint32_t *n);

// The L4's nap while nothing moves (*round = 0 after each progress): yield for the first 200 us,
// then sleep, doubling from 10 us up to cap_ns. With transfers under way (busy) it only
// yields: Open MPI moves a large message only inside MPI calls on both sides (vader's copy
// in/out goes one 32 KB fragment a call; its single copy waits for the receiver's match), so a
// sleeping side stalls the transfer (4 MB between two ranks took 44 ms with fragments and
// naps; a yield gives a process that shares the CPU its turn all the same).
void lw__l4_nap(uint32_t *round, int64_t cap_ns, bool busy);

// Sends an encoded message to `to` with the next seq of that stream (encode is called with it). The
// caller's error names what failed.
lw_status_t lw__l4_send_task(lw_l4_t *l4, int32_t to, const lw_l4_task_t *t, lw_error_t *err);
lw_status_t lw__l4_send_done(lw_l4_t *l4, const lw_l4_done_t *d, lw_error_t *err);
lw_status_t lw__l4_send_cancel(lw_l4_t *l4, int32_t to, const lw_l4_cancel_t *c, lw_error_t *err);
lw_status_t lw__l4_send_move(lw_l4_t *l4, int32_t to, lw_l4_wire_kind_t kind, const lw_l4_move_t *m,
                             lw_error_t *err);
// Receives the next message from `from` (-1: any) if one is there (NOT_FOUND otherwise) and decodes
// it against the stream's next seq: *buf holds it (free it), *msg points into it.
lw_status_t lw__l4_recv(lw_l4_t *l4, int32_t from, int32_t *out_from, void **buf,
                        lw_l4_wire_msg_t *msg, lw_error_t *err);

// parent/l4_serve.c: ranks >= 1.
lw_status_t lw__l4_serve(lw_l4_t *l4, lw_error_t *err);
// parent/l4_root.c: runs fn as run number next_run_id + 1, with state_mu held (or on the run's
// own thread), to its end and its results' return; *out is its report, the return its status.
// epoch: cancel_epoch when it was submitted; handle: its handle (NULL: none).
lw_status_t lw__l4_run_one(lw_l4_t *l4, lw_l4_orch_fn fn, void *user, uint64_t epoch,
                           const lw_handle_t *handle, lw_run_report_t *out);
// parent/l4_runs.c: takes state_mu unless this thread runs the run in progress; returns
// whether it took it (give that to unlock).
bool lw__l4_state_lock(lw_l4_t *l4);
void lw__l4_state_unlock(lw_l4_t *l4, bool locked);
// parent/l4_runs.c: the run queue's and the runner's initialize/deinitialize (deinitialize
// cancels what is queued, stops the run in progress and joins the runner).
lw_status_t lw__l4_runs_initialize(lw_l4_t *l4, lw_error_t *err);
void lw__l4_runs_deinitialize(lw_l4_t *l4);
// parent/l4.c: rank 0's teardown of its tensors and run state.
void lw__l4_root_free(lw_l4_t *l4);

#endif  // LANEWORK_PARENT_L4_IMPL_H_
