// tests/child/test_cuda_api.c — lanework's own declarations of the CUDA driver, NVRTC and
// nvJitLink entry points (child/cuda_api.h): every name resolved is the one the current ABI
// exports (the list below is written from NVIDIA's driver API reference, where cuda.h maps a
// function onto a versioned export), and a real libcuda.so.1, when the machine has one,
// exports each. Then what a machine without the libraries gets: a "cuda" chip that cannot
// open for want of a driver (UNAVAILABLE naming the library and what was searched), and, with a
// driver but no NVRTC, CUDA C and PTX refused at register naming the library while a CUBIN
// still registers and runs.
#include <dlfcn.h>

#include "child/cuda_api.h"
#include "cuda_test_util.h"

// The reference's name of each function lanework calls, and the export cuda.h (CUDA 13)
// resolves it to.
static const struct {
  const char *field, *abi;
} kExpected[] = {
    {"cuInit", "cuInit"},
    {"cuDriverGetVersion", "cuDriverGetVersion"},
    {"cuGetErrorName", "cuGetErrorName"},
    {"cuGetErrorString", "cuGetErrorString"},
    {"cuDeviceGetCount", "cuDeviceGetCount"},
    {"cuDeviceGet", "cuDeviceGet"},
    {"cuDeviceGetName", "cuDeviceGetName"},
    {"cuDeviceGetAttribute", "cuDeviceGetAttribute"},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2"},
    {"cuDeviceGetUuid", "cuDeviceGetUuid_v2"},
    {"cuCtxCreate_v4", "cuCtxCreate_v4"},  // cuCtxCreate in cuda.h 13
    {"cuCtxCreate_v2", "cuCtxCreate_v2"},  // cuCtxCreate in cuda.h 3.2 .. 12 (older drivers)
    {"cuCtxDestroy", "cuCtxDestroy_v2"},
    {"cuCtxSetCurrent", "cuCtxSetCurrent"},
    {"cuCtxGetCurrent", "cuCtxGetCurrent"},
    {"cuCtxSynchronize", "cuCtxSynchronize"},
    {"cuStreamCreate", "cuStreamCreate"},
    {"cuStreamDestroy", "cuStreamDestroy_v2"},
    {"cuStreamQuery", "cuStreamQuery"},
    {"cuStreamSynchronize", "cuStreamSynchronize"},
    {"cuEventCreate", "cuEventCreate"},
    {"cuEventDestroy", "cuEventDestroy_v2"},
    {"cuEventRecord", "cuEventRecord"},
    {"cuEventQuery", "cuEventQuery"},
    {"cuEventElapsedTime", "cuEventElapsedTime_v2"},
    {"cuMemAlloc", "cuMemAlloc_v2"},
    {"cuMemFree", "cuMemFree_v2"},
    {"cuMemcpyHtoD", "cuMemcpyHtoD_v2"},
    {"cuMemcpyDtoH", "cuMemcpyDtoH_v2"},
    {"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2"},
    {"cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2"},
    {"cuMemHostAlloc", "cuMemHostAlloc"},
    {"cuMemFreeHost", "cuMemFreeHost"},
    {"cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2"},
    {"cuMemHostRegister", "cuMemHostRegister_v2"},
    {"cuMemHostUnregister", "cuMemHostUnregister"},
    {"cuModuleLoadData", "cuModuleLoadData"},
    {"cuModuleUnload", "cuModuleUnload"},
    {"cuModuleGetFunction", "cuModuleGetFunction"},
    {"cuModuleGetGlobal", "cuModuleGetGlobal_v2"},
    {"cuLaunchKernel", "cuLaunchKernel"},
    {"cuFuncGetParamInfo", "cuFuncGetParamInfo"},
    {"nvrtcVersion", "nvrtcVersion"},
    {"nvrtcGetErrorString", "nvrtcGetErrorString"},
    {"nvrtcCreateProgram", "nvrtcCreateProgram"},
    {"nvrtcDestroyProgram", "nvrtcDestroyProgram"},
    {"nvrtcCompileProgram", "nvrtcCompileProgram"},
    {"nvrtcGetProgramLogSize", "nvrtcGetProgramLogSize"},
    {"nvrtcGetProgramLog", "nvrtcGetProgramLog"},
    {"nvrtcGetCUBINSize", "nvrtcGetCUBINSize"},
    {"nvrtcGetCUBIN", "nvrtcGetCUBIN"},
    {"nvJitLinkCreate", "nvJitLinkCreate"},
    {"nvJitLinkDestroy", "nvJitLinkDestroy"},
    {"nvJitLinkAddData", "nvJitLinkAddData"},
    {"nvJitLinkComplete", "nvJitLinkComplete"},
    {"nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedCubinSize"},
    {"nvJitLinkGetLinkedCubin", "nvJitLinkGetLinkedCubin"},
    {"nvJitLinkGetErrorLogSize", "nvJitLinkGetErrorLogSize"},
    {"nvJitLinkGetErrorLog", "nvJitLinkGetErrorLog"},
    {"nvJitLinkVersion", "nvJitLinkVersion"},
};
#define N_EXPECTED (sizeof(kExpected) / sizeof(kExpected[0]))

Test(cuda_api, every_resolved_name_is_the_current_abi_export) {
  size_t n = 0;
  const lw_cuda_symbol_t *s = lw__cuda_symbols(&n);
  cr_assert_eq(n, N_EXPECTED, "lanework resolves %zu entry points; the reference list has %zu",
               n, N_EXPECTED);
  for (size_t i = 0; i < n; ++i) {
    size_t j = 0;
    while (j < N_EXPECTED && strcmp(kExpected[j].field, s[i].field) != 0) ++j;
    cr_assert_lt(j, N_EXPECTED, "%s is resolved but not in the reference list", s[i].field);
    cr_assert_str_eq(s[i].abi, kExpected[j].abi, "%s must be resolved as %s, not %s",
                     s[i].field, kExpected[j].abi, s[i].abi);
  }
}

Test(cuda_api, a_real_driver_exports_every_required_name_when_the_machine_has_one) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) cr_skip("no libcuda.so.1 on this machine (%s): nothing to check against", dlerror());
  size_t n = 0;
  const lw_cuda_symbol_t *s = lw__cuda_symbols(&n);
  bool ctx = false;
  for (size_t i = 0; i < n; ++i) {
    if (s[i].lib != LW_CUDA_LIB_DRIVER) continue;
    void *p = dlsym(h, s[i].abi);
    if (strncmp(s[i].field, "cuCtxCreate", 11) == 0) ctx = ctx || p != NULL;
    if (s[i].required) cr_expect(p != NULL, "libcuda.so.1 does not export %s", s[i].abi);
  }
  cr_expect(ctx, "libcuda.so.1 exports neither cuCtxCreate_v4 nor cuCtxCreate_v2");
  dlclose(h);
}

Test(cuda_api, the_fake_driver_exports_every_driver_name_lanework_resolves) {
  char path[512];
  snprintf(path, sizeof(path), "%s/libfake_cuda.so", ct_fake_dir());
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(h, "%s", dlerror());
  size_t n = 0;
  const lw_cuda_symbol_t *s = lw__cuda_symbols(&n);
  for (size_t i = 0; i < n; ++i) {
    if (s[i].lib != LW_CUDA_LIB_DRIVER) continue;
    cr_expect(dlsym(h, s[i].abi) != NULL, "the fake lacks %s", s[i].abi);
  }
  dlclose(h);
}

static lw_status_t open_cuda(lw_chip_t **chip) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "cuda");
  return lw_chip_open(&cfg, chip);
}

Test(cuda_api, without_a_driver_a_cuda_chip_fails_unavailable_naming_libcuda_and_the_search,
     .timeout = 30) {
  unsetenv("LW_CUDA_LIBRARY");
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    cr_skip("this machine has libcuda.so.1: the no-driver case is the next test's override");
  }
  lw_chip_t *chip = NULL;
  cr_assert_eq(open_cuda(&chip), LW_UNAVAILABLE);
  cr_assert_null(chip);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "cannot load the CUDA driver libcuda.so.1"), "%s", m);
  cr_assert_not_null(strstr(m, "searched the dynamic linker's path"), "%s", m);
  cr_assert_not_null(strstr(m, "LW_CUDA_LIBRARY"), "%s", m);
  cr_assert_not_null(strstr(m, "cannot open shared object file"), "the dlerror text: %s", m);
}

Test(cuda_api, a_driver_path_that_does_not_exist_fails_unavailable_naming_it, .timeout = 30) {
  setenv("LW_CUDA_LIBRARY", "/nonexistent/lanework-test/libcuda.so.1", 1);
  lw_chip_t *chip = NULL;
  cr_assert_eq(open_cuda(&chip), LW_UNAVAILABLE);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "/nonexistent/lanework-test/libcuda.so.1 (named by "
                               "LW_CUDA_LIBRARY)"),
                     "%s", m);
  cr_assert_not_null(strstr(m, "No such file or directory"), "%s", m);
}

Test(cuda_api, a_library_that_is_not_a_driver_fails_unavailable_naming_the_missing_export,
     .timeout = 30) {
  // The fake NVRTC's builtins library: a shared library without a single driver entry point.
  char path[512];
  snprintf(path, sizeof(path), "%s/" FAKE_NVRTC_BUILTINS, ct_fake_dir());
  setenv("LW_CUDA_LIBRARY", path, 1);
  lw_chip_t *chip = NULL;
  cr_assert_eq(open_cuda(&chip), LW_UNAVAILABLE);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "lacks cuInit"), "%s", m);
}

Test(cuda_api, without_nvrtc_cuda_c_and_ptx_are_refused_naming_the_library_and_a_cubin_runs,
     .timeout = 30) {
  ct_use_fake(false);
  lw_chip_t *chip = NULL;
  LW_ASSERT_OK(open_cuda(&chip));
  lw_callable_t src = ct_cuda_c("vadd_src", CT_SOURCE_ALL, "vector_add", 0, NULL);
  lw_callable_handle_t h;
  cr_assert_eq(lw_chip_register(chip, &src, &h), LW_UNAVAILABLE);
  const char *m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "callable vadd_src is CUDA C, which needs NVRTC"), "%s", m);
  cr_assert_not_null(strstr(m, CT_NVRTC_MISSING), "the library tried: %s", m);

  static const char ptx[] = ".version 8.5\n.target sm_90\n.address_size 64\n"
                            ".visible .entry empty()\n{\n\tret;\n}\n";
  lw_callable_t p = src;
  p.name = "empty_ptx";
  p.image = ptx;
  p.image_bytes = sizeof(ptx) - 1;
  p.entry = "empty";
  p.format = LW_IMAGE_PTX;
  cr_assert_eq(lw_chip_register(chip, &p, &h), LW_UNAVAILABLE);
  m = lw_last_error()->message;
  cr_assert_not_null(strstr(m, "callable empty_ptx is PTX, which needs nvJitLink"), "%s", m);
  cr_assert_not_null(strstr(m, CT_NVJITLINK_MISSING), "%s", m);

  uint8_t cubin[CT_CUBIN_BYTES];
  lw_callable_t b = src;
  b.name = "empty_cubin";
  b.image = cubin;
  b.image_bytes = ct_cubin(cubin, "empty");
  b.entry = "empty";
  b.format = LW_IMAGE_CUBIN;
  LW_ASSERT_OK(lw_chip_register(chip, &b, &h));
  LW_ASSERT_OK(lw_chip_run(chip, h, NULL, NULL, NULL));
  cr_assert_geq(ct_find("launch", NULL, 0, "empty", NULL), 0, "the CUBIN's kernel ran");
  lw_chip_close(chip);
  ct_assert_no_contextless_call();
  unlink(ct_log_path);
}
