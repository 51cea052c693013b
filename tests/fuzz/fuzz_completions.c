// tests/fuzz/fuzz_completions.c — the libFuzzer entry point; the harness is lw_fuzz_completions.
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return lw_fuzz_completions(data, size);
}
