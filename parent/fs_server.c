// parent/fs_server.c — a fork server process (fs_server.h). Only plain syscalls and
// async-signal-safe calls in here: the server never allocates, never takes a lock, never
// starts a thread.
//
// No exit is lost:
//   - The server publishes every exit in the shared table before it reaps the child, then
//     queues an EXIT message.
//   - EXIT messages are sent without blocking. When the event socket is full, the server keeps
//     them in a fixed FIFO (LW_FS_OUTQ_CAP) and flushes it when the socket turns writable.
//   - The FIFO never overflows: the server refuses SPAWN (ENOBUFS) while
//     queued EXITs + live children >= LW_FS_OUTQ_CAP. Every future EXIT belongs to a live
//     child, and each slot holds at most one live child (SPAWN of a busy slot fails with
//     EBUSY), so queued + live never grows past the cap.
//
// Pids are never confused: the server peeks each exit with waitid(WNOWAIT), publishes it, and
// only then reaps the zombie. A pid can be reused only after the reap, so when the program
// opens a pidfd and afterwards reads "not exited" from the table, the pidfd names that child.
#include "parent/fs_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "parent/fs_afterfork.h"
#include "parent/fs_shares.h"


static void server_flush(lw_fs_server_t *s) {
  while (s->outq_len > 0) {
    int rc = lw__fs_send(s->ev, &s->outq[s->outq_head]);
    if (rc == -EAGAIN) return;  // the loop polls for POLLOUT while the queue is non-empty
    if (rc < 0) {
      s->parent_gone = true;  // EPIPE and friends: the parent closed its end
      return;
    }
    s->outq_head = (s->outq_head + 1) % LW_FS_OUTQ_CAP;
    s->outq_len--;
  }
}

static void server_queue_exit(lw_fs_server_t *s, const lw_fs_msg_t *m) {
  // Cannot overflow: SPAWN keeps outq_len + n_live <= LW_FS_OUTQ_CAP (see the top of the file).
  if (s->outq_len == LW_FS_OUTQ_CAP) return;
  s->outq[(s->outq_head + s->outq_len) % LW_FS_OUTQ_CAP] = *m;
  s->outq_len++;
  server_flush(s);
}

// Publishes the exit of slot i, whose child is still an unreaped zombie.
static uint32_t server_publish_exit(lw_fs_server_t *s, uint32_t i, int wait_status) {
  lw_fs_child_status_t *e = &s->table[i];
  // Release: wait_status before exit_seq, so a reader that sees the new exit_seq sees it.
  atomic_store_explicit(&e->wait_status, wait_status, memory_order_release);
  uint32_t seq = atomic_load_explicit(&e->exit_seq, memory_order_relaxed) + 1;  // sole writer
  atomic_store_explicit(&e->exit_seq, seq, memory_order_release);
  s->live[i] = 0;
  s->n_live--;
  return seq;
}

static int server_slot_of(const lw_fs_server_t *s, pid_t pid) {
  for (uint32_t i = 0; i < s->n_slots; ++i) {
    if (s->live[i] == pid) return (int)i;
  }
  return -1;
}

// Publishes and reaps every child that has exited, sending an EXIT for each slot child. An
// adopted orphan (a process a kernel forked whose parent died; see server_loop) has no slot:
// it is reaped without a word, and frees no slot.
static void server_reap(lw_fs_server_t *s) {
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
    int ws = lw__fs_status_from_siginfo(&si);
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

static _Noreturn void server_child(lw_fs_server_t *s, uint32_t index) {
  // The server runs with SIGCHLD blocked and default dispositions; the child starts from the
  // program's own dispositions and an empty mask.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!s->changed[sig]) continue;
    const struct sigaction *a = &s->app_action[sig];
    bool handler = (a->sa_flags & SA_SIGINFO) != 0 ||
                   (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
    if (!(s->clean && handler)) sigaction(sig, a, NULL);
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
  lw__fs_keep_fds(s->pass_fds, s->n_pass);
  lw__fs_fill_closed_stdio();
  munmap(s->table, s->table_bytes);
  s->main_fn(s->arg, index);
  _exit(LW_CHILD_EXIT_OK);
}

// KILL(index, pid): the program has no pidfd of the child (pidfd_open refused, e.g. under
// valgrind), so it asks the server, whose unreaped child the pid names.
static void server_kill_one(lw_fs_server_t *s, const lw_fs_msg_t *req) {
  if (req->index < s->n_slots && req->pid > 0 && s->live[req->index] == req->pid) {
    kill(req->pid, SIGKILL);
  }
}

static void server_spawn(lw_fs_server_t *s, const lw_fs_msg_t *req) {
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
  } else if (s->outq_len + s->n_live >= LW_FS_OUTQ_CAP) {
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
  (void)lw__fs_send(s->ctl, &rep);
}

// Stores the pids of the server's children (slot children and adopted orphans) in out, at
// most cap of them, from /proc/<pid>/task/<pid>/children (the server is single-threaded, so
// its one thread has them all). Returns how many; 0 also when the file cannot be read (a
// kernel without CONFIG_PROC_CHILDREN). Allocates nothing: the server never does. The list is
// a snapshot: a child adopted right after it is read shows up in the next call.
static size_t server_list_children(const lw_fs_server_t *s, pid_t *out, size_t cap) {
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
static void server_reaped(lw_fs_server_t *s, pid_t pid, int wait_status) {
  int slot = server_slot_of(s, pid);
  if (slot >= 0) (void)server_publish_exit(s, (uint32_t)slot, wait_status);
}

// SIGKILLs every descendant and reaps every child. Killing an adopted process re-parents its
// own children to the server (a subreaper), so this goes in rounds: list the children, kill
// them, reap, until waitpid says none is left. A process that forks while it is being killed
// is caught the same way in the next round. Every pid killed is an unreaped child of the
// server, so it cannot name a reused pid.
static void server_kill_descendants(lw_fs_server_t *s) {
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
static _Noreturn void lw_fs_server_teardown(lw_fs_server_t *s, const lw_fs_msg_t *stop_req) {
  server_kill_descendants(s);
  if (stop_req != NULL) {
    lw_fs_msg_t rep = {.type = LW_FS_MSG_STOPPED, .seq = stop_req->seq};
    (void)lw__fs_send(s->ctl, &rep);
  }
  _exit(LW_CHILD_EXIT_OK);
}

static void server_drain_signalfd(int fd) {
  struct signalfd_siginfo buf[8];
  // Signals coalesce, so the count means nothing; server_reap loops until no exit is left.
  while (read(fd, buf, sizeof(buf)) > 0) {
  }
}

static _Noreturn void server_loop(lw_fs_server_t *s) {
  // A subreaper: a process a kernel forks is re-parented to the server, not to init, when its
  // parent dies (a double-forked daemon at once, a kernel's child when its chip child dies), so
  // lw_fs_server_teardown can find and kill it and server_reap reaps it when it exits. Set before
  // the first SPAWN, so it covers every descendant. It cannot fail on Linux >= 3.4, which the
  // pidfds need anyway.
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  for (;;) {
    if (s->parent_gone) lw_fs_server_teardown(s, NULL);
    struct pollfd p[4] = {
        {.fd = s->ppidfd, .events = POLLIN},  // -1 without pidfds: ignored by poll
        {.fd = s->sigfd, .events = POLLIN},
        {.fd = s->ctl, .events = POLLIN},
        // With no events asked, poll still reports POLLHUP/POLLERR: the parent closed it.
        {.fd = s->ev, .events = s->outq_len > 0 ? POLLOUT : 0},
    };
    if (poll(p, 4, -1) < 0) {
      if (errno == EINTR) continue;
      lw_fs_server_teardown(s, NULL);
    }
    if (p[0].revents != 0) lw_fs_server_teardown(s, NULL);  // the worker process died
    if (p[1].revents & POLLIN) {
      server_drain_signalfd(s->sigfd);
      server_reap(s);
    }
    if (p[2].revents != 0) {
      for (;;) {
        lw_fs_msg_t m;
        int rc = lw__fs_recv(s->ctl, &m);
        if (rc == -EAGAIN) break;
        if (rc == -EBADMSG) continue;  // not ours; the parent only sends lw_fs_msg_t
        if (rc <= 0) lw_fs_server_teardown(s, NULL);  // EOF: the parent closed or exec'd
        if (m.type == LW_FS_MSG_SPAWN) server_spawn(s, &m);
        if (m.type == LW_FS_MSG_STOP) lw_fs_server_teardown(s, &m);
        if (m.type == LW_FS_MSG_KILL) server_kill_one(s, &m);
      }
    }
    if (p[3].revents & (POLLHUP | POLLERR)) s->parent_gone = true;
    if (p[3].revents & POLLOUT) server_flush(s);
  }
}

// Runs in the new server process; never returns.
_Noreturn void lw__fs_server_main(lw_fs_server_t *s, pid_t parent, int parent_ctl, int parent_ev) {
  if (parent_ctl >= 0) close(parent_ctl);
  if (parent_ev >= 0) close(parent_ev);
  // Forked directly from a program without stdio: its pidfd and signalfd must not take those
  // numbers, which its children keep (a zygote's server has them filled already).
  lw__fs_fill_closed_stdio();
  s->self = getpid();
  lw_fs_msg_t ready = {.type = LW_FS_MSG_READY, .pid = (int32_t)s->self};

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

  // A pidfd, not PR_SET_PDEATHSIG: the server is not the worker's child (docs/processes.md),
  // and even a directly forked one would follow the thread that forked it. Without pidfds
  // (pidfd_open refused, e.g. by valgrind) the server watches the control socket alone: it
  // hangs up when the last copy of the program's end closes.
  s->ppidfd = lw__fs_pidfd_open(parent);
  if (s->ppidfd < 0 && s->ppidfd != -ENOSYS && s->ppidfd != -EPERM) {
    ready.index = LW_FS_STEP_PIDFD;
    ready.value = -s->ppidfd;
    (void)lw__fs_send(s->ctl, &ready);
    _exit(LW_CHILD_EXIT_START_FAILED);
  }
  // The pidfd names whatever process had that pid when it was opened. The program holds the
  // other end of the control socket and waits for READY: while that end is open, the program
  // is alive, so the pid was still its own.
  struct pollfd hup = {.fd = s->ctl, .events = 0};
  if (poll(&hup, 1, 0) != 0 && (hup.revents & (POLLHUP | POLLERR)) != 0) _exit(LW_CHILD_EXIT_OK);

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  s->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (s->sigfd < 0) {
    ready.index = LW_FS_STEP_SIGNALFD;
    ready.value = errno;
    (void)lw__fs_send(s->ctl, &ready);
    _exit(LW_CHILD_EXIT_START_FAILED);
  }
  (void)lw__fs_send(s->ctl, &ready);
  server_loop(s);
}


_Noreturn void lw__fs_server_from_request(const lw_fs_req_t *rq, const int *fds,
                                          lw_fs_where_t where, lw_child_main_fn main_fn,
                                          bool (*handler_ok)(const void *addr)) {
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
  lw_fs_server_t s;
  memset(&s, 0, sizeof(s));
  s.ctl = fds[0];
  s.ev = fds[1];
  s.sigfd = s.ppidfd = -1;
  s.n_slots = rq->n_slots;
  s.main_fn = main_fn;
  s.clean = where == LW_FS_MAP_ANYWHERE;
  lw_fs_msg_t ready = {.type = LW_FS_MSG_READY, .pid = (int32_t)getpid()};
  // The shares first, before anything else is mapped here: an mmap(NULL) of this process
  // would be placed where the parent, which made the same calls since the zygote was forked,
  // placed its shares.
  int share_k = 3 + (rq->arg_bytes > 0);
  for (uint32_t i = 0; i < rq->n_shares; ++i) {
    void *want = (void *)(uintptr_t)rq->share_addr[i];
    if (where == LW_FS_MAP_ANYWHERE) {
      // A fresh process: map it where the kernel likes and note the move for the children.
      void *got = mmap(NULL, rq->share_bytes[i], PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_NORESERVE, fds[share_k + i], 0);
      if (got == MAP_FAILED) {
        ready.index = LW_FS_STEP_SHARE0 + i;
        goto fail;
      }
      lw__fs_shares_note_local(i, (uintptr_t)want, (uintptr_t)got, rq->share_bytes[i]);
      close(fds[share_k + i]);
      continue;
    }
    // Inside the reservation the address is ours (fs_shares.h): replace the PROT_NONE copy.
    int fixed = lw__fs_shares_reserved((uintptr_t)want, lw__fs_page_round(rq->share_bytes[i]))
                    ? MAP_FIXED
                    : MAP_FIXED_NOREPLACE;
    void *got = mmap(want, rq->share_bytes[i], PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_NORESERVE | fixed, fds[share_k + i], 0);
    if (got != want) {
      // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and map elsewhere.
      if (got != MAP_FAILED) munmap(got, rq->share_bytes[i]);
      errno = got == MAP_FAILED ? errno : EEXIST;
      ready.index = LW_FS_STEP_SHARE0 + i;
      goto fail;
    }
    close(fds[share_k + i]);
  }
  int k = 2;
  void *table = mmap(NULL, rq->table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[k], 0);
  if (table == MAP_FAILED) {
    ready.index = LW_FS_STEP_TABLE;
    goto fail;
  }
  close(fds[k++]);
  s.table = table;
  s.table_bytes = rq->table_bytes;
  if (rq->arg_bytes > 0) {
    void *arg = mmap(NULL, rq->arg_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[k], 0);
    if (arg == MAP_FAILED) {
      ready.index = LW_FS_STEP_ARG;
      goto fail;
    }
    close(fds[k++]);
    s.arg = arg;
  }
  k = share_k + (int)rq->n_shares;
  s.n_pass = rq->n_fds;
  for (uint32_t i = 0; i < rq->n_fds; ++i) s.pass_fds[i] = fds[k++];
  // A zygote's server: the program's dispositions, where the handler is code the zygote has
  // (a handler in a library loaded later would crash the child it ran in; it keeps the
  // default). A helper's server has none of the program's code: it keeps its defaults.
  for (int sig = 1; handler_ok != NULL && sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    const struct sigaction *a = &rq->actions[sig];
    bool handler = (a->sa_flags & SA_SIGINFO) != 0 ||
                   (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
    if (handler && !handler_ok((const void *)(uintptr_t)a->sa_handler)) continue;
    (void)sigaction(sig, a, NULL);
  }
  lw__fs_server_main(&s, (pid_t)rq->parent_pid, -1, -1);

fail:
  ready.value = errno;
  (void)lw__fs_send(s.ctl, &ready);
  _exit(LW_CHILD_EXIT_START_FAILED);
}

