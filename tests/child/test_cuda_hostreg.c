// tests/child/test_cuda_hostreg.c — the process's table of CUDA host registrations
// (child/cuda_hostreg.h) over a driver of two functions that count calls and refuse
// overlapping registrations as the real one does.
#include <criterion/criterion.h>
#include <string.h>

#include "child/cuda_hostreg.h"

#define MAX_RANGES 16
static struct { uintptr_t lo, hi; } ranges[MAX_RANGES];
static int registers, unregisters;

static lw_cu_result_t fake_register(void *p, size_t bytes, unsigned flags) {
  (void)flags;
  uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
  for (int i = 0; i < MAX_RANGES; ++i) {
    if (ranges[i].hi && lo < ranges[i].hi && ranges[i].lo < hi) {
      return LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
  }
  for (int i = 0; i < MAX_RANGES; ++i) {
    if (!ranges[i].hi) {
      ranges[i].lo = lo;
      ranges[i].hi = hi;
      registers++;
      return LW_CU_SUCCESS;
    }
  }
  return LW_CU_ERROR_OUT_OF_MEMORY;
}

static lw_cu_result_t fake_unregister(void *p) {
  for (int i = 0; i < MAX_RANGES; ++i) {
    if (ranges[i].hi && ranges[i].lo == (uintptr_t)p) {
      ranges[i].lo = ranges[i].hi = 0;
      unregisters++;
      return LW_CU_SUCCESS;
    }
  }
  return LW_CU_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static lw_cuda_driver_t api;
static char chip_a, chip_b;  // two devices' identities
static _Alignas(64) unsigned char mem[1 << 16];

static void setup(void) {
  memset(&api, 0, sizeof(api));
  api.cuMemHostRegister = fake_register;
  api.cuMemHostUnregister = fake_unregister;
  memset(ranges, 0, sizeof(ranges));
  registers = unregisters = 0;
}

static void teardown(void) {
  lw__cuda_hostreg_forget(&api, &chip_a);
  lw__cuda_hostreg_forget(&api, &chip_b);
}

TestSuite(cuda_hostreg, .init = setup, .fini = teardown, .timeout = 10);

static void *take(const void *owner, size_t offset, size_t bytes) {
  void *base = (void *)1;
  cr_assert_eq(lw__cuda_hostreg_take(&api, owner, mem + offset, bytes, &base), LW_CU_SUCCESS);
  return base;
}

Test(cuda_hostreg, two_chips_on_one_buffer_share_one_registration_until_both_dropped_it) {
  void *a = take(&chip_a, 0, 4096);
  void *b = take(&chip_b, 0, 4096);
  cr_assert_eq(a, mem);
  cr_assert_eq(b, mem, "the second run holds the same registration");
  cr_assert_eq(registers, 1);
  lw__cuda_hostreg_drop(a);
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 0, "never unregistered under a run that holds it");
  lw__cuda_hostreg_drop(b);
  cr_assert_eq(unregisters, 0, "a drop does not call the driver");
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 1);
  cr_assert_eq(lw__cuda_hostreg_count(), 0);
}

Test(cuda_hostreg, a_tensor_inside_a_held_registration_takes_a_reference_on_it) {
  void *whole = take(&chip_a, 0, 8192);
  void *part = take(&chip_a, 1024, 512);
  cr_assert_eq(part, whole);
  cr_assert_eq(registers, 1);
  lw__cuda_hostreg_drop(whole);
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 0, "the part still holds it");
  lw__cuda_hostreg_drop(part);
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 1);
}

// After a handle finished the program may free the memory and get other pages at the same
// address: a released registration is unregistered and made again, never handed out.
Test(cuda_hostreg, a_released_registration_is_made_again_not_reused) {
  lw__cuda_hostreg_drop(take(&chip_a, 0, 4096));
  void *again = take(&chip_b, 1024, 1024);
  cr_assert_eq(again, mem + 1024);
  cr_assert_eq(unregisters, 1, "the released one went first");
  cr_assert_eq(registers, 2);
  lw__cuda_hostreg_drop(again);
}

Test(cuda_hostreg, pages_registered_by_someone_else_are_mapped_without_a_reference) {
  cr_assert_eq(fake_register(mem + 4096, 4096, 0), LW_CU_SUCCESS);  // the program's
  cr_assert_null(take(&chip_a, 4096, 128), "no reference on what the table does not hold");
  void *live = take(&chip_a, 0, 4096);
  cr_assert_null(take(&chip_b, 2048, 4096), "straddling a held one: the driver's mapping");
  lw__cuda_hostreg_drop(live);
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 1, "only the table's own registration");
  cr_assert_eq(fake_unregister(mem + 4096), LW_CU_SUCCESS, "the program's stays");
}

Test(cuda_hostreg, a_closing_chip_takes_its_registrations_out_of_the_table) {
  void *held = take(&chip_a, 0, 4096);
  lw__cuda_hostreg_drop(take(&chip_a, 8192, 4096));
  void *other = take(&chip_b, 16384, 4096);
  lw__cuda_hostreg_forget(&api, &chip_a);
  cr_assert_eq(unregisters, 1, "its released one unregistered, the held one ends with its context");
  cr_assert_eq(lw__cuda_hostreg_count(), 1, "chip b's stays");
  lw__cuda_hostreg_drop(held);  // a drop of an entry the table forgot does nothing
  lw__cuda_hostreg_drop(other);
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(lw__cuda_hostreg_count(), 0);
}
