// child/backend_opencl.c — the `opencl` chip: OpenCL C or SPIR-V programs built on the register
// lane and NDRanges enqueued in slices on the run lane, through the ICD loader (any platform:
// PoCL on a CPU here, a vendor's driver on a GPU).
//
// Devices: lw_chip_config_t.device_id indexes every device of every platform, platforms in the
// order clGetPlatformIDs gives them and devices in each platform's order (`lanework info`
// lists them). No platform at all is UNAVAILABLE naming what to install. Open also builds a
// tiny program, so the device compiler's one-time start-up is not charged to the first
// register (see warm_up).
//
// A CPU device shares the machine's cores with the chip's own threads: the register lane
// compiles programs on the host (PoCL's build is an LLVM compile on the calling thread). So that
// a build really runs beside a run, a CPU device with more than one compute unit is used
// through a sub-device of (compute units - 1) units (clCreateSubDevices BY_COUNTS, else
// EQUALLY), leaving one core to the register lane. LW_OPENCL_CPU_UNITS=<n> in the environment
// picks n units instead (0: the whole device). A CPU device that cannot be partitioned is used
// whole; with PoCL, POCL_MAX_PTHREAD_COUNT=<n> set before the process starts limits it
// instead (PoCL reads it once, when the platform is first initialized).
//
// Threads and locks: no lock is needed. load/unload (register lane) create and release
// programs and kernels in the device's context and never touch a command queue; launch (run
// lane) is the only user of the one command queue and of a module's cl_kernel (runs are serial,
// so clSetKernelArg never races itself). OpenCL guarantees every other call used here is
// thread-safe, so a build runs while a launch is in flight.
//
// Runs: arguments follow the callable's signature (IN/OUT/INOUT: the next tensor, as a
// per-run CL_MEM_USE_HOST_PTR buffer over the caller's memory, zero-copy on a CPU device;
// SCALAR: the next scalar, typed). The NDRange is enqueued in slices along its last dimension
// (global offsets), each sized to take about LW_OPENCL_SLICE_NS of device time (default 1 ms,
// adapted from the previous slice's profiled time; a run starts at the size the module's last
// run ended with only when its scalars are that run's, since a scalar may set what a
// work-item costs), and the cancel word is checked between
// slices: OpenCL cannot stop a running NDRange, so a cancel lands within one slice. Kernels
// must therefore index with get_global_id() and not stride with get_global_size(), which is
// the slice's size. Kernel time is the sum of the slices' profiling times. OUT and INOUT
// buffers are mapped for reading after the last slice, so their bytes are in host memory when
// the run finishes (a no-op on a CPU device). Live tensors (LW_PARAM_LIVE) are the host's and
// the kernel's way to talk during a run: a live IN one is handed to the device before every
// slice, a live OUT one mapped back after every slice (live_push, live_pull), since a device
// with memory of its own sees no host store while a kernel runs, nor the host the kernel's.
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "child/backend.h"
#include "child/backend_opencl.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "lanework/kernel.h"

#define OCL_NAME_BYTES 128
#define OCL_DEFAULT_SLICE_NS (1000ll * 1000)
// Work-items of the first slice when nothing is known about the kernel yet: small, because a
// work-item may be long (a cancel waits for the slice under way); slices then grow toward
// slice_ns of device time, at most OCL_SLICE_GROWTH times a step.
#define OCL_FIRST_SLICE_ITEMS 256u
#define OCL_SLICE_GROWTH 8.0
// Work-group size lanework chooses at most when a run gives none (see ocl_launch).
#define OCL_WG_CAP 64u

typedef struct ocl_device {
  int32_t device_id;
  cl_device_id root;   // the device as listed
  cl_device_id dev;    // root, or the sub-device runs and builds use
  bool sub;            // dev is a sub-device this chip created
  cl_context ctx;
  cl_command_queue q;  // the run lane's, with profiling
  bool has_il;         // accepts SPIR-V (CL_DEVICE_IL_VERSION names one)
  uint32_t units;      // compute units of dev
  int64_t slice_ns;
  char name[OCL_NAME_BYTES];
} ocl_device_t;

typedef struct ocl_module {
  cl_program prog;
  cl_kernel kern;
  char name[OCL_NAME_BYTES];
  char entry[OCL_NAME_BYTES];
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
  // Work-items per slice learned from the previous run (0: not yet) and that run's scalars:
  // the next run starts there when its scalars are the same. Other scalars may make a
  // work-item cost thousands of times more (a loop count), and a slice learned from cheap
  // work-items would then run for seconds with no cancel point (found on an H100: a run of one
  // step before a 2 s run of the same kernel made the 2 s run one slice).
  uint64_t slice_items;
  uint32_t slice_n_scalars;
  uint64_t slice_scalars[LW_MAX_SCALARS];
  // Largest work-group lanework picks when the run leaves local sizes to the device.
  size_t wg_cap;
} ocl_module_t;

static const char *cl_err_name(cl_int e) {
  switch (e) {
#define E(x) \
  case x:    \
    return #x;
    E(CL_SUCCESS)
    E(CL_DEVICE_NOT_FOUND)
    E(CL_DEVICE_NOT_AVAILABLE)
    E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E(CL_OUT_OF_RESOURCES)
    E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE)
    E(CL_BUILD_PROGRAM_FAILURE)
    E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_DEVICE_PARTITION_FAILED)
    E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT)
    E(CL_INVALID_COMMAND_QUEUE)
    E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_BINARY)
    E(CL_INVALID_BUILD_OPTIONS)
    E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE)
    E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL)
    E(CL_INVALID_ARG_INDEX)
    E(CL_INVALID_ARG_VALUE)
    E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION)
    E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET)
    E(CL_INVALID_EVENT)
    E(CL_INVALID_OPERATION)
    E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_GLOBAL_WORK_SIZE)
    E(CL_INVALID_PROPERTY)
    E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
  }
  return "CL error";
}

// ---------------------------------------------------------------------------------------------
// Devices

// Every device of every platform, in lanework's order. *out is malloc'ed (NULL when none).
static lw_status_t list_devices(cl_device_id **out, cl_platform_id **out_platforms,
                                uint32_t *out_n, lw_error_t *err) {
  *out = NULL;
  *out_platforms = NULL;
  *out_n = 0;
  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(0, NULL, &np);
  if (e == -1001 || (e == CL_SUCCESS && np == 0)) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "opencl: no OpenCL platform found (install an OpenCL driver: "
                         "pocl-opencl-icd for CPUs, or the GPU vendor's ICD)");
  }
  if (e != CL_SUCCESS) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "opencl: clGetPlatformIDs failed: %s (%d)",
                         cl_err_name(e), e);
  }
  cl_platform_id *plats = calloc(np, sizeof(*plats));
  if (!plats) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "opencl: out of memory");
  if ((e = clGetPlatformIDs(np, plats, NULL)) != CL_SUCCESS) {
    free(plats);
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "opencl: clGetPlatformIDs failed: %s (%d)",
                         cl_err_name(e), e);
  }
  cl_device_id *devs = NULL;
  cl_platform_id *owners = NULL;
  uint32_t n = 0;
  for (cl_uint p = 0; p < np; ++p) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) {
      continue;  // a platform without devices (CL_DEVICE_NOT_FOUND) adds none
    }
    cl_device_id *grown = realloc(devs, (n + nd) * sizeof(*devs));
    cl_platform_id *grown_owners = grown ? realloc(owners, (n + nd) * sizeof(*owners)) : NULL;
    if (grown) devs = grown;
    if (grown_owners) owners = grown_owners;
    if (!grown || !grown_owners) {
      free(devs);
      free(owners);
      free(plats);
      return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "opencl: out of memory");
    }
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs + n, NULL) != CL_SUCCESS) continue;
    for (cl_uint i = 0; i < nd; ++i) owners[n + i] = plats[p];
    n += nd;
  }
  free(plats);
  if (n == 0) {
    free(devs);
    free(owners);
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "opencl: OpenCL platforms found but no device (check the driver: "
                         "clinfo -l lists what the ICD loader sees)");
  }
  *out = devs;
  *out_platforms = owners;
  *out_n = n;
  return LW_OK;
}

// A device string cut to fit buf (clGetDeviceInfo refuses a buffer shorter than the string).
static void info_string(cl_device_id d, cl_device_info what, char *buf, size_t bytes) {
  buf[0] = '\0';
  size_t need = 0;
  if (clGetDeviceInfo(d, what, 0, NULL, &need) != CL_SUCCESS || need == 0) return;
  char *full = malloc(need + 1);
  if (!full) return;
  if (clGetDeviceInfo(d, what, need, full, NULL) == CL_SUCCESS) {
    full[need] = '\0';
    snprintf(buf, bytes, "%s", full);
  }
  free(full);
}

static const char *type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

lw_status_t lw__opencl_list(lw_opencl_device_info_t *out, uint32_t cap, uint32_t *out_n,
                            lw_error_t *err) {
  *out_n = 0;
  cl_device_id *devs = NULL;
  cl_platform_id *plats = NULL;
  uint32_t n = 0;
  LW_RETURN_IF_ERROR(list_devices(&devs, &plats, &n, err));
  for (uint32_t i = 0; i < n && i < cap; ++i) {
    lw_opencl_device_info_t *d = &out[i];
    memset(d, 0, sizeof(*d));
    d->index = (int32_t)i;
    if (clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof(d->platform), d->platform, NULL) !=
        CL_SUCCESS) {
      d->platform[0] = '\0';
    }
    d->platform[sizeof(d->platform) - 1] = '\0';
    info_string(devs[i], CL_DEVICE_NAME, d->device, sizeof(d->device));
    info_string(devs[i], CL_DEVICE_VERSION, d->version, sizeof(d->version));
    cl_device_type t = 0;
    (void)clGetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof(t), &t, NULL);
    snprintf(d->type, sizeof(d->type), "%s", type_name(t));
    cl_uint cu = 0;
    (void)clGetDeviceInfo(devs[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL);
    d->compute_units = cu;
  }
  *out_n = n;
  free(devs);
  free(plats);
  return LW_OK;
}

// Units a CPU device keeps for runs: LW_OPENCL_CPU_UNITS, else all but one. 0: the whole device.
static uint32_t cpu_run_units(uint32_t units) {
  const char *env = getenv("LW_OPENCL_CPU_UNITS");
  if (env && *env) {
    long v = strtol(env, NULL, 10);
    if (v <= 0 || (unsigned long)v >= units) return 0;
    return (uint32_t)v;
  }
  return units > 1 ? units - 1 : 0;
}

// Creates a sub-device of `units` compute units of root; false when the device cannot do it.
static bool make_sub_device(cl_device_id root, uint32_t units, cl_device_id *out) {
  cl_device_partition_property by_counts[] = {CL_DEVICE_PARTITION_BY_COUNTS,
                                              (cl_device_partition_property)units,
                                              CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
  cl_uint got = 0;
  if (clCreateSubDevices(root, by_counts, 1, out, &got) == CL_SUCCESS && got >= 1) return true;
  cl_device_partition_property equally[] = {CL_DEVICE_PARTITION_EQUALLY,
                                            (cl_device_partition_property)units, 0};
  cl_uint count = 0;
  if (clCreateSubDevices(root, equally, 0, NULL, &count) != CL_SUCCESS || count == 0) {
    return false;
  }
  cl_device_id *subs = calloc(count, sizeof(*subs));
  if (!subs) return false;
  bool ok = clCreateSubDevices(root, equally, count, subs, NULL) == CL_SUCCESS;
  if (ok) {
    *out = subs[0];
    for (cl_uint i = 1; i < count; ++i) clReleaseDevice(subs[i]);
  }
  free(subs);
  return ok;
}

// The first build in a process also starts the device compiler (PoCL: LLVM and its kernel
// library, about 0.7 s here), a one-time cost that belongs to no callable. Open pays it with a
// tiny program, so every register costs its own build only. A failure here is not an error:
// the first real build reports its own.
static void warm_up(ocl_device_t *d) {
  static const char *src = "__kernel void lw_warm_up(__global int *p) { p[0] = 0; }";
  cl_int e = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(d->ctx, 1, &src, NULL, &e);
  if (e != CL_SUCCESS) return;
  (void)clBuildProgram(p, 1, &d->dev, "", NULL, NULL);
  clReleaseProgram(p);
}

// Waits until the driver holds no reference to q but the chip's: a command's event holds one
// on its queue until the driver lets go of the event, which PoCL does on its device thread
// a moment after it woke the thread waiting for the command. OpenCL says a sub-device outlives
// the queues made on it, but PoCL frees a sub-device at its last clReleaseDevice whatever still
// uses it (its refcount log shows no reference from the queue). Under load a chip closed right
// after a run, with another opened at once, crashed PoCL's device thread in POclReleaseEvent;
// an event let go after its sub-device was freed is the likely cause, and after this wait no
// event of the queue is left to let go. Bounded (2 s): the count is the driver's to keep, and a
// driver that keeps an extra reference for good must not hang a close.
static void drain_queue(cl_command_queue q) {
  if (clFinish(q) != CL_SUCCESS) return;
  for (int i = 0; i < 20000; ++i) {
    cl_uint refs = 0;
    if (clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(refs), &refs, NULL) !=
            CL_SUCCESS ||
        refs <= 1) {
      return;
    }
    struct timespec pause = {0, 100 * 1000};
    nanosleep(&pause, NULL);
  }
}

static void ocl_close(void *device) {
  ocl_device_t *d = device;
  if (!d) return;
  // Only a sub-device is freed under a live queue; a root device is never freed.
  if (d->q && d->sub) drain_queue(d->q);
  if (d->q) clReleaseCommandQueue(d->q);
  if (d->ctx) clReleaseContext(d->ctx);
  if (d->sub) clReleaseDevice(d->dev);
  free(d);
}

lw_status_t lw__opencl_chip_device(int32_t device_id, lw_opencl_chip_device_t *out,
                                   lw_error_t *err) {
  memset(out, 0, sizeof(*out));
  cl_device_id *devs = NULL;
  cl_platform_id *plats = NULL;
  uint32_t n = 0;
  LW_RETURN_IF_ERROR(list_devices(&devs, &plats, &n, err));
  if (device_id < 0 || (uint32_t)device_id >= n) {
    free(devs);
    free(plats);
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "opencl: device_id %d is out of range: %u OpenCL device%s (0..%u; "
                         "`lanework info` lists them)",
                         device_id, n, n == 1 ? "" : "s", n - 1);
  }
  out->root = devs[device_id];
  out->dev = out->root;
  free(devs);
  free(plats);
  info_string(out->root, CL_DEVICE_NAME, out->name, sizeof(out->name));
  cl_device_type type = 0;
  (void)clGetDeviceInfo(out->root, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
  cl_uint units = 0;
  (void)clGetDeviceInfo(out->root, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units, NULL);
  out->root_units = units;
  out->units = units;
  if (type & CL_DEVICE_TYPE_CPU) {
    uint32_t want = cpu_run_units(units);
    cl_device_id sub = NULL;
    if (want > 0 && make_sub_device(out->root, want, &sub)) {
      out->dev = sub;
      out->sub = true;
      out->units = want;
    }
  }
  return LW_OK;
}

static lw_status_t ocl_open(const lw_chip_config_t *cfg, void **out_device, lw_error_t *err) {
  *out_device = NULL;
  lw_opencl_chip_device_t cd;
  LW_RETURN_IF_ERROR(lw__opencl_chip_device(cfg->device_id, &cd, err));
  ocl_device_t *d = calloc(1, sizeof(*d));
  if (!d) {
    if (cd.sub) clReleaseDevice(cd.dev);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "opencl: out of memory");
  }
  d->device_id = cfg->device_id;
  d->root = cd.root;
  d->dev = cd.dev;
  d->sub = cd.sub;
  d->units = cd.units;
  snprintf(d->name, sizeof(d->name), "%s", cd.name);
  char il[128];
  info_string(d->dev, CL_DEVICE_IL_VERSION, il, sizeof(il));
  d->has_il = strstr(il, "SPIR-V") != NULL;
  const char *slice = getenv("LW_OPENCL_SLICE_NS");
  d->slice_ns = slice && *slice ? strtoll(slice, NULL, 10) : OCL_DEFAULT_SLICE_NS;
  if (d->slice_ns <= 0) d->slice_ns = OCL_DEFAULT_SLICE_NS;

  cl_int e = CL_SUCCESS;
  d->ctx = clCreateContext(NULL, 1, &d->dev, NULL, NULL, &e);
  if (e == CL_SUCCESS) {
    d->q = clCreateCommandQueue(d->ctx, d->dev, CL_QUEUE_PROFILING_ENABLE, &e);
  }
  if (e != CL_SUCCESS) {
    lw_status_t st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                                   "opencl: device %d (%s): cannot create a context and a "
                                   "queue: %s (%d)",
                                   cfg->device_id, d->name, cl_err_name(e), e);
    ocl_close(d);
    return st;
  }
  warm_up(d);
  *out_device = d;
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// Register: build a program, create the kernel

static void module_free(ocl_module_t *m) {
  if (!m) return;
  if (m->kern) clReleaseKernel(m->kern);
  if (m->prog) clReleaseProgram(m->prog);
  free(m);
}

// Puts the build log into err's message after prefix: from the first line that says "error"
// (the start of the log when none does), newlines folded, cut to what fits.
static lw_status_t build_failed(ocl_device_t *d, ocl_module_t *m, cl_int e, lw_error_t *err) {
  size_t bytes = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(m->prog, d->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &bytes) ==
          CL_SUCCESS &&
      bytes > 0) {
    log = malloc(bytes + 1);
    if (log && clGetProgramBuildInfo(m->prog, d->dev, CL_PROGRAM_BUILD_LOG, bytes, log, NULL) !=
                   CL_SUCCESS) {
      free(log);
      log = NULL;
    }
    if (log) log[bytes] = '\0';
  }
  const char *from = log ? log : "";
  const char *hit = log ? strstr(log, "error") : NULL;
  if (hit) {
    while (hit > log && hit[-1] != '\n') --hit;
    from = hit;
  }
  char folded[LW_ERROR_MESSAGE_BYTES];
  size_t o = 0;
  for (const char *p = from; *p && o + 1 < sizeof(folded); ++p) {
    char c = *p == '\n' || *p == '\t' ? ' ' : *p;
    if (c == ' ' && o > 0 && folded[o - 1] == ' ') continue;
    folded[o++] = c;
  }
  folded[o] = '\0';
  free(log);
  return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                       "opencl: build of callable %s failed (%s): %s", m->name, cl_err_name(e),
                       o ? folded : "(empty build log)");
}

static lw_status_t ocl_load(void *device, const lw_backend_image_t *img, void **out_module,
                            lw_error_t *err) {
  ocl_device_t *d = device;
  *out_module = NULL;
  ocl_module_t *m = calloc(1, sizeof(*m));
  if (!m) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "opencl: out of memory");
  snprintf(m->name, sizeof(m->name), "%s", img->name);
  snprintf(m->entry, sizeof(m->entry), "%s", img->entry);
  m->n_params = img->n_params;
  if (img->n_params) memcpy(m->param_dirs, img->param_dirs, img->n_params);

  cl_int e = CL_SUCCESS;
  if (img->format == LW_IMAGE_SPIRV) {
    if (!d->has_il) {
      module_free(m);
      return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                           "opencl: device %d (%s) does not accept SPIR-V (its "
                           "CL_DEVICE_IL_VERSION names none); give callable %s as OpenCL C",
                           d->device_id, d->name, img->name);
    }
    m->prog = clCreateProgramWithIL(d->ctx, img->data, img->bytes, &e);
  } else {
    // The text may end with its NUL or not; the compiler gets the length either way.
    size_t len = img->bytes;
    if (len > 0 && img->data[len - 1] == '\0') --len;
    const char *src = (const char *)img->data;
    m->prog = clCreateProgramWithSource(d->ctx, 1, &src, &len, &e);
  }
  if (e != CL_SUCCESS) {
    module_free(m);
    return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                         "opencl: cannot create the program of callable %s: %s (%d)", img->name,
                         cl_err_name(e), e);
  }
  e = clBuildProgram(m->prog, 1, &d->dev, img->build_options, NULL, NULL);
  if (e != CL_SUCCESS) {
    lw_status_t st = build_failed(d, m, e, err);
    module_free(m);
    return st;
  }
  m->kern = clCreateKernel(m->prog, img->entry, &e);
  if (e != CL_SUCCESS) {
    char names[96] = "";
    (void)clGetProgramInfo(m->prog, CL_PROGRAM_KERNEL_NAMES, sizeof(names) - 1, names, NULL);
    names[sizeof(names) - 1] = '\0';
    module_free(m);
    return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                         "opencl: callable %s has no kernel '%s' (%s; the program has: %s)",
                         img->name, img->entry, cl_err_name(e), names[0] ? names : "none");
  }
  cl_uint nargs = 0;
  e = clGetKernelInfo(m->kern, CL_KERNEL_NUM_ARGS, sizeof(nargs), &nargs, NULL);
  if (e != CL_SUCCESS || nargs != img->n_params) {
    lw_status_t st =
        e != CL_SUCCESS
            ? lw__error_set(err, LW_INTERNAL, d->device_id, 0,
                            "opencl: cannot read the argument count of kernel '%s' of callable "
                            "%s: %s (%d)",
                            img->entry, img->name, cl_err_name(e), e)
            : lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                            "opencl: kernel '%s' of callable %s takes %u argument%s but its "
                            "signature declares %u parameter%s",
                            img->entry, img->name, nargs, nargs == 1 ? "" : "s", img->n_params,
                            img->n_params == 1 ? "" : "s");
    module_free(m);
    return st;
  }
  size_t wg = 0;
  if (clGetKernelWorkGroupInfo(m->kern, d->dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL) !=
          CL_SUCCESS ||
      wg == 0) {
    wg = 1;
  }
  m->wg_cap = wg < OCL_WG_CAP ? wg : OCL_WG_CAP;
  *out_module = m;
  return LW_OK;
}

static void ocl_unload(void *device, void *module) {
  (void)device;
  module_free(module);
}

// ---------------------------------------------------------------------------------------------
// Run: map arguments, enqueue in slices, read back

typedef struct run_buffers {
  cl_mem mem[LW_MAX_TENSORS];
  uint8_t dir[LW_MAX_TENSORS];  // LW_PARAM_IN, OUT or INOUT (without LW_PARAM_LIVE)
  bool live[LW_MAX_TENSORS];    // the parameter is LW_PARAM_LIVE (see live_push)
  uint64_t bytes[LW_MAX_TENSORS];
  uint32_t n;
  uint32_t n_live;
} run_buffers_t;

static void buffers_release(run_buffers_t *b) {
  for (uint32_t i = 0; i < b->n; ++i) {
    if (b->mem[i]) clReleaseMemObject(b->mem[i]);
  }
  b->n = 0;
  b->n_live = 0;
}

// Live tensors (LW_PARAM_LIVE, lanework/callable.h) between slices: the only points where
// OpenCL promises that host memory and a device's copy of a buffer agree are commands (a map,
// an unmap, a copy), and a device with memory of its own (a discrete GPU) does not see a host
// store while a kernel runs, nor the host a kernel's. So the host's bytes of every live IN
// tensor go to the device before each slice: a map for CL_MAP_WRITE_INVALIDATE_REGION returns
// the buffer's host memory (CL_MEM_USE_HOST_PTR) without reading the device's copy into it,
// so the host's latest stores stay, and the unmap hands them to the device (on a device that
// uses host memory, PoCL's CPU device, both are no-ops). The queue is in order: the slice after
// it reads them.
static cl_int live_push(ocl_device_t *d, const run_buffers_t *b) {
  for (uint32_t i = 0; i < b->n; ++i) {
    if (!b->live[i] || !b->mem[i] || b->dir[i] != LW_PARAM_IN) continue;
    cl_int e = CL_SUCCESS;
    void *p = clEnqueueMapBuffer(d->q, b->mem[i], CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0,
                                 (size_t)b->bytes[i], 0, NULL, NULL, &e);
    if (e != CL_SUCCESS) return e;
    if ((e = clEnqueueUnmapMemObject(d->q, b->mem[i], p, 0, NULL, NULL)) != CL_SUCCESS) return e;
  }
  return CL_SUCCESS;
}

// After each slice, the kernel's bytes of every live OUT tensor come back to host memory: a
// blocking map for reading, as the outputs are after the last slice.
static cl_int live_pull(ocl_device_t *d, const run_buffers_t *b) {
  for (uint32_t i = 0; i < b->n; ++i) {
    if (!b->live[i] || !b->mem[i] || b->dir[i] != LW_PARAM_OUT) continue;
    cl_int e = CL_SUCCESS;
    void *p = clEnqueueMapBuffer(d->q, b->mem[i], CL_TRUE, CL_MAP_READ, 0, (size_t)b->bytes[i],
                                 0, NULL, NULL, &e);
    if (e != CL_SUCCESS) return e;
    if ((e = clEnqueueUnmapMemObject(d->q, b->mem[i], p, 0, NULL, NULL)) != CL_SUCCESS) return e;
  }
  return CL_SUCCESS;
}

static lw_status_t set_args(ocl_device_t *d, ocl_module_t *m, const lw_kernel_args_t *args,
                            run_buffers_t *b, lw_error_t *err) {
  uint32_t t = 0, s = 0;
  for (uint32_t i = 0; i < m->n_params; ++i) {
    // Registered signatures were validated: LW_PARAM_LIVE comes with IN or OUT only.
    bool live = (m->param_dirs[i] & LW_PARAM_LIVE) != 0;
    uint8_t dir = (uint8_t)(m->param_dirs[i] & ~LW_PARAM_LIVE);
    cl_int e;
    lw_scalar_type_t scalar_type = LW_SCALAR_U64;
    if (dir == LW_PARAM_SCALAR) {
      if (s >= args->n_scalars) {
        return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                             "opencl: callable %s: parameter %u is the scalar %u but the run "
                             "gave %u scalar%s",
                             m->name, i, s, args->n_scalars, args->n_scalars == 1 ? "" : "s");
      }
      // The slot holds 8 bytes; an f32 is its low 4 bytes and must be passed as a 4-byte
      // float, or a `float a` parameter would be refused (CL_INVALID_ARG_SIZE).
      uint64_t v = args->scalar[s];
      scalar_type = lw_scalar_type_get(&args->launch, s);
      s++;
      if (scalar_type == LW_SCALAR_F32) {
        uint32_t low = (uint32_t)v;
        cl_float f;
        memcpy(&f, &low, sizeof(f));
        e = clSetKernelArg(m->kern, i, sizeof(f), &f);
      } else {
        e = clSetKernelArg(m->kern, i, sizeof(v), &v);  // ulong, long and double: 8 bytes
      }
    } else {
      if (t >= args->n_tensors) {
        return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                             "opencl: callable %s: parameter %u is the tensor %u but the run "
                             "gave %u tensor%s",
                             m->name, i, t, args->n_tensors, args->n_tensors == 1 ? "" : "s");
      }
      void *data = args->tensor[t].data;
      uint64_t bytes = args->tensor[t].bytes;
      cl_mem mem = NULL;
      if (data && bytes > 0) {
        cl_mem_flags flags = CL_MEM_USE_HOST_PTR | (dir == LW_PARAM_IN    ? CL_MEM_READ_ONLY
                                                    : dir == LW_PARAM_OUT ? CL_MEM_WRITE_ONLY
                                                                          : CL_MEM_READ_WRITE);
        mem = clCreateBuffer(d->ctx, flags, (size_t)bytes, data, &e);
        if (e != CL_SUCCESS) {
          return lw__error_set(err, LW_RESOURCE_EXHAUSTED, d->device_id, 0,
                               "opencl: callable %s: cannot map tensor %u (%llu bytes at %p): "
                               "%s (%d)",
                               m->name, t, (unsigned long long)bytes, data, cl_err_name(e), e);
        }
      }
      b->mem[b->n] = mem;
      b->dir[b->n] = dir;
      b->live[b->n] = live;
      b->bytes[b->n] = bytes;
      b->n++;
      if (live && mem) b->n_live++;
      t++;
      e = clSetKernelArg(m->kern, i, sizeof(cl_mem), &mem);
    }
    if (e != CL_SUCCESS) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, d->device_id, 0,
                           "opencl: callable %s: argument %u (%s) refused: %s (%d)", m->name, i,
                           dir != LW_PARAM_SCALAR             ? "a __global buffer"
                           : scalar_type == LW_SCALAR_F32 ? "a 4-byte float scalar"
                           : scalar_type == LW_SCALAR_F64 ? "an 8-byte double scalar"
                           : scalar_type == LW_SCALAR_I64 ? "an 8-byte long scalar"
                                                          : "an 8-byte ulong scalar",
                           cl_err_name(e), e);
    }
  }
  return LW_OK;
}

// Waits for ev and returns its profiled device time in *out_ns (0 when unavailable).
static cl_int wait_event(cl_event ev, uint64_t *out_ns) {
  *out_ns = 0;
  cl_int e = clWaitForEvents(1, &ev);
  cl_int status = CL_COMPLETE;
  if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL) ==
          CL_SUCCESS &&
      status < 0) {
    e = status;
  }
  cl_ulong t0 = 0, t1 = 0;
  if (e == CL_SUCCESS &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, NULL) ==
          CL_SUCCESS &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, NULL) ==
          CL_SUCCESS &&
      t1 > t0) {
    *out_ns = (uint64_t)(t1 - t0);
  }
  return e;
}

static uint64_t round_down(uint64_t v, uint64_t unit) { return v - v % unit; }

// Whether a run's scalars are those m's learned slice size came from.
static bool same_scalars(const ocl_module_t *m, const lw_kernel_args_t *args) {
  return m->slice_n_scalars == args->n_scalars &&
         memcmp(m->slice_scalars, args->scalar, sizeof(uint64_t) * args->n_scalars) == 0;
}

// Records a finished slice in the trace. The device's profiling clock is not the host's, so the
// span ends when the host saw the slice complete (t_done, read as its wait returned) and lasts
// the slice's profiled device time, not starting before its enqueue returned; without a
// profile it spans from that return to t_done. The time between two slices of a run is then
// time the device spent on none of it: launch costs, live tensors' copies, or a driver holding
// the device for something else. A stall while a slice executes (a driver that preempts the
// running kernel) lies inside START..END and stays inside the slice's span.
static void trace_slice(const ocl_module_t *m, const lw_backend_run_t *run, uint64_t index,
                        uint64_t items, int64_t t_enqueued, int64_t t_done,
                        uint64_t device_ns) {
  int64_t t0 = device_ns > 0 && (int64_t)device_ns < t_done - t_enqueued
                   ? t_done - (int64_t)device_ns
                   : t_enqueued;
  lw__trace_slice(t0, t_done, run->trace_run, run->trace_task, run->chip, index, items,
                  m->name);
}

static lw_status_t ocl_launch(void *device, void *module, const lw_kernel_args_t *args,
                              const lw_backend_run_t *run, lw_backend_launch_result_t *out,
                              lw_error_t *err) {
  ocl_device_t *d = device;
  ocl_module_t *m = module;
  out->kernel_rc = 0;
  out->kernel_wall_ns = 0;
  run_buffers_t b = {.n = 0};
  lw_status_t st = set_args(d, m, args, &b, err);
  if (st != LW_OK) {
    buffers_release(&b);
    return st;
  }

  // Geometry: none given is one work-item.
  const lw_launch_t *l = &args->launch;
  cl_uint dims = l->dims ? l->dims : 1;
  size_t global[3] = {1, 1, 1}, local[3] = {0, 0, 0}, offset[3] = {0, 0, 0}, size[3];
  bool have_local = false;
  for (cl_uint i = 0; i < dims && l->dims; ++i) {
    global[i] = (size_t)l->global[i];
    local[i] = (size_t)l->local[i];
    have_local = have_local || local[i] != 0;
  }
  if (!have_local) {
    // The caller let the device choose, but slices of different sizes would each let it
    // choose differently, and a device compiler may generate code per work-group size (PoCL
    // does, at the first enqueue of each size). So lanework chooses one size for every slice:
    // in dimension 0 the largest power of two dividing global[0], at most the kernel's limit
    // and m->wg_cap; 1 in the other dimensions.
    for (cl_uint i = 0; i < dims; ++i) local[i] = 1;
    size_t cap = m->wg_cap;
    while (local[0] * 2 <= cap && global[0] % (local[0] * 2) == 0) local[0] *= 2;
    have_local = true;
  }
  // Slice along the last dimension: a slice is `rows` of it, each row `per_row` work-items.
  cl_uint sd = dims - 1;
  uint64_t per_row = 1;
  for (cl_uint i = 0; i < dims; ++i) {
    if (i != sd) per_row *= global[i];
    size[i] = global[i];
  }
  uint64_t unit = have_local ? local[sd] : 1;
  uint64_t total = global[sd];
  uint64_t learned = same_scalars(m, args) ? m->slice_items : 0;
  uint64_t rows = learned ? learned / per_row : OCL_FIRST_SLICE_ITEMS / per_row;
  rows = round_down(rows, unit);
  if (rows < unit) rows = unit;

  uint64_t kernel_ns = 0;
  bool stopped = false;
  cl_int e = CL_SUCCESS;
  for (uint64_t start = 0, index = 0; start < total; ++index) {
    // Checked before every slice, the first included: a cancel that landed while the buffers
    // were being made stops the run before any work-item ran.
    if (lw__cancel_is_requested(run->cancel_word, run->generation)) {
      stopped = true;
      break;
    }
    uint64_t n = total - start < rows ? total - start : rows;
    offset[sd] = (size_t)start;
    size[sd] = (size_t)n;
    cl_event ev = NULL;
    if (b.n_live > 0 && (e = live_push(d, &b)) != CL_SUCCESS) break;
    e = clEnqueueNDRangeKernel(d->q, m->kern, dims, offset, size, have_local ? local : NULL, 0,
                               NULL, &ev);
    if (e != CL_SUCCESS) break;
    // The slice's host times are read only for the trace: off, a slice costs one branch more.
    bool traced = lw__trace_on();
    int64_t t_enqueued = traced ? lw__now_ns() : 0;
    uint64_t slice_ns = 0;
    e = wait_event(ev, &slice_ns);
    int64_t t_done = traced ? lw__now_ns() : 0;
    clReleaseEvent(ev);
    if (e != CL_SUCCESS) break;
    if (b.n_live > 0 && (e = live_pull(d, &b)) != CL_SUCCESS) break;
    kernel_ns += slice_ns;
    if (traced) trace_slice(m, run, index, n * per_row, t_enqueued, t_done, slice_ns);
    start += n;
    // Aim the next slice at slice_ns of device time, growing at most OCL_SLICE_GROWTH times a
    // step so one misleading (cache-cold, tiny) slice cannot make the next one run for seconds.
    if (slice_ns > 0) {
      double want = (double)n * (double)d->slice_ns / (double)slice_ns;
      double cap = (double)n * OCL_SLICE_GROWTH;
      uint64_t next = (uint64_t)(want < cap ? want : cap);
      next = round_down(next, unit);
      rows = next < unit ? unit : next;
    } else {
      rows = rows * (uint64_t)OCL_SLICE_GROWTH;
    }
  }
  if (e == CL_SUCCESS) {
    m->slice_items = rows * per_row;
    m->slice_n_scalars = args->n_scalars;
    memcpy(m->slice_scalars, args->scalar, sizeof(uint64_t) * args->n_scalars);
  }
  // Outputs into host memory: a blocking map for reading makes the device's writes visible
  // (zero-copy on a CPU device, a copy back on a discrete GPU). The queue is empty otherwise
  // (every slice was waited for), so only maps need the final finish.
  bool mapped = false;
  for (uint32_t i = 0; i < b.n && e == CL_SUCCESS; ++i) {
    if (!b.mem[i] || b.dir[i] == LW_PARAM_IN) continue;
    void *p = clEnqueueMapBuffer(d->q, b.mem[i], CL_TRUE, CL_MAP_READ, 0, (size_t)b.bytes[i], 0,
                                 NULL, NULL, &e);
    if (e == CL_SUCCESS) e = clEnqueueUnmapMemObject(d->q, b.mem[i], p, 0, NULL, NULL);
    mapped = true;
  }
  if (mapped || e != CL_SUCCESS) {
    cl_int fe = clFinish(d->q);
    if (e == CL_SUCCESS) e = fe;
  }
  buffers_release(&b);
  if (e != CL_SUCCESS) {
    return lw__error_set(err, LW_TASK_FAILED, d->device_id, 0,
                         "opencl: kernel '%s' of callable %s failed on device %d: %s (%d)",
                         m->entry, m->name, d->device_id, cl_err_name(e), e);
  }
  out->kernel_rc = stopped ? LW_KERNEL_CANCELLED : 0;
  out->kernel_wall_ns = kernel_ns;
  return LW_OK;
}

const lw_backend_ops_t lw__backend_opencl = {
    .name = "opencl",
    .formats = LW_BACKEND_FORMAT_BIT(LW_IMAGE_OPENCL_C) | LW_BACKEND_FORMAT_BIT(LW_IMAGE_SPIRV),
    .open = ocl_open,
    .close = ocl_close,
    .load = ocl_load,
    .unload = ocl_unload,
    .launch = ocl_launch,
};
