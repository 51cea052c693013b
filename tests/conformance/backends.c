// tests/conformance/backends.c — the conformance kernels of every backend: one row per
// backend, one image per kernel of conformance.h (same behaviour and signature everywhere,
// each in the backend's own image format). This table is the one place a backend's kernels
// are named; the backend list itself is LW_CONFORMANCE_BACKENDS in CMakeLists.txt.
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conformance.h"
#include "hold_items.h"

// Where a backend's kernel comes from.
typedef struct conf_kernel_source {
  const char *path;     // the image file, read as is; NULL: the backend has no such kernel
  const char *entry;    // the entry point; NULL: LW_DEFAULT_ENTRY
  const char *missing;  // when path is NULL: why, the reason the cases needing it skip with
  // Work-items of every run of the kernel (lw_args_set_launch, one dimension, the local size
  // left to the backend); 0: no geometry (sim kernels, and one work-item on opencl).
  uint64_t global;
  // The image is text naming the file its register waits for: conf_kernel_load replaces
  // CONF_HOLD_MARKER in it with the path after the first ':' of the callable's name, and
  // makes that path a FIFO (opencl/hold.cl says why).
  bool hold_fifo;
  // The range is sized on the device instead (global is then 0): the work-items that keep the
  // device busy for LW_TEST_HOLD_S seconds, from a probe (hold_items below). Only the gate: a
  // device runs its range in well under a second once the gate opens, so its length must
  // follow the device's speed (opencl/gate.cl).
  bool sized_on_device;
} conf_kernel_source_t;

#define CONF_HOLD_MARKER "@CONF_HOLD_PATH@"

typedef struct conf_backend_kernels {
  const char *backend;
  conf_kernel_source_t kernel[CONF_K_COUNT];
  // Writes the name of the device the chip under test runs on (device 0), for skip messages.
  void (*device_name)(char *out, size_t cap);
} conf_backend_kernels_t;

static void sim_device_name(char *out, size_t cap) { snprintf(out, cap, "the sim chip"); }

#include "child/backend.h"

static void cuda_device_name(char *out, size_t cap) {
  lw_cuda_info_t info;
  lw_cuda_device_info_t dev[1];
  uint32_t n = 0;
  lw_error_t err;
  if (lw__cuda_list(&info, dev, 1, &n, &err) != LW_OK || n == 0) {
    snprintf(out, cap, "CUDA device 0 (not listed: %s)", err.message);
    return;
  }
  snprintf(out, cap, "CUDA device 0 (%s, sm_%d%d)", dev[0].name, (int)dev[0].cc_major,
           (int)dev[0].cc_minor);
}

#ifdef LW_HAVE_OPENCL

static void opencl_device_name(char *out, size_t cap) {
  lw_opencl_device_info_t dev[1];
  uint32_t n = 0;
  lw_error_t err;
  if (lw__opencl_list(dev, 1, &n, &err) != LW_OK || n == 0) {
    snprintf(out, cap, "OpenCL device 0 (not listed: %s)", err.message);
    return;
  }
  snprintf(out, cap, "OpenCL device 0 (%s / %s, %s)", dev[0].platform, dev[0].device, dev[0].type);
}
#endif

static const conf_backend_kernels_t k_table[] = {
    // sim: host shared objects (ELF), the test kernels of tests/kernels/ and the example
    // kernels of callables/kernels/, all built into LW_KERNEL_DIR.
    {"sim",
     {
         [CONF_K_RECORD] = {LW_KERNEL_DIR "/record.so", NULL, NULL},
         [CONF_K_GATE] = {LW_KERNEL_DIR "/gate.so", NULL, NULL},
         [CONF_K_FAIL] = {LW_KERNEL_DIR "/fail.so", NULL, NULL},
         [CONF_K_HOLD] = {LW_KERNEL_DIR "/prepare_gate.so", NULL, NULL},
     },
     sim_device_name},
    // opencl: OpenCL C sources kept beside this file (tests/conformance/opencl/).
    {"opencl",
     {
         [CONF_K_RECORD] = {LW_CONF_DIR "/opencl/record.cl", "conf_record", NULL, 0},
         // A long range of short work-items, sized on the device: the backend checks the
         // cancel word and copies the live words between the slices of a range, never inside
         // a kernel (gate.cl says why and how it holds).
         [CONF_K_GATE] = {LW_CONF_DIR "/opencl/gate.cl", "conf_gate", NULL, 0, false, true},
         [CONF_K_FAIL] = {NULL, NULL,
                          "an OpenCL kernel has no return value and the opencl backend reports "
                          "no kernel status (backend_opencl.c: kernel_rc is 0, or CANCELLED "
                          "when the cancel word stopped the range; only a launch error fails a "
                          "run)",
                          0},
         // The build's #include of a FIFO holds the register lane (opencl/hold.cl).
         [CONF_K_HOLD] = {LW_CONF_DIR "/opencl/hold.cl", "conf_hold", NULL, 0, true},
     },
#ifdef LW_HAVE_OPENCL
     opencl_device_name},
#else
     NULL},
#endif
    // cuda: CUDA C sources kept beside this file (tests/conformance/cuda/), compiled by NVRTC
    // on the register lane. Live tensors are mapped host memory, so the gate simply waits
    // (cuda/gate.cu says why that holds on a discrete GPU).
    {"cuda",
     {
         [CONF_K_RECORD] = {LW_CONF_DIR "/cuda/record.cu", "conf_record", NULL, 0},
         // Its #include of lanework/kernel_cuda.h needs no option: the backend hands NVRTC
         // the header in memory.
         [CONF_K_GATE] = {LW_CONF_DIR "/cuda/gate.cu", "conf_gate", NULL, 0},
         [CONF_K_FAIL] = {NULL, NULL,
                          "a CUDA kernel has no return value and the cuda backend reports no "
                          "kernel status (backend_cuda.c: kernel_rc is 0, or CANCELLED when the "
                          "stop word ended the kernel; only a launch or a device error fails a "
                          "run)",
                          0},
         // The OpenCL suite holds a register on an #include of a FIFO; NVRTC 13.0 opens such
         // a FIFO (the open waits for a writer) but then refuses it as "not a regular file",
         // and a cuda register runs nothing else of the test's: nothing can hold it.
         [CONF_K_HOLD] = {NULL, NULL,
                          "a cuda register is an NVRTC compile, which runs no code of the "
                          "test's, and NVRTC refuses an #include of a FIFO (\"not a regular "
                          "file\", NVRTC 13.0): there is no way to hold it until the test lets "
                          "it go",
                          0},
     },
     cuda_device_name},
};

// The signatures: part of the kernels' contract (conformance.h), the same on every backend.
static const uint8_t k_sig_record[] = {LW_PARAM_INOUT, LW_PARAM_SCALAR};
// The gate's words are live: the test opens the gate while the kernel runs, and waits for
// entered before it goes on (conformance.h).
static const uint8_t k_sig_gate[] = {LW_PARAM_IN | LW_PARAM_LIVE, LW_PARAM_OUT | LW_PARAM_LIVE};
static const uint8_t k_sig_fail[] = {LW_PARAM_INOUT, LW_PARAM_SCALAR};

typedef struct conf_signature {
  const char *name;
  uint32_t n_params;
  const uint8_t *param_dirs;
} conf_signature_t;

static const conf_signature_t k_signatures[CONF_K_COUNT] = {
    [CONF_K_RECORD] = {"conf_record", 2, k_sig_record},
    [CONF_K_GATE] = {"conf_gate", 2, k_sig_gate},
    [CONF_K_FAIL] = {"conf_fail", 2, k_sig_fail},
    [CONF_K_HOLD] = {"conf_hold", 0, NULL},
};

const char *conf_backend(void) { return LW_CONF_BACKEND; }

static const conf_backend_kernels_t *backend_row(void) {
  for (size_t i = 0; i < sizeof(k_table) / sizeof(k_table[0]); ++i) {
    if (strcmp(k_table[i].backend, LW_CONF_BACKEND) == 0) return &k_table[i];
  }
  // Never a skip: a backend in LW_CONFORMANCE_BACKENDS without kernels is a failure.
  cr_assert(false, "backend %s has no row in tests/conformance/backends.c: add its kernels",
                 LW_CONF_BACKEND);
  return NULL;
}

static void *read_file(const char *path, size_t *out_bytes) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s (build the kernels first)", path);
  cr_assert_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  cr_assert_gt(n, 0, "%s is empty", path);
  cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
  void *buf = malloc((size_t)n);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
  fclose(f);
  *out_bytes = (size_t)n;
  return buf;
}

// Puts the path after the first ':' of name in place of CONF_HOLD_MARKER in c's image (text)
// and makes that path a FIFO: the register's read of it waits until the test opens it.
static void hold_fifo_image(const char *name, lw_callable_t *c) {
  const char *path = name ? strchr(name, ':') : NULL;
  cr_assert_not_null(path, "the hold kernel's name must carry a path after ':' (got %s)",
                     name ? name : "none");
  path++;
  const char *text = c->image;
  const char *at = memmem(text, c->image_bytes, CONF_HOLD_MARKER, strlen(CONF_HOLD_MARKER));
  cr_assert_not_null(at, "the hold kernel's image has no %s", CONF_HOLD_MARKER);
  size_t head = (size_t)(at - text), marker = strlen(CONF_HOLD_MARKER), len = strlen(path);
  size_t tail = c->image_bytes - head - marker, bytes = head + len + tail;
  char *out = malloc(bytes);
  cr_assert_not_null(out);
  memcpy(out, text, head);
  memcpy(out + head, path, len);
  memcpy(out + head + len, at + marker, tail);
  free((void *)c->image);
  c->image = out;
  c->image_bytes = bytes;
  cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s: %s", path, strerror(errno));
}

// The image file at path, a path of the table above: this build's folder (LW_KERNEL_DIR or
// LW_CONF_DIR) is replaced by the one the environment names instead (lw_test_path), so the
// suite runs from a bundle on a machine without this build tree (scripts/gpu-check).
static void image_path(const char *path, char *out, size_t cap) {
  const struct {
    const char *var, *baked;
  } roots[] = {{"LW_TEST_KERNEL_DIR", LW_KERNEL_DIR}, {"LW_TEST_CONF_DIR", LW_CONF_DIR}};
  for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); ++i) {
    size_t n = strlen(roots[i].baked);
    if (strncmp(path, roots[i].baked, n) == 0 && path[n] == '/') {
      int len = snprintf(out, cap, "%s%s", lw_test_path(roots[i].var, roots[i].baked), path + n);
      cr_assert(len > 0 && (size_t)len < cap, "the path of %s is too long", path);
      return;
    }
  }
  snprintf(out, cap, "%s", path);
}

void conf_kernel_load(conf_kernel_t k, const char *name, lw_callable_t *out) {
  cr_assert(k < CONF_K_COUNT);
  const conf_kernel_source_t *src = &backend_row()->kernel[k];
  const conf_signature_t *sig = &k_signatures[k];
  if (!src->path) {
    cr_assert_not_null(src->missing, "backend %s: kernel %s has neither an image nor a reason",
                       LW_CONF_BACKEND, sig->name);
    cr_skip("backend %s has no %s kernel: %s", LW_CONF_BACKEND, sig->name, src->missing);
  }
  memset(out, 0, sizeof(*out));
  char path[4096];
  image_path(src->path, path, sizeof(path));
  out->image = read_file(path, &out->image_bytes);
  if (src->hold_fifo) hold_fifo_image(name, out);
  out->name = strdup(name ? name : sig->name);
  cr_assert_not_null(out->name);
  out->entry = src->entry;
  out->n_params = sig->n_params;
  out->param_dirs = sig->param_dirs;
}

// Sizing a range on the device (tests/hold_items.h): the probe runs closed gates (words nobody
// opens), whose every work-item polls its full count, as a held gate's do, through the level's
// own API, so at L3 it measures the device in the chip child. Only the gate is sized so.
typedef struct gate_probe {
  lw_callable_handle_t h;
  conf_gate_t *closed;
} gate_probe_t;

static uint64_t probe_closed_gate(uint64_t n, void *ctx) {
  gate_probe_t *p = ctx;
  conf_task_t t;
  memset(&t, 0, sizeof(t));
  t.callable = p->h;
  lw_args_init(&t.args);
  cr_assert_eq(lw_args_add_tensor(&t.args, (void *)&p->closed->open, 4, LW_TAG_NO_DEP), LW_OK);
  cr_assert_eq(lw_args_add_tensor(&t.args, (void *)&p->closed->entered, 4, LW_TAG_NO_DEP), LW_OK);
  uint64_t g[LW_MAX_LAUNCH_DIMS] = {n}, l[LW_MAX_LAUNCH_DIMS] = {0};
  cr_assert_eq(lw_args_set_launch(&t.args, 1, g, l), LW_OK);
  uint64_t ns = 0;
  lw_error_t err;
  memset(&err, 0, sizeof(err));
  lw_status_t st = conf_run_timed(&t, &ns, &err);
  cr_assert_eq(st, LW_OK, "probe of %llu gate work-items: %s: %s", (unsigned long long)n,
               lw_status_name(st), err.message);
  return ns;
}

static uint64_t hold_items(conf_kernel_t k, lw_callable_handle_t h) {
  static uint64_t cached[CONF_K_COUNT];
  if (cached[k]) return cached[k];
  cr_assert_eq(k, CONF_K_GATE, "only the gate's range is sized on the device");
  gate_probe_t p = {h, conf_alloc(sizeof(conf_gate_t))};
  cached[k] = lw_test_hold_items(probe_closed_gate, &p);
  if (cached[k] == 0) {
    // Decided from what the device reports, not from a time: without the device's own kernel
    // time there is no rate to size the range with.
    char dev[256] = "its device";
    if (backend_row()->device_name) backend_row()->device_name(dev, sizeof(dev));
    cr_skip("backend %s, %s: the gate's range is sized from the device's profiled kernel "
            "time, and this device reports none",
            LW_CONF_BACKEND, dev);
  }
  return cached[k];
}

void conf_kernel_geometry(conf_kernel_t k, lw_callable_handle_t h, lw_args_t *args) {
  cr_assert(k < CONF_K_COUNT);
  const conf_kernel_source_t *src = &backend_row()->kernel[k];
  uint64_t global = src->sized_on_device ? hold_items(k, h) : src->global;
  if (global == 0) return;
  uint64_t g[LW_MAX_LAUNCH_DIMS] = {global}, l[LW_MAX_LAUNCH_DIMS] = {0};
  cr_assert_eq(lw_args_set_launch(args, 1, g, l), LW_OK, "launch of %s: %s",
               k_signatures[k].name, lw_last_error()->message);
}

void conf_kernel_free(lw_callable_t *c) {
  free((void *)c->image);
  free((void *)c->name);
  memset(c, 0, sizeof(*c));
}
