// tests/child/fake_cuda/fake_nvjitlink.c — a fake nvJitLink for the cuda backend's tests (see
// fake_cuda.h): "linking" PTX checks for an -arch=sm_XY option and wraps the PTX text in the
// fake driver's module format (whose kernels are the names followed by "(", so a PTX
// ".entry name(" counts). Every link is logged with its thread and whether a CUDA context was
// current there. A test double: built for tests only, never installed.
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "fake_cuda.h"

#define API __attribute__((visibility("default")))

typedef struct link {
  char arch[32];
  char *ptx;
  char *cubin;
  size_t cubin_bytes;
  char *log;
} link_t;

API int nvJitLinkVersion(unsigned *major, unsigned *minor) {
  *major = FAKE_NVRTC_MAJOR;
  *minor = FAKE_NVRTC_MINOR;
  return 0;
}

API int nvJitLinkCreate(link_t **out, unsigned n_options, const char **options) {
  link_t *l = calloc(1, sizeof(*l));
  char opts[512] = "";
  for (unsigned i = 0; i < n_options; ++i) {
    size_t used = strlen(opts);
    snprintf(opts + used, sizeof(opts) - used, "%s%s", i ? "|" : "", options[i]);
    if (strncmp(options[i], "-arch=sm_", 9) == 0) snprintf(l->arch, sizeof(l->arch), "%s", options[i] + 6);
  }
  lw_fake_cuda_log("link", "opts=%s", opts);
  *out = l;
  return 0;
}

API int nvJitLinkDestroy(link_t **l) {
  if (!l || !*l) return 1;
  free((*l)->ptx);
  free((*l)->cubin);
  free((*l)->log);
  free(*l);
  *l = NULL;
  return 0;
}

API int nvJitLinkAddData(link_t *l, int input_type, const void *data, size_t bytes,
                         const char *name) {
  (void)name;
  if (input_type != 2 || l->ptx) return 1;  // PTX, once
  l->ptx = calloc(1, bytes + 1);
  memcpy(l->ptx, data, bytes);
  return 0;
}

API int nvJitLinkComplete(link_t *l) {
  if (!l->arch[0] || !l->ptx || !strstr(l->ptx, ".entry")) {
    l->log = strdup("error   : no -arch=sm_XY, or no PTX with an .entry\n");
    return 5;
  }
  size_t n = strlen(FAKE_CUBIN_MAGIC) + strlen(l->arch) + strlen(l->ptx) + 32;
  l->cubin = malloc(n);
  l->cubin_bytes =
      (size_t)snprintf(l->cubin, n, "%sarch=%s\n%s", FAKE_CUBIN_MAGIC, l->arch, l->ptx) + 1;
  return 0;
}

API int nvJitLinkGetLinkedCubinSize(link_t *l, size_t *bytes) {
  if (!l->cubin) return 1;
  *bytes = l->cubin_bytes;
  return 0;
}

API int nvJitLinkGetLinkedCubin(link_t *l, void *out) {
  if (!l->cubin) return 1;
  memcpy(out, l->cubin, l->cubin_bytes);
  return 0;
}

API int nvJitLinkGetErrorLogSize(link_t *l, size_t *bytes) {
  *bytes = l->log ? strlen(l->log) + 1 : 1;
  return 0;
}

API int nvJitLinkGetErrorLog(link_t *l, char *log) {
  strcpy(log, l->log ? l->log : "");
  return 0;
}
