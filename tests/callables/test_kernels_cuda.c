// tests/callables/test_kernels_cuda.c — the CUDA C kernels of callables/kernels/cuda, as far as
// they can be checked without a CUDA compiler (tests/headers/check_kernel_cuda.cmake compiles
// them against a stand-in of CUDA's built-ins; a device compile needs NVRTC): each file in the
// kernel folder's cuda/ is taken for CUDA C by AUTO and passes its check, includes
// lanework/kernel_cuda.h, defines the extern "C" __global__ entry the benches register
// (lw_kernel_main, or the file's name for the two `bench fault` kernels), and polls the stop
// word where it loops; the big program holds its ~200 kernels; the
// copy of kernel_cuda.h beside them is the public header.
#include "callables/image.h"
#include "callables_test_util.h"

#ifndef LW_SOURCE_DIR
#error "LW_SOURCE_DIR must name the source tree"
#endif

TestSuite(kernels_cuda, .timeout = 60);

static char *read_file(const char *path, size_t *out_bytes) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s (build the project: the kernel folder gets its copy)",
                     path);
  cr_assert_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  cr_assert_gt(n, 0, "%s is empty", path);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
  fclose(f);
  buf[n] = '\0';
  *out_bytes = (size_t)n;
  return buf;
}

static char *read_kernel(const char *name, size_t *out_bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/cuda/%s.cu", lw_test_kernel_dir(), name);
  return read_file(path, out_bytes);
}

static size_t count(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) ++n;
  return n;
}

static const struct {
  const char *name;
  const char *entry;
  const char *poll;  // how it polls the stop word where it loops; NULL: it does not loop
} k_kernels[] = {
    {"vector_add", "lw_kernel_main", NULL},
    {"repeat_vector_add", "lw_kernel_main", "lw_cuda_block_should_stop()"},
    {"empty", "lw_kernel_main", NULL},
    {"big_program", "lw_kernel_main", NULL},
    {"hang", "lw_kernel_main", NULL},
    // One thread each: the thread's own poll.
    {"sleep_ms", "sleep_ms", "lw_cuda_should_stop()"},
    {"fault_after_ms", "fault_after_ms", "lw_cuda_should_stop()"},
};

Test(kernels_cuda, every_kernel_is_cuda_c_with_the_entry_the_benches_register) {
  for (size_t i = 0; i < sizeof k_kernels / sizeof k_kernels[0]; ++i) {
    const char *name = k_kernels[i].name;
    size_t n = 0;
    char *src = read_kernel(name, &n);
    const uint8_t *p = (const uint8_t *)src;
    cr_assert_eq(lw__image_detect_format(p, n), LW_IMAGE_CUDA_C, "%s.cu is not detected as CUDA C",
                 name);
    lw_error_t err;
    lw_image_bytes_t out;
    lw_image_format_t f = LW_IMAGE_AUTO;
    cr_assert_eq(lw__image_decode_format(p, n, name, LW_IMAGE_AUTO, &out, &f, &err), LW_OK,
                 "%s", err.message);
    cr_assert_eq(f, LW_IMAGE_CUDA_C);
    lw__image_bytes_release(&out);
    cr_assert_not_null(strstr(src, "#include \"lanework/kernel_cuda.h\"\n"),
                       "%s.cu does not include lanework/kernel_cuda.h", name);
    char entry[128];
    snprintf(entry, sizeof entry, "extern \"C\" __global__ void %s(", k_kernels[i].entry);
    cr_assert_eq(count(src, entry), 1, "%s.cu does not define the entry %s once", name,
                 k_kernels[i].entry);
    if (strcmp(name, "big_program") != 0) {
      cr_assert_eq(count(src, "__global__"), 1, "%s.cu holds one kernel", name);
    }
    if (k_kernels[i].poll) {
      cr_assert_not_null(strstr(src, k_kernels[i].poll),
                         "%s.cu loops without polling the stop word (%s)", name, k_kernels[i].poll);
    }
    free(src);
  }
}

Test(kernels_cuda, hang_never_reads_the_stop_word) {
  size_t n = 0;
  char *src = read_kernel("hang", &n);
  // The escalation bench needs a kernel a cancel cannot reach.
  cr_assert_null(strstr(src, "should_stop()"), "hang.cu polls the stop word");
  free(src);
}

Test(kernels_cuda, the_big_program_is_two_hundred_kernels_of_cuda_c) {
  size_t n = 0;
  char *src = read_kernel("big_program", &n);
  // 200 stage kernels and lw_big_nonce (compiled only with -DLW_BENCH_NONCE).
  cr_assert_eq(count(src, "extern \"C\" __global__ void lw_big_"), 201);
  cr_assert_eq(count(src, "extern \"C\" __global__ void lw_big_nonce("), 1);
  // Inlined: a stage applied WEIGHT times is WEIGHT times the code to compile.
  cr_assert_eq(count(src, "__device__ __forceinline__ float lw_big_stage_"), 200);
  cr_assert(n > 50000 && n < 100000, "big_program.cu is %zu bytes", n);
  // Each stage is distinct: its constant differs.
  cr_assert_not_null(strstr(src, "sinf(y + 199.0f)"));
  free(src);
}

Test(kernels_cuda, the_kernel_folder_carries_the_public_kernel_cuda_h) {
  size_t a = 0, b = 0;
  char copy_path[4096];
  snprintf(copy_path, sizeof copy_path, "%s/cuda/lanework/kernel_cuda.h", lw_test_kernel_dir());
  char *copy = read_file(copy_path, &a);
  char *header = read_file(LW_SOURCE_DIR "/include/lanework/kernel_cuda.h", &b);
  cr_assert_eq(a, b, "%s differs from include/lanework/kernel_cuda.h", copy_path);
  cr_assert_eq(memcmp(copy, header, a), 0, "%s differs from include/lanework/kernel_cuda.h",
               copy_path);
  // The contract the backend looks up.
  cr_assert_not_null(strstr(header, "__device__ const volatile lw_cuda_stop_word_t *lw__cuda_stop;"));
  cr_assert_not_null(strstr(header, "#define LW_CUDA_STOP_SYMBOL \"lw__cuda_stop\""));
  free(copy);
  free(header);
}
