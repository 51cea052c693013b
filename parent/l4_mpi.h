// parent/l4_mpi.h — the L4's transport over Open MPI (DESIGN §11): the job's startup with one
// deadline, point-to-point messages with deadlines, and the liveness channel
// (parent/l4_liveness.h) wired in, so a dead or hung peer ends a wait with an error naming it
// instead of hanging it.
//
// No blocking MPI call anywhere. Open MPI 4.1 has no ULFM: a blocking receive from a dead rank
// hangs forever, even with MPI_ERRORS_RETURN, and a small send to it "succeeds". So every wait
// here is MPI_Test / MPI_Improbe polled (spinning briefly, then napping up to a millisecond)
// until the operation completes, its deadline passes, or the liveness channel says the peer
// ended. A send's bytes are copied and kept with its request until MPI is done with them, so
// a send abandoned at its deadline never leaves MPI reading the caller's memory.
//
// Shape: rank 0 is the L4, ranks 1..size-1 the L3 ranks. At open, rank 0 starts the liveness
// watch and sends its address to every rank (one point-to-point message each, not a
// collective); each rank connects; open returns once every rank said HELLO (rank 0) or once
// this rank is connected (the others), or fails at the deadline naming who is missing.
//
// Built only where CMake finds MPI (LW_HAVE_MPI), into the lw_l4_mpi library, never into
// liblanework: a program that does not use the L4 does not link MPI.
//
// Threads: MPI is initialized with MPI_THREAD_MULTIPLE (open fails otherwise). send, recv and
// peer_ended may be called from any thread; open and close from one thread, with no call in
// flight. The end callback runs on the liveness thread (parent/l4_liveness.h's rules).
#ifndef LANEWORK_PARENT_L4_MPI_H_
#define LANEWORK_PARENT_L4_MPI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/status.h"
#include "parent/l4_liveness.h"

#ifdef __cplusplus
extern "C" {
#endif

// The MPI tags of the L4's streams: its task messages (parent/l4_wire.h), and the liveness
// address handed out at open.
#define LW_L4_TAG_MSG 0x4c34
#define LW_L4_TAG_ADDRESS 0x4c35
#define LW_L4_TAG_TENSOR 0x4c36  // tensor bytes (lw__l4_comm_send_tensor / _recv_tensor)
// Transfers (lw__l4_comm_xfer_start): transfer x between two ranks uses tag
// LW_L4_TAG_XFER + x % LW_L4_XFER_TAGS (below MPI's guaranteed 32767 and clear of the others).
#define LW_L4_TAG_XFER 0x5000
#define LW_L4_XFER_TAGS 8192u
#define LW_L4_MATCHED_WAIT_NS 10000000000LL  // a matched message's receive, at most

typedef struct lw_l4_comm lw_l4_comm_t;

typedef struct lw_l4_comm_config {
  int64_t startup_deadline_ns;  // lw__now_ns deadline for the whole open
  int64_t period_ns, hung_ns;   // the liveness channel's (<= 0: its defaults)
  const char *advertise;        // rank 0's host for the ranks to connect to (NULL: its name)
  // A peer's end as the liveness channel reports it (rank 0: each rank's; a rank: the L4's,
  // rank 0). Called after the comm recorded it, so a wait it ends already sees it. May be NULL.
  lw_l4_end_fn end;
  void *ctx;
} lw_l4_comm_config_t;

// Initializes MPI (MPI_THREAD_MULTIPLE) unless the program did, then the liveness channel, as
// above. UNAVAILABLE naming what failed (no MPI thread support, a rank that never connected,
// an address that never arrived) or DEADLINE_EXCEEDED at the startup deadline.
LW_MUST_USE lw_status_t lw__l4_comm_open(int *argc, char ***argv, const lw_l4_comm_config_t *cfg,
                                         lw_l4_comm_t **out, lw_error_t *err);

int32_t lw__l4_comm_rank(const lw_l4_comm_t *c);
int32_t lw__l4_comm_size(const lw_l4_comm_t *c);

// Sends bytes to rank `to` on the message stream (MPI_Isend of a private copy). Returns OK
// when MPI is done with the copy; UNAVAILABLE naming the peer when its liveness ended first;
// DEADLINE_EXCEEDED at the deadline (the copy stays with MPI until close).
LW_MUST_USE lw_status_t lw__l4_comm_send(lw_l4_comm_t *c, int32_t to, const void *buf,
                                         size_t bytes, int64_t deadline_ns, lw_error_t *err);

// Receives the next message of the stream, from `from` or any rank (-1), into a buffer it
// allocates (*out_buf, *out_bytes; free() it). NOT_FOUND when none came by the deadline (0:
// look once); UNAVAILABLE naming the peer when `from` ended with nothing left from it. The
// deadline bounds the wait for a message to start: one that did is received whole (a large
// one takes several MPI progress rounds), until its sender ends or for at most
// LW_L4_MATCHED_WAIT_NS more.
LW_MUST_USE lw_status_t lw__l4_comm_recv(lw_l4_comm_t *c, int32_t from, int32_t *out_from,
                                         void **out_buf, size_t *out_bytes, int64_t deadline_ns,
                                         lw_error_t *err);

// A tensor's bytes, moved with no copy: sent from buf and received into buf, on their own
// stream (one tensor at a time between two ranks, in the order both sides agree on, e.g. by a
// task message). OK when MPI is done with buf. On any failure (the deadline, the peer's end)
// MPI may still read (send) or write (receive) buf: the caller keeps it allocated until
// lw__l4_comm_close. UNAVAILABLE naming the peer, DEADLINE_EXCEEDED, INVALID_ARGUMENT for a
// size MPI cannot count (> INT_MAX) or a bad rank; a receive of another size is INTERNAL.
LW_MUST_USE lw_status_t lw__l4_comm_send_tensor(lw_l4_comm_t *c, int32_t to, const void *buf,
                                                size_t bytes, int64_t deadline_ns,
                                                lw_error_t *err);
LW_MUST_USE lw_status_t lw__l4_comm_recv_tensor(lw_l4_comm_t *c, int32_t from, void *buf,
                                                size_t bytes, int64_t deadline_ns,
                                                lw_error_t *err);

// A tensor's bytes moved without waiting: the L4's rank servers keep many moves and tasks in
// flight on one thread, so a move is started, then tested while other work goes on. Both sides
// name the same transfer number `xfer` (the L4 hands it to both in its messages); bytes go
// from and into the caller's buffer, which stays the caller's to keep until the transfer ends
// (and, when it failed, until lw__l4_comm_close: MPI may still touch it).
typedef struct lw_l4_xfer lw_l4_xfer_t;

// Starts sending (send true) or receiving bytes to/from peer. INVALID_ARGUMENT for a bad rank
// or a size MPI cannot count; UNAVAILABLE naming the peer when it already ended.
LW_MUST_USE lw_status_t lw__l4_comm_xfer_start(lw_l4_comm_t *c, bool send, int32_t peer,
                                               uint32_t xfer, void *buf, size_t bytes,
                                               lw_l4_xfer_t **out, lw_error_t *err);
// Looks at x once: NOT_FOUND while it is under way; otherwise x is over and freed: OK when
// done, UNAVAILABLE naming the peer when it ended first, INTERNAL when another number of bytes
// came. On failure the buffer stays with MPI until close.
LW_MUST_USE lw_status_t lw__l4_comm_xfer_test(lw_l4_comm_t *c, lw_l4_xfer_t *x,
                                              lw_error_t *err);
// Gives x up (its buffer stays with MPI until close) and frees it. NULL is ignored.
void lw__l4_comm_xfer_abandon(lw_l4_comm_t *c, lw_l4_xfer_t *x);

// Whether rank's liveness ended (lost or gone with a goodbye), and how (why may be NULL).
bool lw__l4_comm_peer_ended(lw_l4_comm_t *c, int32_t rank, char *why, size_t why_bytes);

// Records that rank is lost, as another rank's liveness would (a rank watches only the L4: the
// L4 tells it of the others, parent/l4_wire.h's LOST): every wait on it, a transfer's
// included, ends UNAVAILABLE with why. A rank that already ended keeps its first end.
void lw__l4_comm_peer_lost(lw_l4_comm_t *c, int32_t rank, const char *why);

// How rank's liveness ended (0 while it lives).
lw_l4_end_t lw__l4_comm_peer_end(lw_l4_comm_t *c, int32_t rank);
// "rank R (host H, pid P)" as the liveness channel knows it (rank 0 on a rank: "the L4 ...";
// a rank not yet known: "rank R").
void lw__l4_comm_peer_name(lw_l4_comm_t *c, int32_t rank, char *out, size_t out_bytes);

// Ends this side's liveness (rank 0: every rank sees GOODBYE; a rank: the L4 does), then
// MPI_Finalize when finalize is true and every peer is still there (finalize is collective and
// would hang on a dead one); otherwise MPI stays initialized and the process should _exit.
// Returns whether MPI was finalized.
bool lw__l4_comm_close(lw_l4_comm_t *c, bool finalize);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_L4_MPI_H_
