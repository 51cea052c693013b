// tests/fuzz/fuzz_image_check.c — the libFuzzer entry point; the harness is lw_fuzz_image_check.
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return lw_fuzz_image_check(data, size);
}
