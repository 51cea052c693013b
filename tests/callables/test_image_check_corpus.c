// tests/callables/test_image_check_corpus.c — replays the committed image_check fuzz corpus
// (tests/fuzz/corpus/image_check/) through the harness the libFuzzer target runs
// (tests/fuzz/harness_image_check.c), so every build exercises it without clang. Each seed is
// replayed whole and cut at every byte (a seed is a kernel image: every cut is a truncated
// one). A violated invariant prints the input's name and traps, which fails the test.
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "callables/image_check.h"
#include "fuzz/fuzz_harness.h"

static uint8_t *read_seed(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  cr_assert_eq(fseek(f, 0, SEEK_END), 0, "cannot seek %s", path);
  long n = ftell(f);
  cr_assert_geq(n, 0, "cannot size %s", path);
  rewind(f);
  uint8_t *buf = malloc((size_t)n + 1);
  cr_assert_not_null(buf, "out of memory");
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "cannot read %s", path);
  fclose(f);
  *out_size = (size_t)n;
  return buf;
}

Test(image_check_corpus, seeds_and_every_cut_of_them_keep_the_check_invariants, .timeout = 120) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/image_check", LW_FUZZ_CORPUS_DIR);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "no corpus folder %s", dir);
  int files = 0;
  bool kernel_seen = false;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    size_t size;
    uint8_t *data = read_seed(path, &size);
    lw__fuzz_input_name = path;
    for (size_t cut = 0; cut <= size; ++cut) lw_fuzz_image_check(data, cut);
    lw__fuzz_input_name = NULL;
    if (strcmp(e->d_name, "tiny_kernel") == 0) {
      // The seed the fuzzer grows from is a kernel the check accepts (on the machine it was
      // built for; the committed one is x86-64).
      lw_error_t err;
#if defined(__x86_64__)
      cr_assert_eq(lw__image_check_elf(data, size, "tiny_kernel", &err), LW_OK, "%s",
                   err.message);
#endif
      kernel_seen = true;
    }
    free(data);
    ++files;
  }
  closedir(d);
  cr_assert_gt(files, 0, "empty image_check corpus");
  cr_assert(kernel_seen, "no tiny_kernel seed in %s", dir);
}
