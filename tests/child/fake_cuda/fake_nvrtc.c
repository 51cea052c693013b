// tests/child/fake_cuda/fake_nvrtc.c — a fake NVRTC for the cuda backend's tests (see
// fake_cuda.h). "Compiling" checks the options and the source's markers and wraps the source
// in the fake driver's module format; every compile is logged with the thread it ran on and
// whether a CUDA context was current there. Like NVRTC, it needs its builtins library
// (FAKE_NVRTC_BUILTINS) at compile time and finds it only when it is already loaded: the
// backend loads it by full path from this library's folder, which no linker path names.
// A test double: built for tests only, never installed.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "fake_cuda.h"

#define API __attribute__((visibility("default")))

typedef struct prog {
  char *src;
  char *name;
  char headers[256];  // the include names handed over in memory, "|"-separated
  char *log;
  char *cubin;
  size_t cubin_bytes;
} prog_t;

API int nvrtcVersion(int *major, int *minor) {
  *major = FAKE_NVRTC_MAJOR;
  *minor = FAKE_NVRTC_MINOR;
  return 0;
}

API const char *nvrtcGetErrorString(int r) {
  switch (r) {
    case 0: return "NVRTC_SUCCESS";
    case 3: return "NVRTC_ERROR_INVALID_INPUT";
    case 5: return "NVRTC_ERROR_INVALID_OPTION";
    case 6: return "NVRTC_ERROR_COMPILATION";
    case 7: return "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE";
  }
  return "NVRTC_ERROR_UNKNOWN";
}

API int nvrtcCreateProgram(prog_t **out, const char *src, const char *name, int n_headers,
                           const char *const *headers, const char *const *include_names) {
  if (!src || n_headers < 0 || (n_headers > 0 && (!headers || !include_names))) return 3;
  prog_t *p = calloc(1, sizeof(*p));
  for (int i = 0; i < n_headers; ++i) {
    if (!headers[i] || !include_names[i]) {
      free(p);
      return 3;
    }
    size_t used = strlen(p->headers);
    snprintf(p->headers + used, sizeof(p->headers) - used, "%s%s", i ? "|" : "",
             include_names[i]);
  }
  p->src = strdup(src);
  p->name = strdup(name ? name : "default_program");
  *out = p;
  return 0;
}

API int nvrtcDestroyProgram(prog_t **p) {
  if (!p || !*p) return 3;
  free((*p)->src);
  free((*p)->name);
  free((*p)->log);
  free((*p)->cubin);
  free(*p);
  *p = NULL;
  return 0;
}

API int nvrtcCompileProgram(prog_t *p, int n_options, const char *const *options) {
  char opts[512] = "";
  const char *arch = NULL;
  for (int i = 0; i < n_options; ++i) {
    size_t used = strlen(opts);
    snprintf(opts + used, sizeof(opts) - used, "%s%s", i ? "|" : "", options[i]);
    if (strncmp(options[i], "--gpu-architecture=sm_", 22) == 0) arch = options[i] + 20;
  }
  lw_fake_cuda_log("compile", "name=%s opts=%s headers=%s", p->name, opts, p->headers);
  free(p->log);
  p->log = NULL;
  void *builtins = dlopen(FAKE_NVRTC_BUILTINS, RTLD_NOW | RTLD_NOLOAD);
  if (!builtins) {
    p->log = strdup("nvrtc: error: failed to open " FAKE_NVRTC_BUILTINS "\n");
    return 7;
  }
  dlclose(builtins);
  if (!arch) {
    p->log = strdup("nvrtc: error: no --gpu-architecture=sm_XY: no CUBIN can be made\n");
    return 5;
  }
  // As NVRTC: an #include of lanework/kernel_cuda.h resolves only to a header handed over in
  // memory or to a folder given with -I.
  if (strstr(p->src, "#include \"lanework/kernel_cuda.h\"") &&
      !strstr(p->headers, "lanework/kernel_cuda.h") && !strstr(opts, "-I")) {
    size_t n = strlen(p->name) + 160;
    p->log = malloc(n);
    snprintf(p->log, n,
             "%s(1): catastrophic error: cannot open source file \"lanework/kernel_cuda.h\"\n",
             p->name);
    return 6;
  }
  if (strstr(p->src, "FAKE_COMPILE_ERROR")) {
    size_t n = 2 * strlen(p->name) + 200;
    p->log = malloc(n);
    snprintf(p->log, n,
             "%s(2): warning: a warning first\n%s(3): error: identifier \"FAKE_COMPILE_ERROR\" "
             "is undefined\n\n1 error detected in the compilation of \"%s\".\n",
             p->name, p->name, p->name);
    return 6;
  }
  size_t n = strlen(FAKE_CUBIN_MAGIC) + strlen(arch) + strlen(opts) + strlen(p->src) + 32;
  p->cubin = malloc(n);
  p->cubin_bytes =
      (size_t)snprintf(p->cubin, n, "%sarch=%s\nopts=%s\n%s", FAKE_CUBIN_MAGIC, arch, opts,
                       p->src) + 1;
  p->log = strdup("");
  return 0;
}

API int nvrtcGetProgramLogSize(prog_t *p, size_t *bytes) {
  *bytes = p->log ? strlen(p->log) + 1 : 1;
  return 0;
}

API int nvrtcGetProgramLog(prog_t *p, char *log) {
  strcpy(log, p->log ? p->log : "");
  return 0;
}

API int nvrtcGetCUBINSize(prog_t *p, size_t *bytes) {
  if (!p->cubin) return 3;
  *bytes = p->cubin_bytes;
  return 0;
}

API int nvrtcGetCUBIN(prog_t *p, char *out) {
  if (!p->cubin) return 3;
  memcpy(out, p->cubin, p->cubin_bytes);
  return 0;
}

