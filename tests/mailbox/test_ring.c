// tests/mailbox/test_ring.c — mailbox protocol (mailbox/mailbox.h, docs/protocol.md):
// the completion ring: empty, wrap-around, full, malformed entries, corrupt cursors, wake-ups.
#include "mailbox_test_util.h"

// ---------------------------------------------------------------------------------------------
// Completion ring

Test(mailbox_ring, pop_on_an_empty_ring_is_not_found, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c;
  cr_assert_eq(lw__mailbox_pop_completion(mb, &c, &err), LW_NOT_FOUND);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 0u);
  free(mb);
}

Test(mailbox_ring, ring_wraps_correctly_over_three_times_its_size, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  const uint64_t total = 3 * LW_MB_RING_ENTRIES;
  uint64_t pushed = 0, popped = 0;
  // Uneven batches (up to a full ring) so the wrap falls at different points.
  while (popped < total) {
    uint64_t batch = (pushed * 7 + 5) % LW_MB_RING_ENTRIES + 1;
    for (uint64_t i = 0; i < batch && pushed < total; ++i, ++pushed) {
      lw_mb_completion_t c = control_completion(pushed, pushed * 3);
      push_ok(mb, &c);
    }
    lw_mb_completion_t out;
    while (lw__mailbox_pop_completion(mb, &out, &err) == LW_OK) {
      cr_assert_eq(out.control_id, popped, "entry order");
      cr_assert_eq(out.value, popped * 3);
      popped++;
    }
  }
  cr_assert_eq(atomic_load(&mb->ring_head.value), total);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), total);
  free(mb);
}

// An entry's error is written and read up to its NUL, and only for a control: a later entry in
// the same slot never carries what an earlier one left there.
Test(mailbox_ring, an_entry_never_carries_what_an_earlier_one_left_in_its_slot, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c = control_completion(1, 0);
  c.status = LW_INTERNAL;
  memset(c.error.message, 'L', 200);
  push_ok(mb, &c);
  lw_mb_completion_t out;
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(strlen(out.error.message), 200u);
  // Around the ring to the same slot: a short message, then a task entry.
  for (uint32_t i = 1; i < LW_MB_RING_ENTRIES; ++i) {
    lw_mb_completion_t filler = control_completion(100 + i, 0);
    push_ok(mb, &filler);
    cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  }
  lw_mb_completion_t s = control_completion(2, 0);
  s.status = LW_INTERNAL;
  snprintf(s.error.message, sizeof(s.error.message), "short");
  push_ok(mb, &s);
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_str_eq(out.error.message, "short");
  for (uint32_t i = 1; i < LW_MB_RING_ENTRIES; ++i) {
    lw_mb_completion_t filler = control_completion(200 + i, 0);
    push_ok(mb, &filler);
    cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  }
  // The slot's error bytes, forged unterminated, under a task entry: not read.
  lw_mb_completion_t *slot = &mb->ring[atomic_load(&mb->ring_head.value) % LW_MB_RING_ENTRIES];
  memset(slot->error.message, 'x', sizeof(slot->error.message));
  slot->error.code = LW_INTERNAL;
  lw_mb_completion_t t;
  memset(&t, 0, sizeof(t));
  t.kind = LW_MB_COMPLETION_TASK;
  t.frame = 3;
  push_ok(mb, &t);
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.frame, 3u);
  cr_assert_eq(out.error.code, LW_OK);
  cr_assert_str_eq(out.error.message, "");
  free(mb);
}

Test(mailbox_ring, push_to_a_full_ring_is_deadline_exceeded_and_writes_nothing,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  for (uint32_t i = 0; i < LW_MB_RING_ENTRIES; ++i) {
    lw_mb_completion_t c = control_completion(i, 0);
    push_ok(mb, &c);
  }
  lw_mb_completion_t extra = control_completion(999, 0);
  bool wake = true;
  cr_assert_eq(lw__mailbox_push_completion(mb, &extra, lw__now_ns() - 1, &wake, &err),
               LW_DEADLINE_EXCEEDED);
  cr_assert(has(&err, "ring full"), "%s", err.message);
  cr_assert_not(wake);
  // A short future deadline goes through spin, yield and naps, then gives up the same way.
  cr_assert_eq(lw__mailbox_push_completion(mb, &extra, lw__now_ns() + 2000000, &wake, &err),
               LW_DEADLINE_EXCEEDED);
  cr_assert_eq(atomic_load(&mb->ring_head.value), LW_MB_RING_ENTRIES);
  lw_mb_completion_t out;
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK);
  cr_assert_eq(out.control_id, 0u, "the oldest entry was not overwritten");
  cr_assert_eq(mb->ring_head.tail_seen, 0u, "the full ring's pushes read the tail: 0");
  cr_assert_eq(lw__mailbox_push_completion(mb, &extra, lw__now_ns() - 1, &wake, &err), LW_OK,
               "one slot free: the push succeeds even past its deadline");
  cr_assert_eq(mb->ring_head.tail_seen, 1u, "the full ring made the push read the tail");
  free(mb);
}

Test(mailbox_ring, malformed_completions_are_rejected_but_consumed, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t bad[4];
  memset(bad, 0, sizeof(bad));
  bad[0].kind = 9;  // unknown kind
  bad[1].kind = LW_MB_COMPLETION_TASK;
  bad[1].frame = LW_MB_TASK_FRAMES;  // out of range
  bad[2].kind = LW_MB_COMPLETION_CONTROL;
  bad[2].status = LW_STATUS_COUNT_;  // bad status
  bad[3].kind = LW_MB_COMPLETION_CONTROL;
  bad[3].status = -1;
  const char *why[] = {"has kind 9", "names task frame 128", "has status 13", "has status -1"};
  for (int i = 0; i < 4; ++i) {
    // Written the way a broken child would: entry, its mark, then head.
    mb->ring[i] = bad[i];
    atomic_store(&mb->ring[i].mark, lw__mailbox_completion_mark((uint64_t)i));
    atomic_store(&mb->ring_head.value, (uint64_t)i + 1);
  }
  lw_mb_completion_t good = control_completion(5, 6);
  push_ok(mb, &good);
  lw_mb_completion_t out;
  for (int i = 0; i < 4; ++i) {
    cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_INTERNAL, "entry %d", i);
    cr_assert(has(&err, why[i]), "entry %d: %s", i, err.message);
    cr_assert_eq(atomic_load(&mb->ring_tail.value), (uint64_t)i + 1, "entry %d consumed", i);
  }
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.control_id, 5u);
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_NOT_FOUND);
  free(mb);
}

// The mark: a pop takes the entry at its tail by its mark, and reads the head only when the
// mark is not there.
Test(mailbox_ring, an_entry_with_its_mark_is_popped_before_the_head_moves_and_one_without_is_not,
     .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t out;
  // Entry 0 written with its mark, the head not moved yet (a push between its two stores): the
  // parent has it.
  mb->ring[0] = control_completion(7, 8);
  atomic_store(&mb->ring[0].mark, lw__mailbox_completion_mark(0));
  cr_assert(lw__mailbox_completion_pending(mb));
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.control_id, 7u);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 1u);
  // The tail is now one past the head (the push has yet to store it): empty, not corrupt.
  cr_assert_not(lw__mailbox_completion_pending(mb));
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_NOT_FOUND, "%s", err.message);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 1u);
  // Entry 1 with the mark of another lap (the slot's earlier entry): not there.
  mb->ring[1] = control_completion(9, 9);
  atomic_store(&mb->ring[1].mark, lw__mailbox_completion_mark(1 + LW_MB_RING_ENTRIES));
  atomic_store(&mb->ring_head.value, 1u);
  cr_assert_not(lw__mailbox_completion_pending(mb));
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_NOT_FOUND);
  cr_assert_eq(lw__mailbox_pop_next_completion(mb, &out, &err), LW_NOT_FOUND);
  // The head says entry 1 was pushed, its mark says not: a pop that may look at the head
  // reports the broken entry and consumes it; one that may not (the next pop of a drain)
  // answers NOT_FOUND from the entry alone.
  atomic_store(&mb->ring_head.value, 2u);
  cr_assert(lw__mailbox_completion_pending(mb), "the head moved");
  cr_assert_eq(lw__mailbox_pop_next_completion(mb, &out, &err), LW_NOT_FOUND);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 1u);
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_INTERNAL);
  char want[96];
  snprintf(want, sizeof(want), "completion 1 has mark %u, not 2 (the head, 2, says it was pushed)",
           lw__mailbox_completion_mark(1 + LW_MB_RING_ENTRIES));
  cr_assert(has(&err, want), "%s", err.message);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 2u, "consumed");
  // The next pop of a drain takes an entry with its mark like the first.
  lw_mb_completion_t c = control_completion(11, 12);
  push_ok(mb, &c);
  cr_assert_eq(atomic_load(&mb->ring[2].mark), lw__mailbox_completion_mark(2), "push marks");
  cr_assert_eq(lw__mailbox_pop_next_completion(mb, &out, &err), LW_OK, "%s", err.message);
  cr_assert_eq(out.control_id, 11u);
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_NOT_FOUND);
  free(mb);
}

Test(mailbox_ring, corrupt_cursors_are_internal, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t out;
  atomic_store(&mb->ring_head.value, LW_MB_RING_ENTRIES + 1u);
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_INTERNAL);
  char want[48];
  snprintf(want, sizeof(want), "%u entries past tail 0", LW_MB_RING_ENTRIES + 1);
  cr_assert(has(&err, want), "%s", err.message);
  cr_assert_eq(atomic_load(&mb->ring_tail.value), 0u);
  // A tail ahead of the head (a broken parent) stops the child's push when it reads the tail:
  // once its own record of the tail (tail_seen) says the ring may be full.
  atomic_store(&mb->ring_head.value, 3u);
  atomic_store(&mb->ring_tail.value, 4u);
  mb->ring_head.tail_seen = 3u - LW_MB_RING_ENTRIES;
  lw_mb_completion_t c = control_completion(1, 1);
  bool wake;
  cr_assert_eq(lw__mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_INTERNAL);
  cr_assert_eq(atomic_load(&mb->ring_head.value), 3u);
  free(mb);
}

Test(mailbox_ring, popped_entries_have_terminated_messages, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c = control_completion(1, 1);
  c.status = LW_TASK_FAILED;
  push_ok(mb, &c);
  memset(mb->ring[0].error.message, 'm', LW_ERROR_MESSAGE_BYTES);  // forged after the push
  lw_mb_completion_t out;
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK);
  cr_assert_eq(strlen(out.error.message), LW_ERROR_MESSAGE_BYTES - 1u);
  free(mb);
}

Test(mailbox_ring, push_reports_wake_only_when_the_parent_is_sleeping, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  lw_error_t err;
  lw_mb_completion_t c = control_completion(1, 1), out;
  bool wake = true;
  cr_assert_eq(lw__mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_OK);
  cr_assert_not(wake, "parent awake: no eventfd write needed");
  atomic_store(&mb->parent.sleeping, 1);
  cr_assert_eq(lw__mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_OK);
  cr_assert(wake, "parent sleeping: the child must ring the eventfd");
  atomic_store(&mb->parent.sleeping, 0);
  cr_assert_eq(lw__mailbox_push_completion(mb, &c, LW_DEADLINE_NEVER, &wake, &err), LW_OK);
  cr_assert_not(wake);
  for (int i = 0; i < 3; ++i) cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK);
  free(mb);
}

// The spin hints (lanes/spin.h, LW__PARTNER_SAME_CPU): each end of the ring says which CPU it
// last moved its cursor from; neither is set before the first move.
Test(mailbox_ring, each_cursor_move_records_the_movers_cpu, .timeout = 10) {
  lw_mailbox_t *mb = mb_new();
  cr_assert_eq(atomic_load(&mb->ring_head.cpu), -1, "no push yet");
  cr_assert_eq(atomic_load(&mb->ring_tail.cpu), -1, "no pop yet");
  cr_assert_eq(atomic_load(&mb->doorbell.poster_cpu), -1, "no post yet");
  lw_mb_completion_t c = control_completion(1, 2);
  push_ok(mb, &c);
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  int32_t head_cpu = atomic_load(&mb->ring_head.cpu);
  cr_assert(head_cpu >= 0 && head_cpu < cpus, "push recorded cpu %d of %ld", head_cpu, cpus);
  lw_error_t err;
  lw_mb_completion_t out;
  cr_assert_eq(lw__mailbox_pop_completion(mb, &out, &err), LW_OK);
  int32_t tail_cpu = atomic_load(&mb->ring_tail.cpu);
  cr_assert(tail_cpu >= 0 && tail_cpu < cpus, "pop recorded cpu %d of %ld", tail_cpu, cpus);
  lw_mb_task_post_t p = task_post(1, 1);
  cr_assert_eq(lw__mailbox_post_task(mb, 0, &p, &err), LW_OK, "%s", err.message);
  int32_t poster = atomic_load(&mb->doorbell.poster_cpu);
  cr_assert(poster >= 0 && poster < cpus, "post recorded cpu %d of %ld", poster, cpus);
  free(mb);
}
