// tests/child/cuda_test_util.h — the cuda backend's tests over the fake driver
// (tests/child/fake_cuda/fake_cuda.h): pointing the backend at the fake libraries, the fake's
// event log, CUDA C callables of the fake's built-in kernels and a minimal CUBIN. Include once
// per test file. LW_FAKE_CUDA_DIR (the folder of the fake libraries) comes from CMake; a bundle
// run elsewhere names its copy with LW_TEST_FAKE_CUDA_DIR (lw_test_path).
#ifndef LANEWORK_TESTS_CHILD_CUDA_TEST_UTIL_H_
#define LANEWORK_TESTS_CHILD_CUDA_TEST_UTIL_H_

#include <elf.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "callables/cuda_images.h"
#include "fake_cuda/fake_cuda.h"
#include "test_util.h"

#define CT_NVRTC_MISSING "/nonexistent/lanework-test/libnvrtc.so"
#define CT_NVJITLINK_MISSING "/nonexistent/lanework-test/libnvJitLink.so"

static char ct_log_path[64];

// The folder of the fake libraries.
static inline const char *ct_fake_dir(void) {
  return lw_test_path("LW_TEST_FAKE_CUDA_DIR", LW_FAKE_CUDA_DIR);
}

// Points the cuda backend of this process (and of the chip children it starts) at the fake
// driver, and at the fake NVRTC when with_nvrtc (else at a path that does not exist), with a
// fresh event log. nvJitLink always points nowhere. Call before the first chip or worker.
static inline void ct_use_fake(bool with_nvrtc) {
  char path[512];
  snprintf(path, sizeof(path), "%s/libfake_cuda.so", ct_fake_dir());
  setenv("LW_CUDA_LIBRARY", path, 1);
  snprintf(path, sizeof(path), "%s/libfake_nvrtc.so", ct_fake_dir());
  setenv("LW_NVRTC_LIBRARY", with_nvrtc ? path : CT_NVRTC_MISSING, 1);
  setenv("LW_NVJITLINK_LIBRARY", CT_NVJITLINK_MISSING, 1);
  snprintf(ct_log_path, sizeof(ct_log_path), "/tmp/lw-fake-cuda-%d.log", (int)getpid());
  unlink(ct_log_path);
  setenv("LW_FAKE_CUDA_LOG", ct_log_path, 1);
}

// The whole event log (heap; free it). "" when nothing was logged.
static inline char *ct_log(void) {
  FILE *f = fopen(ct_log_path, "r");
  if (!f) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = calloc(1, (size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = '\0';
  fclose(f);
  return buf;
}

// The index (in log order, from 0) of the first line that starts with event and holds every
// one of the NULL-terminated needles after it; -1 when none does. *line_out (may be NULL) gets
// a copy of the line.
static inline int ct_find(const char *event, char *line_out, size_t bytes, ...) {
  char *log = ct_log();
  int index = 0, found = -1;
  for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"), ++index) {
    size_t n = strlen(event);
    if (strncmp(line, event, n) != 0 || line[n] != ' ') continue;
    va_list ap;
    va_start(ap, bytes);
    bool all = true;
    for (const char *needle = va_arg(ap, const char *); needle;
         needle = va_arg(ap, const char *)) {
      all = all && strstr(line, needle) != NULL;
    }
    va_end(ap);
    if (all) {
      found = index;
      if (line_out) snprintf(line_out, bytes, "%s", line);
      break;
    }
  }
  free(log);
  return found;
}

// Lines starting with event.
static inline int ct_count(const char *event) {
  char *log = ct_log();
  int n = 0;
  size_t len = strlen(event);
  for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, event, len) == 0 && line[len] == ' ') n++;
  }
  free(log);
  return n;
}

// Nothing called the fake driver on a thread without a context.
static inline void ct_assert_no_contextless_call(void) {
  char line[700];
  cr_assert_eq(ct_find("no_context", line, sizeof(line), NULL), -1,
               "a driver call on a thread without the chip's context: %s", line);
}

// CUDA C declaring the fake's kernels the way real sources do (the fake finds "name(").
#define CT_SOURCE_ALL                                                                      \
  "#include \"lanework/kernel_cuda.h\"\n"                                                  \
  "extern \"C\" __global__ void vector_add(const float *a, const float *b, float *c,\n"    \
  "                                        unsigned long long n) {}\n"                     \
  "extern \"C\" __global__ void pack_probe(unsigned long long *out, unsigned long long a,\n" \
  "    const unsigned long long *in, float f, unsigned long long b) {}\n"                  \
  "extern \"C\" __global__ void poll_stop() { while (!lw_cuda_should_stop()) {} }\n"       \
  "extern \"C\" __global__ void sleep_ms(unsigned long long ms) {}\n"                      \
  "extern \"C\" __global__ void illegal_address() {}\n"                                    \
  "extern \"C\" __global__ void empty() {}\n"                                              \
  "__device__ const volatile unsigned int *lw__cuda_stop;\n"

static const uint8_t ct_vadd_dirs[4] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT,
                                        LW_PARAM_SCALAR};

// A CUDA C callable of `source` whose entry is `entry`.
static inline lw_callable_t ct_cuda_c(const char *name, const char *source, const char *entry,
                                      uint32_t n_params, const uint8_t *dirs) {
  lw_callable_t c;
  memset(&c, 0, sizeof(c));
  c.name = name;
  c.image = source;
  c.image_bytes = strlen(source);
  c.entry = entry;
  c.n_params = n_params;
  c.param_dirs = dirs;
  c.format = LW_IMAGE_CUDA_C;
  return c;
}

// A minimal CUBIN whose code section names kernel (callables/cuda_images.h); its size.
#define CT_CUBIN_BYTES 512u
static inline size_t ct_cubin(uint8_t out[CT_CUBIN_BYTES], const char *kernel) {
  return lw_test_cubin_make_named(out, CT_CUBIN_BYTES, kernel);
}

#endif  // LANEWORK_TESTS_CHILD_CUDA_TEST_UTIL_H_
