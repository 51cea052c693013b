// child/backend_cuda.c — the `cuda` chip: an NVIDIA GPU through the CUDA driver API, loaded
// with dlopen at chip open (child/cuda_api.h: lanework's own declarations, so this file builds
// on every machine). DESIGN §7.2 and §7.3 give the measurements behind the rules below.
//
// Devices: lw_chip_config_t.device_id is the CUDA ordinal, unless LW_CUDA_DEVICES lists the
// chips' devices: a comma-separated list whose entry device_id names the device by ordinal
// ("0"), GPU UUID ("GPU-8c1a...") or MIG instance UUID ("MIG-..."), matched against
// cuDeviceGetUuid_v2 of every visible device (CUDA makes one MIG instance visible to a process:
// set CUDA_VISIBLE_DEVICES to it for the chip's process). Several chips on one GPU (the worker's
// n_devices) each get their own context, time-sliced by the driver.
//
// Context: each chip creates its own context (cuCtxCreate) rather than retaining the device's
// primary context. Two chips on one GPU in one process (L2) then never share a context: the
// module load that waits for "any running kernel of the context" waits only for this chip's
// kernels, and a sticky error (illegal address) ends this chip's context only, not the
// program's own CUDA work in the primary context. It costs a context's memory per chip. The
// context is made current on each thread that calls the driver here (the opening and closing
// thread, the run lane, or the caller's thread when an L2 run runs there), and the thread's
// previous context is put back after each call, so a program's own CUDA work on its thread is
// undisturbed. The register lane never touches the context.
//
// Register without a stall (DESIGN §7.3): load runs on the register lane and calls no driver
// function. CUDA C is compiled by NVRTC to a CUBIN for the device's own sm_XY (compute
// capability read at open), with the callable's build options; PTX is linked to a CUBIN by
// nvJitLink; CUBIN and fatbin are kept as they are. The register completes with the finished
// image, its load queued. The run lane loads it (cuModuleLoadData, cuModuleGetFunction) before
// the first launch that needs it, between kernels, where the wait that cuModuleLoadData has for
// the context's running kernel (measured 1.45 s behind a 1.5 s kernel on an H100) costs
// nothing. A failed load fails that run and every later run of the module with the driver's
// reason. Unloads are queued the same way and done by the run lane (or at close). The driver's
// own PTX JIT (cuModuleLoadData of PTX text) stalls every launch of the context while it
// compiles, so it is used only when the callable asks for it with the build option
// `--lw-driver-jit` (then PTX needs no nvJitLink); the option is lanework's and is not passed
// to any compiler. Compile and load are separate trace spans (LW_TRACE_COMPILE on the register
// lane, LW_TRACE_LOAD on the run lane inside the first run's span).
//
// Runs: one non-blocking stream per chip. Kernel parameters follow the callable's signature,
// as the opencl backend's arguments do: each IN/OUT/INOUT parameter is a device pointer to the
// next tensor, each SCALAR the next scalar slot (8 bytes read as the kernel's parameter type:
// unsigned long long, long long, double; a float parameter reads the slot's low 4 bytes, where
// lw_args_add_f32 puts it). A callable without a signature (n_params 0) gets every tensor in
// order, then every scalar. Tensors are copied per run (LW_CUDA_TENSORS=copy, the default:
// cuMemAlloc, IN/INOUT copied in before the launch and OUT/INOUT out after it) or mapped
// (LW_CUDA_TENSORS=mapped: the host memory is registered with cuMemHostRegister and the kernel
// reads and writes it over the bus). Live tensors (LW_PARAM_LIVE) are always mapped, so the
// host and the kernel see each other's stores while the run runs. Geometry: the args' launch
// global sizes in work-items and local sizes as the block; with no local size the block is
// min(global x, 256) x 1 x 1. The grid is global / block rounded up, so a kernel checks its
// index against its size (as CUDA kernels do). No geometry is one block of one thread.
//
// Completion and cancel: the run lane spins on cuStreamQuery with the one spin policy
// (lanes/spin.h), then naps LW_CUDA_NAP_NS between queries, checking the run's cancel word
// each time. The run's stop reaches a CUDA kernel through one word per chip, whose device
// address the backend stores into the module's `lw__cuda_stop` global (lanework/kernel_cuda.h,
// lw_cuda_should_stop()) after loading a module that has one; the word is 0 when a launch
// starts and 1 once the run's cancel is requested. Where the word lives is
// LW_CUDA_STOP's: `device` (the default) is device memory, set by a 4-byte copy on a stream
// of its own (a copy engine runs it beside the kernel) and reset by one on the chip's stream
// before the next launch after a stop, so polls read device memory; `host` is mapped pinned
// host memory the run lane stores to, which every poll reads across the bus. On an H100 the
// cancel of a kernel of ~8 waves of blocks took 8.4 ms at the median with the word in host
// memory and 0.72 ms with it in device memory (docs/cuda.md): host reads of ~1,000 resident
// blocks queue on the bus, and every later wave reads once more. A run
// whose stop was requested reports LW_KERNEL_CANCELLED, so the chip ends it CANCELLED or
// DEADLINE_EXCEEDED (DESIGN §4.2). Kernel time: see kernel_time_t.
//
// Sticky errors: a CUresult after which the context is unusable (lw__cuda_result_is_sticky)
// fails its run naming the error and marks the device lost: every later launch fails at once
// naming it, and ops.device_lost says so, which makes a chip child exit after reporting the
// task (child/chip_child.c) so that the worker respawns it with its callables replayed.
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <time.h>

#include "callables/image_check.h"
#include "child/backend.h"
#include "child/cuda_api.h"
#include "child/cuda_hostreg.h"
#include "child/kernel_cuda_header.h"
#include "lanes/error.h"
#include "lanes/spin.h"
#include "lanes/sys.h"
#include "lanes/trace.h"
#include "lanework/kernel.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "a float scalar is the low 4 bytes of its slot: little-endian hosts only");

#define CUDA_NAME_BYTES 128
// The block size lanework chooses when a run gives no local size.
#define CUDA_DEFAULT_BLOCK 256u
// How long the run lane naps between stream queries once its spin budget is spent: the worst
// a cancel or a completion waits to be seen after that.
#define CUDA_NAP_NS 20000
// The timer slack of a thread while it naps for a kernel: Linux's default (50 us) let a 20 us
// nanosleep last ~100 us on average on the 2-vCPU build VM (~50 us with 1 us of slack), and a
// nap is when the run lane neither sees a cancel nor the kernel's end.
#define CUDA_NAP_SLACK_NS 1000
// The largest host region mapped whole (host_region): registering pins every page of it, so
// a bigger arena (sparse until used) keeps per-run registration.
#define CUDA_REGION_MAX_BYTES (1ull << 30)
// copy: the device buffers kept between runs (see cuda_device_t.spare_ptr): at most this many,
// this many bytes together; a spare serves a tensor of at least half its size.
#define CUDA_SPARE_BUFFERS 16
#define CUDA_SPARE_BYTES (256ull << 20)
// lanework's build option asking for the driver's PTX JIT (see above).
#define CUDA_DRIVER_JIT_OPTION "--lw-driver-jit"
#define CUDA_MAX_OPTIONS 64

// A module the run lane is to unload, queued by unload (register lane).
typedef struct unload_item {
  lw_cu_module_t mod;
  struct unload_item *next;
} unload_item_t;

// How a run's kernel time is taken (LW_CUDA_KERNEL_TIME): two events around the launch and
// cuEventElapsedTime (device time; 2.8 us a run on an H100: launch + query 9.9 us, with the
// events 12.7 us), or the host's clock from before the launch to the query that saw the end
// (over the kernel by the launch's latency and the run lane's polling: it spins the spin
// budget, then naps CUDA_NAP_NS between queries). auto: events while a trace records or the
// run copies tensors in (the host's clock would count the copies), the host's clock otherwise.
typedef enum { KTIME_AUTO = 0, KTIME_EVENTS, KTIME_HOST } kernel_time_t;

// The host region's registration (cuda_device_t.region_base).
typedef enum {
  REGION_UNTRIED = 0,  // no tensor in it yet, or no region
  REGION_MAPPED,       // registered by this device, region_dev valid; unregistered at close
  REGION_FAILED,       // the registration failed: tensors in it are registered per run
} region_state_t;

typedef struct cuda_device {
  const lw_cuda_driver_t *api;
  int32_t device_id;
  lw_cu_device_t dev;
  lw_cu_context_t ctx;
  lw_cu_stream_t stream;
  lw_cu_event_t ev_start, ev_end;
  // The chip's stop word (LW_CUDA_STOP): stop_dev is the address kernels read. host: it maps
  // stop_host[0], the word itself, which the run lane stores to. device: it is device memory
  // (cuMemAlloc) and stop_host holds the copies' sources, {0, 1}; stop_stream carries the
  // copy that sets it.
  volatile uint32_t *stop_host;
  lw_cu_deviceptr_t stop_dev;
  bool stop_in_device;
  lw_cu_stream_t stop_stream;
  // device: a stop was sent since the last reset, so the word may be 1 (run lane only). A run
  // after runs that were not stopped queues no reset: one command less per launch.
  bool stop_sent;
  int cc_major, cc_minor;
  char arch[16];  // "sm_90"
  char name[CUDA_NAME_BYTES];
  bool tensors_mapped;  // LW_CUDA_TENSORS=mapped
  kernel_time_t kernel_time;  // LW_CUDA_KERNEL_TIME
  // The host region (host_region: an L3 chip child's arena): registered with the driver at the
  // first mapped or live tensor inside it and kept so until close, where per run each such
  // tensor was registered and unregistered (~90 us at 4 KiB on an H100, more with more pages,
  // and the handle waits for it). Set before any launch; the run lane and close only after.
  uint8_t *region_base;
  uint64_t region_bytes;
  lw_cu_deviceptr_t region_dev;
  region_state_t region_state;
  // copy: device buffers of finished runs, kept for the next runs' tensors (run lane only;
  // freed at close). cuMemAlloc and cuMemFree cost tens of microseconds a tensor, and a
  // cuMemFree waits for the device; a run of the same shapes as the last reuses them all.
  lw_cu_deviceptr_t spare_ptr[CUDA_SPARE_BUFFERS];
  uint64_t spare_bytes[CUDA_SPARE_BUFFERS];
  uint32_t n_spare;
  uint64_t spare_total;
  // A run dropped a host registration since the last flush (cuda_after_run; run lane only):
  // runs without mapped tensors outside the region skip the flush and its context switch.
  bool hostreg_dropped;
  // Unloads queued by the register lane; the run lane and close take them.
  pthread_mutex_t unload_mu;
  unload_item_t *unloads;
  // The sticky error that lost the device (0: none), and what it said. lost_text is written
  // before lost is stored (release; pairs with the acquire loads).
  _Atomic lw_cu_result_t lost;
  char lost_text[LW_ERROR_MESSAGE_BYTES];
} cuda_device_t;

typedef struct cuda_module {
  char name[CUDA_NAME_BYTES];
  char entry[CUDA_NAME_BYTES];
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
  lw_image_format_t format;
  // The image the run lane loads: a CUBIN (compiled, or given), a fatbin, or NUL-terminated
  // PTX for the driver's JIT. Freed once loaded.
  uint8_t *image;
  size_t image_bytes;
  bool driver_jit;
  // Run lane only (launch), and unload after the last run that pinned the module.
  bool loaded;
  lw_cu_module_t mod;
  lw_cu_function_t fn;
  bool has_stop;  // the module has lw__cuda_stop and it points at the chip's stop word
  // A failed load, sticky: every run of the module fails with it.
  lw_status_t load_status;
  char load_error[LW_ERROR_MESSAGE_BYTES];
} cuda_module_t;

// ---------------------------------------------------------------------------------------------
// Helpers

// "CUDA_ERROR_X (text)" for e.
#define CU_TEXT(e) lw__cuda_result_text((e), (char[160]){0}, 160)

// Makes d's context current on this thread; *out_prev gets what was current, to put back with
// ctx_restore.
static lw_cu_result_t ctx_enter(cuda_device_t *d, lw_cu_context_t *out_prev) {
  *out_prev = NULL;
  lw_cu_result_t r = d->api->cuCtxGetCurrent(out_prev);
  if (r != LW_CU_SUCCESS) return r;
  if (*out_prev == d->ctx) return LW_CU_SUCCESS;
  return d->api->cuCtxSetCurrent(d->ctx);
}

static void ctx_restore(cuda_device_t *d, lw_cu_context_t prev) {
  if (prev != d->ctx) (void)d->api->cuCtxSetCurrent(prev);
}

// Records that r lost the device (the first such error wins) and returns true when r is
// sticky. what says where it happened.
static bool note_sticky(cuda_device_t *d, lw_cu_result_t r, const char *what) {
  if (!lw__cuda_result_is_sticky(r)) return false;
  // Only the run lane (launch) records: the first error wins and its text stays.
  if (atomic_load_explicit(&d->lost, memory_order_acquire) != 0) return true;
  snprintf(d->lost_text, sizeof(d->lost_text), "%.150s during %.90s", CU_TEXT(r), what);
  atomic_store_explicit(&d->lost, r, memory_order_release);
  return true;
}

static void nap(int64_t ns) {
  struct timespec ts = {0, (long)ns};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Device UUID as NVIDIA prints it: 8-4-4-4-12 hex digits.
static void uuid_text(const lw_cu_uuid_t *u, char *out, size_t bytes) {
  const unsigned char *b = u->bytes;
  snprintf(out, bytes,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

// ---------------------------------------------------------------------------------------------
// Open / close

// The device chip device_id opens: an ordinal, or the entry device_id of LW_CUDA_DEVICES.
static lw_status_t pick_device(const lw_cuda_driver_t *api, int32_t device_id,
                               lw_cu_device_t *out, lw_error_t *err) {
  int count = 0;
  lw_cu_result_t r = api->cuDeviceGetCount(&count);
  if (r != LW_CU_SUCCESS || count <= 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "cuda: no CUDA device: %s",
                         r != LW_CU_SUCCESS ? CU_TEXT(r) : "the driver lists none");
  }
  const char *list = getenv("LW_CUDA_DEVICES");
  int ordinal = device_id;
  if (list && *list) {
    // Entry device_id of the list.
    const char *p = list;
    for (int32_t i = 0; i < device_id && p; ++i) {
      p = strchr(p, ',');
      if (p) ++p;
    }
    if (device_id < 0 || !p || !*p) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "cuda: device_id %d has no entry in LW_CUDA_DEVICES=%s", device_id,
                           list);
    }
    char want[64];
    size_t n = strcspn(p, ",");
    snprintf(want, sizeof(want), "%.*s", (int)(n < sizeof(want) ? n : sizeof(want) - 1), p);
    char *end = NULL;
    long v = strtol(want, &end, 10);
    if (end != want && *end == '\0') {
      ordinal = (int)v;
    } else {
      // "GPU-<uuid>" or "MIG-<uuid>": compare the UUID part.
      const char *dash = strchr(want, '-');
      const char *hex = dash && dash - want == 3 ? dash + 1 : want;
      ordinal = -1;
      for (int i = 0; i < count && ordinal < 0; ++i) {
        lw_cu_device_t dev = 0;
        lw_cu_uuid_t u;
        char text[40];
        if (api->cuDeviceGet(&dev, i) != LW_CU_SUCCESS ||
            api->cuDeviceGetUuid(&u, dev) != LW_CU_SUCCESS) {
          continue;
        }
        uuid_text(&u, text, sizeof(text));
        if (strcasecmp(text, hex) == 0) ordinal = i;
      }
      if (ordinal < 0) {
        return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                             "cuda: no visible device has UUID %s (LW_CUDA_DEVICES entry %d; "
                             "`lanework info` lists the devices)",
                             want, device_id);
      }
    }
  }
  if (ordinal < 0 || ordinal >= count) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: device_id %d is out of range: %d CUDA device%s (0..%d; "
                         "`lanework info` lists them)",
                         ordinal, count, count == 1 ? "" : "s", count - 1);
  }
  r = api->cuDeviceGet(out, ordinal);
  if (r != LW_CU_SUCCESS) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "cuda: cuDeviceGet(%d) failed: %s",
                         ordinal, CU_TEXT(r));
  }
  return LW_OK;
}

static void spares_free(cuda_device_t *d);

static void cuda_close(void *device) {
  cuda_device_t *d = device;
  if (!d) return;
  if (d->ctx) {
    lw_cu_context_t prev = NULL;
    (void)ctx_enter(d, &prev);
    // A lost device answers with its sticky error; the objects are released all the same.
    if (d->stream) (void)d->api->cuStreamSynchronize(d->stream);
    for (unload_item_t *u = d->unloads, *next; u; u = next) {
      next = u->next;
      (void)d->api->cuModuleUnload(u->mod);
      free(u);
    }
    d->unloads = NULL;
    if (d->stop_stream) {
      (void)d->api->cuStreamSynchronize(d->stop_stream);
      (void)d->api->cuStreamDestroy(d->stop_stream);
    }
    if (d->stop_in_device && d->stop_dev) (void)d->api->cuMemFree(d->stop_dev);
    spares_free(d);
    lw__cuda_hostreg_forget(d->api, d);
    if (d->region_state == REGION_MAPPED) (void)d->api->cuMemHostUnregister(d->region_base);
    if (d->stop_host) (void)d->api->cuMemFreeHost((void *)d->stop_host);
    if (d->ev_start) (void)d->api->cuEventDestroy(d->ev_start);
    if (d->ev_end) (void)d->api->cuEventDestroy(d->ev_end);
    if (d->stream) (void)d->api->cuStreamDestroy(d->stream);
    (void)d->api->cuCtxDestroy(d->ctx);  // pops it from this thread if current
    if (prev != d->ctx) (void)d->api->cuCtxSetCurrent(prev);
  }
  pthread_mutex_destroy(&d->unload_mu);
  free(d);
}

static lw_status_t cuda_open(const lw_chip_config_t *cfg, void **out_device, lw_error_t *err) {
  *out_device = NULL;
  const lw_cuda_driver_t *api = NULL;
  LW_RETURN_IF_ERROR(lw__cuda_driver(&api, NULL, err));
  lw_cu_result_t r = api->cuInit(0);
  if (r != LW_CU_SUCCESS) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "cuda: cuInit failed: %s", CU_TEXT(r));
  }
  const char *mode = getenv("LW_CUDA_TENSORS");
  if (mode && *mode && strcmp(mode, "copy") != 0 && strcmp(mode, "mapped") != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: LW_CUDA_TENSORS=%s: expected copy or mapped", mode);
  }
  const char *stop = getenv("LW_CUDA_STOP");
  if (stop && *stop && strcmp(stop, "host") != 0 && strcmp(stop, "device") != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: LW_CUDA_STOP=%s: expected host or device", stop);
  }
  const char *ktime = getenv("LW_CUDA_KERNEL_TIME");
  if (ktime && *ktime && strcmp(ktime, "auto") != 0 && strcmp(ktime, "events") != 0 &&
      strcmp(ktime, "host") != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: LW_CUDA_KERNEL_TIME=%s: expected auto, events or host", ktime);
  }
  lw_cu_device_t dev = 0;
  LW_RETURN_IF_ERROR(pick_device(api, cfg->device_id, &dev, err));

  cuda_device_t *d = calloc(1, sizeof(*d));
  if (!d) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "cuda: out of memory");
  pthread_mutex_init(&d->unload_mu, NULL);
  d->api = api;
  d->device_id = cfg->device_id;
  d->dev = dev;
  d->tensors_mapped = mode && strcmp(mode, "mapped") == 0;
  d->stop_in_device = !(stop && strcmp(stop, "host") == 0);
  d->kernel_time = !ktime || !*ktime || strcmp(ktime, "auto") == 0 ? KTIME_AUTO
                   : strcmp(ktime, "events") == 0                  ? KTIME_EVENTS
                                                                   : KTIME_HOST;
  if (api->cuDeviceGetName(d->name, sizeof(d->name), dev) != LW_CU_SUCCESS) d->name[0] = '\0';
  d->name[sizeof(d->name) - 1] = '\0';
  int can_map = 0;
  if ((r = api->cuDeviceGetAttribute(&d->cc_major,
                                     LW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) !=
          LW_CU_SUCCESS ||
      (r = api->cuDeviceGetAttribute(&d->cc_minor,
                                     LW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) !=
          LW_CU_SUCCESS ||
      (r = api->cuDeviceGetAttribute(&can_map, LW_CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
                                     dev)) != LW_CU_SUCCESS) {
    lw_status_t st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                                   "cuda: device %d (%s): cannot read its attributes: %s",
                                   cfg->device_id, d->name, CU_TEXT(r));
    cuda_close(d);
    return st;
  }
  snprintf(d->arch, sizeof(d->arch), "sm_%d%d", d->cc_major, d->cc_minor);
  if (!can_map) {
    lw_status_t st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                                   "cuda: device %d (%s) cannot map host memory, which the "
                                   "cancel word needs",
                                   cfg->device_id, d->name);
    cuda_close(d);
    return st;
  }

  const char *step = "cuCtxCreate";
  r = api->cuCtxCreate_v4 ? api->cuCtxCreate_v4(&d->ctx, NULL, LW_CU_CTX_MAP_HOST, dev)
                          : api->cuCtxCreate_v2(&d->ctx, LW_CU_CTX_MAP_HOST, dev);
  // cuCtxCreate made the context current on this thread; it is popped below.
  void *word = NULL;
  if (r == LW_CU_SUCCESS) {
    step = "cuStreamCreate";
    r = api->cuStreamCreate(&d->stream, LW_CU_STREAM_NON_BLOCKING);
  }
  if (r == LW_CU_SUCCESS) {
    step = "cuEventCreate";
    r = api->cuEventCreate(&d->ev_start, LW_CU_EVENT_DEFAULT);
    if (r == LW_CU_SUCCESS) r = api->cuEventCreate(&d->ev_end, LW_CU_EVENT_DEFAULT);
  }
  if (r == LW_CU_SUCCESS) {
    step = "cuMemHostAlloc of the stop word";
    r = api->cuMemHostAlloc(&word, 2 * sizeof(uint32_t),
                            LW_CU_MEMHOSTALLOC_DEVICEMAP | LW_CU_MEMHOSTALLOC_PORTABLE);
    if (r == LW_CU_SUCCESS) {
      d->stop_host = word;
      d->stop_host[0] = 0;
      d->stop_host[1] = 1;
      if (!d->stop_in_device) {
        step = "cuMemHostGetDevicePointer of the stop word";
        r = api->cuMemHostGetDevicePointer(&d->stop_dev, word, 0);
      }
    }
  }
  if (r == LW_CU_SUCCESS && d->stop_in_device) {
    step = "cuMemAlloc of the stop word";
    r = api->cuMemAlloc(&d->stop_dev, sizeof(uint32_t));
    if (r == LW_CU_SUCCESS) {
      step = "cuMemcpyHtoD of the stop word";
      r = api->cuMemcpyHtoD(d->stop_dev, (const void *)&d->stop_host[0], sizeof(uint32_t));
    }
    if (r == LW_CU_SUCCESS) {
      step = "cuStreamCreate of the stop stream";
      r = api->cuStreamCreate(&d->stop_stream, LW_CU_STREAM_NON_BLOCKING);
    }
  }
  if (d->ctx) (void)api->cuCtxSetCurrent(NULL);  // pops the new context off this thread
  if (r != LW_CU_SUCCESS) {
    lw_status_t st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                                   "cuda: device %d (%s, %s): %s failed: %s", cfg->device_id,
                                   d->name, d->arch, step, CU_TEXT(r));
    cuda_close(d);
    return st;
  }
  *out_device = d;
  return LW_OK;
}

lw_status_t lw__cuda_list(lw_cuda_info_t *info, lw_cuda_device_info_t *out, uint32_t cap,
                          uint32_t *out_n, lw_error_t *err) {
  *out_n = 0;
  memset(info, 0, sizeof(*info));
  const lw_cuda_nvrtc_t *rtc = NULL;
  lw_error_t why;
  if (lw__cuda_nvrtc(&rtc, NULL, &why) == LW_OK) {
    int major = 0, minor = 0;
    if (rtc->nvrtcVersion(&major, &minor) == LW_NVRTC_SUCCESS) {
      info->nvrtc_major = major;
      info->nvrtc_minor = minor;
    }
  } else {
    snprintf(info->nvrtc_missing, sizeof(info->nvrtc_missing), "%s", why.message);
  }
  const lw_cuda_driver_t *api = NULL;
  const char *path = NULL;
  LW_RETURN_IF_ERROR(lw__cuda_driver(&api, &path, err));
  snprintf(info->driver_path, sizeof(info->driver_path), "%s", path ? path : "");
  int version = 0;
  if (api->cuDriverGetVersion(&version) == LW_CU_SUCCESS) info->driver_version = version;
  lw_cu_result_t r = api->cuInit(0);
  if (r != LW_CU_SUCCESS) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "cuda: cuInit failed: %s", CU_TEXT(r));
  }
  int count = 0;
  r = api->cuDeviceGetCount(&count);
  if (r != LW_CU_SUCCESS || count <= 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "cuda: no CUDA device: %s",
                         r != LW_CU_SUCCESS ? CU_TEXT(r) : "the driver lists none");
  }
  for (int i = 0; i < count && (uint32_t)i < cap; ++i) {
    lw_cuda_device_info_t *o = &out[i];
    memset(o, 0, sizeof(*o));
    o->index = i;
    lw_cu_device_t dev = 0;
    if (api->cuDeviceGet(&dev, i) != LW_CU_SUCCESS) continue;
    if (api->cuDeviceGetName(o->name, sizeof(o->name), dev) != LW_CU_SUCCESS) o->name[0] = '\0';
    o->name[sizeof(o->name) - 1] = '\0';
    int v = 0;
    if (api->cuDeviceGetAttribute(&v, LW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ==
        LW_CU_SUCCESS) {
      o->cc_major = v;
    }
    if (api->cuDeviceGetAttribute(&v, LW_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) ==
        LW_CU_SUCCESS) {
      o->cc_minor = v;
    }
    if (api->cuDeviceGetAttribute(&v, LW_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) ==
        LW_CU_SUCCESS) {
      o->multiprocessors = (uint32_t)v;
    }
    size_t bytes = 0;
    if (api->cuDeviceTotalMem(&bytes, dev) == LW_CU_SUCCESS) o->memory_bytes = bytes;
    lw_cu_uuid_t u;
    char text[40];
    if (api->cuDeviceGetUuid(&u, dev) == LW_CU_SUCCESS) {
      uuid_text(&u, text, sizeof(text));
      snprintf(o->uuid, sizeof(o->uuid), "GPU-%s", text);
    }
  }
  *out_n = (uint32_t)count;
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// Register (register lane): compile, touching no context

static void module_free(cuda_module_t *m) {
  if (!m) return;
  free(m->image);
  free(m);
}

// Folds text (a compiler log) into out: from the first line that says "error" (the start when
// none does), newlines and tabs as single spaces.
static void fold_log(const char *log, char *out, size_t bytes) {
  const char *from = log;
  const char *hit = strstr(log, "error");
  if (hit) {
    while (hit > log && hit[-1] != '\n') --hit;
    from = hit;
  }
  size_t o = 0;
  for (const char *p = from; *p && o + 1 < bytes; ++p) {
    char c = *p == '\n' || *p == '\t' || *p == '\r' ? ' ' : *p;
    if (c == ' ' && (o == 0 || out[o - 1] == ' ')) continue;
    out[o++] = c;
  }
  while (o > 0 && out[o - 1] == ' ') --o;
  out[o] = '\0';
}

// Splits options into argv-style words in buf (whitespace separates; '...' and "..." quote),
// leaving lanework's own --lw-driver-jit out (*driver_jit says whether it was there). Returns
// the count, or -1 when there are more than cap words.
static int split_options(const char *options, char *buf, size_t buf_bytes, const char **argv,
                         int cap, bool *driver_jit) {
  *driver_jit = false;
  int n = 0;
  size_t o = 0;
  const char *p = options;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
    if (!*p) break;
    if (o >= buf_bytes) return -1;
    char *word = buf + o;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
      if (*p == '\'' || *p == '"') {
        char q = *p++;
        while (*p && *p != q && o + 1 < buf_bytes) buf[o++] = *p++;
        if (*p == q) ++p;
      } else if (o + 1 < buf_bytes) {
        buf[o++] = *p++;
      } else {
        return -1;
      }
    }
    buf[o++] = '\0';
    if (strcmp(word, CUDA_DRIVER_JIT_OPTION) == 0) {
      *driver_jit = true;
      continue;
    }
    if (n >= cap) return -1;
    argv[n++] = word;
  }
  return n;
}

static lw_status_t compile_cuda_c(cuda_device_t *d, cuda_module_t *m,
                                  const lw_backend_image_t *img, const char **opts, int n_opts,
                                  lw_error_t *err) {
  const lw_cuda_nvrtc_t *rtc = NULL;
  lw_error_t why;
  if (lw__cuda_nvrtc(&rtc, NULL, &why) != LW_OK) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "cuda: callable %s is CUDA C, which needs NVRTC: %s", img->name,
                         why.message);
  }
  // The source may end with its NUL or not; NVRTC wants a C string.
  char *src = malloc(img->bytes + 1);
  if (!src) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "cuda: out of memory");
  memcpy(src, img->data, img->bytes);
  src[img->bytes] = '\0';
  char prog_name[CUDA_NAME_BYTES + 8];
  snprintf(prog_name, sizeof(prog_name), "%s.cu", img->name);
  lw_nvrtc_program_t prog = NULL;
  // lanework/kernel_cuda.h in memory: a kernel's #include of it needs no include folder.
  const char *headers[] = {(const char *)lw__kernel_cuda_header};
  const char *header_names[] = {LW_KERNEL_CUDA_HEADER_NAME};
  lw_nvrtc_result_t r = rtc->nvrtcCreateProgram(&prog, src, prog_name, 1, headers, header_names);
  free(src);
  if (r != LW_NVRTC_SUCCESS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: NVRTC cannot take the source of callable %s: %s", img->name,
                         rtc->nvrtcGetErrorString(r));
  }
  char arch_opt[48];
  snprintf(arch_opt, sizeof(arch_opt), "--gpu-architecture=%s", d->arch);
  const char *all[CUDA_MAX_OPTIONS + 1];
  all[0] = arch_opt;
  for (int i = 0; i < n_opts; ++i) all[i + 1] = opts[i];
  r = rtc->nvrtcCompileProgram(prog, n_opts + 1, all);
  lw_status_t st = LW_OK;
  if (r != LW_NVRTC_SUCCESS) {
    size_t log_bytes = 0;
    char *log = NULL;
    if (rtc->nvrtcGetProgramLogSize(prog, &log_bytes) == LW_NVRTC_SUCCESS && log_bytes > 0 &&
        (log = calloc(1, log_bytes + 1)) != NULL &&
        rtc->nvrtcGetProgramLog(prog, log) != LW_NVRTC_SUCCESS) {
      log[0] = '\0';
    }
    char folded[LW_ERROR_MESSAGE_BYTES];
    fold_log(log ? log : "", folded, sizeof(folded));
    free(log);
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       "cuda: NVRTC could not compile callable %s for %s (%s): %s", img->name,
                       d->arch, rtc->nvrtcGetErrorString(r),
                       folded[0] ? folded : "(empty log)");
  } else {
    size_t bytes = 0;
    r = rtc->nvrtcGetCUBINSize(prog, &bytes);
    if (r == LW_NVRTC_SUCCESS && bytes > 0 && (m->image = malloc(bytes)) != NULL) {
      r = rtc->nvrtcGetCUBIN(prog, (char *)m->image);
      m->image_bytes = bytes;
    }
    if (r != LW_NVRTC_SUCCESS || !m->image) {
      st = lw__error_set(err, LW_INTERNAL, -1, 0,
                         "cuda: NVRTC compiled callable %s but gave no CUBIN: %s", img->name,
                         r != LW_NVRTC_SUCCESS ? rtc->nvrtcGetErrorString(r) : "out of memory");
    }
  }
  (void)rtc->nvrtcDestroyProgram(&prog);
  return st;
}

static lw_status_t link_ptx(cuda_device_t *d, cuda_module_t *m, const lw_backend_image_t *img,
                            const char **opts, int n_opts, lw_error_t *err) {
  const lw_cuda_nvjitlink_t *jl = NULL;
  lw_error_t why;
  if (lw__cuda_nvjitlink(&jl, &why) != LW_OK) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "cuda: callable %s is PTX, which needs nvJitLink (or the build option "
                         CUDA_DRIVER_JIT_OPTION "): %s",
                         img->name, why.message);
  }
  char arch_opt[48];
  snprintf(arch_opt, sizeof(arch_opt), "-arch=%s", d->arch);
  const char *all[CUDA_MAX_OPTIONS + 1];
  all[0] = arch_opt;
  for (int i = 0; i < n_opts; ++i) all[i + 1] = opts[i];
  lw_nvjitlink_handle_t h = NULL;
  lw_nvjitlink_result_t r = jl->nvJitLinkCreate(&h, (uint32_t)n_opts + 1, all);
  if (r == LW_NVJITLINK_SUCCESS) {
    r = jl->nvJitLinkAddData(h, LW_NVJITLINK_INPUT_PTX, img->data, img->bytes, img->name);
  }
  if (r == LW_NVJITLINK_SUCCESS) r = jl->nvJitLinkComplete(h);
  lw_status_t st = LW_OK;
  if (r != LW_NVJITLINK_SUCCESS) {
    size_t log_bytes = 0;
    char *log = NULL;
    if (h && jl->nvJitLinkGetErrorLogSize(h, &log_bytes) == LW_NVJITLINK_SUCCESS &&
        log_bytes > 0 && (log = calloc(1, log_bytes + 1)) != NULL &&
        jl->nvJitLinkGetErrorLog(h, log) != LW_NVJITLINK_SUCCESS) {
      log[0] = '\0';
    }
    char folded[LW_ERROR_MESSAGE_BYTES];
    fold_log(log ? log : "", folded, sizeof(folded));
    free(log);
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       "cuda: nvJitLink could not compile the PTX of callable %s for %s "
                       "(nvJitLinkResult %d): %s",
                       img->name, d->arch, r, folded[0] ? folded : "(empty log)");
  } else {
    size_t bytes = 0;
    r = jl->nvJitLinkGetLinkedCubinSize(h, &bytes);
    if (r == LW_NVJITLINK_SUCCESS && bytes > 0 && (m->image = malloc(bytes)) != NULL) {
      r = jl->nvJitLinkGetLinkedCubin(h, m->image);
      m->image_bytes = bytes;
    }
    if (r != LW_NVJITLINK_SUCCESS || !m->image) {
      st = lw__error_set(err, LW_INTERNAL, -1, 0,
                         "cuda: nvJitLink linked callable %s but gave no CUBIN (%d)", img->name,
                         r);
    }
  }
  if (h) (void)jl->nvJitLinkDestroy(&h);
  return st;
}

static lw_status_t cuda_load(void *device, const lw_backend_image_t *img, void **out_module,
                             lw_error_t *err) {
  cuda_device_t *d = device;
  *out_module = NULL;
  cuda_module_t *m = calloc(1, sizeof(*m));
  if (!m) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "cuda: out of memory");
  snprintf(m->name, sizeof(m->name), "%s", img->name);
  snprintf(m->entry, sizeof(m->entry), "%s", img->entry);
  m->n_params = img->n_params;
  if (img->n_params) memcpy(m->param_dirs, img->param_dirs, img->n_params);
  m->format = img->format;

  char opt_buf[LW_MAX_BUILD_OPTIONS_BYTES * 2];
  const char *opts[CUDA_MAX_OPTIONS];
  int n_opts = split_options(img->build_options, opt_buf, sizeof(opt_buf), opts,
                             CUDA_MAX_OPTIONS, &m->driver_jit);
  if (n_opts < 0) {
    module_free(m);
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: callable %s: more than %d build options", img->name,
                         CUDA_MAX_OPTIONS);
  }
  lw_status_t st = LW_OK;
  bool compiles = img->format == LW_IMAGE_CUDA_C || (img->format == LW_IMAGE_PTX && !m->driver_jit);
  int64_t t0 = compiles && lw__trace_on() ? lw__now_ns() : 0;
  switch (img->format) {
    case LW_IMAGE_CUDA_C:
      st = compile_cuda_c(d, m, img, opts, n_opts, err);
      break;
    case LW_IMAGE_PTX:
      if (!m->driver_jit) {
        st = link_ptx(d, m, img, opts, n_opts, err);
        break;
      }
      // The driver JITs the text at load: it must end with a NUL.
      m->image = malloc(img->bytes + 1);
      if (m->image) {
        memcpy(m->image, img->data, img->bytes);
        m->image[img->bytes] = '\0';
        m->image_bytes = img->bytes + 1;
      }
      break;
    case LW_IMAGE_CUBIN:
    case LW_IMAGE_FATBIN:
      m->image = malloc(img->bytes);
      if (m->image) {
        memcpy(m->image, img->data, img->bytes);
        m->image_bytes = img->bytes;
      }
      break;
    default:
      st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "cuda: callable %s: image format %s is not a CUDA format", img->name,
                         lw_image_format_name(img->format));
      break;
  }
  if (st == LW_OK && !m->image) {
    st = lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "cuda: out of memory");
  }
  // A missing kernel fails the register, not the first run: a CUBIN names each of its
  // functions' code (a fat binary or PTX for the driver's JIT is looked into at load).
  char kernels[160];
  if (st == LW_OK && lw__image_cubin_has_kernel(m->image, m->image_bytes, m->entry, kernels,
                                                sizeof(kernels)) == 0) {
    st = lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       "cuda: callable %s has no kernel '%s' (extern \"C\" __global__); its "
                       "%s holds: %s",
                       img->name, m->entry,
                       img->format == LW_IMAGE_CUBIN ? "CUBIN" : "compiled CUBIN", kernels);
  }
  if (t0) {
    lw__trace_span(LW_TRACE_COMPILE, t0, lw__now_ns(), 0, 0, d->device_id, st, img->name);
  }
  if (st != LW_OK) {
    module_free(m);
    return st;
  }
  *out_module = m;
  return LW_OK;
}

static void cuda_unload(void *device, void *module) {
  cuda_device_t *d = device;
  cuda_module_t *m = module;
  if (!m) return;
  if (m->loaded && m->mod) {
    // The module's last run has finished; the run lane unloads it between kernels.
    unload_item_t *u = malloc(sizeof(*u));
    if (u) {
      u->mod = m->mod;
      pthread_mutex_lock(&d->unload_mu);
      u->next = d->unloads;
      d->unloads = u;
      pthread_mutex_unlock(&d->unload_mu);
    }
    // Out of memory: the module stays loaded until the context is destroyed at close.
  }
  module_free(m);
}

// ---------------------------------------------------------------------------------------------
// Run (run lane)

// Unloads what the register lane queued. The context is current.
static void drain_unloads(cuda_device_t *d) {
  pthread_mutex_lock(&d->unload_mu);  // uncontended but for an unload being queued
  unload_item_t *list = d->unloads;
  d->unloads = NULL;
  pthread_mutex_unlock(&d->unload_mu);
  for (unload_item_t *u = list, *next; u; u = next) {
    next = u->next;
    (void)d->api->cuModuleUnload(u->mod);
    free(u);
  }
}

// A load failure, kept in the module so every later run fails with it.
static lw_status_t load_failed(cuda_device_t *d, cuda_module_t *m, lw_status_t code,
                               lw_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static lw_status_t load_failed(cuda_device_t *d, cuda_module_t *m, lw_status_t code,
                               lw_error_t *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->load_error, sizeof(m->load_error), fmt, ap);
  va_end(ap);
  m->load_status = code;
  if (m->mod) (void)d->api->cuModuleUnload(m->mod);
  m->mod = NULL;
  m->fn = NULL;
  free(m->image);
  m->image = NULL;
  return lw__error_set(err, code, -1, 0, "%s", m->load_error);
}

// Loads m into the context (current), before its first launch.
static lw_status_t module_load(cuda_device_t *d, cuda_module_t *m, const lw_backend_run_t *run,
                               lw_error_t *err) {
  const lw_cuda_driver_t *api = d->api;
  int64_t t0 = lw__trace_on() ? lw__now_ns() : 0;
  lw_status_t st = LW_OK;
  lw_cu_result_t r = api->cuModuleLoadData(&m->mod, m->image);
  if (r != LW_CU_SUCCESS) {
    m->mod = NULL;
    bool sticky = note_sticky(d, r, "a module load");
    st = load_failed(d, m, sticky ? LW_TASK_FAILED : LW_INVALID_ARGUMENT, err,
                     "cuda: cannot load callable %s (%s%s, %zu bytes) on device %d: %s",
                     m->name, lw_image_format_name(m->format),
                     m->driver_jit ? " by the driver's JIT" : "", m->image_bytes, d->device_id,
                     CU_TEXT(r));
    goto done;
  }
  r = api->cuModuleGetFunction(&m->fn, m->mod, m->entry);
  if (r != LW_CU_SUCCESS) {
    st = load_failed(d, m, LW_INVALID_ARGUMENT, err,
                     "cuda: callable %s has no kernel '%s' (extern \"C\" __global__): %s",
                     m->name, m->entry, CU_TEXT(r));
    goto done;
  }
  // The kernel's own parameter count against the signature, where the driver reports it.
  if (api->cuFuncGetParamInfo && m->n_params > 0) {
    size_t count = 0, offset = 0, bytes = 0;
    while (count <= LW_MAX_PARAMS &&
           api->cuFuncGetParamInfo(m->fn, count, &offset, &bytes) == LW_CU_SUCCESS) {
      ++count;
    }
    if (count != m->n_params) {
      st = load_failed(d, m, LW_INVALID_ARGUMENT, err,
                       "cuda: kernel '%s' of callable %s takes %zu parameter%s but its "
                       "signature declares %u",
                       m->entry, m->name, count, count == 1 ? "" : "s", m->n_params);
      goto done;
    }
  }
  // The stop word, when the kernel was built with lanework/kernel_cuda.h.
  lw_cu_deviceptr_t global = 0;
  size_t global_bytes = 0;
  r = api->cuModuleGetGlobal(&global, &global_bytes, m->mod, "lw__cuda_stop");
  if (r == LW_CU_SUCCESS) {
    if (global_bytes != sizeof(lw_cu_deviceptr_t)) {
      st = load_failed(d, m, LW_INVALID_ARGUMENT, err,
                       "cuda: callable %s: lw__cuda_stop is %zu bytes, not a pointer "
                       "(declare it through lanework/kernel_cuda.h)",
                       m->name, global_bytes);
      goto done;
    }
    // On the chip's stream, so it is ordered before the first launch.
    r = api->cuMemcpyHtoDAsync(global, &d->stop_dev, sizeof(d->stop_dev), d->stream);
    if (r != LW_CU_SUCCESS) {
      bool sticky = note_sticky(d, r, "setting lw__cuda_stop");
      st = load_failed(d, m, sticky ? LW_TASK_FAILED : LW_INTERNAL, err,
                       "cuda: callable %s: cannot set lw__cuda_stop: %s", m->name, CU_TEXT(r));
      goto done;
    }
    m->has_stop = true;
  } else if (note_sticky(d, r, "a module load")) {
    st = load_failed(d, m, LW_TASK_FAILED, err, "cuda: callable %s: %s", m->name, CU_TEXT(r));
    goto done;
  }
  m->loaded = true;
  free(m->image);  // the driver holds the module now
  m->image = NULL;
done:
  if (t0) {
    lw__trace_span(LW_TRACE_LOAD, t0, lw__now_ns(), run->trace_run, run->trace_task, run->chip,
                   st, m->name);
  }
  return st;
}

// One run's tensors on the device.
typedef struct run_tensors {
  lw_cu_deviceptr_t ptr[LW_MAX_TENSORS];
  void *host[LW_MAX_TENSORS];
  uint64_t bytes[LW_MAX_TENSORS];
  uint8_t dir[LW_MAX_TENSORS];
  bool allocated[LW_MAX_TENSORS];   // copy: ptr is a device buffer (buffer_take)
  uint64_t buffer_bytes[LW_MAX_TENSORS];  // and its size, at least bytes
  bool copied_in;                         // a copy in was queued before the launch
  // mapped: the registration this run holds a reference on (cuda_hostreg.h), or 0
  uint64_t reg_ref[LW_MAX_TENSORS];
  uint32_t n;
} run_tensors_t;

// Frees every spare buffer (close, or a cuMemAlloc that found the device full).
static void spares_free(cuda_device_t *d) {
  for (uint32_t i = 0; i < d->n_spare; ++i) (void)d->api->cuMemFree(d->spare_ptr[i]);
  d->n_spare = 0;
  d->spare_total = 0;
}

// A device buffer of at least bytes: the smallest spare that fits and is at most twice as big,
// or a new one (after freeing the spares if the device is full). *out_bytes: its size.
static lw_cu_result_t buffer_take(cuda_device_t *d, uint64_t bytes, lw_cu_deviceptr_t *out,
                                  uint64_t *out_bytes) {
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < d->n_spare; ++i) {
    uint64_t b = d->spare_bytes[i];
    if (b >= bytes && b / 2 <= bytes && (best == UINT32_MAX || b < d->spare_bytes[best])) best = i;
  }
  if (best != UINT32_MAX) {
    *out = d->spare_ptr[best];
    *out_bytes = d->spare_bytes[best];
    d->spare_total -= d->spare_bytes[best];
    d->n_spare--;
    d->spare_ptr[best] = d->spare_ptr[d->n_spare];
    d->spare_bytes[best] = d->spare_bytes[d->n_spare];
    return LW_CU_SUCCESS;
  }
  *out_bytes = bytes;
  lw_cu_result_t r = d->api->cuMemAlloc(out, (size_t)bytes);
  if (r == LW_CU_ERROR_OUT_OF_MEMORY && d->n_spare > 0) {
    spares_free(d);
    r = d->api->cuMemAlloc(out, (size_t)bytes);
  }
  return r;
}

// Keeps a finished run's buffer as a spare, or frees it when the spares are full.
static void buffer_give(cuda_device_t *d, lw_cu_deviceptr_t p, uint64_t bytes) {
  if (d->n_spare < CUDA_SPARE_BUFFERS && d->spare_total + bytes <= CUDA_SPARE_BYTES) {
    d->spare_ptr[d->n_spare] = p;
    d->spare_bytes[d->n_spare++] = bytes;
    d->spare_total += bytes;
  } else {
    (void)d->api->cuMemFree(p);
  }
}

// The run's device buffers go back to the spares; its host registrations are released, and
// unregistered once its handle finished (cuda_after_run), not before.
static void tensors_release(cuda_device_t *d, run_tensors_t *t) {
  for (uint32_t i = 0; i < t->n; ++i) {
    if (t->allocated[i]) buffer_give(d, t->ptr[i], t->buffer_bytes[i]);
    if (t->reg_ref[i]) {
      lw__cuda_hostreg_drop(t->reg_ref[i]);
      d->hostreg_dropped = true;
    }
  }
  t->n = 0;
}

// Whether [host, host + bytes) lies in the host region and the region is mapped (mapping it
// now, once, on the run lane with the context current).
static bool region_holds(cuda_device_t *d, void *host, uint64_t bytes) {
  uintptr_t p = (uintptr_t)host, base = (uintptr_t)d->region_base;
  if (!d->region_base || p < base || bytes > d->region_bytes ||
      (uint64_t)(p - base) > d->region_bytes - bytes) {
    return false;
  }
  if (d->region_state == REGION_UNTRIED) {
    const lw_cuda_driver_t *api = d->api;
    // Registered already (by the program: some part of it, perhaps) is no registration this
    // device could trust for the whole region: per run then, as at L2.
    lw_cu_result_t r = api->cuMemHostRegister(
        d->region_base, (size_t)d->region_bytes,
        LW_CU_MEMHOSTREGISTER_DEVICEMAP | LW_CU_MEMHOSTREGISTER_PORTABLE);
    region_state_t state = r == LW_CU_SUCCESS ? REGION_MAPPED : REGION_FAILED;
    if (state == REGION_MAPPED &&
        api->cuMemHostGetDevicePointer(&d->region_dev, d->region_base, 0) != LW_CU_SUCCESS) {
      (void)api->cuMemHostUnregister(d->region_base);
      state = REGION_FAILED;
    }
    d->region_state = state;
  }
  return d->region_state == REGION_MAPPED;
}

// Makes tensor i of args reachable by the kernel (copied or mapped) as t->ptr[t->n].
static lw_cu_result_t tensor_add(cuda_device_t *d, run_tensors_t *t, void *host, uint64_t bytes,
                                 uint8_t dir, bool live) {
  uint32_t k = t->n++;
  t->host[k] = host;
  t->bytes[k] = bytes;
  t->dir[k] = dir;
  t->ptr[k] = 0;
  if (!host || bytes == 0) return LW_CU_SUCCESS;
  const lw_cuda_driver_t *api = d->api;
  if (d->tensors_mapped || live) {
    if (region_holds(d, host, bytes)) {
      t->ptr[k] = d->region_dev + (lw_cu_deviceptr_t)((uint8_t *)host - d->region_base);
      return LW_CU_SUCCESS;
    }
    // Memory another tensor or run (or the program) registered already is mapped too.
    lw_cu_result_t r = lw__cuda_hostreg_take(api, d, host, bytes, &t->reg_ref[k]);
    if (r != LW_CU_SUCCESS) return r;
    return api->cuMemHostGetDevicePointer(&t->ptr[k], host, 0);
  }
  lw_cu_result_t r = buffer_take(d, bytes, &t->ptr[k], &t->buffer_bytes[k]);
  if (r != LW_CU_SUCCESS) return r;
  t->allocated[k] = true;
  if (dir == LW_PARAM_IN || dir == LW_PARAM_INOUT) {
    // On the chip's stream: ordered before the launch. From pageable memory the call returns
    // once the bytes are staged, so the host may change them afterwards.
    r = api->cuMemcpyHtoDAsync(t->ptr[k], host, (size_t)bytes, d->stream);
    t->copied_in = true;
  }
  return r;
}

// Fills params (the kernel's parameters in order) from args by the module's signature.
static lw_status_t pack_params(cuda_device_t *d, cuda_module_t *m, const lw_kernel_args_t *args,
                               run_tensors_t *t, void **params, uint32_t *out_n,
                               lw_error_t *err) {
  uint32_t n = 0, ti = 0, si = 0;
  lw_cu_result_t r = LW_CU_SUCCESS;
  if (m->n_params == 0) {
    // No signature: every tensor, then every scalar.
    for (ti = 0; ti < args->n_tensors && r == LW_CU_SUCCESS; ++ti) {
      r = tensor_add(d, t, args->tensor[ti].data, args->tensor[ti].bytes, LW_PARAM_INOUT, false);
      params[n++] = &t->ptr[t->n - 1];
    }
    for (si = 0; si < args->n_scalars; ++si) params[n++] = (void *)&args->scalar[si];
  } else {
    for (uint32_t i = 0; i < m->n_params && r == LW_CU_SUCCESS; ++i) {
      bool live = (m->param_dirs[i] & LW_PARAM_LIVE) != 0;
      uint8_t dir = (uint8_t)(m->param_dirs[i] & ~LW_PARAM_LIVE);
      if (dir == LW_PARAM_SCALAR) {
        if (si >= args->n_scalars) {
          return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                               "cuda: callable %s: parameter %u is the scalar %u but the run "
                               "gave %u",
                               m->name, i, si, args->n_scalars);
        }
        params[n++] = (void *)&args->scalar[si++];
      } else {
        if (ti >= args->n_tensors) {
          return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                               "cuda: callable %s: parameter %u is the tensor %u but the run "
                               "gave %u",
                               m->name, i, ti, args->n_tensors);
        }
        r = tensor_add(d, t, args->tensor[ti].data, args->tensor[ti].bytes, dir, live);
        ti++;
        params[n++] = &t->ptr[t->n - 1];
      }
    }
  }
  *out_n = n;
  if (r != LW_CU_SUCCESS) {
    bool sticky = note_sticky(d, r, "a tensor's transfer");
    return lw__error_set(err, sticky ? LW_TASK_FAILED : LW_RESOURCE_EXHAUSTED, -1, 0,
                         "cuda: callable %s: cannot %s tensor %u (%llu bytes): %s", m->name,
                         d->tensors_mapped ? "map" : "copy in", t->n - 1,
                         (unsigned long long)t->bytes[t->n - 1], CU_TEXT(r));
  }
  return LW_OK;
}

// The grid and block of a run's launch (see the top of this file).
static lw_status_t geometry(const cuda_module_t *m, const lw_launch_t *l,
                            unsigned grid[3], unsigned block[3], lw_error_t *err) {
  for (int i = 0; i < 3; ++i) grid[i] = block[i] = 1;
  if (l->dims == 0) return LW_OK;
  for (uint32_t i = 0; i < 3; ++i) {
    uint64_t g = i < l->dims ? l->global[i] : 1;
    uint64_t b = i < l->dims && l->local[i] ? l->local[i] : 1;
    if (i == 0 && !(l->local[0] || l->local[1] || l->local[2])) {
      b = g < CUDA_DEFAULT_BLOCK ? g : CUDA_DEFAULT_BLOCK;
    }
    uint64_t blocks = (g + b - 1) / b;
    if (b > UINT32_MAX || blocks > UINT32_MAX) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "cuda: callable %s: dimension %u (global %llu, block %llu) does not "
                           "fit a CUDA grid",
                           m->name, i, (unsigned long long)g, (unsigned long long)b);
    }
    grid[i] = (unsigned)blocks;
    block[i] = (unsigned)b;
  }
  return LW_OK;
}

// Waits for the stream with the spin policy, writing the stop word once the run's cancel is
// requested. Returns the stream's final answer; *out_stopped says whether the stop was sent.
static lw_cu_result_t wait_stream(cuda_device_t *d, const lw_backend_run_t *run,
                                  bool reset_queued, bool *out_stopped) {
  lw__spin_t spin = LW__SPIN_INIT;
  bool stopped = false;
  // The thread's timer slack before the first nap, put back after the wait (an L2 run may
  // execute on the caller's thread): -1 while not changed.
  int slack = -1;
  lw_cu_result_t r;
  while ((r = d->api->cuStreamQuery(d->stream)) == LW_CU_ERROR_NOT_READY) {
    // In device memory the word is set only once the chip's stream is past this run's reset,
    // where one was queued (ev_start follows it): a copy on another stream is not ordered
    // after it, and landing first, it would be undone.
    bool requested = lw__cancel_is_requested(run->cancel_word, run->generation);
    if (!stopped && requested &&
        (!reset_queued || d->api->cuEventQuery(d->ev_start) != LW_CU_ERROR_NOT_READY)) {
      if (d->stop_in_device) {
        // Beside the kernel, on a stream of its own. Failed, the kernel runs to its end (or
        // until its child is killed at L3): the run still ends CANCELLED.
        (void)d->api->cuMemcpyHtoDAsync(d->stop_dev, (const void *)&d->stop_host[1],
                                        sizeof(uint32_t), d->stop_stream);
        d->stop_sent = true;
      } else {
        // The kernel polls the word through the bus (lw_cuda_should_stop); release orders
        // nothing on the host side but keeps the store from being deferred.
        __atomic_store_n(&d->stop_host[0], 1u, __ATOMIC_RELEASE);
      }
      stopped = true;
      // The kernel's end is due within its poll interval now: spin for it (as the handle's
      // waiter does, lanes/spin.h) rather than nap after the usual budget.
      lw__spin_reset(&spin);
      spin.budget_ns = LW_SPIN_CANCEL_BUDGET_NS;
    }
    if (lw__spin_step(&spin) == LW__SPIN_BLOCK) {
      if (slack < 0 && (slack = prctl(PR_GET_TIMERSLACK)) >= 0) {
        (void)prctl(PR_SET_TIMERSLACK, CUDA_NAP_SLACK_NS);
      }
      // Until the cancel comes, it ends the nap (lw__cancel_request wakes it): the stop is
      // sent at once rather than after up to a nap. After it, a plain nap.
      if (requested) {
        nap(CUDA_NAP_NS);
      } else {
        lw__cancel_nap(run->cancel_word, run->generation, CUDA_NAP_NS);
      }
    }
  }
  if (slack >= 0) (void)prctl(PR_SET_TIMERSLACK, slack);
  // The copy that set the word has landed before the next run's reset is queued (else it
  // could land after it and stop that run).
  if (stopped && d->stop_in_device) (void)d->api->cuStreamSynchronize(d->stop_stream);
  *out_stopped = stopped || lw__cancel_is_requested(run->cancel_word, run->generation);
  return r;
}

static lw_status_t launch_in_context(cuda_device_t *d, cuda_module_t *m,
                                     const lw_kernel_args_t *args, const lw_backend_run_t *run,
                                     lw_backend_launch_result_t *out, lw_error_t *err) {
  const lw_cuda_driver_t *api = d->api;
  drain_unloads(d);
  if (m->load_status != LW_OK) {
    return lw__error_set(err, m->load_status, -1, 0, "%s (its load failed before)",
                         m->load_error);
  }
  if (!m->loaded) LW_RETURN_IF_ERROR(module_load(d, m, run, err));

  unsigned grid[3], block[3];
  LW_RETURN_IF_ERROR(geometry(m, &args->launch, grid, block, err));
  run_tensors_t t;
  memset(&t, 0, sizeof(t));
  void *params[LW_MAX_PARAMS + LW_MAX_TENSORS + LW_MAX_SCALARS];
  uint32_t n_params = 0;
  lw_status_t st = pack_params(d, m, args, &t, params, &n_params, err);
  if (st != LW_OK) {
    (void)api->cuStreamSynchronize(d->stream);  // copies in of the tensors packed before
    tensors_release(d, &t);
    return st;
  }

  // A stop left from an earlier run must not stop this one.
  const char *step = "cuEventRecord";
  lw_cu_result_t r = LW_CU_SUCCESS;
  bool reset_queued = false;
  if (d->stop_in_device) {
    if (d->stop_sent) {
      step = "resetting the stop word";
      r = api->cuMemcpyHtoDAsync(d->stop_dev, (const void *)&d->stop_host[0], sizeof(uint32_t),
                                 d->stream);
      if (r == LW_CU_SUCCESS) d->stop_sent = false;
      reset_queued = true;
    }
  } else {
    __atomic_store_n(&d->stop_host[0], 0u, __ATOMIC_RELEASE);
  }
  bool traced = lw__trace_on();
  bool timed = d->kernel_time == KTIME_EVENTS ||
               (d->kernel_time == KTIME_AUTO && (traced || t.copied_in));
  // ev_start: the kernel's time, and the mark a stop copy waits for after a reset.
  if (r == LW_CU_SUCCESS && (timed || reset_queued)) {
    step = "cuEventRecord";
    r = api->cuEventRecord(d->ev_start, d->stream);
  }
  int64_t t_launch = lw__now_ns();
  if (r == LW_CU_SUCCESS) {
    step = "cuLaunchKernel";
    r = api->cuLaunchKernel(m->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0,
                            d->stream, params, NULL);
  }
  if (r == LW_CU_SUCCESS && timed) {
    step = "cuEventRecord";
    r = api->cuEventRecord(d->ev_end, d->stream);
  }
  bool stopped = false;
  if (r == LW_CU_SUCCESS) {
    step = "the kernel";
    r = wait_stream(d, run, reset_queued, &stopped);
  }
  int64_t t_done = lw__now_ns();
  uint64_t kernel_ns = 0;
  if (r == LW_CU_SUCCESS) {
    float ms = 0;
    if (!timed) {
      kernel_ns = (uint64_t)(t_done - t_launch);
    } else if (api->cuEventElapsedTime(&ms, d->ev_start, d->ev_end) == LW_CU_SUCCESS && ms > 0) {
      kernel_ns = (uint64_t)((double)ms * 1e6);
    }
    // Outputs back into host memory (a stopped run's outputs are unspecified: left as they are).
    bool copies = false;
    for (uint32_t i = 0; i < t.n && !stopped && r == LW_CU_SUCCESS; ++i) {
      if (!t.allocated[i] || t.dir[i] == LW_PARAM_IN) continue;
      step = "copying an output back";
      r = api->cuMemcpyDtoHAsync(t.host[i], t.ptr[i], (size_t)t.bytes[i], d->stream);
      copies = true;
    }
    // The stream was found idle (wait_stream): only copies queued since need waiting for, and a
    // run without them saves the driver call (the launch+sync floor has two). A copy that
    // failed to queue still waits for those queued before it: into pinned memory they are
    // asynchronous, and their buffers go back to the spares below.
    if (copies) {
      lw_cu_result_t sr = api->cuStreamSynchronize(d->stream);
      if (r == LW_CU_SUCCESS) r = sr;
    }
  } else if (!lw__cuda_result_is_sticky(r)) {
    // A launch that failed after copies were queued: they finish before their memory goes.
    (void)api->cuStreamSynchronize(d->stream);
  }
  tensors_release(d, &t);
  if (r != LW_CU_SUCCESS) {
    char where[2 * CUDA_NAME_BYTES + 40];
    snprintf(where, sizeof(where), "kernel '%s' of callable %s", m->entry, m->name);
    bool sticky = note_sticky(d, r, where);
    return lw__error_set(err, LW_TASK_FAILED, -1, 0,
                         "cuda: %s failed on device %d at %s: %s%s", where, d->device_id, step,
                         CU_TEXT(r),
                         sticky ? "; the device's context is lost: the chip fails every "
                                  "later run (a chip child restarts)"
                                : "");
  }
  if (traced) {
    uint64_t threads = (uint64_t)grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2];
    int64_t t0 = kernel_ns > 0 && (int64_t)kernel_ns < t_done - t_launch
                     ? t_done - (int64_t)kernel_ns
                     : t_launch;
    lw__trace_slice(t0, t_done, run->trace_run, run->trace_task, run->chip, 0, threads, m->name);
  }
  out->kernel_rc = stopped ? LW_KERNEL_CANCELLED : 0;
  out->kernel_wall_ns = kernel_ns;
  return LW_OK;
}

static lw_status_t cuda_launch(void *device, void *module, const lw_kernel_args_t *args,
                               const lw_backend_run_t *run, lw_backend_launch_result_t *out,
                               lw_error_t *err) {
  cuda_device_t *d = device;
  cuda_module_t *m = module;
  out->kernel_rc = 0;
  out->kernel_wall_ns = 0;
  if (atomic_load_explicit(&d->lost, memory_order_acquire) != 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "cuda: device %d is lost (%s); callable %s not run", d->device_id,
                         d->lost_text, m->name);
  }
  lw_cu_context_t prev = NULL;
  lw_cu_result_t r = ctx_enter(d, &prev);
  if (r != LW_CU_SUCCESS) {
    return lw__error_set(err, LW_INTERNAL, -1, 0,
                         "cuda: cannot make device %d's context current: %s", d->device_id,
                         CU_TEXT(r));
  }
  lw_status_t st = launch_in_context(d, m, args, run, out, err);
  ctx_restore(d, prev);
  return st;
}

// After a run's handle finished: the host registrations runs released are unregistered now.
static void cuda_after_run(void *device) {
  cuda_device_t *d = device;
  if (!d->hostreg_dropped) return;
  lw_cu_context_t prev = NULL;
  if (ctx_enter(d, &prev) != LW_CU_SUCCESS) return;  // tried again after the next run
  d->hostreg_dropped = false;
  lw__cuda_hostreg_flush(d->api);
  ctx_restore(d, prev);
}

static void cuda_host_region(void *device, void *base, uint64_t bytes) {
  cuda_device_t *d = device;
  if (bytes > CUDA_REGION_MAX_BYTES) return;
  d->region_base = base;
  d->region_bytes = bytes;
  d->region_state = REGION_UNTRIED;
}

static bool cuda_device_lost(void *device) {
  cuda_device_t *d = device;
  return d && atomic_load_explicit(&d->lost, memory_order_acquire) != 0;
}

const lw_backend_ops_t lw__backend_cuda = {
    .name = "cuda",
    .formats = LW_BACKEND_FORMAT_BIT(LW_IMAGE_CUDA_C) | LW_BACKEND_FORMAT_BIT(LW_IMAGE_PTX) |
               LW_BACKEND_FORMAT_BIT(LW_IMAGE_CUBIN) | LW_BACKEND_FORMAT_BIT(LW_IMAGE_FATBIN),
    .open = cuda_open,
    .close = cuda_close,
    .load = cuda_load,
    .unload = cuda_unload,
    .launch = cuda_launch,
    .after_run = cuda_after_run,
    .device_lost = cuda_device_lost,
    .host_region = cuda_host_region,
};
