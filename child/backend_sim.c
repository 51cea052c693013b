// child/backend_sim.c — the `sim` chip: kernels are host shared objects loaded from memory
// and run on the run lane's own thread, with kernel args pointing at host memory.
//
// The device lock (a test hook, off unless LW_SIM_DEVICE_LOCK=1 is in the environment when the
// chip opens): a load holds the chip's lock (one per sim chip: a sim device is its chip) from
// its start to its end, and a running kernel's lw_kernel_should_stop waits at each poll until
// no load holds it. While held there a run sees no cancel or deadline; a prepare that never
// returns therefore holds the running kernel too, and a prepare that waits for a running
// kernel's progress would wait forever: the hook is for benchmarks and tests, never for use. That is how a GPU
// driver whose compiler takes a context-wide lock behaves (NVIDIA's OpenCL build, or the CUDA
// driver's PTX JIT, stop the running kernel for the whole register: DESIGN 7.2). With it, a
// register posted while a run executes still lies inside the run's span, but the run makes no
// progress meanwhile: the negative control of `lanework bench overlap --stall-control`.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callables/image.h"
#include "child/backend.h"
#include "lanes/error.h"
#include "lanes/sys.h"
#include "lanes/trace.h"

typedef struct sim_device {
  int32_t device_id;
  // The device lock test hook (file comment): loads hold lock; `loading` counts the loads
  // holding or waiting for it, so a poll with no load in sight costs one relaxed load.
  bool device_lock;
  pthread_mutex_t lock;
  _Atomic uint32_t loading;
} sim_device_t;

#define SIM_DEVICE_LOCK_ENV "LW_SIM_DEVICE_LOCK"

// What a run's poll hook needs: the chip and the run (for the stall's trace span). Lives on
// sim_launch's stack for the run.
typedef struct sim_poll {
  sim_device_t *dev;
  const lw_backend_run_t *run;
} sim_poll_t;

// The running kernel's poll hook when the device lock is on: waits until no load holds the
// lock, and records the wait as a stall span on the run lane (so a bench can tell the control
// really stalled a run). Relaxed: a load that starts just after this look stalls the kernel
// from its next poll.
static void device_lock_poll(const lw_kernel_ctx_t *ctx) {
  const sim_poll_t *p = ctx->poll_hook_arg;
  if (atomic_load_explicit(&p->dev->loading, memory_order_relaxed) == 0) return;
  int64_t t0 = lw__now_ns();
  pthread_mutex_lock(&p->dev->lock);
  pthread_mutex_unlock(&p->dev->lock);
  lw__trace_span(LW_TRACE_STALL, t0, lw__now_ns(), p->run->trace_run, p->run->trace_task,
                 p->run->chip, LW_OK, ctx->name);
}

static void device_lock_take(sim_device_t *dev) {
  if (!dev->device_lock) return;
  atomic_fetch_add_explicit(&dev->loading, 1, memory_order_relaxed);
  pthread_mutex_lock(&dev->lock);
}

static void device_lock_drop(sim_device_t *dev) {
  if (!dev->device_lock) return;
  pthread_mutex_unlock(&dev->lock);
  atomic_fetch_sub_explicit(&dev->loading, 1, memory_order_relaxed);
}

typedef struct sim_module {
  lw_loaded_image_t image;
  void *state;  // the kernel's own, set by its prepare hook
  char name[128];
} sim_module_t;

static lw_status_t sim_open(const lw_chip_config_t *cfg, void **out_device, lw_error_t *err) {
  *out_device = NULL;
  if (cfg->device_id < 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "sim: device_id %d is negative",
                         cfg->device_id);
  }
  const char *lock = getenv(SIM_DEVICE_LOCK_ENV);
  if (lock && *lock && strcmp(lock, "0") != 0 && strcmp(lock, "1") != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "sim: %s=\"%.32s\" is neither 1 (the device lock test hook on) nor 0",
                         SIM_DEVICE_LOCK_ENV, lock);
  }
  sim_device_t *dev = calloc(1, sizeof(*dev));
  if (!dev) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "sim: out of memory");
  dev->device_id = cfg->device_id;
  dev->device_lock = lock && strcmp(lock, "1") == 0;
  pthread_mutex_init(&dev->lock, NULL);
  *out_device = dev;
  return LW_OK;
}

static void sim_close(void *device) {
  sim_device_t *dev = device;
  if (!dev) return;
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

static void ctx_init(lw_kernel_ctx_t *ctx, const sim_device_t *dev, sim_module_t *m,
                     lw_cancel_word_t *word, uint64_t generation) {
  memset(ctx, 0, sizeof(*ctx));
  ctx->abi_version = LW_KERNEL_ABI_VERSION;
  ctx->chip_id = dev->device_id;
  ctx->cancel_word = word;
  ctx->generation = generation;
  ctx->state = m->state;
  ctx->name = m->name;
}

// The length of the well-formed UTF-8 sequence at p (at most n bytes readable), 0 when there
// is none: a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or a
// sequence that runs into the end.
static size_t utf8_sequence_length(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (len > n || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return len;
}

// Makes what a kernel wrote into its fail buffer safe to quote in an error message: the kernel
// may have written anything, unterminated. Cuts it at bytes - 1 and replaces every byte that is
// not printable ASCII or part of well-formed UTF-8 with '?', so the text can go into a log line
// or JSON as it is.
static void fail_text_clean(char *text, size_t bytes) {
  text[bytes - 1] = '\0';
  size_t n = strlen(text);
  unsigned char *p = (unsigned char *)text;
  for (size_t i = 0; i < n;) {
    if (p[i] >= 0x20 && p[i] < 0x7F) {
      i++;
      continue;
    }
    size_t len = p[i] >= 0x80 ? utf8_sequence_length(p + i, n - i) : 0;
    if (len == 0) {
      p[i++] = '?';
    } else {
      i += len;
    }
  }
}

static lw_status_t load_module(sim_device_t *dev, const lw_backend_image_t *img,
                               void **out_module, lw_error_t *err);

static lw_status_t sim_load(void *device, const lw_backend_image_t *img, void **out_module,
                            lw_error_t *err) {
  sim_device_t *dev = device;
  device_lock_take(dev);
  lw_status_t st = load_module(dev, img, out_module, err);
  device_lock_drop(dev);
  return st;
}

static lw_status_t load_module(sim_device_t *dev, const lw_backend_image_t *img,
                               void **out_module, lw_error_t *err) {
  const char *name = img->name;
  *out_module = NULL;
  sim_module_t *m = calloc(1, sizeof(*m));
  if (!m) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "sim: out of memory");
  snprintf(m->name, sizeof(m->name), "%s", name ? name : "callable");
  lw_status_t st = lw__image_load(img->data, img->bytes, img->entry, m->name, &m->image, err);
  if (st != LW_OK) {
    free(m);
    return st;
  }
  if (m->image.prepare) {
    // Prepare sees a word that can never be cancelled: it runs once, to completion.
    lw_cancel_word_t never = 0;
    lw_kernel_ctx_t ctx;
    ctx_init(&ctx, dev, m, &never, 0);
    char fail_text[LW_BACKEND_FAIL_TEXT_BYTES] = "";
    ctx.fail_text = fail_text;
    ctx.fail_bytes = sizeof(fail_text);
    int rc = m->image.prepare(&ctx);
    if (rc != 0) {
      lw__image_unload(&m->image);
      free(m);
      fail_text_clean(fail_text, sizeof(fail_text));
      if (fail_text[0] != '\0') {
        return lw__error_set(err, LW_TASK_FAILED, -1, 0,
                             "chip %d: prepare hook of callable %s failed: %s (returned %d)",
                             dev->device_id, name ? name : "callable", fail_text, rc);
      }
      return lw__error_set(err, LW_TASK_FAILED, -1, 0,
                           "chip %d: prepare hook of callable %s returned %d", dev->device_id,
                           name ? name : "callable", rc);
    }
    m->state = ctx.state;
  }
  *out_module = m;
  return LW_OK;
}

static void sim_unload(void *device, void *module) {
  sim_device_t *dev = device;
  sim_module_t *m = module;
  if (!m) return;
  if (m->image.release) {
    lw_cancel_word_t never = 0;
    lw_kernel_ctx_t ctx;
    ctx_init(&ctx, dev, m, &never, 0);
    m->image.release(&ctx);
  }
  lw__image_unload(&m->image);
  free(m);
}

static lw_status_t sim_launch(void *device, void *module, const lw_kernel_args_t *args,
                              const lw_backend_run_t *run, lw_backend_launch_result_t *out,
                              lw_error_t *err) {
  (void)err;
  sim_device_t *dev = device;
  sim_module_t *m = module;
  lw_kernel_ctx_t ctx;
  ctx_init(&ctx, dev, m, run->cancel_word, run->generation);
  sim_poll_t poll = {dev, run};
  if (dev->device_lock) {
    // Runs only: prepare runs inside a load, which holds the lock its polls would wait for.
    ctx.poll_hook = device_lock_poll;
    ctx.poll_hook_arg = &poll;
  }
  ctx.launch = args->launch;
  ctx.fail_text = out->fail_text;
  ctx.fail_bytes = sizeof(out->fail_text);
  // The run lane's start, read a few stores before: one clock read per run fewer.
  int64_t t0 = run->start_ns > 0 ? run->start_ns : lw__now_ns();
  out->kernel_rc = m->image.main(&ctx, args);
  out->end_ns = lw__now_ns();
  out->kernel_wall_ns = (uint64_t)(out->end_ns - t0);
  // Only a failed run's text is read; a run that returned 0 keeps whatever it wrote unread.
  if (out->kernel_rc != 0) {
    fail_text_clean(out->fail_text, sizeof(out->fail_text));
  } else {
    out->fail_text[0] = '\0';
  }
  return LW_OK;
}

const lw_backend_ops_t lw__backend_sim = {
    .name = "sim",
    .formats = LW_BACKEND_FORMAT_BIT(LW_IMAGE_ELF),
    .open = sim_open,
    .close = sim_close,
    .load = sim_load,
    .unload = sim_unload,
    .launch = sim_launch,
};
