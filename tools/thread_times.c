// tools/thread_times.c — per-thread CPU and run-queue times from the kernel's schedstat, summed
// by role (thread_times.h).
#include "tools/thread_times.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct proc_entry {
  pid_t pid, ppid;
  bool ours;  // this process or a descendant of it
} proc_entry_t;

const char *lw__bench_role_name(lw_bench_role_t role) {
  static const char *const names[LW_BENCH_ROLE_COUNT] = {"caller", "scheduler", "run_lane",
                                                         "mailbox_loop", "other"};
  return role < LW_BENCH_ROLE_COUNT ? names[role] : "?";
}

// The parent of pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces and
// parentheses, so the fields start after the last ')'). -1 when it is gone or unreadable.
static pid_t read_ppid(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *close = strrchr(buf, ')');
  int ppid;
  char state;
  if (!close || sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return (pid_t)ppid;
}

// Every process now, each with its parent; the caller frees *out. Returns the count, 0 on
// failure (then *out is NULL).
static size_t list_processes(proc_entry_t **out) {
  *out = NULL;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  size_t n = 0, cap = 0;
  proc_entry_t *v = NULL;
  bool failed = false;
  for (struct dirent *e; !failed && (e = readdir(d)) != NULL;) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    pid_t ppid = read_ppid((pid_t)pid);
    if (ppid < 0) continue;  // gone meanwhile
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      proc_entry_t *grown = realloc(v, cap * sizeof(*v));
      if (!grown) {
        failed = true;
        break;
      }
      v = grown;
    }
    v[n++] = (proc_entry_t){(pid_t)pid, ppid, false};
  }
  closedir(d);
  if (failed) {
    free(v);
    return 0;
  }
  *out = v;
  return n;
}

static lw_bench_role_t role_of(const char *comm, pid_t pid, pid_t tid, pid_t caller_tid) {
  if (pid == getpid() && tid == caller_tid) return LW_BENCH_ROLE_CALLER;
  if (strcmp(comm, "lw-sched") == 0) return LW_BENCH_ROLE_SCHEDULER;
  if (strncmp(comm, "lw-run-", 7) == 0) return LW_BENCH_ROLE_RUN_LANE;
  // A chip child's main thread runs its mailbox loop; threads it starts inherit the name.
  if (strncmp(comm, "lw-chip-", 8) == 0 && tid == pid) return LW_BENCH_ROLE_MAILBOX_LOOP;
  return LW_BENCH_ROLE_OTHER;
}

// The kernel's encoding of a thread's CPU clock (CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD_MASK of
// include/linux/posix-timers.h), which clock_gettime allows for threads of this process only.
static clockid_t thread_cpu_clock(pid_t tid) {
  return (clockid_t)((int)(~(unsigned)tid << 3) | 4 | 2);
}

static bool thread_gone(pid_t pid, pid_t tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
  return access(path, F_OK) != 0;
}

typedef struct snapshot {
  pid_t caller_tid;
  lw_bench_times_t *out;
  size_t cap;
} snapshot_t;

// Appends one thread: 1 added, 0 not counted or gone, -1 there but unreadable.
static int add_thread(snapshot_t *s, pid_t pid, pid_t tid, bool only_lw) {
  char path[96], comm[32] = "";
  snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  if (!fgets(comm, sizeof(comm), f)) comm[0] = '\0';
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  if (only_lw && strncmp(comm, "lw-", 3) != 0) return 0;
  snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
  long long on_cpu = 0, waiting = 0;
  f = fopen(path, "r");
  int got = f ? fscanf(f, "%lld %lld", &on_cpu, &waiting) : 0;
  if (f) fclose(f);
  // Unreadable: fine if the thread ended meanwhile, a missing schedstat otherwise.
  if (got != 2) return thread_gone(pid, tid) ? 0 : -1;
  if (pid == getpid()) {
    struct timespec ts;
    clockid_t clock = tid == s->caller_tid ? CLOCK_THREAD_CPUTIME_ID : thread_cpu_clock(tid);
    if (clock_gettime(clock, &ts) == 0) on_cpu = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
  }
  long long sleeps = 0;  // "voluntary_ctxt_switches:" in the thread's status (absent: none)
  snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
  f = fopen(path, "r");
  if (f) {
    char line[128];
    while (fgets(line, sizeof(line), f)) {
      if (sscanf(line, "voluntary_ctxt_switches: %lld", &sleeps) == 1) break;
    }
    fclose(f);
  }
  if (s->out->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    lw_bench_thread_time_t *grown = realloc(s->out->thread, cap * sizeof(*grown));
    if (!grown) return -1;
    s->out->thread = grown;
    s->cap = cap;
  }
  s->out->thread[s->out->n++] = (lw_bench_thread_time_t){
      pid, tid, role_of(comm, pid, tid, s->caller_tid), on_cpu, waiting, sleeps};
  return 1;
}

// Adds the threads of one process but the caller; false when one was unreadable.
static bool add_process(snapshot_t *s, pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return true;  // the process ended meanwhile
  bool ok = true, self = pid == getpid();
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || tid <= 0 || (self && tid == s->caller_tid)) continue;
    ok &= add_thread(s, pid, (pid_t)tid, !self) >= 0;
  }
  closedir(d);
  return ok;
}

bool lw__bench_times_read(pid_t caller_tid, bool caller_first, lw_bench_times_t *out) {
  return lw__bench_times_read_with(caller_tid, caller_first, NULL, 0, out);
}

bool lw__bench_times_read_with(pid_t caller_tid, bool caller_first, const pid_t *roots,
                               size_t n_roots, lw_bench_times_t *out) {
  memset(out, 0, sizeof(*out));
  snapshot_t s = {caller_tid, out, 0};
  pid_t self = getpid();
  bool ok = true;
  if (caller_first) ok &= add_thread(&s, self, caller_tid, false) > 0;
  proc_entry_t *v;
  size_t n = list_processes(&v);
  if (n == 0) return false;
  // Mark this process, then whatever descends from a marked one, until nothing changes (a
  // process may be listed before its parent).
  for (size_t i = 0; i < n; ++i) {
    v[i].ours = v[i].pid == self;
    for (size_t r = 0; r < n_roots; ++r) v[i].ours |= roots[r] > 0 && v[i].pid == roots[r];
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < n; ++i) {
      if (v[i].ours) continue;
      for (size_t k = 0; k < n; ++k) {
        if (v[k].ours && v[k].pid == v[i].ppid) {
          v[i].ours = grew = true;
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (v[i].ours) ok &= add_process(&s, v[i].pid);
  }
  free(v);
  if (!caller_first) ok &= add_thread(&s, self, caller_tid, false) > 0;
  out->ok = ok;
  return ok;
}

void lw__bench_times_free(lw_bench_times_t *t) {
  free(t->thread);
  memset(t, 0, sizeof(*t));
}

static int64_t nonnegative(int64_t v) { return v > 0 ? v : 0; }

void lw__bench_times_diff(const lw_bench_times_t *after, const lw_bench_times_t *before,
                          lw_bench_role_times_t *out) {
  memset(out, 0, sizeof(*out));
  out->ok = after->ok && before->ok;
  for (size_t i = 0; i < after->n; ++i) {
    const lw_bench_thread_time_t *a = &after->thread[i];
    lw_bench_thread_time_t b = {0};  // a thread that started between the snapshots: all of it
    for (size_t k = 0; k < before->n; ++k) {
      if (before->thread[k].pid == a->pid && before->thread[k].tid == a->tid) {
        b = before->thread[k];
        break;
      }
    }
    out->cpu_ns[a->role] += nonnegative(a->cpu_ns - b.cpu_ns);
    out->wait_ns[a->role] += nonnegative(a->wait_ns - b.wait_ns);
    out->sleeps[a->role] += nonnegative(a->sleeps - b.sleeps);
  }
}
