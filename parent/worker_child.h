// parent/worker_child.h — where a worker's child starts: the main a fork server runs in each
// new chip or sub child (docs/processes.md).
#ifndef LANEWORK_PARENT_WORKER_CHILD_H_
#define LANEWORK_PARENT_WORKER_CHILD_H_

#include <stddef.h>
#include <stdint.h>

#include "mailbox/mailbox.h"

// Each child's mailbox starts on its own page (the worker's mailbox share, child slot order),
// so a child can bind its pages to its NUMA node and unmap its siblings'.
#define LW_MAILBOX_STRIDE ((sizeof(lw_mailbox_t) + 4095) & ~(size_t)4095)

#ifdef __cplusplus
extern "C" {
#endif

// Runs in every child, forked by its fork server; never returns. arg is the server's copy of
// the envs of its slots (lw_child_env_t[], child/child.h), whose addresses are the program's:
// they are turned into this process's (lw__forkserver_local) first.
_Noreturn void lw__worker_child_entry(void *arg, uint32_t index);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_PARENT_WORKER_CHILD_H_
