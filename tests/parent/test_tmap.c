// tests/parent/test_tmap.c — the tensor map (parent/tmap.h) alone: no worker, no processes.
// Tasks are slots of a small fake table (a generation and a finished flag each); the map is
// asked for the edges of each access, and the tests check which producers it reports, in
// which order, what it forgets at a scope's end, that reader lists stay bounded, that it
// grows, and that every allocation failure is reported with nothing half-recorded.
#include <criterion/criterion.h>
#include <stdlib.h>

#include "parent/tmap.h"

#define N_SLOTS 64

typedef struct fake_tasks {
  uint32_t gen[N_SLOTS];
  bool finished[N_SLOTS];
  uint32_t live_calls;
} fake_tasks_t;

static bool fake_live(void *ctx, lw_tmap_ref_t r) {
  fake_tasks_t *f = ctx;
  f->live_calls++;
  cr_assert_lt(r.index, N_SLOTS, "the map reported a reference it was never given");
  return f->gen[r.index] == r.gen && !f->finished[r.index];
}

typedef struct edges {
  lw_tmap_ref_t producer[N_SLOTS * 4];
  uint32_t n;
  lw_status_t fail_with;  // returned from the first call when not LW_OK
} edges_t;

static lw_status_t record_edge(void *ctx, lw_tmap_ref_t producer) {
  edges_t *e = ctx;
  if (e->fail_with != LW_OK) return e->fail_with;
  cr_assert_lt(e->n, N_SLOTS * 4);
  e->producer[e->n++] = producer;
  return LW_OK;
}

static fake_tasks_t tasks;
static lw_tmap_t *m;

// Allocation gate: counts the allocations and fails the one numbered fail_at (1-based).
static uint32_t allocs_seen, fail_at;

static bool gate(void *ctx) {
  (void)ctx;
  return ++allocs_seen != fail_at;
}

static void make_map(uint32_t initial_buckets) {
  tasks = (fake_tasks_t){0};
  allocs_seen = 0;
  fail_at = 0;
  lw_tmap_options_t o = {.live = fake_live,
                         .live_ctx = &tasks,
                         .initial_buckets = initial_buckets,
                         .alloc_gate = gate};
  cr_assert_eq(lw__tmap_create(&o, &m), LW_OK);
}

static void teardown(void) {
  lw__tmap_destroy(m);
  m = NULL;
}

static void setup(void) { make_map(0); }

static lw_tmap_ref_t ref(uint32_t index) { return (lw_tmap_ref_t){index, tasks.gen[index]}; }

// Task `index` accesses buffer key with tag; returns the producers the map reported.
static edges_t use(uintptr_t key, lw_tag_t tag, uint32_t index) {
  edges_t e = {0};
  cr_assert_eq(lw__tmap_use(m, key, tag, ref(index), record_edge, &e), LW_OK);
  return e;
}

// The producers reported, by slot index, in order.
static void expect_edges(edges_t e, uint32_t n, const uint32_t *want) {
  cr_assert_eq(e.n, n, "expected %u producers, the map reported %u", n, e.n);
  for (uint32_t i = 0; i < n; ++i) {
    cr_assert_eq(e.producer[i].index, want[i], "producer %u: task %u, expected task %u", i,
                 e.producer[i].index, want[i]);
    cr_assert_eq(e.producer[i].gen, tasks.gen[want[i]]);
  }
}

#define EXPECT_EDGES(e, ...)                                                               \
  expect_edges((e), sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t),                  \
               (const uint32_t[]){__VA_ARGS__})
#define EXPECT_NO_EDGES(e) expect_edges((e), 0, NULL)

static void finish(uint32_t index) { tasks.finished[index] = true; }

// The slot is reused by a new task (a new generation, unfinished).
static void reuse(uint32_t index) {
  tasks.gen[index]++;
  tasks.finished[index] = false;
}

enum { A = 0x1000, B = 0x2000, C = 0x3000 };

TestSuite(tmap, .init = setup, .fini = teardown);
// Tests that create their own map (another bucket count, allocation failures in create).
TestSuite(tmap_own, .fini = teardown);

Test(tmap, a_read_waits_for_the_last_writer) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 2), 1);
  // A second reader also waits only for the writer, not for the first reader.
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 3), 1);
}

Test(tmap, a_first_read_has_no_producer_and_is_recorded_as_a_reader) {
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 1));
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_not(info.has_writer);
  cr_assert_eq(info.n_readers, 1);
}

Test(tmap, an_output_waits_for_the_previous_output) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 2), 1);
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 3), 2);
}

static void check_war(lw_tag_t write_tag) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  for (uint32_t r = 2; r <= 6; ++r) EXPECT_EDGES(use(A, LW_TAG_INPUT, r), 1);
  // The writer waits for the last writer, then every reader since it, oldest first.
  EXPECT_EDGES(use(A, write_tag, 7), 1, 2, 3, 4, 5, 6);
  // The write starts a new reader list: the next reader waits for task 7 only, and the next
  // writer for task 7 and that reader.
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 8), 7);
  EXPECT_EDGES(use(A, write_tag, 9), 7, 8);
}

Test(tmap, an_output_waits_for_every_reader_since_the_last_write) { check_war(LW_TAG_OUTPUT); }

Test(tmap, an_inout_waits_for_every_reader_since_the_last_write) { check_war(LW_TAG_INOUT); }

Test(tmap, an_output_existing_waits_for_every_reader_since_the_last_write) {
  check_war(LW_TAG_OUTPUT_EXISTING);
}

Test(tmap, a_write_after_reads_only_waits_for_the_readers_when_nobody_wrote) {
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 1));
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 2));
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 3), 1, 2);
}

Test(tmap, an_inout_chain_orders_each_link_after_the_previous_one) {
  EXPECT_NO_EDGES(use(A, LW_TAG_INOUT, 1));
  for (uint32_t t = 2; t <= 10; ++t) EXPECT_EDGES(use(A, LW_TAG_INOUT, t), t - 1);
}

Test(tmap, buffers_at_different_addresses_are_unrelated) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  EXPECT_NO_EDGES(use(A + 1, LW_TAG_OUTPUT, 2));
  EXPECT_NO_EDGES(use(B, LW_TAG_INPUT, 3));
  EXPECT_EDGES(use(A + 1, LW_TAG_INPUT, 4), 2);
}

Test(tmap, no_dep_and_null_buffers_are_neither_looked_up_nor_recorded) {
  EXPECT_NO_EDGES(use(A, LW_TAG_NO_DEP, 1));
  EXPECT_NO_EDGES(use(0, LW_TAG_OUTPUT, 2));
  EXPECT_NO_EDGES(use(0, LW_TAG_INPUT, 3));
  cr_assert_eq(lw__tmap_count(m), 0);
  // A NO_DEP access of a written buffer neither waits for the writer nor becomes one.
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 4));
  EXPECT_NO_EDGES(use(A, LW_TAG_NO_DEP, 5));
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 6), 4);
  cr_assert_eq(tasks.live_calls, 1, "a NO_DEP access asked about a task");
}

Test(tmap, finished_producers_are_not_reported) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 2), 1);
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 3), 1);
  finish(1);
  finish(2);
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 4));
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 5), 3, 4);
}

Test(tmap, a_reused_slot_is_not_the_task_that_held_it_before) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  finish(1);
  reuse(1);  // slot 1 now holds an unrelated, unfinished task
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 2));
}

Test(tmap, a_task_reading_one_buffer_twice_is_one_reader) {
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 1));
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 1));
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_eq(info.n_readers, 1);
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 2), 1);
}

Test(tmap, a_task_that_reads_then_writes_a_buffer_is_reported_as_its_own_reader) {
  // The caller drops such a self edge (dag.c add_edge); the map reports what it recorded.
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 1));
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 1), 1);
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert(info.has_writer);
  cr_assert_eq(info.writer.index, 1);
  cr_assert_eq(info.n_readers, 0);
}

Test(tmap, readers_that_finished_are_dropped_so_the_list_stays_bounded) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 0));
  finish(0);
  // 10000 reads by tasks that finish one after the other (slots reused): the list never
  // needs more than its inline capacity.
  for (uint32_t i = 0; i < 10000; ++i) {
    uint32_t slot = 1 + i % (N_SLOTS - 1);
    reuse(slot);
    EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, slot));
    finish(slot);
  }
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_leq(info.n_readers, 4);
  cr_assert_eq(info.cap_readers, 4, "a list of finished readers grew to %u", info.cap_readers);
}

Test(tmap, a_reader_list_holds_at_most_twice_the_readers_still_running) {
  // Seven readers run when the next one arrives; each new one replaces the oldest.
  for (uint32_t i = 0; i < 5000; ++i) {
    uint32_t slot = i % N_SLOTS;
    reuse(slot);
    EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, slot));
    if (i >= 7) finish((i - 7) % N_SLOTS);
  }
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_leq(info.cap_readers, 16);
  // Every reader still running is still in the list: the next writer waits for all eight.
  edges_t e = {0};
  reuse(5000 % N_SLOTS);
  cr_assert_eq(lw__tmap_use(m, A, LW_TAG_OUTPUT, ref(5000 % N_SLOTS), record_edge, &e), LW_OK);
  cr_assert_eq(e.n, 7, "the writer waits for %u readers, 7 still run", e.n);
}

Test(tmap, many_running_readers_are_all_kept) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 0));
  for (uint32_t r = 1; r < 40; ++r) EXPECT_EDGES(use(A, LW_TAG_INPUT, r), 0);
  edges_t e = use(A, LW_TAG_OUTPUT, 40);
  cr_assert_eq(e.n, 40);
  for (uint32_t i = 0; i < 40; ++i) cr_assert_eq(e.producer[i].index, i);
}

Test(tmap, a_scope_end_forgets_buffers_first_written_inside_it) {
  cr_assert(lw__tmap_scope_begin(m));
  cr_assert_eq(lw__tmap_depth(m), 1);
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  EXPECT_NO_EDGES(use(B, LW_TAG_INPUT, 2));  // only read inside the scope
  cr_assert(lw__tmap_scope_end(m));
  cr_assert_eq(lw__tmap_depth(m), 0);
  lw_tmap_entry_info_t info;
  cr_assert_not(lw__tmap_lookup(m, A, &info), "a buffer first written in the scope survived");
  cr_assert(lw__tmap_lookup(m, B, &info), "a buffer only read in the scope was forgotten");
  cr_assert_eq(info.n_readers, 1);
  // Task 1 is still running, but the forgotten buffer's next use waits for nothing.
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 3));
  EXPECT_EDGES(use(B, LW_TAG_OUTPUT, 4), 2);
}

Test(tmap, a_buffer_written_before_a_scope_keeps_its_writer_across_it) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  cr_assert(lw__tmap_scope_begin(m));
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 2), 1);
  cr_assert(lw__tmap_scope_end(m));
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 3), 2);
}

Test(tmap, nested_scopes_forget_only_their_own_buffers) {
  cr_assert(lw__tmap_scope_begin(m));
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  cr_assert(lw__tmap_scope_begin(m));
  EXPECT_NO_EDGES(use(B, LW_TAG_OUTPUT, 2));
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 3), 1);  // written first in the outer scope
  cr_assert(lw__tmap_scope_end(m));
  lw_tmap_entry_info_t info;
  cr_assert_not(lw__tmap_lookup(m, B, &info));
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_eq(info.writer.index, 3);
  cr_assert(lw__tmap_scope_end(m));
  cr_assert_not(lw__tmap_lookup(m, A, &info));
  cr_assert_eq(lw__tmap_count(m), 0);
}

Test(tmap, scopes_nest_at_most_the_maximum_depth) {
  cr_assert_not(lw__tmap_scope_end(m), "a scope ended that never began");
  for (uint32_t d = 0; d < LW_TMAP_MAX_SCOPES; ++d) cr_assert(lw__tmap_scope_begin(m));
  cr_assert_not(lw__tmap_scope_begin(m));
  cr_assert_eq(lw__tmap_depth(m), LW_TMAP_MAX_SCOPES);
  for (uint32_t d = 0; d < LW_TMAP_MAX_SCOPES; ++d) cr_assert(lw__tmap_scope_end(m));
  cr_assert_not(lw__tmap_scope_end(m));
}

Test(tmap, clear_forgets_every_buffer_and_closes_every_scope) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  cr_assert(lw__tmap_scope_begin(m));
  cr_assert(lw__tmap_scope_begin(m));
  EXPECT_NO_EDGES(use(B, LW_TAG_OUTPUT, 2));
  lw__tmap_clear(m);
  cr_assert_eq(lw__tmap_count(m), 0);
  cr_assert_eq(lw__tmap_depth(m), 0);
  EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, 3));
  // The scope lists were emptied too: a scope after the clear forgets only its own buffer.
  cr_assert(lw__tmap_scope_begin(m));
  EXPECT_NO_EDGES(use(C, LW_TAG_OUTPUT, 4));
  cr_assert(lw__tmap_scope_end(m));
  cr_assert_eq(lw__tmap_count(m), 1);
}

static void write_many(uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    uintptr_t key = 0x10000 + (uintptr_t)i * 64;
    edges_t e = {0};
    cr_assert_eq(lw__tmap_use(m, key, LW_TAG_OUTPUT, (lw_tmap_ref_t){i % N_SLOTS, 0},
                              record_edge, &e), LW_OK);
  }
}

static void check_many(uint32_t n) {
  cr_assert_eq(lw__tmap_count(m), n);
  for (uint32_t i = 0; i < n; ++i) {
    lw_tmap_entry_info_t info;
    cr_assert(lw__tmap_lookup(m, 0x10000 + (uintptr_t)i * 64, &info), "buffer %u lost", i);
    cr_assert(info.has_writer);
    cr_assert_eq(info.writer.index, i % N_SLOTS);
  }
}

Test(tmap_own, the_map_grows_past_its_initial_buckets_and_keeps_every_entry) {
  make_map(4);
  cr_assert_eq(lw__tmap_bucket_count(m), 4);
  write_many(5000);
  cr_assert_geq(lw__tmap_bucket_count(m), 5000 / 2, "%u buckets", lw__tmap_bucket_count(m));
  check_many(5000);
}

Test(tmap, the_default_map_grows_past_its_1024_buckets) {
  cr_assert_eq(lw__tmap_bucket_count(m), LW_TMAP_DEFAULT_BUCKETS);
  write_many(3 * LW_TMAP_DEFAULT_BUCKETS);
  cr_assert_gt(lw__tmap_bucket_count(m), LW_TMAP_DEFAULT_BUCKETS);
  check_many(3 * LW_TMAP_DEFAULT_BUCKETS);
}

Test(tmap_own, create_rejects_a_missing_callback_and_an_odd_bucket_count) {
  lw_tmap_t *x = (lw_tmap_t *)1;
  cr_assert_eq(lw__tmap_create(&(lw_tmap_options_t){0}, &x), LW_INVALID_ARGUMENT);
  cr_assert_null(x);
  x = (lw_tmap_t *)1;
  lw_tmap_options_t o = {.live = fake_live, .live_ctx = &tasks, .initial_buckets = 6};
  cr_assert_eq(lw__tmap_create(&o, &x), LW_INVALID_ARGUMENT);
  cr_assert_null(x);
}

Test(tmap_own, create_reports_every_allocation_failure_and_leaks_nothing) {
  // Allocations 1 (the map) and 2 (its buckets); the sanitizer builds check for leaks.
  for (uint32_t at = 1; at <= 2; ++at) {
    allocs_seen = 0;
    fail_at = at;
    lw_tmap_t *x = (lw_tmap_t *)1;
    lw_tmap_options_t o = {.live = fake_live, .live_ctx = &tasks, .alloc_gate = gate};
    cr_assert_eq(lw__tmap_create(&o, &x), LW_RESOURCE_EXHAUSTED, "allocation %u", at);
    cr_assert_null(x);
  }
  allocs_seen = 0;
  fail_at = 3;
  lw_tmap_options_t o = {.live = fake_live, .live_ctx = &tasks, .alloc_gate = gate};
  cr_assert_eq(lw__tmap_create(&o, &m), LW_OK);
  cr_assert_eq(allocs_seen, 2, "create made %u allocations, the test expects 2", allocs_seen);
}

// Fails the next allocation the map makes.
static void fail_next_alloc(void) { fail_at = allocs_seen + 1; }

Test(tmap, a_new_buffer_without_memory_is_reported_and_not_recorded) {
  fail_next_alloc();
  edges_t e = {0};
  cr_assert_eq(lw__tmap_use(m, A, LW_TAG_OUTPUT, ref(1), record_edge, &e), LW_RESOURCE_EXHAUSTED);
  cr_assert_eq(lw__tmap_count(m), 0);
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 2));
}

Test(tmap, a_reader_list_that_cannot_grow_is_reported_and_keeps_its_readers) {
  for (uint32_t r = 1; r <= 4; ++r) EXPECT_NO_EDGES(use(A, LW_TAG_INPUT, r));
  fail_next_alloc();
  edges_t e = {0};
  cr_assert_eq(lw__tmap_use(m, A, LW_TAG_INPUT, ref(5), record_edge, &e), LW_RESOURCE_EXHAUSTED);
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_eq(info.n_readers, 4);
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 6), 1, 2, 3, 4);
  // A list already on the heap that cannot grow again is reported the same way.
  for (uint32_t r = 7; r <= 14; ++r) EXPECT_EDGES(use(A, LW_TAG_INPUT, r), 6);
  fail_next_alloc();
  cr_assert_eq(lw__tmap_use(m, A, LW_TAG_INPUT, ref(15), record_edge, &e), LW_RESOURCE_EXHAUSTED);
  EXPECT_EDGES(use(A, LW_TAG_OUTPUT, 16), 6, 7, 8, 9, 10, 11, 12, 13, 14);
}

Test(tmap, a_scope_that_cannot_note_its_buffer_reports_it_and_records_no_writer) {
  cr_assert(lw__tmap_scope_begin(m));
  // The new entry is allocation 1 of this use, the scope's key list allocation 2.
  fail_at = allocs_seen + 2;
  edges_t e = {0};
  cr_assert_eq(lw__tmap_use(m, A, LW_TAG_OUTPUT, ref(1), record_edge, &e), LW_RESOURCE_EXHAUSTED);
  lw_tmap_entry_info_t info;
  cr_assert(lw__tmap_lookup(m, A, &info));
  cr_assert_not(info.has_writer, "a writer the scope cannot forget was recorded");
  cr_assert(lw__tmap_scope_end(m));
}

Test(tmap_own, a_failed_growth_keeps_the_buckets_and_every_entry) {
  make_map(1);
  write_many(2);  // two entries in one bucket: the next new one grows the map
  // The new entry is allocation 1 of this use, the bigger bucket array allocation 2.
  fail_at = allocs_seen + 2;
  write_many(3);
  cr_assert_eq(lw__tmap_bucket_count(m), 1);
  check_many(3);
  write_many(100);  // later growth works again
  cr_assert_gt(lw__tmap_bucket_count(m), 1);
  check_many(100);
}

Test(tmap, a_failing_edge_callback_stops_the_access_and_its_status_is_returned) {
  EXPECT_NO_EDGES(use(A, LW_TAG_OUTPUT, 1));
  edges_t e = {.fail_with = LW_CANCELLED};
  cr_assert_eq(lw__tmap_use(m, A, LW_TAG_OUTPUT, ref(2), record_edge, &e), LW_CANCELLED);
  // Task 2 did not become the writer.
  EXPECT_EDGES(use(A, LW_TAG_INPUT, 3), 1);
}
