// parent/fs_zygote.c — the zygote and the program's side of it (fs_zygote.h).
#include "parent/fs_zygote.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child/child_exit.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "parent/fs_afterfork.h"
#include "parent/fs_server.h"
#include "parent/fs_shares.h"

enum {
  kZyMaxObjects = 512,               // objects recorded when the zygote was made
  kZyHelloTimeoutNs = 5000000000LL,  // how long the program waits for the zygote's hello
};

static struct {
  pthread_mutex_t mu;  // one request at a time; guards everything below
  int sock;            // the program's end; -1: no zygote
  pid_t pid;
  pid_t owner;         // the process that started the zygote
  dev_t sock_dev;      // identity of sock, which the program may close or reuse (ensure)
  ino_t sock_ino;
  uint32_t next_seq;
  uint32_t n_objects;
  uintptr_t object_base[kZyMaxObjects];
  uint64_t object_name[kZyMaxObjects];  // FNV-1a of the path; 0 for the main program ("")
} g_zy = {.mu = PTHREAD_MUTEX_INITIALIZER, .sock = -1};

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

// ---------------------------------------------------------------------------------------------
// The registry of loaded objects.

static uint64_t name_hash(const char *s) {
  if (s == NULL || s[0] == '\0') return 0;
  uint64_t h = 1469598103934665603ull;
  for (; *s != '\0'; ++s) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h | 1;  // never 0, which means "the main program"
}

static int collect(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  if (g_zy.n_objects == kZyMaxObjects) return 1;
  g_zy.object_base[g_zy.n_objects] = (uintptr_t)info->dlpi_addr;
  g_zy.object_name[g_zy.n_objects] = name_hash(info->dlpi_name);
  g_zy.n_objects++;
  return 0;
}

// The object check alone: also valid in the zygote and its servers, which have the list.
static bool object_known(const void *addr) {
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
  bool has = g_zy.sock >= 0 && g_zy.owner == getpid() && object_known(addr);
  pthread_mutex_unlock(&g_zy.mu);
  return has;
}

pid_t lw__forkserver_zygote_pid(void) {
  pthread_mutex_lock(&g_zy.mu);
  pid_t pid = g_zy.sock >= 0 && getpid() == g_zy.owner ? g_zy.pid : 0;
  pthread_mutex_unlock(&g_zy.mu);
  return pid;
}

// ---------------------------------------------------------------------------------------------
// The zygote process.

// "Threads:" of /proc/self/status; -1 if unknown.
static int process_threads(void) {
  char buf[4096];
  if (lw__sys_read_small_file("/proc/self/status", buf, sizeof(buf)) < 0) return -1;
  const char *p = strstr(buf, "\nThreads:");
  if (p == NULL) return -1;
  return atoi(p + strlen("\nThreads:"));
}

static void close_all(const int *fds, int n) {
  for (int i = 0; i < n; ++i) close(fds[i]);
}

static _Noreturn void zygote_main(int sock, pid_t program) {
  prctl(PR_SET_NAME, "lw-zygote", 0, 0, 0);
  // The program's handlers are not the zygote's business (they would run program code in a
  // copy of it): every handled signal gets its default. Terminal interrupts, job control and
  // a hangup reach the whole process group; the zygote leaves with the program, not with them.
  struct sigaction dfl, ign;
  memset(&dfl, 0, sizeof(dfl));
  memset(&ign, 0, sizeof(ign));
  dfl.sa_handler = SIG_DFL;
  ign.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old;
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) != 0 || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
      (void)sigaction(sig, &dfl, NULL);
    }
  }
  const int ignored[] = {SIGINT, SIGQUIT, SIGPIPE, SIGHUP, SIGTSTP, SIGTTIN, SIGTTOU};
  for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); ++i) sigaction(ignored[i], &ign, NULL);
  // Its servers are its children: the kernel reaps them (their exits reach the program
  // through their sockets and pidfds, not through the zygote).
  sigaction(SIGCHLD, &ign, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  // A pidfd of the program; its socket end is open while the program waits for the hello
  // below, so the pid is still the program's (see fs_server.c for the same proof).
  int pidfd = lw__fs_pidfd_open(program);
  int keep[2] = {sock, pidfd};
  lw__fs_keep_fds(keep, pidfd >= 0 ? 2 : 1);
  sock = LW_FS_CHILD_FD0;
  pidfd = pidfd >= 0 ? LW_FS_CHILD_FD0 + 1 : -1;
  // Before the first request: a received fd takes the lowest free number, and a server (and
  // every child) keeps 0..2 as stdio.
  lw__fs_fill_closed_stdio();
  lw_fs_rep_t hello = {.magic = LW_FS_REQ_MAGIC, .seq = 0, .pid = (int32_t)getpid()};
  if (send(sock, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello)) {
    _exit(LW_CHILD_EXIT_OK);
  }
  static lw_fs_req_t rq;  // large (the signal table); the zygote is single-threaded
  for (;;) {
    struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(LW_CHILD_EXIT_START_FAILED);
    }
    if (p[1].revents != 0) _exit(LW_CHILD_EXIT_OK);  // the program died
    if (p[0].revents == 0) continue;
    int fds[LW_FS_REQ_MAX_FDS], n_fds = 0;
    int rc = lw__fs_req_recv(sock, &rq, fds, &n_fds);
    // Every copy of the program's end is closed.
    if (rc == 0 || rc == -ECONNRESET) _exit(LW_CHILD_EXIT_OK);
    if (rc < 0 && rc != -EBADMSG && rc != -EPROTO) {
      close_all(fds, n_fds);
      continue;
    }
    lw_fs_rep_t rep = {.magic = LW_FS_REQ_MAGIC, .seq = rq.seq, .pid = rc == 1 ? 0 : rc};
    if (rc == 1) {
      pid_t pid = fork();
      if (pid == 0) {
        close(sock);
        if (pidfd >= 0) close(pidfd);
        lw__fs_server_from_request(&rq, fds, LW_FS_MAP_SAME,
                                   (lw_child_main_fn)(uintptr_t)rq.main_fn, object_known);
      }
      rep.pid = pid > 0 ? (int32_t)pid : -errno;
    }
    close_all(fds, n_fds);
    (void)send(sock, &rep, sizeof(rep), MSG_NOSIGNAL);
  }
}

// ---------------------------------------------------------------------------------------------
// The program's side.

// In a process forked from the program: the parent's zygote serves the parent, and the copy of
// its socket here is still that socket at this instant (the program cannot have touched it
// yet), so it is closed now; the child makes a zygote of its own when it asks.
static void atfork_child(void) {
  pthread_mutex_init(&g_zy.mu, NULL);
  if (g_zy.sock >= 0) close(g_zy.sock);
  g_zy.sock = -1;
  lw__fs_shares_atfork_child();
}

static void register_atfork(void) { (void)pthread_atfork(NULL, NULL, atfork_child); }

// Forks the zygote through a quiet intermediate. This process must be single-threaded.
// Under g_zy.mu. 0 or -errno, with detail.
static int zy_spawn(char *detail, size_t detail_bytes) {
  lw__fs_shares_reserve();
  g_zy.n_objects = 0;
  dl_iterate_phdr(collect, NULL);
  int sv[2];
  int rc = lw__fs_socketpair(sv);
  if (rc != 0) {
    snprintf(detail, detail_bytes, "socketpair: %s", strerror(-rc));
    return rc;
  }
  pid_t program = getpid();
  // Unflushed stdio data would otherwise be written again by the copies.
  fflush(NULL);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer's own thread may hold its locks at a raw clone; its fork interceptor would
  // then wait for them forever in the intermediate. Under TSan the intermediate is a plain
  // fork: for the instant it lives, the program can see it.
  pid_t mid = fork();
  int mid_err = errno;
#else
  pid_t mid = lw__sys_clone_quiet();
  int mid_err = mid < 0 ? -mid : 0;
#endif
  if (mid == 0) {
    // The intermediate: a copy of this single-threaded program. glibc's fork gives the zygote
    // a consistent libc (atfork handlers, locks, thread id); the intermediate leaves at once.
    pid_t z = fork();
    if (z == 0) {
      close(sv[0]);
      // A process forked from a program that has workers maps their shares: the zygote, and
      // every server it makes, must not (DESIGN 5.1).
      lw__fs_shares_drop_inherited();
      zygote_main(sv[1], program);
    }
    _exit(z < 0 ? 1 : 0);
  }
  close(sv[1]);
  if (mid < 0) {
    close(sv[0]);
    snprintf(detail, detail_bytes, "fork: %s", strerror(mid_err));
    return -mid_err;
  }
  int ws = 0;
  while (waitpid(mid, &ws, __WALL) < 0 && errno == EINTR) {
  }
  lw_fs_rep_t hello;
  rc = lw__fs_wait_readable(sv[0], lw__now_ns() + kZyHelloTimeoutNs);
  ssize_t got = rc == 1 ? recv(sv[0], &hello, sizeof(hello), MSG_DONTWAIT) : -1;
  if (got != (ssize_t)sizeof(hello) || hello.magic != LW_FS_REQ_MAGIC || hello.pid <= 0) {
    close(sv[0]);
    snprintf(detail, detail_bytes, "the zygote did not start (%s)",
             WIFEXITED(ws) && WEXITSTATUS(ws) != 0 ? "fork failed"
             : rc == 0                             ? "no hello within 5 s"
                                                   : "its socket closed");
    return -ECHILD;
  }
  g_zy.pid = hello.pid;
  g_zy.owner = program;
  g_zy.sock = sv[0];
  struct stat st;
  if (fstat(sv[0], &st) == 0) {
    g_zy.sock_dev = st.st_dev;
    g_zy.sock_ino = st.st_ino;
  }
  return 0;
}

// Under g_zy.mu: true when this process has a usable zygote.
static bool zy_have(void) {
  if (g_zy.sock < 0 || g_zy.owner != getpid()) return false;
  struct stat st;
  if (fstat(g_zy.sock, &st) == 0 && st.st_dev == g_zy.sock_dev && st.st_ino == g_zy.sock_ino) {
    return true;
  }
  // The program closed lanework's zygote socket (a program that closes every fd it did not
  // open, as daemons do), and the number may name another file by now: not ours to use or to
  // close. The zygote saw EOF and left; start over as if it died.
  g_zy.sock = -1;
  return false;
}

lw_zygote_state_t lw__fs_zygote_ensure(int *n_threads, char *detail, size_t detail_bytes) {
  char local[128];
  if (detail == NULL) {
    detail = local;
    detail_bytes = sizeof(local);
  }
  detail[0] = '\0';
  pthread_once(&g_atfork_once, register_atfork);
  lw__fs_note_closed_stdio();
  pthread_mutex_lock(&g_zy.mu);
  lw_zygote_state_t state = LW_ZYGOTE_READY;
  if (!zy_have()) {
    int allowed = 1;
#if defined(__SANITIZE_THREAD__)
    allowed = 2;  // ThreadSanitizer's background thread
#endif
    int n = process_threads();
    if (n_threads != NULL) *n_threads = n;
    if (n < 1 || n > allowed) {
      state = LW_ZYGOTE_THREADED;
    } else if (zy_spawn(detail, detail_bytes) != 0) {
      state = LW_ZYGOTE_FAILED;
    }
  }
  pthread_mutex_unlock(&g_zy.mu);
  return state;
}

bool lw__forkserver_zygote_ensure(void) {
  return lw__fs_zygote_ensure(NULL, NULL, 0) == LW_ZYGOTE_READY;
}

int lw__fs_zygote_request(lw_fs_req_t *rq, const int *fds, int n_fds, int64_t deadline_ns,
                          pid_t *out_zygote) {
  pthread_mutex_lock(&g_zy.mu);
  *out_zygote = g_zy.pid;
  if (!zy_have()) {
    pthread_mutex_unlock(&g_zy.mu);
    return -ECONNRESET;
  }
  rq->seq = ++g_zy.next_seq;
  int result = lw__fs_req_send(g_zy.sock, rq, fds, n_fds, deadline_ns);
  while (result == 0) {
    int rc = lw__fs_wait_readable(g_zy.sock, deadline_ns);
    if (rc <= 0) {
      result = rc == 0 ? -ETIMEDOUT : rc;
      break;
    }
    lw_fs_rep_t rep;
    ssize_t got = recv(g_zy.sock, &rep, sizeof(rep), MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      result = got == 0 ? -ECONNRESET : -errno;
      break;
    }
    // A reply to an earlier request that timed out is skipped: its caller closed the control
    // socket, and a server whose socket hangs up tears itself down.
    if (got == (ssize_t)sizeof(rep) && rep.magic == LW_FS_REQ_MAGIC && rep.seq == rq->seq) {
      result = rep.pid != 0 ? rep.pid : -EBADMSG;
      break;
    }
  }
  if (result == -EPIPE || result == -ECONNRESET || result == -ETIMEDOUT) {
    // The zygote is gone (killed from outside) or does not answer (stopped, wedged): forget
    // it, so no later create waits on it; the next one makes a new zygote if this process is
    // single-threaded then. One that does not answer is killed, while its socket shows it is
    // still the zygote (not hung up), through a pidfd (it is not our child).
    if (result == -ETIMEDOUT) {
      struct pollfd p = {.fd = g_zy.sock, .events = 0};
      int pidfd = lw__fs_pidfd_open(g_zy.pid);
      if (pidfd >= 0) {
        if (poll(&p, 1, 0) == 0) (void)lw__sys_pidfd_send_signal(pidfd, SIGKILL);
        close(pidfd);
      }
    }
    close(g_zy.sock);
    g_zy.sock = -1;
  }
  pthread_mutex_unlock(&g_zy.mu);
  return result;
}
