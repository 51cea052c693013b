// child/sub_child.c — the sub-child process loop. See child.h.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "child/child_common.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "lanework/worker.h"

#define MAX_SUB_FNS 256

// The table only grows (the parent replays it in order into a respawned child), so an index
// never names another function, with one exception: the parent may drop the last entry again
// (UNREGISTER of that index) when a REGISTER_SUB failed on another sub child. Each entry also
// keeps the tag the parent gave it, and every task carries the tag of the function it was
// built for next to the index: a task whose tag does not match is refused, never run.
typedef struct sub_entry {
  lw_sub_fn fn;
  uint32_t tag;
  char name[LW_MB_NAME_BYTES];
} sub_entry_t;

static sub_entry_t subs[MAX_SUB_FNS];
static uint32_t n_subs;

static void serve_control(lw_child_ctx_t *c, uint32_t index) {
  lw_mb_control_taken_t t;
  lw_error_t err;
  lw__error_clear(&err);
  if (!lw__child_take_control(c, &t)) return;
  if (t.command == LW_MB_CMD_CANCEL) {
    lw__child_ack(c, LW_OK, false, 0, NULL);  // REGISTER_SUB is synchronous: nothing queued
    return;
  }
  if (t.command == LW_MB_CMD_UNREGISTER) {
    // Synchronous rollback of the last REGISTER_SUB; nothing else may be dropped.
    if (n_subs == 0 || t.target != n_subs - 1) {
      lw__error_set(&err, LW_FAILED_PRECONDITION, (int32_t)index, 0,
                    "sub child %u: only the last sub function (index %u) can be dropped, not "
                    "index %llu",
                    index, n_subs ? n_subs - 1 : 0, (unsigned long long)t.target);
      lw__child_ack(c, LW_FAILED_PRECONDITION, false, 0, &err);
      return;
    }
    n_subs--;
    memset(&subs[n_subs], 0, sizeof(subs[n_subs]));
    lw__child_ack(c, LW_OK, false, 0, NULL);
    return;
  }
  if (t.command != LW_MB_CMD_REGISTER_SUB) {
    lw__error_set(&err, LW_INVALID_ARGUMENT, (int32_t)index, 0,
                  "sub child %u: command %u is not for sub children", index,
                  (unsigned)t.command);
    lw__child_ack(c, LW_INVALID_ARGUMENT, false, 0, &err);
    return;
  }
  // The address comes from shared memory: check it is code of a loaded object before it is
  // ever called.
  Dl_info info;
  void *addr = (void *)(uintptr_t)t.target;
  if (!addr || dladdr(addr, &info) == 0 || info.dli_fbase == NULL) {
    lw__error_set(&err, LW_INVALID_ARGUMENT, (int32_t)index, 0,
                  "sub child %u: %p is not code of a loaded object", index, addr);
    lw__child_ack(c, LW_INVALID_ARGUMENT, false, 0, &err);
    return;
  }
  if (n_subs == MAX_SUB_FNS) {
    lw__error_set(&err, LW_RESOURCE_EXHAUSTED, (int32_t)index, 0,
                  "sub child %u: %u sub functions registered already", index, MAX_SUB_FNS);
    lw__child_ack(c, LW_RESOURCE_EXHAUSTED, false, 0, &err);
    return;
  }
  subs[n_subs].fn = (lw_sub_fn)addr;
  subs[n_subs].tag = (uint32_t)t.control_id;
  snprintf(subs[n_subs].name, sizeof(subs[n_subs].name), "%s", t.name);
  lw__child_ack(c, LW_OK, false, n_subs, NULL);
  n_subs++;
}

static void serve_task(lw_child_ctx_t *c, uint32_t index, uint32_t frame) {
  lw_mb_task_taken_t t;
  lw_error_t err;
  lw__error_clear(&err);
  lw_mb_task_result_t r;
  memset(&r, 0, sizeof(r));
  if (lw__mailbox_take_task(c->mb, frame, &c->env->arena, &t, &err) != LW_OK) {
    lw_mb_identity_t id = c->mb->task[frame].identity;
    // The mailbox does not name the child (its header is writable memory); this child does.
    r.status = lw__error_set(&r.error, err.code, (int32_t)index, id.task_id, "sub child %u: %s",
                             index, err.message);
    lw__child_complete_task(c, frame, &id, &r);
    return;
  }
  uint64_t fn_index = t.callable & 0xffffffffu;
  uint32_t fn_tag = (uint32_t)(t.callable >> 32);
  if (t.kind != LW_MB_TASK_SUB || fn_index >= n_subs) {
    r.status = lw__error_set(&r.error, LW_INVALID_ARGUMENT, (int32_t)index, t.identity.task_id,
                             "sub child %u: unknown sub function %llu (kind %u)", index,
                             (unsigned long long)fn_index, (unsigned)t.kind);
    lw__child_complete_task(c, frame, &t.identity, &r);
    return;
  }
  if (subs[fn_index].tag != fn_tag) {
    r.status = lw__error_set(&r.error, LW_FAILED_PRECONDITION, (int32_t)index,
                             t.identity.task_id,
                             "sub child %u: task was built for sub function tag %u at index "
                             "%llu, which holds %s (tag %u); refused rather than run it",
                             index, fn_tag, (unsigned long long)fn_index, subs[fn_index].name,
                             subs[fn_index].tag);
    lw__child_complete_task(c, frame, &t.identity, &r);
    return;
  }
  if (lw__mailbox_task_set_running(c->mb, frame, &err) != LW_OK) _exit(LW_CHILD_EXIT_TAKE_FAILED);
  const sub_entry_t *s = &subs[fn_index];
  int64_t t0 = lw__now_ns();
  // As a chip kernel's start: the parent reads it if the function takes the child down
  // (docs/observability.md, "A run its child never ended").
  atomic_store(&c->mb->task[frame].started_ns, (uint64_t)t0);
  lw_status_t st = s->fn(&t.args);
  int64_t t1 = lw__now_ns();
  r.kernel_ns = (uint64_t)(t1 - t0);
  if (st == LW_OK) {
    r.status = LW_OK;
  } else {
    r.status = lw__error_set(&r.error, LW_TASK_FAILED, (int32_t)index, t.identity.task_id,
                             "sub %u: function %s returned %s", index, s->name,
                             lw_status_name(st));
    r.kernel_rc = (int32_t)st;
  }
  if (lw__trace_on()) {
    lw__trace_span(LW_TRACE_RUN, t0, t1, t.identity.run_id, t.identity.task_id, (int32_t)index,
                   r.status, s->name);
  }
  lw__child_complete_task(c, frame, &t.identity, &r);
}

_Noreturn void lw__sub_child_main(const lw_child_env_t *env) {
  lw_child_ctx_t c;
  lw__child_ctx_init(&c, env);
  uint32_t index = c.mb->header.child_index;
  char name[16];
  snprintf(name, sizeof(name), "lw-sub-%u", index);
  prctl(PR_SET_NAME, name);
  lw__trace_role("sub loop", (int32_t)index);
  atomic_store(&c.mb->header.numa_node, -1);
  lw__child_publish_init(&c, LW_MB_INIT_READY, NULL);
  lw_error_t err;
  // A sub function runs on this loop, so the heartbeat stands still while one runs; the parent
  // expects it to move only while a post waits here (see sched.c, check_liveness).
  // The frame after the last task's: where the parent most likely put the next (find_post).
  uint32_t hint = LW_MB_TASK_FRAMES;
  for (uint64_t seq = 1; lw__child_wait_post(&c, seq, NULL, NULL) == LW_CHILD_WAKE_POST; ++seq) {
    bool is_control = false;
    uint32_t frame = 0;
    if (lw__mailbox_find_post(c.mb, seq, hint, &is_control, &frame, &err) != LW_OK) {
      _exit(LW_CHILD_EXIT_POST_MISSING);
    }
    if (is_control) {
      serve_control(&c, index);
    } else {
      hint = (frame + 1) % LW_MB_TASK_FRAMES;
      serve_task(&c, index, frame);
    }
  }
  _exit(LW_CHILD_EXIT_OK);
}
