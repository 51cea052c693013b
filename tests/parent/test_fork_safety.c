// tests/parent/test_fork_safety.c — DESIGN 5.1 "Fork safety" and "Isolation".
//
// Fork safety: workers are created, used and destroyed from several threads at once while
// one thread dlopen/dlclose's a library in a loop and another sits in dl_iterate_phdr (whose
// callback runs with glibc's dl_load_write_lock held). A child forked from this process while
// that lock was held would inherit it held forever, and its first dlopen (the register of a
// kernel image) would hang. Every register must finish.
//
// Isolation: a child maps only its own mailbox and the arena (never a sibling's mailbox, never
// the fork server's status table) and holds no fd but stdio and its wake eventfd.
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "lanework/orch.h"
#include "lanework/worker.h"
#include "parent/worker_impl.h"
#include "test_util.h"

#define CREATORS 8
#define CYCLES 8
// How long one register may take before it counts as hung (a healthy one takes milliseconds).
#define REGISTER_LIMIT_NS (20ll * 1000 * 1000 * 1000)

static _Atomic bool g_stop;
static _Atomic uint32_t g_loader_loops;

// Holds dl_load_write_lock for a while on every call, so that a fork from this process is
// likely to happen while it is held.
static int slow_phdr(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info;
  (void)size;
  (void)data;
  lw_test_sleep_us(200);
  return 0;
}

static void *phdr_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    dl_iterate_phdr(slow_phdr, NULL);
    atomic_fetch_add(&g_loader_loops, 1);
  }
  return NULL;
}

static void *dlopen_loop(void *arg) {
  (void)arg;
  char path[512];
  snprintf(path, sizeof(path), "%s/noop.so", lw_test_kernel_dir());
  while (!atomic_load(&g_stop)) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) dlclose(h);
    atomic_fetch_add(&g_loader_loops, 1);
  }
  return NULL;
}

typedef struct creator {
  lw_callable_t kernel;
  int cycles_done;
  lw_status_t failed;  // the first failure
  char what[LW_ERROR_MESSAGE_BYTES + 160];
} creator_t;

static lw_status_t noop_orch(lw_orch_t *o, void *user) {
  lw_callable_handle_t *h = user;
  lw_args_t a;
  lw_args_init(&a);
  return lw_orch_submit_next_level(o, *h, &a, NULL, 0);
}

static void creator_fail(creator_t *c, lw_status_t st, const char *step) {
  c->failed = st;
  snprintf(c->what, sizeof(c->what), "cycle %d: %s -> %s: %s", c->cycles_done, step,
           lw_status_name(st), lw_last_error()->message);
}

static lw_worker_t *make_worker(uint32_t chips, uint32_t subs);

static void *creator_main(void *arg) {
  creator_t *c = arg;
  for (int i = 0; i < CYCLES && c->failed == LW_OK; ++i) {
    lw_worker_config_t cfg;
    lw_worker_config_default(&cfg);
    cfg.n_chips = 1;
    cfg.arena_bytes = 4ull << 20;
    lw_worker_t *w = NULL;
    lw_status_t st = lw_worker_create(&cfg, &w);
    if (st != LW_OK) {
      creator_fail(c, st, "create");
      break;
    }
    lw_handle_t *h = NULL;
    st = lw_worker_register_async(w, &c->kernel, &h);
    if (st == LW_OK) {
      // Bounded: a child that inherited the loader lock never answers.
      st = lw_handle_wait(h, REGISTER_LIMIT_NS);
      lw_callable_handle_t ch = h->callable;
      lw_handle_release(h);
      if (st == LW_OK) {
        st = lw_worker_run(w, noop_orch, &ch, NULL);
        if (st != LW_OK) creator_fail(c, st, "run");
      } else {
        creator_fail(c, st, "register (a child that never answers: hung on a lock)");
      }
    } else {
      creator_fail(c, st, "register_async");
    }
    lw_worker_destroy(w);
    if (c->failed == LW_OK) c->cycles_done++;
  }
  return NULL;
}

Test(fork_safety, concurrent_creates_beside_dlopen_and_phdr_threads_never_hang,
     .timeout = 240) {
  // While this process is single-threaded, a first create makes sure it has a zygote (one is
  // started at program load; a test runner that forks each test gives the test process its
  // own at its first create).
  lw_worker_t *warm = make_worker(1, 0);
  lw_worker_destroy(warm);
  cr_assert_neq(lw__forkserver_zygote_pid(), 0,
                "no zygote: this process was multi-threaded when liblanework loaded and at its "
                "first create, or LW_ZYGOTE=0 is set");
  int children_before = lw_test_child_count();
  pthread_t loaders[2];
  atomic_store(&g_stop, false);
  pthread_create(&loaders[0], NULL, dlopen_loop, NULL);
  pthread_create(&loaders[1], NULL, phdr_loop, NULL);
  // Both loader threads are running before the first create.
  while (atomic_load(&g_loader_loops) < 4) lw_test_sleep_us(100);

  static creator_t creators[CREATORS];
  pthread_t th[CREATORS];
  for (int i = 0; i < CREATORS; ++i) {
    creators[i].kernel = lw_test_kernel("noop");
    creators[i].failed = LW_OK;
    creators[i].cycles_done = 0;
    pthread_create(&th[i], NULL, creator_main, &creators[i]);
  }
  for (int i = 0; i < CREATORS; ++i) pthread_join(th[i], NULL);
  atomic_store(&g_stop, true);
  pthread_join(loaders[0], NULL);
  pthread_join(loaders[1], NULL);
  for (int i = 0; i < CREATORS; ++i) {
    lw_callable_free_loaded(&creators[i].kernel);
    cr_expect_eq(creators[i].failed, LW_OK, "creator %d: %s", i, creators[i].what);
    cr_expect_eq(creators[i].cycles_done, CYCLES, "creator %d finished %d of %d cycles", i,
                 creators[i].cycles_done, CYCLES);
  }
  cr_expect_eq(lw_test_child_count(), children_before, "a child process was left behind");
}

// ---------------------------------------------------------------------------------------------
// Isolation

static lw_worker_t *make_worker(uint32_t chips, uint32_t subs) {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = chips;
  cfg.n_subs = subs;
  cfg.arena_bytes = 4ull << 20;
  lw_worker_t *w = NULL;
  LW_ASSERT_OK(lw_worker_create(&cfg, &w));
  return w;
}

Test(isolation, a_child_maps_only_its_own_mailbox_and_not_the_server_table, .timeout = 60) {
  lw_worker_t *w = make_worker(2, 2);
  for (uint32_t s = 0; s < w->n_children; ++s) {
    pid_t pid = atomic_load(&w->eps[s].pid);
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    int own = 0, arena = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
      unsigned long lo, hi, off;
      char perms[8];
      cr_assert_eq(sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off), 4, "%s", line);
      cr_expect(strstr(line, "lw-fs-table") == NULL, "slot %u maps the server's table: %s", s,
                line);
      if (strstr(line, "lw-arena") != NULL) arena++;
      if (strstr(line, "lw-mailboxes") == NULL) continue;
      // The memfd holds every mailbox, slot s at offset s * LW_MAILBOX_STRIDE.
      cr_expect(off >= s * LW_MAILBOX_STRIDE && off + (hi - lo) <= (s + 1) * LW_MAILBOX_STRIDE,
                "slot %u maps mailbox bytes of a sibling: %s", s, line);
      own++;
    }
    fclose(f);
    cr_expect(own > 0, "slot %u does not map its own mailbox", s);
    cr_expect(arena > 0, "slot %u does not map the arena", s);
  }
  lw_worker_destroy(w);
}

Test(isolation, a_child_holds_only_stdio_and_its_wake_fd, .timeout = 60) {
  // Not close-on-exec, so a plain fork would hand it to every child.
  int leak = memfd_create("lw-test-leak", 0);
  cr_assert_geq(leak, 0);
  lw_worker_t *w = make_worker(1, 1);
  for (uint32_t s = 0; s < w->n_children; ++s) {
    pid_t pid = atomic_load(&w->eps[s].pid);
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *e;
    bool wake = false;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      int fd = atoi(e->d_name);
      char path[320], target[256];
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      ssize_t n = readlink(path, target, sizeof(target) - 1);
      if (n < 0) continue;  // closed meanwhile
      target[n] = '\0';
      if (fd <= 2) continue;
      if (fd == LW_FS_CHILD_FD0) {
        wake = strcmp(target, "anon_inode:[eventfd]") == 0;
        continue;
      }
      // Anything else is the child's own (its lanes' eventfds, a kernel image being loaded),
      // never something it inherited: no memfd, socket, pidfd or signalfd of the parent or
      // the server.
      cr_expect(strstr(target, "lw-test-leak") == NULL, "slot %u inherited fd %d: %s", s, fd,
                     target);
      cr_expect(strstr(target, "socket:") == NULL, "slot %u holds fd %d: %s", s, fd, target);
      cr_expect(strstr(target, "pidfd") == NULL, "slot %u holds fd %d: %s", s, fd, target);
      cr_expect(strstr(target, "signalfd") == NULL, "slot %u holds fd %d: %s", s, fd, target);
      cr_expect(strstr(target, "memfd:lw-") == NULL, "slot %u holds fd %d: %s", s, fd, target);
    }
    closedir(d);
    cr_expect(wake, "slot %u has no wake eventfd at fd %d", s, LW_FS_CHILD_FD0);
  }
  lw_worker_destroy(w);
  close(leak);
}

// ---------------------------------------------------------------------------------------------
// The zygote itself

static bool zombie_or_gone(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return true;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p != NULL && p[2] == 'Z';
}

// A zygote killed from outside: the next create with sub children fails naming it. Afterwards
// a process that is single-threaded makes a new zygote; one with threads (a Criterion test
// process has a second thread) refuses sub children rather than fork directly with its
// threads' locks, and still gets chip children (from the exec'd helper).
Test(zygote, a_killed_zygote_fails_create_clearly_and_is_never_replaced_by_an_unsafe_fork,
     .timeout = 60) {
  cr_assert(lw__forkserver_zygote_ensure(), "no zygote");
  pid_t old = lw__forkserver_zygote_pid();
  cr_assert_eq(kill(old, SIGKILL), 0);
  while (!zombie_or_gone(old)) lw_test_sleep_us(1000);  // bounded by the test's timeout
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 4ull << 20;
  cfg.n_subs = 1;
  lw_worker_t *w = NULL;
  cr_assert_eq(lw_worker_create(&cfg, &w), LW_UNAVAILABLE);
  cr_assert(strstr(lw_last_error()->message, "the zygote is gone") != NULL, "message: %s",
            lw_last_error()->message);
  cr_assert_eq(lw__forkserver_zygote_pid(), 0, "a dead zygote is forgotten");
  // A thread of our own makes the outcome the same under every runner: threaded, no new
  // zygote, and no direct fork.
  pthread_t t;
  atomic_store(&g_stop, false);
  pthread_create(&t, NULL, phdr_loop, NULL);
  lw_status_t st = lw_worker_create(&cfg, &w);
  atomic_store(&g_stop, true);
  pthread_join(t, NULL);
  cr_assert_eq(st, LW_FAILED_PRECONDITION, "create after the zygote died: %s",
               lw_status_name(st));
  cr_assert(strstr(lw_last_error()->message, "call lw_init()") != NULL, "message: %s",
            lw_last_error()->message);
  cr_assert_eq(lw__forkserver_zygote_pid(), 0);
  // Chip children need no zygote.
  cfg.n_subs = 0;
  cr_assert_eq(lw_worker_create(&cfg, &w), LW_OK, "%s", lw_last_error()->message);
  lw_worker_destroy(w);
}

// A daemon closes every fd it did not open itself, and lanework's zygote socket is opened
// before main: the number then names nothing, or another file. The next create must notice,
// leave that fd alone, and start a new zygote (this process is single-threaded), instead of
// sending its request into whatever file took the number.
// No worker and no thread here (a sanitizer cannot follow threads started after a fork from a
// threaded process): lw__forkserver_zygote_ensure is the step of create that uses the socket.
static int closefrom_then_create(void) {
  if (!lw__forkserver_zygote_ensure()) return 10;
  pid_t old = lw__forkserver_zygote_pid();
  if (old <= 0) return 11;
  if (close_range(3, ~0u, 0) != 0) return 12;
  // Every freed number taken by the program's own files.
  for (int i = 0; i < 16; ++i) {
    if (open("/dev/null", O_RDWR) < 0) return 13;
  }
  if (!lw__forkserver_zygote_ensure()) return 14;
  pid_t now = lw__forkserver_zygote_pid();
  if (now <= 0 || now == old) return 15;
  // The old zygote was reaped, not left a zombie.
  if (waitpid(old, NULL, WNOHANG) != -1 || errno != ECHILD) return 16;
  return 0;
}

Test(zygote, a_zygote_socket_closed_by_the_program_is_replaced_not_written_to, .timeout = 60) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) _exit(closefrom_then_create());
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  cr_assert(WIFEXITED(ws), "wait status 0x%x", (unsigned)ws);
  cr_assert_eq(WEXITSTATUS(ws), 0, "failed at step %d", WEXITSTATUS(ws));
}

// Whether pid maps the memfd named name anywhere in [lo, hi). Only that file counts: once the
// share is gone, the process may map memory of its own there (a sanitizer's runtime does).
static int maps_range(pid_t pid, uintptr_t lo, uintptr_t hi, const char *name) {
  char path[64], line[512];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  int found = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long a, b;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3) continue;
    if (strstr(line, name) != NULL && a < hi && b > lo) found = 1;
  }
  fclose(f);
  return found;
}

// A process forked from a program that has a worker starts its own zygote at its first create.
// That zygote is a copy of the process, which still maps the program's worker (its arena and
// mailboxes, MAP_SHARED): it must not, since every server and child it makes would too. Only
// the zygote is started here (no thread after the fork: sanitizers cannot follow those).
static int forked_zygote_maps_nothing_of_the_parents(const lw_worker_t *a) {
  uintptr_t arena_lo = (uintptr_t)a->arena.base, arena_hi = arena_lo + a->arena.bytes;
  uintptr_t mb_lo = (uintptr_t)a->mailboxes, mb_hi = mb_lo + a->mailboxes_bytes;
  if (!lw__forkserver_zygote_ensure()) return 10;
  pid_t zygote = lw__forkserver_zygote_pid();
  if (zygote <= 0) return 11;
  // The zygote drops the shares before it takes its name: wait for the name.
  char path[64], comm[32] = "";
  snprintf(path, sizeof(path), "/proc/%d/comm", (int)zygote);
  while (strncmp(comm, "lw-zygote", 9) != 0) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return 12;
    if (fgets(comm, sizeof(comm), f) == NULL) comm[0] = '\0';
    fclose(f);
    if (strncmp(comm, "lw-zygote", 9) != 0) lw_test_sleep_us(200);
  }
  if (maps_range(zygote, arena_lo, arena_hi, "lw-arena") != 0) return 20;
  if (maps_range(zygote, mb_lo, mb_hi, "lw-mailboxes") != 0) return 21;
  return 0;
}

Test(isolation, a_zygote_started_in_a_forked_process_maps_nothing_of_the_parents_worker,
     .timeout = 60) {
  lw_worker_t *a = make_worker(1, 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) _exit(forked_zygote_maps_nothing_of_the_parents(a));
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  lw_worker_destroy(a);
  cr_assert(WIFEXITED(ws), "wait status 0x%x", (unsigned)ws);
  // 20: the new zygote maps the parent's arena; 21: its mailboxes.
  cr_assert_eq(WEXITSTATUS(ws), 0, "failed with %d", WEXITSTATUS(ws));
}

// The terminal's job-control signals (Ctrl-Z sends SIGTSTP to the whole foreground process
// group) and its hangup (SIGHUP) must not stop or end the zygote or a fork server: a program that ignores or handles them goes
// on running, and would then find every create and every respawn waiting on a stopped process.
// Runs in a process group of its own whose parent is outside it: the kernel discards these
// signals in an orphaned group (as a test runner's may be), not in a terminal's.
static void on_hangup(int sig) { (void)sig; }

static int stop_signals_leave_lanework_running(void) {
  alarm(30);  // a stopped zygote or server would otherwise hang this process
  if (setpgid(0, 0) != 0) return 10;
  signal(SIGTSTP, SIG_IGN);  // the program keeps running
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.arena_bytes = 4ull << 20;
  lw_worker_t *w = NULL, *w2 = NULL;
  if (lw_worker_create(&cfg, &w) != LW_OK) return 11;
  pid_t zygote = lw__forkserver_zygote_pid();
  pid_t server = lw__forkserver_pid(w->fs);
  if (zygote <= 0) return 12;
  // Handled from now on, as a program sets its handlers after liblanework was loaded.
  signal(SIGHUP, on_hangup);
  // A terminal's hangup goes to the foreground group too.
  const int sigs[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGHUP};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) {
    if (kill(zygote, sigs[i]) != 0 || kill(server, sigs[i]) != 0) return 13;
  }
  // The zygote serves a new create (a stopped one would not answer: UNAVAILABLE after 5 s).
  if (lw_worker_create(&cfg, &w2) != LW_OK) return 14;
  lw_worker_destroy(w2);
  // The server respawns a killed child.
  pid_t child = atomic_load(&w->eps[0].pid);
  if (kill(child, SIGKILL) != 0) return 15;
  for (;;) {
    lw__sched_pass_lock(&w->sched);
    bool back = atomic_load(&w->eps[0].stats.respawns) >= 1 && w->eps[0].accepting;
    lw__sched_pass_unlock(&w->sched);
    if (back) break;
    lw_test_sleep_us(1000);
  }
  lw_worker_destroy(w);
  return 0;
}

Test(zygote, terminal_stop_signals_leave_the_zygote_and_the_fork_server_running,
     .timeout = 60) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) _exit(stop_signals_leave_lanework_running());
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  cr_assert(WIFEXITED(ws), "wait status 0x%x (SIGALRM: a stopped zygote or server)",
            (unsigned)ws);
  cr_assert_eq(WEXITSTATUS(ws), 0, "failed at step %d", WEXITSTATUS(ws));
}
