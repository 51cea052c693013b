// child/cuda_api.c — loading the CUDA driver, NVRTC and nvJitLink with dlopen and resolving
// lanework's tables of their entry points (child/cuda_api.h). Each library is loaded once per
// process, on first use, under its own pthread_once; the answer (a table, or why there is none)
// never changes afterwards.
#include "child/cuda_api.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/error.h"

#define F(lib, table, field, abi, fallback, required) \
  {lib, #field, abi, fallback, required, offsetof(table, field)}
#define D(field, abi, fallback, required) \
  F(LW_CUDA_LIB_DRIVER, lw_cuda_driver_t, field, abi, fallback, required)
#define R(field) F(LW_CUDA_LIB_NVRTC, lw_cuda_nvrtc_t, field, #field, NULL, 1)
#define J(field) F(LW_CUDA_LIB_NVJITLINK, lw_cuda_nvjitlink_t, field, #field, NULL, 1)

// The names follow the driver API reference: where cuda.h maps a function onto a versioned
// export (cuMemAlloc -> cuMemAlloc_v2), the versioned name is the one resolved. NVRTC and
// nvJitLink export their functions under their plain names.
static const lw_cuda_symbol_t kSymbols[] = {
    D(cuInit, "cuInit", NULL, 1),
    D(cuDriverGetVersion, "cuDriverGetVersion", NULL, 1),
    D(cuGetErrorName, "cuGetErrorName", NULL, 1),
    D(cuGetErrorString, "cuGetErrorString", NULL, 1),
    D(cuDeviceGetCount, "cuDeviceGetCount", NULL, 1),
    D(cuDeviceGet, "cuDeviceGet", NULL, 1),
    D(cuDeviceGetName, "cuDeviceGetName", NULL, 1),
    D(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL, 1),
    D(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL, 1),
    // _v2 (CUDA 11.4 on) gives a MIG instance its own UUID; the first one the GPU's.
    D(cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid", 1),
    D(cuCtxCreate_v4, "cuCtxCreate_v4", NULL, 0),
    D(cuCtxCreate_v2, "cuCtxCreate_v2", NULL, 0),
    D(cuCtxDestroy, "cuCtxDestroy_v2", NULL, 1),
    D(cuCtxSetCurrent, "cuCtxSetCurrent", NULL, 1),
    D(cuCtxGetCurrent, "cuCtxGetCurrent", NULL, 1),
    D(cuCtxSynchronize, "cuCtxSynchronize", NULL, 1),
    D(cuStreamCreate, "cuStreamCreate", NULL, 1),
    D(cuStreamDestroy, "cuStreamDestroy_v2", NULL, 1),
    D(cuStreamQuery, "cuStreamQuery", NULL, 1),
    D(cuStreamSynchronize, "cuStreamSynchronize", NULL, 1),
    D(cuEventCreate, "cuEventCreate", NULL, 1),
    D(cuEventDestroy, "cuEventDestroy_v2", NULL, 1),
    D(cuEventRecord, "cuEventRecord", NULL, 1),
    D(cuEventQuery, "cuEventQuery", NULL, 1),
    // _v2 from CUDA 12.8 (cuda.h 13 maps cuEventElapsedTime onto it); same signature.
    D(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", 1),
    D(cuMemAlloc, "cuMemAlloc_v2", NULL, 1),
    D(cuMemFree, "cuMemFree_v2", NULL, 1),
    D(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL, 1),
    D(cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL, 1),
    D(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL, 1),
    D(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL, 1),
    D(cuMemHostAlloc, "cuMemHostAlloc", NULL, 1),
    D(cuMemFreeHost, "cuMemFreeHost", NULL, 1),
    D(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", NULL, 1),
    D(cuMemHostRegister, "cuMemHostRegister_v2", NULL, 1),
    D(cuMemHostUnregister, "cuMemHostUnregister", NULL, 1),
    D(cuModuleLoadData, "cuModuleLoadData", NULL, 1),
    D(cuModuleUnload, "cuModuleUnload", NULL, 1),
    D(cuModuleGetFunction, "cuModuleGetFunction", NULL, 1),
    D(cuModuleGetGlobal, "cuModuleGetGlobal_v2", NULL, 1),
    D(cuLaunchKernel, "cuLaunchKernel", NULL, 1),
    D(cuFuncGetParamInfo, "cuFuncGetParamInfo", NULL, 0),
    R(nvrtcVersion),
    R(nvrtcGetErrorString),
    R(nvrtcCreateProgram),
    R(nvrtcDestroyProgram),
    R(nvrtcCompileProgram),
    R(nvrtcGetProgramLogSize),
    R(nvrtcGetProgramLog),
    R(nvrtcGetCUBINSize),
    R(nvrtcGetCUBIN),
    J(nvJitLinkCreate),
    J(nvJitLinkDestroy),
    J(nvJitLinkAddData),
    J(nvJitLinkComplete),
    J(nvJitLinkGetLinkedCubinSize),
    J(nvJitLinkGetLinkedCubin),
    J(nvJitLinkGetErrorLogSize),
    J(nvJitLinkGetErrorLog),
    J(nvJitLinkVersion),
};
#undef D
#undef R
#undef J
#undef F

const lw_cuda_symbol_t *lw__cuda_symbols(size_t *out_n) {
  *out_n = sizeof(kSymbols) / sizeof(kSymbols[0]);
  return kSymbols;
}

// One library's load: its handle, where it was found, and the answer every caller gets.
typedef struct loaded_lib {
  pthread_once_t once;
  void *handle;
  char path[PATH_MAX];
  lw_status_t status;
  lw_error_t error;
} loaded_lib_t;

static loaded_lib_t g_driver_lib = {.once = PTHREAD_ONCE_INIT};
static loaded_lib_t g_nvrtc_lib = {.once = PTHREAD_ONCE_INIT};
static loaded_lib_t g_nvjitlink_lib = {.once = PTHREAD_ONCE_INIT};
static lw_cuda_driver_t g_driver;
static lw_cuda_nvrtc_t g_nvrtc;
static lw_cuda_nvjitlink_t g_nvjitlink;
// The driver's table is complete: lw__cuda_result_text may use its error names. Release;
// pairs with the acquire load there.
static _Atomic bool g_driver_ready;

// Where handle was loaded from (the linker's map), or name when it cannot say.
static void loaded_path(void *handle, const char *name, char *out, size_t bytes) {
  struct link_map *map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) {
    snprintf(out, bytes, "%s", map->l_name);
  } else {
    snprintf(out, bytes, "%s", name);
  }
}

// The text of the last dlerror on this thread ("" when none).
static const char *dl_why(void) {
  const char *e = dlerror();
  return e ? e : "";
}

// Opens the first of names that loads; the override (when set) is the only name tried. Fills
// lib->handle and lib->path, or *why with the first failure's dlerror text.
static bool open_first(loaded_lib_t *lib, const char *override, const char *const *names,
                       size_t n, char *why, size_t why_bytes) {
  why[0] = '\0';
  const char *only[1] = {override};
  if (override && override[0]) {
    names = only;
    n = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      lib->handle = h;
      loaded_path(h, names[i], lib->path, sizeof(lib->path));
      return true;
    }
    // The first failure says most (a later name is usually a soname that is simply absent).
    if (why[0] == '\0') snprintf(why, why_bytes, "%s", dl_why());
  }
  return false;
}

// Fills table from lib's exports; false with *missing naming the first required export that
// is absent.
static bool resolve(lw_cuda_lib_t which, void *handle, void *table, const char **missing) {
  size_t n = 0;
  const lw_cuda_symbol_t *s = lw__cuda_symbols(&n);
  for (size_t i = 0; i < n; ++i) {
    if (s[i].lib != which) continue;
    void *p = dlsym(handle, s[i].abi);
    if (!p && s[i].fallback) p = dlsym(handle, s[i].fallback);
    if (!p && s[i].required) {
      *missing = s[i].abi;
      return false;
    }
    memcpy((char *)table + s[i].offset, &p, sizeof(p));
  }
  return true;
}

static void driver_load(void) {
  loaded_lib_t *lib = &g_driver_lib;
  const char *override = getenv("LW_CUDA_LIBRARY");
  static const char *const names[] = {"libcuda.so.1"};
  char why[200];
  if (!open_first(lib, override, names, 1, why, sizeof(why))) {
    bool by_env = override && override[0];
    lib->status = lw__error_set(
        &lib->error, LW_UNAVAILABLE, -1, 0,
        "cuda: cannot load the CUDA driver %s (%s): %s", by_env ? override : "libcuda.so.1",
        by_env ? "named by LW_CUDA_LIBRARY"
               : "searched the dynamic linker's path; install the NVIDIA driver or name it "
                 "with LW_CUDA_LIBRARY",
        why);
    return;
  }
  const char *missing = NULL;
  if (!resolve(LW_CUDA_LIB_DRIVER, lib->handle, &g_driver, &missing) ||
      (!g_driver.cuCtxCreate_v4 && !g_driver.cuCtxCreate_v2 &&
       (missing = "cuCtxCreate_v4 or cuCtxCreate_v2"))) {
    lib->status = lw__error_set(&lib->error, LW_UNAVAILABLE, -1, 0,
                                "cuda: the CUDA driver %s lacks %s (a driver too old for "
                                "lanework, or not a CUDA driver)",
                                lib->path, missing);
    memset(&g_driver, 0, sizeof(g_driver));
    return;
  }
  lib->status = LW_OK;
  atomic_store_explicit(&g_driver_ready, true, memory_order_release);
}

// NVRTC opens its builtins library (libnvrtc-builtins.so.MAJOR.MINOR) by soname at its first
// compile, which fails when the toolkit is not on the linker's path even though NVRTC itself
// was found (by LW_NVRTC_LIBRARY, say). Opened here first by full path from NVRTC's own
// folder, it is already loaded when NVRTC asks for its soname. Not finding it is not an error
// here: NVRTC may still find it itself, and says so in its compile log when it cannot.
static void nvrtc_builtins_preload(const char *nvrtc_path) {
  int major = 0, minor = 0;
  if (g_nvrtc.nvrtcVersion(&major, &minor) != LW_NVRTC_SUCCESS) return;
  const char *slash = strrchr(nvrtc_path, '/');
  if (!slash) return;  // found by soname with no folder known
  char path[2 * PATH_MAX];
  int n = snprintf(path, sizeof(path), "%.*s/libnvrtc-builtins.so.%d.%d",
                   (int)(slash - nvrtc_path), nvrtc_path, major, minor);
  if (n < 0 || (size_t)n >= sizeof(path)) return;
  // Kept loaded for the life of the process, as NVRTC keeps it.
  (void)dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void nvrtc_load(void) {
  loaded_lib_t *lib = &g_nvrtc_lib;
  const char *override = getenv("LW_NVRTC_LIBRARY");
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                      "libnvrtc.so.11.2"};
  char why[160];
  if (!open_first(lib, override, names, sizeof(names) / sizeof(names[0]), why, sizeof(why))) {
    bool by_env = override && override[0];
    lib->status = lw__error_set(
        &lib->error, LW_UNAVAILABLE, -1, 0, "cuda: NVRTC (%s) not found: %s",
        by_env ? override : "libnvrtc.so, .so.13, .so.12, .so.11.2; LW_NVRTC_LIBRARY names one",
        why);
    return;
  }
  const char *missing = NULL;
  if (!resolve(LW_CUDA_LIB_NVRTC, lib->handle, &g_nvrtc, &missing)) {
    lib->status = lw__error_set(&lib->error, LW_UNAVAILABLE, -1, 0,
                                "cuda: NVRTC %s lacks %s", lib->path, missing);
    memset(&g_nvrtc, 0, sizeof(g_nvrtc));
    return;
  }
  nvrtc_builtins_preload(lib->path);
  lib->status = LW_OK;
}

static void nvjitlink_load(void) {
  loaded_lib_t *lib = &g_nvjitlink_lib;
  const char *override = getenv("LW_NVJITLINK_LIBRARY");
  static const char *const names[] = {"libnvJitLink.so", "libnvJitLink.so.13",
                                      "libnvJitLink.so.12"};
  char why[160];
  if (!open_first(lib, override, names, sizeof(names) / sizeof(names[0]), why, sizeof(why))) {
    bool by_env = override && override[0];
    lib->status = lw__error_set(
        &lib->error, LW_UNAVAILABLE, -1, 0, "cuda: nvJitLink (%s) not found: %s",
        by_env ? override : "libnvJitLink.so, .so.13, .so.12; LW_NVJITLINK_LIBRARY names one",
        why);
    return;
  }
  const char *missing = NULL;
  if (!resolve(LW_CUDA_LIB_NVJITLINK, lib->handle, &g_nvjitlink, &missing)) {
    lib->status = lw__error_set(&lib->error, LW_UNAVAILABLE, -1, 0,
                                "cuda: nvJitLink %s lacks %s", lib->path, missing);
    memset(&g_nvjitlink, 0, sizeof(g_nvjitlink));
    return;
  }
  lib->status = LW_OK;
}

// The answer of a loaded library to one caller: its status and, on failure, its error.
static lw_status_t answer(const loaded_lib_t *lib, lw_error_t *err) {
  if (lib->status == LW_OK) return LW_OK;
  if (err) *err = lib->error;
  return lib->status;
}

lw_status_t lw__cuda_driver(const lw_cuda_driver_t **out, const char **out_path,
                            lw_error_t *err) {
  pthread_once(&g_driver_lib.once, driver_load);
  *out = g_driver_lib.status == LW_OK ? &g_driver : NULL;
  if (out_path) *out_path = g_driver_lib.path;
  return answer(&g_driver_lib, err);
}

lw_status_t lw__cuda_nvrtc(const lw_cuda_nvrtc_t **out, const char **out_path, lw_error_t *err) {
  pthread_once(&g_nvrtc_lib.once, nvrtc_load);
  *out = g_nvrtc_lib.status == LW_OK ? &g_nvrtc : NULL;
  if (out_path) *out_path = g_nvrtc_lib.path;
  return answer(&g_nvrtc_lib, err);
}

lw_status_t lw__cuda_nvjitlink(const lw_cuda_nvjitlink_t **out, lw_error_t *err) {
  pthread_once(&g_nvjitlink_lib.once, nvjitlink_load);
  *out = g_nvjitlink_lib.status == LW_OK ? &g_nvjitlink : NULL;
  return answer(&g_nvjitlink_lib, err);
}

const char *lw__cuda_result_text(lw_cu_result_t e, char *buf, size_t bytes) {
  const char *name = NULL, *text = NULL;
  if (atomic_load_explicit(&g_driver_ready, memory_order_acquire)) {
    if (g_driver.cuGetErrorName(e, &name) != LW_CU_SUCCESS) name = NULL;
    if (g_driver.cuGetErrorString(e, &text) != LW_CU_SUCCESS) text = NULL;
  }
  if (name && text) {
    snprintf(buf, bytes, "%s (%s)", name, text);
  } else if (name) {
    snprintf(buf, bytes, "%s", name);
  } else {
    snprintf(buf, bytes, "CUresult %d", e);
  }
  return buf;
}

int lw__cuda_result_is_sticky(lw_cu_result_t e) {
  switch (e) {
    case LW_CU_ERROR_ILLEGAL_ADDRESS:
    case LW_CU_ERROR_LAUNCH_TIMEOUT:
    case LW_CU_ERROR_ASSERT:
    case LW_CU_ERROR_HARDWARE_STACK_ERROR:
    case LW_CU_ERROR_ILLEGAL_INSTRUCTION:
    case LW_CU_ERROR_MISALIGNED_ADDRESS:
    case LW_CU_ERROR_INVALID_ADDRESS_SPACE:
    case LW_CU_ERROR_INVALID_PC:
    case LW_CU_ERROR_LAUNCH_FAILED:
    case LW_CU_ERROR_ECC_UNCORRECTABLE:
      return 1;
    default:
      return 0;
  }
}
