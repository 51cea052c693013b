// tests/parent/test_l4_liveness.c — the L4's liveness channel (parent/l4_liveness.h): ranks and
// the L4 as real processes, killed and stopped; every end is checked by the event it reports
// (which rank, how, the message naming rank, host and pid), never by how long it took.
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "parent/l4_liveness.h"

// Fast beats so a hang is found in a fraction of a second.
#define PERIOD_NS 20000000LL  // 20 ms
#define HUNG_NS 200000000LL   // 200 ms

// An end the watch reported, as its callback writes it to the test's pipe.
typedef struct end_event {
  int32_t rank;
  int32_t why;
  char message[LW_ERROR_MESSAGE_BYTES];
} end_event_t;

static int g_events[2] = {-1, -1};

static void on_end(void *ctx, int32_t rank, lw_l4_end_t why, const char *message) {
  (void)ctx;
  end_event_t e = {.rank = rank, .why = (int32_t)why};
  snprintf(e.message, sizeof(e.message), "%s", message);
  ssize_t n = write(g_events[1], &e, sizeof(e));
  (void)n;
}

// Blocks until the watch reports an end (the test's timeout bounds the wait).
// Reads exactly bytes from fd (the test's timeout bounds the wait); false when it closed first.
static bool read_exactly(int fd, void *buf, size_t bytes) {
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = read(fd, (char *)buf + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += (size_t)n;
  }
  return true;
}

static end_event_t next_event(void) {
  end_event_t e;
  cr_assert(read_exactly(g_events[0], &e, sizeof(e)), "the events pipe closed");
  return e;
}

static lw_l4_watch_t *watch_open(uint32_t n_ranks) {
  cr_assert_eq(pipe(g_events), 0);
  lw_l4_watch_config_t cfg = {.n_ranks = n_ranks, .period_ns = PERIOD_NS, .hung_ns = HUNG_NS,
                              .bind_host = "127.0.0.1", .advertise = "127.0.0.1",
                              .end = on_end};
  lw_l4_watch_t *w = NULL;
  lw_error_t err;
  cr_assert_eq(lw__l4_watch_open(&cfg, &w, &err), LW_OK, "%s", err.message);
  return w;
}

static void events_close(void) {
  close(g_events[0]);
  close(g_events[1]);
}

// A rank's end, as the exit status of its process: 10 + how its connection to the L4 ended.
static void rank_on_end(void *ctx, int32_t rank, lw_l4_end_t why, const char *message) {
  (void)ctx;
  (void)rank;
  (void)message;
  _exit(10 + (int)why);
}

// In a forked rank or L4: dies with the test, so a failing test leaves no process behind (and
// none holding the test's output open). PR_SET_PDEATHSIG outlives the execve.
static void die_with_parent(pid_t parent) {
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(4);
}

// A spawned process's role ("rank:<rank>:<address>" or "l4") reaches it in this variable; its
// report pipe is fd REPORT_FD.
#define CHILD_ROLE_VAR "LW_TEST_L4_CHILD_ROLE"
#define REPORT_FD 3

static void rank_main(int report_fd, int32_t rank, const char *address);
static void l4_main(int report_fd);

// A spawned process runs its role here, before Criterion's main (so with one thread), and never
// returns to it.
__attribute__((constructor)) static void run_child_role(void) {
  const char *role = getenv(CHILD_ROLE_VAR);
  if (!role) return;
  if (strcmp(role, "l4") == 0) l4_main(REPORT_FD);
  if (strncmp(role, "rank:", 5) == 0) {
    char *rest = NULL;
    long rank = strtol(role + 5, &rest, 10);
    if (rest && *rest == ':') rank_main(REPORT_FD, (int32_t)rank, rest + 1);
  }
  _exit(5);
}

// Starts a process that plays role (run_child_role) and dies with the test; returns its pid once
// it wrote report_bytes into report, and in *ok whether it did (it may end first).
//
// The test process is threaded (Criterion's thread, the watch's), and a fork copies whatever
// lock another thread held at that instant, frozen: GCC 12's ASan allocator has no fork
// handler, so a rank forked while the watch thread was in malloc hung for good in its own beat
// thread's start. So the child makes only async-signal-safe calls and execs this binary afresh,
// as mpirun starts a real rank (docs/processes.md); it keeps only stdio and its report pipe.
static pid_t spawn_reporting(const char *role, void *report, size_t report_bytes, bool *ok) {
  extern char **environ;
  size_t n_env = 0;
  while (environ[n_env]) n_env++;
  char **envp = calloc(n_env + 2, sizeof(*envp));
  cr_assert_not_null(envp);
  char role_var[160];
  snprintf(role_var, sizeof(role_var), "%s=%s", CHILD_ROLE_VAR, role);
  size_t k = 0;
  for (size_t i = 0; i < n_env; ++i) {
    if (strncmp(environ[i], CHILD_ROLE_VAR "=", strlen(CHILD_ROLE_VAR) + 1) != 0) {
      envp[k++] = environ[i];
    }
  }
  envp[k++] = role_var;
  envp[k] = NULL;
  char *argv[] = {(char *)"test_parent_l4_liveness", NULL};
  int p[2];
  cr_assert_eq(pipe(p), 0);
  pid_t self = getpid();
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    die_with_parent(self);
    if (dup2(p[1], REPORT_FD) != REPORT_FD) _exit(6);
    syscall(SYS_close_range, REPORT_FD + 1u, ~0u, 0u);
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  free(envp);
  close(p[1]);
  *ok = read_exactly(p[0], report, report_bytes);
  close(p[0]);
  return pid;
}

// A rank: connects as rank, reports once its HELLO is sent, then waits for its end (it exits
// from the callback).
static void rank_main(int report_fd, int32_t rank, const char *address) {
  lw_l4_beat_config_t cfg = {.address = address, .rank = rank, .period_ns = PERIOD_NS,
                             .hung_ns = HUNG_NS,
                             .connect_deadline_ns = lw__now_ns() + 10000000000LL,
                             .end = rank_on_end};
  lw_l4_beat_t *b = NULL;
  lw_error_t err;
  if (lw__l4_beat_open(&cfg, &b, &err) != LW_OK) _exit(3);
  char one = 1;
  ssize_t n = write(report_fd, &one, 1);
  (void)n;
  for (;;) pause();
}

// A rank process (rank_main) connected to address; its pid.
static pid_t rank_spawn(const char *address, int32_t rank) {
  char role[128];
  snprintf(role, sizeof(role), "rank:%d:%s", (int)rank, address);
  char one = 0;
  bool ok = false;
  pid_t pid = spawn_reporting(role, &one, 1, &ok);
  cr_assert(ok, "rank %d could not connect to %s", (int)rank, address);
  return pid;
}

static int exit_code_of(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  cr_assert_eq(r, pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

static void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  kill(pid, SIGCONT);
  (void)exit_code_of(pid);
}

static bool has(const char *s, const char *part) { return strstr(s, part) != NULL; }

Test(l4_liveness, every_rank_connects_and_a_clean_close_ends_each_with_a_goodbye,
     .timeout = 30) {
  lw_l4_watch_t *w = watch_open(2);
  pid_t r1 = rank_spawn(lw__l4_watch_address(w), 1);
  pid_t r2 = rank_spawn(lw__l4_watch_address(w), 2);
  lw_error_t err;
  cr_assert_eq(lw__l4_watch_wait_ready(w, lw__now_ns() + 10000000000LL, &err), LW_OK, "%s",
               err.message);
  lw_l4_rank_info_t info;
  cr_assert(lw__l4_watch_rank_info(w, 1, &info));
  cr_assert_eq(info.pid, r1);
  char host[LW_L4_HOST_BYTES];
  cr_assert_eq(gethostname(host, sizeof(host)), 0);
  host[sizeof(host) - 1] = '\0';
  cr_assert_str_eq(info.host, host);
  cr_assert(lw__l4_watch_rank_info(w, 2, &info));
  cr_assert_eq(info.pid, r2);
  cr_assert_not(lw__l4_watch_rank_info(w, 3, &info), "rank 3 is not in the job");
  lw__l4_watch_close(w);
  cr_assert_eq(exit_code_of(r1), 10 + LW_L4_END_GOODBYE, "rank 1 read the close as a goodbye");
  cr_assert_eq(exit_code_of(r2), 10 + LW_L4_END_GOODBYE);
  events_close();
}

Test(l4_liveness, a_killed_rank_is_reported_died_naming_its_rank_host_and_pid, .timeout = 30) {
  lw_l4_watch_t *w = watch_open(2);
  pid_t r1 = rank_spawn(lw__l4_watch_address(w), 1);
  pid_t r2 = rank_spawn(lw__l4_watch_address(w), 2);
  lw_error_t err;
  cr_assert_eq(lw__l4_watch_wait_ready(w, lw__now_ns() + 10000000000LL, &err), LW_OK, "%s",
               err.message);
  kill(r2, SIGKILL);
  end_event_t e = next_event();
  cr_assert_eq(e.rank, 2);
  cr_assert_eq(e.why, LW_L4_END_DIED, "%s", e.message);
  char pid[32];
  snprintf(pid, sizeof(pid), "pid %d", (int)r2);
  cr_assert(has(e.message, "rank 2") && has(e.message, pid) && has(e.message, "host "),
            "%s", e.message);
  (void)exit_code_of(r2);
  // Rank 1 is unaffected: still beating, so a clean close ends it with a goodbye.
  lw__l4_watch_close(w);
  cr_assert_eq(exit_code_of(r1), 10 + LW_L4_END_GOODBYE);
  events_close();
}

Test(l4_liveness, a_stopped_rank_is_reported_hung, .timeout = 30) {
  lw_l4_watch_t *w = watch_open(1);
  pid_t r1 = rank_spawn(lw__l4_watch_address(w), 1);
  lw_error_t err;
  cr_assert_eq(lw__l4_watch_wait_ready(w, lw__now_ns() + 10000000000LL, &err), LW_OK, "%s",
               err.message);
  kill(r1, SIGSTOP);
  end_event_t e = next_event();
  cr_assert_eq(e.rank, 1);
  cr_assert_eq(e.why, LW_L4_END_HUNG, "%s", e.message);
  cr_assert(has(e.message, "rank 1") && has(e.message, "no heartbeat"), "%s", e.message);
  kill_and_reap(r1);
  lw__l4_watch_close(w);
  events_close();
}

// The L4: opens the watch, reports its address, waits.
static void l4_main(int report_fd) {
  lw_l4_watch_config_t cfg = {.n_ranks = 1, .period_ns = PERIOD_NS, .hung_ns = HUNG_NS,
                              .bind_host = "127.0.0.1", .advertise = "127.0.0.1"};
  lw_l4_watch_t *w = NULL;
  lw_error_t err;
  if (lw__l4_watch_open(&cfg, &w, &err) != LW_OK) _exit(3);
  char a[LW_L4_ADDRESS_BYTES];
  snprintf(a, sizeof(a), "%s", lw__l4_watch_address(w));
  ssize_t n = write(report_fd, a, sizeof(a));
  (void)n;
  for (;;) pause();
}

// The L4 in a process of its own (l4_main); its pid, its address in address.
static pid_t l4_spawn(char *address, size_t bytes) {
  bool ok = false;
  pid_t pid = spawn_reporting("l4", address, bytes, &ok);
  cr_assert(ok, "the L4 process did not start its watch");
  return pid;
}

Test(l4_liveness, a_rank_ends_when_the_l4_is_killed, .timeout = 30) {
  char address[LW_L4_ADDRESS_BYTES];
  pid_t l4 = l4_spawn(address, sizeof(address));
  pid_t r1 = rank_spawn(address, 1);
  // Connected (whether or not the L4 has taken the connection yet): its end is DIED.
  kill(l4, SIGKILL);
  (void)exit_code_of(l4);
  cr_assert_eq(exit_code_of(r1), 10 + LW_L4_END_DIED);
}

Test(l4_liveness, a_rank_ends_when_the_l4_is_stopped, .timeout = 30) {
  char address[LW_L4_ADDRESS_BYTES];
  pid_t l4 = l4_spawn(address, sizeof(address));
  pid_t r1 = rank_spawn(address, 1);
  kill(l4, SIGSTOP);
  cr_assert_eq(exit_code_of(r1), 10 + LW_L4_END_HUNG);
  kill_and_reap(l4);
}

Test(l4_liveness, the_startup_deadline_names_the_ranks_that_never_connected, .timeout = 30) {
  lw_l4_watch_t *w = watch_open(3);
  pid_t r1 = rank_spawn(lw__l4_watch_address(w), 1);
  pid_t r3 = rank_spawn(lw__l4_watch_address(w), 3);
  // Until the watch has both HELLOs (the test's timeout bounds the wait); rank 2 never comes.
  lw_l4_rank_info_t i1, i3;
  do {
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
    cr_assert(lw__l4_watch_rank_info(w, 1, &i1) && lw__l4_watch_rank_info(w, 3, &i3));
  } while (i1.pid == 0 || i3.pid == 0);
  lw_error_t err;
  lw_status_t st = lw__l4_watch_wait_ready(w, lw__now_ns() + 100000000LL, &err);
  cr_assert_eq(st, LW_DEADLINE_EXCEEDED, "%s", err.message);
  cr_assert(has(err.message, "1 of 3 ranks") && has(err.message, "(ranks 2)") &&
                has(err.message, lw__l4_watch_address(w)),
            "%s", err.message);
  lw__l4_watch_close(w);
  (void)exit_code_of(r1);
  (void)exit_code_of(r3);
  events_close();
}

static int raw_connect(const char *address) {
  const char *colon = strrchr(address, ':');
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert_geq(fd, 0);
  cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
  return fd;
}

static void raw_send(int fd, lw_l4_msg_kind_t kind, int32_t rank, uint32_t magic) {
  lw_l4_msg_t m;
  memset(&m, 0, sizeof(m));
  m.magic = magic;
  m.version = LW_L4_MSG_VERSION;
  m.kind = (uint16_t)kind;
  m.rank = rank;
  m.pid = (int32_t)getpid();
  snprintf(m.host, sizeof(m.host), "forged-host");
  cr_assert_eq(send(fd, &m, sizeof(m), MSG_NOSIGNAL), (ssize_t)sizeof(m));
}

Test(l4_liveness, a_rank_that_breaks_the_protocol_is_reported_and_a_stranger_is_ignored,
     .timeout = 30) {
  lw_l4_watch_t *w = watch_open(2);
  // A stranger sending garbage before any HELLO: closed, reported as nothing.
  int stranger = raw_connect(lw__l4_watch_address(w));
  raw_send(stranger, LW_L4_MSG_BEAT, 1, 0xdeadbeefu);
  // Rank 1 says HELLO properly, then sends a message with a wrong magic.
  int fd = raw_connect(lw__l4_watch_address(w));
  raw_send(fd, LW_L4_MSG_HELLO, 1, LW_L4_MSG_MAGIC);
  raw_send(fd, LW_L4_MSG_BEAT, 1, 0x12345678u);
  end_event_t e = next_event();
  cr_assert_eq(e.rank, 1, "the first report is rank 1's, not the stranger's: %s", e.message);
  cr_assert_eq(e.why, LW_L4_END_VIOLATION, "%s", e.message);
  cr_assert(has(e.message, "rank 1") && has(e.message, "forged-host") &&
                has(e.message, "magic"),
            "%s", e.message);
  // A rank out of range is a stranger too; rank 2 then connects and leaves with a goodbye.
  int bad = raw_connect(lw__l4_watch_address(w));
  raw_send(bad, LW_L4_MSG_HELLO, 7, LW_L4_MSG_MAGIC);
  int r2 = raw_connect(lw__l4_watch_address(w));
  raw_send(r2, LW_L4_MSG_HELLO, 2, LW_L4_MSG_MAGIC);
  raw_send(r2, LW_L4_MSG_BYE, 2, LW_L4_MSG_MAGIC);
  close(r2);
  e = next_event();
  cr_assert_eq(e.rank, 2, "%s", e.message);
  cr_assert_eq(e.why, LW_L4_END_GOODBYE, "%s", e.message);
  close(bad);
  close(fd);
  close(stranger);
  lw__l4_watch_close(w);
  events_close();
}

Test(l4_liveness, a_rank_refuses_a_malformed_address_and_names_one_it_cannot_reach,
     .timeout = 30) {
  lw_l4_beat_t *b = NULL;
  lw_error_t err;
  lw_l4_beat_config_t cfg = {.address = "no-port-here", .rank = 1,
                             .connect_deadline_ns = lw__now_ns()};
  cr_assert_eq(lw__l4_beat_open(&cfg, &b, &err), LW_INVALID_ARGUMENT);
  cr_assert(has(err.message, "no-port-here"), "%s", err.message);
  cfg.address = "127.0.0.1:1";
  cfg.rank = 0;
  cr_assert_eq(lw__l4_beat_open(&cfg, &b, &err), LW_INVALID_ARGUMENT, "rank 0 is the L4");
  // Port 1 on loopback: nobody listens (refused at once); the deadline ends the retries.
  cfg.rank = 1;
  cfg.connect_deadline_ns = lw__now_ns() + 100000000LL;
  cr_assert_eq(lw__l4_beat_open(&cfg, &b, &err), LW_UNAVAILABLE);
  cr_assert(has(err.message, "127.0.0.1:1") && has(err.message, "rank 1"), "%s", err.message);
  cr_assert_null(b);
}
