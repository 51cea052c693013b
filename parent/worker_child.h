// parent/worker_child.h — where a worker's child starts: the main a fork server runs in each
// new chip or sub child (docs/processes.md).
#ifndef LANEWORK_PARENT_WORKER_CHILD_H_
#define LANEWORK_PARENT_WORKER_CHILD_H_

#include <stdint.h>

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
