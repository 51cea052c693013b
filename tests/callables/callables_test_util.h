// tests/callables/callables_test_util.h — helpers shared by the callables tests: reading the
// built kernel images and counting open descriptors.
#ifndef LANEWORK_TESTS_CALLABLES_TEST_UTIL_H_
#define LANEWORK_TESTS_CALLABLES_TEST_UTIL_H_

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/kernel.h"
#include "test_util.h"

#ifndef LW_KERNEL_DIR
#error "LW_KERNEL_DIR must name the folder of built kernel images"
#endif

// Reads LW_KERNEL_DIR/<name>.so into a malloc'ed buffer; fails the test if it cannot.
static inline uint8_t *test_read_kernel(const char *name, size_t *out_bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.so", lw_test_kernel_dir(), name);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s (build the lw_kernels target)", path);
  cr_assert_eq(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  cr_assert_gt(n, 0, "%s is empty", path);
  cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
  uint8_t *buf = malloc((size_t)n);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
  fclose(f);
  *out_bytes = (size_t)n;
  return buf;
}

static inline void test_kernel_path(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s.so", lw_test_kernel_dir(), name);
}

// Open descriptors of this process (the directory stream's own fd not counted).
static inline int test_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n - 1;
}

// A kernel context for calling an image's entry points directly: its cancel word holds the
// generation, so lw_kernel_should_stop says false until test_ctx_cancel.
typedef struct test_ctx {
  _Atomic uint64_t word;
  lw_kernel_ctx_t ctx;
} test_ctx_t;

static inline void test_ctx_init(test_ctx_t *t, const char *name) {
  atomic_store(&t->word, 42);
  t->ctx = (lw_kernel_ctx_t){
      .abi_version = LW_KERNEL_ABI_VERSION,
      .chip_id = 0,
      .cancel_word = &t->word,
      .generation = 42,
      .state = NULL,
      .name = name,
  };
}

static inline void test_ctx_cancel(test_ctx_t *t) { atomic_fetch_or(&t->word, 1); }

#endif  // LANEWORK_TESTS_CALLABLES_TEST_UTIL_H_
