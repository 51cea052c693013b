// tools/info.c — `lanework info [--json]`: the version and the versions of the two contracts a
// build must agree on (kernel ABI, mailbox protocol), the backends and their devices, the
// NUMA nodes, the kernel folder (and whether it is there) and the limits of the API.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child/backend.h"
#include "lanes/json.h"
#include "lanework/kernel.h"
#include "lanework/lanework.h"
#include "mailbox/mailbox.h"
#include "parent/fs_helper.h"
#include "tools/cli.h"
#include "tools/tool.h"

enum { K_JSON = 1 };

static const lw_cli_opt_t info_opts[] = {
    {.name = "json", .kind = LW_CLI_FLAG, .key = K_JSON,
     .help = "print one JSON object (schema lanework.info) instead of the text"},
    {.name = NULL},
};

static const lw_cli_cmd_t info_cmd = {
    .name = "info",
    .synopsis = "[--json]",
    .about = "The version, the kernel ABI and mailbox protocol versions, the backends and their\n"
             "devices, the NUMA nodes, the kernel folder (and whether it exists) and the limits.",
    .opts = info_opts,
    .max_positional = 0,
};

// What `lanework info` found about the kernel folder.
typedef struct kernel_dir {
  const char *path;
  bool exists;     // a folder
  int images;      // *.so and *.lwk files in it
  const char *why; // why it is not usable, or NULL
} kernel_dir_t;

static void kernel_dir_check(kernel_dir_t *k) {
  k->path = lw__tool_kernel_dir();
  k->images = 0;
  k->why = NULL;
  struct stat st;
  if (stat(k->path, &st) != 0) {
    k->exists = false;
    k->why = "no such folder";
    return;
  }
  k->exists = S_ISDIR(st.st_mode);
  if (!k->exists) {
    k->why = "not a folder";
    return;
  }
  DIR *d = opendir(k->path);
  if (!d) {
    k->why = "cannot be read";
    return;
  }
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if ((n > 3 && strcmp(e->d_name + n - 3, ".so") == 0) ||
        (n > 4 && strcmp(e->d_name + n - 4, ".lwk") == 0)) {
      ++k->images;
    }
  }
  closedir(d);
}

void lw__tool_read_line(const char *path, char *buf, size_t size) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (fgets(buf, (int)size, f)) buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

#define MAX_NODES 64

typedef struct numa_node {
  int node;
  char cpus[128];  // its cpulist, "0-7,16-23"
} numa_node_t;

// The online NUMA nodes from sysfs (none on a kernel without NUMA: then the machine is one
// node and the list is empty).
static int numa_nodes(numa_node_t *out, int cap) {
  int n = 0;
  DIR *d = opendir("/sys/devices/system/node");
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL && n < cap;) {
    int node;
    char tail;
    if (sscanf(e->d_name, "node%d%c", &node, &tail) != 1) continue;
    char path[128];
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
    out[n].node = node;
    lw__tool_read_line(path, out[n].cpus, sizeof(out[n].cpus));
    ++n;
  }
  closedir(d);
  // readdir's order is the folder's; the list reads by node number.
  for (int i = 1; i < n; ++i) {
    for (int j = i; j > 0 && out[j - 1].node > out[j].node; --j) {
      numa_node_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  }
  return n;
}

#ifdef LW_HAVE_OPENCL
enum { kMaxDevices = 64 };
#endif

// The OpenCL devices in device_id order (what an "opencl" chip's device_id indexes), or why
// there are none.
static void info_opencl_text(void) {
#ifdef LW_HAVE_OPENCL
  lw_opencl_device_info_t devs[kMaxDevices];
  uint32_t n = 0;
  lw_error_t err;
  if (lw__opencl_list(devs, kMaxDevices, &n, &err) != LW_OK) {
    printf("opencl:     %s\n", err.message);
    return;
  }
  printf("opencl:     %u device%s (device_id: platform / device, type, compute units, "
         "version)\n",
         n, n == 1 ? "" : "s");
  for (uint32_t i = 0; i < n && i < kMaxDevices; ++i) {
    printf("  %2d: %s / %s, %s, %u CU, %s\n", devs[i].index, devs[i].platform, devs[i].device,
           devs[i].type, devs[i].compute_units, devs[i].version);
  }
#else
  printf("opencl:     %s\n", lw__backend_missing_reason("opencl"));
#endif
}

static void info_opencl_json(lw_json_t *j) {
  lw__json_begin_object(j);
  lw__json_kv_string(j, "name", "opencl");
#ifdef LW_HAVE_OPENCL
  lw__json_kv_bool(j, "built", true);
  lw_opencl_device_info_t devs[kMaxDevices];
  uint32_t n = 0;
  lw_error_t err;
  bool ok = lw__opencl_list(devs, kMaxDevices, &n, &err) == LW_OK;
  lw__json_kv_bool(j, "available", ok);
  lw__json_kv_string(j, "reason", ok ? NULL : err.message);
  lw__json_key(j, "devices");
  lw__json_begin_array(j);
  for (uint32_t i = 0; ok && i < n && i < kMaxDevices; ++i) {
    lw__json_begin_object(j);
    lw__json_kv_int(j, "device_id", devs[i].index);
    lw__json_kv_string(j, "platform", devs[i].platform);
    lw__json_kv_string(j, "device", devs[i].device);
    lw__json_kv_string(j, "type", devs[i].type);
    lw__json_kv_uint(j, "compute_units", devs[i].compute_units);
    lw__json_kv_string(j, "version", devs[i].version);
    lw__json_end_object(j);
  }
  lw__json_end_array(j);
#else
  lw__json_kv_bool(j, "built", false);
  lw__json_kv_bool(j, "available", false);
  lw__json_kv_string(j, "reason", lw__backend_missing_reason("opencl"));
  lw__json_key(j, "devices");
  lw__json_begin_array(j);
  lw__json_end_array(j);
#endif
  lw__json_end_object(j);
}

enum { kMaxCudaDevices = 64 };

// CUDA as a "cuda" chip sees it: the driver and NVRTC versions and the devices in device_id
// order, or why there are none. The driver is loaded and initialised in this process (a tool;
// a worker's parent never calls into CUDA).
static void info_cuda_text(void) {
  lw_cuda_info_t info;
  lw_cuda_device_info_t devs[kMaxCudaDevices];
  uint32_t n = 0;
  lw_error_t err;
  if (lw__cuda_list(&info, devs, kMaxCudaDevices, &n, &err) != LW_OK) {
    // The backend's messages start "cuda: ", which the line already says.
    const char *why = strncmp(err.message, "cuda: ", 6) == 0 ? err.message + 6 : err.message;
    printf("cuda:       %s\n", why);
    return;
  }
  char nvrtc[LW_ERROR_MESSAGE_BYTES + 16];
  if (info.nvrtc_missing[0]) {
    snprintf(nvrtc, sizeof(nvrtc), "none: %s", info.nvrtc_missing);
  } else {
    snprintf(nvrtc, sizeof(nvrtc), "%d.%d", info.nvrtc_major, info.nvrtc_minor);
  }
  printf("cuda:       %u device%s, driver %d.%d (%s), NVRTC %s\n", n, n == 1 ? "" : "s",
         info.driver_version / 1000, info.driver_version % 1000 / 10, info.driver_path, nvrtc);
  for (uint32_t i = 0; i < n && i < kMaxCudaDevices; ++i) {
    printf("  %2d: %s, sm_%d%d, %u SMs, %.1f GiB, %s\n", devs[i].index, devs[i].name,
           devs[i].cc_major, devs[i].cc_minor, devs[i].multiprocessors,
           (double)devs[i].memory_bytes / (double)(1ull << 30), devs[i].uuid);
  }
  // How chips map onto these devices (docs/cuda.md, "Chips").
  printf("            a cuda chip per device (device_id, or LW_CUDA_DEVICES by UUID); several\n"
         "            chips on one device only when asked (the worker's n_devices): they\n"
         "            time-share it, each in its own context\n");
}

static void info_cuda_json(lw_json_t *j) {
  lw__json_begin_object(j);
  lw__json_kv_string(j, "name", "cuda");
  lw__json_kv_bool(j, "built", true);
  lw_cuda_info_t info;
  lw_cuda_device_info_t devs[kMaxCudaDevices];
  uint32_t n = 0;
  lw_error_t err;
  bool ok = lw__cuda_list(&info, devs, kMaxCudaDevices, &n, &err) == LW_OK;
  lw__json_kv_bool(j, "available", ok);
  lw__json_kv_string(j, "reason", ok ? NULL : err.message);
  lw__json_kv_int(j, "driver_version", info.driver_version);
  char nvrtc[32];
  snprintf(nvrtc, sizeof(nvrtc), "%d.%d", info.nvrtc_major, info.nvrtc_minor);
  lw__json_kv_string(j, "nvrtc_version", info.nvrtc_missing[0] ? NULL : nvrtc);
  lw__json_kv_string(j, "nvrtc_reason", info.nvrtc_missing[0] ? info.nvrtc_missing : NULL);
  lw__json_key(j, "devices");
  lw__json_begin_array(j);
  for (uint32_t i = 0; ok && i < n && i < kMaxCudaDevices; ++i) {
    lw__json_begin_object(j);
    lw__json_kv_int(j, "device_id", devs[i].index);
    lw__json_kv_string(j, "device", devs[i].name);
    char sm[16];
    snprintf(sm, sizeof(sm), "sm_%d%d", devs[i].cc_major, devs[i].cc_minor);
    lw__json_kv_string(j, "sm", sm);
    lw__json_kv_uint(j, "multiprocessors", devs[i].multiprocessors);
    lw__json_kv_uint(j, "memory_bytes", devs[i].memory_bytes);
    lw__json_kv_string(j, "uuid", devs[i].uuid);
    lw__json_end_object(j);
  }
  lw__json_end_array(j);
  lw__json_end_object(j);
}

static int info_json(const kernel_dir_t *k, const numa_node_t *nodes, int n_nodes) {
  lw_json_t j;
  lw__json_initialize(&j, stdout, false);
  lw__json_begin_object(&j);
  lw__json_kv_string(&j, "schema", "lanework.info");
  lw__json_kv_int(&j, "schema_version", LW_TOOL_JSON_SCHEMA_VERSION);
  lw__json_kv_string(&j, "version", lw_version());
  lw__json_kv_uint(&j, "kernel_abi_version", LW_KERNEL_ABI_VERSION);
  lw__json_kv_uint(&j, "mailbox_protocol_version", LW_MB_VERSION);
  lw__json_key(&j, "backends");
  lw__json_begin_array(&j);
  lw__json_begin_object(&j);
  lw__json_kv_string(&j, "name", "sim");
  lw__json_kv_bool(&j, "built", true);
  lw__json_kv_bool(&j, "available", true);
  lw__json_kv_string(&j, "reason", NULL);
  lw__json_end_object(&j);
  info_opencl_json(&j);
  info_cuda_json(&j);
  lw__json_end_array(&j);
  lw__json_kv_int(&j, "cpus_online", sysconf(_SC_NPROCESSORS_ONLN));
  lw__json_key(&j, "numa_nodes");
  lw__json_begin_array(&j);
  for (int i = 0; i < n_nodes; ++i) {
    lw__json_begin_object(&j);
    lw__json_kv_int(&j, "node", nodes[i].node);
    lw__json_kv_string(&j, "cpus", nodes[i].cpus);
    lw__json_end_object(&j);
  }
  lw__json_end_array(&j);
  lw__json_key(&j, "kernel_dir");
  lw__json_begin_object(&j);
  lw__json_kv_string(&j, "path", k->path);
  lw__json_kv_bool(&j, "exists", k->exists);
  lw__json_kv_int(&j, "images", k->images);
  lw__json_kv_string(&j, "problem", k->why);
  lw__json_end_object(&j);
  const char *tried = NULL;
  const char *helper = lw__fs_helper_path(&tried);
  lw__json_key(&j, "forkserver");
  lw__json_begin_object(&j);
  lw__json_kv_string(&j, "path", helper);
  lw__json_kv_string(&j, "tried", tried);
  lw__json_end_object(&j);
  lw__json_key(&j, "limits");
  lw__json_begin_object(&j);
  lw__json_kv_uint(&j, "max_params", LW_MAX_PARAMS);
  lw__json_kv_uint(&j, "max_tensors", LW_MAX_TENSORS);
  lw__json_kv_uint(&j, "max_scalars", LW_MAX_SCALARS);
  lw__json_kv_uint(&j, "max_launch_dims", LW_MAX_LAUNCH_DIMS);
  lw__json_kv_uint(&j, "max_image_bytes", LW_MAX_IMAGE_BYTES);
  lw__json_kv_uint(&j, "max_build_options_bytes", LW_MAX_BUILD_OPTIONS_BYTES);
  lw__json_kv_uint(&j, "max_chips", LW_MAX_CHIPS);
  lw__json_kv_uint(&j, "max_subs", LW_MAX_SUBS);
  lw__json_end_object(&j);
  lw__json_end_object(&j);
  lw_error_t err;
  if (lw__json_finish(&j, &err) != LW_OK) {
    fprintf(stderr, "lanework info: --json: %s\n", err.message);
    return 1;
  }
  return 0;
}

static int on_opt(void *user, const lw_cli_opt_t *opt, const lw_cli_value_t *v) {
  (void)v;
  if (opt->key == K_JSON) *(bool *)user = true;
  return LW_CLI_OK;
}

int lw__tool_info(int argc, char **argv) {
  bool json = false;
  int rc = lw__cli_parse(&info_cmd, argc, argv, on_opt, &json, NULL);
  if (rc == LW_CLI_HELP) return 0;
  if (rc != LW_CLI_OK) return 2;
  kernel_dir_t k;
  kernel_dir_check(&k);
  numa_node_t nodes[MAX_NODES];
  int n_nodes = numa_nodes(nodes, MAX_NODES);
  if (json) return info_json(&k, nodes, n_nodes);

  printf("lanework %s\n", lw_version());
  printf("versions:   kernel ABI %u, mailbox protocol %u\n", LW_KERNEL_ABI_VERSION,
         LW_MB_VERSION);
  printf("backends:   %s\n", lw__backend_names());
  if (k.why) {
    const char *env = getenv("LW_KERNEL_DIR");
    printf("kernels:    %s: %s (%s)\n", k.path, k.why,
           env && *env ? "from LW_KERNEL_DIR; point it at the folder of the built kernels"
                       : "set LW_KERNEL_DIR to the folder of the built kernels");
  } else {
    printf("kernels:    %s (%d image%s)\n", k.path, k.images, k.images == 1 ? "" : "s");
  }
  const char *tried = NULL;
  const char *helper = lw__fs_helper_path(&tried);
  if (helper != NULL) {
    printf("forkserver: %s\n", helper);
  } else {
    printf("forkserver: not found (tried: %s; set LW_FORKSERVER_EXE to its path): an L3 worker "
           "cannot start its chip children\n",
           tried);
  }
  printf("cpus:       %ld online\n", sysconf(_SC_NPROCESSORS_ONLN));
  if (n_nodes == 0) {
    printf("numa:       no NUMA information (/sys/devices/system/node)\n");
  } else {
    printf("numa:       %d node%s:", n_nodes, n_nodes == 1 ? "" : "s");
    for (int i = 0; i < n_nodes; ++i) {
      printf("%s node %d (cpus %s)", i ? "," : "", nodes[i].node, nodes[i].cpus);
    }
    printf("\n");
  }
  printf("limits:     %u params (%u tensors, %u scalars), %u launch dims, %llu MiB images, "
         "%u chips, %u subs\n",
         LW_MAX_PARAMS, LW_MAX_TENSORS, LW_MAX_SCALARS, LW_MAX_LAUNCH_DIMS,
         (unsigned long long)(LW_MAX_IMAGE_BYTES >> 20), LW_MAX_CHIPS, LW_MAX_SUBS);
  info_opencl_text();
  info_cuda_text();
  return 0;
}
