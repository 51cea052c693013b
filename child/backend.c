// child/backend.c — the table of the backends built into this library: lw__backend_find and
// the names in messages both read it, so a message can never list a backend the build lacks
// or leave out one it has.
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "child/backend.h"

static const lw_backend_ops_t *const kBackends[] = {
    &lw__backend_sim,
#ifdef LW_HAVE_OPENCL
    &lw__backend_opencl,
#endif
    // Built everywhere: the driver is loaded with dlopen when a cuda chip opens.
    &lw__backend_cuda,
};
#define N_BACKENDS ((uint32_t)(sizeof(kBackends) / sizeof(kBackends[0])))

const lw_backend_ops_t *const *lw__backend_list(uint32_t *out_n) {
  *out_n = N_BACKENDS;
  return kBackends;
}

const lw_backend_ops_t *lw__backend_find(const char *name) {
  if (name == NULL) return NULL;
  for (uint32_t i = 0; i < N_BACKENDS; ++i) {
    if (strcmp(name, kBackends[i]->name) == 0) return kBackends[i];
  }
  return NULL;
}

// The names joined once, on first use: the table is fixed at build time.
static char names[LW_BACKEND_NAMES_BYTES];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_join(void) {
  size_t at = 0;
  for (uint32_t i = 0; i < N_BACKENDS; ++i) {
    int n = snprintf(names + at, sizeof(names) - at, "%s%s", i == 0 ? "" : ", ",
                     kBackends[i]->name);
    // The names are short compile-time constants; should a future one not fit, it is left
    // out whole rather than cut.
    if (n < 0 || (size_t)n >= sizeof(names) - at) {
      names[at] = '\0';
      break;
    }
    at += (size_t)n;
  }
}

const char *lw__backend_names(void) {
  pthread_once(&names_once, names_join);
  return names;
}

const char *lw__backend_missing_reason(const char *name) {
#ifndef LW_HAVE_OPENCL
  if (name && strcmp(name, "opencl") == 0) {
    return "this lanework was built without OpenCL (install ocl-icd-opencl-dev and "
           "opencl-c-headers, plus a driver such as pocl-opencl-icd, then reconfigure)";
  }
#else
  (void)name;
#endif
  return NULL;
}
