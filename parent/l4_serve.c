// parent/l4_serve.c — an L3 rank of the L4 worker (lanework/l4.h, lw_l4_serve): takes the L4's
// tasks, brings the tensor versions they read, runs each as one run of the rank's L3 worker,
// answers with its completion; sends the versions it holds to other ranks when the L4 says so
// (MOVE), forgets tensors (FREE), cancels (CANCEL).
//
// One thread, never blocked in MPI: each pass takes every message there is, looks once at each
// transfer and each task, and naps briefly when nothing moved. A transfer the L4 told this rank of
// is always completed (or its peer lost) before the task that needed it finishes, even a cancelled
// one: an abandoned transfer would leave its other side waiting, and its tag could later match
// another.
//
// A rank's tensors live in its L3 worker's arena, one buffer per tensor holding one version at a
// time (`valid`, `version`), or receiving one (`rx`). The L4's dependencies guarantee that a buffer
// is never received into or written while a task of this rank reads another version of it.
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanework/handle.h"
#include "lanework/orch.h"
#include "parent/l4_impl.h"

#define NAP_CAP_NS 100000  // at most 100 us between looks while nothing moves
#define EXIT_WAIT_NS 5000000000LL

typedef struct rt_tensor {
  void *buf;
  uint64_t bytes;
  bool valid;
  uint64_t version;
  lw_l4_xfer_t *rx;  // receiving incoming_version
  uint64_t incoming_version;
  bool free_after_rx;                         // a FREE came while it was receiving
  char rx_error[LW_ERROR_MESSAGE_BYTES / 2];  // why the last receive failed
} rt_tensor_t;

typedef struct rt_task {
  lw_l4_task_t t;          // its inline pointers are cleared (the bytes were copied)
  const l4_name_t *name;   // NULL: none registered under its name
  lw_args_t args;          // the rank's buffers
  lw_kernel_args_t kargs;  // the same, for an L3 orch function
  struct rt_batch *batch;  // the L3 run it is part of, once launched
  int64_t ready_ns;        // when its inputs were all here (0: not yet)
  bool cancelled;
  lw_status_t early;  // a failure found before launch (LW_OK: none)
  char early_text[LW_L4_ERROR_TEXT_BYTES];
  struct rt_task *next;
} rt_task_t;

// One L3 run of the kernel tasks that became ready in one pass (or of one L3 orch function's task).
// Its tasks finish together, when the run's handle does: a run's handle is how the L3 API reports,
// and handles of one worker finish in submission order anyway.
#define BATCH_MAX 64
// While a batch runs, or while TASK messages keep coming, kernel tasks that became ready wait at
// most this long for more to join them: under load one L3 run carries many tasks (a run costs
// several times a task in it), and alone a task starts after one quiet pass.
#define HOLD_NS 50000
typedef struct rt_batch {
  lw_handle_t *h;
  uint32_t n;        // its tasks
  uint32_t members;  // its tasks not yet dropped (it goes with the last)
  bool answered;     // its run finished and every task was answered
  rt_task_t *task[BATCH_MAX];
} rt_batch_t;

typedef struct rt_move {
  lw_l4_move_t m;
  struct rt_move *next;
} rt_move_t;

typedef struct rt_discard {
  lw_l4_xfer_t *rx;
  void *scratch;
} rt_discard_t;

typedef struct srv {
  lw_l4_t *l4;
  uint32_t n_batches;     // L3 runs under way
  bool took_tasks;        // this pass took TASK messages
  rt_tensor_t **tensors;  // by id - 1
  uint64_t cap_tensors;
  rt_task_t *tasks, **tasks_tail;
  rt_move_t *moves;   // MOVEs waiting for the version they send to arrive
  lw_l4_xfer_t **tx;  // sends under way
  uint32_t n_tx, cap_tx;
  struct rt_discard *discard;  // receives whose task could not keep them, into scratch buffers
  uint32_t n_discard, cap_discard;
} srv_t;

static rt_tensor_t *tensor_get(srv_t *s, uint64_t id) {
  return id >= 1 && id <= s->cap_tensors ? s->tensors[id - 1] : NULL;
}

// The rank's buffer for tensor id of `bytes`, made on first use. NULL when the arena is full (or
// the L4 named the tensor with another size: *mismatch).
static rt_tensor_t *tensor_make(srv_t *s, uint64_t id, uint64_t bytes, bool *mismatch) {
  *mismatch = false;
  if (id < 1 || id > (1ull << 40)) return NULL;
  if (id > s->cap_tensors) {
    uint64_t cap = s->cap_tensors ? s->cap_tensors : 64;
    while (cap < id) cap *= 2;
    rt_tensor_t **t = realloc(s->tensors, cap * sizeof(*t));
    if (!t) return NULL;
    memset(t + s->cap_tensors, 0, (cap - s->cap_tensors) * sizeof(*t));
    s->tensors = t;
    s->cap_tensors = cap;
  }
  rt_tensor_t *t = s->tensors[id - 1];
  if (t) {
    *mismatch = t->bytes != bytes;
    return *mismatch ? NULL : t;
  }
  t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->buf = lw_worker_alloc(s->l4->l3, (size_t)bytes);
  if (!t->buf) {
    free(t);
    return NULL;
  }
  t->bytes = bytes;
  s->tensors[id - 1] = t;
  return t;
}

static void tensor_drop(srv_t *s, uint64_t id) {
  rt_tensor_t *t = tensor_get(s, id);
  if (!t) return;
  if (t->rx) {
    t->free_after_rx = true;
    return;
  }
  lw_worker_free(s->l4->l3, t->buf);
  free(t);
  s->tensors[id - 1] = NULL;
}

// Text fit for a DONE: bounded and printable.
static void done_text(char *out, const char *in) {
  size_t i = 0;
  for (; in[i] && i < LW_L4_ERROR_TEXT_BYTES - 1; ++i) {
    unsigned char c = (unsigned char)in[i];
    out[i] = (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f ? '?' : (char)c;
  }
  out[i] = '\0';
}

static lw_status_t send_done(srv_t *s, const rt_task_t *rt, lw_status_t status, const char *text,
                             uint64_t queue_ns, uint64_t kernel_ns, lw_error_t *err) {
  lw_l4_done_t d;
  memset(&d, 0, sizeof(d));
  d.identity = rt->t.identity;
  d.frame = rt->t.frame;
  d.status = status;
  d.queue_ns = queue_ns;
  d.kernel_ns = kernel_ns;
  done_text(d.error, status == LW_OK ? "" : text);
  if (status == LW_OK) {
    for (uint32_t i = 0; i < rt->t.n_tensors; ++i) {
      const lw_l4_tensor_t *x = &rt->t.tensor[i];
      if (!lw__l4_tag_writes(x->tag)) continue;
      d.produced[d.n_produced++] = (lw_l4_tensor_t){
          .tensor_id = x->tensor_id, .version = x->version + 1, .bytes = x->bytes, .home_rank = -1};
    }
  }
  return lw__l4_send_done(s->l4, &d, err);
}

// A receive that cannot go into the task's buffer still completes, into a scratch buffer (out of
// memory for either: nothing is received, and the sender's side ends with this rank or at close).
static void receive_discarded(srv_t *s, const lw_l4_tensor_t *x) {
  if (!lw__l4_grow((void **)&s->discard, &s->cap_discard, s->n_discard + 1, sizeof(*s->discard))) {
    return;
  }
  void *scratch = malloc(x->bytes ? (size_t)x->bytes : 1);
  lw_l4_xfer_t *rx = NULL;
  lw_error_t err;
  if (!scratch || lw__l4_comm_xfer_start(s->l4->comm, false, x->home_rank, x->xfer, scratch,
                                         (size_t)x->bytes, &rx, &err) != LW_OK) {
    free(scratch);
    return;
  }
  s->discard[s->n_discard++] = (rt_discard_t){.rx = rx, .scratch = scratch};
}
static void early_fail(rt_task_t *rt, lw_status_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void early_fail(rt_task_t *rt, lw_status_t code, const char *fmt, ...) {
  if (rt->early != LW_OK) return;
  rt->early = code;
  char text[LW_ERROR_MESSAGE_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  done_text(rt->early_text, text);
}

static lw_status_t on_task(srv_t *s, const lw_l4_task_t *m, lw_error_t *err) {
  lw_l4_t *l4 = s->l4;
  rt_task_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4 rank: out of memory");
  rt->t = *m;
  for (uint32_t i = 0; i < l4->n_names; ++i) {
    if (l4->names[i].kind == m->kind && strcmp(l4->names[i].name, m->name) == 0) {
      rt->name = &l4->names[i];
    }
  }
  if (!rt->name) {
    early_fail(rt, LW_NOT_FOUND, "rank %d has no %s registered as '%s' (register it on every rank)",
               (int)l4->rank,
               m->kind == LW_L4_TASK_ORCH  ? "orch function"
               : m->kind == LW_L4_TASK_SUB ? "sub function"
                                           : "callable",
               m->name);
  }
  rt->args.n_scalars = m->n_scalars;
  memcpy(rt->args.scalar, m->scalar, sizeof(rt->args.scalar));
  rt->args.launch = m->launch;
  rt->args.n_tensors = m->n_tensors;
  for (uint32_t i = 0; i < m->n_tensors; ++i) {
    lw_l4_tensor_t *x = &rt->t.tensor[i];
    const void *inline_data = x->data;
    x->data = NULL;
    bool remote = lw__l4_tag_reads(x->tag) &&
                  !(x->flags & (LW_L4_TENSOR_INLINE | LW_L4_TENSOR_ZERO)) &&
                  x->home_rank != l4->rank;
    bool mismatch = false;
    rt_tensor_t *t = tensor_make(s, x->tensor_id, x->bytes, &mismatch);
    if (!t) {
      if (mismatch) {
        early_fail(rt, LW_INTERNAL, "the L4 named tensor %" PRIu64 " with another size",
                   x->tensor_id);
      } else {
        early_fail(rt, LW_RESOURCE_EXHAUSTED,
                   "rank %d: no room for tensor %" PRIu64 " (%" PRIu64
                   " bytes) in its worker arena (lw_l4_config_t.l3.arena_bytes)",
                   (int)l4->rank, x->tensor_id, x->bytes);
      }
      if (remote) receive_discarded(s, x);
      continue;
    }
    rt->args.tensor[i] =
        (lw_args_tensor_t){.data = t->buf, .bytes = x->bytes, .tag = (lw_tag_t)x->tag};
    rt->kargs.tensor[i].data = t->buf;
    rt->kargs.tensor[i].bytes = x->bytes;
    if (!lw__l4_tag_reads(x->tag)) continue;
    if (x->flags & LW_L4_TENSOR_ZERO) {
      if (!(t->valid && t->version == x->version)) memset(t->buf, 0, (size_t)x->bytes);
      t->valid = true;
      t->version = x->version;
    } else if (x->flags & LW_L4_TENSOR_INLINE) {
      memcpy(t->buf, inline_data, (size_t)x->bytes);
      t->valid = true;
      t->version = x->version;
    } else if (remote) {
      if (t->rx) {
        early_fail(rt, LW_INTERNAL, "the L4 sent tensor %" PRIu64 " while it was arriving",
                   x->tensor_id);
        receive_discarded(s, x);
        continue;
      }
      lw_error_t e;
      if (lw__l4_comm_xfer_start(l4->comm, false, x->home_rank, x->xfer, t->buf, (size_t)x->bytes,
                                 &t->rx, &e) != LW_OK) {
        snprintf(t->rx_error, sizeof(t->rx_error), "%.120s", e.message);
        t->valid = false;
        continue;
      }
      t->valid = false;
      t->incoming_version = x->version;
    }
  }
  rt->kargs.n_tensors = rt->args.n_tensors;
  rt->kargs.n_scalars = rt->args.n_scalars;
  memcpy(rt->kargs.scalar, rt->args.scalar, sizeof(rt->kargs.scalar));
  rt->kargs.launch = rt->args.launch;
  *s->tasks_tail = rt;
  s->tasks_tail = &rt->next;
  return LW_OK;
}

// Whether every version rt reads is here: 1 yes, 0 not yet, -1 never (rt->early says why). A
// receive the task waits on ends first even when the task already failed (or was cancelled):
// answered earlier, the task would free its tensor's buffer for the next one while MPI still writes
// into it.
static int inputs_ready(srv_t *s, rt_task_t *rt) {
  for (uint32_t i = 0; i < rt->t.n_tensors; ++i) {
    const lw_l4_tensor_t *x = &rt->t.tensor[i];
    rt_tensor_t *t = tensor_get(s, x->tensor_id);
    if (lw__l4_tag_reads(x->tag) && t && t->rx && t->incoming_version == x->version) return 0;
  }
  if (rt->early != LW_OK) return -1;
  for (uint32_t i = 0; i < rt->t.n_tensors; ++i) {
    const lw_l4_tensor_t *x = &rt->t.tensor[i];
    if (!lw__l4_tag_reads(x->tag)) continue;
    rt_tensor_t *t = tensor_get(s, x->tensor_id);
    if (t->valid && t->version == x->version) continue;
    if (t->rx_error[0]) {
      early_fail(rt, LW_UNAVAILABLE, "rank %d: tensor %" PRIu64 " never arrived: %s",
                 (int)s->l4->rank, x->tensor_id, t->rx_error);
    } else {
      early_fail(
          rt, LW_INTERNAL,
          "the L4 said rank %d holds tensor %" PRIu64 " version %" PRIu64 "; it holds %s %" PRIu64,
          (int)s->l4->rank, x->tensor_id, x->version, t->valid ? "version" : "none,", t->version);
    }
    return -1;
  }
  return 1;
}

// The L3 run of a batch: its kernel and sub tasks in order, or its one L3 orch function.
static lw_status_t batch_orch(lw_orch_t *o, void *user) {
  rt_batch_t *b = user;
  if (b->n == 1 && b->task[0]->name->kind == LW_L4_TASK_ORCH) {
    return b->task[0]->name->fn(o, &b->task[0]->kargs);
  }
  for (uint32_t i = 0; i < b->n; ++i) {
    rt_task_t *rt = b->task[i];
    lw_run_config_t rc;
    lw_run_config_default(&rc);
    rc.timeout_ns = rt->t.timeout_ns;
    if (rt->name->kind == LW_L4_TASK_SUB) {
      LW_RETURN_IF_ERROR(lw_orch_submit_sub(o, rt->name->l3, &rt->args));
    } else {
      LW_RETURN_IF_ERROR(lw_orch_submit_next_level(o, rt->name->l3, &rt->args, &rc, rt->t.chip));
    }
  }
  return LW_OK;
}

// Sends (MOVE) version m->version of a tensor this rank holds to m->to_rank.
static lw_status_t start_move(srv_t *s, const lw_l4_move_t *m, rt_tensor_t *t, lw_error_t *err) {
  lw_l4_xfer_t *tx = NULL;
  lw_error_t e;
  if (lw__l4_comm_xfer_start(s->l4->comm, true, m->to_rank, m->xfer, t->buf, (size_t)t->bytes, &tx,
                             &e) != LW_OK) {
    return LW_OK;  // the reader is gone: the L4 fails its task
  }
  if (!lw__l4_grow((void **)&s->tx, &s->cap_tx, s->n_tx + 1, sizeof(*s->tx))) {
    lw__l4_comm_xfer_abandon(s->l4->comm, tx);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4 rank: out of memory");
  }
  s->tx[s->n_tx++] = tx;
  return LW_OK;
}

static lw_status_t on_move(srv_t *s, const lw_l4_move_t *m, lw_error_t *err) {
  rt_tensor_t *t = tensor_get(s, m->tensor_id);
  if (t && t->bytes == m->bytes && t->valid && t->version == m->version) {
    return start_move(s, m, t, err);
  }
  if (t && t->bytes == m->bytes && t->rx && t->incoming_version == m->version) {
    rt_move_t *w = calloc(1, sizeof(*w));
    if (!w) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4 rank: out of memory");
    w->m = *m;
    w->next = s->moves;
    s->moves = w;
    return LW_OK;
  }
  // The reader would wait for bytes that never come: the protocol is broken, and this rank leaves
  // (the L4 sees it lost and fails what it held).
  return lw__error_set(err, LW_INTERNAL, -1, 0,
                       "l4 rank %d: the L4 asked it to send tensor %" PRIu64 " version %" PRIu64
                       " (%" PRIu64 " bytes), which it does not hold",
                       (int)s->l4->rank, m->tensor_id, m->version, m->bytes);
}

static void on_cancel(srv_t *s, const lw_l4_cancel_t *c) {
  for (rt_task_t *rt = s->tasks; rt; rt = rt->next) {
    if (rt->t.frame != c->frame || rt->t.identity.task_id != c->identity.task_id ||
        rt->t.identity.run_id != c->identity.run_id) {
      continue;
    }
    // Its whole L3 run stops: the L4 cancels a task only when its run failed, which stops every
    // task of that run anyway.
    rt->cancelled = true;
    if (rt->batch) (void)lw_handle_cancel(rt->batch->h);
  }
}

static lw_status_t poll_receives(srv_t *s, bool *moved, bool *busy, lw_error_t *err) {
  *busy = false;
  for (uint64_t id = 1; id <= s->cap_tensors; ++id) {
    rt_tensor_t *t = s->tensors[id - 1];
    if (!t || !t->rx) continue;
    lw_error_t e;
    lw_status_t st = lw__l4_comm_xfer_test(s->l4->comm, t->rx, &e);
    if (st == LW_NOT_FOUND) {
      *busy = true;
      continue;
    }
    *moved = true;
    t->rx = NULL;
    if (st == LW_OK) {
      t->valid = true;
      t->version = t->incoming_version;
      t->rx_error[0] = '\0';
    } else {
      t->valid = false;
      snprintf(t->rx_error, sizeof(t->rx_error), "%.120s", e.message);
    }
    for (rt_move_t **at = &s->moves; *at;) {
      rt_move_t *w = *at;
      if (w->m.tensor_id != id) {
        at = &w->next;
        continue;
      }
      *at = w->next;
      if (st == LW_OK) {
        lw_status_t ms = start_move(s, &w->m, t, err);
        if (ms != LW_OK) {
          free(w);
          return ms;
        }
      }
      free(w);  // a version that never came is sent by nobody: its reader's task fails
    }
    if (t->free_after_rx) tensor_drop(s, id);
  }
  if (lw__l4_xfers_poll(s->l4->comm, s->tx, &s->n_tx)) *moved = true;
  uint32_t keep = 0;
  for (uint32_t i = 0; i < s->n_discard; ++i) {
    lw_error_t e;
    lw_status_t st = lw__l4_comm_xfer_test(s->l4->comm, s->discard[i].rx, &e);
    if (st == LW_NOT_FOUND) {
      s->discard[keep++] = s->discard[i];
    } else {
      if (st == LW_OK) free(s->discard[i].scratch);  // otherwise MPI keeps it until close
      *moved = true;
    }
  }
  s->n_discard = keep;
  if (s->n_tx > 0 || s->n_discard > 0) *busy = true;
  return LW_OK;
}

// Finishes rt: its DONE goes to the L4 and the rank's copies follow what it did.
static lw_status_t complete(srv_t *s, rt_task_t *rt, lw_status_t status, const char *text,
                            uint64_t queue_ns, uint64_t kernel_ns, lw_error_t *err) {
  for (uint32_t i = 0; i < rt->t.n_tensors; ++i) {
    const lw_l4_tensor_t *x = &rt->t.tensor[i];
    rt_tensor_t *t = tensor_get(s, x->tensor_id);
    if (!t || !lw__l4_tag_writes(x->tag)) continue;
    t->valid = status == LW_OK;  // a failed writer may have left anything there
    t->version = x->version + 1;
  }
  return send_done(s, rt, status, text, queue_ns, kernel_ns, err);
}

static lw_status_t launch(srv_t *s, rt_batch_t *b, lw_error_t *err) {
  for (uint32_t i = 0; i < b->n; ++i) {
    b->task[i]->batch = b;
  }
  b->members = b->n;
  if (lw_worker_run_async(s->l4->l3, batch_orch, b, &b->h) == LW_OK) {
    s->n_batches++;
    return LW_OK;
  }
  // Refused at once (the worker is going away): each task is answered with why, below.
  (void)err;
  for (uint32_t i = 0; i < b->n; ++i) {
    rt_task_t *rt = b->task[i];
    rt->batch = NULL;
    rt->early = lw_last_error()->code;
    done_text(rt->early_text, lw_last_error()->message);
  }
  free(b);
  (void)s;
  return LW_OK;
}

// Answers every task of a finished batch, from its run's per-task reports.
static lw_status_t answer(srv_t *s, rt_batch_t *b, lw_error_t *err) {
  lw_task_report_t rep[BATCH_MAX];
  size_t n = 0;
  memset(rep, 0, sizeof(rep));
  lw_status_t rs = lw_handle_status(b->h);
  const lw_error_t *e = lw_handle_error(b->h);
  (void)lw_handle_run_tasks(b->h, rep, BATCH_MAX, &n);
  lw_status_t st = LW_OK;
  for (uint32_t i = 0; i < b->n; ++i) {
    rt_task_t *rt = b->task[i];
    bool orch = rt->name->kind == LW_L4_TASK_ORCH;
    // A kernel task's own outcome is its report; a task the run never submitted (a submit before it
    // failed) and an L3 orch function's task take the run's.
    lw_status_t ts = !orch && i < n ? rep[i].status : rs;
    char text[2 * LW_ERROR_MESSAGE_BYTES];
    if (ts == LW_OK) {
      text[0] = '\0';
    } else if (e && (orch || e->task_id == i + 1 || i >= n)) {
      snprintf(text, sizeof(text), "%s", e->message);
    } else {
      snprintf(text, sizeof(text), "%s with its L3 run: %s", lw_status_name(ts),
               e ? e->message : lw_status_name(rs));
    }
    lw_status_t cs = complete(s, rt, ts, text, !orch && i < n ? rep[i].queue_ns : 0,
                              !orch && i < n ? rep[i].kernel_ns : 0, err);
    if (st == LW_OK) st = cs;
  }
  return st;
}

static lw_status_t poll_tasks(srv_t *s, bool *moved, lw_error_t *err) {
  lw_status_t st = LW_OK;
  // Kernel tasks whose inputs are here: launched together, now if no batch runs, else once the
  // oldest waited HOLD_NS or a batch is full.
  uint32_t n_ready = 0;
  int64_t oldest = INT64_MAX, now = 0;
  for (rt_task_t *rt = s->tasks; rt && st == LW_OK; rt = rt->next) {
    if (rt->batch || rt->early != LW_OK) continue;
    if (!rt->ready_ns) {
      int ready = inputs_ready(s, rt);
      if (ready == 0) continue;
      *moved = true;
      if (ready > 0 && rt->cancelled) {
        rt->early = LW_CANCELLED;
        done_text(rt->early_text, "cancelled before it started");
      }
      if (rt->early != LW_OK) continue;  // answered below
      if (!now) now = lw__now_ns();
      rt->ready_ns = now;
    }
    if (rt->name->kind == LW_L4_TASK_ORCH) {
      rt_batch_t *one = calloc(1, sizeof(*one));
      if (!one) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4 rank: out of memory");
      one->task[one->n++] = rt;
      st = launch(s, one, err);
      continue;
    }
    n_ready++;
    if (rt->ready_ns < oldest) oldest = rt->ready_ns;
  }
  if (st != LW_OK) return st;
  // More tasks are coming while a batch runs or while this pass took new ones: they wait.
  if (n_ready > 0 && (s->n_batches > 0 || s->took_tasks) && n_ready < BATCH_MAX) {
    if (!now) now = lw__now_ns();
    if (now - oldest < HOLD_NS) n_ready = 0;  // wait for more to join
  }
  rt_batch_t *next = NULL;
  for (rt_task_t *rt = s->tasks; rt && n_ready > 0 && st == LW_OK; rt = rt->next) {
    if (rt->batch || rt->early != LW_OK || !rt->ready_ns) continue;
    if (rt->cancelled) {  // cancelled while held back for a batch: answered below
      rt->early = LW_CANCELLED;
      done_text(rt->early_text, "cancelled before it started");
      continue;
    }
    if (!next && !(next = calloc(1, sizeof(*next)))) {
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4 rank: out of memory");
    }
    next->task[next->n++] = rt;
    n_ready--;
    *moved = true;
    if (next->n == BATCH_MAX) {
      st = launch(s, next, err);
      next = NULL;
    }
  }
  if (next && st == LW_OK) st = launch(s, next, err);
  if (st != LW_OK) return st;
  // Answer what finished: tasks failed before launch, and finished batches.
  for (rt_task_t **at = &s->tasks; *at;) {
    rt_task_t *rt = *at;
    rt_batch_t *b = rt->batch;
    if (b && !b->answered && lw_handle_done(b->h)) {
      *moved = true;
      st = answer(s, b, err);  // every task of b is answered now
      b->answered = true;
      s->n_batches--;
    }
    bool over = false;
    if (b && b->answered) {
      over = true;
      rt->batch = NULL;
      if (--b->members == 0) {
        lw_handle_release(b->h);
        free(b);
      }
    } else if (!b && rt->early != LW_OK && inputs_ready(s, rt) < 0) {
      st = complete(s, rt, rt->early, rt->early_text, 0, 0, err);
      over = true;
    }
    if (!over) {
      at = &rt->next;
      continue;
    }
    *at = rt->next;
    if (s->tasks_tail == &rt->next) s->tasks_tail = at;
    free(rt);
    if (st != LW_OK) return st;
  }
  return LW_OK;
}

static lw_status_t on_message(srv_t *s, const lw_l4_wire_msg_t *msg, lw_error_t *err) {
  switch (msg->header.kind) {
    case LW_L4_WIRE_TASK:
      s->took_tasks = true;
      return on_task(s, &msg->u.task, err);
    case LW_L4_WIRE_MOVE:
      return on_move(s, &msg->u.move, err);
    case LW_L4_WIRE_FREE:
      tensor_drop(s, msg->u.move.tensor_id);
      return LW_OK;
    case LW_L4_WIRE_CANCEL:
      on_cancel(s, &msg->u.cancel);
      return LW_OK;
    case LW_L4_WIRE_LOST: {
      char why[96];
      snprintf(why, sizeof(why), "rank %d was lost (the L4 said so)", (int)msg->u.move.to_rank);
      lw__l4_comm_peer_lost(s->l4->comm, msg->u.move.to_rank, why);
      return LW_OK;
    }
    default:
      return lw__error_set(err, LW_INTERNAL, -1, 0,
                           "l4 rank %d: the L4 sent a message of kind %u, which ranks do not take",
                           (int)s->l4->rank, (unsigned)msg->header.kind);
  }
}

// Leaving: every L3 run still going is cancelled and waited for (bounded), every handle released,
// every buffer not under a transfer freed.
static void srv_free(srv_t *s) {
  int64_t deadline = lw__now_ns() + EXIT_WAIT_NS;
  for (rt_task_t *rt = s->tasks; rt; rt = rt->next) {
    if (rt->batch) (void)lw_handle_cancel(rt->batch->h);
  }
  // Every L3 run ends before any task of it is freed (its orch function reads them). One that does
  // not end in time keeps its tasks and its tensors' buffers (leaked, not freed under a running
  // kernel); the worker's destroy ends it.
  bool all_ended = true;
  for (rt_task_t *rt = s->tasks; rt; rt = rt->next) {
    if (!rt->batch) continue;
    int64_t left = deadline - lw__now_ns();
    if (lw_handle_wait(rt->batch->h, left > 0 ? left : 0) == LW_DEADLINE_EXCEEDED) {
      all_ended = false;
    }
  }
  while (s->tasks && all_ended) {
    rt_task_t *rt = s->tasks;
    s->tasks = rt->next;
    rt_batch_t *b = rt->batch;
    if (b && --b->members == 0) {  // the batch goes with its last task
      lw_handle_release(b->h);
      free(b);
    }
    free(rt);
  }
  while (s->moves) {
    rt_move_t *w = s->moves;
    s->moves = w->next;
    free(w);
  }
  for (uint32_t i = 0; i < s->n_tx; ++i) lw__l4_comm_xfer_abandon(s->l4->comm, s->tx[i]);
  for (uint32_t i = 0; i < s->n_discard; ++i) {
    lw__l4_comm_xfer_abandon(s->l4->comm, s->discard[i].rx);  // its scratch stays with MPI
  }
  for (uint64_t id = 1; id <= s->cap_tensors; ++id) {
    rt_tensor_t *t = s->tensors[id - 1];
    if (!t) continue;
    if (t->rx) {
      lw__l4_comm_xfer_abandon(s->l4->comm, t->rx);
      // The buffer is in the arena, which goes with the worker: MPI is told to drop the receive
      // above; a peer that could still write it is gone.
    } else if (all_ended) {
      lw_worker_free(s->l4->l3, t->buf);
    }
    free(t);
  }
  free(s->tensors);
  free(s->tx);
  free(s->discard);
}

lw_status_t lw__l4_serve(lw_l4_t *l4, lw_error_t *err) {
  srv_t s;
  memset(&s, 0, sizeof(s));
  s.l4 = l4;
  s.tasks_tail = &s.tasks;
  lw_status_t st = LW_OK;
  uint32_t round = 0;
  for (;;) {
    bool moved = false;
    s.took_tasks = false;
    for (;;) {
      void *buf = NULL;
      int32_t from = -1;
      lw_l4_wire_msg_t msg;
      lw_status_t rs = lw__l4_recv(l4, 0, &from, &buf, &msg, err);
      if (rs == LW_NOT_FOUND || rs == LW_UNAVAILABLE) break;  // the L4's end: below
      if (rs != LW_OK) {
        st = rs;
        break;
      }
      moved = true;
      rs = on_message(&s, &msg, err);
      free(buf);
      if (rs != LW_OK) {
        st = rs;
        break;
      }
    }
    bool busy = false;
    if (st == LW_OK) st = poll_receives(&s, &moved, &busy, err);
    if (st == LW_OK) st = poll_tasks(&s, &moved, err);
    if (st != LW_OK) break;
    lw_l4_end_t end = lw__l4_comm_peer_end(l4->comm, 0);
    if (end != 0 && !moved) {
      if (end != LW_L4_END_GOODBYE) {
        char why[LW_ERROR_MESSAGE_BYTES];
        (void)lw__l4_comm_peer_ended(l4->comm, 0, why, sizeof(why));
        l4->lost = true;
        st = lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4 rank %d: lost the L4: %s", (int)l4->rank,
                           why);
      }
      break;
    }
    if (moved) {
      round = 0;
    } else {
      lw__l4_nap(&round, NAP_CAP_NS, busy);
    }
  }
  srv_free(&s);
  return st;
}
