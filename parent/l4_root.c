// parent/l4_root.c — rank 0 of the L4 worker (lanework/l4.h): tensors with a home and a version, a
// run's DAG across ranks, dispatch to the ranks' servers (parent/l4_serve.c), completions, failure
// and the results' way back to rank 0.
//
// One thread drives it all: the run's caller (inside lw_l4_submit and after the orch function
// returned, in `pump`). Tasks are an array indexed by their id - 1; a task waits for its
// dependencies (orch.h's rules, per tensor), becomes ready, is placed on a rank at that moment
// (where the first tensor it writes lives, unless the submit named a rank) and posted into one of
// that rank's frames (max_in_flight of them); its DONE frees the frame.
//
// What the L4 knows of a tensor: its version, which ranks hold that version (`holders`, a bit per
// rank; a rank counts from the moment a transfer to it is posted, since its server always completes
// a transfer it was told of before it runs or drops the task), and `home`, where its writers go. A
// read on a rank that does not hold the version brings it there: from another rank (a MOVE to the
// holder, whose server sends it straight to the reader), or from rank 0's own copy (inside the task
// message up to 16 KiB, else a transfer from rank 0). A write makes the writer's rank the only
// holder of the new version. A rank lost, or a failed writer, removes it as a holder; a version no
// rank holds any more is lost and a read of it fails naming why.
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/handle_impl.h"
#include "lanes/sys.h"
#include "lanework/orch.h"
#include "parent/l4_impl.h"

#define NAP_CAP_NS 100000  // rank 0 sleeps at most 100 us between looks while it waits

struct l4_tensor {
  uint64_t id;
  void *data;  // rank 0's copy (NULL: none; then version 0 is all zeros)
  uint64_t bytes;
  int32_t home;      // where writers go by default; the last writer's rank
  uint64_t version;  // counts writes
  uint64_t holders;  // bit r: rank r holds the current version, or is being sent it
  uint64_t ever;     // bit r: rank r has a buffer for it (told to free it at the end)
  bool zero;         // the current version is all zero bytes (nothing to move)
  char lost[LW_ERROR_MESSAGE_BYTES / 2];  // why no copy is left; "" while one is
  // The run's dependencies (reset lazily when run_id is not the run's).
  uint64_t run_id;
  uint32_t last_writer;  // task index + 1, 0: none in this run
  uint32_t *readers;     // task indices reading since the last write
  uint32_t n_readers, cap_readers;
};

struct l4_rank {
  bool dead;
  char why[LW_ERROR_MESSAGE_BYTES];
  uint32_t in_flight;
  uint32_t frame_task[LW_MB_TASK_FRAMES];  // task index + 1 in each frame, 0: free
};

enum { T_WAIT = 0, T_READY = 1, T_POSTED = 2, T_DONE = 3 };

typedef struct l4_task {
  uint64_t id;
  uint32_t name_ix;
  int32_t want_rank;  // LW_L4_ANY_RANK or the submit's rank
  int32_t rank;       // where it was posted (-1: never)
  uint32_t state;
  uint32_t deps_left;
  uint32_t frame;
  uint32_t fetched;            // bit i: tensor i's version was brought to the rank for it
  int8_t src[LW_MAX_TENSORS];  // where each fetched version came from
  bool cancel_sent;
  int64_t timeout_ns;
  lw_args_t args;  // tensor data are tokens
  uint64_t tid[LW_MAX_TENSORS];
  uint32_t *dependents;
  uint32_t n_dependents, cap_dependents;
} l4_task_t;

struct l4_run {
  uint64_t id;
  l4_task_t *tasks;
  uint32_t n, cap;
  uint32_t *ready;  // task indices ready to post, in the order they became ready
  uint32_t n_ready, cap_ready;
  uint32_t n_terminal, n_ok;
  uint64_t epoch;             // lw_l4_cancel calls before it was submitted
  const lw_handle_t *handle;  // its handle (a cancel through it stops the run)
  bool failed;
  bool stop_pending;     // failed where stop_all could not run: pump runs it
  lw_error_t error;      // the first error
  lw_l4_xfer_t **xfers;  // rank 0's transfers under way (its copies going to ranks)
  uint32_t n_xfers, cap_xfers;
};

struct lw_l4_orch {
  lw_l4_t *l4;
  l4_run_t *run;
  uint64_t last_task;
};

static void send_failed(lw_l4_t *l4, int32_t r, const lw_error_t *err);

static uint64_t bit(int32_t r) { return 1ull << (unsigned)r; }

static bool ensure_ranks(lw_l4_t *l4) {
  if (!l4->ranks) l4->ranks = calloc((size_t)l4->size, sizeof(*l4->ranks));
  return l4->ranks != NULL;
}

// ---------------------------------------------------------------------------------------------
// Tensors

#define TOKEN_TAG 0x4cu

static void *token_of(uint64_t id) { return (void *)(uintptr_t)((id << 8) | TOKEN_TAG); }

static l4_tensor_t *tensor_by_id(lw_l4_t *l4, uint64_t id) {
  return id >= 1 && id <= l4->n_tensors ? l4->tensors[id - 1] : NULL;
}

static l4_tensor_t *tensor_of(lw_l4_t *l4, const void *token) {
  uintptr_t v = (uintptr_t)token;
  return (v & 0xffu) == TOKEN_TAG ? tensor_by_id(l4, (uint64_t)(v >> 8)) : NULL;
}

static lw_status_t root_only(const lw_l4_t *l4, const char *what, lw_error_t *err) {
  if (!l4) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: l4 is NULL", what);
  if (l4->rank != 0) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0, "%s: rank 0 only (this is rank %d)",
                         what, (int)l4->rank);
  }
  return LW_OK;
}

static int32_t next_live_rank(lw_l4_t *l4) {
  for (int32_t i = 0; i < l4->size - 1; ++i) {
    int32_t r = l4->next_home;
    l4->next_home = r + 1 < l4->size ? r + 1 : 1;
    if (!l4->ranks[r].dead) return r;
  }
  return 1;
}

static lw_status_t l4_tensor_create_locked(lw_l4_t *l4, void *data, uint64_t bytes,
                                           int32_t home_rank, void **out, lw_error_t *err) {
  LW_RETURN_IF_ERROR(root_only(l4, "lw_l4_tensor_create", err));
  if (!out)
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "lw_l4_tensor_create: out is NULL");
  *out = NULL;
  if (bytes == 0 || bytes > (uint64_t)INT32_MAX) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "lw_l4_tensor_create: %" PRIu64 " bytes (1..%d: MPI counts in int)", bytes,
                         INT32_MAX);
  }
  if (home_rank != LW_L4_ANY_RANK && (home_rank < 1 || home_rank >= l4->size)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "lw_l4_tensor_create: home rank %d (1..%d, or LW_L4_ANY_RANK)",
                         (int)home_rank, (int)l4->size - 1);
  }
  if (!ensure_ranks(l4))
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "lw_l4_tensor_create: memory");
  if (l4->n_tensors == l4->cap_tensors) {
    uint64_t cap = l4->cap_tensors ? l4->cap_tensors * 2 : 64;
    l4_tensor_t **t = realloc(l4->tensors, cap * sizeof(*t));
    if (!t)
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "lw_l4_tensor_create: out of memory");
    l4->tensors = t;
    l4->cap_tensors = cap;
  }
  l4_tensor_t *t = calloc(1, sizeof(*t));
  if (!t)
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "lw_l4_tensor_create: out of memory");
  t->id = l4->n_tensors + 1;
  t->data = data;
  t->bytes = bytes;
  t->home = home_rank == LW_L4_ANY_RANK ? next_live_rank(l4) : home_rank;
  t->holders = data ? bit(0) : 0;
  t->zero = data == NULL;
  l4->tensors[l4->n_tensors++] = t;
  *out = token_of(t->id);
  return LW_OK;
}

lw_status_t lw_l4_tensor_create(lw_l4_t *l4, void *data, uint64_t bytes, int32_t home_rank,
                                void **out) {
  bool locked = l4 ? lw__l4_state_lock(l4) : false;
  lw_error_t err;
  lw__error_clear(&err);
  lw_status_t st = l4_tensor_create_locked(l4, data, bytes, home_rank, out, &err);
  if (l4) lw__l4_state_unlock(l4, locked);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

static lw_status_t between_runs(lw_l4_t *l4, void *token, const char *what, l4_tensor_t **out,
                                lw_error_t *err) {
  LW_RETURN_IF_ERROR(root_only(l4, what, err));
  if (l4->run) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0, "%s: a run is in progress", what);
  }
  *out = tensor_of(l4, token);
  if (!*out) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "%s: not a tensor of this L4", what);
  }
  return LW_OK;
}

static lw_status_t l4_tensor_written_locked(lw_l4_t *l4, void *token, lw_error_t *err) {
  l4_tensor_t *t = NULL;
  LW_RETURN_IF_ERROR(between_runs(l4, token, "lw_l4_tensor_written", &t, err));
  if (!t->data) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "lw_l4_tensor_written: tensor %" PRIu64 " has no rank-0 memory", t->id);
  }
  t->version++;
  t->holders = bit(0);
  t->zero = false;
  t->lost[0] = '\0';
  return LW_OK;
}

lw_status_t lw_l4_tensor_written(lw_l4_t *l4, void *token) {
  bool locked = l4 ? lw__l4_state_lock(l4) : false;
  lw_error_t err;
  lw__error_clear(&err);
  lw_status_t st = l4_tensor_written_locked(l4, token, &err);
  if (l4) lw__l4_state_unlock(l4, locked);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

static lw_status_t l4_tensor_free_locked(lw_l4_t *l4, void *token, lw_error_t *err) {
  if (!token) return LW_OK;
  l4_tensor_t *t = NULL;
  LW_RETURN_IF_ERROR(between_runs(l4, token, "lw_l4_tensor_free", &t, err));
  lw_l4_move_t m = {.tensor_id = t->id};
  lw_error_t sent;
  for (int32_t r = 1; r < l4->size; ++r) {
    if (!(t->ever & bit(r)) || l4->ranks[r].dead) continue;
    if (lw__l4_send_move(l4, r, LW_L4_WIRE_FREE, &m, &sent) != LW_OK) send_failed(l4, r, &sent);
  }
  l4->tensors[t->id - 1] = NULL;
  free(t->readers);
  free(t);
  return LW_OK;
}

lw_status_t lw_l4_tensor_free(lw_l4_t *l4, void *token) {
  bool locked = l4 ? lw__l4_state_lock(l4) : false;
  lw_error_t err;
  lw__error_clear(&err);
  lw_status_t st = l4_tensor_free_locked(l4, token, &err);
  if (l4) lw__l4_state_unlock(l4, locked);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

static int32_t holder_of(const lw_l4_t *l4, const l4_tensor_t *t) {
  if (t->holders & bit(t->home)) return t->home;
  for (int32_t r = 1; r < l4->size; ++r) {
    if (t->holders & bit(r) && !l4->ranks[r].dead) return r;
  }
  return t->holders & bit(0) ? 0 : -1;
}

static lw_status_t l4_tensor_where_locked(lw_l4_t *l4, void *token, int32_t *rank,
                                          uint64_t *version, lw_error_t *err) {
  LW_RETURN_IF_ERROR(root_only(l4, "lw_l4_tensor_where", err));
  l4_tensor_t *t = tensor_of(l4, token);
  if (!t)
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "lw_l4_tensor_where: not a tensor of this L4");
  if (rank) *rank = t->zero ? 0 : holder_of(l4, t);
  if (version) *version = t->version;
  return LW_OK;
}

lw_status_t lw_l4_tensor_where(lw_l4_t *l4, void *token, int32_t *rank, uint64_t *version) {
  bool locked = l4 ? lw__l4_state_lock(l4) : false;
  lw_error_t err;
  lw__error_clear(&err);
  lw_status_t st = l4_tensor_where_locked(l4, token, rank, version, &err);
  if (l4) lw__l4_state_unlock(l4, locked);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

// A rank stopped holding t's version: it is lost when nobody else holds it.
static void drop_holder(l4_tensor_t *t, int32_t r, const char *why) {
  t->holders &= ~bit(r);
  if (!t->holders && !t->zero && !t->lost[0]) snprintf(t->lost, sizeof(t->lost), "%s", why);
}

// ---------------------------------------------------------------------------------------------
// The run: failing, finishing tasks

static const char *task_name(const lw_l4_t *l4, const l4_task_t *t) {
  return l4->names[t->name_ix].name;
}

static void set_error(l4_run_t *run, lw_status_t code, uint64_t task_id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_error(l4_run_t *run, lw_status_t code, uint64_t task_id, const char *fmt, ...) {
  if (run->failed) return;
  run->failed = true;
  run->error.code = code;
  run->error.worker_id = -1;
  run->error.task_id = task_id;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(run->error.message, sizeof(run->error.message), fmt, ap);
  va_end(ap);
}

static void finish(l4_run_t *run, uint32_t ix, lw_status_t status) {
  l4_task_t *t = &run->tasks[ix];
  if (t->state == T_DONE) return;
  t->state = T_DONE;
  run->n_terminal++;
  if (status != LW_OK) return;
  run->n_ok++;
  for (uint32_t i = 0; i < t->n_dependents; ++i) {
    l4_task_t *d = &run->tasks[t->dependents[i]];
    if (d->state == T_WAIT && --d->deps_left == 0) {
      d->state = T_READY;
      if (lw__l4_grow((void **)&run->ready, &run->cap_ready, run->n_ready + 1, sizeof(uint32_t))) {
        run->ready[run->n_ready++] = t->dependents[i];
      } else {
        d->state = T_DONE;  // out of memory: counted failed (set_error below names it)
        run->n_terminal++;
        set_error(run, LW_RESOURCE_EXHAUSTED, d->id, "l4: out of memory queueing task %" PRIu64,
                  d->id);
        run->stop_pending = true;  // pump stops the rest
      }
    }
  }
}

static void rank_lost(lw_l4_t *l4, int32_t r, const char *why);

// A message to rank r that MPI did not take (r ended, or the send's deadline passed: the seq is
// spent either way, so the stream is broken): r is lost.
static void send_failed(lw_l4_t *l4, int32_t r, const lw_error_t *err) {
  char name[96], why[2 * LW_ERROR_MESSAGE_BYTES];
  lw__l4_comm_peer_name(l4->comm, r, name, sizeof(name));
  snprintf(why, sizeof(why), "%s: a message to it failed: %s", name, err->message);
  rank_lost(l4, r, why);
}

// After the run failed: tasks not posted are skipped, posted ones are cancelled on their rank.
static void stop_all(lw_l4_t *l4, l4_run_t *run) {
  lw_status_t skip = run->error.code == LW_CANCELLED ? LW_CANCELLED : LW_POISONED;
  for (uint32_t i = 0; i < run->n; ++i) {
    l4_task_t *t = &run->tasks[i];
    if (t->state == T_WAIT || t->state == T_READY) {
      finish(run, i, skip);
    } else if (t->state == T_POSTED && !t->cancel_sent && !l4->ranks[t->rank].dead) {
      t->cancel_sent = true;
      lw_l4_cancel_t c = {
          .identity = {.run_id = run->id, .task_id = t->id, .dispatch_id = 0, .generation = 0},
          .frame = t->frame};
      lw_error_t err;
      if (lw__l4_send_cancel(l4, t->rank, &c, &err) != LW_OK) send_failed(l4, t->rank, &err);
    }
  }
  run->n_ready = 0;
}

static void fail_task(lw_l4_t *l4, l4_run_t *run, uint32_t ix, lw_status_t code,
                      const char *message) {
  l4_task_t *t = &run->tasks[ix];
  set_error(run, code, t->id, "%s", message);
  finish(run, ix, code);
  stop_all(l4, run);
}

// A rank's liveness ended, or it broke the protocol: every task it held fails naming it, and every
// version only it held is lost. It is never given work again.
static void rank_lost(lw_l4_t *l4, int32_t r, const char *why) {
  l4_rank_t *k = &l4->ranks[r];
  if (k->dead) return;
  k->dead = true;
  l4->lost = true;
  snprintf(k->why, sizeof(k->why), "%s", why);
  lw__l4_comm_peer_lost(l4->comm, r, why);  // every wait on r ends (rank 0's transfers too)
  char lost[LW_ERROR_MESSAGE_BYTES / 2];
  snprintf(lost, sizeof(lost), "its only copy was on %.100s", why);
  for (uint64_t i = 0; i < l4->n_tensors; ++i) {
    if (l4->tensors[i]) drop_holder(l4->tensors[i], r, lost);
  }
  // The other ranks watch only the L4: told, a transfer of theirs with r ends (its task fails)
  // instead of waiting for bytes that never come.
  lw_l4_move_t notice = {.to_rank = r};
  for (int32_t o = 1; o < l4->size; ++o) {
    if (o == r || l4->ranks[o].dead) continue;
    lw_error_t err;
    if (lw__l4_send_move(l4, o, LW_L4_WIRE_LOST, &notice, &err) != LW_OK) {
      send_failed(l4, o, &err);
    }
  }
  l4_run_t *run = l4->run;
  if (!run) return;
  for (uint32_t f = 0; f < LW_MB_TASK_FRAMES; ++f) {
    if (!k->frame_task[f]) continue;
    uint32_t ix = k->frame_task[f] - 1;
    k->frame_task[f] = 0;
    k->in_flight--;
    char msg[3 * LW_ERROR_MESSAGE_BYTES];
    snprintf(msg, sizeof(msg), "l4: task %" PRIu64 " (%s) on %s", run->tasks[ix].id,
             task_name(l4, &run->tasks[ix]), why);
    fail_task(l4, run, ix, LW_UNAVAILABLE, msg);
  }
}

// Every live rank whose liveness ended since the last look is lost. Whether any was.
static bool watch_ranks(lw_l4_t *l4) {
  bool any = false;
  for (int32_t r = 1; r < l4->size; ++r) {
    char why[LW_ERROR_MESSAGE_BYTES];
    if (!l4->ranks[r].dead && lw__l4_comm_peer_ended(l4->comm, r, why, sizeof(why))) {
      rank_lost(l4, r, why);
      any = true;
    }
  }
  return any;
}

// Rank r sent what the protocol does not allow (what says what): it is lost, named.
static void broke_protocol(lw_l4_t *l4, int32_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void broke_protocol(lw_l4_t *l4, int32_t r, const char *fmt, ...) {
  char name[96], what[LW_ERROR_MESSAGE_BYTES], why[2 * LW_ERROR_MESSAGE_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  lw__l4_comm_peer_name(l4->comm, r, name, sizeof(name));
  snprintf(why, sizeof(why), "%s broke the protocol: %s", name, what);
  rank_lost(l4, r, why);
}

// ---------------------------------------------------------------------------------------------
// Posting

static int32_t place(lw_l4_t *l4, const l4_task_t *t) {
  if (t->want_rank != LW_L4_ANY_RANK) return t->want_rank;
  for (uint32_t i = 0; i < t->args.n_tensors; ++i) {
    if (lw__l4_tag_writes(t->args.tensor[i].tag)) return tensor_by_id(l4, t->tid[i])->home;
  }
  for (uint32_t i = 0; i < t->args.n_tensors; ++i) {
    int32_t h = holder_of(l4, tensor_by_id(l4, t->tid[i]));
    if (h > 0) return h;
  }
  return next_live_rank(l4);
}

static lw_status_t start_xfer(lw_l4_t *l4, l4_run_t *run, int32_t to, uint32_t xfer, void *buf,
                              uint64_t bytes, bool send, lw_error_t *err) {
  if (!lw__l4_grow((void **)&run->xfers, &run->cap_xfers, run->n_xfers + 1, sizeof(*run->xfers))) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  }
  lw_l4_xfer_t *x = NULL;
  LW_RETURN_IF_ERROR(lw__l4_comm_xfer_start(l4->comm, send, to, xfer, buf, (size_t)bytes, &x, err));
  run->xfers[run->n_xfers++] = x;
  return LW_OK;
}

// Posts ready task ix on rank r: the task message first (r starts receiving what it lacks as it
// reads it), then the MOVEs to the ranks holding those versions, then rank 0's own transfers.
// Whatever can refuse the task (a lost version, a holder gone) is checked before anything is sent,
// so a refused task leaves no transfer half-started. False when r has no free frame (the task stays
// ready).
typedef struct fetch {
  uint32_t i;   // the tensor's index in the task
  int32_t src;  // where its version comes from (0: rank 0's memory)
  uint16_t xfer;
} fetch_t;

static bool post(lw_l4_t *l4, l4_run_t *run, uint32_t ix, int32_t r) {
  l4_rank_t *k = &l4->ranks[r];
  l4_task_t *t = &run->tasks[ix];
  char msg[3 * LW_ERROR_MESSAGE_BYTES];
  if (k->dead) {
    snprintf(msg, sizeof(msg), "l4: task %" PRIu64 " (%s) placed on %s", t->id, task_name(l4, t),
             k->why);
    fail_task(l4, run, ix, LW_UNAVAILABLE, msg);
    return true;
  }
  if (k->in_flight >= l4->cfg.max_in_flight) return false;
  lw_l4_task_t m;
  memset(&m, 0, sizeof(m));
  fetch_t fetch[LW_MAX_TENSORS];
  uint32_t n_fetch = 0;
  for (uint32_t i = 0; i < t->args.n_tensors; ++i) {
    l4_tensor_t *tn = tensor_by_id(l4, t->tid[i]);
    lw_l4_tensor_t *d = &m.tensor[i];
    *d = (lw_l4_tensor_t){.tensor_id = tn->id,
                          .version = tn->version,
                          .bytes = tn->bytes,
                          .home_rank = r,
                          .tag = (uint8_t)t->args.tensor[i].tag};
    bool same = false;  // the same tensor read earlier in this task: that fetch serves both
    for (uint32_t j = 0; j < i; ++j) same = same || t->tid[j] == t->tid[i];
    if (!lw__l4_tag_reads(d->tag) || same || (tn->holders & bit(r))) continue;
    if (tn->zero) {
      d->flags = LW_L4_TENSOR_ZERO;
      continue;
    }
    int32_t src = holder_of(l4, tn);
    if (src < 0) {
      snprintf(msg, sizeof(msg),
               "l4: task %" PRIu64 " (%s) reads tensor %" PRIu64 " version %" PRIu64
               ", which was lost: %s",
               t->id, task_name(l4, t), tn->id, tn->version, tn->lost);
      fail_task(l4, run, ix, LW_FAILED_PRECONDITION, msg);
      return true;
    }
    if (src == 0 && tn->bytes <= LW_L4_INLINE_MAX_BYTES) {
      d->flags = LW_L4_TENSOR_INLINE;
      d->data = tn->data;
      continue;
    }
    uint16_t xfer = (uint16_t)(l4->next_xfer++ % LW_L4_XFER_TAGS);
    d->home_rank = src;
    d->xfer = xfer;
    fetch[n_fetch++] = (fetch_t){.i = i, .src = src, .xfer = xfer};
  }
  uint32_t frame = 0;
  while (k->frame_task[frame]) frame++;
  m.identity = (lw_mb_identity_t){
      .run_id = run->id, .task_id = t->id, .dispatch_id = ++l4->next_dispatch, .generation = 0};
  m.frame = frame;
  m.kind = l4->names[t->name_ix].kind;
  m.chip = LW_ANY_CHIP;
  m.timeout_ns = t->timeout_ns;
  memcpy(m.name, l4->names[t->name_ix].name, sizeof(m.name));
  m.launch = t->args.launch;
  m.n_tensors = t->args.n_tensors;
  m.n_scalars = t->args.n_scalars;
  memcpy(m.scalar, t->args.scalar, sizeof(m.scalar));
  lw_error_t err;
  if (lw__l4_send_task(l4, r, &m, &err) != LW_OK) {
    send_failed(l4, r, &err);  // fails what r held; this task was not posted
    snprintf(msg, sizeof(msg), "l4: task %" PRIu64 " (%s) not posted to %s", t->id,
             task_name(l4, t), k->why);
    fail_task(l4, run, ix, LW_UNAVAILABLE, msg);
    return true;
  }
  t->state = T_POSTED;
  t->rank = r;
  t->frame = frame;
  k->frame_task[frame] = ix + 1;
  k->in_flight++;
  for (uint32_t i = 0; i < t->args.n_tensors; ++i) tensor_by_id(l4, t->tid[i])->ever |= bit(r);
  // r now waits for each fetch; a holder that cannot be told to send is lost, which tells r (LOST),
  // so r's wait ends and the task fails naming it.
  for (uint32_t f = 0; f < n_fetch; ++f) {
    l4_tensor_t *tn = tensor_by_id(l4, t->tid[fetch[f].i]);
    lw_status_t st;
    if (fetch[f].src == 0) {
      st = start_xfer(l4, run, r, fetch[f].xfer, tn->data, tn->bytes, true, &err);
      if (st != LW_OK) send_failed(l4, r, &err);
    } else {
      lw_l4_move_t mv = {.tensor_id = tn->id,
                         .version = tn->version,
                         .bytes = tn->bytes,
                         .to_rank = r,
                         .xfer = fetch[f].xfer};
      st = lw__l4_send_move(l4, fetch[f].src, LW_L4_WIRE_MOVE, &mv, &err);
      if (st != LW_OK) send_failed(l4, fetch[f].src, &err);
    }
    if (st == LW_OK && !k->dead && !(tn->holders & bit(r))) {
      tn->holders |= bit(r);
      t->fetched |= 1u << fetch[f].i;
      t->src[fetch[f].i] = (int8_t)fetch[f].src;
    }
  }
  return true;
}

// Live ranks with a free frame.
static int32_t ranks_with_room(const lw_l4_t *l4) {
  int32_t n = 0;
  for (int32_t r = 1; r < l4->size; ++r) {
    if (!l4->ranks[r].dead && l4->ranks[r].in_flight < l4->cfg.max_in_flight) n++;
  }
  return n;
}

// Posts ready tasks in the order they became ready, each where it is placed now; one whose rank is
// full waits its turn. Stops looking once no live rank has room (a long ready list is not walked on
// every pass while every frame is busy).
static bool dispatch(lw_l4_t *l4, l4_run_t *run) {
  bool moved = false;
  uint32_t keep = 0, i = 0;
  int32_t room = ranks_with_room(l4);
  bool none_live = true;  // then every ready task fails, naming a lost rank
  for (int32_t r = 1; r < l4->size; ++r) none_live = none_live && l4->ranks[r].dead;
  for (; i < run->n_ready && (room > 0 || none_live); ++i) {
    uint32_t ix = run->ready[i];
    if (run->failed || run->tasks[ix].state != T_READY) continue;
    int32_t r = place(l4, &run->tasks[ix]);
    bool had_room = !l4->ranks[r].dead && l4->ranks[r].in_flight < l4->cfg.max_in_flight;
    if (post(l4, run, ix, r)) {
      moved = true;
      if (had_room && l4->ranks[r].in_flight >= l4->cfg.max_in_flight) room--;
    } else {
      run->ready[keep++] = ix;
    }
  }
  if (run->failed) return moved;
  if (keep < i) {
    memmove(&run->ready[keep], &run->ready[i], (run->n_ready - i) * sizeof(uint32_t));
  }
  run->n_ready = keep + (run->n_ready - i);
  return moved;
}

// ---------------------------------------------------------------------------------------------
// Completions

static void on_done(lw_l4_t *l4, l4_run_t *run, int32_t r, const lw_l4_done_t *d) {
  l4_rank_t *k = &l4->ranks[r];
  uint32_t ix = k->frame_task[d->frame];
  if (!ix || d->identity.run_id != run->id || run->tasks[ix - 1].id != d->identity.task_id) {
    broke_protocol(
        l4, r, "a completion of task %" PRIu64 " of run %" PRIu64 " in frame %u, which holds %s",
        d->identity.task_id, d->identity.run_id, d->frame, ix ? "another task" : "none");
    return;
  }
  ix -= 1;
  k->frame_task[d->frame] = 0;
  k->in_flight--;
  l4_task_t *t = &run->tasks[ix];
  if (d->status == LW_OK) {
    uint32_t p = 0;
    for (uint32_t i = 0; i < t->args.n_tensors; ++i) {
      if (!lw__l4_tag_writes(t->args.tensor[i].tag)) continue;
      l4_tensor_t *tn = tensor_by_id(l4, t->tid[i]);
      uint64_t v = p < d->n_produced ? d->produced[p].version : tn->version + 1;
      p++;
      if (v == tn->version) continue;  // the same tensor written twice by this task
      tn->version = v;
      tn->holders = bit(r);
      tn->home = r;
      tn->zero = false;
      tn->lost[0] = '\0';
    }
    finish(run, ix, t->cancel_sent ? LW_CANCELLED : LW_OK);
    return;
  }
  char lost[LW_ERROR_MESSAGE_BYTES / 2];
  snprintf(lost, sizeof(lost), "task %" PRIu64 " (%s) that wrote it on rank %d failed", t->id,
           task_name(l4, t), (int)r);
  for (uint32_t i = 0; i < t->args.n_tensors; ++i) {
    if (lw__l4_tag_writes(t->args.tensor[i].tag) || (t->fetched & (1u << i))) {
      drop_holder(tensor_by_id(l4, t->tid[i]), r, lost);
    }
  }
  char name[96], msg[3 * LW_ERROR_MESSAGE_BYTES];
  lw__l4_comm_peer_name(l4->comm, r, name, sizeof(name));
  // A version it waited for from a rank since lost: that rank's loss, as the L4 knows it.
  const char *because = "";
  for (uint32_t i = 0; i < t->args.n_tensors; ++i) {
    if ((t->fetched & (1u << i)) && t->src[i] > 0 && l4->ranks[t->src[i]].dead) {
      because = l4->ranks[t->src[i]].why;
    }
  }
  snprintf(msg, sizeof(msg), "l4: task %" PRIu64 " (%s) on %s: %s%s%s", t->id, task_name(l4, t),
           name, d->error[0] ? d->error : lw_status_name(d->status), *because ? "; " : "", because);
  fail_task(l4, run, ix, d->status, msg);
}

// One look at everything: cancel, ranks' ends, transfers, posting, completions.
static bool pump(lw_l4_t *l4, l4_run_t *run) {
  bool moved = false;
  bool by_handle = run->handle && lw__handle_cancel_requested(run->handle);
  if (!run->failed &&
      (by_handle || atomic_load_explicit(&l4->cancel_epoch, memory_order_relaxed) > run->epoch)) {
    set_error(run, LW_CANCELLED, 0, "l4: run %" PRIu64 " cancelled (%s)", run->id,
              by_handle ? "lw_handle_cancel" : "lw_l4_cancel");
    stop_all(l4, run);
    moved = true;
  }
  if (run->stop_pending) {
    run->stop_pending = false;
    stop_all(l4, run);
    moved = true;
  }
  if (watch_ranks(l4)) moved = true;
  if (lw__l4_xfers_poll(l4->comm, run->xfers, &run->n_xfers)) moved = true;
  if (dispatch(l4, run)) moved = true;
  for (;;) {
    void *buf = NULL;
    int32_t from = -1;
    lw_l4_wire_msg_t msg;
    lw_error_t err;
    lw_status_t st = lw__l4_recv(l4, -1, &from, &buf, &msg, &err);
    if (st == LW_NOT_FOUND) break;
    moved = true;
    if (st != LW_OK) {
      if (from > 0) {
        broke_protocol(l4, from, "%s", err.message);
      } else {
        set_error(run, st, 0, "%s", err.message);
        stop_all(l4, run);
      }
      break;
    }
    if (l4->ranks[from].dead) {
      // Late news from a rank given up: its tasks already failed.
    } else if (msg.header.kind == LW_L4_WIRE_DONE) {
      on_done(l4, run, from, &msg.u.done);
    } else {
      broke_protocol(l4, from, "it sent a message of kind %u to the L4", (unsigned)msg.header.kind);
    }
    free(buf);
  }
  return moved;
}

// After a successful run: the current version of every tensor with rank-0 memory that rank 0 does
// not hold comes home (a receive into that memory, then a MOVE to its holder). Rank 0 holds it only
// once its transfer ended OK; one that did not fails the run naming the tensor and the rank. A
// version already lost (reported by the run that lost it) stays lost.
typedef struct homecoming {
  lw_l4_xfer_t *x;
  l4_tensor_t *tn;
  int32_t src;
} homecoming_t;

static void fetch_results(lw_l4_t *l4, l4_run_t *run) {
  homecoming_t *h = calloc(l4->n_tensors ? l4->n_tensors : 1, sizeof(*h));
  if (!h) {
    set_error(run, LW_RESOURCE_EXHAUSTED, 0, "l4: out of memory bringing results back");
    return;
  }
  uint64_t n = 0;
  for (uint64_t i = 0; i < l4->n_tensors; ++i) {
    l4_tensor_t *tn = l4->tensors[i];
    if (!tn || !tn->data || tn->zero || (tn->holders & bit(0)) || !tn->holders) continue;
    int32_t src = holder_of(l4, tn);
    if (src <= 0) continue;
    uint16_t xfer = (uint16_t)(l4->next_xfer++ % LW_L4_XFER_TAGS);
    lw_error_t err;
    lw_l4_xfer_t *x = NULL;
    if (lw__l4_comm_xfer_start(l4->comm, false, src, xfer, tn->data, (size_t)tn->bytes, &x, &err) !=
        LW_OK) {
      set_error(run, err.code, 0, "l4: tensor %" PRIu64 " cannot come back to rank 0: %.200s",
                tn->id, err.message);
      continue;
    }
    h[n++] = (homecoming_t){.x = x, .tn = tn, .src = src};
    lw_l4_move_t mv = {.tensor_id = tn->id,
                       .version = tn->version,
                       .bytes = tn->bytes,
                       .to_rank = 0,
                       .xfer = xfer};
    if (lw__l4_send_move(l4, src, LW_L4_WIRE_MOVE, &mv, &err) != LW_OK) {
      send_failed(l4, src, &err);  // marks src ended: the receive above ends with it
    }
  }
  uint64_t left = n;
  uint32_t round = 0;
  while (left > 0) {
    (void)watch_ranks(l4);  // a source lost ends its transfer below
    bool moved = false;
    for (uint64_t i = 0; i < n; ++i) {
      if (!h[i].x) continue;
      lw_error_t err;
      lw_status_t st = lw__l4_comm_xfer_test(l4->comm, h[i].x, &err);
      if (st == LW_NOT_FOUND) continue;
      h[i].x = NULL;
      left--;
      moved = true;
      if (st == LW_OK) {
        h[i].tn->holders |= bit(0);
      } else {
        set_error(run, st, 0,
                  "l4: tensor %" PRIu64 " version %" PRIu64
                  " did not come back to rank 0 from rank %d: %.180s",
                  h[i].tn->id, h[i].tn->version, (int)h[i].src, err.message);
      }
    }
    if (moved) {
      round = 0;
    } else {
      lw__l4_nap(&round, NAP_CAP_NS, left > 0);
    }
  }
  free(h);
}

// ---------------------------------------------------------------------------------------------
// Submitting and running

// me waits for dep unless dep already finished.
static void add_edge(l4_run_t *run, uint32_t dep, uint32_t me) {
  l4_task_t *d = &run->tasks[dep];
  if (d->state == T_DONE) return;
  if (!lw__l4_grow((void **)&d->dependents, &d->cap_dependents, d->n_dependents + 1,
                   sizeof(uint32_t))) {
    set_error(run, LW_RESOURCE_EXHAUSTED, me + 1, "l4: out of memory recording a dependency");
    return;
  }
  d->dependents[d->n_dependents++] = me;
  run->tasks[me].deps_left++;
}

lw_status_t lw_l4_submit(lw_l4_orch_t *o, lw_callable_handle_t c, const lw_args_t *args,
                         const lw_run_config_t *cfg, int32_t rank) {
  if (!o || !args) return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_submit: NULL argument");
  lw_l4_t *l4 = o->l4;
  l4_run_t *run = o->run;
  if (run->failed) {
    return lw__fail(LW_POISONED, "lw_l4_submit: run %" PRIu64 " already failed: %s", run->id,
                    run->error.message);
  }
  uint64_t ix = c.id & L4_HANDLE_MASK;
  if ((c.id & ~L4_HANDLE_MASK) != L4_HANDLE_TAG || ix < 1 || ix > l4->n_names) {
    return lw__fail(LW_NOT_FOUND,
                    "lw_l4_submit: callable handle %" PRIu64 " is not one lw_l4_register gave",
                    c.id);
  }
  LW_RETURN_IF_ERROR(lw_args_validate(args));
  if (rank != LW_L4_ANY_RANK && (rank < 1 || rank >= l4->size)) {
    return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_submit: rank %d (1..%d, or LW_L4_ANY_RANK)",
                    (int)rank, (int)l4->size - 1);
  }
  if (cfg && cfg->timeout_ns < 0) {
    return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_submit: timeout_ns %" PRId64 " (>= 0; 0: none)",
                    cfg->timeout_ns);
  }
  if (rank != LW_L4_ANY_RANK && l4->ranks[rank].dead) {
    return lw__fail(LW_UNAVAILABLE, "lw_l4_submit: %s", l4->ranks[rank].why);
  }
  uint64_t tid[LW_MAX_TENSORS];
  for (uint32_t i = 0; i < args->n_tensors; ++i) {
    l4_tensor_t *tn = tensor_of(l4, args->tensor[i].data);
    if (!tn) {
      return lw__fail(LW_INVALID_ARGUMENT,
                      "lw_l4_submit: tensor %u is not a token of lw_l4_tensor_create", i);
    }
    if (args->tensor[i].bytes != tn->bytes) {
      return lw__fail(LW_INVALID_ARGUMENT,
                      "lw_l4_submit: tensor %u (id %" PRIu64 ") is %" PRIu64
                      " bytes, the args say %" PRIu64,
                      i, tn->id, tn->bytes, args->tensor[i].bytes);
    }
    tid[i] = tn->id;
  }
  if (!lw__l4_grow((void **)&run->tasks, &run->cap, run->n + 1, sizeof(l4_task_t))) {
    return lw__fail(LW_RESOURCE_EXHAUSTED, "lw_l4_submit: out of memory");
  }
  uint32_t me = run->n;
  l4_task_t *t = &run->tasks[me];
  memset(t, 0, sizeof(*t));
  t->id = (uint64_t)me + 1;
  t->name_ix = (uint32_t)(ix - 1);
  t->want_rank = rank;
  t->rank = -1;
  t->args = *args;
  t->timeout_ns = cfg ? cfg->timeout_ns : 0;
  memcpy(t->tid, tid, sizeof(tid));
  run->n++;
  // Dependencies (orch.h): a read waits for the last writer; a write for the last writer and every
  // read since it.
  for (uint32_t i = 0; i < args->n_tensors; ++i) {
    uint32_t tag = args->tensor[i].tag;
    if (tag == LW_TAG_NO_DEP) continue;
    l4_tensor_t *tn = tensor_by_id(l4, tid[i]);
    if (tn->run_id != run->id) {
      tn->run_id = run->id;
      tn->last_writer = 0;
      tn->n_readers = 0;
    }
    if (tn->last_writer && tn->last_writer - 1 != me) add_edge(run, tn->last_writer - 1, me);
    if (lw__l4_tag_writes(tag)) {
      for (uint32_t k = 0; k < tn->n_readers; ++k) {
        if (tn->readers[k] != me) add_edge(run, tn->readers[k], me);
      }
      tn->last_writer = me + 1;
      tn->n_readers = 0;
    } else if (lw__l4_grow((void **)&tn->readers, &tn->cap_readers, tn->n_readers + 1,
                           sizeof(uint32_t))) {
      tn->readers[tn->n_readers++] = me;
    } else {
      set_error(run, LW_RESOURCE_EXHAUSTED, me + 1, "l4: out of memory recording a reader");
    }
  }
  t = &run->tasks[me];
  o->last_task = t->id;
  if (run->failed) {
    finish(run, me, LW_POISONED);
    stop_all(l4, run);
    return LW_OK;
  }
  if (t->deps_left == 0) {
    if (!lw__l4_grow((void **)&run->ready, &run->cap_ready, run->n_ready + 1, sizeof(uint32_t))) {
      set_error(run, LW_RESOURCE_EXHAUSTED, t->id, "l4: out of memory queueing a task");
      finish(run, me, LW_RESOURCE_EXHAUSTED);
      stop_all(l4, run);
      return LW_OK;
    }
    t->state = T_READY;
    run->ready[run->n_ready++] = me;
  }
  // A burst of submits posts as it goes; completions, ends and the rest are looked at every 16
  // submits, or at once when no rank has a free frame (then they are what frees one).
  if ((run->n & 15u) == 0 || ranks_with_room(l4) == 0) {
    (void)pump(l4, run);
  } else {
    (void)dispatch(l4, run);
  }
  return LW_OK;
}

uint64_t lw_l4_last_task(const lw_l4_orch_t *o) { return o ? o->last_task : 0; }

static void run_free(l4_run_t *run) {
  for (uint32_t i = 0; i < run->n; ++i) free(run->tasks[i].dependents);
  free(run->tasks);
  free(run->ready);
  free(run->xfers);
  free(run);
}

lw_status_t lw__l4_run_one(lw_l4_t *l4, lw_l4_orch_fn fn, void *user, uint64_t epoch,
                           const lw_handle_t *handle, lw_run_report_t *out) {
  memset(out, 0, sizeof(*out));
  l4_run_t *run = ensure_ranks(l4) ? calloc(1, sizeof(*run)) : NULL;
  if (!run) {
    out->status = lw__error_set(&out->error, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
    return out->status;
  }
  run->id = ++l4->next_run_id;
  run->epoch = epoch;
  run->handle = handle;
  l4->run = run;
  int64_t start = lw__now_ns();
  lw_l4_orch_t o = {.l4 = l4, .run = run};
  lw_status_t st = fn(&o, user);
  if (st != LW_OK && !run->failed) {
    set_error(run, st, 0, "l4: run %" PRIu64 ": the orch function returned %s", run->id,
              lw_status_name(st));
    stop_all(l4, run);
  }
  uint32_t round = 0;
  while (run->n_terminal < run->n || run->n_xfers > 0) {
    if (pump(l4, run)) {
      round = 0;
    } else {
      lw__l4_nap(&round, NAP_CAP_NS, run->n_xfers > 0);
    }
  }
  if (!run->failed) fetch_results(l4, run);
  lw_run_report_t rep = {.status = run->failed ? run->error.code : LW_OK,
                         .n_tasks = run->n,
                         .n_completed = run->n_ok,
                         .n_failed = run->n - run->n_ok,
                         .wall_ns = (uint64_t)(lw__now_ns() - start)};
  if (run->failed) {
    rep.error = run->error;
  } else {
    lw__error_clear(&rep.error);
  }
  *out = rep;
  l4->run = NULL;
  run_free(run);
  return rep.status;
}

void lw__l4_root_free(lw_l4_t *l4) {
  for (uint64_t i = 0; i < l4->n_tensors; ++i) {
    if (!l4->tensors[i]) continue;
    free(l4->tensors[i]->readers);
    free(l4->tensors[i]);
  }
  free(l4->tensors);
  free(l4->ranks);
}
