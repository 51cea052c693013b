// tests/kernels/prepare_count.c — a kernel whose prepare hook appends one byte to a file each
// time a chip child loads it, then, if a second path follows, holds the register lane until
// that file exists: "prepare_count:/tmp/lw-count-42" or
// "prepare_count:/tmp/lw-count-42:/tmp/lw-gate-42". A child loads a callable once per digest
// (a second register of the same image shares the loaded copy), so the count file's size tells
// a test how many times children loaded it afresh, and when a replay got to it.
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lanework/kernel.h"

LW_KERNEL_EXPORT int lw_kernel_prepare(lw_kernel_ctx_t *ctx) {
  const char *path = ctx->name ? strchr(ctx->name, ':') : NULL;
  if (!path) return 0;
  path++;
  const char *gate = strchr(path, ':');
  char count[PATH_MAX];
  size_t len = gate ? (size_t)(gate - path) : strlen(path);
  if (len >= sizeof(count)) return -1;
  memcpy(count, path, len);
  count[len] = '\0';
  int fd = open(count, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  ssize_t n = write(fd, "l", 1);
  close(fd);
  if (n != 1) return -1;
  if (!gate) return 0;
  struct timespec pause = {0, 200000};
  while (access(gate + 1, F_OK) != 0) nanosleep(&pause, NULL);
  return 0;
}

LW_KERNEL_EXPORT int lw_kernel_main(lw_kernel_ctx_t *ctx, const lw_kernel_args_t *args) {
  (void)ctx;
  (void)args;
  return 0;
}
