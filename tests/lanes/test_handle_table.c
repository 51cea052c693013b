// tests/lanes/test_handle_table.c — the generational handle table: ids, stale ids, reuse,
// full tables and the generation wrap.
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "lanes/handle_table.h"

static lw_handle_table_t table_of(uint32_t capacity) {
  lw_handle_table_t t;
  cr_assert_eq(lw__handle_table_initialize(&t, capacity), LW_OK);
  return t;
}

Test(handle_table, allocated_id_looks_up_to_its_index_until_released) {
  lw_handle_table_t t = table_of(4);
  uint32_t index = 0;
  uint64_t id = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_OK);
  cr_assert_eq(index, 0);
  cr_assert_neq(id, 0);
  uint32_t found = UINT32_MAX;
  cr_assert_eq(lw__handle_table_lookup(&t, id, &found), LW_OK);
  cr_assert_eq(found, index);
  cr_assert_eq(lw__handle_table_id(&t, index), id);
  cr_assert_eq(lw__handle_table_count(&t), 1);
  lw__handle_table_release(&t, index);
  cr_assert_eq(lw__handle_table_lookup(&t, id, &found), LW_NOT_FOUND);
  cr_assert_eq(found, UINT32_MAX);
  cr_assert_eq(lw__handle_table_id(&t, index), 0);
  cr_assert_eq(lw__handle_table_count(&t), 0);
  lw__handle_table_deinitialize(&t);
}

Test(handle_table, ids_are_never_zero_or_small_enough_to_be_an_index) {
  lw_handle_table_t t = table_of(8);
  for (uint32_t i = 0; i < 8; ++i) {
    uint32_t index = 0;
    uint64_t id = 0;
    cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_OK);
    cr_assert_eq(index, i, "first fit: the lowest free index");
    cr_assert_geq(id, (uint64_t)1 << 32, "id 0x%llx has an empty upper half",
                  (unsigned long long)id);
    cr_assert_neq(lw__handle_table_id_generation(id), 0);
  }
  lw__handle_table_deinitialize(&t);
}

Test(handle_table, reused_slot_gets_a_new_id_and_the_old_one_stays_not_found) {
  lw_handle_table_t t = table_of(2);
  uint32_t a = 0, b = 0, found = 0;
  uint64_t old_id = 0, new_id = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &a, &old_id), LW_OK);
  lw__handle_table_release(&t, a);
  cr_assert_eq(lw__handle_table_alloc(&t, &b, &new_id), LW_OK);
  cr_assert_eq(b, a, "the freed slot is reused");
  cr_assert_neq(new_id, old_id);
  cr_assert_eq(lw__handle_table_lookup(&t, old_id, &found), LW_NOT_FOUND);
  cr_assert_eq(lw__handle_table_lookup(&t, new_id, &found), LW_OK);
  cr_assert_eq(found, b);
  // Releasing twice, or releasing a slot that is not live, changes nothing.
  lw__handle_table_release(&t, b);
  uint64_t after_one = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &b, &after_one), LW_OK);
  lw__handle_table_release(&t, b);
  lw__handle_table_release(&t, b);
  lw__handle_table_release(&t, 1);
  lw__handle_table_release(&t, 99);
  uint64_t after_two = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &b, &after_two), LW_OK);
  cr_assert_eq(lw__handle_table_id_generation(after_two),
               lw__handle_table_id_generation(after_one) + 1,
               "one live allocation, one generation step");
  cr_assert_eq(lw__handle_table_count(&t), 1);
  lw__handle_table_deinitialize(&t);
}

Test(handle_table, forged_and_out_of_range_ids_are_not_found) {
  lw_handle_table_t t = table_of(2);
  uint32_t index = 0, found = 0;
  uint64_t id = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_OK);
  cr_assert_eq(lw__handle_table_lookup(&t, 0, &found), LW_NOT_FOUND);
  cr_assert_eq(lw__handle_table_lookup(&t, id & 0xffffffffu, &found), LW_NOT_FOUND,
               "the bare index is not an id");
  cr_assert_eq(lw__handle_table_lookup(&t, id + ((uint64_t)1 << 32), &found), LW_NOT_FOUND,
               "a future generation does not match");
  cr_assert_eq(lw__handle_table_lookup(&t, ((uint64_t)1 << 32) | 3, &found), LW_NOT_FOUND,
               "index beyond the capacity");
  cr_assert_eq(lw__handle_table_lookup(&t, ((uint64_t)1 << 32) | 2, &found), LW_NOT_FOUND,
               "a free slot");
  cr_assert_eq(lw__handle_table_lookup(&t, UINT64_MAX, &found), LW_NOT_FOUND);
  lw__handle_table_deinitialize(&t);
}

Test(handle_table, full_table_is_resource_exhausted_until_a_slot_is_released) {
  lw_handle_table_t t = table_of(3);
  uint32_t index = 0;
  uint64_t id = 0;
  for (int i = 0; i < 3; ++i) cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_OK);
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_RESOURCE_EXHAUSTED);
  cr_assert_eq(index, UINT32_MAX);
  cr_assert_eq(id, 0);
  lw__handle_table_release(&t, 1);
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_OK);
  cr_assert_eq(index, 1);
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_RESOURCE_EXHAUSTED);
  lw__handle_table_deinitialize(&t);
}

// 2^32 real reuses would take minutes, so the slot is moved to the end of its generations by
// hand; the wrap itself then runs through the table's own code.
Test(handle_table, slot_retires_instead_of_wrapping_its_generation) {
  lw_handle_table_t t = table_of(2);
  t.slots[0].generation = UINT32_MAX - 1;
  uint32_t index = 0, found = 0;
  uint64_t second_last = 0, last = 0, next = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &second_last), LW_OK);
  cr_assert_eq(index, 0);
  lw__handle_table_release(&t, 0);
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &last), LW_OK);
  cr_assert_eq(index, 0);
  cr_assert_eq(lw__handle_table_id_generation(last), UINT32_MAX);
  lw__handle_table_release(&t, 0);
  // Slot 0 is spent: it would have to hand out generation 1 again, the id of its first use.
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &next), LW_OK);
  cr_assert_eq(index, 1, "the retired slot is skipped");
  cr_assert_eq(lw__handle_table_lookup(&t, last, &found), LW_NOT_FOUND);
  cr_assert_eq(lw__handle_table_lookup(&t, second_last, &found), LW_NOT_FOUND);
  cr_assert_eq(lw__handle_table_lookup(&t, ((uint64_t)1 << 32) | 1, &found), LW_NOT_FOUND,
               "the first id of slot 0 never comes back");
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &next), LW_RESOURCE_EXHAUSTED,
               "a retired slot counts as taken");
  lw__handle_table_release(&t, 0);  // retired: nothing to release
  cr_assert_eq(lw__handle_table_count(&t), 1);
  lw__handle_table_deinitialize(&t);
}

Test(handle_table, zero_capacity_is_refused_and_a_zeroed_table_deinitializes) {
  lw_handle_table_t t;
  memset(&t, 0xab, sizeof(t));
  cr_assert_eq(lw__handle_table_initialize(&t, 0), LW_INVALID_ARGUMENT);
  cr_assert_null(t.slots);
  cr_assert_eq(t.capacity, 0);
  lw__handle_table_deinitialize(&t);
  uint32_t index = 0;
  uint64_t id = 0;
  cr_assert_eq(lw__handle_table_alloc(&t, &index, &id), LW_RESOURCE_EXHAUSTED);
  cr_assert_eq(lw__handle_table_lookup(&t, ((uint64_t)1 << 32) | 1, &index), LW_NOT_FOUND);
}
