// tools/pack.c — `lanework pack KERNEL.so -o KERNEL.lwk [--level N]`
//
// A packed image is one zstd frame of the ELF shared object (with its content size and a
// checksum). Register detects the frame by its magic, so a .lwk goes wherever a .so does.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "callables/image.h"
#include "lanework/callable.h"
#include "tools/tool.h"

#define PACK_DEFAULT_LEVEL 6

static int usage(const char *why) {
  if (why) fprintf(stderr, "lanework pack: %s\n", why);
  fprintf(stderr,
          "usage: lanework pack KERNEL.so -o KERNEL.lwk [--level N]\n"
          "  Compresses a kernel shared object into a packed image (one zstd frame).\n"
          "  --level N   zstd level, 1..19 (default %d)\n",
          PACK_DEFAULT_LEVEL);
  return 2;
}

static int read_file(const char *path, uint8_t **out, size_t *out_bytes) {
  *out = NULL;
  *out_bytes = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "lanework pack: %s: %s\n", path, strerror(errno));
    return 1;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fprintf(stderr, "lanework pack: %s: not a regular file\n", path);
    close(fd);
    return 1;
  }
  if ((unsigned long long)sb.st_size > LW_MAX_IMAGE_BYTES) {
    fprintf(stderr, "lanework pack: %s: %lld bytes exceeds LW_MAX_IMAGE_BYTES (%llu)\n", path,
            (long long)sb.st_size, (unsigned long long)LW_MAX_IMAGE_BYTES);
    close(fd);
    return 1;
  }
  size_t cap = (size_t)sb.st_size;
  uint8_t *buf = malloc(cap ? cap : 1);
  if (buf == NULL) {
    fprintf(stderr, "lanework pack: out of memory reading %s\n", path);
    close(fd);
    return 1;
  }
  size_t got = 0;
  while (got < cap) {
    ssize_t n = read(fd, buf + got, cap - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "lanework pack: %s: read: %s\n", path, strerror(errno));
      free(buf);
      close(fd);
      return 1;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  close(fd);
  *out = buf;
  *out_bytes = got;
  return 0;
}

// Writes to a fresh temporary file next to path (mkostemp: a new name, O_EXCL, so a file or
// symlink planted there is never followed or overwritten), then renames it over path, so a
// reader never sees half a packed image. The file gets mode 0644 less the umask, like a file
// created with open(path, ..., 0644). Every failure removes the temporary file.
static int write_file_atomic(const char *path, const void *data, size_t bytes) {
  char tmp[PATH_MAX];
  int len = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  if (len < 0 || (size_t)len >= sizeof tmp) {
    fprintf(stderr, "lanework pack: output path too long: %s\n", path);
    return 1;
  }
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "lanework pack: creating a temporary file next to %s: %s\n", path,
            strerror(errno));
    return 1;
  }
  // mkostemp creates the file 0600; reading the umask means setting it, and this tool has no
  // other thread that could create a file meanwhile.
  mode_t mask = umask(0);
  umask(mask);
  const char *what = "fchmod";
  if (fchmod(fd, (mode_t)0644 & ~mask) != 0) goto fail;
  what = "write";
  const uint8_t *p = data;
  size_t left = bytes;
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) goto fail;
    if (n == 0) {
      errno = EIO;  // no progress on a regular file
      goto fail;
    }
    p += n;
    left -= (size_t)n;
  }
  what = "fsync";
  if (fsync(fd) != 0) goto fail;
  what = "close";
  int rc = close(fd);
  fd = -1;
  if (rc != 0) goto fail;
  if (rename(tmp, path) != 0) {
    fprintf(stderr, "lanework pack: rename %s -> %s: %s\n", tmp, path, strerror(errno));
    unlink(tmp);
    return 1;
  }
  return 0;

fail:
  fprintf(stderr, "lanework pack: %s %s: %s\n", what, tmp, strerror(errno));
  if (fd >= 0) close(fd);
  unlink(tmp);
  return 1;
}

int lw__tool_pack(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  int level = PACK_DEFAULT_LEVEL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(NULL);
      return 0;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      if (++i == argc) return usage("-o needs a file name");
      if (out) return usage("-o given twice");
      out = argv[i];
    } else if (strcmp(a, "--level") == 0 || strncmp(a, "--level=", 8) == 0) {
      const char *v = a[7] == '=' ? a + 8 : NULL;
      if (v == NULL) {
        if (++i == argc) return usage("--level needs a number");
        v = argv[i];
      }
      char *end = NULL;
      errno = 0;
      long l = strtol(v, &end, 10);
      if (errno != 0 || end == v || *end != '\0' || l < 1 || l > 19) {
        char msg[96];
        snprintf(msg, sizeof msg, "--level must be an integer in 1..19, got '%s'", v);
        return usage(msg);
      }
      level = (int)l;
    } else if (a[0] == '-' && a[1] != '\0') {
      char msg[96];
      snprintf(msg, sizeof msg, "unknown option '%s'", a);
      return usage(msg);
    } else {
      if (in) return usage("more than one input file");
      in = a;
    }
  }
  if (in == NULL) return usage("no input file");
  if (out == NULL) return usage("no output file (-o KERNEL.lwk)");

  uint8_t *elf = NULL;
  size_t elf_bytes = 0;
  if (read_file(in, &elf, &elf_bytes) != 0) return 1;
  if (lw__image_is_zstd(elf, elf_bytes)) {
    fprintf(stderr, "lanework pack: %s is already packed (a zstd frame)\n", in);
    free(elf);
    return 1;
  }
  lw_error_t err;
  // Checked here too so the message names the input file.
  if (lw__image_check_elf(elf, elf_bytes, in, &err) != LW_OK) {
    fprintf(stderr, "lanework pack: %s\n", err.message);
    free(elf);
    return 1;
  }
  void *frame = NULL;
  size_t frame_bytes = 0;
  if (lw__image_pack(elf, elf_bytes, level, &frame, &frame_bytes, &err) != LW_OK) {
    fprintf(stderr, "lanework pack: %s: %s\n", in, err.message);
    free(elf);
    return 1;
  }
  int rc = write_file_atomic(out, frame, frame_bytes);
  if (rc == 0) {
    printf("packed %s (%zu bytes) -> %s (%zu bytes, ratio %.2f)\n", in, elf_bytes, out,
           frame_bytes, frame_bytes ? (double)elf_bytes / (double)frame_bytes : 0.0);
  }
  free(frame);
  free(elf);
  return rc;
}
