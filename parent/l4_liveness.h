// parent/l4_liveness.h — the L4's liveness channel (DESIGN §11): one TCP connection between the
// L4 (rank 0) and each L3 rank, carrying heartbeats both ways, outside MPI.
//
// Why: Open MPI 4.1 has no ULFM. A blocking receive from a dead rank hangs forever, a send to
// it "succeeds", and `mpirun --enable-recovery` exits 0; without it, mpirun SIGTERMs everyone
// about a second after one rank dies. A socket sees a killed process's EOF within about a
// millisecond. So death and hangs are lanework's own to find: the L4 watches every rank here,
// and every rank watches the L4, with threads that never call MPI.
//
// The L4's side (lw__l4_watch_*): listens on a TCP port; each rank connects, says HELLO (its
// rank, pid and host), then both sides send a BEAT every period. The watch thread reports a
// rank's end, once, through the config's callback (GOODBYE: it sent BYE and closed), or its
// loss:
//   - DIED: its connection closed (EOF or a reset) without a BYE: the process exited or was
//     killed (SIGKILL included; seen in about 1 ms);
//   - HUNG: nothing arrived from it for hung_ns (SIGSTOP, a frozen host, a cut network);
//   - VIOLATION: it sent something that is not the protocol (bad magic, version, kind, a rank
//     out of range or connected twice).
// Every message names the rank, its host and its pid. A lost rank's connection is closed, so a
// rank that was merely slow sees EOF and leaves (below).
//
// The rank's side (lw__l4_beat_*): connects, says HELLO, and a thread sends BEATs and reads the
// L4's. The L4's end — GOODBYE (lw__l4_watch_close), or lost: its connection closed without a
// BYE (DIED: the L4 exited or was killed) or silent for hung_ns (HUNG) — is reported once
// through the callback; a rank's L3 then exits (0 after a GOODBYE, non-zero otherwise: the L4
// is the only one that can use its results).
//
// Threads: open/close/wait_ready/rank_info from any one thread at a time per object; the
// callbacks run on the object's own thread with no lanework lock held, and must not call
// close on the same object (they may set a flag, write an fd, or _exit).
// Wire: fixed 96-byte little-endian messages (lw_l4_msg_t below); docs/l4.md.
#ifndef LANEWORK_PARENT_L4_LIVENESS_H_
#define LANEWORK_PARENT_L4_LIVENESS_H_

#include <stdbool.h>
#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_L4_HOST_BYTES 64
#define LW_L4_ADDRESS_BYTES 96  // "host:port" with its NUL
#define LW_L4_MSG_MAGIC 0x344c574cu  // "LWL4" as a little-endian word
#define LW_L4_MSG_VERSION 1u

typedef enum lw_l4_msg_kind {
  LW_L4_MSG_HELLO = 1,  // first message of a rank: rank, pid, host
  LW_L4_MSG_BEAT = 2,   // both ways, every period; seq counts them
  LW_L4_MSG_BYE = 3,    // a clean goodbye: the EOF after it is not a death
} lw_l4_msg_kind_t;

typedef struct lw_l4_msg {
  uint32_t magic;    // LW_L4_MSG_MAGIC
  uint16_t version;  // LW_L4_MSG_VERSION
  uint16_t kind;     // lw_l4_msg_kind_t
  int32_t rank;      // the sender's rank (0: the L4)
  int32_t pid;       // the sender's pid
  uint64_t seq;      // BEAT: the sender's count
  char host[LW_L4_HOST_BYTES];  // HELLO: the sender's host name, NUL-terminated
  uint8_t reserved[8];
} lw_l4_msg_t;
_Static_assert(sizeof(lw_l4_msg_t) == 96, "lw_l4_msg_t is the wire format");

// How a peer's connection ended. GOODBYE is a clean end (a BYE, then the close); the others
// mean the peer is lost.
typedef enum lw_l4_end {
  LW_L4_END_GOODBYE = 1,
  LW_L4_END_DIED = 2,
  LW_L4_END_HUNG = 3,
  LW_L4_END_VIOLATION = 4,
} lw_l4_end_t;

// A rank's (or, on a rank, the L4's: rank 0) connection ended, once per peer; message names
// it (rank, host, pid) and says how.
typedef void (*lw_l4_end_fn)(void *ctx, int32_t rank, lw_l4_end_t why, const char *message);

#define LW_L4_PERIOD_NS_DEFAULT 100000000LL  // 100 ms
#define LW_L4_HUNG_NS_DEFAULT 2000000000LL   // 2 s: a hung rank is reported within 2.1 s

// ---------------------------------------------------------------------------------------------
// The L4's side

typedef struct lw_l4_watch_config {
  uint32_t n_ranks;        // ranks 1..n_ranks are expected (at least 1)
  int64_t period_ns;       // heartbeat period, both ways; <= 0: LW_L4_PERIOD_NS_DEFAULT
  int64_t hung_ns;         // silence that makes a rank HUNG; <= 0: LW_L4_HUNG_NS_DEFAULT;
                           // raised to 2 periods if smaller
  const char *bind_host;   // the address to listen on; NULL: every interface
  const char *advertise;   // the host ranks connect to; NULL: this host's name
  lw_l4_end_fn end;       // may be NULL
  void *ctx;
} lw_l4_watch_config_t;

typedef struct lw_l4_watch lw_l4_watch_t;

typedef struct lw_l4_rank_info {
  int32_t rank;
  int32_t pid;                    // 0 until its HELLO
  char host[LW_L4_HOST_BYTES];    // "" until its HELLO
} lw_l4_rank_info_t;

// Listens on an ephemeral port and starts the watch thread. *out is freed by close.
LW_MUST_USE lw_status_t lw__l4_watch_open(const lw_l4_watch_config_t *cfg, lw_l4_watch_t **out,
                                          lw_error_t *err);
// "host:port" for lw__l4_beat_open. Lives as long as the watch.
const char *lw__l4_watch_address(const lw_l4_watch_t *w);
// Waits until every rank said HELLO: OK; a rank that ended meanwhile (lost, or gone with a
// goodbye): UNAVAILABLE with its message;
// the deadline (lw__now_ns) passed: DEADLINE_EXCEEDED naming the ranks that never connected.
LW_MUST_USE lw_status_t lw__l4_watch_wait_ready(lw_l4_watch_t *w, int64_t deadline_ns,
                                                lw_error_t *err);
// A snapshot of what the watch knows of rank (1..n_ranks); false for another rank.
bool lw__l4_watch_rank_info(lw_l4_watch_t *w, int32_t rank, lw_l4_rank_info_t *out);
// Stops the thread (no callback from then on), sends BYE to every connected rank, closes every
// socket and frees w. NULL is a no-op.
void lw__l4_watch_close(lw_l4_watch_t *w);

// ---------------------------------------------------------------------------------------------
// A rank's side

typedef struct lw_l4_beat_config {
  const char *address;     // lw__l4_watch_address of the L4
  int32_t rank;            // this rank (>= 1)
  int64_t period_ns;       // as the L4's; <= 0: the default
  int64_t hung_ns;         // as the L4's; <= 0: the default
  int64_t connect_deadline_ns;  // lw__now_ns deadline for connecting (the startup deadline)
  lw_l4_end_fn end;       // called once when the L4's connection ends (rank 0); may be NULL
  void *ctx;
} lw_l4_beat_config_t;

typedef struct lw_l4_beat lw_l4_beat_t;

// Connects (retrying until the deadline: the L4 may not listen yet), says HELLO, starts the
// beat thread. UNAVAILABLE naming the address when it cannot connect in time; INVALID_ARGUMENT
// for a malformed address or rank.
LW_MUST_USE lw_status_t lw__l4_beat_open(const lw_l4_beat_config_t *cfg, lw_l4_beat_t **out,
                                         lw_error_t *err);
// Stops the thread (no callback from then on), sends BYE, closes the socket and frees b. NULL
// is a no-op.
void lw__l4_beat_close(lw_l4_beat_t *b);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_L4_LIVENESS_H_
