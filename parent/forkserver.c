// parent/forkserver.c — the fork server (Linux: pidfd, signalfd, SOCK_SEQPACKET).
//
// Two socketpairs connect the worker (parent) and the server:
//
//   control  parent -> server  SPAWN(index, req), STOP(req)
//            server -> parent  READY(err), SPAWNED(index, req, pid), SPAWN_FAILED(index, req,
//                              errno), STOPPED(req)
//   events   server -> parent  EXIT(index, pid, wait_status, exit_seq)
//
// Why two: lw__forkserver_spawn (any thread, under the mutex) reads the control socket while the
// event-loop thread reads the event socket in lw__forkserver_poll_exit. With one socket, spawn
// would have to read EXIT messages that arrive ahead of its reply and park them in process
// memory, where the event loop's epoll cannot see them (the fd stops being readable while
// exits are still pending). With two, each reader owns its socket, and EXITs stay in the
// kernel queue, in order, until poll_exit takes them.
//
// No exit is lost:
//   - The server publishes every exit in the shared table before it reaps the child, then
//     queues an EXIT message.
//   - EXIT messages are sent without blocking. When the event socket is full, the server keeps
//     them in a fixed FIFO (kOutqCap) and flushes it when the socket turns writable.
//   - The FIFO never overflows: the server refuses SPAWN (ENOBUFS) while
//     queued EXITs + live children >= kOutqCap. Every future EXIT belongs to a live child, and
//     each slot holds at most one live child (SPAWN of a busy slot fails with EBUSY), so
//     queued + live never grows past the cap.
//
// Pids are never confused: the server peeks each exit with waitid(WNOWAIT), publishes it, and
// only then reaps the zombie. A pid can be reused only after the reap, so when the parent opens
// a pidfd and afterwards reads "not exited" from the table, the pidfd names that child.
#include "parent/forkserver.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "lanes/error.h"
#include "lanes/sys.h"

enum {
  kOutqCap = 4 * LW_FS_MAX_CHILDREN,  // server's queue of EXITs the event socket refused
  kStartTimeoutNs = 5000000000,       // lw__forkserver_start waits this long for READY
  kStopTimeoutNs = 5000000000,        // lw__forkserver_stop waits this long before SIGKILL
};

typedef enum lw_fs_msg_type {
  LW_FS_MSG_READY = 1,         // server -> parent (control): setup done; value = 0 or errno
  LW_FS_MSG_SPAWN = 2,         // parent -> server (control)
  LW_FS_MSG_SPAWNED = 3,       // server -> parent (control): pid
  LW_FS_MSG_SPAWN_FAILED = 4,  // server -> parent (control): value = errno
  LW_FS_MSG_STOP = 5,          // parent -> server (control)
  LW_FS_MSG_STOPPED = 6,       // server -> parent (control)
  LW_FS_MSG_EXIT = 7,          // server -> parent (events): pid, value = raw wait status
} lw_fs_msg_type_t;

// One message; SOCK_SEQPACKET keeps the boundaries, so a short read means a malformed peer.
typedef struct lw_fs_msg {
  uint32_t type;   // lw_fs_msg_type_t
  uint32_t index;  // slot (READY: the setup step that failed)
  uint32_t seq;    // control: request id echoed in the reply; EXIT: the slot's new exit_seq
  int32_t pid;
  int32_t value;   // errno or raw wait status
  uint32_t reserved;
} lw_fs_msg_t;
_Static_assert(sizeof(lw_fs_msg_t) == 24, "lw_fs_msg_t is the wire format");

// Setup steps of the server, reported in READY.index when one fails. A share's step is
// kStepShare0 + its index.
enum { kStepPidfd = 1, kStepSignalfd = 2, kStepTable = 3, kStepArg = 4, kStepShare0 = 16 };

struct lw_forkserver {
  pthread_mutex_t mu;  // serializes control requests (spawn, stop)
  int ctl;             // parent end of the control socket
  int ev;              // parent end of the event socket (lw__forkserver_fd)
  int server_pidfd;
  pid_t server_pid;
  bool ctl_closed;  // EOF or an error seen on the control socket
  bool server_reaped;
  bool from_zygote;
  uint32_t n_slots;
  uint32_t next_req;
  lw_fs_child_status_t *table;  // MAP_SHARED with the server and its children
  size_t table_bytes;
};

// --------------------------------------------------------------------------------------------
// Stdio. Bit i: fd i was closed when liblanework was loaded (set by the constructor, before
// lanework opened anything). Such a number is not the program's stdio: children and the
// zygote get /dev/null there (fill_closed_stdio), and lanework's own fds never take it.
static uint32_t g_stdio_closed;

int lw__forkserver_fd_above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int e = errno;
  close(fd);
  return moved < 0 ? -e : moved;
}

// Puts /dev/null on every stdio number that was closed when liblanework was loaded, replacing
// whatever took it since: in a child (or the zygote) that is an fd of lanework's or of the
// program's that happened to get the free number, never the program's stdio. Not
// close-on-exec, as stdio is. Plain syscalls only (runs in the zygote and in children).
static void fill_closed_stdio(void) {
  for (int i = 0; i <= 2; ++i) {
    if ((g_stdio_closed & (1u << i)) == 0) continue;
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0) continue;  // no /dev/null (a bare chroot): the number keeps what it holds
    if (fd != i) {
      (void)dup2(fd, i);
      close(fd);
    }
  }
}

static int socketpair_above_stdio(int sv[2]) {
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -errno;
  sv[0] = lw__forkserver_fd_above_stdio(sv[0]);
  sv[1] = lw__forkserver_fd_above_stdio(sv[1]);
  if (sv[0] >= 0 && sv[1] >= 0) return 0;
  int e = sv[0] < 0 ? -sv[0] : -sv[1];
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
  sv[0] = sv[1] = -1;
  return -e;
}

// --------------------------------------------------------------------------------------------
// Syscalls come from lanes/sys.h (lw__sys_*: a value >= 0 or -errno).

// A pidfd that never takes a stdio number the program had closed. >= 0 or -errno.
static int pidfd_open_above_stdio(pid_t pid) {
  int fd = lw__sys_pidfd_open(pid);  // the kernel makes every pidfd close-on-exec
  return fd < 0 ? fd : lw__forkserver_fd_above_stdio(fd);
}

// Sends one message without blocking and without SIGPIPE. 0 or -errno.
static int send_msg(int fd, const lw_fs_msg_t *m) {
  for (;;) {
    ssize_t n = send(fd, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof(*m)) return 0;
    if (n >= 0) return -EMSGSIZE;  // SOCK_SEQPACKET sends whole messages or nothing
    if (errno != EINTR) return -errno;
  }
}

// Receives one message without blocking: 1, 0 on EOF, -EAGAIN when none is queued, -EBADMSG
// for a message of the wrong size, or another -errno.
static int recv_msg(int fd, lw_fs_msg_t *m) {
  for (;;) {
    ssize_t n = recv(fd, m, sizeof(*m), MSG_DONTWAIT | MSG_TRUNC);
    if (n == (ssize_t)sizeof(*m)) return 1;
    if (n == 0) return 0;
    if (n > 0) return -EBADMSG;
    if (errno != EINTR) return -errno;
  }
}

// Waits until fd is readable (or hung up) or deadline_ns passes: 1, 0 on timeout, or -errno.
static int wait_readable(int fd, int64_t deadline_ns) {
  for (;;) {
    struct timespec ts;
    const struct timespec *tsp = NULL;
    if (deadline_ns != LW_DEADLINE_NEVER) {
      int64_t left = deadline_ns - lw__now_ns();
      if (left <= 0) return 0;
      ts.tv_sec = (time_t)(left / 1000000000LL);
      ts.tv_nsec = (long)(left % 1000000000LL);
      tsp = &ts;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = ppoll(&p, 1, tsp, NULL);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -errno;
  }
}

// The raw wait status (as waitpid reports it) of an exit that waitid described.
static int status_from_siginfo(const siginfo_t *si) {
  switch (si->si_code) {
    case CLD_EXITED:
      return (si->si_status & 0xff) << 8;
    case CLD_KILLED:
      return si->si_status & 0x7f;
    case CLD_DUMPED:
      return (si->si_status & 0x7f) | 0x80;
    default:
      return 0;
  }
}

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
// The server process. Only plain syscalls from here to the end of the section: the server may
// have been forked from a process with other threads, so locks held there (malloc, stdio) may
// be held forever here.

typedef struct server {
  int ctl, ev, sigfd, ppidfd;
  pid_t self;
  uint32_t n_slots;
  lw_fs_child_status_t *table;
  size_t table_bytes;
  lw_child_main_fn main_fn;
  void *arg;
  int pass_fds[LW_FS_MAX_FDS];  // the spec's fds, as numbered in the server
  uint32_t n_pass;
  // The program's dispositions of the signals the server resets (see server_main); children
  // get them back. changed[sig] says which.
  struct sigaction app_action[NSIG];
  bool changed[NSIG];
  char comm[16];                 // the program's thread name, restored in children
  pid_t live[LW_FS_MAX_CHILDREN];  // 0: slot free
  uint32_t n_live;
  bool parent_gone;
  uint32_t outq_head, outq_len;
  lw_fs_msg_t outq[kOutqCap];
} server_t;

static void server_flush(server_t *s) {
  while (s->outq_len > 0) {
    int rc = send_msg(s->ev, &s->outq[s->outq_head]);
    if (rc == -EAGAIN) return;  // the loop polls for POLLOUT while the queue is non-empty
    if (rc < 0) {
      s->parent_gone = true;  // EPIPE and friends: the parent closed its end
      return;
    }
    s->outq_head = (s->outq_head + 1) % kOutqCap;
    s->outq_len--;
  }
}

static void server_queue_exit(server_t *s, const lw_fs_msg_t *m) {
  // Cannot overflow: SPAWN keeps outq_len + n_live <= kOutqCap (see the top of the file).
  if (s->outq_len == kOutqCap) return;
  s->outq[(s->outq_head + s->outq_len) % kOutqCap] = *m;
  s->outq_len++;
  server_flush(s);
}

// Publishes the exit of slot i, whose child is still an unreaped zombie.
static uint32_t server_publish_exit(server_t *s, uint32_t i, int wait_status) {
  lw_fs_child_status_t *e = &s->table[i];
  // Release: wait_status before exit_seq, so a reader that sees the new exit_seq sees it.
  atomic_store_explicit(&e->wait_status, wait_status, memory_order_release);
  uint32_t seq = atomic_load_explicit(&e->exit_seq, memory_order_relaxed) + 1;  // sole writer
  atomic_store_explicit(&e->exit_seq, seq, memory_order_release);
  s->live[i] = 0;
  s->n_live--;
  return seq;
}

static int server_slot_of(const server_t *s, pid_t pid) {
  for (uint32_t i = 0; i < s->n_slots; ++i) {
    if (s->live[i] == pid) return (int)i;
  }
  return -1;
}

// Publishes and reaps every child that has exited, sending an EXIT for each slot child. An
// adopted orphan (a process a kernel forked whose parent died; see server_loop) has no slot:
// it is reaped without a word, and frees no slot.
static void server_reap(server_t *s) {
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    // WNOWAIT: publish while the child is a zombie, so its pid cannot be reused before the
    // table says it exited (see the top of the file).
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: no children at all
    }
    if (si.si_pid == 0) return;  // children, but none has exited
    pid_t pid = si.si_pid;
    int ws = status_from_siginfo(&si);
    int slot = server_slot_of(s, pid);
    uint32_t seq = 0;
    if (slot >= 0) seq = server_publish_exit(s, (uint32_t)slot, ws);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    if (slot >= 0) {
      lw_fs_msg_t m = {.type = LW_FS_MSG_EXIT, .index = (uint32_t)slot, .seq = seq, .pid = pid,
                       .value = ws};
      server_queue_exit(s, &m);
    }
  }
}

// Closes every fd above 2 except fds[0..n), which move to LW_FS_CHILD_FD0 + i.
static void child_keep_fds(const int *fds, uint32_t n) {
  int floor = LW_FS_CHILD_FD0 + (int)n;
  int tmp[LW_FS_MAX_FDS];
  // Copies above the target range first, so that moving one fd cannot overwrite another.
  for (uint32_t i = 0; i < n; ++i) {
    tmp[i] = fcntl(fds[i], F_DUPFD, floor);
    if (tmp[i] < 0) _exit(LW_CHILD_EXIT_START_FAILED);
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (dup2(tmp[i], LW_FS_CHILD_FD0 + (int)i) < 0) _exit(LW_CHILD_EXIT_START_FAILED);
  }
  if (lw__sys_close_range((unsigned)floor, ~0u, 0) != 0) {
    // Kernels before 5.9: close one by one up to the fd limit.
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur
                   : 65536;
    for (long fd = floor; fd < max; ++fd) close((int)fd);
  }
}

static _Noreturn void server_child(server_t *s, uint32_t index) {
  // The server runs with SIGCHLD blocked and default dispositions; the child starts from the
  // program's own dispositions and an empty mask.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (s->changed[sig]) sigaction(sig, &s->app_action[sig], NULL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  // Safe toward the server: it is single-threaded, so the "parent thread" never exits early.
  // Re-check after the prctl: the server may have died before it took effect.
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != s->self) _exit(LW_CHILD_EXIT_START_FAILED);
  prctl(PR_SET_NAME, s->comm, 0, 0, 0);
  // Isolation (DESIGN 5.1): the child keeps stdio and the fds it was given, at fixed numbers,
  // and nothing else: not the server's sockets, signalfd or pidfd, nor anything the program
  // had open. It does not map the server's status table either.
  child_keep_fds(s->pass_fds, s->n_pass);
  fill_closed_stdio();
  munmap(s->table, s->table_bytes);
  s->main_fn(s->arg, index);
  _exit(LW_CHILD_EXIT_OK);
}

static void server_spawn(server_t *s, const lw_fs_msg_t *req) {
  lw_fs_msg_t rep = {.type = LW_FS_MSG_SPAWN_FAILED, .index = req->index, .seq = req->seq};
  uint32_t i = req->index;
  // A child whose death the parent already saw on its pidfd may not be reaped yet: its
  // SIGCHLD can be pending behind this request. Reap first so such a slot is free.
  server_reap(s);
  if (i >= s->n_slots) {
    rep.value = EINVAL;
  } else if (s->live[i] != 0) {
    rep.value = EBUSY;
    rep.pid = s->live[i];
  } else if (s->outq_len + s->n_live >= kOutqCap) {
    rep.value = ENOBUFS;
  } else {
    pid_t pid = fork();
    if (pid == 0) server_child(s, i);
    if (pid < 0) {
      rep.value = errno;
    } else {
      s->live[i] = pid;
      s->n_live++;
      lw_fs_child_status_t *e = &s->table[i];
      // Release: pid before spawn_seq (slot_read relies on this order).
      atomic_store_explicit(&e->pid, pid, memory_order_release);
      uint32_t seq = atomic_load_explicit(&e->spawn_seq, memory_order_relaxed) + 1;
      atomic_store_explicit(&e->spawn_seq, seq, memory_order_release);
      rep.type = LW_FS_MSG_SPAWNED;
      rep.pid = pid;
    }
  }
  // A refused reply is dropped: the control socket holds at most a few replies (the parent
  // waits for each), so it cannot be full; if the parent is gone, nobody needs it.
  (void)send_msg(s->ctl, &rep);
}

// Stores the pids of the server's children (slot children and adopted orphans) in out, at
// most cap of them, from /proc/<pid>/task/<pid>/children (the server is single-threaded, so
// its one thread has them all). Returns how many; 0 also when the file cannot be read (a
// kernel without CONFIG_PROC_CHILDREN). Allocates nothing: the server never does. The list is
// a snapshot: a child adopted right after it is read shows up in the next call.
static size_t server_list_children(const server_t *s, pid_t *out, size_t cap) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)s->self, (int)s->self);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  size_t len = 0;
  while (len < sizeof(buf)) {
    ssize_t r = read(fd, buf + len, sizeof(buf) - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fd);
  // Each pid is written as "<digits> ": one cut off by a full buffer has no space after it and
  // is skipped (it comes back in the next call, once earlier children are reaped).
  size_t n = 0;
  long v = 0;
  bool digits = false;
  for (size_t i = 0; i < len && n < cap; ++i) {
    char c = buf[i];
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      digits = true;
    } else {
      if (digits && v > 0) out[n++] = (pid_t)v;
      v = 0;
      digits = false;
    }
  }
  return n;
}

// Accounts for a reaped child: a slot child's exit is published; an adopted orphan (a process
// a kernel forked, see server_loop) is nobody's business.
static void server_reaped(server_t *s, pid_t pid, int wait_status) {
  int slot = server_slot_of(s, pid);
  if (slot >= 0) (void)server_publish_exit(s, (uint32_t)slot, wait_status);
}

// SIGKILLs every descendant and reaps every child. Killing an adopted process re-parents its
// own children to the server (a subreaper), so this goes in rounds: list the children, kill
// them, reap, until waitpid says none is left. A process that forks while it is being killed
// is caught the same way in the next round. Every pid killed is an unreaped child of the
// server, so it cannot name a reused pid.
static void server_kill_descendants(server_t *s) {
  for (uint32_t i = 0; i < s->n_slots; ++i) {
    if (s->live[i] != 0) kill(s->live[i], SIGKILL);
  }
  // Rounds in which a child exists that the list does not show (adopted after the read, or no
  // /proc): wait a millisecond and look again, at most this many times.
  enum { kBlindRounds = 1000 };
  uint32_t blind = 0;
  for (;;) {
    pid_t kids[256];
    size_t n = server_list_children(s, kids, sizeof(kids) / sizeof(kids[0]));
    for (size_t i = 0; i < n; ++i) kill(kids[i], SIGKILL);
    // Something killed is still unreaped: a blocking wait returns.
    bool killed_pending = n > 0 || s->n_live > 0;
    int ws = 0;
    pid_t r = waitpid(-1, &ws, killed_pending ? 0 : WNOHANG);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: no child left, so no descendant either (orphans come to the server)
    }
    if (r == 0) {
      // Only on a kernel without the children list (or a child adopted in the instant after
      // the read): what is left there outlives the server, re-parented to init.
      if (++blind > kBlindRounds) return;
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
      continue;
    }
    blind = 0;
    server_reaped(s, r, ws);
    while ((r = waitpid(-1, &ws, WNOHANG)) > 0) server_reaped(s, r, ws);
  }
}

// Kills every descendant and reaps it, then exits. STOP (stop_req != NULL) gets a STOPPED
// reply once nothing the worker started (its children, what their kernels forked) is left.
static _Noreturn void server_teardown(server_t *s, const lw_fs_msg_t *stop_req) {
  server_kill_descendants(s);
  if (stop_req != NULL) {
    lw_fs_msg_t rep = {.type = LW_FS_MSG_STOPPED, .seq = stop_req->seq};
    (void)send_msg(s->ctl, &rep);
  }
  _exit(LW_CHILD_EXIT_OK);
}

static void server_drain_signalfd(int fd) {
  struct signalfd_siginfo buf[8];
  // Signals coalesce, so the count means nothing; server_reap loops until no exit is left.
  while (read(fd, buf, sizeof(buf)) > 0) {
  }
}

static _Noreturn void server_loop(server_t *s) {
  // A subreaper: a process a kernel forks is re-parented to the server, not to init, when its
  // parent dies (a double-forked daemon at once, a kernel's child when its chip child dies), so
  // server_teardown can find and kill it and server_reap reaps it when it exits. Set before
  // the first SPAWN, so it covers every descendant. It cannot fail on Linux >= 3.4, which the
  // pidfds need anyway.
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  for (;;) {
    if (s->parent_gone) server_teardown(s, NULL);
    struct pollfd p[4] = {
        {.fd = s->ppidfd, .events = POLLIN},
        {.fd = s->sigfd, .events = POLLIN},
        {.fd = s->ctl, .events = POLLIN},
        // With no events asked, poll still reports POLLHUP/POLLERR: the parent closed it.
        {.fd = s->ev, .events = s->outq_len > 0 ? POLLOUT : 0},
    };
    if (poll(p, 4, -1) < 0) {
      if (errno == EINTR) continue;
      server_teardown(s, NULL);
    }
    if (p[0].revents != 0) server_teardown(s, NULL);  // the worker process died
    if (p[1].revents & POLLIN) {
      server_drain_signalfd(s->sigfd);
      server_reap(s);
    }
    if (p[2].revents != 0) {
      for (;;) {
        lw_fs_msg_t m;
        int rc = recv_msg(s->ctl, &m);
        if (rc == -EAGAIN) break;
        if (rc == -EBADMSG) continue;  // not ours; the parent only sends lw_fs_msg_t
        if (rc <= 0) server_teardown(s, NULL);  // EOF: the parent closed or exec'd
        if (m.type == LW_FS_MSG_SPAWN) server_spawn(s, &m);
        if (m.type == LW_FS_MSG_STOP) server_teardown(s, &m);
      }
    }
    if (p[3].revents & (POLLHUP | POLLERR)) s->parent_gone = true;
    if (p[3].revents & POLLOUT) server_flush(s);
  }
}

// Runs in the new server process; never returns.
static _Noreturn void server_main(server_t *s, pid_t parent, int parent_ctl, int parent_ev) {
  if (parent_ctl >= 0) close(parent_ctl);
  if (parent_ev >= 0) close(parent_ev);
  // Forked directly from a program without stdio: its pidfd and signalfd must not take those
  // numbers, which its children keep (a zygote's server has them filled already).
  fill_closed_stdio();
  s->self = getpid();
  lw_fs_msg_t ready = {.type = LW_FS_MSG_READY};

  // The program's signal handlers must not run here: they would run program code (locks,
  // stdio, the copied worker) in a process that is not the program. A signal meant for the
  // process group gets its default action instead; if that kills the server, the children
  // follow (PR_SET_PDEATHSIG) and the parent sees UNAVAILABLE.
  // SIGCHLD in particular: SIG_IGN or SA_NOCLDWAIT would make the kernel reap children itself
  // and drop their status; the default disposition queues SIGCHLD (blocked since before the
  // fork) for the signalfd.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (sigaction(sig, NULL, &s->app_action[sig]) != 0) continue;  // reserved by libc
    bool handled = (s->app_action[sig].sa_flags & SA_SIGINFO) != 0 ||
                   (s->app_action[sig].sa_handler != SIG_DFL &&
                    s->app_action[sig].sa_handler != SIG_IGN);
    if (handled || sig == SIGCHLD) s->changed[sig] = sigaction(sig, &dfl, NULL) == 0;
  }
  // A terminal's Ctrl-C (or Ctrl-\) reaches the whole process group: the server must outlive
  // it, since the program may handle SIGINT (e.g. with lw_worker_cancel_all). It dies with
  // its parent through the pidfd below, not through terminal signals.
  struct sigaction ign;
  memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGINT, &ign, NULL);
  sigaction(SIGQUIT, &ign, NULL);
  // Likewise the job-control stops (Ctrl-Z) and a terminal's hangup: a stopped or dead server
  // would hold every spawn and respawn while a program that ignores or handles them runs on.
  // Children get the program's dispositions of these back (a running kernel stops with its
  // program).
  const int job_stops[] = {SIGHUP, SIGTSTP, SIGTTIN, SIGTTOU};
  for (size_t i = 0; i < sizeof(job_stops) / sizeof(job_stops[0]); ++i) {
    if (sigaction(job_stops[i], &ign, NULL) == 0) s->changed[job_stops[i]] = true;
  }
  prctl(PR_GET_NAME, s->comm, 0, 0, 0);
  prctl(PR_SET_NAME, "lw-forkserver", 0, 0, 0);

  // A pidfd, not PR_SET_PDEATHSIG: the death signal follows the thread that forked us, and the
  // worker may start the server from a thread that exits long before the process does.
  s->ppidfd = pidfd_open_above_stdio(parent);
  if (s->ppidfd < 0) {
    ready.index = kStepPidfd;
    ready.value = -s->ppidfd;
    (void)send_msg(s->ctl, &ready);
    _exit(LW_CHILD_EXIT_START_FAILED);
  }
  // The pidfd names whatever process had that pid when it was opened. Still being its child
  // afterwards proves it was our parent and that it is alive.
  if (getppid() != parent) _exit(LW_CHILD_EXIT_OK);

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  s->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (s->sigfd < 0) {
    ready.index = kStepSignalfd;
    ready.value = errno;
    (void)send_msg(s->ctl, &ready);
    _exit(LW_CHILD_EXIT_START_FAILED);
  }
  (void)send_msg(s->ctl, &ready);
  server_loop(s);
}

// --------------------------------------------------------------------------------------------
// Parent side.

static const char *setup_step_name(uint32_t step) {
  switch (step) {
    case kStepPidfd:
      return "pidfd_open(parent)";
    case kStepSignalfd:
      return "signalfd(SIGCHLD)";
    case kStepTable:
      return "mapping the status table";
    case kStepArg:
      return "mapping the children's arguments";
    default:
      return "setup";
  }
}

// Waits (bounded) for the exited server and reaps it. Accepts a server reaped elsewhere.
static void reap_server(lw_forkserver_t *fs, int64_t deadline_ns) {
  if (fs->server_pid <= 0 || fs->server_reaped) return;
  if (fs->server_pidfd < 0) {
    // Only on a failed start before the pidfd existed; the server is our unreaped child.
    kill(fs->server_pid, SIGKILL);
    while (waitpid(fs->server_pid, NULL, 0) < 0 && errno == EINTR) {
    }
    fs->server_reaped = true;
    return;
  }
  if (wait_readable(fs->server_pidfd, deadline_ns) != 1) {
    (void)lw__sys_pidfd_send_signal(fs->server_pidfd, SIGKILL);
  }
  siginfo_t si;
  // P_PIDFD cannot hit a reused pid. ECHILD: someone else reaped it (e.g. a waitpid(-1) in the
  // program, or SIGCHLD set to SIG_IGN).
  while (waitid(P_PIDFD, (id_t)fs->server_pidfd, &si, WEXITED) < 0 && errno == EINTR) {
  }
  fs->server_reaped = true;
}

static void destroy(lw_forkserver_t *fs) {
  reap_server(fs, lw__now_ns() + kStopTimeoutNs);
  if (fs->ctl >= 0) close(fs->ctl);
  if (fs->ev >= 0) close(fs->ev);
  if (fs->server_pidfd >= 0) close(fs->server_pidfd);
  if (fs->table != NULL) munmap(fs->table, fs->table_bytes);
  pthread_mutex_destroy(&fs->mu);
  free(fs);
}

// "fork server (pid N) was killed by SIGKILL" or similar, for UNAVAILABLE messages.
static void describe_server_gone(lw_forkserver_t *fs, char *buf, size_t bytes) {
  siginfo_t si;
  memset(&si, 0, sizeof(si));
  if (fs->server_pidfd >= 0 && !fs->server_reaped) {
    // The socket reaches EOF while the server exits, a moment before its exit is waitable.
    (void)wait_readable(fs->server_pidfd, lw__now_ns() + 100000000);
    // WNOWAIT: leave the zombie for lw__forkserver_stop to reap.
    if (waitid(P_PIDFD, (id_t)fs->server_pidfd, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
      si.si_pid = 0;
    }
  }
  if (si.si_pid != 0) {
    char how[64];
    lw__forkserver_describe_status(status_from_siginfo(&si), how, sizeof(how));
    snprintf(buf, bytes, "fork server (pid %d) is gone: %s", (int)fs->server_pid, how);
  } else {
    snprintf(buf, bytes, "fork server (pid %d) is gone (its socket closed)",
             (int)fs->server_pid);
  }
}

// --------------------------------------------------------------------------------------------
// The zygote (see forkserver.h). Program -> zygote: one zy_req_t with its fds in SCM_RIGHTS,
// in this order: the server's ends of the control and event sockets, the status table's
// memfd, the arg memfd (when arg_bytes > 0), the shares, the fds to pass. Zygote -> program:
// one zy_rep_t, the server's pid or -errno. Requests are serialized by g_zy.mu, and each reply
// echoes its request's seq so a reply to a request that timed out is recognized and skipped.

enum {
  kZyMagic = 0x6c777a79,  // "lwzy"
  kZyMaxObjects = 512,    // objects recorded at zygote time (lw__forkserver_zygote_has_code)
  kZyMaxFds = 4 + LW_FS_MAX_SHARES + LW_FS_MAX_FDS,
};

typedef struct zy_req {
  uint32_t magic;
  uint32_t seq;
  uint32_t n_slots;
  uint32_t n_shares;
  uint32_t n_fds;
  int32_t parent_pid;
  uint64_t main_fn;
  uint64_t arg_bytes;
  uint64_t table_bytes;
  uint64_t share_addr[LW_FS_MAX_SHARES];
  uint64_t share_bytes[LW_FS_MAX_SHARES];
  char comm[16];  // the requesting thread's name, which children take
  // The program's signal dispositions now: the server starts from them (as a directly forked
  // server would) instead of from the zygote's, and children get them back.
  struct sigaction actions[NSIG];
} zy_req_t;

typedef struct zy_rep {
  uint32_t magic;
  uint32_t seq;
  int32_t pid;  // > 0, or -errno
  uint32_t reserved;
} zy_rep_t;

static struct {
  pthread_mutex_t mu;  // one request at a time
  int sock;            // the program's end; -1: no zygote
  pid_t pid;
  pid_t owner;         // the process that started the zygote
  pid_t load_pid;      // the process that loaded liblanework
  bool disabled;       // LW_ZYGOTE=0
  bool lost;           // owner's zygote died (see zy_ensure)
  dev_t sock_dev;      // identity of sock, which the program may close or reuse (zy_ensure)
  ino_t sock_ino;
  uint32_t next_seq;
  uint32_t n_objects;
  uintptr_t object_base[kZyMaxObjects];
  uint64_t object_name[kZyMaxObjects];  // FNV-1a of the path; 0 for the main program ("")
} g_zy = {.mu = PTHREAD_MUTEX_INITIALIZER, .sock = -1};

// Address space for shares. The zygote is forked with this PROT_NONE reservation in place and
// never maps anything inside it, so an address the program takes from it for a share is free
// in every server: the server maps the share there with MAP_FIXED, replacing its own copy of
// the reservation. (Outside the reservation, e.g. once it is full, a share address is merely
// likely to be free in the zygote, and MAP_FIXED_NOREPLACE tells.)
enum { kVaMaxRanges = 256 };
static const size_t kVaReserveBytes = (size_t)64 << 30;

static struct {
  pthread_mutex_t mu;
  uintptr_t base;  // 0: no reservation
  size_t bytes;
  uint32_t n;
  struct {
    uintptr_t lo, hi;
  } used[kVaMaxRanges];  // sorted by lo
  // Shares mapped outside the reservation (it was full, or there is none), so that a zygote
  // started later by this process can drop them too (zy_spawn). A share that does not fit
  // here is still mapped; only that drop misses it.
  uint32_t n_outside;
  struct {
    uintptr_t lo;
    size_t len;
  } outside[kVaMaxRanges];
} g_va = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t page_round(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

static bool va_reserved(uintptr_t addr, size_t len) {
  return g_va.base != 0 && addr >= g_va.base && len <= g_va.bytes &&
         addr - g_va.base <= g_va.bytes - len;
}

// Before a zygote is forked (single-threaded, so no lock). A PROT_NONE mapping costs no
// memory, but it counts against RLIMIT_AS like any other: under a finite limit the
// reservation takes at most an eighth of it (a program under a 72 GiB limit keeps 63 GiB of
// its own, not 8), and shares that do not fit are mapped outside it.
static void va_reserve(void) {
  if (g_va.base != 0) return;
  size_t bytes = kVaReserveBytes;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t cap = (size_t)(rl.rlim_cur / 8) / page * page;
    if (cap < bytes) bytes = cap;
  }
  if (bytes == 0) return;
  void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  g_va.base = (uintptr_t)p;
  g_va.bytes = bytes;
}

// First fit; 0 when the reservation has no room (or there is none). Under g_va.mu.
static uintptr_t va_take(size_t len) {
  if (g_va.base == 0 || g_va.n == kVaMaxRanges) return 0;
  uintptr_t at = g_va.base;
  uint32_t i = 0;
  for (; i <= g_va.n; ++i) {
    uintptr_t end = i < g_va.n ? g_va.used[i].lo : g_va.base + g_va.bytes;
    if (end - at >= len) break;
    if (i == g_va.n) return 0;
    at = g_va.used[i].hi;
  }
  memmove(&g_va.used[i + 1], &g_va.used[i], (g_va.n - i) * sizeof(g_va.used[0]));
  g_va.used[i].lo = at;
  g_va.used[i].hi = at + len;
  g_va.n++;
  return at;
}

static void va_give_back(uintptr_t at) {
  for (uint32_t i = 0; i < g_va.n; ++i) {
    if (g_va.used[i].lo != at) continue;
    memmove(&g_va.used[i], &g_va.used[i + 1], (g_va.n - i - 1) * sizeof(g_va.used[0]));
    g_va.n--;
    return;
  }
}

void *lw__forkserver_share_map(int fd, size_t bytes) {
  size_t len = page_round(bytes);
  pthread_mutex_lock(&g_va.mu);
  uintptr_t at = va_take(len);
  pthread_mutex_unlock(&g_va.mu);
  if (at != 0) {
    void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE,
                   fd, 0);
    if (p != MAP_FAILED) return p;
    pthread_mutex_lock(&g_va.mu);
    va_give_back(at);
    pthread_mutex_unlock(&g_va.mu);
    return NULL;  // the hole is still reserved: MAP_FIXED failed before replacing it
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) return NULL;
  pthread_mutex_lock(&g_va.mu);
  if (g_va.n_outside < kVaMaxRanges) {
    g_va.outside[g_va.n_outside].lo = (uintptr_t)p;
    g_va.outside[g_va.n_outside].len = len;
    g_va.n_outside++;
  }
  pthread_mutex_unlock(&g_va.mu);
  return p;
}

void lw__forkserver_share_unmap(void *addr, size_t bytes) {
  if (addr == NULL) return;
  size_t len = page_round(bytes);
  uintptr_t at = (uintptr_t)addr;
  if (!va_reserved(at, len)) {
    pthread_mutex_lock(&g_va.mu);
    for (uint32_t i = 0; i < g_va.n_outside; ++i) {
      if (g_va.outside[i].lo != at) continue;
      g_va.outside[i] = g_va.outside[--g_va.n_outside];
      break;
    }
    pthread_mutex_unlock(&g_va.mu);
    munmap(addr, len);
    return;
  }
  // Back to PROT_NONE (still reserved), then free for the next share.
  void *p = mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                 -1, 0);
  if (p == MAP_FAILED) {
    munmap(addr, len);  // leaves a hole the allocator keeps marked used: never handed out
    return;
  }
  pthread_mutex_lock(&g_va.mu);
  va_give_back(at);
  pthread_mutex_unlock(&g_va.mu);
}

static uint64_t name_hash(const char *s) {
  if (s == NULL || s[0] == '\0') return 0;
  uint64_t h = 1469598103934665603ull;
  for (; *s != '\0'; ++s) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h | 1;  // never 0, which means "the main program"
}

static int zy_collect(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  if (g_zy.n_objects == kZyMaxObjects) return 1;
  g_zy.object_base[g_zy.n_objects] = (uintptr_t)info->dlpi_addr;
  g_zy.object_name[g_zy.n_objects] = name_hash(info->dlpi_name);
  g_zy.n_objects++;
  return 0;
}

// The object check alone: also valid in the zygote and its servers, which have the list (it
// was recorded before the fork) but not the socket.
static bool zy_object_known(const void *addr) {
  Dl_info info;
  if (dladdr(addr, &info) == 0) return false;
  uint64_t h = name_hash(info.dli_fname);
  for (uint32_t i = 0; i < g_zy.n_objects; ++i) {
    if (g_zy.object_base[i] != (uintptr_t)info.dli_fbase) continue;
    // dladdr names the main program by its path where dl_iterate_phdr says "".
    if (g_zy.object_name[i] == 0 || g_zy.object_name[i] == h) return true;
  }
  return false;
}

bool lw__forkserver_zygote_has_code(const void *addr) {
  pthread_mutex_lock(&g_zy.mu);
  bool has = g_zy.sock >= 0 && zy_object_known(addr);
  pthread_mutex_unlock(&g_zy.mu);
  return has;
}

pid_t lw__forkserver_zygote_pid(void) {
  pthread_mutex_lock(&g_zy.mu);
  pid_t pid = g_zy.sock >= 0 && getpid() == g_zy.owner ? g_zy.pid : 0;
  pthread_mutex_unlock(&g_zy.mu);
  return pid;
}

// "Threads:" of /proc/self/status, read without stdio (this runs before main); -1 if unknown.
static int process_threads(void) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *p = strstr(buf, "\nThreads:");
  if (p == NULL) return -1;
  return atoi(p + strlen("\nThreads:"));
}

// The zygote's half of a request, in the cloned server process: maps what the request names,
// then becomes the server. Failures go to the parent as READY(step, errno).
static _Noreturn void zy_become_server(const zy_req_t *rq, const int *fds) {
  // As a forked server would: SIGCHLD blocked from the start (see lw__forkserver_start), and
  // the program's thread name, which server_main records for the children.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  char comm[16];
  memcpy(comm, rq->comm, sizeof(comm));
  comm[15] = '\0';
  prctl(PR_SET_NAME, comm, 0, 0, 0);
  server_t s;
  memset(&s, 0, sizeof(s));
  s.ctl = fds[0];
  s.ev = fds[1];
  s.sigfd = s.ppidfd = -1;
  s.n_slots = rq->n_slots;
  s.main_fn = (lw_child_main_fn)(uintptr_t)rq->main_fn;
  lw_fs_msg_t ready = {.type = LW_FS_MSG_READY};
  // The shares first, before anything else is mapped here: an mmap(NULL) of this process
  // would be placed where the parent, which made the same calls since the zygote was forked,
  // placed its shares.
  int share_k = 3 + (rq->arg_bytes > 0);
  for (uint32_t i = 0; i < rq->n_shares; ++i) {
    void *want = (void *)(uintptr_t)rq->share_addr[i];
    // Inside the reservation the address is ours (see g_va): replace the PROT_NONE copy.
    int fixed = va_reserved((uintptr_t)want, page_round(rq->share_bytes[i]))
                    ? MAP_FIXED
                    : MAP_FIXED_NOREPLACE;
    void *got = mmap(want, rq->share_bytes[i], PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_NORESERVE | fixed, fds[share_k + i], 0);
    if (got != want) {
      // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and map elsewhere.
      if (got != MAP_FAILED) munmap(got, rq->share_bytes[i]);
      errno = got == MAP_FAILED ? errno : EEXIST;
      ready.index = kStepShare0 + i;
      goto fail;
    }
    close(fds[share_k + i]);
  }
  int k = 2;
  void *table = mmap(NULL, rq->table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[k], 0);
  if (table == MAP_FAILED) {
    ready.index = kStepTable;
    goto fail;
  }
  close(fds[k++]);
  s.table = table;
  s.table_bytes = rq->table_bytes;
  if (rq->arg_bytes > 0) {
    void *arg = mmap(NULL, rq->arg_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[k], 0);
    if (arg == MAP_FAILED) {
      ready.index = kStepArg;
      goto fail;
    }
    close(fds[k++]);
    s.arg = arg;
  }
  k = share_k + (int)rq->n_shares;
  s.n_pass = rq->n_fds;
  for (uint32_t i = 0; i < rq->n_fds; ++i) s.pass_fds[i] = fds[k++];
  // The program's dispositions, where the handler is code the zygote has (a handler in a
  // library loaded later would crash the child it ran in; it keeps the default).
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    const struct sigaction *a = &rq->actions[sig];
    bool handler = (a->sa_flags & SA_SIGINFO) != 0 ||
                   (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
    if (handler && !zy_object_known((const void *)(uintptr_t)a->sa_handler)) {
      continue;
    }
    (void)sigaction(sig, a, NULL);
  }
  server_main(&s, (pid_t)rq->parent_pid, -1, -1);

fail:
  ready.value = errno;
  (void)send_msg(s.ctl, &ready);
  _exit(LW_CHILD_EXIT_START_FAILED);
}

static void close_all(const int *fds, int n) {
  for (int i = 0; i < n; ++i) close(fds[i]);
}

// Receives one request with its fds. 1, 0 on EOF, or -errno; *n_fds fds are the caller's.
static int zy_recv(int sock, zy_req_t *rq, int *fds, int *n_fds) {
  *n_fds = 0;
  union {
    char buf[CMSG_SPACE(sizeof(int) * kZyMaxFds)];
    struct cmsghdr align;
  } cm;
  struct iovec iov = {.iov_base = rq, .iov_len = sizeof(*rq)};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                      .msg_controllen = sizeof(cm.buf)};
  ssize_t n;
  while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return -errno;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    if (got > kZyMaxFds - *n_fds) got = kZyMaxFds - *n_fds;
    memcpy(fds + *n_fds, CMSG_DATA(c), (size_t)got * sizeof(int));
    *n_fds += got;
  }
  if (n == 0) return 0;
  bool ok = n == (ssize_t)sizeof(*rq) && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
            rq->magic == kZyMagic && rq->n_shares <= LW_FS_MAX_SHARES &&
            rq->n_fds <= LW_FS_MAX_FDS &&
            *n_fds == 3 + (rq->arg_bytes > 0) + (int)rq->n_shares + (int)rq->n_fds;
  return ok ? 1 : -EBADMSG;
}

static _Noreturn void zygote_main(int sock, int program_pidfd) {
  prctl(PR_SET_NAME, "lw-zygote", 0, 0, 0);
  // Terminal interrupts reach the whole process group; the zygote leaves with the program
  // (its pidfd), not with them.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // Job control too (Ctrl-Z): a stopped zygote would leave every create waiting, also in a
  // program that ignores or handles SIGTSTP and so keeps running. And a terminal's hangup
  // (SIGHUP to the foreground group), which a program may handle to keep running.
  signal(SIGHUP, SIG_IGN);
  signal(SIGTSTP, SIG_IGN);
  signal(SIGTTIN, SIG_IGN);
  signal(SIGTTOU, SIG_IGN);
  // Keep stdio, the socket and the pidfd: nothing else the program had open at load time.
  int keep[2] = {sock, program_pidfd};
  child_keep_fds(keep, 2);
  sock = LW_FS_CHILD_FD0;
  program_pidfd = LW_FS_CHILD_FD0 + 1;
  // Before the first request: a received fd takes the lowest free number, and a server (and
  // every child) keeps 0..2 as stdio.
  fill_closed_stdio();
  static zy_req_t rq;  // large (the signal table); the zygote is single-threaded
  for (;;) {
    struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = program_pidfd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(LW_CHILD_EXIT_START_FAILED);
    }
    if (p[1].revents != 0) _exit(LW_CHILD_EXIT_OK);  // the program died
    if (p[0].revents == 0) continue;
    int fds[kZyMaxFds], n_fds = 0;
    int rc = zy_recv(sock, &rq, fds, &n_fds);
    // Every copy of the program's end is closed.
    if (rc == 0 || rc == -ECONNRESET) _exit(LW_CHILD_EXIT_OK);
    if (rc < 0 && rc != -EBADMSG) continue;
    zy_rep_t rep = {.magic = kZyMagic, .seq = rq.seq, .pid = -EBADMSG};
    if (rc == 1) {
      // CLONE_PARENT: the server becomes the program's child (its exit signal is the zygote's,
      // SIGCHLD), so the program reaps it and holds its pidfd exactly as after a fork.
      pid_t pid = lw__sys_clone_parent();
      if (pid == 0) {
        close(sock);
        close(program_pidfd);
        zy_become_server(&rq, fds);
      }
      rep.pid = (int32_t)pid;  // the pid, or -errno
    }
    close_all(fds, n_fds);
    (void)send(sock, &rep, sizeof(rep), MSG_NOSIGNAL);
  }
}

// Forks the zygote from this process, which must be single-threaded. Under g_zy.mu (or
// before main). 0 or -errno.
static int zy_spawn(void) {
  va_reserve();
  g_zy.n_objects = 0;
  dl_iterate_phdr(zy_collect, NULL);
  int pidfd = pidfd_open_above_stdio(getpid());
  if (pidfd < 0) return pidfd;
  int sv[2];
  int sp = socketpair_above_stdio(sv);
  if (sp != 0) {
    close(pidfd);
    return sp;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    // A process forked from a program that has workers maps their shares: the zygote, and so
    // every server and child it makes, must not (DESIGN 5.1, a child maps no other worker's
    // memory). A fresh reservation over the whole range, and the shares outside it unmapped.
    if (g_va.base != 0) {
      (void)mmap((void *)g_va.base, g_va.bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    }
    for (uint32_t i = 0; i < g_va.n_outside; ++i) {
      (void)munmap((void *)g_va.outside[i].lo, g_va.outside[i].len);
    }
    zygote_main(sv[1], pidfd);
  }
  int fork_errno = errno;
  close(sv[1]);
  close(pidfd);
  if (pid < 0) {
    close(sv[0]);
    return -fork_errno;
  }
  // A process forked from the program holds a copy of the program's zygote socket: that
  // zygote serves the program, not this process.
  if (g_zy.sock >= 0) close(g_zy.sock);
  g_zy.pid = pid;
  g_zy.owner = getpid();
  g_zy.sock = sv[0];
  g_zy.lost = false;
  struct stat st;
  if (fstat(sv[0], &st) == 0) {
    g_zy.sock_dev = st.st_dev;
    g_zy.sock_ino = st.st_ino;
  }
  return 0;
}

// In a child forked from the program: another thread of the parent may have held g_zy.mu at
// the fork. The inherited zygote is not this process's (g_zy.owner differs), so nothing the
// lock guarded is used here before zy_ensure replaces it.
static void zy_atfork_child(void) {
  pthread_mutex_init(&g_zy.mu, NULL);
  pthread_mutex_init(&g_va.mu, NULL);
}

// A zygote this process may use, started now if there is none and the process is still
// single-threaded (a process forked from the program, or liblanework loaded by a program that
// had not started threads yet). Under g_zy.mu.
// 1: a zygote is ready; 0: none, fork directly (see forkserver.h); -1: none, and this
// process lost its zygote while it has threads, so a direct fork would be unsafe: refuse.
static int zy_ensure(void) {
  if (g_zy.sock >= 0 && g_zy.owner == getpid()) {
    struct stat st;
    if (fstat(g_zy.sock, &st) == 0 && st.st_dev == g_zy.sock_dev && st.st_ino == g_zy.sock_ino) {
      return 1;
    }
    // The program closed lanework's zygote socket (the socket is opened before main, so a
    // program that closes every fd it did not open, as daemons do, closes it too), and the
    // number may name another file by now: it is not ours to use or to close. The zygote saw
    // EOF and is leaving (or will be killed here); reap it, then start over as if it died.
    g_zy.sock = -1;
    g_zy.lost = true;
    // Killed only while it is still our unreaped child (so the pid cannot name another
    // process); ECHILD: the program reaped it already.
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)g_zy.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0) {
      if (si.si_pid == 0) kill(g_zy.pid, SIGKILL);
      while (waitpid(g_zy.pid, NULL, 0) < 0 && errno == EINTR) {
      }
    }
  }
  if (g_zy.disabled) return 0;
  int allowed = 1;
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer starts a background thread of its own in every forked child.
  if (getpid() != g_zy.load_pid) allowed = 2;
#endif
  int n = process_threads();
  if (n >= 1 && n <= allowed && zy_spawn() == 0) return 1;
  return g_zy.lost && g_zy.owner == getpid() ? -1 : 0;
}

bool lw__forkserver_zygote_ensure(void) {
  pthread_mutex_lock(&g_zy.mu);
  bool ok = zy_ensure() == 1;
  pthread_mutex_unlock(&g_zy.mu);
  return ok;
}

__attribute__((constructor)) static void zygote_start(void) {
  for (int i = 0; i <= 2; ++i) {
    if (fcntl(i, F_GETFD) < 0 && errno == EBADF) g_stdio_closed |= 1u << i;
  }
  g_zy.load_pid = getpid();
  (void)pthread_atfork(NULL, NULL, zy_atfork_child);
  const char *opt = getenv("LW_ZYGOTE");
  if (opt != NULL && strcmp(opt, "0") == 0) {
    g_zy.disabled = true;
    return;
  }
  // Only a single-threaded process can be copied without inheriting another thread's locks.
  if (process_threads() == 1) (void)zy_spawn();
}

// Asks the zygote for a server. The server's pid, or -errno (-ETIMEDOUT: no answer by
// deadline_ns; -EPIPE / -ECONNRESET: the zygote is gone).
static int zy_request(const lw_fs_spec_t *spec, int ctl_srv, int ev_srv, int table_fd,
                      size_t table_bytes, int arg_fd, int64_t deadline_ns, pid_t *out_zygote) {
  static zy_req_t rq;  // large; guarded by g_zy.mu
  pthread_mutex_lock(&g_zy.mu);
  *out_zygote = g_zy.pid;
  if (g_zy.sock < 0) {
    pthread_mutex_unlock(&g_zy.mu);
    return -ECONNRESET;  // another thread found it gone since this create checked
  }
  memset(&rq, 0, sizeof(rq));
  rq.magic = kZyMagic;
  rq.seq = ++g_zy.next_seq;
  rq.n_slots = spec->n_slots;
  rq.n_shares = spec->n_shares;
  rq.n_fds = spec->n_fds;
  rq.parent_pid = (int32_t)getpid();
  rq.main_fn = (uint64_t)(uintptr_t)spec->main_fn;
  rq.arg_bytes = arg_fd >= 0 ? spec->arg_bytes : 0;
  rq.table_bytes = table_bytes;
  int fds[kZyMaxFds], n = 0;
  fds[n++] = ctl_srv;
  fds[n++] = ev_srv;
  fds[n++] = table_fd;
  if (arg_fd >= 0) fds[n++] = arg_fd;
  for (uint32_t i = 0; i < spec->n_shares; ++i) {
    rq.share_addr[i] = (uint64_t)(uintptr_t)spec->shares[i].addr;
    rq.share_bytes[i] = spec->shares[i].bytes;
    fds[n++] = spec->shares[i].fd;
  }
  for (uint32_t i = 0; i < spec->n_fds; ++i) fds[n++] = spec->fds[i];
  for (int sig = 1; sig < NSIG; ++sig) (void)sigaction(sig, NULL, &rq.actions[sig]);
  prctl(PR_GET_NAME, rq.comm, 0, 0, 0);

  union {
    char buf[CMSG_SPACE(sizeof(int) * kZyMaxFds)];
    struct cmsghdr align;
  } cm;
  memset(&cm, 0, sizeof(cm));
  struct iovec iov = {.iov_base = &rq, .iov_len = sizeof(rq)};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                      .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
  int result;
  ssize_t sent;
  while ((sent = sendmsg(g_zy.sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent < 0) {
    result = -errno;
    goto out;
  }
  for (;;) {
    int rc = wait_readable(g_zy.sock, deadline_ns);
    if (rc <= 0) {
      result = rc == 0 ? -ETIMEDOUT : rc;
      goto out;
    }
    zy_rep_t rep;
    ssize_t got = recv(g_zy.sock, &rep, sizeof(rep), MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      result = got == 0 ? -ECONNRESET : -errno;
      goto out;
    }
    if (got == (ssize_t)sizeof(rep) && rep.magic == kZyMagic && rep.seq == rq.seq) {
      result = rep.pid;
      goto out;
    }
    // A reply to an earlier request that timed out: its caller gave up and closed the
    // control socket, so that server is useless. It is this process's child: end and reap it
    // here, since nobody else knows its pid.
    if (got == (ssize_t)sizeof(rep) && rep.magic == kZyMagic && rep.pid > 0) {
      int pidfd = pidfd_open_above_stdio(rep.pid);
      if (pidfd >= 0) {
        (void)lw__sys_pidfd_send_signal(pidfd, SIGKILL);
        siginfo_t si;
        while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR) {
        }
        close(pidfd);
      }
    }
  }
out:
  if (result == -EPIPE || result == -ECONNRESET) {
    // The zygote is gone (killed from outside). Forget it and reap it (it is this process's
    // child); the next create starts a new one if this process is single-threaded then.
    close(g_zy.sock);
    g_zy.sock = -1;
    g_zy.lost = true;
    while (waitpid(g_zy.pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  pthread_mutex_unlock(&g_zy.mu);
  return result;
}

// An anonymous memfd of bytes, holding data when not NULL. -errno on failure.
static int memfd_with(const char *name, const void *data, size_t bytes) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -errno;
  fd = lw__forkserver_fd_above_stdio(fd);
  if (fd < 0) return fd;
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (data != NULL) {
    const uint8_t *p = data;
    size_t left = bytes;
    off_t off = 0;
    while (left > 0) {
      ssize_t n = pwrite(fd, p, left, off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = n < 0 ? errno : EIO;
        close(fd);
        return -e;
      }
      p += n;
      left -= (size_t)n;
      off += n;
    }
  }
  return fd;
}

static lw_status_t start_impl(const lw_fs_spec_t *spec, bool direct, lw_forkserver_t **out,
                              lw_error_t *err) {
  if (out == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: out is NULL");
  }
  *out = NULL;
  if (spec->main_fn == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: main_fn is NULL");
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
  uint32_t n_slots = spec->n_slots;
  bool zygote = false;
  if (!direct) {
    pthread_mutex_lock(&g_zy.mu);
    int z = zy_ensure();
    pid_t lost = g_zy.pid;
    pthread_mutex_unlock(&g_zy.mu);
    if (z < 0) {
      return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                           "forkserver: lanework's zygote (pid %d) is gone and this process "
                           "has threads now, so no fork server can be started safely (a fork "
                           "would copy locks other threads hold)",
                           (int)lost);
    }
    zygote = z == 1;
  }

  lw_forkserver_t *fs = calloc(1, sizeof(*fs));
  if (fs == NULL) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: out of memory");
  }
  fs->ctl = fs->ev = fs->server_pidfd = -1;
  fs->n_slots = n_slots;
  fs->from_zygote = zygote;
  pthread_mutex_init(&fs->mu, NULL);
  lw_status_t st = LW_OK;
  int ctl[2] = {-1, -1}, ev[2] = {-1, -1};
  int table_fd = -1, arg_fd = -1;

  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = (size_t)n_slots * sizeof(lw_fs_child_status_t);
  fs->table_bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
  // A memfd, so that a server cloned by the zygote can map it too.
  table_fd = memfd_with("lw-fs-table", NULL, fs->table_bytes);
  void *table = table_fd < 0 ? MAP_FAILED
                             : mmap(NULL, fs->table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                                    table_fd, 0);
  if (table == MAP_FAILED) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       "forkserver: cannot create the status table: %s",
                       strerror(table_fd < 0 ? -table_fd : errno));
    goto fail;
  }
  fs->table = table;  // zero-filled: pid 0 (never spawned), sequences 0
  if (zygote && spec->arg_bytes > 0) {
    arg_fd = memfd_with("lw-fs-arg", spec->arg, spec->arg_bytes);
    if (arg_fd < 0) {
      st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "forkserver: cannot copy the children's arguments: %s",
                         strerror(-arg_fd));
      goto fail;
    }
  }

  int sp = socketpair_above_stdio(ctl);
  if (sp == 0) sp = socketpair_above_stdio(ev);
  if (sp != 0) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: socketpair: %s",
                       strerror(-sp));
    if (ctl[0] >= 0) close(ctl[0]);
    if (ctl[1] >= 0) close(ctl[1]);
    goto fail;
  }
  fs->ctl = ctl[0];
  fs->ev = ev[0];
  int64_t deadline = lw__now_ns() + kStartTimeoutNs;
  pid_t pid;
  if (zygote) {
    pid_t zygote_pid = 0;
    int rc = zy_request(spec, ctl[1], ev[1], table_fd, fs->table_bytes, arg_fd, deadline,
                        &zygote_pid);
    close(ctl[1]);
    close(ev[1]);
    if (rc <= 0) {
      st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "forkserver: the zygote (pid %d) could not start a server: %s%s",
                         (int)zygote_pid, strerror(-rc),
                         rc == -EPIPE || rc == -ECONNRESET ? " (the zygote is gone)" : "");
      goto fail;
    }
    pid = rc;
  } else {
    // Prepared here, copied into the server by fork; the server itself allocates nothing.
    server_t proto;
    memset(&proto, 0, sizeof(proto));
    proto.ctl = ctl[1];
    proto.ev = ev[1];
    proto.sigfd = proto.ppidfd = -1;
    proto.n_slots = n_slots;
    proto.table = fs->table;
    proto.table_bytes = fs->table_bytes;
    proto.main_fn = spec->main_fn;
    proto.arg = (void *)spec->arg;
    proto.n_pass = spec->n_fds;
    for (uint32_t i = 0; i < spec->n_fds; ++i) proto.pass_fds[i] = spec->fds[i];
    pid_t parent = getpid();

    // SIGCHLD is blocked across the fork so that the server starts with it blocked and no
    // SIGCHLD of a fast-dying child can be lost before its signalfd exists.
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, &old);
    // Unflushed stdio data would otherwise be copied into every child and written twice.
    fflush(NULL);
    pid = fork();
    if (pid == 0) server_main(&proto, parent, ctl[0], ev[0]);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(ctl[1]);
    close(ev[1]);
    if (pid < 0) {
      st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "forkserver: fork: %s",
                         strerror(fork_errno));
      goto fail;
    }
  }
  close(table_fd);
  table_fd = -1;
  if (arg_fd >= 0) close(arg_fd);
  arg_fd = -1;
  fs->server_pid = pid;

  int pidfd = pidfd_open_above_stdio(pid);
  if (pidfd < 0) {
    st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                       "forkserver: pidfd_open(server pid %d): %s (Linux >= 5.3)", (int)pid,
                       strerror(-pidfd));
    goto fail;
  }
  fs->server_pidfd = pidfd;

  // The server reports its setup in READY, so a failure there surfaces here, not at spawn.
  for (;;) {
    lw_fs_msg_t m;
    int rc = recv_msg(fs->ctl, &m);
    if (rc == -EAGAIN) {
      rc = wait_readable(fs->ctl, deadline);
      if (rc == 1) continue;
      st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "forkserver: server (pid %d) did not start within %d s", (int)pid,
                         (int)(kStartTimeoutNs / 1000000000));
      goto fail;
    }
    if (rc == 1 && m.type == LW_FS_MSG_READY) {
      if (m.value == 0) break;
      if (m.index >= kStepShare0 && m.index - kStepShare0 < spec->n_shares) {
        uint32_t i = m.index - kStepShare0;
        st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                           "forkserver: the server cannot map share %u (%zu bytes) at %p, the "
                           "address it has in this process: %s (the zygote holds that "
                           "address; LW_ZYGOTE=0 forks directly)",
                           i, spec->shares[i].bytes, spec->shares[i].addr, strerror(m.value));
      } else {
        st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                           "forkserver: server setup failed at %s: %s", setup_step_name(m.index),
                           strerror(m.value));
      }
      goto fail;
    }
    if (rc == 1) continue;
    char why[128];
    describe_server_gone(fs, why, sizeof(why));
    st = lw__error_set(err, LW_UNAVAILABLE, -1, 0, "forkserver: %s before it was ready", why);
    goto fail;
  }
  *out = fs;
  return LW_OK;

fail:
  if (table_fd >= 0) close(table_fd);
  if (arg_fd >= 0) close(arg_fd);
  // A half-started server is killed now rather than given the stop timeout.
  if (fs->server_pidfd >= 0) (void)lw__sys_pidfd_send_signal(fs->server_pidfd, SIGKILL);
  destroy(fs);
  return st;
}

lw_status_t lw__forkserver_start(lw_child_main_fn main_fn, void *arg, uint32_t n_slots,
                                lw_forkserver_t **out, lw_error_t *err) {
  lw_fs_spec_t spec = {.main_fn = main_fn, .arg = arg, .n_slots = n_slots};
  return start_impl(&spec, true, out, err);
}

lw_status_t lw__forkserver_start_spec(const lw_fs_spec_t *spec, lw_forkserver_t **out,
                                     lw_error_t *err) {
  if (spec == NULL) {
    if (out != NULL) *out = NULL;
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "forkserver: spec is NULL");
  }
  return start_impl(spec, false, out, err);
}

bool lw__forkserver_from_zygote(const lw_forkserver_t *fs) { return fs != NULL && fs->from_zygote; }

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
  int pidfd = pidfd_open_above_stdio(m->pid);
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
  int pidfd = pidfd_open_above_stdio(pid);
  int ws = 0;
  if (lw__forkserver_exit_status(fs, i, pid, &ws)) {
    if (pidfd >= 0) close(pidfd);
    char how[64];
    lw__forkserver_describe_status(ws, how, sizeof(how));
    return lw__error_set(err, LW_CHILD_EXITED, wid, 0,
                         "forkserver: child %u (pid %d) died right after fork: %s", i, (int)pid,
                         how);
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
  int rc = send_msg(fs->ctl, &m);
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
    rc = recv_msg(fs->ctl, &m);
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
      rc = wait_readable(fs->ctl, deadline_ns);
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
  // lw__forkserver_spawn.
  for (;;) {
    lw_fs_msg_t m;
    int rc = recv_msg(fs->ev, &m);
    if (rc == 1) {
      // The server is trusted code, but check anyway before indexing with its numbers.
      if (fn != NULL && m.type == LW_FS_MSG_EXIT && m.index < fs->n_slots && m.pid > 0) {
        fn(ctx, m.index, m.pid, m.value);
      }
      continue;
    }
    if (rc == -EAGAIN) return LW_OK;
    if (rc == -EBADMSG) continue;
    // EOF comes after every queued EXIT has been read: nothing is lost before it.
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
    if (send_msg(fs->ctl, &m) == 0) {
      // Wait for STOPPED: by then every child is dead and reaped. Other replies are stale.
      for (;;) {
        int rc = recv_msg(fs->ctl, &m);
        if (rc == 1 && m.type == LW_FS_MSG_STOPPED) break;
        if (rc == 1 || rc == -EBADMSG) continue;
        if (rc == -EAGAIN && wait_readable(fs->ctl, deadline) == 1) continue;
        break;  // EOF, error or deadline: reap_server SIGKILLs it; children get PDEATHSIG
      }
    }
  }
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
