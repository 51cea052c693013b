// tests/callables/check_kernels_nvrtc.c — the CUDA C kernels of the kernel folder's cuda/,
// compiled by the real NVRTC where the machine has one (no GPU needed): each compiles as the
// cuda backend compiles it (NVRTC through child/cuda_api.h, lanework/kernel_cuda.h handed to
// NVRTC in memory from the library's copy with no include folder, a CUBIN for sm_90), and the
// CUBIN is detected as one and passes its check, defines its entry (lw_kernel_main, or the
// file's name) and the stop word lw__cuda_stop the backend looks up (and, for the big program at
// -DKERNELS=8, its eight extra kernels). Without NVRTC it prints "SKIP: ..." and exits 0; ctest
// reports the test skipped (SKIP_REGULAR_EXPRESSION).
//
//   check_kernels_nvrtc KERNEL_DIR
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callables/image.h"
#include "callables/image_check.h"
#include "child/cuda_api.h"
#include "child/kernel_cuda_header.h"
#include "lanework/kernel_cuda.h"

static int failures;

static void fail(const char *kernel, const char *what) {
  fprintf(stderr, "check_kernels_nvrtc: %s: %s\n", kernel, what);
  ++failures;
}

static char *read_file(const char *path, size_t *out_bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (buf = malloc((size_t)n + 1)) != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
    buf[n] = '\0';
    *out_bytes = (size_t)n;
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

// The number of symbols of the CUBIN's symbol table named name (kind STT_FUNC or STT_OBJECT),
// or prefix-matched when prefix; -1 when the table cannot be read. The CUBIN passed
// lw__image_check_cubin: its section table and sections lie inside its bytes.
static int count_symbols(const uint8_t *p, size_t n, const char *name, bool prefix, int type) {
  Elf64_Ehdr eh;
  memcpy(&eh, p, sizeof eh);
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh, str;
    memcpy(&sh, p + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= eh.e_shnum || sh.sh_entsize != sizeof(Elf64_Sym)) {
      continue;
    }
    memcpy(&str, p + eh.e_shoff + (uint64_t)sh.sh_link * sizeof str, sizeof str);
    int found = 0;
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= sh.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      memcpy(&s, p + sh.sh_offset + off, sizeof s);
      if (ELF64_ST_TYPE(s.st_info) != type || s.st_name >= str.sh_size) continue;
      const char *sym = (const char *)p + str.sh_offset + s.st_name;
      size_t max = (size_t)(str.sh_size - s.st_name);
      if (memchr(sym, 0, max) == NULL) continue;
      if (prefix ? strncmp(sym, name, strlen(name)) == 0 : strcmp(sym, name) == 0) ++found;
    }
    return found;
  }
  (void)n;
  return -1;
}

static void check_kernel(const lw_cuda_nvrtc_t *rtc, const char *dir, const char *name,
                         const char *entry, const char *define, int extra_kernels) {
  char path[4096];
  snprintf(path, sizeof path, "%s/cuda/%s.cu", dir, name);
  size_t bytes = 0;
  char *src = read_file(path, &bytes);
  if (!src) {
    fail(name, "cannot read its source (build the project: the kernel folder gets its copy)");
    return;
  }
  lw_nvrtc_program_t prog = NULL;
  const char *headers[] = {(const char *)lw__kernel_cuda_header};
  const char *header_names[] = {LW_KERNEL_CUDA_HEADER_NAME};
  if (rtc->nvrtcCreateProgram(&prog, src, name, 1, headers, header_names) != LW_NVRTC_SUCCESS) {
    fail(name, "nvrtcCreateProgram failed");
    free(src);
    return;
  }
  const char *opts[2] = {"--gpu-architecture=sm_90", define};
  lw_nvrtc_result_t r = rtc->nvrtcCompileProgram(prog, define ? 2 : 1, opts);
  if (r != LW_NVRTC_SUCCESS) {
    size_t log_bytes = 0;
    char *log = NULL;
    if (rtc->nvrtcGetProgramLogSize(prog, &log_bytes) == LW_NVRTC_SUCCESS &&
        (log = calloc(1, log_bytes + 1)) != NULL) {
      (void)rtc->nvrtcGetProgramLog(prog, log);
    }
    fprintf(stderr, "check_kernels_nvrtc: %s: NVRTC: %s\n%s\n", name, rtc->nvrtcGetErrorString(r),
            log ? log : "");
    ++failures;
    free(log);
  } else {
    size_t n = 0;
    uint8_t *cubin = NULL;
    if (rtc->nvrtcGetCUBINSize(prog, &n) != LW_NVRTC_SUCCESS || n == 0 ||
        (cubin = malloc(n)) == NULL || rtc->nvrtcGetCUBIN(prog, (char *)cubin) != LW_NVRTC_SUCCESS) {
      fail(name, "no CUBIN from NVRTC");
    } else {
      lw_error_t err;
      if (lw__image_detect_format(cubin, n) != LW_IMAGE_CUBIN) {
        fail(name, "its CUBIN is not detected as one");
      } else if (lw__image_check_cubin(cubin, n, name, &err) != LW_OK) {
        fail(name, err.message);
      } else {
        if (count_symbols(cubin, n, entry, false, STT_FUNC) != 1) {
          char what[160];
          snprintf(what, sizeof what, "its CUBIN has no kernel %s", entry);
          fail(name, what);
        }
        if (count_symbols(cubin, n, LW_CUDA_STOP_SYMBOL, false, STT_OBJECT) != 1) {
          fail(name, "its CUBIN has no " LW_CUDA_STOP_SYMBOL);
        }
        int extra = count_symbols(cubin, n, "lw_big_", true, STT_FUNC);
        if (extra != extra_kernels) {
          fprintf(stderr, "check_kernels_nvrtc: %s: %d lw_big_ kernels, expected %d\n", name,
                  extra, extra_kernels);
          ++failures;
        }
        printf("%s: a %zu-byte CUBIN for sm_90 with %s and lw__cuda_stop\n", name, n, entry);
      }
    }
    free(cubin);
  }
  rtc->nvrtcDestroyProgram(&prog);
  free(src);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: check_kernels_nvrtc KERNEL_DIR\n");
    return 2;
  }
  const lw_cuda_nvrtc_t *rtc = NULL;
  const char *where = NULL;
  lw_error_t err;
  if (lw__cuda_nvrtc(&rtc, &where, &err) != LW_OK) {
    printf("SKIP: no NVRTC on this machine, the kernels were not compiled: %s\n", err.message);
    return 0;
  }
  int major = 0, minor = 0;
  rtc->nvrtcVersion(&major, &minor);
  printf("NVRTC %d.%d (%s)\n", major, minor, where ? where : "?");
  check_kernel(rtc, argv[1], "vector_add", "lw_kernel_main", NULL, 0);
  check_kernel(rtc, argv[1], "repeat_vector_add", "lw_kernel_main", NULL, 0);
  check_kernel(rtc, argv[1], "empty", "lw_kernel_main", NULL, 0);
  check_kernel(rtc, argv[1], "hang", "lw_kernel_main", NULL, 0);
  check_kernel(rtc, argv[1], "big_program", "lw_kernel_main", "-DKERNELS=8", 8);
  check_kernel(rtc, argv[1], "sleep_ms", "sleep_ms", NULL, 0);
  check_kernel(rtc, argv[1], "fault_after_ms", "fault_after_ms", NULL, 0);
  if (failures) {
    fprintf(stderr, "check_kernels_nvrtc: %d failure(s)\n", failures);
    return 1;
  }
  printf("check_kernels_nvrtc: every kernel compiled\n");
  return 0;
}
