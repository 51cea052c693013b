// tests/fuzz/fuzz_l4_wire.c — the libFuzzer entry point; the harness is lw_fuzz_l4_wire.
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return lw_fuzz_l4_wire(data, size);
}
