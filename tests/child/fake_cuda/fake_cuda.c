// tests/child/fake_cuda/fake_cuda.c — a fake CUDA driver for the cuda backend's tests: the
// entry points lanework resolves, exported under the names the current ABI gives them, with
// "kernels" run on a CPU thread per stream. See fake_cuda.h for what it does and records.
// A test double: built for tests only, never installed.
#include "fake_cuda.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;

enum {
  OK = 0,
  E_INVALID_VALUE = 1,
  E_NOT_INITIALIZED = 3,
  E_OUT_OF_MEMORY = 2,
  E_INVALID_DEVICE = 101,
  E_NO_BINARY_FOR_GPU = 209,
  E_INVALID_IMAGE = 200,
  E_INVALID_CONTEXT = 201,
  E_INVALID_HANDLE = 400,
  E_NOT_FOUND = 500,
  E_NOT_READY = 600,
  E_ILLEGAL_ADDRESS = 700,
  E_HOST_MEMORY_ALREADY_REGISTERED = 712,
  E_HOST_MEMORY_NOT_REGISTERED = 713,
};

// ---------------------------------------------------------------------------------------------
// Log

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct ctx ctx_t;
static _Thread_local ctx_t *tl_current;

API int lw_fake_cuda_context_current(void) { return tl_current != NULL; }

API void lw_fake_cuda_log(const char *event, const char *fmt, ...) {
  const char *path = getenv("LW_FAKE_CUDA_LOG");
  if (!path || !*path) return;
  char thread[32] = "";
  prctl(PR_GET_NAME, thread);
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof(detail), fmt, ap);
  va_end(ap);
  char line[700];
  int n = snprintf(line, sizeof(line), "%s pid=%d thread=%s ctx=%d %s\n", event, (int)getpid(),
                   thread, tl_current != NULL, detail);
  if (n <= 0) return;
  if ((size_t)n >= sizeof(line)) n = (int)sizeof(line) - 1;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // One write per line: O_APPEND keeps lines whole across threads and processes.
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
  close(fd);
}

// ---------------------------------------------------------------------------------------------
// Kernels

typedef struct launch launch_t;
typedef void (*kernel_fn)(launch_t *l);

typedef struct builtin {
  const char *name;
  int n_params;
  int sizes[6];
  kernel_fn fn;
} builtin_t;

typedef struct function function_t;

typedef struct module {
  char *text;  // the source text (fake cubin) or NULL for an ELF
  bool has_kernel[8];
  function_t *fn[8];  // made by cuModuleGetFunction, freed with the module
  bool has_stop;
  CUdeviceptr stop_global;  // 8 bytes: a pointer to the stop word (or 0)
} module_t;

struct function {
  const builtin_t *b;
  module_t *mod;
};

struct launch {
  const function_t *f;
  ctx_t *ctx;
  unsigned grid[3], block[3];
  unsigned char params[6][8];
};

struct ctx {
  int dev;
  _Atomic int sticky;  // a sticky error (0: none)
  _Atomic int running; // kernels running or queued on its streams
};

static uint64_t u64_param(const launch_t *l, int i) {
  uint64_t v;
  memcpy(&v, l->params[i], 8);
  return v;
}

static uint64_t threads_of(const launch_t *l) {
  return (uint64_t)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] * l->block[2];
}

static void k_empty(launch_t *l) { (void)l; }

// Whether [p, p + bytes) is memory a kernel may touch: a cuMemAlloc buffer or registered host
// memory (defined with the driver calls below). A kernel that reads or writes anything else
// makes its context's error sticky (700), as an access of unmapped memory does on a GPU.
static bool reachable(uintptr_t p, size_t bytes);
static bool touch(launch_t *l, uintptr_t p, size_t bytes) {
  if (reachable(p, bytes)) return true;
  lw_fake_cuda_log("illegal_address", "%zu", bytes);
  atomic_store(&l->ctx->sticky, E_ILLEGAL_ADDRESS);
  return false;
}

static void k_vector_add(launch_t *l) {
  float *a = (float *)(uintptr_t)u64_param(l, 0);
  float *b = (float *)(uintptr_t)u64_param(l, 1);
  float *c = (float *)(uintptr_t)u64_param(l, 2);
  uint64_t n = u64_param(l, 3), threads = threads_of(l);
  uint64_t m = threads < n ? threads : n;
  if (!touch(l, (uintptr_t)a, m * 4) || !touch(l, (uintptr_t)b, m * 4) ||
      !touch(l, (uintptr_t)c, m * 4)) {
    return;
  }
  for (uint64_t i = 0; i < m; ++i) c[i] = a[i] + b[i];
}

static void k_pack_probe(launch_t *l) {
  uint64_t *out = (uint64_t *)(uintptr_t)u64_param(l, 0);
  const uint64_t *in = (const uint64_t *)(uintptr_t)u64_param(l, 2);
  if (!touch(l, (uintptr_t)out, 32) || !touch(l, (uintptr_t)in, 8)) return;
  uint32_t fbits;
  memcpy(&fbits, l->params[3], 4);
  out[0] = u64_param(l, 1);
  out[1] = in[0];
  out[2] = fbits;
  out[3] = u64_param(l, 4);
}

static void k_poll_stop(launch_t *l) {
  int64_t end = now_ns() + 30ll * 1000 * 1000 * 1000;
  const CUdeviceptr *global = (const CUdeviceptr *)(uintptr_t)l->f->mod->stop_global;
  while (now_ns() < end) {
    const volatile uint32_t *word =
        global ? (const volatile uint32_t *)(uintptr_t)__atomic_load_n(global, __ATOMIC_ACQUIRE)
               : NULL;
    if (word && __atomic_load_n(word, __ATOMIC_ACQUIRE) != 0) return;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

static void k_sleep_ms(launch_t *l) {
  uint64_t ms = u64_param(l, 0);
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static void k_illegal_address(launch_t *l) { atomic_store(&l->ctx->sticky, E_ILLEGAL_ADDRESS); }

// callables/kernels/cuda/fault_after_ms.cu: runs ms milliseconds, then touches an address no
// allocation holds.
static void k_fault_after_ms(launch_t *l) {
  k_sleep_ms(l);
  lw_fake_cuda_log("illegal_address", "%s", "fault_after_ms");
  atomic_store(&l->ctx->sticky, E_ILLEGAL_ADDRESS);
}

static const builtin_t kBuiltins[] = {
    {"empty", 0, {0}, k_empty},
    {"vector_add", 4, {8, 8, 8, 8}, k_vector_add},
    {"pack_probe", 5, {8, 8, 8, 4, 8}, k_pack_probe},
    {"poll_stop", 0, {0}, k_poll_stop},
    {"sleep_ms", 1, {8}, k_sleep_ms},
    {"illegal_address", 0, {0}, k_illegal_address},
    {"fault_after_ms", 1, {8}, k_fault_after_ms},
};
#define N_BUILTINS (sizeof(kBuiltins) / sizeof(kBuiltins[0]))
_Static_assert(N_BUILTINS <= 8, "module_t.has_kernel");

// ---------------------------------------------------------------------------------------------
// Streams: a queue of operations run in order by the stream's thread

typedef enum { OP_KERNEL, OP_EVENT, OP_COPY } op_kind_t;

typedef struct event {
  _Atomic int64_t at_ns;  // 0: not yet reached
  _Atomic bool recorded;
} event_t;

typedef struct op {
  op_kind_t kind;
  launch_t launch;
  event_t *event;
  void *dst;
  const void *src;
  size_t bytes;
  struct op *next;
} op_t;

typedef struct stream {
  ctx_t *ctx;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  op_t *head, *tail;
  int pending;  // queued or running
  bool stop;
} stream_t;

// A copy as a device's copy engine makes it: aligned 32-bit words are stored whole (a kernel
// on another stream may poll one, as lw_cuda_should_stop polls a stop word in device memory,
// LW_CUDA_STOP=device), the rest byte by byte.
static void copy_words(void *dst, const void *src, size_t bytes) {
  if (((uintptr_t)dst | (uintptr_t)src | bytes) % 4 != 0) {
    memcpy(dst, src, bytes);
    return;
  }
  uint32_t *d = dst;
  const uint32_t *from = src;
  for (size_t i = 0; i < bytes / 4; ++i) __atomic_store_n(&d[i], from[i], __ATOMIC_RELEASE);
}

// lw_fake_cuda_hold_zero_word_copies: while set, a stream that reaches a 4-byte copy of the
// value 0 (the backend's reset of a stop word in device memory) waits there.
static _Atomic int g_hold_zero_words;

API void lw_fake_cuda_hold_zero_word_copies(int on) { atomic_store(&g_hold_zero_words, on); }

static void op_run(stream_t *s, op_t *op) {
  if (op->kind == OP_COPY && op->bytes == 4 && op->src &&
      __atomic_load_n((const uint32_t *)op->src, __ATOMIC_ACQUIRE) == 0) {
    while (atomic_load(&g_hold_zero_words)) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
  if (op->kind == OP_KERNEL) {
    // A context with a sticky error runs nothing more.
    if (atomic_load(&s->ctx->sticky) == 0) op->launch.f->b->fn(&op->launch);
  } else if (op->kind == OP_EVENT) {
    atomic_store(&op->event->at_ns, now_ns());
  } else if (atomic_load(&s->ctx->sticky) == 0) {
    copy_words(op->dst, op->src, op->bytes);
  }
}

static void *stream_main(void *arg) {
  stream_t *s = arg;
  prctl(PR_SET_NAME, "fake-cuda-strm");
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->head && s->stop) break;
    op_t *op = s->head;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    op_run(s, op);
    if (op->kind == OP_KERNEL) atomic_fetch_sub(&s->ctx->running, 1);
    free(op);
    pthread_mutex_lock(&s->mu);
    s->pending--;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void stream_push(stream_t *s, op_t *op) {
  op->next = NULL;
  if (op->kind == OP_KERNEL) atomic_fetch_add(&s->ctx->running, 1);
  pthread_mutex_lock(&s->mu);
  if (s->tail) {
    s->tail->next = op;
  } else {
    s->head = op;
  }
  s->tail = op;
  s->pending++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

// ---------------------------------------------------------------------------------------------
// Driver API

static _Atomic bool g_initialized;

static int n_devices(void) {
  const char *e = getenv("LW_FAKE_CUDA_DEVICES");
  return e && *e ? atoi(e) : 1;
}

// The context a call runs in: the thread's current one. Logs a call that found none.
#define NEED_CTX(call)                                        \
  ctx_t *c = tl_current;                                      \
  if (!c) {                                                   \
    lw_fake_cuda_log("no_context", "%s", call);               \
    return E_INVALID_CONTEXT;                                 \
  }                                                           \
  if (atomic_load(&c->sticky) != 0) return atomic_load(&c->sticky)

API CUresult cuInit(unsigned flags) {
  (void)flags;
  if (!atomic_exchange(&g_initialized, true)) lw_fake_cuda_log("init", "%s", "");
  return OK;
}

API CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return OK;
}

static const char *err_name(CUresult e) {
  switch (e) {
    case OK: return "CUDA_SUCCESS";
    case E_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case E_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case E_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case E_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case E_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case E_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case E_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case E_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case E_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case E_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case E_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case E_HOST_MEMORY_ALREADY_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
    case E_HOST_MEMORY_NOT_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
  }
  return NULL;
}

API CUresult cuGetErrorName(CUresult e, const char **out) {
  *out = err_name(e);
  return *out ? OK : E_INVALID_VALUE;
}

API CUresult cuGetErrorString(CUresult e, const char **out) {
  switch (e) {
    case E_ILLEGAL_ADDRESS: *out = "an illegal memory access was encountered"; return OK;
    case E_NO_BINARY_FOR_GPU: *out = "no kernel image is available for execution on the device"; return OK;
    case E_NOT_FOUND: *out = "named symbol not found"; return OK;
    default: break;
  }
  *out = err_name(e) ? "fake error" : NULL;
  return *out ? OK : E_INVALID_VALUE;
}

API CUresult cuDeviceGetCount(int *n) {
  if (!atomic_load(&g_initialized)) return E_NOT_INITIALIZED;
  *n = n_devices();
  return OK;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= n_devices()) return E_INVALID_DEVICE;
  *d = ordinal;
  return OK;
}

API CUresult cuDeviceGetName(char *name, int bytes, CUdevice d) {
  snprintf(name, (size_t)bytes, "Fake CUDA Device %d", d);
  return OK;
}

API CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  (void)d;
  const char *cc = getenv("LW_FAKE_CUDA_CC");
  int ccv = cc && *cc ? atoi(cc) : 90;
  switch (attr) {
    case 75: *v = ccv / 10; return OK;  // compute capability major
    case 76: *v = ccv % 10; return OK;  // minor
    case 19: *v = 1; return OK;         // can map host memory
    case 16: *v = 4; return OK;         // multiprocessors
    default: *v = 0; return OK;
  }
}

API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  (void)d;
  *bytes = (size_t)8 << 30;
  return OK;
}

API CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d) {
  for (int i = 0; i < 16; ++i) uuid[i] = (unsigned char)(0xf0 + i);
  uuid[15] = (unsigned char)d;
  return OK;
}

static CUresult ctx_create(ctx_t **out, CUdevice dev) {
  if (!atomic_load(&g_initialized)) return E_NOT_INITIALIZED;
  if (dev < 0 || dev >= n_devices()) return E_INVALID_DEVICE;
  ctx_t *c = calloc(1, sizeof(*c));
  c->dev = dev;
  tl_current = c;
  lw_fake_cuda_log("ctx_create", "dev=%d", dev);
  *out = c;
  return OK;
}

API CUresult cuCtxCreate_v4(ctx_t **out, void *params, unsigned flags, CUdevice dev) {
  (void)params;
  (void)flags;
  return ctx_create(out, dev);
}

API CUresult cuCtxCreate_v2(ctx_t **out, unsigned flags, CUdevice dev) {
  (void)flags;
  return ctx_create(out, dev);
}

API CUresult cuCtxDestroy_v2(ctx_t *c) {
  if (tl_current == c) tl_current = NULL;
  free(c);
  return OK;
}

API CUresult cuCtxSetCurrent(ctx_t *c) {
  tl_current = c;
  return OK;
}

API CUresult cuCtxGetCurrent(ctx_t **out) {
  *out = tl_current;
  return OK;
}

API CUresult cuCtxSynchronize(void) {
  NEED_CTX("cuCtxSynchronize");
  while (atomic_load(&c->running) > 0) usleep(100);
  return atomic_load(&c->sticky);
}

API CUresult cuStreamCreate(stream_t **out, unsigned flags) {
  (void)flags;
  NEED_CTX("cuStreamCreate");
  stream_t *s = calloc(1, sizeof(*s));
  s->ctx = c;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_create(&s->thread, NULL, stream_main, s);
  *out = s;
  return OK;
}

API CUresult cuStreamDestroy_v2(stream_t *s) {
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
  return OK;
}

API CUresult cuStreamQuery(stream_t *s) {
  NEED_CTX("cuStreamQuery");
  pthread_mutex_lock(&s->mu);
  int pending = s->pending;
  pthread_mutex_unlock(&s->mu);
  if (atomic_load(&c->sticky) != 0) return atomic_load(&c->sticky);
  return pending > 0 ? E_NOT_READY : OK;
}

API CUresult cuStreamSynchronize(stream_t *s) {
  // Waits for the stream even in a context with a sticky error (its queue still drains).
  ctx_t *c = tl_current;
  if (!c) {
    lw_fake_cuda_log("no_context", "%s", "cuStreamSynchronize");
    return E_INVALID_CONTEXT;
  }
  lw_fake_cuda_log("stream_sync", "%s", "");
  pthread_mutex_lock(&s->mu);
  while (s->pending > 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return atomic_load(&c->sticky);
}

API CUresult cuEventCreate(event_t **out, unsigned flags) {
  (void)flags;
  NEED_CTX("cuEventCreate");
  *out = calloc(1, sizeof(event_t));
  return OK;
}

API CUresult cuEventDestroy_v2(event_t *e) {
  free(e);
  return OK;
}

API CUresult cuEventRecord(event_t *e, stream_t *s) {
  NEED_CTX("cuEventRecord");
  lw_fake_cuda_log("event_record", "%s", "");
  atomic_store(&e->at_ns, 0);
  atomic_store(&e->recorded, true);
  op_t *op = calloc(1, sizeof(*op));
  op->kind = OP_EVENT;
  op->event = e;
  stream_push(s, op);
  return OK;
}

API CUresult cuEventQuery(event_t *e) {
  NEED_CTX("cuEventQuery");
  return atomic_load(&e->at_ns) != 0 ? OK : E_NOT_READY;
}

API CUresult cuEventElapsedTime_v2(float *ms, event_t *a, event_t *b) {
  NEED_CTX("cuEventElapsedTime_v2");
  int64_t t0 = atomic_load(&a->at_ns), t1 = atomic_load(&b->at_ns);
  if (!atomic_load(&a->recorded) || !atomic_load(&b->recorded)) return E_INVALID_HANDLE;
  if (t0 == 0 || t1 == 0) return E_NOT_READY;
  *ms = (float)((double)(t1 - t0) / 1e6);
  return OK;
}

// Device buffers (cuMemAlloc), for reachable.
#define MAX_ALLOCS 256
static pthread_mutex_t g_alloc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t lo, hi; } g_alloc[MAX_ALLOCS];

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  NEED_CTX("cuMemAlloc_v2");
  lw_fake_cuda_log("mem_alloc", "%zu", bytes);
  void *m = calloc(1, bytes ? bytes : 1);
  if (!m) return E_OUT_OF_MEMORY;
  pthread_mutex_lock(&g_alloc_mu);
  int i = 0;
  while (i < MAX_ALLOCS && g_alloc[i].hi) ++i;
  if (i < MAX_ALLOCS) {
    g_alloc[i].lo = (uintptr_t)m;
    g_alloc[i].hi = (uintptr_t)m + bytes;
  }
  pthread_mutex_unlock(&g_alloc_mu);
  if (i == MAX_ALLOCS) {
    free(m);
    return E_OUT_OF_MEMORY;
  }
  *p = (CUdeviceptr)(uintptr_t)m;
  return OK;
}

API CUresult cuMemFree_v2(CUdeviceptr p) {
  NEED_CTX("cuMemFree_v2");
  lw_fake_cuda_log("mem_free", "%s", "");
  pthread_mutex_lock(&g_alloc_mu);
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    if (g_alloc[i].hi && g_alloc[i].lo == (uintptr_t)p) g_alloc[i].lo = g_alloc[i].hi = 0;
  }
  pthread_mutex_unlock(&g_alloc_mu);
  free((void *)(uintptr_t)p);
  return OK;
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
  NEED_CTX("cuMemcpyHtoD_v2");
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return OK;
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  NEED_CTX("cuMemcpyDtoH_v2");
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return OK;
}

// Asynchronous copies from pageable memory return once the bytes are staged: the fake stages
// host-to-device copies at once and queues the device-to-host ones.
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, stream_t *s) {
  NEED_CTX("cuMemcpyHtoDAsync_v2");
  lw_fake_cuda_log("htod_async", "%zu", bytes);
  op_t *op = calloc(1, sizeof(*op) + bytes);
  op->kind = OP_COPY;
  memcpy(op + 1, src, bytes);
  op->dst = (void *)(uintptr_t)dst;
  op->src = op + 1;
  op->bytes = bytes;
  stream_push(s, op);
  return OK;
}

API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, stream_t *s) {
  NEED_CTX("cuMemcpyDtoHAsync_v2");
  op_t *op = calloc(1, sizeof(*op));
  op->kind = OP_COPY;
  op->dst = dst;
  op->src = (const void *)(uintptr_t)src;
  op->bytes = bytes;
  stream_push(s, op);
  return OK;
}

API CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  NEED_CTX("cuMemHostAlloc");
  *p = calloc(1, bytes);
  return OK;
}

API CUresult cuMemFreeHost(void *p) {
  free(p);
  return OK;
}

// Registered host ranges (the fake maps host memory at its own address).
#define MAX_REGISTERED 64
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uintptr_t lo, hi;
} g_reg[MAX_REGISTERED];

API CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) {
  (void)flags;
  NEED_CTX("cuMemHostRegister_v2");
  lw_fake_cuda_log("host_register", "%zu", bytes);
  uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
  CUresult r = E_INVALID_VALUE;
  pthread_mutex_lock(&g_reg_mu);
  for (int i = 0; i < MAX_REGISTERED; ++i) {
    if (g_reg[i].hi && lo < g_reg[i].hi && g_reg[i].lo < hi) {
      r = E_HOST_MEMORY_ALREADY_REGISTERED;
      goto out;
    }
  }
  for (int i = 0; i < MAX_REGISTERED; ++i) {
    if (!g_reg[i].hi) {
      g_reg[i].lo = lo;
      g_reg[i].hi = hi;
      r = OK;
      break;
    }
  }
out:
  pthread_mutex_unlock(&g_reg_mu);
  return r;
}

// lw_fake_cuda_hold_unregisters: while set, cuMemHostUnregister waits before it unregisters.
static _Atomic int g_hold_unregisters;

API void lw_fake_cuda_hold_unregisters(int on) { atomic_store(&g_hold_unregisters, on); }

API CUresult cuMemHostUnregister(void *p) {
  while (atomic_load(&g_hold_unregisters)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  lw_fake_cuda_log("host_unregister", "%s", "");
  CUresult r = E_HOST_MEMORY_NOT_REGISTERED;
  pthread_mutex_lock(&g_reg_mu);
  for (int i = 0; i < MAX_REGISTERED; ++i) {
    if (g_reg[i].hi && g_reg[i].lo == (uintptr_t)p) {
      g_reg[i].lo = g_reg[i].hi = 0;
      r = OK;
    }
  }
  pthread_mutex_unlock(&g_reg_mu);
  return r;
}

static bool reachable(uintptr_t p, size_t bytes) {
  bool ok = false;
  pthread_mutex_lock(&g_alloc_mu);
  for (int i = 0; i < MAX_ALLOCS && !ok; ++i) {
    ok = g_alloc[i].hi && g_alloc[i].lo <= p && p + bytes <= g_alloc[i].hi;
  }
  pthread_mutex_unlock(&g_alloc_mu);
  pthread_mutex_lock(&g_reg_mu);
  for (int i = 0; i < MAX_REGISTERED && !ok; ++i) {
    ok = g_reg[i].hi && g_reg[i].lo <= p && p + bytes <= g_reg[i].hi;
  }
  pthread_mutex_unlock(&g_reg_mu);
  return ok;
}

API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *out, void *p, unsigned flags) {
  (void)flags;
  NEED_CTX("cuMemHostGetDevicePointer_v2");
  *out = (CUdeviceptr)(uintptr_t)p;
  return OK;
}

static bool elf_cuda(const unsigned char *p) {
  return p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[18] == 190 && p[19] == 0;
}

// Finds needle in the first bytes of hay.
static bool has_bytes(const unsigned char *hay, size_t bytes, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= bytes; ++i) {
    if (memcmp(hay + i, needle, n) == 0) return true;
  }
  return false;
}

API CUresult cuModuleLoadData(module_t **out, const void *image) {
  NEED_CTX("cuModuleLoadData");
  const unsigned char *p = image;
  module_t *m = calloc(1, sizeof(*m));
  char names[256] = "";
  if (strncmp((const char *)p, FAKE_CUBIN_MAGIC, strlen(FAKE_CUBIN_MAGIC)) == 0) {
    m->text = strdup((const char *)p);
    if (strstr(m->text, "FAKE_LOAD_FAIL")) {
      lw_fake_cuda_log("module_load", "failed");
      free(m->text);
      free(m);
      return E_NO_BINARY_FOR_GPU;
    }
    for (size_t i = 0; i < N_BUILTINS; ++i) {
      char call[64];
      snprintf(call, sizeof(call), "%s(", kBuiltins[i].name);
      m->has_kernel[i] = strstr(m->text, call) != NULL;
    }
    m->has_stop = strstr(m->text, "lw__cuda_stop") != NULL;
  } else if (elf_cuda(p)) {
    // The section headers bound the image: e_shoff + e_shnum * e_shentsize.
    uint64_t shoff;
    uint16_t shnum, shentsize;
    memcpy(&shoff, p + 40, 8);
    memcpy(&shentsize, p + 58, 2);
    memcpy(&shnum, p + 60, 2);
    size_t bytes = (size_t)(shoff + (uint64_t)shnum * shentsize);
    for (size_t i = 0; i < N_BUILTINS; ++i) {
      char section[64];
      snprintf(section, sizeof(section), ".text.%s", kBuiltins[i].name);
      m->has_kernel[i] = has_bytes(p, bytes, section);
    }
    m->has_stop = has_bytes(p, bytes, "lw__cuda_stop");
  } else if (strstr((const char *)p, ".version") && strstr((const char *)p, ".entry")) {
    // PTX text: the driver's JIT. Its kernels are its ".entry name(" lines.
    m->text = strdup((const char *)p);
    for (size_t i = 0; i < N_BUILTINS; ++i) {
      char entry[64];
      snprintf(entry, sizeof(entry), ".entry %s(", kBuiltins[i].name);
      m->has_kernel[i] = strstr(m->text, entry) != NULL;
    }
    m->has_stop = strstr(m->text, "lw__cuda_stop") != NULL;
    lw_fake_cuda_log("ptx_jit", "%s", "");
  } else {
    free(m);
    lw_fake_cuda_log("module_load", "invalid image");
    return E_INVALID_IMAGE;
  }
  // A load waits for the context's running kernels, as the real driver's does.
  bool waited = false;
  while (atomic_load(&c->running) > 0) {
    waited = true;
    usleep(100);
  }
  if (m->has_stop) m->stop_global = (CUdeviceptr)(uintptr_t)calloc(1, 8);
  for (size_t i = 0; i < N_BUILTINS; ++i) {
    if (!m->has_kernel[i]) continue;
    size_t used = strlen(names);
    snprintf(names + used, sizeof(names) - used, "%s%s", used ? "," : "", kBuiltins[i].name);
  }
  lw_fake_cuda_log("module_load", "kernels=%s waited=%d", names, waited);
  *out = m;
  return OK;
}

API CUresult cuModuleUnload(module_t *m) {
  // Frees the module even in a context with a sticky error, then reports the error.
  if (!tl_current) {
    lw_fake_cuda_log("no_context", "%s", "cuModuleUnload");
    return E_INVALID_CONTEXT;
  }
  lw_fake_cuda_log("module_unload", "%s", "");
  free((void *)(uintptr_t)m->stop_global);
  for (int i = 0; i < 8; ++i) free(m->fn[i]);
  free(m->text);
  free(m);
  return atomic_load(&tl_current->sticky);
}

API CUresult cuModuleGetFunction(function_t **out, module_t *m, const char *name) {
  NEED_CTX("cuModuleGetFunction");
  for (size_t i = 0; i < N_BUILTINS; ++i) {
    if (m->has_kernel[i] && strcmp(kBuiltins[i].name, name) == 0) {
      pthread_mutex_lock(&g_reg_mu);
      if (!m->fn[i]) {
        m->fn[i] = calloc(1, sizeof(function_t));
        m->fn[i]->b = &kBuiltins[i];
        m->fn[i]->mod = m;
      }
      *out = m->fn[i];
      pthread_mutex_unlock(&g_reg_mu);
      return OK;
    }
  }
  return E_NOT_FOUND;
}

API CUresult cuModuleGetGlobal_v2(CUdeviceptr *out, size_t *bytes, module_t *m,
                                  const char *name) {
  NEED_CTX("cuModuleGetGlobal_v2");
  if (strcmp(name, "lw__cuda_stop") != 0 || !m->has_stop) return E_NOT_FOUND;
  if (out) *out = m->stop_global;
  if (bytes) *bytes = 8;
  return OK;
}

API CUresult cuFuncGetParamInfo(function_t *f, size_t index, size_t *offset, size_t *bytes) {
  if ((int)index >= f->b->n_params) return E_INVALID_VALUE;
  size_t off = 0;
  for (size_t i = 0; i < index; ++i) off += 8;
  *offset = off;
  *bytes = (size_t)f->b->sizes[index];
  return OK;
}

API CUresult cuLaunchKernel(function_t *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, stream_t *s,
                            void **params, void **extra) {
  (void)shared;
  (void)extra;
  NEED_CTX("cuLaunchKernel");
  if (bx * by * bz > 1024 || gx == 0 || gy == 0 || gz == 0) return E_INVALID_VALUE;
  lw_fake_cuda_log("launch", "%s", f->b->name);
  op_t *op = calloc(1, sizeof(*op));
  op->kind = OP_KERNEL;
  op->launch.f = f;
  op->launch.ctx = c;
  op->launch.grid[0] = gx;
  op->launch.grid[1] = gy;
  op->launch.grid[2] = gz;
  op->launch.block[0] = bx;
  op->launch.block[1] = by;
  op->launch.block[2] = bz;
  // The values are copied at the launch, as the driver does.
  for (int i = 0; i < f->b->n_params; ++i) {
    memcpy(op->launch.params[i], params[i], (size_t)f->b->sizes[i]);
  }
  stream_push(s, op);
  return OK;
}
