// parent/worker.c — lw_worker_t: create/destroy wiring the components together (parent/
// worker_impl.h), the configuration, the shared arena's public calls, user events and
// cancel_all. The callables are parent/callables.c's.
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "child/backend.h"
#include "child/config.h"
#include "lanes/error.h"
#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "parent/callables.h"
#include "parent/stats.h"
#include "parent/supervise.h"
#include "parent/worker_impl.h"
#include "parent/worker_child.h"
#include "parent/fs_zygote.h"

// The first released layout of lw_worker_config_t (0.2.0), the smallest struct_size accepted;
// it stays when fields are appended (see child/config.h).
#define LW__WORKER_CONFIG_V1_BYTES 136u
_Static_assert(offsetof(lw_worker_config_t, liveness_timeout_ns) + sizeof(int64_t) ==
                   LW__WORKER_CONFIG_V1_BYTES,
               "lw_worker_config_t's first version ends after liveness_timeout_ns");

// An appended field never lands in an older version's tail padding (docs/packaging.md).
_Static_assert(sizeof(lw_worker_config_t) ==
                   offsetof(lw_worker_config_t, reserved) + sizeof(uint32_t),
               "lw_worker_config_t has tail padding: add a reserved field");

static void worker_defaults(lw_worker_config_t *c) {
  memset(c, 0, sizeof(*c));
  c->struct_size = (uint32_t)sizeof(*c);
  c->n_chips = 1;
  c->n_subs = 0;
  lw_chip_config_default(&c->chip);
  c->arena_bytes = 256ull << 20;
  c->task_ring = 4096;
  c->submit_timeout_ns = 10ll * 1000 * 1000 * 1000;
  c->startup_timeout_ns = 10ll * 1000 * 1000 * 1000;
  c->respawn = 1;
  c->respawn_max = 5;
  c->respawn_window_ns = 10ll * 1000 * 1000 * 1000;
  c->cancel_grace_ns = 1000ll * 1000 * 1000;
  c->liveness_timeout_ns = 5000ll * 1000 * 1000;
}

void lw_worker_config_default_sized(lw_worker_config_t *c, uint32_t struct_size) {
  if (c == NULL) return;
  lw_worker_config_t d;
  worker_defaults(&d);
  lw__sized_config_fill(c, struct_size, &d, sizeof(d));
}

// The caller's struct, of whatever version, in this library's layout (NULL: the defaults).
static lw_status_t worker_config_read(const lw_worker_config_t *in, lw_worker_config_t *out,
                                      lw_error_t *err) {
  worker_defaults(out);
  if (in == NULL) return LW_OK;
  LW_RETURN_IF_ERROR(lw__sized_config_read("lw_worker_config_t", in, LW__WORKER_CONFIG_V1_BYTES,
                                           sizeof(*out), out, err));
  // The template is embedded: its size is fixed by the outer struct's layout.
  if (out->chip.struct_size != sizeof(lw_chip_config_t)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "lw_worker_config_t.chip: struct_size %u, want %zu (the chip template "
                         "is part of lw_worker_config_t; start from lw_worker_config_default())",
                         out->chip.struct_size, sizeof(lw_chip_config_t));
  }
  return LW_OK;
}

int lw_worker_event_fd(lw_worker_t *w) {
  if (!w) return -1;
  // The first call arms the fd; what finished before it makes it readable (worker_impl.h).
  if (!atomic_load_explicit(&w->user_fd_armed, memory_order_relaxed) &&
      !atomic_exchange(&w->user_fd_armed, true) && atomic_load(&w->user_fd_pending)) {
    lw__worker_write_user_fd(w);
  }
  return w->user_fd;
}

lw_status_t lw_worker_stats(lw_worker_t *w, lw_worker_stats_t *out) {
  if (!w || !out) return lw__fail(LW_INVALID_ARGUMENT, "worker_stats: worker and out must be set");
  LW_RETURN_IF_ERROR(lw__sized_struct_check(
      "worker_stats", out->struct_size,
      offsetof(lw_worker_stats_t, runs_started) + sizeof(out->runs_started),
      sizeof(lw_worker_stats_t)));
  lw_stats_sources_t src = {.n_chips = w->cfg.n_chips, .n_subs = w->cfg.n_subs,
                            .runs = &w->runs, .dag = &w->dag, .arena = &w->arena,
                            .calls = &w->calls, .eps = w->eps};
  lw_worker_stats_t s;
  lw__stats_snapshot(&src, &s);
  lw__sized_struct_copy(out, &s, sizeof(s));
  return LW_OK;
}

void *lw_worker_alloc(lw_worker_t *w, size_t bytes) {
  if (!w) {
    lw__fail(LW_INVALID_ARGUMENT, "worker_alloc: worker is NULL");
    return NULL;
  }
  void *p = lw__arena_alloc(&w->arena, bytes);
  if (!p) {
    lw__fail(LW_RESOURCE_EXHAUSTED,
             "worker_alloc: %zu bytes do not fit the shared arena (%llu bytes; raise "
             "lw_worker_config_t.arena_bytes)",
             bytes, (unsigned long long)w->arena.bytes);
  }
  return p;
}

void lw_worker_free(lw_worker_t *w, void *p) {
  if (w && p) (void)lw__arena_free(&w->arena, p);
}

void lw_worker_cancel_all(lw_worker_t *w) {
  if (!w) return;
  // Only atomics and write(2): async-signal-safe.
  atomic_fetch_add(&w->cancel_all_seq, 1);
  atomic_fetch_add(&w->sched.kick_seq, 1);
  uint64_t one = 1;
  ssize_t n = write(w->wake_fd, &one, sizeof(one));
  (void)n;
}

// ---------------------------------------------------------------------------------------------
// Code mapped at create time (lw_worker_register_sub checks function pointers against it).

// The DAG's hooks (parent/dag.h). The owner calls them holding the DAG owner's token (parent/
// sched.h): the scheduler and the assists for their passes, destroy at the end. Those that read
// the callables take the callables' lock for the rest of the pass (lw__sched_pass_hold_calls).
static void dag_unpin(void *ctx, uint32_t wc, uint64_t wc_id) {
  lw_worker_t *w = ctx;
  lw__sched_pass_hold_calls(&w->sched);
  if (w->calls.table[wc].id == wc_id) lw__wc_unpin(&w->calls, wc);
}

// The name stays valid until the pass gives the token back (the callables' lock goes with it).
static const char *dag_callable_name(void *ctx, uint32_t wc, uint64_t wc_id) {
  lw_worker_t *w = ctx;
  lw__sched_pass_hold_calls(&w->sched);
  return w->calls.table[wc].id == wc_id ? w->calls.table[wc].name : "a released callable";
}

// The DAG's doorbell (a post; never rung with the token or the callables' lock held): one owner's
// pass right here when none is under way (lw__sched_assist), so a submitter does not wait for the
// scheduler to get a CPU before its task is dispatched, nor wakes it for nothing.
static void dag_ring(void *ctx, int64_t now_ns) {
  // A pass run here applied the post: the scheduler need not be woken for it (a completion
  // wakes it, through the children's rings, if nobody drains them). A pass under way
  // elsewhere may have missed the post: the kick makes the scheduler look again.
  lw_worker_t *w = ctx;
  if (!lw__sched_assist(&w->sched, now_ns)) lw__worker_kick(w);
}

// A stop (cancel, failure): the scheduler is always woken, since the stop may start clocks
// (a cancel's grace before its escalation) that only the scheduler watches. The pass first,
// where no pass is under way: it writes the cancel words of the run's kernels in flight at
// once, before the kick's system call (and before the woken scheduler takes the token).
static void dag_stop(void *ctx) {
  lw_worker_t *w = ctx;
  (void)lw__sched_assist(&w->sched, 0);
  lw__worker_kick(w);
}

// The kick hook of the endpoints (a protocol violation found outside the scheduler: it owns
// the kill), the callables (an unregister became due: the scheduler posts it) and the
// supervisor (a child takes work again, or is gone).
static void kick_hook(void *ctx) { lw__worker_kick(ctx); }

// The supervisor's watch: a respawned child's pidfd joins (or leaves) the scheduler's epoll
// set, whose events name the child's slot.
static bool sup_watch(void *ctx, lw_endpoint_t *ep, bool on) {
  lw_worker_t *w = ctx;
  return lw__sched_watch(&w->sched, ep, on);
}

// The supervisor changes an endpoint's accepting flag under the DAG owner's token.
static void sup_pass_lock(void *ctx) { lw__sched_pass_lock(&((lw_worker_t *)ctx)->sched); }
static void sup_pass_unlock(void *ctx) { lw__sched_pass_unlock(&((lw_worker_t *)ctx)->sched); }

// Child slot s's trace area.
static lw_trace_area_t *worker_trace_area(lw_worker_t *w, uint32_t s) {
  return (lw_trace_area_t *)(w->traces + LW_TRACE_AREA_BYTES * s);
}

// Whether a chip other than chip is up and holds no task (the DAG's owner asks, in its pass).
static bool dag_other_chip_free(void *ctx, int32_t chip) {
  lw_worker_t *w = ctx;
  return lw__sched_other_chip_free(&w->sched, chip);
}

// The runs' hooks (parent/runs.h): the live count destroy waits on, and the scheduler's drain.
static void runs_live(void *ctx, int delta) {
  lw_worker_t *w = ctx;
  pthread_mutex_lock(&w->idle_mu);
  w->live_runs += (uint32_t)delta;
  // Whoever finishes a run broadcasts idle_cv under idle_mu, so no wake-up is lost.
  if (delta < 0) pthread_cond_broadcast(&w->idle_cv);
  pthread_mutex_unlock(&w->idle_mu);
}

static bool runs_before_wait(void *ctx, lw_handle_t *h, int64_t deadline_ns, int64_t budget_ns) {
  return lw__sched_wait_draining(&((lw_worker_t *)ctx)->sched, h, deadline_ns, budget_ns);
}
static void runs_drainer_enter(void *ctx) { lw__sched_drainer_enter(&((lw_worker_t *)ctx)->sched); }
static void runs_drainer_leave(void *ctx) { lw__sched_drainer_leave(&((lw_worker_t *)ctx)->sched); }
static bool runs_drain_until(void *ctx, bool (*done)(void *done_ctx), void *done_ctx) {
  return lw__sched_drain_until(&((lw_worker_t *)ctx)->sched, done, done_ctx);
}

// ---------------------------------------------------------------------------------------------
// Runs (the work is parent/runs.c's)

lw_status_t lw_worker_run_async(lw_worker_t *w, lw_orch_fn fn, void *user, lw_handle_t **out) {
  if (out) *out = NULL;
  if (!out) return lw__fail(LW_INVALID_ARGUMENT, "worker_run_async: out must be set");
  lw_error_t err;
  if (lw__runs_start(w ? &w->runs : NULL, fn, user, false, out, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  return LW_OK;
}

lw_status_t lw_worker_run(lw_worker_t *w, lw_orch_fn fn, void *user, lw_run_report_t *out) {
  lw_handle_t *h = NULL;
  lw_error_t err;
  if (lw__runs_start(w ? &w->runs : NULL, fn, user, true, &h, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);  // leaves a failure in lw_last_error
  if (out) *out = ((const lw_run_t *)h)->report;
  lw_handle_release(h);
  return st;
}

// ---------------------------------------------------------------------------------------------
// Callables (the work is parent/callables.c's)

lw_status_t lw_worker_register_async(lw_worker_t *w, const lw_callable_t *c, lw_handle_t **out) {
  if (out) *out = NULL;
  if (!w || !c || !out) {
    return lw__fail(LW_INVALID_ARGUMENT, "worker_register: worker, callable and out must be set");
  }
  lw_error_t err;
  if (lw__callables_register_async(&w->calls, c, out, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  return LW_OK;
}

lw_status_t lw_worker_register(lw_worker_t *w, const lw_callable_t *c, lw_callable_handle_t *out) {
  if (!out) return lw__fail(LW_INVALID_ARGUMENT, "worker_register: out must be set");
  out->id = 0;
  lw_handle_t *h = NULL;
  LW_RETURN_IF_ERROR(lw_worker_register_async(w, c, &h));
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
  if (st == LW_OK) *out = h->callable;
  lw_handle_release(h);
  return st;
}

lw_status_t lw_worker_unregister_async(lw_worker_t *w, lw_callable_handle_t h, lw_handle_t **out) {
  if (out) *out = NULL;
  if (!w || !out) {
    return lw__fail(LW_INVALID_ARGUMENT, "worker_unregister: worker and out must be set");
  }
  lw_error_t err;
  if (lw__callables_unregister_async(&w->calls, h, false, out, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  return LW_OK;
}

lw_status_t lw_worker_unregister(lw_worker_t *w, lw_callable_handle_t h) {
  if (!w) return lw__fail(LW_INVALID_ARGUMENT, "worker_unregister: worker is NULL");
  lw_handle_t *op = NULL;
  lw_error_t err;
  if (lw__callables_unregister_async(&w->calls, h, true, &op, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  lw_status_t st = lw_handle_wait(op, LW_WAIT_FOREVER);  // leaves a failure in lw_last_error
  lw_handle_release(op);
  return st;
}

lw_status_t lw_worker_register_sub(lw_worker_t *w, lw_sub_fn fn, const char *name,
                                   lw_callable_handle_t *out) {
  if (out) out->id = 0;
  if (!w || !fn || !out) {
    return lw__fail(LW_INVALID_ARGUMENT, "worker_register_sub: worker, fn and out must be set");
  }
  if (w->cfg.n_subs == 0) {
    return lw__fail(LW_FAILED_PRECONDITION,
                    "worker_register_sub %s: the worker has no sub children "
                    "(lw_worker_config_t.n_subs is 0): the function would have nowhere to run",
                    name ? name : "(unnamed)");
  }
  lw_error_t err;
  if (lw__callables_register_sub(&w->calls, fn, name, out, &err) != LW_OK) {
    return lw__last_error_store(&err);
  }
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// Create / destroy

static lw_status_t validate_config(const lw_worker_config_t *c, lw_error_t *err) {
  if (c->n_chips < 1 || c->n_chips > LW_MAX_CHIPS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "worker: n_chips %u is outside 1..%d",
                         c->n_chips, LW_MAX_CHIPS);
  }
  if (c->reserved != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "worker: reserved is %u, must be 0", c->reserved);
  }
  if (c->n_devices > LW_MAX_CHIPS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "worker: n_devices %u is more than %d (0: one device per chip)",
                         c->n_devices, LW_MAX_CHIPS);
  }
  if (c->n_subs > LW_MAX_SUBS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "worker: n_subs %u is more than %d",
                         c->n_subs, LW_MAX_SUBS);
  }
  if (c->cancel_grace_ns < 0 || c->liveness_timeout_ns < 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "worker: cancel_grace_ns %lld and liveness_timeout_ns %lld must be >= 0",
                         (long long)c->cancel_grace_ns, (long long)c->liveness_timeout_ns);
  }
  if (c->task_ring < 2 || c->task_ring > (1u << 20)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "worker: task_ring %u is outside 2..%u",
                         c->task_ring, 1u << 20);
  }
  if (strnlen(c->chip.backend, LW_BACKEND_NAME_BYTES) == LW_BACKEND_NAME_BYTES ||
      !lw__backend_find(c->chip.backend)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "worker: unknown backend '%.*s' (known: %s)", LW_BACKEND_NAME_BYTES,
                         c->chip.backend, lw__backend_names());
  }
  return LW_OK;
}

// A memfd of bytes (its fd in *fd_out, -1 if none) mapped as a fork-server share at *out;
// RESOURCE_EXHAUSTED naming what otherwise (the caller's cleanup closes the fd).
static lw_status_t share_new(const char *memfd_name, const char *what, size_t bytes,
                             int *fd_out, void **out, lw_error_t *err) {
  char why[LW_ERROR_MESSAGE_BYTES];
  *fd_out = lw__forkserver_fd_above_stdio(memfd_create(memfd_name, MFD_CLOEXEC));
  if (*fd_out < 0) {
    // -1 with errno from memfd_create, or -errno from moving the fd above stdio.
    int e = *fd_out < -1 ? -*fd_out : errno;
    *fd_out = -1;
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_create: %s",
                         lw__arena_describe_failure(why, sizeof(why), "create", what, bytes, e));
  }
  if (ftruncate(*fd_out, (off_t)bytes) != 0) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_create: %s",
                         lw__arena_describe_failure(why, sizeof(why), "size", what, bytes, errno));
  }
  *out = lw__forkserver_share_map(*fd_out, bytes);
  if (!*out) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "worker_create: %s",
                         lw__arena_describe_failure(why, sizeof(why), "map", what, bytes, errno));
  }
  return LW_OK;
}

lw_status_t lw_init(void) {
  int n_threads = 0;
  char detail[128];
  switch (lw__fs_zygote_ensure(&n_threads, detail, sizeof(detail))) {
    case LW_ZYGOTE_READY:
      return LW_OK;
    case LW_ZYGOTE_THREADED:
      return lw__fail(LW_FAILED_PRECONDITION,
                      "lw_init: the process has %d threads and no zygote yet; the zygote is a "
                      "copy of the program made while it has one thread: call lw_init in main "
                      "before the program starts threads (docs/processes.md)",
                      n_threads);
    default:
      return lw__fail(LW_UNAVAILABLE, "lw_init: cannot start the zygote: %s", detail);
  }
}

lw_status_t lw_worker_create(const lw_worker_config_t *cfg, lw_worker_t **out) {
  if (!out) return lw__fail(LW_INVALID_ARGUMENT, "worker_create: out must be set");
  *out = NULL;
  lw_worker_config_t resolved;
  lw_error_t err;
  if (worker_config_read(cfg, &resolved, &err) != LW_OK) return lw__last_error_store(&err);
  cfg = &resolved;
  if (validate_config(cfg, &err) != LW_OK) return lw__last_error_store(&err);
  // Before any mapping of this worker exists: a zygote made now (this process had none, and
  // has one thread) must not hold copies of the arena or the mailboxes, which its servers map
  // at the same addresses. A threaded process without one still gets chip children (from the
  // helper); sub children then need lw_init (lw__forkserver_start_spec says so).
  (void)lw__fs_zygote_ensure(NULL, NULL, 0);
  // LW_TRACE=path starts a session now (after the zygote, which must not copy its thread).
  lw__trace_from_env();
  // The spin budget from a measured wake (once per process; after the zygote, for the same
  // reason: it starts a thread). The chip children get it through their mailboxes.
  (void)lw__spin_calibrate();
  lw_worker_t *w = calloc(1, sizeof(*w));
  if (!w) return lw__fail(LW_RESOURCE_EXHAUSTED, "worker_create: out of memory");
  w->cfg = *cfg;
  w->n_children = cfg->n_chips + cfg->n_subs;
  w->wake_fd = w->user_fd = w->mailboxes_fd = w->traces_fd = -1;
  pthread_mutex_init(&w->idle_mu, NULL);
  // Monotonic condvars: their deadlines come from lw__now_ns, and a wall-clock step must not
  // stretch or cut a wait.
  lw__cond_init_monotonic(&w->idle_cv);
  lw_status_t st;
  int64_t deadline = lw__deadline_after(cfg->startup_timeout_ns);
  // The components, each initialized here and deinitialized by destroy in the reverse order
  // (each deinitialize accepts a component that was never initialized). The scheduler's calls
  // reach runs.c through hooks, so that runs.c does not call into the scheduler, which calls
  // back into runs.c.
  lw_runs_links_t runs_links = {.dag = &w->dag,
                                .calls = &w->calls,
                                .mb_arena = &w->mb_arena,
                                .n_chips = cfg->n_chips,
                                .n_subs = cfg->n_subs,
                                .task_ring = cfg->task_ring,
                                .stopping = &w->stopping,
                                .live = runs_live,
                                .notify = lw__worker_notify_user,
                                .before_wait = runs_before_wait,
                                .drainer_enter = runs_drainer_enter,
                                .drainer_leave = runs_drainer_leave,
                                .drain_until = runs_drain_until,
                                .ctx = w};
  lw__runs_initialize(&w->runs, &runs_links);

  // 1. Shared memory, mapped before the fork server so every child has it at this address.
  if ((st = lw__arena_initialize(&w->arena, cfg->arena_bytes, &err)) != LW_OK) goto fail_err;
  w->mb_arena = (lw_mb_arena_t){w->arena.base, w->arena.bytes};
  // Each mailbox starts on its own page so a child can bind its pages to its NUMA node.
  w->mailboxes_bytes = LW_MAILBOX_STRIDE * w->n_children;
  void *share = NULL;
  if ((st = share_new("lw-mailboxes", "the mailboxes", w->mailboxes_bytes, &w->mailboxes_fd,
                      &share, &err)) != LW_OK) {
    goto fail_err;
  }
  w->mailboxes = share;
  // Trace areas: ~5 MiB per child of address space; pages are only touched while a session
  // records (MAP_NORESERVE, a sparse memfd).
  w->traces_bytes = LW_TRACE_AREA_BYTES * w->n_children;
  if ((st = share_new("lw-trace", "the trace areas", w->traces_bytes, &w->traces_fd, &share,
                      &err)) != LW_OK) {
    goto fail_err;
  }
  w->traces = share;
  w->wake_fd = lw__forkserver_fd_above_stdio(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (w->wake_fd < 0) {
    st = lw__fail(LW_RESOURCE_EXHAUSTED, "worker_create: eventfd failed");
    goto fail;
  }

  // 2. What each child needs, in memory the fork server copies.
  w->envs = calloc(w->n_children, sizeof(lw_child_env_t));
  w->eps = calloc(w->n_children, sizeof(lw_endpoint_t));
  if (!w->envs || !w->eps) {
    st = lw__fail(LW_RESOURCE_EXHAUSTED, "worker_create: out of memory");
    goto fail;
  }
  // The heartbeat period asked of every child (their mailboxes'), which the scheduler and the
  // supervisor also go by.
  const int64_t heartbeat_ns = lw__heartbeat_period_ns(w);
  lw_callables_links_t calls_links = {.idle_mu = &w->idle_mu,
                                      .idle_cv = &w->idle_cv,
                                      .eps = w->eps,
                                      .n_chips = cfg->n_chips,
                                      .n_subs = cfg->n_subs,
                                      .arena = &w->arena,
                                      .stopping = &w->stopping,
                                      .kick = kick_hook,
                                      .notify = lw__worker_notify_user,
                                      .ctx = w};
  if ((st = lw__callables_initialize(&w->calls, &calls_links, &err)) != LW_OK) goto fail_err;
  lw_sched_links_t sched_links = {.dag = &w->dag,
                                  .calls = &w->calls,
                                  .runs = &w->runs,
                                  .sup = &w->sup,
                                  .eps = w->eps,
                                  .n_chips = cfg->n_chips,
                                  .n_subs = cfg->n_subs,
                                  .cancel_grace_ns = cfg->cancel_grace_ns,
                                  .liveness_timeout_ns = cfg->liveness_timeout_ns,
                                  .heartbeat_period_ns = heartbeat_ns,
                                  .respawn = cfg->respawn,
                                  .wake_fd = w->wake_fd,
                                  .cancel_all_seq = &w->cancel_all_seq};
  if ((st = lw__sched_initialize(&w->sched, &sched_links, &err)) != LW_OK) goto fail_err;
  // The DAG after the scheduler: whoever owns it (a pass, destroy's dag_own) holds the
  // scheduler's token, and its hooks take the callables' lock through it.
  lw_dag_hooks_t hooks = {.ctx = w, .unpin = dag_unpin, .callable_name = dag_callable_name,
                          .ring = dag_ring, .stop = dag_stop, .task_done = lw__stats_task_done,
                          .other_chip_free = dag_other_chip_free};
  if ((st = lw__dag_initialize(&w->dag, cfg->task_ring, cfg->n_chips, cfg->submit_timeout_ns,
                               &hooks, NULL, &err)) != LW_OK) {
    goto fail_err;
  }
  w->dag_ready = true;
  lw_supervisor_links_t sup_links = {.calls = &w->calls,
                                     .eps = w->eps,
                                     .n_children = w->n_children,
                                     .arena = &w->arena,
                                     .respawn = cfg->respawn,
                                     .respawn_max = cfg->respawn_max,
                                     .respawn_window_ns = cfg->respawn_window_ns,
                                     .startup_timeout_ns = cfg->startup_timeout_ns,
                                     .heartbeat_period_ns = heartbeat_ns,
                                     .stopping = &w->stopping,
                                     .kick = kick_hook,
                                     .watch = sup_watch,
                                     .pass_lock = sup_pass_lock,
                                     .pass_unlock = sup_pass_unlock,
                                     .ctx = w};
  if ((st = lw__supervisor_initialize(&w->sup, &sup_links, &err)) != LW_OK) goto fail_err;
  for (uint32_t s = 0; s < w->n_children; ++s) {
    bool chip = s < cfg->n_chips;
    lw_mailbox_t *mb = lw__worker_mailbox(w, s);
    uint32_t index = chip ? s : s - cfg->n_chips;
    lw__mailbox_initialize(mb, chip ? LW_MB_CHILD_CHIP : LW_MB_CHILD_SUB, index, w->arena.bytes);
    mb->header.heartbeat_period_ns = (uint64_t)heartbeat_ns;
    mb->header.spin_budget_ns = (uint64_t)lw__spin_budget_ns();
    lw_child_env_t *env = &w->envs[s];
    env->mailbox = mb;
    env->mailboxes = lw__worker_mailbox(w, 0);
    env->arena = w->mb_arena;
    env->chip = cfg->chip;
    env->chip.device_id = cfg->chip.device_id + (int32_t)index;
    // Where the chip runs: its own device, or one of n_devices it shares with other chips.
    env->device = cfg->chip.device_id +
                  (int32_t)(cfg->n_devices > 0 ? index % cfg->n_devices : index);
    // The fork servers pass w->wake_fd as their first fd (see below).
    env->wake_fd = LW_FS_CHILD_FD0;
    env->n_children = w->n_children;
    env->parent_pid = getpid();
    lw_trace_area_t *trace = worker_trace_area(w, s);
    lw__trace_area_initialize(trace);
    env->trace = trace;
    char pname[LW_TRACE_NAME_BYTES];
    if (chip) {
      snprintf(pname, sizeof(pname), "chip %u (%.*s)", index, (int)sizeof(cfg->chip.backend),
               cfg->chip.backend);
    } else {
      snprintf(pname, sizeof(pname), "sub %u", index);
    }
    lw__trace_area_attach(trace, pname);
    w->n_traces_attached = s + 1;
  }

  // 3. The fork servers (DESIGN 5.1, docs/processes.md): chip children from the exec'd helper
  //    (none of the program's memory; works from any thread), sub children from the zygote
  //    (the program after its constructors). Each gets explicitly what its children need: its
  //    part of the envs (copied), the arena, the mailboxes and the trace areas (memfds) and
  //    the wake eventfd (the children's fd LW_FS_CHILD_FD0).
  lw_fs_share_t shares[3] = {
      {.fd = w->arena.fd, .addr = w->arena.base, .bytes = w->arena.bytes},
      {.fd = w->mailboxes_fd, .addr = w->mailboxes, .bytes = w->mailboxes_bytes},
      {.fd = w->traces_fd, .addr = w->traces, .bytes = w->traces_bytes},
  };
  lw_fs_spec_t spec = {.origin = LW_FS_FROM_HELPER,
                       .arg = w->envs,
                       .arg_bytes = cfg->n_chips * sizeof(lw_child_env_t),
                       .shares = shares,
                       .n_shares = 3,
                       .fds = &w->wake_fd,
                       .n_fds = 1,
                       .n_slots = cfg->n_chips};
  if ((st = lw__forkserver_start_spec(&spec, &w->fs, &err)) != LW_OK) goto fail_err;
  if (cfg->n_subs > 0) {
    spec.origin = LW_FS_FROM_ZYGOTE;
    spec.main_fn = lw__worker_child_entry;
    spec.arg = w->envs + cfg->n_chips;
    spec.arg_bytes = cfg->n_subs * sizeof(lw_child_env_t);
    spec.n_slots = cfg->n_subs;
    if ((st = lw__forkserver_start_spec(&spec, &w->fs_subs, &err)) != LW_OK) goto fail_err;
  }
  // The endpoints, once their fork servers exist.
  for (uint32_t s = 0; s < w->n_children; ++s) {
    bool chip = s < cfg->n_chips;
    lw_ep_config_t ep_cfg = {.slot = s,
                             .kind = chip ? LW_MB_CHILD_CHIP : LW_MB_CHILD_SUB,
                             .index = chip ? s : s - cfg->n_chips,
                             .mb = lw__worker_mailbox(w, s),
                             .trace = worker_trace_area(w, s),
                             .fs = chip ? w->fs : w->fs_subs,
                             .liveness_timeout_ns = cfg->liveness_timeout_ns,
                             .kick = kick_hook,
                             .kick_ctx = w};
    lw__ep_initialize(&w->eps[s], &ep_cfg);
  }
  for (uint32_t s = 0; s < w->n_children; ++s) {
    if ((st = lw__ep_spawn(&w->eps[s], deadline, &err)) != LW_OK) goto fail_err;
  }
  for (uint32_t s = 0; s < w->n_children; ++s) {
    if ((st = lw__ep_wait_ready(&w->eps[s], deadline, &err)) != LW_OK) goto fail_err;
    w->eps[s].sub_synced_gen = w->eps[s].generation;  // a new child: its table is empty, too
    w->eps[s].accepting = true;
  }

  // 4. Threads and the user's event fd (created after the fork so children do not hold it).
  w->user_fd = lw__forkserver_fd_above_stdio(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (w->user_fd < 0) {
    st = lw__fail(LW_RESOURCE_EXHAUSTED, "worker_create: eventfd failed");
    goto fail;
  }
  if ((st = lw__supervisor_start(&w->sup, &err)) != LW_OK) goto fail_err;
  if ((st = lw__sched_start(&w->sched, w->fs, w->fs_subs, &err)) != LW_OK) goto fail_err;
  if ((st = lw__orch_start(&w->runs, &err)) != LW_OK) goto fail_err;
  *out = w;
  return LW_OK;

fail_err:
  lw__last_error_store(&err);
fail:
  lw_worker_destroy(w);
  return st;
}

uint32_t lw_worker_process_ids(const lw_worker_t *w, int32_t *out, uint32_t cap) {
  if (w == NULL) return 0;
  uint32_t count = w->n_children + 3;
  for (uint32_t i = 0; out != NULL && i < count && i < cap; ++i) {
    pid_t pid = 0;
    if (i < w->n_children) {
      pid = atomic_load(&w->eps[i].pid);
    } else if (i == w->n_children) {
      pid = lw__forkserver_pid(w->fs);
    } else if (i == w->n_children + 1) {
      pid = lw__forkserver_pid(w->fs_subs);
    } else {
      pid = lw__forkserver_zygote_pid();
    }
    out[i] = (int32_t)pid;
  }
  return count;
}

// Waits (bounded) until no run and no callable op is in flight.
static bool wait_idle(lw_worker_t *w, int64_t timeout_ns) {
  int64_t deadline = lw__now_ns() + timeout_ns;
  pthread_mutex_lock(&w->idle_mu);
  // Whoever finishes a run or an op broadcasts idle_cv under idle_mu (an op after it stored the
  // count), so no wake-up is lost.
  while ((w->live_runs > 0 || atomic_load(&w->calls.live_ops) > 0) && w->sched.thread.started) {
    if (lw__cond_wait_until(&w->idle_cv, &w->idle_mu, deadline) == ETIMEDOUT) break;
  }
  bool idle = w->live_runs == 0 && atomic_load(&w->calls.live_ops) == 0;
  pthread_mutex_unlock(&w->idle_mu);
  return idle;
}

// Finishes every run still unfinished once no thread of the worker is left: a task whose
// child's death was never seen, a task queued for a child being respawned when the
// supervisor stopped, a run queued after the orchestrator left. Every handle the user still
// holds then answers a wait at once. Normally there is none: this is the backstop that makes
// "destroy finishes every handle" hold whatever went wrong before.
static void describe_leftover(void *ctx, const lw_task_t *t, lw_error_t *err) {
  lw_worker_t *w = ctx;
  char name[32] = "";
  bool posted = t->state == LW_TS_RUNNING && t->ep;
  if (posted) lw__ep_name(t->ep, name, sizeof(name));
  lw__error_set(err, LW_UNAVAILABLE, posted ? (int32_t)t->ep->index : -1, t->task_id,
                "worker destroyed before task %llu of run %llu (%s) finished%s%s",
                (unsigned long long)t->task_id, (unsigned long long)t->run->run_id,
                w->calls.table[t->wc].name, posted ? " on " : "", name);
}

// Destroy as the DAG's owner, once the scheduler stopped: it holds the token as a pass does,
// and the callables' lock for the DAG's hooks and describe_leftover. A worker whose scheduler
// was never initialized ran no thread: nothing to exclude.
static void dag_own(lw_worker_t *w) {
  lw__dag_set_owner(&w->dag, 0);
  if (!w->sched.initialized) return;
  lw__sched_pass_lock(&w->sched);
  lw__sched_pass_hold_calls(&w->sched);
}

static void dag_disown(lw_worker_t *w) {
  if (w->sched.initialized) lw__sched_pass_unlock(&w->sched);
}

static void finish_leftover_runs(lw_worker_t *w) {
  lw_run_t *finished = NULL;
  if (w->dag_ready) {
    dag_own(w);
    lw__dag_finish_all(&w->dag, LW_UNAVAILABLE, describe_leftover, w, &finished);
    dag_disown(w);
  }
  while (finished) {
    lw_run_t *next = finished->next;
    lw__run_complete(finished);
    finished = next;
  }
  pthread_mutex_lock(&w->runs.mu);
  lw_run_t *queued = w->runs.q_head;
  w->runs.q_head = w->runs.q_tail = NULL;
  atomic_store(&w->runs.n_queued, 0);
  pthread_mutex_unlock(&w->runs.mu);
  while (queued) {
    lw_run_t *next = queued->next;
    queued->orch_done = true;
    queued->failed = true;
    lw__error_set(&queued->error, LW_UNAVAILABLE, -1, 0,
                  "run %llu: worker destroyed before it started",
                  (unsigned long long)queued->run_id);
    lw__run_complete(queued);
    queued = next;
  }
}

// Destroy's waits follow the worker's cancel grace: the scheduler escalates a kernel that
// ignores its cancel word once the grace has passed, so destroy lets that happen and waits only
// a margin more at each step (the kill, the death notice, the children leaving on the shutdown
// word are a few milliseconds each).
#define DESTROY_MARGIN_NS (250ll * 1000 * 1000)
// After destroy SIGKILLs the children, the scheduler fails what they held as soon as it sees
// the deaths; this only bounds that wait in case it does not.
#define DESTROY_REAP_NS (2ll * 1000 * 1000 * 1000)

void lw_worker_destroy(lw_worker_t *w) {
  if (!w) return;
  atomic_store(&w->stopping, true);
  // 1. Cancel: queued runs never start, running kernels see their cancel words.
  if (w->sched.thread.started) lw_worker_cancel_all(w);
  lw__orch_stop(&w->runs);
  // 2. Let cancelled work and callable ops drain while the scheduler still runs: cooperative
  //    kernels stop at once, and the scheduler kills the child of one that ignores its cancel
  //    word after cancel_grace_ns (its run finishes CANCELLED, "ignored cancellation").
  int64_t grace = w->cfg.cancel_grace_ns > 0 ? w->cfg.cancel_grace_ns : 0;
  if (grace > INT64_MAX / 4) grace = INT64_MAX / 4;  // decades: a deadline that cannot overflow
  (void)wait_idle(w, grace + DESTROY_MARGIN_NS);
  // 3. Children leave on the sticky shutdown word; one that does not (a kernel ignoring its
  //    cancel word) is killed. The scheduler, still running, sees each death on its pidfd and
  //    fails whatever that child still held.
  //    Under the post lock, which a respawn holds while it resets the mailbox (and which then
  //    sets the word again itself, having seen w->stopping): the word is never lost to a reset.
  for (uint32_t s = 0; w->mailboxes && s < w->n_children; ++s) {
    bool locked = w->eps && w->eps[s].mb && pthread_mutex_lock(&w->eps[s].post_mu) == 0;
    atomic_store(&lw__worker_mailbox(w, s)->header.shutdown, 1);
    lw__waitword_wake(&lw__worker_mailbox(w, s)->doorbell.word, true);
    lw__waitword_wake(&lw__worker_mailbox(w, s)->doorbell.loop_word, true);
    if (locked) pthread_mutex_unlock(&w->eps[s].post_mu);
  }
  if (!wait_idle(w, DESTROY_MARGIN_NS)) {
    for (uint32_t s = 0; w->eps && s < w->n_children; ++s) {
      pid_t pid = atomic_load(&w->eps[s].pid);
      if (atomic_load(&w->eps[s].state) != LW_EP_DEAD && pid > 0) lw__ep_kill(&w->eps[s]);
    }
    (void)wait_idle(w, DESTROY_REAP_NS);
  }
  lw__sched_stop(&w->sched);
  // After the scheduler: nothing reports deaths any more. A respawn under way sees stopping.
  lw__supervisor_stop(&w->sup);
  // 4. No thread of this worker is left: whatever run is still unfinished is finished now.
  finish_leftover_runs(w);
  // Every run's handle is finished: a thread that still drains for one (lw_handle_wait) leaves
  // at its next look at the handle, once the pass or flush it is in returns, and none can start
  // again (the runs' wait gates are closed).
  lw__runs_wait_no_waiters(&w->runs);
  lw__forkserver_stop(w->fs);
  lw__forkserver_stop(w->fs_subs);
  for (uint32_t s = 0; w->eps && s < w->n_children; ++s) lw__ep_deinitialize(&w->eps[s]);
  // The DAG first: its last pins go back while the deferred unregisters they hold are still
  // live ops (finish_all emptied the inbox; this only frees).
  if (w->dag_ready) {
    dag_own(w);
    lw__dag_deinitialize(&w->dag);
    dag_disown(w);
    w->dag_ready = false;
  }
  lw__sched_deinitialize(&w->sched);
  // Anything still waiting (a child died mid-register, a hung kernel) is failed now.
  lw_error_t err;
  lw__error_set(&err, LW_UNAVAILABLE, -1, 0, "worker destroyed before the operation finished");
  lw__callables_fail_ops(&w->calls, &err);
  // (A deferred unregister is on w->calls.ops too, so the loop above finished it.)
  lw__callables_deinitialize(&w->calls);
  // The children are gone: what their areas still hold joins the session, then they go.
  for (uint32_t s = 0; s < w->n_traces_attached; ++s) {
    lw__trace_area_detach(worker_trace_area(w, s));
  }
  free(w->eps);
  free(w->envs);
  if (w->traces) lw__forkserver_share_unmap(w->traces, w->traces_bytes);
  if (w->traces_fd >= 0) close(w->traces_fd);
  if (w->mailboxes) lw__forkserver_share_unmap(w->mailboxes, w->mailboxes_bytes);
  if (w->mailboxes_fd >= 0) close(w->mailboxes_fd);
  if (w->wake_fd >= 0) close(w->wake_fd);
  if (w->user_fd >= 0) close(w->user_fd);
  lw__arena_deinitialize(&w->arena);
  lw__supervisor_deinitialize(&w->sup);
  lw__runs_deinitialize(&w->runs);
  pthread_mutex_destroy(&w->idle_mu);
  pthread_cond_destroy(&w->idle_cv);
  free(w);
}
