// tests/mailbox/test_fuzz_corpus.c — replays the committed fuzz corpus (tests/fuzz/corpus/)
// through the same harnesses the libFuzzer targets run (tests/fuzz/harness_*.c), so every
// build exercises them without clang. Each file is replayed whole and cut at every 16 bytes
// (short inputs take the zero-filled paths). A violated invariant prints the input's name and
// traps, which fails the test.
//
// Only the Criterion subset that tests/tsan_shim supports is used.
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/fuzz_harness.h"

typedef int (*harness_fn)(const uint8_t *data, size_t size);

// Reads path into a malloc'ed buffer (never NULL, even when empty); returns its size.
static uint8_t *read_file(const char *path, size_t *out_size) {
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

// Replays every file of corpus/<target>; returns how many there were. Every seed is longer than
// the harness's parameter block (params_size): its other bytes are what it lays over the
// mailbox, so a seed written for an older, shorter block (the frame count grew) fails here
// instead of testing nothing. Regenerate with lw_fuzz_make_corpus (tests/fuzz/CMakeLists.txt).
static int replay(const char *target, harness_fn fn, size_t params_size) {
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/%s", LW_FUZZ_CORPUS_DIR, target);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "no corpus folder %s", dir);
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    size_t size;
    uint8_t *data = read_file(path, &size);
    cr_assert_gt(size, params_size, "%s: %zu bytes, no more than the %zu-byte parameter block: "
                 "a stale seed (regenerate the corpus)", path, size, params_size);
    lw__fuzz_input_name = path;
    for (size_t cut = 0; cut < size; cut += 16) fn(data, cut);
    fn(data, size);
    lw__fuzz_input_name = NULL;
    free(data);
    ++files;
  }
  closedir(d);
  return files;
}

Test(fuzz_corpus, take_task_seeds_keep_the_child_decoder_invariants, .timeout = 60) {
  cr_assert_gt(replay("take_task", lw_fuzz_take_task, sizeof(lw_fuzz_task_params_t)), 0, "empty take_task corpus");
}

Test(fuzz_corpus, take_control_seeds_keep_the_child_decoder_invariants, .timeout = 60) {
  cr_assert_gt(replay("take_control", lw_fuzz_take_control, sizeof(lw_fuzz_control_params_t)), 0, "empty take_control corpus");
}

Test(fuzz_corpus, completion_seeds_keep_the_parent_validator_invariants, .timeout = 60) {
  cr_assert_gt(replay("completions", lw_fuzz_completions, sizeof(lw_fuzz_completion_params_t)), 0, "empty completions corpus");
}

// The L4's messages (parent/l4_wire.h) as another rank could send them.
Test(fuzz_corpus, l4_wire_seeds_decode_within_bounds_or_fail_clearly, .timeout = 60) {
  cr_assert_gt(replay("l4_wire", lw_fuzz_l4_wire, sizeof(lw_fuzz_l4_params_t)), 0,
               "empty l4_wire corpus");
}

Test(fuzz_corpus, args_seeds_decode_inside_the_arena_or_fail_clearly, .timeout = 60) {
  cr_assert_gt(replay("args_decode", lw_fuzz_args_decode, sizeof(lw_fuzz_args_params_t)), 0, "empty args_decode corpus");
}
