// tests/kernels/prepare_hold.c — a kernel whose prepare hook says it started and then holds the
// register lane until the test lets it go, through files in a folder: the part of the
// callable's name after the first ':' ("prepare_hold:/tmp/lw-hold-42"). The hook creates
// <folder>/entered, then waits until <folder>/open exists. A name without a folder does not
// wait. Lets a test act while a load is known to be under way, without any timing.
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_prepare(lw_kernel_ctx_t *ctx) {
  const char *dir = ctx->name ? strchr(ctx->name, ':') : NULL;
  if (!dir) return 0;
  dir++;
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/entered", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return lw_kernel_fail(ctx, "cannot create %s", path);
  close(fd);
  snprintf(path, sizeof(path), "%s/open", dir);
  const struct timespec pause = {0, 200000};
  while (access(path, F_OK) != 0) nanosleep(&pause, NULL);
  return 0;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
