// parent/l4_mpi.c — the L4's transport over Open MPI: startup with one deadline, Test-polled
// point-to-point messages, the liveness channel wired in. Contract in parent/l4_mpi.h.
#include "parent/l4_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lanes/error.h"
#include "lanes/sys.h"

#define FINALIZE_WAIT_NS 5000000000LL  // MPI_Finalize is collective: give up on it after 5 s
// A message an ended peer had started to send: what is here comes whole within this, or never.
#define LAST_LOOK_NS 100000000LL

typedef struct pending {
  MPI_Request req;
  void *copy;
  struct pending *next;
} pending_t;

struct lw_l4_comm {
  int32_t rank, size;
  bool we_initialized;
  lw_l4_watch_t *watch;  // rank 0
  lw_l4_beat_t *beat;    // the others
  lw_l4_end_fn end;
  void *ctx;
  pthread_mutex_t mu;    // ended, why, sends, zombies (a leaf)
  lw_l4_end_t *ended;    // per rank: 0 while live
  char (*why)[LW_ERROR_MESSAGE_BYTES];
  pending_t *sends;      // copies MPI may still read (abandoned sends)
  pending_t *zombies;    // buffers MPI may still write (abandoned receives)
  pending_t *sends_borrowed;  // abandoned tensor requests (their buffers are the callers')
};

static void on_end(void *ctx, int32_t rank, lw_l4_end_t why, const char *message) {
  lw_l4_comm_t *c = ctx;
  if (rank >= 0 && rank < c->size) {
    pthread_mutex_lock(&c->mu);
    c->ended[rank] = why;
    snprintf(c->why[rank], sizeof(c->why[rank]), "%s", message);
    pthread_mutex_unlock(&c->mu);
  }
  if (c->end) c->end(c->ctx, rank, why, message);
}

bool lw__l4_comm_peer_ended(lw_l4_comm_t *c, int32_t rank, char *why, size_t why_bytes) {
  if (rank < 0 || rank >= c->size) return false;
  pthread_mutex_lock(&c->mu);
  bool ended = c->ended[rank] != 0;
  if (ended && why) snprintf(why, why_bytes, "%s", c->why[rank]);
  pthread_mutex_unlock(&c->mu);
  return ended;
}

void lw__l4_comm_peer_lost(lw_l4_comm_t *c, int32_t rank, const char *why) {
  if (rank < 0 || rank >= c->size || rank == c->rank) return;
  pthread_mutex_lock(&c->mu);
  if (c->ended[rank] == 0) {
    c->ended[rank] = LW_L4_END_DIED;
    snprintf(c->why[rank], sizeof(c->why[rank]), "%s", why);
  }
  pthread_mutex_unlock(&c->mu);
}

lw_l4_end_t lw__l4_comm_peer_end(lw_l4_comm_t *c, int32_t rank) {
  if (rank < 0 || rank >= c->size) return 0;
  pthread_mutex_lock(&c->mu);
  lw_l4_end_t end = c->ended[rank];
  pthread_mutex_unlock(&c->mu);
  return end;
}

void lw__l4_comm_peer_name(lw_l4_comm_t *c, int32_t rank, char *out, size_t out_bytes) {
  lw_l4_rank_info_t info = {0};
  if (c->watch && lw__l4_watch_rank_info(c->watch, rank, &info) && info.pid > 0) {
    snprintf(out, out_bytes, "rank %d (host %s, pid %d)", (int)rank, info.host, (int)info.pid);
  } else if (rank == 0 && c->rank != 0) {
    snprintf(out, out_bytes, "the L4 (rank 0)");
  } else {
    snprintf(out, out_bytes, "rank %d", (int)rank);
  }
}

// Waiting without blocking in MPI: yield for the first rounds, then nap, doubling up to 1 ms.
// A tensor transfer only yields (busy): Open MPI moves its fragments only inside MPI calls
// (lw__l4_nap in l4_impl.h says what a nap costs one).
static void nap(uint32_t *round, bool busy) {
  uint32_t r = (*round)++;
  if (busy || r < 32) {
    sched_yield();
    return;
  }
  long ns = 1000L << (r - 32 < 10 ? r - 32 : 10);
  if (ns > 1000000L) ns = 1000000L;
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

static lw_status_t mpi_failed(lw_error_t *err, const char *what, int rc) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return lw__error_set(err, LW_INTERNAL, -1, 0, "l4: %s failed: %s", what, text);
}

// Waits for req until it completes (OK, its status in *out_status unless NULL), the deadline
// (DEADLINE_EXCEEDED) or peer's end (UNAVAILABLE naming it; peer < 0: none watched).
static lw_status_t wait_request(lw_l4_comm_t *c, MPI_Request *req, int32_t peer,
                                int64_t deadline_ns, const char *what, MPI_Status *out_status,
                                bool transfer, lw_error_t *err) {
  uint32_t round = 0;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, out_status ? out_status : MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_failed(err, what, rc);
    if (done) return LW_OK;
    char why[LW_ERROR_MESSAGE_BYTES];
    if (peer >= 0 && lw__l4_comm_peer_ended(c, peer, why, sizeof(why))) {
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: %s: %s", what, why);
    }
    if (lw__now_ns() >= deadline_ns) {
      return lw__error_set(err, LW_DEADLINE_EXCEEDED, -1, 0, "l4: %s: not done by its deadline",
                           what);
    }
    nap(&round, transfer);
  }
}

static void keep(lw_l4_comm_t *c, pending_t **list, MPI_Request req, void *buf) {
  pending_t *p = malloc(sizeof(*p));
  if (!p) return;  // out of memory: the buffer leaks rather than being freed under MPI
  p->req = req;
  p->copy = buf;
  pthread_mutex_lock(&c->mu);
  p->next = *list;
  *list = p;
  pthread_mutex_unlock(&c->mu);
}

// Frees what MPI finished with among the abandoned sends.
static void reap(lw_l4_comm_t *c) {
  pthread_mutex_lock(&c->mu);
  pending_t **at = &c->sends;
  while (*at) {
    int done = 0;
    (void)MPI_Test(&(*at)->req, &done, MPI_STATUS_IGNORE);
    if (done) {
      pending_t *p = *at;
      *at = p->next;
      free(p->copy);
      free(p);
    } else {
      at = &(*at)->next;
    }
  }
  pthread_mutex_unlock(&c->mu);
}

static lw_status_t hand_out_address(lw_l4_comm_t *c, int64_t deadline, lw_error_t *err) {
  char address[LW_L4_ADDRESS_BYTES] = {0};
  snprintf(address, sizeof(address), "%s", lw__l4_watch_address(c->watch));
  for (int32_t r = 1; r < c->size; ++r) {
    MPI_Request req;
    int rc = MPI_Isend(address, (int)sizeof(address), MPI_BYTE, r, LW_L4_TAG_ADDRESS,
                       MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return mpi_failed(err, "sending the liveness address", rc);
    char what[64];
    snprintf(what, sizeof(what), "sending the liveness address to rank %d", (int)r);
    lw_status_t st = wait_request(c, &req, -1, deadline, what, NULL, false, err);
    if (st != LW_OK) return st;
  }
  return lw__l4_watch_wait_ready(c->watch, deadline, err);
}

static lw_status_t take_address(lw_l4_comm_t *c, const lw_l4_comm_config_t *cfg,
                                lw_error_t *err) {
  char address[LW_L4_ADDRESS_BYTES] = {0};
  MPI_Request req;
  int rc = MPI_Irecv(address, (int)sizeof(address), MPI_BYTE, 0, LW_L4_TAG_ADDRESS,
                     MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS) return mpi_failed(err, "receiving the liveness address", rc);
  lw_status_t st = wait_request(c, &req, -1, cfg->startup_deadline_ns,
                                "receiving the L4's liveness address", NULL, false, err);
  if (st != LW_OK) {
    // The receive stays posted into a buffer on this stack: leave MPI no way to write it.
    MPI_Cancel(&req);
    (void)wait_request(c, &req, -1, lw__now_ns() + 100000000LL, "cancel", NULL, false,
                       &(lw_error_t){0});
    return st;
  }
  address[sizeof(address) - 1] = '\0';
  lw_l4_beat_config_t bc = {.address = address, .rank = c->rank, .period_ns = cfg->period_ns,
                            .hung_ns = cfg->hung_ns,
                            .connect_deadline_ns = cfg->startup_deadline_ns, .end = on_end,
                            .ctx = c};
  return lw__l4_beat_open(&bc, &c->beat, err);
}

static void comm_free(lw_l4_comm_t *c) {
  free(c->ended);
  free(c->why);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

lw_status_t lw__l4_comm_open(int *argc, char ***argv, const lw_l4_comm_config_t *cfg,
                             lw_l4_comm_t **out, lw_error_t *err) {
  *out = NULL;
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  bool we = false;
  if (!inited) {
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Init_thread", rc);
    we = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "l4: this MPI gives thread level %d, the L4 needs MPI_THREAD_MULTIPLE "
                         "(%d)",
                         provided, MPI_THREAD_MULTIPLE);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: the job has %d rank; the L4 needs rank 0 and at least one L3 rank "
                         "(mpirun -np 2 or more)",
                         size);
  }
  lw_l4_comm_t *c = calloc(1, sizeof(*c));
  if (!c) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  pthread_mutex_init(&c->mu, NULL);
  c->rank = rank;
  c->size = size;
  c->we_initialized = we;
  c->end = cfg->end;
  c->ctx = cfg->ctx;
  c->ended = calloc((size_t)size, sizeof(*c->ended));
  c->why = calloc((size_t)size, sizeof(*c->why));
  if (!c->ended || !c->why) {
    comm_free(c);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  }
  lw_status_t st;
  if (rank == 0) {
    lw_l4_watch_config_t wc = {.n_ranks = (uint32_t)size - 1, .period_ns = cfg->period_ns,
                               .hung_ns = cfg->hung_ns, .advertise = cfg->advertise,
                               .end = on_end, .ctx = c};
    st = lw__l4_watch_open(&wc, &c->watch, err);
    if (st == LW_OK) st = hand_out_address(c, cfg->startup_deadline_ns, err);
  } else {
    st = take_address(c, cfg, err);
  }
  if (st != LW_OK) {
    lw__l4_watch_close(c->watch);
    lw__l4_beat_close(c->beat);
    comm_free(c);  // MPI stays initialized: the caller ends the process
    return st;
  }
  *out = c;
  return LW_OK;
}

int32_t lw__l4_comm_rank(const lw_l4_comm_t *c) { return c->rank; }
int32_t lw__l4_comm_size(const lw_l4_comm_t *c) { return c->size; }

lw_status_t lw__l4_comm_send(lw_l4_comm_t *c, int32_t to, const void *buf, size_t bytes,
                             int64_t deadline_ns, lw_error_t *err) {
  if (to < 0 || to >= c->size || to == c->rank || bytes > INT_MAX) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: send of %zu bytes to rank %d (ranks 0..%d, this is %d)", bytes,
                         (int)to, (int)c->size - 1, (int)c->rank);
  }
  char why[LW_ERROR_MESSAGE_BYTES];
  if (lw__l4_comm_peer_ended(c, to, why, sizeof(why))) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: send to rank %d: %s", (int)to, why);
  }
  reap(c);
  void *copy = malloc(bytes ? bytes : 1);
  if (!copy) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  memcpy(copy, buf, bytes);
  MPI_Request req;
  int rc = MPI_Isend(copy, (int)bytes, MPI_BYTE, to, LW_L4_TAG_MSG, MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS) {
    free(copy);
    return mpi_failed(err, "MPI_Isend", rc);
  }
  char what[48];
  snprintf(what, sizeof(what), "send to rank %d", (int)to);
  lw_status_t st = wait_request(c, &req, to, deadline_ns, what, NULL, false, err);
  if (st == LW_OK) {
    free(copy);
  } else {
    keep(c, &c->sends, req, copy);  // MPI may still read it
  }
  return st;
}

static lw_status_t tensor_args(const lw_l4_comm_t *c, int32_t peer, size_t bytes,
                               const char *what, lw_error_t *err) {
  if (peer < 0 || peer >= c->size || peer == c->rank || bytes > INT_MAX) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: %s of %zu bytes with rank %d (ranks 0..%d, this is %d; at most "
                         "%d bytes)",
                         what, bytes, (int)peer, (int)c->size - 1, (int)c->rank, INT_MAX);
  }
  return LW_OK;
}

lw_status_t lw__l4_comm_send_tensor(lw_l4_comm_t *c, int32_t to, const void *buf, size_t bytes,
                                    int64_t deadline_ns, lw_error_t *err) {
  LW_RETURN_IF_ERROR(tensor_args(c, to, bytes, "tensor send", err));
  MPI_Request req;
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, LW_L4_TAG_TENSOR, MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Isend of a tensor", rc);
  char what[48];
  snprintf(what, sizeof(what), "tensor send to rank %d", (int)to);
  lw_status_t st = wait_request(c, &req, to, deadline_ns, what, NULL, true, err);
  if (st != LW_OK) keep(c, &c->sends_borrowed, req, NULL);  // buf is the caller's
  return st;
}

lw_status_t lw__l4_comm_recv_tensor(lw_l4_comm_t *c, int32_t from, void *buf, size_t bytes,
                                    int64_t deadline_ns, lw_error_t *err) {
  LW_RETURN_IF_ERROR(tensor_args(c, from, bytes, "tensor receive", err));
  MPI_Request req;
  int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, LW_L4_TAG_TENSOR, MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Irecv of a tensor", rc);
  char what[48];
  snprintf(what, sizeof(what), "tensor receive from rank %d", (int)from);
  MPI_Status status;
  lw_status_t st = wait_request(c, &req, from, deadline_ns, what, &status, true, err);
  if (st != LW_OK) {
    // A receive can be cancelled; if MPI cannot say it was, buf stays the caller's to keep.
    (void)MPI_Cancel(&req);
    keep(c, &c->sends_borrowed, req, NULL);
    return st;
  }
  int n = 0;
  MPI_Get_count(&status, MPI_BYTE, &n);
  if ((size_t)n != bytes) {
    return lw__error_set(err, LW_INTERNAL, -1, 0, "l4: %s: %d bytes came, %zu expected", what, n,
                         bytes);
  }
  return LW_OK;
}

struct lw_l4_xfer {
  MPI_Request req;
  bool send;
  int32_t peer;
  size_t bytes;
};

lw_status_t lw__l4_comm_xfer_start(lw_l4_comm_t *c, bool send, int32_t peer, uint32_t xfer,
                                   void *buf, size_t bytes, lw_l4_xfer_t **out,
                                   lw_error_t *err) {
  *out = NULL;
  LW_RETURN_IF_ERROR(tensor_args(c, peer, bytes, send ? "transfer send" : "transfer receive",
                                 err));
  char why[LW_ERROR_MESSAGE_BYTES];
  if (lw__l4_comm_peer_ended(c, peer, why, sizeof(why))) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: transfer %u %s rank %d: %s", xfer,
                         send ? "to" : "from", (int)peer, why);
  }
  lw_l4_xfer_t *x = calloc(1, sizeof(*x));
  if (!x) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  int tag = LW_L4_TAG_XFER + (int)(xfer % LW_L4_XFER_TAGS);
  int rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &x->req)
                : MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &x->req);
  if (rc != MPI_SUCCESS) {
    free(x);
    return mpi_failed(err, send ? "MPI_Isend of a transfer" : "MPI_Irecv of a transfer", rc);
  }
  x->send = send;
  x->peer = peer;
  x->bytes = bytes;
  *out = x;
  return LW_OK;
}

void lw__l4_comm_xfer_abandon(lw_l4_comm_t *c, lw_l4_xfer_t *x) {
  if (!x) return;
  // A receive can be cancelled; whether or not MPI manages it, the buffer stays the caller's.
  if (!x->send) (void)MPI_Cancel(&x->req);
  keep(c, &c->sends_borrowed, x->req, NULL);
  free(x);
}

lw_status_t lw__l4_comm_xfer_test(lw_l4_comm_t *c, lw_l4_xfer_t *x, lw_error_t *err) {
  int done = 0;
  MPI_Status status;
  int rc = MPI_Test(&x->req, &done, &status);
  if (rc != MPI_SUCCESS) {
    lw__l4_comm_xfer_abandon(c, x);
    return mpi_failed(err, "MPI_Test of a transfer", rc);
  }
  if (done) {
    int n = 0;
    if (!x->send) MPI_Get_count(&status, MPI_BYTE, &n);
    size_t want = x->bytes;
    bool send = x->send;
    int32_t peer = x->peer;
    free(x);
    if (!send && (size_t)n != want) {
      return lw__error_set(err, LW_INTERNAL, -1, 0,
                           "l4: transfer from rank %d: %d bytes came, %zu expected", (int)peer, n,
                           want);
    }
    return LW_OK;
  }
  char why[LW_ERROR_MESSAGE_BYTES];
  if (lw__l4_comm_peer_ended(c, x->peer, why, sizeof(why))) {
    int32_t peer = x->peer;
    bool send = x->send;
    lw__l4_comm_xfer_abandon(c, x);
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: transfer %s rank %d: %s",
                         send ? "to" : "from", (int)peer, why);
  }
  return LW_NOT_FOUND;
}

// Receives the message a probe matched (msg, status) into a buffer of its own: OK with it in
// *out_buf and *out_bytes. A wait that fails leaves the buffer with MPI (kept until close);
// watch is the peer whose end ends the wait (-1: none).
static lw_status_t receive_matched(lw_l4_comm_t *c, MPI_Message *msg, const MPI_Status *status,
                                   int32_t watch, int64_t deadline_ns, void **out_buf,
                                   size_t *out_bytes, lw_error_t *err) {
  int n = 0;
  MPI_Get_count(status, MPI_BYTE, &n);
  void *buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  MPI_Request req;
  int rc = MPI_Imrecv(buf, n, MPI_BYTE, msg, &req);
  if (rc != MPI_SUCCESS) {
    free(buf);
    return mpi_failed(err, "MPI_Imrecv", rc);
  }
  char what[64];
  snprintf(what, sizeof(what), "receive from rank %d", (int)status->MPI_SOURCE);
  lw_status_t st = wait_request(c, &req, watch, deadline_ns, what, NULL, false, err);
  if (st != LW_OK) {
    keep(c, &c->zombies, req, buf);  // MPI may still write it
    return st;
  }
  *out_buf = buf;
  *out_bytes = (size_t)n;
  return LW_OK;
}

lw_status_t lw__l4_comm_recv(lw_l4_comm_t *c, int32_t from, int32_t *out_from, void **out_buf,
                             size_t *out_bytes, int64_t deadline_ns, lw_error_t *err) {
  *out_buf = NULL;
  *out_bytes = 0;
  if (from >= c->size || from == c->rank) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "l4: receive from rank %d", (int)from);
  }
  uint32_t round = 0;
  for (;;) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status status;
    int rc = MPI_Improbe(from < 0 ? MPI_ANY_SOURCE : from, LW_L4_TAG_MSG, MPI_COMM_WORLD, &flag,
                         &msg, &status);
    if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Improbe", rc);
    if (flag) {
      int64_t matched = lw__now_ns() + LW_L4_MATCHED_WAIT_NS;
      lw_status_t st = receive_matched(c, &msg, &status, status.MPI_SOURCE,
                                       matched > deadline_ns ? matched : deadline_ns, out_buf,
                                       out_bytes, err);
      if (st == LW_OK && out_from) *out_from = status.MPI_SOURCE;
      return st;
    }
    char why[LW_ERROR_MESSAGE_BYTES];
    if (from >= 0 && lw__l4_comm_peer_ended(c, from, why, sizeof(why))) {
      // One more look: what it sent before it ended may have come meanwhile (a matched probe
      // cannot be put back: it is received now).
      rc = MPI_Improbe(from, LW_L4_TAG_MSG, MPI_COMM_WORLD, &flag, &msg, &status);
      if (rc == MPI_SUCCESS && flag &&
          receive_matched(c, &msg, &status, -1, lw__now_ns() + LAST_LOOK_NS, out_buf, out_bytes,
                          err) == LW_OK) {
        if (out_from) *out_from = from;
        return LW_OK;
      }
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: receive from rank %d: %s", (int)from,
                           why);
    }
    if (deadline_ns == 0 || lw__now_ns() >= deadline_ns) return LW_NOT_FOUND;
    nap(&round, false);
  }
}

typedef struct finalizer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} finalizer_t;

static void *finalize_main(void *arg) {
  finalizer_t *f = arg;
  MPI_Finalize();
  pthread_mutex_lock(&f->mu);
  f->done = true;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

bool lw__l4_comm_close(lw_l4_comm_t *c, bool finalize) {
  if (!c) return false;
  lw__l4_watch_close(c->watch);
  lw__l4_beat_close(c->beat);
  c->watch = NULL;
  c->beat = NULL;
  bool lost = false;
  for (int32_t r = 0; r < c->size; ++r) {
    if (c->ended[r] != 0 && c->ended[r] != LW_L4_END_GOODBYE) lost = true;
  }
  bool finalized = false;
  if (finalize && c->we_initialized && !lost) {
    reap(c);
    // MPI_Finalize is collective: on a thread of its own, waited for a bounded time, so a
    // peer that dies now cannot hang this one. Past the wait the thread is left blocked and
    // the caller must _exit.
    static finalizer_t f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    pthread_t t;
    if (lw__sys_thread_start(&t, "lw-l4-finalize", finalize_main, &f) == 0) {
      int64_t deadline = lw__now_ns() + FINALIZE_WAIT_NS;
      pthread_mutex_lock(&f.mu);
      while (!f.done && lw__now_ns() < deadline) {
        pthread_mutex_unlock(&f.mu);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&f.mu);
      }
      finalized = f.done;
      pthread_mutex_unlock(&f.mu);
      if (finalized) {
        pthread_join(t, NULL);
      } else {
        pthread_detach(t);
      }
    }
  }
  if (finalized) {
    // MPI is gone: nothing can touch the kept buffers any more.
    for (pending_t *p = c->sends, *n; p; p = n) {
      n = p->next;
      free(p->copy);
      free(p);
    }
    for (pending_t *p = c->sends_borrowed, *n; p; p = n) {
      n = p->next;
      free(p);
    }
    for (pending_t *p = c->zombies, *n; p; p = n) {
      n = p->next;
      free(p->copy);
      free(p);
    }
    comm_free(c);
  }
  // Not finalized: MPI may still use the kept buffers and the comm's callbacks are gone, but
  // the process is about to end; the comm is left allocated on purpose.
  return finalized;
}
