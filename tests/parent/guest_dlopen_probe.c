// tests/parent/guest_dlopen_probe.c — a threaded program that loads liblanework with dlopen
// while another of its threads sits in a dl_iterate_phdr callback (what a C++ throw does while
// it unwinds), run by test_guest.c. It does not link lanework: it includes the public headers
// for their types only and calls through dlsym. DESIGN §5.1: a create from a threaded program
// works or fails at once with FAILED_PRECONDITION saying what to do, never a hang.
//
//   chips  a worker with 2 chips and no sub: create, register record
//          (tests/kernels/record.c), run a task on each chip, destroy: all must work
//   subs   a worker with 1 chip and 1 sub, without lw_init: the create must fail at once with
//          FAILED_PRECONDITION, and its message must name lw_init
//
// Order: the thread starts first (the program is threaded before lanework is loaded), the
// library is loaded and its calls looked up, and only then does the thread enter
// dl_iterate_phdr: glibc's dlopen itself waits for a thread inside dl_iterate_phdr, so a
// program cannot load a library at that moment whoever the library is. Each step is bounded by
// an alarm (20 s): a hang ends the probe with a FAIL naming the step. Findings go to stdout
// (guest_probe_util.h); exit status 0 when there were none.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lanework/lanework.h"
#include "parent/guest_probe_util.h"

// --- the thread that sits in dl_iterate_phdr ---

static int go_pipe[2], release_pipe[2];
static _Atomic int inside;

static int phdr_callback(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info;
  (void)size;
  (void)data;
  atomic_store(&inside, 1);
  char c;
  while (read(release_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return 1;  // stop the iteration
}

static void *phdr_main(void *arg) {
  (void)arg;
  char c;
  while (read(go_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  dl_iterate_phdr(phdr_callback, NULL);
  return NULL;
}

// --- the calls, looked up with dlsym ---

static struct {
  void (*config_default_sized)(lw_worker_config_t *, uint32_t);
  lw_status_t (*create)(const lw_worker_config_t *, lw_worker_t **);
  void (*destroy)(lw_worker_t *);
  lw_status_t (*load_file)(const char *, lw_callable_t *);
  void (*free_loaded)(lw_callable_t *);
  lw_status_t (*reg)(lw_worker_t *, const lw_callable_t *, lw_callable_handle_t *);
  lw_status_t (*run)(lw_worker_t *, lw_orch_fn, void *, lw_run_report_t *);
  lw_status_t (*submit)(lw_orch_t *, lw_callable_handle_t, const lw_args_t *,
                        const lw_run_config_t *, int32_t);
  void (*args_init)(lw_args_t *);
  lw_status_t (*add_tensor)(lw_args_t *, void *, uint64_t, lw_tag_t);
  lw_status_t (*add_scalar)(lw_args_t *, uint64_t);
  void *(*alloc)(lw_worker_t *, size_t);
  const lw_error_t *(*last_error)(void);
  const char *(*status_name)(lw_status_t);
} lw;

static bool look_up(void *lib) {
  struct {
    const char *name;
    void **slot;
  } calls[] = {
      {"lw_worker_config_default_sized", (void **)&lw.config_default_sized},
      {"lw_worker_create", (void **)&lw.create},
      {"lw_worker_destroy", (void **)&lw.destroy},
      {"lw_callable_load_file", (void **)&lw.load_file},
      {"lw_callable_free_loaded", (void **)&lw.free_loaded},
      {"lw_worker_register", (void **)&lw.reg},
      {"lw_worker_run", (void **)&lw.run},
      {"lw_orch_submit_next_level", (void **)&lw.submit},
      {"lw_args_init", (void **)&lw.args_init},
      {"lw_args_add_tensor", (void **)&lw.add_tensor},
      {"lw_args_add_scalar", (void **)&lw.add_scalar},
      {"lw_worker_alloc", (void **)&lw.alloc},
      {"lw_last_error", (void **)&lw.last_error},
      {"lw_status_name", (void **)&lw.status_name},
  };
  for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); ++i) {
    *calls[i].slot = dlsym(lib, calls[i].name);
    if (*calls[i].slot == NULL) {
      gp_fail("dlsym %s: %s", calls[i].name, dlerror());
      return false;
    }
  }
  return true;
}

// --- the two modes ---

typedef struct job {
  lw_callable_handle_t record;
  int64_t *log;
} job_t;

static lw_status_t orch(lw_orch_t *o, void *user) {
  job_t *j = user;
  for (int32_t chip = 0; chip < 2; ++chip) {
    lw_args_t a;
    lw.args_init(&a);
    LW_RETURN_IF_ERROR(lw.add_tensor(&a, j->log, 64 * sizeof(int64_t), LW_TAG_NO_DEP));
    LW_RETURN_IF_ERROR(lw.add_scalar(&a, (uint64_t)(10 + chip)));
    LW_RETURN_IF_ERROR(lw.submit(o, j->record, &a, NULL, chip));
  }
  return LW_OK;
}

static void mode_chips(void) {
  lw_worker_config_t cfg;
  lw.config_default_sized(&cfg, (uint32_t)sizeof(cfg));
  cfg.n_chips = 2;
  cfg.n_subs = 0;
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w = NULL;
  gp_arm("lw_worker_create (2 chips, no sub) from a threaded program", 20);
  lw_status_t st = lw.create(&cfg, &w);
  if (st != LW_OK) {
    gp_fail("lw_worker_create (2 chips, no sub): %s: %s", lw.status_name(st),
            lw.last_error()->message);
    return;
  }
  char path[512];
  snprintf(path, sizeof(path), "%s/record.so", LW_KERNEL_DIR);
  lw_callable_t c;
  gp_arm("lw_callable_load_file", 20);
  if ((st = lw.load_file(path, &c)) != LW_OK) {
    gp_fail("loading %s: %s", path, lw.last_error()->message);
  } else {
    job_t j;
    gp_arm("lw_worker_register of a sim kernel while a thread sits in dl_iterate_phdr", 20);
    st = lw.reg(w, &c, &j.record);
    lw.free_loaded(&c);
    if (st != LW_OK) {
      gp_fail("lw_worker_register: %s: %s", lw.status_name(st), lw.last_error()->message);
    } else if ((j.log = lw.alloc(w, 64 * sizeof(int64_t))) == NULL) {
      gp_fail("lw_worker_alloc: %s", lw.last_error()->message);
    } else {
      memset(j.log, 0, 64 * sizeof(int64_t));
      lw_run_report_t rep;
      gp_arm("lw_worker_run of a task on each chip", 20);
      st = lw.run(w, orch, &j, &rep);
      if (st != LW_OK) {
        gp_fail("lw_worker_run: %s: %s", lw.status_name(st), rep.error.message);
      } else if (j.log[0] != 2) {
        gp_fail("the run recorded %lld values, not 2", (long long)j.log[0]);
      }
    }
  }
  gp_arm("lw_worker_destroy", 20);
  lw.destroy(w);
  alarm(0);
}

static void mode_subs(void) {
  lw_worker_config_t cfg;
  lw.config_default_sized(&cfg, (uint32_t)sizeof(cfg));
  cfg.n_chips = 1;
  cfg.n_subs = 1;
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w = NULL;
  gp_arm("lw_worker_create (1 chip, 1 sub) from a threaded program without lw_init", 20);
  lw_status_t st = lw.create(&cfg, &w);
  alarm(0);
  if (st == LW_OK) {
    gp_fail("lw_worker_create with a sub child from a threaded program without lw_init "
            "succeeded; it must fail FAILED_PRECONDITION saying to call lw_init");
    gp_arm("lw_worker_destroy", 20);
    lw.destroy(w);
    alarm(0);
    return;
  }
  const char *msg = lw.last_error()->message;
  if (st != LW_FAILED_PRECONDITION) {
    gp_fail("lw_worker_create failed %s, not FAILED_PRECONDITION: %s", lw.status_name(st), msg);
  }
  if (strstr(msg, "lw_init") == NULL) gp_fail("the message does not name lw_init: %s", msg);
  if (w != NULL) gp_fail("a failed lw_worker_create left *out set");
}

int main(int argc, char **argv) {
  gp_start();
  if (argc < 2 || (strcmp(argv[1], "chips") != 0 && strcmp(argv[1], "subs") != 0)) {
    gp_fail("usage: %s chips|subs", argv[0]);
    return 2;
  }
  if (pipe(go_pipe) != 0 || pipe(release_pipe) != 0) {
    gp_fail("pipe: %s", strerror(errno));
    return 1;
  }
  pthread_t th;
  if (pthread_create(&th, NULL, phdr_main, NULL) != 0) {
    gp_fail("pthread_create");
    return 1;
  }
  gp_arm("dlopen of liblanework", 20);
  void *lib = dlopen(LW_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    gp_fail("dlopen %s: %s", LW_LIB_PATH, dlerror());
    return 1;
  }
  if (!look_up(lib)) return 1;
  // Into dl_iterate_phdr, and wait until it is inside the callback.
  gp_arm("the thread entering dl_iterate_phdr", 20);
  (void)!write(go_pipe[1], "g", 1);
  while (!atomic_load(&inside)) gp_sleep_ms(1);
  alarm(0);

  if (strcmp(argv[1], "chips") == 0) {
    mode_chips();
  } else {
    mode_subs();
  }

  gp_arm("releasing the thread in dl_iterate_phdr", 20);
  (void)!write(release_pipe[1], "r", 1);
  pthread_join(th, NULL);
  alarm(0);
  printf("%s %s: %d finding(s)\n", argv[0], argv[1], gp_failures);
  return gp_failures == 0 ? 0 : 1;
}
