// callables/image.c — kernel images: zstd frames, ELF header checks, and loading a shared
// object from memory.
//
// Loading goes through a memfd so no kernel image ever touches the file system: the ELF bytes
// are written to an anonymous file and dlopen reads it back through /proc/<pid>/fd/N.
#include "callables/image.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "lanework/callable.h"
#include "lanes/error.h"

#define LW_ZSTD_MAGIC 0xFD2FB528u

// Messages say "callable <name>: ..."; a descriptor without a name says "callable: ...".
#define NAME_FMT LW__CALLABLE_NAME_FMT
#define NAME_ARGS(name) LW__CALLABLE_NAME_ARGS(name)

bool lw__image_is_zstd(const void *image, size_t bytes) {
  if (image == NULL || bytes < 4) return false;
  const uint8_t *p = image;
  uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24;
  return magic == LW_ZSTD_MAGIC;
}

static lw_status_t too_large(const char *name, lw_error_t *err) {
  return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       NAME_FMT ": decompressed image exceeds LW_MAX_IMAGE_BYTES (%llu bytes)",
                       NAME_ARGS(name), (unsigned long long)LW_MAX_IMAGE_BYTES);
}

static lw_status_t corrupt(const char *name, const char *why, lw_error_t *err) {
  return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, NAME_FMT ": corrupt zstd frame: %s",
                       NAME_ARGS(name), why);
}

// One frame whose header states its size: decompress in one call into an exact buffer.
static lw_status_t decompress_known(ZSTD_DCtx *dctx, const void *src, size_t bytes,
                                    size_t size, const char *name, uint8_t **out_buf,
                                    size_t *out_bytes, lw_error_t *err) {
  // malloc(0) may return NULL; an empty frame still gets a buffer (the ELF check rejects it).
  uint8_t *buf = malloc(size ? size : 1);
  if (buf == NULL) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         NAME_FMT ": cannot allocate %zu bytes for the decompressed image",
                         NAME_ARGS(name), size);
  }
  size_t got = ZSTD_decompressDCtx(dctx, buf, size, src, bytes);
  if (ZSTD_isError(got)) {
    free(buf);
    return corrupt(name, ZSTD_getErrorName(got), err);
  }
  if (got != size) {
    free(buf);
    return corrupt(name, "content size does not match the frame header", err);
  }
  *out_buf = buf;
  *out_bytes = got;
  return LW_OK;
}

// Unknown size, several frames, or a header that does not parse: stream into a buffer that
// doubles up to LW_MAX_IMAGE_BYTES. A bad header shows up here as a zstd error with its name.
static lw_status_t decompress_streaming(ZSTD_DCtx *dctx, const void *src, size_t bytes,
                                        const char *name, uint8_t **out_buf,
                                        size_t *out_bytes, lw_error_t *err) {
  const size_t limit = (size_t)LW_MAX_IMAGE_BYTES;
  size_t cap = bytes < limit / 4 ? bytes * 4 : limit;
  if (cap < ZSTD_DStreamOutSize()) cap = ZSTD_DStreamOutSize();
  if (cap > limit) cap = limit;
  uint8_t *buf = malloc(cap);
  if (buf == NULL) goto oom;

  ZSTD_inBuffer in = {src, bytes, 0};
  size_t pos = 0;
  for (;;) {
    ZSTD_outBuffer out = {buf, cap, pos};
    size_t ret = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(ret)) {
      free(buf);
      return corrupt(name, ZSTD_getErrorName(ret), err);
    }
    pos = out.pos;
    // ret == 0: a frame just ended. Another frame may follow in the input; zstd starts it on
    // the next call.
    if (ret == 0 && in.pos == in.size) break;
    if (pos == cap) {
      if (cap == limit) {
        free(buf);
        return too_large(name, err);
      }
      size_t next = cap > limit / 2 ? limit : cap * 2;
      uint8_t *grown = realloc(buf, next);
      if (grown == NULL) goto oom;
      buf = grown;
      cap = next;
    } else if (in.pos == in.size) {
      // The output has room, so the decoder flushed all it could: it is waiting for input
      // that is not there.
      free(buf);
      return corrupt(name, "truncated frame", err);
    }
  }
  *out_buf = buf;
  *out_bytes = pos;
  return LW_OK;

oom:
  free(buf);
  return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       NAME_FMT ": cannot allocate memory to decompress the image",
                       NAME_ARGS(name));
}

static lw_status_t decompress(const void *src, size_t bytes, const char *name,
                              uint8_t **out_buf, size_t *out_bytes, lw_error_t *err) {
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  if (dctx == NULL) {
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         NAME_FMT ": cannot create a zstd decompression context",
                         NAME_ARGS(name));
  }
  lw_status_t st;
  // The frame header's content size is only trusted when the input is exactly one frame;
  // anything else (several frames, trailing bytes) goes through the streaming path, which
  // checks every byte.
  unsigned long long size = ZSTD_getFrameContentSize(src, bytes);
  size_t frame = ZSTD_findFrameCompressedSize(src, bytes);
  if (size != ZSTD_CONTENTSIZE_UNKNOWN && size != ZSTD_CONTENTSIZE_ERROR &&
      !ZSTD_isError(frame) && frame == bytes) {
    if (size > LW_MAX_IMAGE_BYTES) {
      st = too_large(name, err);
    } else {
      st = decompress_known(dctx, src, bytes, (size_t)size, name, out_buf, out_bytes, err);
    }
  } else {
    st = decompress_streaming(dctx, src, bytes, name, out_buf, out_bytes, err);
  }
  ZSTD_freeDCtx(dctx);
  return st;
}

// Decompresses (or borrows) the bytes without checking what they are.
static lw_status_t decode_raw(const void *image, size_t bytes, const char *name,
                              lw_image_bytes_t *out, lw_error_t *err) {
  if (out == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, NAME_FMT ": out is NULL",
                         NAME_ARGS(name));
  }
  *out = (lw_image_bytes_t){0};
  if (image == NULL || bytes == 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, NAME_FMT ": image is empty",
                         NAME_ARGS(name));
  }
  if (bytes > LW_MAX_IMAGE_BYTES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         NAME_FMT ": image of %zu bytes exceeds LW_MAX_IMAGE_BYTES (%llu bytes)",
                         NAME_ARGS(name), bytes, (unsigned long long)LW_MAX_IMAGE_BYTES);
  }
  lw_image_bytes_t b = {.data = image, .bytes = bytes, .owned = NULL};
  if (lw__image_is_zstd(image, bytes)) {
    uint8_t *buf = NULL;
    size_t n = 0;
    LW_RETURN_IF_ERROR(decompress(image, bytes, name, &buf, &n, err));
    b = (lw_image_bytes_t){.data = buf, .bytes = n, .owned = buf};
  }
  *out = b;
  return LW_OK;
}

lw_status_t lw__image_decode(const void *image, size_t bytes, const char *name,
                             lw_image_bytes_t *out, lw_error_t *err) {
  LW_RETURN_IF_ERROR(decode_raw(image, bytes, name, out, err));
  lw_status_t st = lw__image_check_elf(out->data, out->bytes, name, err);
  if (st != LW_OK) lw__image_bytes_release(out);
  return st;
}

const char *lw_image_format_name(lw_image_format_t f) {
  switch (f) {
    case LW_IMAGE_AUTO: return "AUTO";
    case LW_IMAGE_ELF: return "ELF";
    case LW_IMAGE_OPENCL_C: return "OpenCL C";
    case LW_IMAGE_SPIRV: return "SPIR-V";
    case LW_IMAGE_CUDA_C: return "CUDA C";
    case LW_IMAGE_PTX: return "PTX";
    case LW_IMAGE_CUBIN: return "CUBIN";
    case LW_IMAGE_FATBIN: return "fatbin";
  }
  return "unknown";
}

// SPIR-V's magic number, as the first word in the module's (little-endian here) byte order.
#define LW_SPIRV_MAGIC 0x07230203u

static bool is_spirv(const uint8_t *p, size_t bytes) {
  if (bytes < 4) return false;
  uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  return w == LW_SPIRV_MAGIC;
}

lw_image_format_t lw__image_detect_format(const uint8_t *data, size_t bytes) {
  if (data == NULL) return LW_IMAGE_OPENCL_C;
  if (bytes >= SELFMAG && memcmp(data, ELFMAG, SELFMAG) == 0) {
    return lw__image_is_cubin(data, bytes) ? LW_IMAGE_CUBIN : LW_IMAGE_ELF;
  }
  if (is_spirv(data, bytes)) return LW_IMAGE_SPIRV;
  if (lw__image_is_fatbin(data, bytes)) return LW_IMAGE_FATBIN;
  if (lw__image_is_ptx(data, bytes)) return LW_IMAGE_PTX;
  if (lw__image_is_cuda_c(data, bytes)) return LW_IMAGE_CUDA_C;
  return LW_IMAGE_OPENCL_C;
}

lw_status_t lw__image_check_format(const uint8_t *p, size_t bytes, const char *name,
                                   lw_image_format_t f, bool detected, lw_error_t *err) {
  switch (f) {
    case LW_IMAGE_ELF:
      return lw__image_check_elf(p, bytes, name, err);
    case LW_IMAGE_SPIRV:
      return lw__image_check_spirv(p, bytes, name, err);
    case LW_IMAGE_OPENCL_C:
      return lw__image_check_opencl_c(p, bytes, name, detected, err);
    case LW_IMAGE_CUDA_C:
      return lw__image_check_cuda_c(p, bytes, name, detected, err);
    case LW_IMAGE_PTX:
      return lw__image_check_ptx(p, bytes, name, err);
    case LW_IMAGE_CUBIN:
      return lw__image_check_cubin(p, bytes, name, err);
    case LW_IMAGE_FATBIN:
      return lw__image_check_fatbin(p, bytes, name, err);
    case LW_IMAGE_AUTO:
      break;
  }
  return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, NAME_FMT ": unknown image format %d",
                       NAME_ARGS(name), (int)f);
}

lw_status_t lw__image_decode_detect(const void *image, size_t bytes, const char *name,
                                    lw_image_format_t format, lw_image_bytes_t *out,
                                    lw_image_format_t *out_format, lw_error_t *err) {
  if ((uint32_t)format > (uint32_t)LW_IMAGE_FATBIN) {
    if (out) *out = (lw_image_bytes_t){0};
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         NAME_FMT ": unknown image format %d (LW_IMAGE_AUTO..LW_IMAGE_FATBIN)",
                         NAME_ARGS(name), (int)format);
  }
  LW_RETURN_IF_ERROR(decode_raw(image, bytes, name, out, err));
  *out_format =
      format == LW_IMAGE_AUTO ? lw__image_detect_format(out->data, out->bytes) : format;
  return LW_OK;
}

lw_status_t lw__image_decode_format(const void *image, size_t bytes, const char *name,
                                    lw_image_format_t format, lw_image_bytes_t *out,
                                    lw_image_format_t *out_format, lw_error_t *err) {
  lw_image_format_t f = LW_IMAGE_AUTO;
  LW_RETURN_IF_ERROR(lw__image_decode_detect(image, bytes, name, format, out, &f, err));
  lw_status_t st =
      lw__image_check_format(out->data, out->bytes, name, f, format == LW_IMAGE_AUTO, err);
  if (st != LW_OK) {
    lw__image_bytes_release(out);
    return st;
  }
  if (out_format) *out_format = f;
  return LW_OK;
}

void lw__image_bytes_release(lw_image_bytes_t *b) {
  if (b == NULL) return;
  free(b->owned);
  *b = (lw_image_bytes_t){0};
}

// Writes all of bytes, retrying short writes and EINTR. Returns 0 or -errno.
static int write_all(int fd, const uint8_t *p, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -EIO;
    p += n;
    bytes -= (size_t)n;
  }
  return 0;
}

static lw_status_t status_from_errno(int e) {
  return (e == ENOMEM || e == ENOSPC || e == EMFILE || e == ENFILE || e == EFBIG)
             ? LW_RESOURCE_EXHAUSTED
             : LW_INTERNAL;
}

// A memfd holding a copy of elf, positioned anywhere (dlopen reads by offset).
static lw_status_t memfd_with(const uint8_t *elf, size_t bytes, const char *name, int *out_fd,
                              lw_error_t *err) {
  char memfd_name[64];
  snprintf(memfd_name, sizeof memfd_name, "lw:%s", name ? name : "kernel");
  int fd = memfd_create(memfd_name, MFD_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return lw__error_set(err, status_from_errno(e), -1, 0, NAME_FMT ": memfd_create: %s",
                         NAME_ARGS(name), strerror(e));
  }
  int rc = write_all(fd, elf, bytes);
  if (rc < 0) {
    close(fd);
    return lw__error_set(err, status_from_errno(-rc), -1, 0,
                         NAME_FMT ": writing %zu bytes to the memfd: %s", NAME_ARGS(name),
                         bytes, strerror(-rc));
  }
  *out_fd = fd;
  return LW_OK;
}

// True when sym lies inside the object dl itself, not in one of its dependencies (dlsym on a
// handle also searches those, so entry "printf" would otherwise resolve to libc).
static bool defined_by(void *dl, void *sym) {
  struct link_map *own = NULL;
  if (dlinfo(dl, RTLD_DI_LINKMAP, &own) != 0 || own == NULL) return false;
  Dl_info info;
  struct link_map *where = NULL;
  if (dladdr1(sym, &info, (void **)&where, RTLD_DL_LINKMAP) == 0) return false;
  return where == own;
}

static void *own_symbol(void *dl, const char *sym) {
  void *p = dlsym(dl, sym);
  return (p != NULL && defined_by(dl, p)) ? p : NULL;
}

#define LW_MEMFD_RETRIES 16

// The path dlopen loads fd by: /proc/<pid>/fd/N, the name the object keeps in the loader's
// list, which a debugger reads to load the object's symbols. gdb opens that name in its own
// process: "/proc/self/fd/N" would be gdb's own fd N there (a pipe of its own, where it waits
// forever for the ELF header: a program that registered a kernel hung under gdb at the
// register), while "/proc/<pid>/fd/N" is this process's memfd. /proc/self/fd/N only when
// /proc/<pid> is not this process (a /proc of another pid namespace).
static void fd_path(int fd, char *path, size_t bytes) {
  struct stat by_pid, own;
  snprintf(path, bytes, "/proc/%d/fd/%d", (int)getpid(), fd);
  if (stat(path, &by_pid) == 0 && fstat(fd, &own) == 0 && by_pid.st_dev == own.st_dev &&
      by_pid.st_ino == own.st_ino) {
    return;
  }
  snprintf(path, bytes, "/proc/self/fd/%d", fd);
}

lw_status_t lw__image_load(const uint8_t *elf, size_t bytes, const char *entry,
                           const char *name, lw_loaded_image_t *out, lw_error_t *err) {
  if (out == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, NAME_FMT ": out is NULL",
                         NAME_ARGS(name));
  }
  *out = (lw_loaded_image_t){0};
  if (entry == NULL) entry = LW_DEFAULT_ENTRY;
  LW_RETURN_IF_ERROR(lw__image_check_elf(elf, bytes, name, err));

  // glibc finds an already-loaded object by the path string before it compares inodes, and
  // the path names an fd number. An earlier image loaded through "/proc/<pid>/fd/5" keeps that
  // name after its fd was closed, so a later dlopen of a new memfd that got fd 5 again would
  // silently return the OLD image. RTLD_NOLOAD tells whether the name is taken; if it is,
  // keep that memfd open (so the next one gets another number) and try again.
  int spare[LW_MEMFD_RETRIES];
  int n_spare = 0;
  int fd = -1;
  char path[64];
  lw_status_t st = LW_OK;
  for (;;) {
    st = memfd_with(elf, bytes, name, &fd, err);
    if (st != LW_OK) goto done;
    fd_path(fd, path, sizeof path);
    void *taken = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (taken == NULL) break;
    dlclose(taken);
    if (n_spare == LW_MEMFD_RETRIES) {
      close(fd);
      fd = -1;
      st = lw__error_set(err, LW_INTERNAL, -1, 0,
                         NAME_FMT ": no free /proc/<pid>/fd path to dlopen after %d tries",
                         NAME_ARGS(name), LW_MEMFD_RETRIES);
      goto done;
    }
    spare[n_spare++] = fd;
    fd = -1;
  }
  (void)dlerror();  // drop the NOLOAD miss so a later dlerror() reports our own failure

  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  // The mapping keeps the memfd's pages alive; the descriptor itself is no longer needed.
  close(fd);
  if (dl == NULL) {
    const char *why = dlerror();
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, NAME_FMT ": dlopen failed: %s",
                       NAME_ARGS(name), why ? why : "unknown error");
    goto done;
  }
  void *main_sym = own_symbol(dl, entry);
  if (main_sym == NULL) {
    dlclose(dl);
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       NAME_FMT ": entry symbol '%s' not found", NAME_ARGS(name), entry);
    goto done;
  }
  out->dl = dl;
  // POSIX guarantees a data pointer from dlsym converts to a function pointer; C does not, so
  // go through memcpy instead of a cast the compiler may warn about.
  memcpy(&out->main, &main_sym, sizeof main_sym);
  void *prepare = own_symbol(dl, "lw_kernel_prepare");
  void *release = own_symbol(dl, "lw_kernel_release");
  memcpy(&out->prepare, &prepare, sizeof prepare);
  memcpy(&out->release, &release, sizeof release);
  (void)dlerror();

done:
  for (int i = 0; i < n_spare; i++) close(spare[i]);
  return st;
}

void lw__image_unload(lw_loaded_image_t *img) {
  if (img == NULL) return;
  if (img->dl != NULL) dlclose(img->dl);
  *img = (lw_loaded_image_t){0};
}

lw_status_t lw__image_pack(const uint8_t *elf, size_t bytes, int level, void **out_frame,
                           size_t *out_bytes, lw_error_t *err) {
  if (out_frame == NULL || out_bytes == NULL) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "pack: out_frame/out_bytes is NULL");
  }
  *out_frame = NULL;
  *out_bytes = 0;
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "pack: zstd level %d is outside [%d, %d]", level, ZSTD_minCLevel(),
                         ZSTD_maxCLevel());
  }
  if (bytes > LW_MAX_IMAGE_BYTES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "pack: image of %zu bytes exceeds LW_MAX_IMAGE_BYTES (%llu bytes)",
                         bytes, (unsigned long long)LW_MAX_IMAGE_BYTES);
  }
  // Packing something that could never be registered only moves the error later.
  LW_RETURN_IF_ERROR(lw__image_check_elf(elf, bytes, NULL, err));

  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  size_t cap = ZSTD_compressBound(bytes);
  void *buf = malloc(cap);
  lw_status_t st = LW_OK;
  if (cctx == NULL || buf == NULL) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                       "pack: cannot allocate %zu bytes for the zstd frame", cap);
    goto done;
  }
  // The content size lets the decoder allocate once; the checksum turns silent corruption of
  // a stored image into a clear "corrupt zstd frame" at register.
  size_t r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(r)) r = ZSTD_compress2(cctx, buf, cap, elf, bytes);
  if (ZSTD_isError(r)) {
    st = lw__error_set(err, LW_INTERNAL, -1, 0, "pack: zstd compression failed: %s",
                       ZSTD_getErrorName(r));
    goto done;
  }
  // Hand back a buffer of the frame's size, not the worst-case bound.
  void *shrunk = realloc(buf, r ? r : 1);
  if (shrunk != NULL) buf = shrunk;
  *out_frame = buf;
  *out_bytes = r;
  buf = NULL;

done:
  free(buf);
  ZSTD_freeCCtx(cctx);
  return st;
}
