// tools/thread_times.c — per-role CPU and run-queue times from the kernel's schedstat
// (thread_times.h).
#include "tools/thread_times.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

// Every process now, each with its parent; the caller frees *out. Returns the count (0 on
// failure).
static size_t list_processes(proc_entry_t **out) {
  *out = NULL;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  size_t n = 0, cap = 0;
  proc_entry_t *v = NULL;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    pid_t ppid = read_ppid((pid_t)pid);
    if (ppid < 0) continue;  // gone meanwhile
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      proc_entry_t *grown = realloc(v, cap * sizeof(*v));
      if (!grown) break;
      v = grown;
    }
    v[n++] = (proc_entry_t){(pid_t)pid, ppid, false};
  }
  closedir(d);
  *out = v;
  return n;
}

static lw_bench_role_t role_of(const char *comm, pid_t pid, pid_t tid, pid_t caller_tid) {
  if (pid == getpid() && tid == caller_tid) return LW_BENCH_ROLE_CALLER;
  if (strcmp(comm, "lw-sched") == 0) return LW_BENCH_ROLE_SCHEDULER;
  if (strncmp(comm, "lw-run-", 7) == 0) return LW_BENCH_ROLE_RUN_LANE;
  if (strncmp(comm, "lw-chip-", 8) == 0) return LW_BENCH_ROLE_MAILBOX_LOOP;
  return LW_BENCH_ROLE_OTHER;
}

// Adds one thread's times to its role: 1 added, 0 the thread is gone, -1 it is there but its
// schedstat cannot be read.
static int add_thread(pid_t pid, pid_t tid, pid_t caller_tid, bool only_lw,
                      lw_bench_times_t *out) {
  char path[96], comm[32] = "";
  snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  if (!fgets(comm, sizeof(comm), f)) comm[0] = '\0';
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  if (only_lw && strncmp(comm, "lw-", 3) != 0) return 0;
  snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
  f = fopen(path, "r");
  if (!f) {
    // The thread ended (its directory is gone too) or the kernel keeps no schedstat.
    snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
    return access(path, F_OK) == 0 ? -1 : 0;
  }
  long long on_cpu, waiting;
  int got = fscanf(f, "%lld %lld", &on_cpu, &waiting);
  fclose(f);
  if (got != 2) return -1;
  // Sleeps: "voluntary_ctxt_switches:" in the thread's status (absent: counted as none).
  long long sleeps = 0;
  snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
  f = fopen(path, "r");
  if (f) {
    char line[128];
    while (fgets(line, sizeof(line), f)) {
      if (sscanf(line, "voluntary_ctxt_switches: %lld", &sleeps) == 1) break;
    }
    fclose(f);
  }
  lw_bench_role_t role = role_of(comm, pid, tid, caller_tid);
  out->cpu_ns[role] += on_cpu;
  out->wait_ns[role] += waiting;
  out->sleeps[role] += sleeps;
  return 1;
}

// Adds the threads of one process but the caller; false when a schedstat was missing.
static bool add_process(pid_t pid, pid_t caller_tid, lw_bench_times_t *out) {
  char path[96];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return true;  // the process ended meanwhile
  bool ok = true;
  bool self = pid == getpid();
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || tid <= 0 || (self && tid == caller_tid)) continue;
    ok &= add_thread(pid, (pid_t)tid, caller_tid, !self, out) >= 0;
  }
  closedir(d);
  return ok;
}

bool lw__bench_times_read(pid_t caller_tid, bool caller_first, lw_bench_times_t *out) {
  memset(out, 0, sizeof(*out));
  pid_t self = getpid();
  bool ok = true;
  if (caller_first) ok &= add_thread(self, caller_tid, caller_tid, false, out) > 0;
  proc_entry_t *v;
  size_t n = list_processes(&v);
  if (n == 0) {
    free(v);
    return false;
  }
  // Mark this process, then whatever descends from a marked one, until nothing changes (a
  // process may be listed before its parent).
  for (size_t i = 0; i < n; ++i) v[i].ours = v[i].pid == self;
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
    if (v[i].ours) ok &= add_process(v[i].pid, caller_tid, out);
  }
  free(v);
  if (!caller_first) ok &= add_thread(self, caller_tid, caller_tid, false, out) > 0;
  out->ok = ok;
  return ok;
}

void lw__bench_times_diff(const lw_bench_times_t *after, const lw_bench_times_t *before,
                          lw_bench_times_t *out) {
  out->ok = after->ok && before->ok;
  for (int r = 0; r < LW_BENCH_ROLE_COUNT; ++r) {
    int64_t cpu = after->cpu_ns[r] - before->cpu_ns[r];
    int64_t wait = after->wait_ns[r] - before->wait_ns[r];
    int64_t sleeps = after->sleeps[r] - before->sleeps[r];
    out->cpu_ns[r] = cpu > 0 ? cpu : 0;
    out->wait_ns[r] = wait > 0 ? wait : 0;
    out->sleeps[r] = sleeps > 0 ? sleeps : 0;
  }
}
