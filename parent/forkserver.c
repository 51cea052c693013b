// parent/forkserver.c — the program's side of the fork servers (forkserver.h): starting one
// (directly for tests, from the exec'd helper, from the zygote), spawn, kill, the exits and
// stop. The server processes are in fs_server.c.
#include "parent/forkserver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "lanes/error.h"
#include "lanes/log.h"
#include "lanes/sys.h"
#include "parent/fs_afterfork.h"
#include "parent/fs_helper.h"
#include "parent/fs_server.h"
#include "parent/fs_wire.h"
#include "parent/fs_zygote.h"

enum {
  kStartTimeoutNs = 5000000000,  // a start waits this long for READY
  kStopTimeoutNs = 5000000000,   // lw__forkserver_stop waits this long before SIGKILL
};

struct lw_forkserver {
  pthread_mutex_t mu;  // serializes control requests (spawn, kill, stop)
  int ctl;             // parent end of the control socket
  int ev;              // parent end of the event socket (lw__forkserver_fd)
  int server_pidfd;    // -1 without pidfds
  pid_t server_pid;
  bool direct;         // forked by lw__forkserver_start: the server is this process's child
  bool ctl_closed;     // EOF or an error seen on the control socket
  bool server_gone;    // its exit was seen (and, when direct, reaped)
  lw_fs_origin_t origin;
  uint32_t n_slots;
  uint32_t next_req;
  lw_fs_child_status_t *table;  // MAP_SHARED with the server and its children
  size_t table_bytes;
  // Without pidfds: the death eventfd of each slot's child (a dup of what spawn returned,
  // signalled by poll_exit when its EXIT arrives) and the pid it stands for.
  // death_mu orders a spawn's replacement of a slot's eventfd with poll_exit's write to it.
  pthread_mutex_t death_mu;
  int death_fd[LW_FS_MAX_CHILDREN];
  _Atomic int32_t death_pid[LW_FS_MAX_CHILDREN];
};

// --------------------------------------------------------------------------------------------
// Shared table. The server is the only writer; every store is release and every load in the
// parent acquire. Server order: spawn stores pid, then spawn_seq; an exit stores wait_status,
// then exit_seq.

typedef struct slot_view {
  uint32_t exit_seq;
  int32_t wait_status;
  int32_t pid;
  uint32_t spawn_seq;
} slot_view_t;

// Reads in the order exit_seq, wait_status, pid, spawn_seq. With the server's store order this
// makes "pid == P && spawn_seq == exit_seq" prove that wait_status is the exit of P: had a later
// spawn and exit of the slot overwritten wait_status, the acquire load of it would make the new
// pid and spawn_seq visible to the two loads after it, and the check would fail.
static slot_view_t slot_read(const lw_fs_child_status_t *e) {
  slot_view_t v;
  v.exit_seq = atomic_load_explicit(&e->exit_seq, memory_order_acquire);
  v.wait_status = atomic_load_explicit(&e->wait_status, memory_order_acquire);
  v.pid = atomic_load_explicit(&e->pid, memory_order_acquire);
  v.spawn_seq = atomic_load_explicit(&e->spawn_seq, memory_order_acquire);
  return v;
}

// --------------------------------------------------------------------------------------------
// Parent side.

static const char *setup_step_name(uint32_t step) {
  switch (step) {
    case LW_FS_STEP_PIDFD:
      return "pidfd_open(parent)";
    case LW_FS_STEP_SIGNALFD:
      return "signalfd(SIGCHLD)";
    case LW_FS_STEP_TABLE:
      return "mapping the status table";
    case LW_FS_STEP_ARG:
      return "mapping the children's arguments";
    case LW_FS_STEP_REQUEST:
      return "reading the start request (a helper of another lanework version?)";
    case LW_FS_STEP_FORK:
      return "forking the server from the helper";
    default:
      return "setup";
  }
}

// Waits (bounded) until the server has exited; kills it after the deadline. A direct server
// is this process's child and is reaped; any other is re-parented away and reaped by its new
// parent (init, a subreaper, or the zygote).
static void reap_server(lw_forkserver_t *fs, int64_t deadline_ns) {
  if (fs->server_pid <= 0 || fs->server_gone) return;
  if (fs->direct) {
    if (fs->server_pidfd < 0 ||
        lw__fs_wait_readable(fs->server_pidfd, deadline_ns) != 1) {
      kill(fs->server_pid, SIGKILL);  // our unreaped child: the pid is still its own
    }
    while (waitpid(fs->server_pid, NULL, 0) < 0 && errno == EINTR) {
    }
  } else if (fs->server_pidfd >= 0) {
    if (lw__fs_wait_readable(fs->server_pidfd, deadline_ns) != 1) {
      (void)lw__sys_pidfd_send_signal(fs->server_pidfd, SIGKILL);
    }
  } else {
    // Without a pidfd: the server exits right after it closes its sockets; its control
    // socket's EOF is the sign (it tears down when ours closes, in destroy, anyway).
    struct pollfd p = {.fd = fs->ctl, .events = POLLIN};
    int64_t left = (deadline_ns - lw__now_ns()) / 1000000;
    while (fs->ctl >= 0 && left > 0 && poll(&p, 1, (int)left) > 0) {
      char buf[sizeof(lw_fs_msg_t)];
      if (recv(fs->ctl, buf, sizeof(buf), MSG_DONTWAIT) == 0) break;
      left = (deadline_ns - lw__now_ns()) / 1000000;
    }
  }
  fs->server_gone = true;
}

static void destroy(lw_forkserver_t *fs) {
  reap_server(fs, lw__now_ns() + kStopTimeoutNs);
  if (fs->ctl >= 0) close(fs->ctl);
  if (fs->ev >= 0) close(fs->ev);
  if (fs->server_pidfd >= 0) close(fs->server_pidfd);
  if (fs->table != NULL) munmap(fs->table, fs->table_bytes);
  for (uint32_t i = 0; i < LW_FS_MAX_CHILDREN; ++i) {
    if (fs->death_fd[i] >= 0) close(fs->death_fd[i]);
  }
  pthread_mutex_destroy(&fs->mu);
  pthread_mutex_destroy(&fs->death_mu);
  free(fs);
}

// "fork server (pid N) was killed by SIGKILL" or similar, for UNAVAILABLE messages. Only a
// direct server's status can be known (it is this process's child).
static void describe_server_gone(lw_forkserver_t *fs, char *buf, size_t bytes) {
  siginfo_t si;
  memset(&si, 0, sizeof(si));
  if (fs->direct && !fs->server_gone) {
    if (fs->server_pidfd >= 0) (void)lw__fs_wait_readable(fs->server_pidfd, lw__now_ns() + 100000000);
    // WNOWAIT: leave the zombie for lw__forkserver_stop to reap.
    if (waitid(P_PID, (id_t)fs->server_pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) si.si_pid = 0;
  }
  if (si.si_pid != 0) {
    char how[64];
    lw__forkserver_describe_status(lw__fs_status_from_siginfo(&si), how, sizeof(how));
    snprintf(buf, bytes, "fork server (pid %d) is gone: %s", (int)fs->server_pid, how);
  } else {
    snprintf(buf, bytes, "fork server (pid %d) is gone (its socket closed)",
             (int)fs->server_pid);
  }
}


// The server's first message: READY, or a failure at a named step.
static lw_status_t await_ready(lw_forkserver_t *fs, const lw_fs_spec_t *spec, int64_t deadline,
                               lw_error_t *err) {
  for (;;) {
    lw_fs_msg_t m;
    int rc = lw__fs_recv(fs->ctl, &m);
    if (rc == -EAGAIN) {
      rc = lw__fs_wait_readable(fs->ctl, deadline);
      if (rc == 1) continue;
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                           "forkserver: server (pid %d) did not start within %d s",
                           (int)fs->server_pid, (int)(kStartTimeoutNs / 1000000000));
    }
    if (rc == 1 && m.type == LW_FS_MSG_READY) {
      if (m.pid > 0 && fs->server_pid <= 0) fs->server_pid = m.pid;
      if (m.value == 0) return LW_OK;
      if (spec != NULL && m.index >= LW_FS_STEP_SHARE0 &&
          m.index - LW_FS_STEP_SHARE0 < spec->n_shares) {
        uint32_t i = m.index - LW_FS_STEP_SHARE0;
        return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                             "forkserver: the server cannot map share %u (%zu bytes) at %p, "
                             "the address it has in this process: %s",
                             i, spec->shares[i].bytes, spec->shares[i].addr, strerror(m.value));
      }
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: server setup failed at %s: %s",
                           setup_step_name(m.index), strerror(m.value));
    }
    if (rc == 1) continue;
    char why[128];
    describe_server_gone(fs, why, sizeof(why));
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: %s before it was ready", why);
  }
}

static lw_forkserver_t *fs_new(uint32_t n_slots, lw_fs_origin_t origin, bool direct) {
  lw_forkserver_t *fs = calloc(1, sizeof(*fs));
  if (fs == NULL) return NULL;
  fs->ctl = fs->ev = fs->server_pidfd = -1;
  fs->n_slots = n_slots;
  fs->origin = origin;
  fs->direct = direct;
  for (uint32_t i = 0; i < LW_FS_MAX_CHILDREN; ++i) fs->death_fd[i] = -1;
  pthread_mutex_init(&fs->mu, NULL);
  pthread_mutex_init(&fs->death_mu, NULL);
  return fs;
}

// The status table (a memfd, so another process can map it) and the sockets. table_fd gets
// the memfd (the caller closes it); ctl / ev the server's ends.
static lw_status_t fs_prepare(lw_forkserver_t *fs, int *table_fd, int ctl_srv[1], int ev_srv[1],
                              lw_error_t *err) {
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = (size_t)fs->n_slots * sizeof(lw_fs_child_status_t);
  fs->table_bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
  *table_fd = lw__fs_memfd_with("lw-fs-table", NULL, fs->table_bytes);
  void *table = *table_fd < 0 ? MAP_FAILED
                              : mmap(NULL, fs->table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                                     *table_fd, 0);
  if (table == MAP_FAILED) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "forkserver: cannot create the status table: %s",
                         strerror(*table_fd < 0 ? -*table_fd : errno));
  }
  fs->table = table;  // zero-filled: pid 0 (never spawned), sequences 0
  int ctl[2] = {-1, -1}, ev[2] = {-1, -1};
  int sp = lw__fs_socketpair(ctl);
  if (sp == 0) sp = lw__fs_socketpair(ev);
  if (sp != 0) {
    if (ctl[0] >= 0) close(ctl[0]);
    if (ctl[1] >= 0) close(ctl[1]);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: socketpair: %s",
                         strerror(-sp));
  }
  fs->ctl = ctl[0];
  fs->ev = ev[0];
  ctl_srv[0] = ctl[1];
  ev_srv[0] = ev[1];
  return LW_OK;
}

static lw_status_t check_spec(const lw_fs_spec_t *spec, lw_forkserver_t **out, lw_error_t *err) {
  if (out == NULL) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: out is NULL");
  *out = NULL;
  if (spec == NULL) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: spec is NULL");
  if (spec->origin == LW_FS_FROM_ZYGOTE && spec->main_fn == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: main_fn is NULL");
  }
  if (spec->origin != LW_FS_FROM_ZYGOTE && spec->origin != LW_FS_FROM_HELPER) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: origin %d is unknown",
                         (int)spec->origin);
  }
  if (spec->n_slots == 0 || spec->n_slots > LW_FS_MAX_CHILDREN) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: n_slots %u not in 1..%d",
                         spec->n_slots, LW_FS_MAX_CHILDREN);
  }
  if (spec->n_shares > LW_FS_MAX_SHARES || spec->n_fds > LW_FS_MAX_FDS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "forkserver: %u shares and %u fds (at most %d and %d)", spec->n_shares,
                         spec->n_fds, LW_FS_MAX_SHARES, LW_FS_MAX_FDS);
  }
  return LW_OK;
}

// The request for spec and its fds (fs_wire.h order). Returns how many fds.
static int fill_request(lw_fs_req_t *rq, const lw_fs_spec_t *spec, int ctl_srv, int ev_srv,
                        int table_fd, size_t table_bytes, int arg_fd, int *fds) {
  memset(rq, 0, sizeof(*rq));
  rq->magic = LW_FS_REQ_MAGIC;
  rq->version = LW_FS_REQ_VERSION;
  rq->n_slots = spec->n_slots;
  rq->n_shares = spec->n_shares;
  rq->n_fds = spec->n_fds;
  rq->parent_pid = (int32_t)getpid();
  rq->main_fn = (uint64_t)(uintptr_t)spec->main_fn;
  rq->arg_bytes = arg_fd >= 0 ? spec->arg_bytes : 0;
  rq->table_bytes = table_bytes;
  int n = 0;
  fds[n++] = ctl_srv;
  fds[n++] = ev_srv;
  fds[n++] = table_fd;
  if (arg_fd >= 0) fds[n++] = arg_fd;
  for (uint32_t i = 0; i < spec->n_shares; ++i) {
    rq->share_addr[i] = (uint64_t)(uintptr_t)spec->shares[i].addr;
    rq->share_bytes[i] = spec->shares[i].bytes;
    fds[n++] = spec->shares[i].fd;
  }
  for (uint32_t i = 0; i < spec->n_fds; ++i) fds[n++] = spec->fds[i];
  // Field by field: the struct libc fills holds bytes the kernel never wrote (the mask beyond
  // the kernel's, padding), which would travel uninitialised.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction a;
    memset(&a, 0, sizeof(a));
    if (sigaction(sig, NULL, &a) != 0) continue;
    struct sigaction *to = &rq->actions[sig];
    if (a.sa_flags & SA_SIGINFO) {
      to->sa_sigaction = a.sa_sigaction;
    } else {
      to->sa_handler = a.sa_handler;
    }
    to->sa_flags = a.sa_flags;
    sigemptyset(&to->sa_mask);
    for (int s = 1; s < NSIG; ++s) {
      if (sigismember(&a.sa_mask, s) == 1) sigaddset(&to->sa_mask, s);
    }
  }
  prctl(PR_GET_NAME, rq->comm, 0, 0, 0);
  return n;
}

// The helper: start it, hand it the request, reap it. The server's pid comes in READY.
static lw_status_t start_from_helper(lw_fs_req_t *rq, const int *fds, int n_fds,
                                     int64_t deadline, lw_error_t *err) {
  int req[2];
  int sp = lw__fs_socketpair(req);
  if (sp != 0) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: socketpair: %s",
                         strerror(-sp));
  }
  char detail[LW_ERROR_MESSAGE_BYTES / 2];
  pid_t helper = lw__fs_helper_spawn(req[1], detail, sizeof(detail));
  close(req[1]);
  if (helper < 0) {
    close(req[0]);
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: %s", detail);
  }
  int rc = lw__fs_req_send(req[0], rq, fds, n_fds, deadline);
  close(req[0]);
  // The helper reads the request, forks the server and exits at once. Bounded: a helper that
  // hangs is killed (it is this process's unreaped child, so the pid is its own).
  int ws = 0;
  for (;;) {
    pid_t r = waitpid(helper, &ws, __WALL | WNOHANG);
    if (r == helper || (r < 0 && errno != EINTR)) break;
    if (lw__now_ns() > deadline) kill(helper, SIGKILL);
    struct timespec ms = {0, 200000};
    nanosleep(&ms, NULL);
  }
  if (rc != 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "forkserver: cannot hand the helper (pid %d) its request: %s",
                         (int)helper, strerror(-rc));
  }
  return LW_OK;
}

lw_status_t lw__forkserver_start_spec(const lw_fs_spec_t *spec, lw_forkserver_t **out,
                                     lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_spec(spec, out, err));
  lw_status_t st = LW_OK;
  if (spec->origin == LW_FS_FROM_ZYGOTE) {
    int n_threads = 0;
    char detail[128];
    lw_zygote_state_t z = lw__fs_zygote_ensure(&n_threads, detail, sizeof(detail));
    if (z == LW_ZYGOTE_THREADED) {
      return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                           "sub children are forked from lanework's zygote, a copy of the "
                           "program made while it has one thread, and this process has %d "
                           "threads and no zygote: call lw_init() in main before the program "
                           "starts threads (docs/processes.md)",
                           n_threads);
    }
    if (z == LW_ZYGOTE_FAILED) {
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: cannot start the zygote: %s",
                           detail);
    }
  }
  lw_forkserver_t *fs = fs_new(spec->n_slots, spec->origin, false);
  if (fs == NULL) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: out of memory");
  int table_fd = -1, arg_fd = -1, ctl_srv = -1, ev_srv = -1;
  lw_fs_req_t *rq = NULL;
  // Per call (about 10 KiB, the signal table): creates from several threads, or from a process
  // forked while another thread was creating, never wait on each other here.
  rq = calloc(1, sizeof(*rq));
  if (rq == NULL) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: out of memory");
    goto fail;
  }
  if ((st = fs_prepare(fs, &table_fd, &ctl_srv, &ev_srv, err)) != LW_OK) goto fail;
  if (spec->arg_bytes > 0) {
    arg_fd = lw__fs_memfd_with("lw-fs-arg", spec->arg, spec->arg_bytes);
    if (arg_fd < 0) {
      st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "forkserver: cannot copy the children's arguments: %s",
                         strerror(-arg_fd));
      goto fail;
    }
  }
  int64_t deadline = lw__now_ns() + kStartTimeoutNs;
  int fds[LW_FS_REQ_MAX_FDS];
  int n_fds = fill_request(rq, spec, ctl_srv, ev_srv, table_fd, fs->table_bytes, arg_fd, fds);
  if (spec->origin == LW_FS_FROM_HELPER) {
    st = start_from_helper(rq, fds, n_fds, deadline, err);
  } else {
    pid_t zygote = 0;
    int rc = lw__fs_zygote_request(rq, fds, n_fds, deadline, &zygote);
    if (rc > 0) {
      fs->server_pid = rc;
      // A pidfd now, so a server that never gets ready can be killed (it is the zygote's
      // child, not ours). The pid is still the server's while its control socket, whose other
      // end only the server holds, has not hung up.
      int pidfd = lw__fs_pidfd_open(rc);
      struct pollfd hup = {.fd = fs->ctl, .events = 0};
      if (pidfd >= 0 && poll(&hup, 1, 0) == 0) {
        fs->server_pidfd = pidfd;
      } else if (pidfd >= 0) {
        close(pidfd);
      }
    } else {
      st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "forkserver: the zygote (pid %d) could not start a server: %s%s",
                         (int)zygote, strerror(-rc),
                         rc == -EPIPE || rc == -ECONNRESET ? " (the zygote is gone)" : "");
    }
  }
  free(rq);
  rq = NULL;
  close(ctl_srv);
  close(ev_srv);
  ctl_srv = ev_srv = -1;
  if (st != LW_OK) goto fail;
  if ((st = await_ready(fs, spec, deadline, err)) != LW_OK) goto fail;
  int pidfd = fs->server_pidfd >= 0 ? fs->server_pidfd : lw__fs_pidfd_open(fs->server_pid);
  if (pidfd >= 0) {
    fs->server_pidfd = pidfd;
  } else if (pidfd != -ENOSYS && pidfd != -EPERM) {
    st = lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: pidfd_open(server pid %d): %s",
                       (int)fs->server_pid, strerror(-pidfd));
    goto fail;
  } else {
    static _Atomic int told;
    if (atomic_exchange(&told, 1) == 0) {
      lw__log(LW_LOG_INFO,
              "pidfd_open is refused here (%s; valgrind does this): lanework watches its "
              "processes through their sockets and the fork servers' exit messages instead",
              strerror(-pidfd));
    }
  }
  close(table_fd);
  if (arg_fd >= 0) close(arg_fd);
  *out = fs;
  return LW_OK;

fail:
  free(rq);
  if (table_fd >= 0) close(table_fd);
  if (arg_fd >= 0) close(arg_fd);
  if (ctl_srv >= 0) close(ctl_srv);
  if (ev_srv >= 0) close(ev_srv);
  // A half-started server sees its control socket close (destroy) and tears itself down; one
  // that never got to its loop (stopped, wedged) is killed when it can be named.
  if (fs->server_pidfd >= 0) (void)lw__sys_pidfd_send_signal(fs->server_pidfd, SIGKILL);
  fs->server_gone = true;
  destroy(fs);
  return st;
}

lw_status_t lw__forkserver_start(lw_child_main_fn main_fn, void *arg, uint32_t n_slots,
                                lw_forkserver_t **out, lw_error_t *err) {
  lw_fs_spec_t spec = {.origin = LW_FS_FROM_ZYGOTE, .main_fn = main_fn, .n_slots = n_slots};
  LW_RETURN_IF_ERROR(check_spec(&spec, out, err));
  lw__fs_note_closed_stdio();
  lw_forkserver_t *fs = fs_new(n_slots, LW_FS_FROM_ZYGOTE, true);
  if (fs == NULL) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: out of memory");
  int table_fd = -1, ctl_srv = -1, ev_srv = -1;
  lw_status_t st = fs_prepare(fs, &table_fd, &ctl_srv, &ev_srv, err);
  if (table_fd >= 0) close(table_fd);
  if (st != LW_OK) {
    if (ctl_srv >= 0) close(ctl_srv);
    if (ev_srv >= 0) close(ev_srv);
    fs->server_gone = true;
    destroy(fs);
    return st;
  }
  // Prepared here, copied into the server by fork; the server itself allocates nothing.
  static lw_fs_server_t proto;  // large; copied by the fork, so one start at a time
  static pthread_mutex_t proto_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&proto_mu);
  memset(&proto, 0, sizeof(proto));
  proto.ctl = ctl_srv;
  proto.ev = ev_srv;
  proto.sigfd = proto.ppidfd = -1;
  proto.n_slots = n_slots;
  proto.table = fs->table;
  proto.table_bytes = fs->table_bytes;
  proto.main_fn = main_fn;
  proto.arg = arg;
  pid_t parent = getpid();
  // SIGCHLD is blocked across the fork so that the server starts with it blocked and no
  // SIGCHLD of a fast-dying child can be lost before its signalfd exists.
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, &old);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) lw__fs_server_main(&proto, parent, fs->ctl, fs->ev);
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_mutex_unlock(&proto_mu);
  close(ctl_srv);
  close(ev_srv);
  if (pid < 0) {
    fs->server_gone = true;
    destroy(fs);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: fork: %s",
                         strerror(fork_errno));
  }
  fs->server_pid = pid;
  int pidfd = lw__fs_pidfd_open(pid);
  if (pidfd >= 0) fs->server_pidfd = pidfd;
  st = await_ready(fs, NULL, lw__now_ns() + kStartTimeoutNs, err);
  if (st != LW_OK) {
    kill(pid, SIGKILL);  // our unreaped child
    destroy(fs);
    return st;
  }
  *out = fs;
  return LW_OK;
}

void lw__forkserver_kill(lw_forkserver_t *fs, uint32_t index, pid_t pid, int fd) {
  if (fs == NULL || index >= fs->n_slots || pid <= 0) return;
  if (fd >= 0 && !(fs->death_fd[index] >= 0 && atomic_load(&fs->death_pid[index]) == pid)) {
    (void)lw__sys_pidfd_send_signal(fd, SIGKILL);  // a real pidfd: it names that child
    return;
  }
  pthread_mutex_lock(&fs->mu);
  if (!fs->ctl_closed) {
    lw_fs_msg_t k = {.type = LW_FS_MSG_KILL, .index = index, .pid = pid};
    (void)lw__fs_send(fs->ctl, &k);
  }
  pthread_mutex_unlock(&fs->mu);
}

bool lw__forkserver_from_zygote(const lw_forkserver_t *fs) {
  return fs != NULL && fs->origin == LW_FS_FROM_ZYGOTE;
}

int lw__forkserver_fd(const lw_forkserver_t *fs) { return fs != NULL ? fs->ev : -1; }

pid_t lw__forkserver_pid(const lw_forkserver_t *fs) { return fs != NULL ? fs->server_pid : 0; }

bool lw__forkserver_exit_status(const lw_forkserver_t *fs, uint32_t index, pid_t pid,
                               int *out_wait_status) {
  if (fs == NULL || index >= fs->n_slots || pid <= 0) return false;
  slot_view_t v = slot_read(&fs->table[index]);
  if (v.pid != pid || v.spawn_seq != v.exit_seq) return false;
  if (out_wait_status != NULL) *out_wait_status = v.wait_status;
  return true;
}

// A SPAWNED reply to a request that timed out: the child exists but nobody knows its pid, and
// it holds the slot. Kill it; its EXIT then arrives through lw__forkserver_poll_exit as usual.
static void kill_orphan(lw_forkserver_t *fs, const lw_fs_msg_t *m) {
  if (m->index >= fs->n_slots || m->pid <= 0) return;
  int pidfd = lw__fs_pidfd_open(m->pid);
  if (pidfd == -ENOSYS || pidfd == -EPERM) {
    lw_fs_msg_t k = {.type = LW_FS_MSG_KILL, .index = m->index, .pid = m->pid};
    (void)lw__fs_send(fs->ctl, &k);  // the server checks the pid is its live child
    return;
  }
  if (pidfd < 0) return;  // already reaped
  slot_view_t v = slot_read(&fs->table[m->index]);
  // Not yet published as exited, so not reaped when the pidfd was opened: it names the orphan.
  if (v.pid == m->pid && v.spawn_seq != v.exit_seq) (void)lw__sys_pidfd_send_signal(pidfd, SIGKILL);
  close(pidfd);
}

static lw_status_t spawn_failed(lw_forkserver_t *fs, const lw_fs_msg_t *m, lw_error_t *err) {
  int32_t wid = (int32_t)m->index;
  switch (m->value) {
    case EBUSY:
      return lw__error_set(err, LW_FAILED_PRECONDITION, wid, 0,
                           "forkserver: slot %u still has a live child (pid %d); wait for its "
                           "exit before respawning",
                           m->index, (int)m->pid);
    case ENOBUFS:
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, wid, 0,
                           "forkserver: too many undelivered exit notices; call "
                           "lw__forkserver_poll_exit before spawning more");
    case EINVAL:
      return lw__error_set(err, LW_INVALID_ARGUMENT, wid, 0,
                           "forkserver: server rejected slot %u (n_slots %u)", m->index,
                           fs->n_slots);
    default:
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, wid, 0,
                           "forkserver: fork of slot %u failed: %s", m->index,
                           strerror(m->value));
  }
}

// Makes a death eventfd readable (no pidfds: it stands for the child's pidfd).
static void fire_death_fd(int fd) {
  uint64_t one = 1;
  ssize_t w = write(fd, &one, sizeof(one));
  (void)w;
}

// Fires the death eventfd of every slot that has one: all their children are dead (the
// server is gone, or stopped and reaped them).
static void fire_every_death_fd(lw_forkserver_t *fs) {
  pthread_mutex_lock(&fs->death_mu);
  for (uint32_t i = 0; i < fs->n_slots; ++i) {
    if (fs->death_fd[i] >= 0) fire_death_fd(fs->death_fd[i]);
  }
  pthread_mutex_unlock(&fs->death_mu);
}

static lw_status_t spawned(lw_forkserver_t *fs, const lw_fs_msg_t *m, pid_t *out_pid,
                           int *out_pidfd, lw_error_t *err) {
  uint32_t i = m->index;
  int32_t wid = (int32_t)i;
  pid_t pid = m->pid;
  if (pid <= 0) {
    return lw__error_set(err, LW_INTERNAL, wid, 0, "forkserver: SPAWNED with pid %d", (int)pid);
  }
  // Open first, then read the table: see the top of the file for why this order proves the
  // pidfd names our child.
  int pidfd = lw__fs_pidfd_open(pid);
  int ws = 0;
  if (lw__forkserver_exit_status(fs, i, pid, &ws)) {
    if (pidfd >= 0) close(pidfd);
    char how[64];
    lw__forkserver_describe_status(ws, how, sizeof(how));
    return lw__error_set(err, LW_CHILD_EXITED, wid, 0,
                         "forkserver: child %u (pid %d) died right after fork: %s", i, (int)pid,
                         how);
  }
  if (pidfd == -ENOSYS || pidfd == -EPERM) {
    // No pidfds (valgrind refuses pidfd_open): a death eventfd that poll_exit signals.
    int efd = lw__forkserver_fd_above_stdio(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    int mine = efd >= 0 ? lw__forkserver_fd_above_stdio(fcntl(efd, F_DUPFD_CLOEXEC, 3)) : -1;
    if (mine < 0) {
      if (efd >= 0) close(efd);
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, wid, 0,
                           "forkserver: no pidfds here (pidfd_open: %s) and no eventfd for "
                           "child %u (pid %d) either; the child keeps the slot until "
                           "lw__forkserver_stop",
                           strerror(-pidfd), i, (int)pid);
    }
    pthread_mutex_lock(&fs->death_mu);
    if (fs->death_fd[i] >= 0) close(fs->death_fd[i]);
    fs->death_fd[i] = mine;
    atomic_store(&fs->death_pid[i], pid);
    pthread_mutex_unlock(&fs->death_mu);
    // The exit may have been published while the eventfd was made, its EXIT read already.
    if (lw__forkserver_exit_status(fs, i, pid, &ws)) fire_death_fd(mine);
    pidfd = efd;
  }
  if (pidfd < 0) {
    // ESRCH cannot happen here (the exit is published before the reap). Other errors leave a
    // live child in the slot; lw__forkserver_stop kills it.
    lw_status_t code = (pidfd == -EMFILE || pidfd == -ENFILE || pidfd == -ENOMEM)
                           ? LW_RESOURCE_EXHAUSTED
                           : LW_INTERNAL;
    return lw__error_set(err, code, wid, 0,
                         "forkserver: pidfd_open of child %u (pid %d): %s; the child keeps "
                         "the slot until lw__forkserver_stop",
                         i, (int)pid, strerror(-pidfd));
  }
  *out_pid = pid;
  *out_pidfd = pidfd;
  return LW_OK;
}

static lw_status_t spawn_locked(lw_forkserver_t *fs, uint32_t index, int64_t deadline_ns,
                                pid_t *out_pid, int *out_pidfd, lw_error_t *err) {
  int32_t wid = (int32_t)index;
  char why[160];
  if (fs->ctl_closed) {
    describe_server_gone(fs, why, sizeof(why));
    return lw__error_set(err, LW_UNAVAILABLE, wid, 0, "forkserver: %s", why);
  }
  uint32_t req = ++fs->next_req;
  lw_fs_msg_t m = {.type = LW_FS_MSG_SPAWN, .index = index, .seq = req};
  int rc = lw__fs_send(fs->ctl, &m);
  if (rc == -EAGAIN) {
    // The server is not reading (stopped or hung); it has at most a few requests queued.
    return lw__error_set(err, LW_DEADLINE_EXCEEDED, wid, 0,
                         "forkserver: server (pid %d) is not reading requests",
                         (int)fs->server_pid);
  }
  if (rc < 0) {
    fs->ctl_closed = true;
    describe_server_gone(fs, why, sizeof(why));
    return lw__error_set(err, LW_UNAVAILABLE, wid, 0, "forkserver: %s", why);
  }
  for (;;) {
    rc = lw__fs_recv(fs->ctl, &m);
    if (rc == 1) {
      bool reply = m.type == LW_FS_MSG_SPAWNED || m.type == LW_FS_MSG_SPAWN_FAILED;
      if (reply && m.seq == req) {
        if (m.index != index) {
          return lw__error_set(err, LW_INTERNAL, wid, 0,
                               "forkserver: reply for slot %u to a request for slot %u",
                               m.index, index);
        }
        if (m.type == LW_FS_MSG_SPAWN_FAILED) return spawn_failed(fs, &m, err);
        return spawned(fs, &m, out_pid, out_pidfd, err);
      }
      if (m.type == LW_FS_MSG_SPAWNED) kill_orphan(fs, &m);  // reply to a timed-out request
      continue;
    }
    if (rc == -EAGAIN) {
      rc = lw__fs_wait_readable(fs->ctl, deadline_ns);
      if (rc == 1) continue;
      if (rc == 0) {
        return lw__error_set(err, LW_DEADLINE_EXCEEDED, wid, 0,
                             "forkserver: no answer to SPAWN(%u) from the server (pid %d) "
                             "before the deadline",
                             index, (int)fs->server_pid);
      }
    }
    if (rc == -EBADMSG) continue;
    fs->ctl_closed = true;
    describe_server_gone(fs, why, sizeof(why));
    return lw__error_set(err, LW_UNAVAILABLE, wid, 0, "forkserver: %s", why);
  }
}

lw_status_t lw__forkserver_spawn(lw_forkserver_t *fs, uint32_t index, int64_t deadline_ns,
                                pid_t *out_pid, int *out_pidfd, lw_error_t *err) {
  lw_error_t local;
  if (err == NULL) err = &local;
  lw__error_clear(err);
  lw_status_t st;
  if (out_pid == NULL || out_pidfd == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "forkserver: out_pid/out_pidfd is NULL");
  }
  *out_pid = 0;
  *out_pidfd = -1;
  if (fs == NULL) {
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: fs is NULL");
  } else if (index >= fs->n_slots) {
    st = lw__error_set(err, LW_INVALID_ARGUMENT, (int32_t)index, 0,
                       "forkserver: slot %u out of range (n_slots %u)", index, fs->n_slots);
  } else {
    pthread_mutex_lock(&fs->mu);
    st = spawn_locked(fs, index, deadline_ns, out_pid, out_pidfd, err);
    pthread_mutex_unlock(&fs->mu);
  }
  return st;
}

lw_status_t lw__forkserver_poll_exit(lw_forkserver_t *fs,
                                    void (*fn)(void *ctx, uint32_t index, pid_t pid,
                                               int wait_status),
                                    void *ctx, lw_error_t *err) {
  if (fs == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: poll_exit: fs is NULL");
  }
  // No lock: the event socket has one reader (the event-loop thread), and fn may call
  // lw__forkserver_spawn. A death fd is replaced only by a spawn of its slot, which comes after
  // the slot's EXIT was read (the slot is busy until then).
  for (;;) {
    lw_fs_msg_t m;
    int rc = lw__fs_recv(fs->ev, &m);
    if (rc == 1) {
      // The server is trusted code, but check anyway before indexing with its numbers.
      if (m.type == LW_FS_MSG_EXIT && m.index < fs->n_slots && m.pid > 0) {
        pthread_mutex_lock(&fs->death_mu);
        if (fs->death_fd[m.index] >= 0 && atomic_load(&fs->death_pid[m.index]) == m.pid) {
          fire_death_fd(fs->death_fd[m.index]);
        }
        pthread_mutex_unlock(&fs->death_mu);
        if (fn != NULL) fn(ctx, m.index, m.pid, m.value);
      }
      continue;
    }
    if (rc == -EAGAIN) return LW_OK;
    if (rc == -EBADMSG) continue;
    // EOF comes after every queued EXIT has been read: nothing is lost before it. The server
    // is gone, and its children with it (PR_SET_PDEATHSIG): without pidfds nobody else would
    // ever tell their deaths, so every death eventfd fires now.
    fire_every_death_fd(fs);
    pthread_mutex_lock(&fs->mu);
    fs->ctl_closed = true;
    pthread_mutex_unlock(&fs->mu);
    char why[160];
    describe_server_gone(fs, why, sizeof(why));
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: %s", why);
  }
}

void lw__forkserver_stop(lw_forkserver_t *fs) {
  if (fs == NULL) return;
  pthread_mutex_lock(&fs->mu);
  int64_t deadline = lw__now_ns() + kStopTimeoutNs;
  if (!fs->ctl_closed) {
    lw_fs_msg_t m = {.type = LW_FS_MSG_STOP, .seq = ++fs->next_req};
    if (lw__fs_send(fs->ctl, &m) == 0) {
      // Wait for STOPPED: by then every child is dead and reaped. Other replies are stale.
      for (;;) {
        int rc = lw__fs_recv(fs->ctl, &m);
        if (rc == 1 && m.type == LW_FS_MSG_STOPPED) break;
        if (rc == 1 || rc == -EBADMSG) continue;
        if (rc == -EAGAIN && lw__fs_wait_readable(fs->ctl, deadline) == 1) continue;
        break;  // EOF, error or deadline: reap_server SIGKILLs it; children get PDEATHSIG
      }
    }
  }
  // Every child is dead now: a death eventfd (no pidfds) says so, as a pidfd would.
  fire_every_death_fd(fs);
  reap_server(fs, deadline);
  pthread_mutex_unlock(&fs->mu);
  destroy(fs);
}

void lw__forkserver_describe_status(int wait_status, char *buf, size_t bytes) {
  if (buf == NULL || bytes == 0) return;
  if (WIFEXITED(wait_status)) {
    snprintf(buf, bytes, "exited with status %d", WEXITSTATUS(wait_status));
  } else if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    const char *core = WCOREDUMP(wait_status) ? " (core dumped)" : "";
    const char *abbrev = sigabbrev_np(sig);  // "SEGV"; NULL for real-time and unknown signals
    if (abbrev != NULL) {
      snprintf(buf, bytes, "killed by SIG%s%s", abbrev, core);
    } else {
      snprintf(buf, bytes, "killed by signal %d%s", sig, core);
    }
  } else {
    snprintf(buf, bytes, "wait status 0x%x", (unsigned)wait_status);
  }
}
