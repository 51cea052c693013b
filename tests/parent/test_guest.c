// tests/parent/test_guest.c — lanework is a good guest in the program that uses it (DESIGN
// §5.1, "A good guest in the host program"): nothing exists before the program asks, no
// lanework process is ever the program's child, lanework's threads leave the program's signals
// alone, sub children see the program after its static constructors, a threaded program that
// dlopens the library gets a working worker or an error at once, and parent death and destroy
// leave nothing behind.
//
// Each case runs an ordinary program, not this test process (which has Criterion's threads and
// makes lanework's zygote before main, tests/test_util.h): the probes guest_probe.c (built
// against the static and the shared library), guest_cxx_probe.cpp and guest_dlopen_probe.c.
// A probe is started as the leader of a new session, with a tag in its environment, its
// stdout and stderr in a file; it checks what it can see from inside and prints one FAIL line
// per broken rule. Every probe step runs under an alarm, and this side waits for a probe
// boundedly and kills it after, so a hang fails the case instead of hanging the suite.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parent/guest_probe_util.h"
#include "test_util.h"

typedef struct probe {
  pid_t pid;
  int out_fd;  // the probe's stdout and stderr: a file already unlinked, read from here
  char tag[64];  // LW_GUEST_TAG=<tag> in the probe's environment
} probe_t;

static void probe_start(probe_t *p, const char *exe, const char *arg1, const char *arg2) {
  static int seq;
  char path[] = "/tmp/lw_guest_out_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
  // Unlinked at once: nothing is left in /tmp whatever way the case ends.
  p->out_fd = open(path, O_RDONLY | O_CLOEXEC);
  unlink(path);
  cr_assert_geq(p->out_fd, 0, "open %s: %s", path, strerror(errno));
  snprintf(p->tag, sizeof(p->tag), "%d-%d-%lld", (int)getpid(), ++seq, (long long)time(NULL));
  // The probe's environment, made here: between fork and exec the child calls only
  // async-signal-safe functions (this process has Criterion's threads).
  extern char **environ;
  size_t n_env = 0;
  while (environ[n_env] != NULL) ++n_env;
  char **envp = calloc(n_env + 2, sizeof(char *));
  cr_assert_not_null(envp);
  char tag_var[96];
  snprintf(tag_var, sizeof(tag_var), "LW_GUEST_TAG=%s", p->tag);
  size_t k = 0;
  for (size_t i = 0; i < n_env; ++i) {
    if (strncmp(environ[i], "LW_ZYGOTE=", 10) == 0 || strncmp(environ[i], "LW_TRACE=", 9) == 0 ||
        strncmp(environ[i], "LW_GUEST_TAG=", 13) == 0) {
      continue;
    }
    envp[k++] = environ[i];
  }
  envp[k++] = tag_var;
  envp[k] = NULL;
  char *argv[] = {(char *)exe, (char *)arg1, (char *)arg2, NULL};
  p->pid = fork();
  cr_assert_geq(p->pid, 0, "fork: %s", strerror(errno));
  if (p->pid == 0) {
    setsid();
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    // Nothing of this test process's (Criterion's pipes) reaches the probe or its processes.
    syscall(SYS_close_range, 3u, ~0u, 0u);
    execve(exe, argv, envp);
    _exit(127);
  }
  free(envp);
  close(fd);
}

// The probe's output so far (the caller frees it).
static char *probe_output(const probe_t *p) {
  size_t cap = 4096, len = 0;
  char *text = malloc(cap);
  cr_assert_not_null(text);
  for (;;) {
    if (len + 1 == cap) {
      text = realloc(text, cap *= 2);
      cr_assert_not_null(text);
    }
    ssize_t n = pread(p->out_fd, text + len, cap - 1 - len, (off_t)len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  text[len] = '\0';
  return text;
}

// Waits up to limit_s for the probe to end (then kills it); its wait status, or -1 when it
// had to be killed.
static int probe_wait(probe_t *p, int limit_s) {
  int ws = 0;
  for (long waited_ms = 0;; waited_ms += 10) {
    pid_t r = waitpid(p->pid, &ws, WNOHANG);
    if (r == p->pid) return ws;
    if (r < 0 && errno != EINTR) return -1;
    if (waited_ms >= limit_s * 1000L) {
      kill(p->pid, SIGKILL);
      while (waitpid(p->pid, &ws, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    lw_test_sleep_us(10000);
  }
}

// Runs exe arg1 [arg2] to its end and asserts it found nothing, quoting what it printed.
static void run_probe(const char *exe, const char *arg1, const char *arg2) {
  probe_t p;
  probe_start(&p, exe, arg1, arg2);
  int ws = probe_wait(&p, 150);
  char *out = probe_output(&p);
  close(p.out_fd);
  cr_assert_neq(ws, -1, "%s %s %s still ran after 150 s (killed); it printed:\n%s", exe, arg1,
                arg2 ? arg2 : "", out);
  cr_assert(WIFEXITED(ws), "%s %s %s died (wait status 0x%x); it printed:\n%s", exe, arg1,
            arg2 ? arg2 : "", (unsigned)ws, out);
  cr_assert_eq(WEXITSTATUS(ws), 0, "%s %s %s exited %d; it printed:\n%s", exe, arg1,
               arg2 ? arg2 : "", WEXITSTATUS(ws), out);
  free(out);
}

// --- nothing before it is asked ---

Test(guest, linking_the_static_library_starts_no_process_thread_or_reservation, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "idle", NULL);
}

Test(guest, linking_the_shared_library_starts_no_process_thread_or_reservation, .timeout = 180) {
  run_probe(LW_GUEST_PROBE_SHARED, "idle", NULL);
}

Test(guest, l2_chip_use_starts_no_process_and_leaves_no_thread, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "l2", NULL);
}

// --- no lanework process is the program's child ---

Test(guest, program_has_no_child_after_create_runs_and_a_respawn, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "children", NULL);
}

Test(guest, program_has_no_child_after_lw_init_create_runs_and_a_respawn, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "children", "init");
}

Test(guest, wait_loop_returns_echild_after_create, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "wait", NULL);
}

Test(guest, wait_loop_returns_echild_after_lw_init_and_create, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "wait", "init");
}

Test(guest, system_returns_zero_beside_a_reaping_sigchld_handler_while_tasks_run,
     .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "system", NULL);
}

// --- signals belong to the program ---

Test(guest, every_thread_of_a_traced_worker_blocks_async_signals, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "sigmask_l3", NULL);
}

Test(guest, every_thread_of_an_l2_chip_blocks_async_signals, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "sigmask_l2", NULL);
}

// --- C++ globals in sub functions ---

Test(guest, cxx_sub_function_sees_globals_of_static_constructors, .timeout = 180) {
  run_probe(LW_GUEST_CXX_PROBE, "plain", NULL);
}

Test(guest, cxx_sub_function_sees_globals_of_static_constructors_after_lw_init,
     .timeout = 180) {
  run_probe(LW_GUEST_CXX_PROBE, "init", NULL);
}

Test(guest, cxx_sub_function_sees_globals_of_static_constructors_with_the_shared_library,
     .timeout = 180) {
  run_probe(LW_GUEST_CXX_PROBE_SHARED, "plain", NULL);
}

Test(guest,
     cxx_sub_function_sees_globals_of_static_constructors_after_lw_init_with_the_shared_library,
     .timeout = 180) {
  run_probe(LW_GUEST_CXX_PROBE_SHARED, "init", NULL);
}

// --- dlopen from a threaded program ---

Test(guest, dlopen_from_a_threaded_program_runs_chip_tasks_beside_a_thread_in_dl_iterate_phdr,
     .timeout = 180) {
  run_probe(LW_GUEST_DLOPEN_PROBE, "chips", NULL);
}

Test(guest, create_with_subs_from_a_threaded_program_without_lw_init_fails_at_once_naming_it,
     .timeout = 180) {
  run_probe(LW_GUEST_DLOPEN_PROBE, "subs", NULL);
}

// --- parent death and destroy ---

Test(guest, killing_the_program_takes_every_lanework_process_down, .timeout = 180) {
  probe_t p;
  probe_start(&p, LW_GUEST_PROBE, "park", NULL);
  // Until the probe says READY (its own alarms bound its steps; this side stops at 120 s).
  char *out = NULL;
  for (int i = 0;; ++i) {
    free(out);
    out = probe_output(&p);
    if (strstr(out, "READY") != NULL) break;
    int ws;
    if (waitpid(p.pid, &ws, WNOHANG) == p.pid) {
      cr_assert(false, "the probe ended before READY (wait status 0x%x); it printed:\n%s",
                (unsigned)ws, out);
    }
    if (i == 12000) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, NULL, 0);
      cr_assert(false, "the probe was not READY after 120 s; it printed:\n%s", out);
    }
    lw_test_sleep_us(10000);
  }

  static gp_procs_t found;
  gp_owner_t of;
  gp_owner_init(&of, (int)p.pid, p.tag, true);
  gp_scan(gp_is_lanework_of, &of, &found);
  char desc[4096];
  gp_describe(&found, desc, sizeof(desc));
  if (found.n < 3) {
    kill(p.pid, SIGKILL);
    waitpid(p.pid, NULL, 0);
    cr_assert(false,
              "found %d process(es) of the probe's worker (2 chips, 1 sub), expected at least "
              "3: %s; it printed:\n%s",
              found.n, desc, out);
  }

  cr_assert_eq(kill(p.pid, SIGKILL), 0);
  int ws;
  while (waitpid(p.pid, &ws, 0) < 0 && errno == EINTR) {
  }

  // Eventually (polled for up to 10 s) none of them runs, and no new one appeared.
  static gp_procs_t left;
  for (int i = 0;; ++i) {
    left.n = 0;
    for (int k = 0; k < found.n; ++k) {
      if (gp_alive(&found.p[k])) left.p[left.n++] = found.p[k];
    }
    static gp_procs_t fresh;
    gp_owner_t of_now;
    gp_owner_init(&of_now, (int)p.pid, p.tag, false);
    gp_scan(gp_is_lanework_of, &of_now, &fresh);
    for (int k = 0; k < fresh.n && left.n < GP_MAX_PROCS; ++k) {
      if (!gp_contains(&left, &fresh.p[k])) left.p[left.n++] = fresh.p[k];
    }
    if (left.n == 0 || i == 1000) break;
    lw_test_sleep_us(10000);
  }
  char left_desc[4096];
  gp_describe(&left, left_desc, sizeof(left_desc));
  close(p.out_fd);
  cr_assert_eq(left.n, 0,
               "10 s after the program was killed, %d process(es) of lanework's still run: %s "
               "(found before the kill: %s)",
               left.n, left_desc, desc);
  free(out);
}

Test(guest, destroy_leaves_no_process_or_fd_of_the_worker, .timeout = 180) {
  run_probe(LW_GUEST_PROBE, "destroy", NULL);
}
