// tests/child/test_cuda_hostreg.c — the process's table of CUDA host registrations
// (child/cuda_hostreg.h) over a driver of two functions that count calls and refuse
// overlapping registrations as the real one does.
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

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
  api.cuMemHostUnregister = fake_unregister;
  lw__cuda_hostreg_forget(&api, &chip_a);
  lw__cuda_hostreg_forget(&api, &chip_b);
}

TestSuite(cuda_hostreg, .init = setup, .fini = teardown, .timeout = 10);

static uint64_t take(const void *owner, size_t offset, size_t bytes) {
  uint64_t ref = UINT64_MAX;
  cr_assert_eq(lw__cuda_hostreg_take(&api, owner, mem + offset, bytes, &ref), LW_CU_SUCCESS);
  return ref;
}

Test(cuda_hostreg, two_chips_on_one_buffer_share_one_registration_until_both_dropped_it) {
  uint64_t a = take(&chip_a, 0, 4096);
  uint64_t b = take(&chip_b, 0, 4096);
  cr_assert_neq(a, 0);
  cr_assert_eq(b, a, "the second run holds the same registration");
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
  uint64_t whole = take(&chip_a, 0, 8192);
  uint64_t part = take(&chip_a, 1024, 512);
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
// address: a released registration is unregistered and made again, never handed out; and the
// old reference, dropped late, does not touch the new one.
Test(cuda_hostreg, a_released_registration_is_made_again_not_reused) {
  uint64_t old = take(&chip_a, 0, 4096);
  lw__cuda_hostreg_drop(old);
  uint64_t again = take(&chip_b, 0, 4096);
  cr_assert_neq(again, old, "a new registration, under a new name");
  cr_assert_eq(unregisters, 1, "the released one went first");
  cr_assert_eq(registers, 2);
  lw__cuda_hostreg_drop(old);  // stale: ignored
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 1, "the new one is still held");
  lw__cuda_hostreg_drop(again);
}

Test(cuda_hostreg, pages_the_program_registered_are_mapped_without_a_reference) {
  cr_assert_eq(fake_register(mem + 4096, 4096, 0), LW_CU_SUCCESS);  // the program's
  cr_assert_eq(take(&chip_a, 4096, 128), 0, "no reference on what the table does not hold");
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(unregisters, 0, "the program's registration stays");
  cr_assert_eq(fake_unregister(mem + 4096), LW_CU_SUCCESS);
}

// A held registration covering only part of a range would map only that part: refused.
Test(cuda_hostreg, a_range_straddling_a_held_registration_is_refused) {
  uint64_t held = take(&chip_a, 0, 4096);
  uint64_t ref = UINT64_MAX;
  cr_assert_eq(lw__cuda_hostreg_take(&api, &chip_b, mem + 2048, 4096, &ref),
               LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  cr_assert_eq(ref, 0);
  lw__cuda_hostreg_drop(held);
  // Released, it no longer stands in the way: unregistered, and the range registered whole.
  uint64_t whole = take(&chip_b, 2048, 4096);
  cr_assert_neq(whole, 0);
  cr_assert_eq(unregisters, 1);
  lw__cuda_hostreg_drop(whole);
}

typedef struct late_drop {
  uint64_t ref;
  _Atomic int dropped;
} late_drop_t;

static void *drop_later(void *p) {
  late_drop_t *l = p;
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  atomic_store(&l->dropped, 1);
  lw__cuda_hostreg_drop(l->ref);
  return NULL;
}

// A closing chip's registration that another chip's run still holds ends with the closing
// chip's context: close waits for the run to drop it, then unregisters it.
Test(cuda_hostreg, a_closing_chip_waits_for_other_chips_runs_on_its_registrations) {
  uint64_t mine = take(&chip_a, 0, 4096);
  late_drop_t l = {.ref = take(&chip_b, 0, 4096)};  // chip b's run on chip a's registration
  lw__cuda_hostreg_drop(mine);
  uint64_t other = take(&chip_b, 16384, 4096);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, drop_later, &l), 0);
  lw__cuda_hostreg_forget(&api, &chip_a);
  cr_assert(atomic_load(&l.dropped), "forget returned only after chip b's run dropped it");
  cr_assert_eq(unregisters, 1, "then it unregistered it");
  cr_assert_eq(lw__cuda_hostreg_count(), 1, "chip b's own registration stays");
  pthread_join(t, NULL);
  lw__cuda_hostreg_drop(other);
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(lw__cuda_hostreg_count(), 0);
}

// An unregister the driver refuses keeps the entry, to be tried again.
static int refusals;
static lw_cu_result_t refusing_unregister(void *p) {
  if (refusals > 0) {
    refusals--;
    return LW_CU_ERROR_INVALID_CONTEXT;
  }
  return fake_unregister(p);
}

Test(cuda_hostreg, a_failed_unregister_keeps_the_registration_for_the_next_flush) {
  api.cuMemHostUnregister = refusing_unregister;
  refusals = 1;
  lw__cuda_hostreg_drop(take(&chip_a, 0, 4096));
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(lw__cuda_hostreg_count(), 1, "kept");
  lw__cuda_hostreg_flush(&api);
  cr_assert_eq(lw__cuda_hostreg_count(), 0);
  cr_assert_eq(unregisters, 1);
}
