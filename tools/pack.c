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
#include "tools/cli.h"
#include "tools/tool.h"

#define PACK_DEFAULT_LEVEL 6
#define PACK_STR_(x) #x
#define PACK_STR(x) PACK_STR_(x)

enum { K_OUTPUT = 1, K_LEVEL };

static const lw_cli_opt_t pack_opts[] = {
    {.name = "output", .short_name = 'o', .kind = LW_CLI_STRING, .metavar = "FILE",
     .key = K_OUTPUT, .help = "the packed image to write (required)"},
    {.name = "level", .kind = LW_CLI_INT, .min = 1, .max = 19, .metavar = "N",
     .def = PACK_STR(PACK_DEFAULT_LEVEL),
     .key = K_LEVEL, .help = "zstd compression level"},
    {.name = NULL},
};

static const lw_cli_cmd_t pack_cmd = {
    .name = "pack",
    .synopsis = "KERNEL.so -o KERNEL.lwk [--level N]",
    .about = "Compresses a kernel shared object into a packed image (one zstd frame); a .lwk\n"
             "registers wherever a .so does.",
    .opts = pack_opts,
    .max_positional = 1,
};

typedef struct pack_args {
  const char *out;
  int level;
} pack_args_t;

static int on_opt(void *user, const lw_cli_opt_t *opt, const lw_cli_value_t *v) {
  pack_args_t *a = user;
  if (opt->key == K_OUTPUT) {
    if (a->out) return lw__cli_error(&pack_cmd, "-o given twice ('%s' and '%s')", a->out, v->text);
    a->out = v->text;
  } else if (opt->key == K_LEVEL) {
    a->level = (int)v->n;
  }
  return LW_CLI_OK;
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
  pack_args_t args = {.out = NULL, .level = PACK_DEFAULT_LEVEL};
  int first = 0;
  int prc = lw__cli_parse(&pack_cmd, argc, argv, on_opt, &args, &first);
  if (prc == LW_CLI_HELP) return 0;
  if (prc != LW_CLI_OK) return 2;
  const char *in = first < argc ? argv[first] : NULL;
  const char *out = args.out;
  int level = args.level;
  if (in == NULL) return lw__cli_error(&pack_cmd, "no input file (KERNEL.so)");
  if (out == NULL) return lw__cli_error(&pack_cmd, "no output file (-o KERNEL.lwk)");

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
