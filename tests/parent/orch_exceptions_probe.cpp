// tests/parent/orch_exceptions_probe.cpp — a C++ program whose orch functions throw
// (docs/api.md, "Exceptions and longjmp"), run by test_parent_orch_exceptions. Linked with
// liblanework.so as a C++ program would. One scenario per run, named by argv[1]:
//   sync       a throw from an orch function lw_worker_run runs inline;
//   async      a throw from one on the orchestrator thread (lw_worker_run_async);
//   in_flight  a throw while a task it submitted runs on a chip;
//   not_std    a throw of an int, from both paths.
// Each checks the run's status and message, then that the worker still runs (sync and async),
// then destroys it. Exits 0 when every check held; otherwise prints what failed and exits 1.
// On the code before the guard, `sync` hung at its second run and `async` was terminated.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "lanework/callable.h"
#include "lanework/handle.h"
#include "lanework/orch.h"
#include "lanework/worker.h"

namespace {

int failures = 0;

void check(bool ok, const std::string &what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

struct Destructed {
  bool *flag;
  ~Destructed() { *flag = true; }
};

struct Job {
  lw_callable_handle_t gate{};
  std::atomic<uint32_t> *words = nullptr;  // gate, entered (in the arena)
  bool submit = false;
  bool throw_int = false;
  bool unwound = false;  // a destructor between the throw and the guard ran
};

lw_status_t throwing_orch(lw_orch_t *o, void *user) {
  Job *j = static_cast<Job *>(user);
  Destructed d{&j->unwound};
  if (j->submit) {
    lw_args_t a;
    lw_args_init(&a);
    if (lw_args_add_tensor(&a, &j->words[0], sizeof(uint32_t), LW_TAG_NO_DEP) != LW_OK ||
        lw_args_add_tensor(&a, &j->words[1], sizeof(uint32_t), LW_TAG_NO_DEP) != LW_OK ||
        lw_orch_submit_next_level(o, j->gate, &a, nullptr, 0) != LW_OK) {
      return LW_INTERNAL;
    }
    struct timespec pause = {0, 100000};
    while (j->words[1].load() == 0) nanosleep(&pause, nullptr);  // the task runs on chip 0
  }
  if (j->throw_int) throw 42;
  throw std::runtime_error("boom");
}

lw_status_t ok_orch(lw_orch_t *, void *) { return LW_OK; }

lw_worker_t *make_worker() {
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.n_subs = 0;
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w = nullptr;
  if (lw_worker_create(&cfg, &w) != LW_OK) {
    fprintf(stderr, "FAIL: lw_worker_create: %s\n", lw_last_error()->message);
    exit(1);
  }
  return w;
}

// The run's error says which run threw, what, and where the rule is written.
void check_error(lw_status_t st, const lw_error_t *e, int run, const char *type,
                 const char *path) {
  check(st == LW_FAILED_PRECONDITION,
        std::string(path) + ": status " + lw_status_name(st) + ", want LW_FAILED_PRECONDITION");
  std::string msg = e ? e->message : "(no error)";
  check(msg.find("run " + std::to_string(run) + ": its orch function threw a C++ exception (" +
                 type + ")") !=
            std::string::npos,
        std::string(path) + ": message: " + msg);
  check(msg.find("exceptions must not leave an orch function") != std::string::npos,
        std::string(path) + ": message: " + msg);
  check(msg.find("Exceptions and longjmp") != std::string::npos,
        std::string(path) + ": message: " + msg);
}

// The worker runs normal work again, on both paths.
void check_usable(lw_worker_t *w, const char *path) {
  lw_run_report_t rep;
  lw_status_t st = lw_worker_run(w, ok_orch, nullptr, &rep);
  check(st == LW_OK, std::string(path) + ": the next lw_worker_run: " + lw_status_name(st) +
                         " " + lw_last_error()->message);
  lw_handle_t *h = nullptr;
  st = lw_worker_run_async(w, ok_orch, nullptr, &h);
  check(st == LW_OK, std::string(path) + ": the next lw_worker_run_async: " + lw_status_name(st));
  if (h) {
    st = lw_handle_wait(h, LW_WAIT_FOREVER);
    check(st == LW_OK, std::string(path) + ": its handle: " + lw_status_name(st));
    lw_handle_release(h);
  }
}

void run_sync(lw_worker_t *w, Job *j, int run, const char *type) {
  lw_run_report_t rep;
  memset(&rep, 0, sizeof(rep));
  lw_status_t st = LW_OK;
  try {
    st = lw_worker_run(w, throwing_orch, j, &rep);
  } catch (...) {
    check(false, "sync: the exception left lw_worker_run");
    return;
  }
  check_error(st, lw_last_error(), run, type, "sync");
  check(rep.status == st, "sync: the report's status is the run's");
  check(std::uncaught_exceptions() == 0, "sync: the thread still counts an uncaught exception");
  check(j->unwound, "sync: a destructor between the throw and lanework did not run");
}

void run_async(lw_worker_t *w, Job *j, int run, const char *type) {
  lw_handle_t *h = nullptr;
  if (lw_worker_run_async(w, throwing_orch, j, &h) != LW_OK) {
    check(false, "async: lw_worker_run_async refused");
    return;
  }
  lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
  check_error(st, lw_handle_error(h), run, type, "async");
  lw_handle_release(h);
  check(j->unwound, "async: a destructor between the throw and lanework did not run");
}

int scenario(const std::string &name) {
  lw_worker_t *w = make_worker();
  Job j;
  if (name == "sync") {
    run_sync(w, &j, 1, "std::runtime_error");
  } else if (name == "async") {
    run_async(w, &j, 1, "std::runtime_error");
  } else if (name == "in_flight") {
    lw_callable_t c;
    std::string path = std::string(LW_KERNEL_DIR) + "/gate.so";
    if (lw_callable_load_file(path.c_str(), &c) != LW_OK ||
        lw_worker_register(w, &c, &j.gate) != LW_OK) {
      fprintf(stderr, "FAIL: gate kernel: %s\n", lw_last_error()->message);
      return 1;
    }
    lw_callable_free_loaded(&c);
    j.words = static_cast<std::atomic<uint32_t> *>(lw_worker_alloc(w, 64));
    new (&j.words[0]) std::atomic<uint32_t>(0);
    new (&j.words[1]) std::atomic<uint32_t>(0);
    j.submit = true;
    lw_handle_t *h = nullptr;
    if (lw_worker_run_async(w, throwing_orch, &j, &h) != LW_OK) return 1;
    lw_status_t st = lw_handle_wait(h, LW_WAIT_FOREVER);
    check_error(st, lw_handle_error(h), 1, "std::runtime_error", "in_flight");
    lw_run_report_t rep;
    check(lw_handle_run_report(h, &rep) == LW_OK, "in_flight: no report");
    // The task it submitted ended once: stopped with the run (the gate never opened).
    check(rep.n_tasks == 1 && rep.n_completed + rep.n_failed == 1,
          "in_flight: the task did not end exactly once (" + std::to_string(rep.n_tasks) +
              " tasks, " + std::to_string(rep.n_completed) + " completed, " +
              std::to_string(rep.n_failed) + " failed)");
    lw_task_report_t t;
    size_t n = 0;
    check(lw_handle_run_tasks(h, &t, 1, &n) == LW_OK && n == 1 && t.status == LW_CANCELLED,
          "in_flight: the task's report is not CANCELLED");
    lw_handle_release(h);
  } else if (name == "not_std") {
    j.throw_int = true;
    run_sync(w, &j, 1, "int");
    j.unwound = false;
    run_async(w, &j, 2, "int");
  } else {
    fprintf(stderr, "unknown scenario %s\n", name.c_str());
    return 2;
  }
  check_usable(w, name.c_str());
  lw_worker_destroy(w);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s sync|async|in_flight|not_std\n", argv[0]);
    return 2;
  }
  return scenario(argv[1]);
}
