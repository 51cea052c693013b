// parent/l4.c — the L4 worker (lanework/l4.h): its start and end on every rank, registered names,
// the message helpers both sides use; and rank 0's part: tensors with a home and a version, the
// run's DAG across ranks, dispatch, completions, failure. Ranks >= 1 serve in parent/l4_serve.c.
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanework/handle.h"
#include "parent/fs_zygote.h"
#include "parent/l4_impl.h"

// ---------------------------------------------------------------------------------------------
// Config

static void l4_defaults(lw_l4_config_t *c) {
  memset(c, 0, sizeof(*c));
  c->struct_size = (uint32_t)sizeof(*c);
  c->max_in_flight = 64;
  lw_worker_config_default(&c->l3);
  c->startup_timeout_ns = 30000000000LL;
  c->period_ns = LW_L4_PERIOD_NS_DEFAULT;
  c->hung_ns = LW_L4_HUNG_NS_DEFAULT;
  c->message_timeout_ns = 10000000000LL;
}

void lw_l4_config_default_sized(lw_l4_config_t *c, uint32_t struct_size) {
  if (c == NULL) return;
  lw_l4_config_t d;
  l4_defaults(&d);
  lw__sized_config_fill(c, struct_size, &d, sizeof(d));
}

// ---------------------------------------------------------------------------------------------
// Messages

// Yielding for this long after the last progress before sleeping: an answer that comes within
// it is seen at once. Counted in time, not in yields: on an idle CPU a yield returns at once, and
// 64 of them passed in microseconds, so every answer waited for a sleep (a 2-rank job's round
// trip measured 370-540 us, a 3-rank one's 60-120 us).
#define YIELD_NS 200000

static _Thread_local int64_t tl_idle_since;

void lw__l4_nap(uint32_t *round, int64_t cap_ns, bool busy) {
  if (busy) {
    *round = 0;  // the yields before any sleep count from the transfers' end
    sched_yield();
    return;
  }
  uint32_t r = (*round)++;
  int64_t now = lw__now_ns();
  if (r == 0) tl_idle_since = now;
  if (now - tl_idle_since < YIELD_NS) {
    *round = 1;  // the sleeps below count from the end of the yields
    sched_yield();
    return;
  }
  int64_t ns = 10000LL << (r - 1 < 8 ? r - 1 : 8);
  if (ns > cap_ns) ns = cap_ns;
  struct timespec ts = {0, (long)ns};
  nanosleep(&ts, NULL);
}

bool lw__l4_grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return true;
  uint32_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return false;
  *p = q;
  *cap = c;
  return true;
}

bool lw__l4_xfers_poll(lw_l4_comm_t *c, lw_l4_xfer_t **xfers, uint32_t *n) {
  bool ended = false;
  uint32_t keep = 0;
  for (uint32_t i = 0; i < *n; ++i) {
    lw_error_t err;
    if (lw__l4_comm_xfer_test(c, xfers[i], &err) == LW_NOT_FOUND) {
      xfers[keep++] = xfers[i];
    } else {
      ended = true;
    }
  }
  *n = keep;
  return ended;
}

// Encodes into a buffer of `bytes` (on the stack when small) and sends it on `to`'s stream.
typedef lw_status_t (*encode_fn)(const void *what, int32_t from, uint64_t seq, void *buf,
                                 size_t cap, size_t *out, lw_error_t *err);

static lw_status_t send_encoded(lw_l4_t *l4, int32_t to, size_t bytes, encode_fn encode,
                                const void *what, lw_error_t *err) {
  uint8_t small[1024];
  uint8_t *buf = bytes <= sizeof(small) ? small : malloc(bytes);
  if (!buf) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  size_t n = 0;
  lw_status_t st = encode(what, l4->rank, l4->send_seq[to] + 1, buf, bytes, &n, err);
  if (st == LW_OK) {
    l4->send_seq[to]++;  // sent or not, the seq is spent: the peer is lost if it
                         // was not
    st = lw__l4_comm_send(l4->comm, to, buf, n, lw__now_ns() + l4->cfg.message_timeout_ns, err);
  }
  if (buf != small) free(buf);
  return st;
}

static lw_status_t enc_task(const void *w, int32_t f, uint64_t s, void *b, size_t c, size_t *o,
                            lw_error_t *e) {
  return lw__l4_wire_task_encode(w, f, s, b, c, o, e);
}
static lw_status_t enc_done(const void *w, int32_t f, uint64_t s, void *b, size_t c, size_t *o,
                            lw_error_t *e) {
  return lw__l4_wire_done_encode(w, f, s, b, c, o, e);
}
static lw_status_t enc_cancel(const void *w, int32_t f, uint64_t s, void *b, size_t c, size_t *o,
                              lw_error_t *e) {
  return lw__l4_wire_cancel_encode(w, f, s, b, c, o, e);
}
static lw_status_t enc_move(const void *w, int32_t f, uint64_t s, void *b, size_t c, size_t *o,
                            lw_error_t *e) {
  return lw__l4_wire_move_encode(LW_L4_WIRE_MOVE, w, f, s, b, c, o, e);
}
static lw_status_t enc_lost(const void *w, int32_t f, uint64_t s, void *b, size_t c, size_t *o,
                            lw_error_t *e) {
  return lw__l4_wire_move_encode(LW_L4_WIRE_LOST, w, f, s, b, c, o, e);
}
static lw_status_t enc_free(const void *w, int32_t f, uint64_t s, void *b, size_t c, size_t *o,
                            lw_error_t *e) {
  return lw__l4_wire_move_encode(LW_L4_WIRE_FREE, w, f, s, b, c, o, e);
}

lw_status_t lw__l4_send_task(lw_l4_t *l4, int32_t to, const lw_l4_task_t *t, lw_error_t *err) {
  return send_encoded(l4, to, lw__l4_wire_task_bytes(t), enc_task, t, err);
}
lw_status_t lw__l4_send_done(lw_l4_t *l4, const lw_l4_done_t *d, lw_error_t *err) {
  return send_encoded(l4, 0, lw__l4_wire_done_bytes(d), enc_done, d, err);
}
lw_status_t lw__l4_send_cancel(lw_l4_t *l4, int32_t to, const lw_l4_cancel_t *c, lw_error_t *err) {
  return send_encoded(l4, to, lw__l4_wire_cancel_bytes(), enc_cancel, c, err);
}
lw_status_t lw__l4_send_move(lw_l4_t *l4, int32_t to, lw_l4_wire_kind_t kind, const lw_l4_move_t *m,
                             lw_error_t *err) {
  encode_fn encode = kind == LW_L4_WIRE_MOVE   ? enc_move
                     : kind == LW_L4_WIRE_LOST ? enc_lost
                                               : enc_free;
  return send_encoded(l4, to, lw__l4_wire_move_bytes(), encode, m, err);
}

lw_status_t lw__l4_recv(lw_l4_t *l4, int32_t from, int32_t *out_from, void **buf,
                        lw_l4_wire_msg_t *msg, lw_error_t *err) {
  size_t bytes = 0;
  int32_t who = -1;
  lw_status_t st = lw__l4_comm_recv(l4->comm, from, &who, buf, &bytes, 0, err);
  if (st != LW_OK) return st;
  *out_from = who;
  st = lw__l4_wire_decode(*buf, bytes, who, l4->recv_seq[who] + 1, msg, err);
  if (st != LW_OK) {
    free(*buf);
    *buf = NULL;
    return st;
  }
  l4->recv_seq[who]++;
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// Create, names, destroy

lw_status_t lw_l4_create(int *argc, char ***argv, const lw_l4_config_t *cfg, lw_l4_t **out) {
  if (!out) return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_create: out is NULL");
  *out = NULL;
  lw_error_t err;
  lw__error_clear(&err);
  lw_l4_t *l4 = calloc(1, sizeof(*l4));
  if (!l4) return lw__fail(LW_RESOURCE_EXHAUSTED, "lw_l4_create: out of memory");
  l4_defaults(&l4->cfg);
  if (cfg && lw__sized_config_read("lw_l4_config_t", cfg, sizeof(lw_l4_config_t), sizeof(*cfg),
                                   &l4->cfg, &err) != LW_OK) {
    free(l4);
    return lw__last_error_store(&err);
  }
  if (l4->cfg.l3.struct_size != sizeof(lw_worker_config_t)) {
    // The embedded worker config fixes the offsets of every field after it.
    lw__error_set(&err, LW_INVALID_ARGUMENT, -1, 0,
                  "lw_l4_create: lw_l4_config_t.l3.struct_size is %u, this library's "
                  "lw_worker_config_t has %zu bytes (set the config with lw_l4_config_default)",
                  l4->cfg.l3.struct_size, sizeof(lw_worker_config_t));
    free(l4);
    return lw__last_error_store(&err);
  }
  if (l4->cfg.max_in_flight < 1 || l4->cfg.max_in_flight > LW_L4_MAX_IN_FLIGHT ||
      l4->cfg.startup_timeout_ns <= 0 || l4->cfg.message_timeout_ns <= 0) {
    lw__error_set(&err, LW_INVALID_ARGUMENT, -1, 0,
                  "lw_l4_create: max_in_flight %u (1..%d), startup_timeout_ns %" PRId64
                  " and message_timeout_ns %" PRId64 " (> 0)",
                  l4->cfg.max_in_flight, LW_L4_MAX_IN_FLIGHT, l4->cfg.startup_timeout_ns,
                  l4->cfg.message_timeout_ns);
    free(l4);
    return lw__last_error_store(&err);
  }
  // Sub children are copies of the zygote, which can only be made while the process has one
  // thread: before MPI starts its own (docs/processes.md). Every rank, as the rank is not known
  // yet; rank 0's stays idle.
  if (l4->cfg.l3.n_subs > 0) (void)lw__fs_zygote_ensure(NULL, NULL, 0);
  int64_t deadline = lw__now_ns() + l4->cfg.startup_timeout_ns;
  lw_l4_comm_config_t cc = {
      .startup_deadline_ns = deadline, .period_ns = l4->cfg.period_ns, .hung_ns = l4->cfg.hung_ns};
  lw_status_t st = lw__l4_comm_open(argc, argv, &cc, &l4->comm, &err);
  if (st != LW_OK) {
    free(l4);
    return lw__last_error_store(&err);
  }
  l4->rank = lw__l4_comm_rank(l4->comm);
  l4->size = lw__l4_comm_size(l4->comm);
  l4->send_seq = calloc((size_t)l4->size, sizeof(uint64_t));
  l4->recv_seq = calloc((size_t)l4->size, sizeof(uint64_t));
  if (!l4->send_seq || !l4->recv_seq) {
    st = lw__error_set(&err, LW_RESOURCE_EXHAUSTED, -1, 0, "lw_l4_create: out of memory");
  } else if (l4->size < 2 || l4->size > 64) {
    st = lw__error_set(&err, LW_INVALID_ARGUMENT, -1, 0,
                       "lw_l4_create: %d rank(s); the L4 needs rank 0 and 1..63 L3 ranks "
                       "(mpirun -np 2 to 64)",
                       (int)l4->size);
  } else if (l4->rank > 0) {
    lw_worker_config_t wc = l4->cfg.l3;
    if (wc.startup_timeout_ns <= 0 || lw__now_ns() + wc.startup_timeout_ns > deadline) {
      wc.startup_timeout_ns = deadline - lw__now_ns();
    }
    st = lw_worker_create(&wc, &l4->l3);
    if (st != LW_OK) {
      lw__error_set(&err, st, -1, 0, "lw_l4_create: rank %d's L3 worker: %s", (int)l4->rank,
                    lw_last_error()->message);
    }
  }
  if (st != LW_OK) {
    lw__l4_comm_close(l4->comm, false);
    free(l4->send_seq);
    free(l4->recv_seq);
    free(l4);
    return lw__last_error_store(&err);
  }
  l4->next_home = 1;
  if (lw__l4_runs_initialize(l4, &err) != LW_OK) {
    if (l4->l3) lw_worker_destroy(l4->l3);
    lw__l4_comm_close(l4->comm, false);
    free(l4->send_seq);
    free(l4->recv_seq);
    free(l4);
    return lw__last_error_store(&err);
  }
  *out = l4;
  return LW_OK;
}

int32_t lw_l4_rank(const lw_l4_t *l4) { return l4 ? l4->rank : -1; }
int32_t lw_l4_size(const lw_l4_t *l4) { return l4 ? l4->size : 0; }
lw_worker_t *lw_l4_worker(lw_l4_t *l4) { return l4 ? l4->l3 : NULL; }

static lw_status_t add_name(lw_l4_t *l4, const char *name, uint32_t kind, const char *what,
                            l4_name_t **out, lw_error_t *err) {
  size_t n = name ? strnlen(name, LW_L4_NAME_BYTES) : 0;
  bool printable = n > 0 && n <= LW_L4_NAME_MAX;
  for (size_t i = 0; printable && i < n; ++i) {
    if ((unsigned char)name[i] < 0x21 || (unsigned char)name[i] > 0x7e) printable = false;
  }
  if (!printable) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "%s: a name is 1..%d printable bytes without spaces (got %s)", what,
                         LW_L4_NAME_MAX, name ? "another" : "NULL");
  }
  for (uint32_t i = 0; i < l4->n_names; ++i) {
    if (strcmp(l4->names[i].name, name) == 0) {
      return lw__error_set(err, LW_ALREADY_EXISTS, -1, 0,
                           "%s: '%s' is already registered on rank %d", what, name, (int)l4->rank);
    }
  }
  if (l4->n_names == l4->cap_names) {
    uint32_t cap = l4->cap_names ? l4->cap_names * 2 : 16;
    l4_name_t *names = realloc(l4->names, cap * sizeof(*names));
    if (!names) {
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "%s: out of memory", what);
    }
    l4->names = names;
    l4->cap_names = cap;
  }
  l4_name_t *e = &l4->names[l4->n_names];
  memset(e, 0, sizeof(*e));
  memcpy(e->name, name, n);
  e->kind = kind;
  *out = e;
  return LW_OK;
}

lw_status_t lw_l4_register(lw_l4_t *l4, const char *name, const lw_callable_t *c,
                           lw_callable_handle_t *out) {
  if (!l4 || !c || !out) return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_register: NULL argument");
  l4_name_t *e = NULL;
  lw_error_t err;
  if (add_name(l4, name, LW_L4_TASK_KERNEL, "lw_l4_register", &e, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  if (l4->l3) LW_RETURN_IF_ERROR(lw_worker_register(l4->l3, c, &e->l3));
  out->id = L4_HANDLE_TAG | (uint64_t)++l4->n_names;
  return LW_OK;
}

lw_status_t lw_l4_register_sub(lw_l4_t *l4, const char *name, lw_sub_fn fn,
                               lw_callable_handle_t *out) {
  if (!l4 || !out || (!fn && l4->rank != 0)) {
    return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_register_sub: NULL argument");
  }
  if (l4->rank != 0 && l4->cfg.l3.n_subs == 0) {
    return lw__fail(LW_FAILED_PRECONDITION,
                    "lw_l4_register_sub %s: rank %d's L3 worker has no sub children "
                    "(lw_l4_config_t.l3.n_subs is 0)",
                    name ? name : "(NULL)", (int)l4->rank);
  }
  l4_name_t *e = NULL;
  lw_error_t err;
  if (add_name(l4, name, LW_L4_TASK_SUB, "lw_l4_register_sub", &e, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  if (l4->l3) LW_RETURN_IF_ERROR(lw_worker_register_sub(l4->l3, fn, name, &e->l3));
  out->id = L4_HANDLE_TAG | (uint64_t)++l4->n_names;
  return LW_OK;
}

lw_status_t lw_l4_register_orch(lw_l4_t *l4, const char *name, lw_orch_fn fn,
                                lw_callable_handle_t *out) {
  if (!l4 || !out || (!fn && l4->rank != 0)) {
    return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_register_orch: NULL argument");
  }
  l4_name_t *e = NULL;
  lw_error_t err;
  if (add_name(l4, name, LW_L4_TASK_ORCH, "lw_l4_register_orch", &e, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  e->fn = fn;
  out->id = L4_HANDLE_TAG | (uint64_t)++l4->n_names;
  return LW_OK;
}

lw_status_t lw_l4_serve(lw_l4_t *l4) {
  if (!l4) return lw__fail(LW_INVALID_ARGUMENT, "lw_l4_serve: l4 is NULL");
  if (l4->rank == 0) {
    return lw__fail(LW_FAILED_PRECONDITION,
                    "lw_l4_serve: rank 0 is the L4 (it runs orch functions: "
                    "lw_l4_run); ranks "
                    ">= 1 serve");
  }
  lw_error_t err;
  lw__error_clear(&err);
  lw_status_t st = lw__l4_serve(l4, &err);
  return st == LW_OK ? LW_OK : lw__last_error_store(&err);
}

int lw_l4_destroy(lw_l4_t *l4) {
  if (!l4) return 0;
  // Rank 0: a rank that ended before this goodbye is lost, whatever its end (ranks leave only when
  // the L4 says goodbye). A rank: the L4's goodbye is the clean end; anything else not.
  for (int32_t r = 0; r < l4->size; ++r) {
    lw_l4_end_t end = r == l4->rank ? 0 : lw__l4_comm_peer_end(l4->comm, r);
    if (end != 0 && (l4->rank == 0 || end != LW_L4_END_GOODBYE)) l4->lost = true;
  }
  lw__l4_runs_deinitialize(l4);  // queued runs cancelled, the one in progress stopped
  if (l4->l3) lw_worker_destroy(l4->l3);
  if (l4->rank == 0) lw__l4_root_free(l4);
  bool finalized = lw__l4_comm_close(l4->comm, !l4->lost);
  int rc = l4->lost ? LW_L4_EXIT_PEER_LOST : 0;
  (void)finalized;
  free(l4->names);
  free(l4->send_seq);
  free(l4->recv_seq);
  free(l4);
  return rc;
}
