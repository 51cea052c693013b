// callables/callable_file.c — reading a kernel image file into a callable descriptor.
//
// A packed .lwk file is just a zstd frame of the ELF .so, and register detects the frame
// itself, so loading never decompresses: it copies the file's bytes as they are.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lanework/callable.h"
#include "lanes/error.h"

// The callable name keeps at most this many characters (what lw__callable_validate accepts).
#define LW_FILE_NAME_MAX_CHARS 127

static lw_status_t open_status(int e) {
  if (e == ENOENT || e == ENOTDIR) return LW_NOT_FOUND;
  if (e == EMFILE || e == ENFILE || e == ENOMEM) return LW_RESOURCE_EXHAUSTED;
  return LW_INVALID_ARGUMENT;
}

// "dir/vector_add.so" -> "vector_add"; a name that is only an extension (".so") stays whole.
static char *name_from_path(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  const char *dot = strrchr(base, '.');
  if (dot != NULL && dot != base) n = (size_t)(dot - base);
  if (n > LW_FILE_NAME_MAX_CHARS) n = LW_FILE_NAME_MAX_CHARS;
  char *name = malloc(n + 1);
  if (name == NULL) return NULL;
  memcpy(name, base, n);
  name[n] = '\0';
  return name;
}

// Reads up to cap bytes; returns the count, or -errno. A file that shrank meanwhile gives
// fewer bytes, which the caller treats as the file's content.
static ssize_t read_upto(int fd, uint8_t *buf, size_t cap) {
  size_t got = 0;
  while (got < cap) {
    ssize_t n = read(fd, buf + got, cap - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  return (ssize_t)got;
}

lw_status_t lw_callable_load_file(const char *path, lw_callable_t *out) {
  if (out == NULL) return lw__fail(LW_INVALID_ARGUMENT, "lw_callable_load_file: out is NULL");
  *out = (lw_callable_t){0};
  if (path == NULL) return lw__fail(LW_INVALID_ARGUMENT, "lw_callable_load_file: path is NULL");

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return lw__fail(open_status(e), "callable file %s: %s", path, strerror(e));
  }
  lw_status_t st = LW_OK;
  uint8_t *image = NULL;
  char *name = NULL;
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    st = lw__fail(LW_INTERNAL, "callable file %s: fstat: %s", path, strerror(e));
    goto fail;
  }
  if (!S_ISREG(sb.st_mode)) {
    st = lw__fail(LW_INVALID_ARGUMENT, "callable file %s: not a regular file", path);
    goto fail;
  }
  if (sb.st_size == 0) {
    st = lw__fail(LW_INVALID_ARGUMENT, "callable file %s: file is empty", path);
    goto fail;
  }
  if ((unsigned long long)sb.st_size > LW_MAX_IMAGE_BYTES) {
    st = lw__fail(LW_INVALID_ARGUMENT,
                  "callable file %s: %lld bytes exceeds LW_MAX_IMAGE_BYTES (%llu bytes)", path,
                  (long long)sb.st_size, (unsigned long long)LW_MAX_IMAGE_BYTES);
    goto fail;
  }
  size_t size = (size_t)sb.st_size;
  image = malloc(size);
  name = name_from_path(path);
  if (image == NULL || name == NULL) {
    st = lw__fail(LW_RESOURCE_EXHAUSTED, "callable file %s: cannot allocate %zu bytes", path,
                  size);
    goto fail;
  }
  ssize_t got = read_upto(fd, image, size);
  if (got < 0) {
    st = lw__fail(LW_INVALID_ARGUMENT, "callable file %s: read: %s", path, strerror((int)-got));
    goto fail;
  }
  if (got == 0) {
    st = lw__fail(LW_INVALID_ARGUMENT, "callable file %s: file is empty", path);
    goto fail;
  }
  close(fd);
  out->name = name;
  out->image = image;
  out->image_bytes = (size_t)got;
  out->entry = LW_DEFAULT_ENTRY;
  out->n_params = 0;
  out->param_dirs = NULL;
  return LW_OK;

fail:
  close(fd);
  free(image);
  free(name);
  return st;
}

void lw_callable_free_loaded(lw_callable_t *c) {
  if (c == NULL) return;
  // Both were allocated by lw_callable_load_file; the const only protects them from callers.
  free((void *)c->image);
  free((void *)c->name);
  *c = (lw_callable_t){0};
}
