// child/child.h — the chip-child and sub-child process loops (the fork targets of the L3
// worker). Each runs in its own forked process, serves one mailbox and never returns.
//
// A chip child: binds to its NUMA node (libnuma; a no-op with a note in the header when NUMA
// is unavailable), opens its lw_chip_t, publishes INIT_READY (or INIT_FAILED with the reason),
// then applies posts in sequence order on its mailbox thread:
//   - a task: copy the payload out, pin the callable (lw__chip_run_prepare), publish
//     TASK_RUNNING, queue it on the run lane; the run's completion writes the result into the
//     frame and pushes a completion;
//   - a control: REGISTER / UNREGISTER go to the register lane at once (ack: async, end via
//     the completion ring), PING answers with the pid.
// Because the payload is copied out before TASK_RUNNING, controls are served while the run
// lane executes: a register prepares beside the running kernel.
//
// A sub child: a single thread that runs registered lw_sub_fn functions on task args, one at
// a time, and answers REGISTER_SUB and PING.
//
// Both leave when the sticky shutdown word is set, or when the parent is gone.
#ifndef LANEWORK_CHILD_CHILD_H_
#define LANEWORK_CHILD_CHILD_H_

#include <stdint.h>
#include <sys/types.h>

#include "child/child_exit.h"
#include "lanework/config.h"
#include "lanes/trace.h"
#include "mailbox/mailbox.h"

#ifdef __cplusplus
extern "C" {
#endif

// What a child needs, prepared by the parent and handed to the fork server explicitly (the
// server is a copy of the program as it was loaded, not as it is at create; see
// docs/processes.md). Plain data only: the pointers name shared mappings that the server maps
// at the parent's addresses.
typedef struct lw_child_env {
  lw_mailbox_t *mailbox;  // this child's mailbox (siblings' are unmapped in the child)
  lw_mailbox_t *mailboxes;  // every child's mailbox, LW_MAILBOX_STRIDE apart (n_children)
  lw_mb_arena_t arena;
  lw_chip_config_t chip;  // chip children; chip.device_id is the chip's index
  int32_t device;         // chip children: the backend device the chip opens (n_devices)
  int wake_fd;            // eventfd the child writes when the parent sleeps (its fd number)
  pid_t parent_pid;       // the worker process
  uint32_t n_children;    // entries in the env array (to find the siblings' mailboxes)
  lw_trace_area_t *trace; // this child's trace rings (shared; the parent drains them)
} lw_child_env_t;

_Noreturn void lw__chip_child_main(const lw_child_env_t *env);
_Noreturn void lw__sub_child_main(const lw_child_env_t *env);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_CHILD_H_
