// tests/parent/guest_cxx_probe.cpp — a C++ program whose sub function reads globals that the
// program's static constructors set, run by test_guest.c (DESIGN §5.1: sub children see the
// program as it is after its static constructors). Built against liblanework.a
// (lw_guest_cxx_probe) and liblanework.so (lw_guest_cxx_probe_shared). argv[1]: "plain" (the
// first lw_worker_create starts what lanework needs) or "init" (lw_init first thing in main).
//
// The sub function writes what it saw into its output tensor (arena memory) before it touches
// std::cout, so a child that dies on the print still shows what it saw. Findings go to stdout
// (guest_probe_util.h); exit status 0 when there were none.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "lanework/args.h"
#include "lanework/orch.h"
#include "lanework/status.h"
#include "lanework/worker.h"
#include "parent/guest_probe_util.h"

namespace {

std::string g_word = "constructed";
std::map<std::string, int> g_table = {{"one", 1}, {"two", 2}, {"three", 3}};
int g_counter;

__attribute__((constructor)) void set_counter() { g_counter = 42; }

struct seen_t {
  char word[32];
  int32_t table_entries;
  int32_t counter;
  int32_t cout_good;
  int32_t ran;
};

lw_status_t sub_look(const lw_kernel_args_t *a) {
  seen_t *s = static_cast<seen_t *>(a->tensor[0].data);
  size_t n = g_word.size();
  if (n >= sizeof(s->word)) n = sizeof(s->word) - 1;
  if (n > 0) std::memcpy(s->word, g_word.data(), n);
  s->word[n] = '\0';
  s->table_entries = static_cast<int32_t>(g_table.size());
  s->counter = g_counter;
  s->ran = 1;
  std::cout << "sub function saw '" << g_word << "', " << g_table.size() << " entries, counter "
            << g_counter << std::endl;
  s->cout_good = std::cout.good() ? 1 : 0;
  return LW_OK;
}

struct job_t {
  lw_callable_handle_t sub;
  seen_t *seen;
};

lw_status_t orch(lw_orch_t *o, void *user) {
  job_t *j = static_cast<job_t *>(user);
  lw_args_t a;
  lw_args_init(&a);
  LW_RETURN_IF_ERROR(lw_args_add_tensor(&a, j->seen, sizeof(seen_t), LW_TAG_OUTPUT));
  return lw_orch_submit_sub(o, j->sub, &a);
}

}  // namespace

int main(int argc, char **argv) {
  gp_start();
  bool init = argc > 1 && std::strcmp(argv[1], "init") == 0;
  if (init) {
    gp_arm("lw_init", 30);
    lw_status_t st = lw_init();
    if (st != LW_OK) {
      gp_fail("lw_init: %s: %s", lw_status_name(st), lw_last_error()->message);
      return 1;
    }
  }
  if (g_word != "constructed" || g_table.size() != 3 || g_counter != 42) {
    gp_fail("the program itself sees unconstructed globals");
    return 1;
  }
  lw_worker_config_t cfg;
  lw_worker_config_default(&cfg);
  cfg.n_chips = 1;
  cfg.n_subs = 1;
  cfg.arena_bytes = 16ull << 20;
  lw_worker_t *w = nullptr;
  gp_arm("lw_worker_create", 30);
  lw_status_t st = lw_worker_create(&cfg, &w);
  if (st != LW_OK) {
    gp_fail("lw_worker_create: %s: %s", lw_status_name(st), lw_last_error()->message);
    return 1;
  }
  job_t j;
  gp_arm("lw_worker_register_sub", 30);
  st = lw_worker_register_sub(w, sub_look, "sub_look", &j.sub);
  if (st != LW_OK) {
    gp_fail("lw_worker_register_sub: %s: %s", lw_status_name(st), lw_last_error()->message);
    return 1;
  }
  j.seen = static_cast<seen_t *>(lw_worker_alloc(w, sizeof(seen_t)));
  if (j.seen == nullptr) {
    gp_fail("lw_worker_alloc: %s", lw_last_error()->message);
    return 1;
  }
  std::memset(j.seen, 0, sizeof(seen_t));
  lw_run_report_t rep;
  gp_arm("a run of the sub function", 30);
  st = lw_worker_run(w, orch, &j, &rep);
  alarm(0);
  const seen_t &s = *j.seen;
  if (st != LW_OK) {
    gp_fail("the run of the sub function failed: %s: %s", lw_status_name(st), rep.error.message);
  }
  if (!s.ran) {
    gp_fail("the sub function did not run");
  } else {
    if (std::strcmp(s.word, "constructed") != 0) {
      gp_fail("the sub function saw the std::string global as '%s', not 'constructed'", s.word);
    }
    if (s.table_entries != 3) {
      gp_fail("the sub function saw %d entries in the std::map global, not 3", s.table_entries);
    }
    if (s.counter != 42) {
      gp_fail("the sub function saw the counter as %d, not 42 (set by a constructor)",
              s.counter);
    }
    if (st == LW_OK && !s.cout_good) gp_fail("std::cout failed in the sub function");
  }
  gp_arm("lw_worker_destroy", 30);
  lw_worker_destroy(w);
  alarm(0);
  std::printf("%s %s: %d finding(s)\n", argv[0], init ? "init" : "plain", gp_failures);
  return gp_failures == 0 ? 0 : 1;
}
