// child/cuda_api.h — lanework's own declarations of the small part of the CUDA driver API,
// NVRTC and nvJitLink that the cuda backend (child/backend_cuda.c) uses, and the process-wide
// table of their entry points. Written from NVIDIA's public reference documentation: lanework
// builds on every machine, with or without a CUDA toolkit, and opens the libraries with dlopen
// when the first "cuda" chip opens.
//
// The driver's ABI versions some entry points: a program built against cuda.h calls
// cuMemAlloc_v2 when it writes cuMemAlloc, because the header maps the one name onto the other.
// lanework has no header doing that, so each entry below is resolved by the name the current
// ABI exports (lw__cuda_symbols lists them; tests/child/test_cuda_api.c checks the list against
// NVIDIA's reference). An entry may name an older export as a fallback for older drivers when
// the two share a signature (cuEventElapsedTime_v2, then cuEventElapsedTime).
//
// Libraries and where they are looked for (each once per process, on first use):
//   - the driver: LW_CUDA_LIBRARY (a path or a soname), else "libcuda.so.1" (the driver's
//     soname; the unversioned libcuda.so is a link of the toolkit's stub, never the driver);
//   - NVRTC: LW_NVRTC_LIBRARY, else libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12,
//     libnvrtc.so.11.2, in this order. Its builtins library (libnvrtc-builtins.so.MAJOR.MINOR,
//     which NVRTC itself opens by soname at its first compile) is opened first by full path
//     from the folder NVRTC was loaded from, so a toolkit outside the linker's path works;
//   - nvJitLink (optional, compiles PTX to a CUBIN off the driver): LW_NVJITLINK_LIBRARY, else
//     libnvJitLink.so, libnvJitLink.so.13, libnvJitLink.so.12.
// No driver: lw__cuda_driver fails UNAVAILABLE naming the library and the dlerror text. No
// NVRTC or nvJitLink: their tables stay NULL and lw__cuda_nvrtc / lw__cuda_nvjitlink say why;
// the backend refuses what needs them at register.
//
// Threads: every function here is thread-safe. The tables are filled once (pthread_once) and
// never change afterwards; the libraries stay loaded until the process exits.
#ifndef LANEWORK_CHILD_CUDA_API_H_
#define LANEWORK_CHILD_CUDA_API_H_

#include <stddef.h>
#include <stdint.h>

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------------
// Driver API types (sizes and values as NVIDIA's reference gives them)

typedef int lw_cu_result_t;            // CUresult, an int-sized enum
typedef int lw_cu_device_t;            // CUdevice, an ordinal
typedef uint64_t lw_cu_deviceptr_t;    // CUdeviceptr, 64 bits on every 64-bit platform
typedef struct lw_cu_ctx *lw_cu_context_t;     // CUcontext (opaque)
typedef struct lw_cu_mod *lw_cu_module_t;      // CUmodule
typedef struct lw_cu_func *lw_cu_function_t;   // CUfunction
typedef struct lw_cu_stream *lw_cu_stream_t;   // CUstream
typedef struct lw_cu_event *lw_cu_event_t;     // CUevent
typedef struct lw_cu_uuid {
  unsigned char bytes[16];
} lw_cu_uuid_t;                                // CUuuid

// The CUresult values the backend tells apart (the others are named by cuGetErrorName).
enum {
  LW_CU_SUCCESS = 0,
  LW_CU_ERROR_INVALID_VALUE = 1,
  LW_CU_ERROR_OUT_OF_MEMORY = 2,
  LW_CU_ERROR_NOT_INITIALIZED = 3,
  LW_CU_ERROR_NO_DEVICE = 100,
  LW_CU_ERROR_INVALID_DEVICE = 101,
  LW_CU_ERROR_ECC_UNCORRECTABLE = 214,
  LW_CU_ERROR_INVALID_IMAGE = 200,
  LW_CU_ERROR_INVALID_CONTEXT = 201,
  LW_CU_ERROR_NOT_FOUND = 500,
  LW_CU_ERROR_NOT_READY = 600,
  LW_CU_ERROR_ILLEGAL_ADDRESS = 700,
  LW_CU_ERROR_LAUNCH_TIMEOUT = 702,
  LW_CU_ERROR_ASSERT = 710,
  LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  LW_CU_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  LW_CU_ERROR_HARDWARE_STACK_ERROR = 714,
  LW_CU_ERROR_ILLEGAL_INSTRUCTION = 715,
  LW_CU_ERROR_MISALIGNED_ADDRESS = 716,
  LW_CU_ERROR_INVALID_ADDRESS_SPACE = 717,
  LW_CU_ERROR_INVALID_PC = 718,
  LW_CU_ERROR_LAUNCH_FAILED = 719,
  LW_CU_ERROR_UNKNOWN = 999,
};

// CUdevice_attribute values used.
enum {
  LW_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  LW_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  LW_CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
  LW_CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  LW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  LW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

// Flags.
enum {
  LW_CU_CTX_SCHED_AUTO = 0x0,
  LW_CU_CTX_MAP_HOST = 0x8,           // cuCtxCreate: allow mapped pinned host memory
  LW_CU_STREAM_NON_BLOCKING = 0x1,    // cuStreamCreate: no implicit sync with stream 0
  LW_CU_EVENT_DEFAULT = 0x0,
  LW_CU_MEMHOSTALLOC_PORTABLE = 0x1,  // cuMemHostAlloc: pinned for every context
  LW_CU_MEMHOSTALLOC_DEVICEMAP = 0x2, // cuMemHostAlloc: mapped into the device's space
  LW_CU_MEMHOSTREGISTER_PORTABLE = 0x1,
  LW_CU_MEMHOSTREGISTER_DEVICEMAP = 0x2,
};

// cuCtxCreate_v4's parameter block (CUctxCreateParams): NULL asks for none of its features.
typedef struct lw_cu_ctx_create_params lw_cu_ctx_create_params_t;

// ---------------------------------------------------------------------------------------------
// NVRTC and nvJitLink types

typedef int lw_nvrtc_result_t;              // nvrtcResult; 0 = NVRTC_SUCCESS
typedef struct lw_nvrtc_prog *lw_nvrtc_program_t;   // nvrtcProgram
enum { LW_NVRTC_SUCCESS = 0, LW_NVRTC_ERROR_COMPILATION = 6 };

typedef int lw_nvjitlink_result_t;          // nvJitLinkResult; 0 = NVJITLINK_SUCCESS
typedef struct lw_nvjitlink *lw_nvjitlink_handle_t;  // nvJitLinkHandle
enum { LW_NVJITLINK_SUCCESS = 0, LW_NVJITLINK_INPUT_PTX = 2 };

// ---------------------------------------------------------------------------------------------
// Entry point tables. Each field is named after the function as NVIDIA's reference names it;
// lw__cuda_symbols says which export fills it.

typedef struct lw_cuda_driver {
  lw_cu_result_t (*cuInit)(unsigned int flags);
  lw_cu_result_t (*cuDriverGetVersion)(int *out_version);
  lw_cu_result_t (*cuGetErrorName)(lw_cu_result_t e, const char **out_name);
  lw_cu_result_t (*cuGetErrorString)(lw_cu_result_t e, const char **out_text);
  lw_cu_result_t (*cuDeviceGetCount)(int *out_count);
  lw_cu_result_t (*cuDeviceGet)(lw_cu_device_t *out_dev, int ordinal);
  lw_cu_result_t (*cuDeviceGetName)(char *name, int bytes, lw_cu_device_t dev);
  lw_cu_result_t (*cuDeviceGetAttribute)(int *out_value, int attribute, lw_cu_device_t dev);
  lw_cu_result_t (*cuDeviceTotalMem)(size_t *out_bytes, lw_cu_device_t dev);
  lw_cu_result_t (*cuDeviceGetUuid)(lw_cu_uuid_t *out_uuid, lw_cu_device_t dev);
  // Context creation: cuCtxCreate_v4 (CUDA 12.5 on; what cuda.h 13 calls cuCtxCreate) or,
  // on an older driver, cuCtxCreate_v2 (flags, device). At least one of the two is present.
  lw_cu_result_t (*cuCtxCreate_v4)(lw_cu_context_t *out_ctx, lw_cu_ctx_create_params_t *params,
                                   unsigned int flags, lw_cu_device_t dev);
  lw_cu_result_t (*cuCtxCreate_v2)(lw_cu_context_t *out_ctx, unsigned int flags,
                                   lw_cu_device_t dev);
  lw_cu_result_t (*cuCtxDestroy)(lw_cu_context_t ctx);
  lw_cu_result_t (*cuCtxSetCurrent)(lw_cu_context_t ctx);
  lw_cu_result_t (*cuCtxGetCurrent)(lw_cu_context_t *out_ctx);
  lw_cu_result_t (*cuCtxSynchronize)(void);
  lw_cu_result_t (*cuStreamCreate)(lw_cu_stream_t *out_stream, unsigned int flags);
  lw_cu_result_t (*cuStreamDestroy)(lw_cu_stream_t stream);
  lw_cu_result_t (*cuStreamQuery)(lw_cu_stream_t stream);
  lw_cu_result_t (*cuStreamSynchronize)(lw_cu_stream_t stream);
  lw_cu_result_t (*cuEventCreate)(lw_cu_event_t *out_event, unsigned int flags);
  lw_cu_result_t (*cuEventDestroy)(lw_cu_event_t event);
  lw_cu_result_t (*cuEventRecord)(lw_cu_event_t event, lw_cu_stream_t stream);
  lw_cu_result_t (*cuEventQuery)(lw_cu_event_t event);
  lw_cu_result_t (*cuEventElapsedTime)(float *out_ms, lw_cu_event_t start, lw_cu_event_t end);
  lw_cu_result_t (*cuMemAlloc)(lw_cu_deviceptr_t *out_ptr, size_t bytes);
  lw_cu_result_t (*cuMemFree)(lw_cu_deviceptr_t ptr);
  lw_cu_result_t (*cuMemcpyHtoD)(lw_cu_deviceptr_t dst, const void *src, size_t bytes);
  lw_cu_result_t (*cuMemcpyDtoH)(void *dst, lw_cu_deviceptr_t src, size_t bytes);
  lw_cu_result_t (*cuMemcpyHtoDAsync)(lw_cu_deviceptr_t dst, const void *src, size_t bytes,
                                      lw_cu_stream_t stream);
  lw_cu_result_t (*cuMemcpyDtoHAsync)(void *dst, lw_cu_deviceptr_t src, size_t bytes,
                                      lw_cu_stream_t stream);
  lw_cu_result_t (*cuMemHostAlloc)(void **out_ptr, size_t bytes, unsigned int flags);
  lw_cu_result_t (*cuMemFreeHost)(void *ptr);
  lw_cu_result_t (*cuMemHostGetDevicePointer)(lw_cu_deviceptr_t *out_ptr, void *host,
                                              unsigned int flags);
  lw_cu_result_t (*cuMemHostRegister)(void *ptr, size_t bytes, unsigned int flags);
  lw_cu_result_t (*cuMemHostUnregister)(void *ptr);
  lw_cu_result_t (*cuModuleLoadData)(lw_cu_module_t *out_module, const void *image);
  lw_cu_result_t (*cuModuleUnload)(lw_cu_module_t module);
  lw_cu_result_t (*cuModuleGetFunction)(lw_cu_function_t *out_fn, lw_cu_module_t module,
                                        const char *name);
  lw_cu_result_t (*cuModuleGetGlobal)(lw_cu_deviceptr_t *out_ptr, size_t *out_bytes,
                                      lw_cu_module_t module, const char *name);
  lw_cu_result_t (*cuLaunchKernel)(lw_cu_function_t fn, unsigned int grid_x, unsigned int grid_y,
                                   unsigned int grid_z, unsigned int block_x,
                                   unsigned int block_y, unsigned int block_z,
                                   unsigned int shared_bytes, lw_cu_stream_t stream,
                                   void **kernel_params, void **extra);
  // Optional (CUDA 12.4 on): the offset and size of a kernel's parameter index; an index past
  // the last is CUDA_ERROR_INVALID_VALUE, which gives the kernel's parameter count. NULL when
  // the driver lacks it.
  lw_cu_result_t (*cuFuncGetParamInfo)(lw_cu_function_t fn, size_t index, size_t *out_offset,
                                       size_t *out_bytes);
} lw_cuda_driver_t;

typedef struct lw_cuda_nvrtc {
  lw_nvrtc_result_t (*nvrtcVersion)(int *out_major, int *out_minor);
  const char *(*nvrtcGetErrorString)(lw_nvrtc_result_t r);
  lw_nvrtc_result_t (*nvrtcCreateProgram)(lw_nvrtc_program_t *out_prog, const char *src,
                                          const char *name, int n_headers,
                                          const char *const *headers,
                                          const char *const *include_names);
  lw_nvrtc_result_t (*nvrtcDestroyProgram)(lw_nvrtc_program_t *prog);
  lw_nvrtc_result_t (*nvrtcCompileProgram)(lw_nvrtc_program_t prog, int n_options,
                                           const char *const *options);
  lw_nvrtc_result_t (*nvrtcGetProgramLogSize)(lw_nvrtc_program_t prog, size_t *out_bytes);
  lw_nvrtc_result_t (*nvrtcGetProgramLog)(lw_nvrtc_program_t prog, char *log);
  lw_nvrtc_result_t (*nvrtcGetCUBINSize)(lw_nvrtc_program_t prog, size_t *out_bytes);
  lw_nvrtc_result_t (*nvrtcGetCUBIN)(lw_nvrtc_program_t prog, char *cubin);
} lw_cuda_nvrtc_t;

typedef struct lw_cuda_nvjitlink {
  lw_nvjitlink_result_t (*nvJitLinkCreate)(lw_nvjitlink_handle_t *out_handle,
                                           uint32_t n_options, const char **options);
  lw_nvjitlink_result_t (*nvJitLinkDestroy)(lw_nvjitlink_handle_t *handle);
  lw_nvjitlink_result_t (*nvJitLinkAddData)(lw_nvjitlink_handle_t handle, int input_type,
                                            const void *data, size_t bytes, const char *name);
  lw_nvjitlink_result_t (*nvJitLinkComplete)(lw_nvjitlink_handle_t handle);
  lw_nvjitlink_result_t (*nvJitLinkGetLinkedCubinSize)(lw_nvjitlink_handle_t handle,
                                                       size_t *out_bytes);
  lw_nvjitlink_result_t (*nvJitLinkGetLinkedCubin)(lw_nvjitlink_handle_t handle, void *cubin);
  lw_nvjitlink_result_t (*nvJitLinkGetErrorLogSize)(lw_nvjitlink_handle_t handle,
                                                    size_t *out_bytes);
  lw_nvjitlink_result_t (*nvJitLinkGetErrorLog)(lw_nvjitlink_handle_t handle, char *log);
  lw_nvjitlink_result_t (*nvJitLinkVersion)(unsigned int *out_major, unsigned int *out_minor);
} lw_cuda_nvjitlink_t;

// ---------------------------------------------------------------------------------------------
// The symbol list (for the declarations check and for messages)

typedef enum lw_cuda_lib {
  LW_CUDA_LIB_DRIVER = 0,
  LW_CUDA_LIB_NVRTC = 1,
  LW_CUDA_LIB_NVJITLINK = 2,
} lw_cuda_lib_t;

typedef struct lw_cuda_symbol {
  lw_cuda_lib_t lib;
  const char *field;     // the table field (the function's name in NVIDIA's reference)
  const char *abi;       // the export resolved first: the current ABI's name
  const char *fallback;  // an older export with the same signature, or NULL
  // Required: the library is refused without it (optional ones stay NULL). The two context
  // creators are each optional, but one of them is required (see lw_cuda_driver_t).
  int required;
  size_t offset;         // of the field in its table
} lw_cuda_symbol_t;

// Every entry point lanework resolves, in table order; *out_n is the count. Static.
const lw_cuda_symbol_t *lw__cuda_symbols(size_t *out_n);

// ---------------------------------------------------------------------------------------------
// Loading

// The driver's table, loading the library and resolving it on the first call (any later call
// returns the same answer). UNAVAILABLE with a message naming the library, what was searched
// and the dlerror text, or the missing export. *out_path (may be NULL) receives the path the
// library was found at (dlinfo) or the name asked for. Does not call cuInit.
LW_MUST_USE lw_status_t lw__cuda_driver(const lw_cuda_driver_t **out, const char **out_path,
                                        lw_error_t *err);

// NVRTC's table (loaded once, with its builtins library). UNAVAILABLE naming the library and
// the names tried when it cannot be loaded. *out_path as above.
LW_MUST_USE lw_status_t lw__cuda_nvrtc(const lw_cuda_nvrtc_t **out, const char **out_path,
                                       lw_error_t *err);

// nvJitLink's table (loaded once). UNAVAILABLE naming the library and the names tried.
LW_MUST_USE lw_status_t lw__cuda_nvjitlink(const lw_cuda_nvjitlink_t **out, lw_error_t *err);

// "CUDA_ERROR_X (text)" for e, from cuGetErrorName/cuGetErrorString when the driver is loaded,
// else "CUresult N". Writes at most bytes into buf and returns buf.
const char *lw__cuda_result_text(lw_cu_result_t e, char *buf, size_t bytes);

// A CUresult after which the context can no longer be used (NVIDIA: "the process must be
// terminated and relaunched"): illegal address, assert, launch failure, illegal instruction,
// misaligned address, hardware stack error, invalid PC or address space, launch timeout,
// uncorrectable ECC.
int lw__cuda_result_is_sticky(lw_cu_result_t e);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_CUDA_API_H_
