// parent/worker_child.c — lw__worker_child_entry (worker_child.h).
#include "parent/worker_child.h"

#include <signal.h>
#include <sys/mman.h>

#include "child/child.h"
#include "mailbox/mailbox.h"
#include "parent/forkserver.h"

_Noreturn void lw__worker_child_entry(void *arg, uint32_t index) {
  lw_child_env_t *env = &((lw_child_env_t *)arg)[index];
  // The envs hold the program's addresses; a helper's server mapped the shares elsewhere.
  env->mailbox = lw__forkserver_local(env->mailbox);
  env->mailboxes = lw__forkserver_local(env->mailboxes);
  env->arena.base = lw__forkserver_local(env->arena.base);
  env->trace = lw__forkserver_local(env->trace);
  // Isolation (DESIGN 5.1): a child maps only its own mailbox and the arena. The server maps
  // every mailbox of the worker; the others are unmapped here, before any code of the child
  // can touch them.
  uint8_t *all = (uint8_t *)env->mailboxes;
  uint8_t *own = (uint8_t *)env->mailbox;
  uint8_t *end = all + (size_t)env->n_children * LW_MAILBOX_STRIDE;
  if (own > all) munmap(all, (size_t)(own - all));
  if (own + LW_MAILBOX_STRIDE < end) munmap(own + LW_MAILBOX_STRIDE, (size_t)(end - own) - LW_MAILBOX_STRIDE);
  // Children ignore terminal interrupts: Ctrl-C reaches the whole process group, and it is
  // the program's to handle (lw_worker_cancel_all). They leave with the worker instead.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  if (env->mailbox->header.child_kind == LW_MB_CHILD_CHIP) lw__chip_child_main(env);
  lw__sub_child_main(env);
}
