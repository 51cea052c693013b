// tests/parent/guest_probe_util.h — what the guest probes (guest_*_probe.c/.cpp, run by
// test_guest.c) look at in their own process and in /proc: their children, their threads and
// each thread's blocked signals, their large mappings, and the processes of their session.
// Plain libc only (the dlopen probe links no lanework), C and C++.
//
// A probe reports on stdout, one line a finding: "FAIL: ..." for each broken rule, "note: ..."
// for what the reader may want to know; it exits 0 when it found no FAIL. stdout is unbuffered
// (gp_start), so a process forked from the probe never repeats a buffered line.
#ifndef LANEWORK_TESTS_PARENT_GUEST_PROBE_UTIL_H_
#define LANEWORK_TESTS_PARENT_GUEST_PROBE_UTIL_H_

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Sanitizer runtimes reserve terabytes of shadow memory (ASan, TSan) and TSan starts a thread
// of its own: the checks of mappings and thread counts are skipped there, with a note.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GP_SANITIZER_MAPS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GP_SANITIZER_MAPS 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define GP_SANITIZER_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GP_SANITIZER_THREADS 1
#endif
#endif

static int gp_failures;
// What the probe is doing now, for the alarm's message.
static const char *volatile gp_step = "start";

static inline void gp_vline(const char *prefix, const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "%s", prefix);
  int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  (void)!write(STDOUT_FILENO, buf, len);
}

__attribute__((format(printf, 1, 2))) static inline void gp_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gp_vline("FAIL: ", fmt, ap);
  va_end(ap);
  gp_failures++;
}

__attribute__((format(printf, 1, 2))) static inline void gp_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gp_vline("note: ", fmt, ap);
  va_end(ap);
}

// A hang is a failure: the alarm names the step and ends the probe (exit 3).
static inline void gp_on_alarm(int sig) {
  (void)sig;
  static const char head[] = "FAIL: timed out (alarm) at step: ";
  (void)!write(STDOUT_FILENO, head, sizeof(head) - 1);
  const char *s = gp_step;
  (void)!write(STDOUT_FILENO, s, strlen(s));
  (void)!write(STDOUT_FILENO, "\n", 1);
  _exit(3);
}

// Unbuffered stdout, and the alarm handler (armed by gp_arm).
static inline void gp_start(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = gp_on_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
}

static inline void gp_arm(const char *step, unsigned seconds) {
  gp_step = step;
  alarm(seconds);
}

static inline void gp_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// "Threads:" of /proc/self/status; -1 when unreadable.
static inline int gp_thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  int n = -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
  }
  fclose(f);
  return n;
}

// One process as /proc/<pid>/stat shows it.
typedef struct gp_stat {
  int pid, ppid, pgrp, sid;
  char state;
  unsigned long long start;  // start time (clock ticks after boot): with pid, an identity
  char comm[32];
} gp_stat_t;

static inline bool gp_read_stat(int pid, gp_stat_t *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  size_t len = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[len] = '\0';
  char *open = strchr(buf, '(');
  char *close = strrchr(buf, ')');  // the name may hold spaces and parentheses
  if (open == NULL || close == NULL || close < open) return false;
  memset(out, 0, sizeof(*out));
  out->pid = pid;
  size_t n = (size_t)(close - open - 1);
  if (n >= sizeof(out->comm)) n = sizeof(out->comm) - 1;
  memcpy(out->comm, open + 1, n);
  out->comm[n] = '\0';
  // Fields after the name: 3 state, 4 ppid, 5 pgrp, 6 session, ... 22 starttime.
  char *p = close + 2;
  char *fields[24];
  int k = 3;
  for (char *save = NULL, *tok = strtok_r(p, " ", &save); tok != NULL && k <= 22;
       tok = strtok_r(NULL, " ", &save), ++k) {
    fields[k] = tok;
  }
  if (k <= 22) return false;
  out->state = fields[3][0];
  out->ppid = atoi(fields[4]);
  out->pgrp = atoi(fields[5]);
  out->sid = atoi(fields[6]);
  out->start = strtoull(fields[22], NULL, 10);
  return true;
}

#define GP_MAX_PROCS 256

typedef struct gp_procs {
  int n;
  gp_stat_t p[GP_MAX_PROCS];
} gp_procs_t;

// Every process for which keep(stat, ctx) says true.
static inline void gp_scan(bool (*keep)(const gp_stat_t *, void *), void *ctx, gp_procs_t *out) {
  out->n = 0;
  DIR *d = opendir("/proc");
  if (d == NULL) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    gp_stat_t s;
    if (!gp_read_stat(atoi(e->d_name), &s)) continue;
    if (keep(&s, ctx) && out->n < GP_MAX_PROCS) out->p[out->n++] = s;
  }
  closedir(d);
}

static inline bool gp_is_child(const gp_stat_t *s, void *ctx) {
  return s->ppid == *(const int *)ctx;
}

// The children of this process, zombies included (a zombie is still one to wait for).
static inline void gp_children(gp_procs_t *out) {
  int self = (int)getpid();
  gp_scan(gp_is_child, &self, out);
}

static inline void gp_describe(const gp_procs_t *ps, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < ps->n && used + 1 < cap; ++i) {
    int w = snprintf(buf + used, cap - used, "%s%d %s (%c, parent %d, session %d)",
                     i ? ", " : "", ps->p[i].pid, ps->p[i].comm, ps->p[i].state, ps->p[i].ppid,
                     ps->p[i].sid);
    if (w < 0) break;
    used += (size_t)w < cap - used ? (size_t)w : cap - used - 1;
  }
}

// FAIL when this process has a child; when names which moment it is.
static inline void gp_expect_no_child(const char *when) {
  gp_procs_t ps;
  gp_children(&ps);
  if (ps.n > 0) {
    char desc[2048];
    gp_describe(&ps, desc, sizeof(desc));
    gp_fail("%s: the program has %d child process(es): %s", when, ps.n, desc);
  }
}

// FAIL when this process has more than one thread (skipped under TSan, which runs its own).
static inline void gp_expect_one_thread(const char *when) {
#ifdef GP_SANITIZER_THREADS
  gp_note("%s: thread count not checked under ThreadSanitizer", when);
#else
  int n = gp_thread_count();
  if (n != 1) gp_fail("%s: /proc/self/status says Threads: %d, not 1", when, n);
#endif
}

// FAIL for each mapping of 1 GiB or more: the probe makes none itself (skipped under ASan and
// TSan, whose shadow memory is such a mapping).
static inline void gp_expect_no_big_mapping(const char *when) {
#ifdef GP_SANITIZER_MAPS
  gp_note("%s: mappings not checked under a sanitizer", when);
#else
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) {
    gp_fail("%s: cannot read /proc/self/maps", when);
    return;
  }
  char line[512];
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long long lo = 0, hi = 0;
    if (sscanf(line, "%llx-%llx", &lo, &hi) != 2) continue;
    if (hi - lo >= (1ull << 30)) {
      line[strcspn(line, "\n")] = '\0';
      gp_fail("%s: a mapping of %llu MiB the program did not make: %s", when,
              (hi - lo) >> 20, line);
    }
  }
  fclose(f);
#endif
}

// The asynchronous signals a thread of lanework's must block: the ones a program handles or
// directs at itself (SIGCHLD from its children, terminal and job signals, timers, I/O), and
// every real-time signal.
static inline int gp_async_signals(int *out, int cap) {
  static const int fixed[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
                              SIGALRM, SIGCHLD, SIGPIPE, SIGWINCH, SIGIO};
  int n = 0;
  for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) && n < cap; ++i) out[n++] = fixed[i];
  for (int s = SIGRTMIN; s <= SIGRTMAX && n < cap; ++s) out[n++] = s;
  return n;
}

// SigBlk and the name of thread tid of this process.
static inline bool gp_thread_sigblk(int tid, uint64_t *out_blk, char *comm, size_t cap) {
  char path[96], line[256];
  snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  bool got = false;
  comm[0] = '\0';
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "Name:", 5) == 0) {
      const char *v = line + 5;
      while (*v == ' ' || *v == '\t') ++v;
      size_t n = strcspn(v, "\n");
      if (n >= cap) n = cap - 1;
      memcpy(comm, v, n);
      comm[n] = '\0';
    } else if (strncmp(line, "SigBlk:", 7) == 0) {
      *out_blk = strtoull(line + 7, NULL, 16);
      got = true;
    }
  }
  fclose(f);
  return got;
}

// Checks every thread of this process but the main one: each must block every signal of
// gp_async_signals. The probe starts no thread of its own in the modes that call this, so a
// thread without an "lw-" name is lanework's too (the trace drainer may be unnamed); under
// TSan, whose runtime has a thread of its own, only "lw-" threads are checked. Returns how
// many threads were checked; *out_lw: how many of them have an "lw-" name.
static inline int gp_check_thread_masks(const char *when, int *out_lw) {
  int sigs[96];
  int n_sigs = gp_async_signals(sigs, 96);
  int checked = 0, lw = 0;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) {
    gp_fail("%s: cannot read /proc/self/task", when);
    return 0;
  }
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int tid = atoi(e->d_name);
    if (tid == (int)getpid()) continue;
    uint64_t blk = 0;
    char comm[64];
    if (!gp_thread_sigblk(tid, &blk, comm, sizeof(comm))) continue;  // it exited
    bool named = strncmp(comm, "lw-", 3) == 0;
#ifdef GP_SANITIZER_THREADS
    if (!named) continue;
#endif
    ++checked;
    lw += named;
    char missing[512];
    size_t used = 0;
    missing[0] = '\0';
    for (int i = 0; i < n_sigs; ++i) {
      if (blk & (UINT64_C(1) << (sigs[i] - 1))) continue;
      const char *name = sigabbrev_np(sigs[i]);
      int w = name != NULL ? snprintf(missing + used, sizeof(missing) - used, " SIG%s", name)
                           : snprintf(missing + used, sizeof(missing) - used, " %d", sigs[i]);
      if (w < 0 || (size_t)w >= sizeof(missing) - used) break;
      used += (size_t)w;
    }
    if (used > 0) {
      gp_fail("%s: thread %d '%s' (SigBlk %016llx) does not block:%s", when, tid, comm,
              (unsigned long long)blk, missing);
    }
  }
  closedir(d);
  *out_lw = lw;
  return checked;
}

// Whether /proc/<pid>/environ holds the entry want ("NAME=value").
static inline bool gp_env_has(int pid, const char *want) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/environ", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  char var[4096];
  size_t len = 0;
  bool found = false;
  for (int c; !found && (c = fgetc(f)) != EOF;) {
    if (c != '\0') {
      if (len + 1 < sizeof(var)) var[len++] = (char)c;
      continue;
    }
    var[len] = '\0';
    found = strcmp(var, want) == 0;
    len = 0;
  }
  fclose(f);
  return found;
}

// Whose processes gp_is_lanework_of looks for: those of the probe with pid `probe`.
typedef struct gp_owner {
  int probe;
  char tag_var[128];  // "LW_GUEST_TAG=<tag>": test_guest.c puts it in the probe's environment
  bool descendants;   // also the probe's descendants (meaningful while it lives)
} gp_owner_t;

// A process that the probe (or lanework inside it) started: in its session (test_guest.c
// starts every probe as the leader of a session of its own), with its tag in the environment,
// or one of its descendants. The union, so that a process that left the session, or was
// started with an environment of its own, or was re-parented, is still found. Never the probe
// itself, nor a process that has ended (a zombie).
static inline bool gp_is_lanework_of(const gp_stat_t *s, void *ctx) {
  const gp_owner_t *o = (const gp_owner_t *)ctx;
  if (s->pid == o->probe || s->state == 'Z' || s->state == 'X') return false;
  if (s->sid == o->probe || (o->tag_var[0] != '\0' && gp_env_has(s->pid, o->tag_var))) {
    return true;
  }
  if (!o->descendants) return false;
  gp_stat_t up = *s;
  for (int hops = 0; up.ppid > 1 && hops < 64; ++hops) {
    if (up.ppid == o->probe) return true;
    if (!gp_read_stat(up.ppid, &up)) return false;
  }
  return false;
}

static inline void gp_owner_init(gp_owner_t *o, int probe, const char *tag, bool descendants) {
  memset(o, 0, sizeof(*o));
  o->probe = probe;
  if (tag != NULL && tag[0] != '\0') {
    snprintf(o->tag_var, sizeof(o->tag_var), "LW_GUEST_TAG=%s", tag);
  }
  o->descendants = descendants;
}

// The processes lanework started for this probe, as gp_is_lanework_of finds them.
static inline void gp_lanework_procs(gp_procs_t *out) {
  gp_owner_t o;
  gp_owner_init(&o, (int)getpid(), getenv("LW_GUEST_TAG"), true);
  gp_scan(gp_is_lanework_of, &o, out);
}

// Whether p (pid and start time) still runs: a zombie has ended.
static inline bool gp_alive(const gp_stat_t *p) {
  gp_stat_t now;
  return gp_read_stat(p->pid, &now) && now.start == p->start && now.state != 'Z' &&
         now.state != 'X';
}

static inline bool gp_contains(const gp_procs_t *ps, const gp_stat_t *p) {
  for (int i = 0; i < ps->n; ++i) {
    if (ps->p[i].pid == p->pid && ps->p[i].start == p->start) return true;
  }
  return false;
}

#endif  // LANEWORK_TESTS_PARENT_GUEST_PROBE_UTIL_H_
