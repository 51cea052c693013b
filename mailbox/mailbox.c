// mailbox/mailbox.c — the mailbox protocol: state machines, encode/decode, validation and the
// completion ring. The wire format and the rules are in docs/protocol.md.
//
// Ownership by state. A task frame's payload (seq, identity, kind, callable, timeout, args) is
// written only by the parent and only while the frame is IDLE; its result only by the child
// and only while the frame is READY or RUNNING. The state word hands the frame from one
// process to the other: the writer publishes with a release store (the control frame: a
// release CAS), the reader acquires the state before touching the fields. Nothing reads a
// field whose owner may be writing it, so the plain (non-atomic) fields never race. The
// control frame works the same way. The cancel line's words (cancel, cancel_dispatch) are
// atomics both sides may write in any state (docs/protocol.md, section 5).
//
// Trust. Every field the other process writes is untrusted: states, indices, counts, offsets,
// statuses and strings are validated before use, and a violation is reported (INTERNAL on the
// parent side: the child is broken) instead of being acted on.
#include "mailbox/mailbox.h"

#include <inttypes.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lanes/args.h"
#include "lanes/error.h"
#include "lanes/spin.h"
#include "lanes/sys.h"

// How a full completion ring is waited out: the spin policy (lanes/spin.h), then naps of
// LW_MB_PUSH_NAP_NS until the deadline. No futex: the parent never wakes the child for ring
// space (it drains as fast as it can).
#define LW_MB_PUSH_NAP_NS 50000L

_Static_assert(LW_MB_RING_ENTRIES > 0 && (LW_MB_RING_ENTRIES & (LW_MB_RING_ENTRIES - 1)) == 0,
               "free-running uint64 cursors need a power-of-two ring (index stays continuous "
               "across the 2^64 wrap)");

// ---------------------------------------------------------------------------------------------
// Helpers

static const char *const task_state_names[] = {
    [LW_MB_TASK_IDLE] = "IDLE",
    [LW_MB_TASK_READY] = "TASK_READY",
    [LW_MB_TASK_RUNNING] = "TASK_RUNNING",
    [LW_MB_TASK_DONE] = "TASK_DONE",
    [LW_MB_TASK_FAILED] = "TASK_FAILED",
    [LW_MB_TASK_CANCELLED] = "TASK_CANCELLED",
};

static const char *const control_state_names[] = {
    [LW_MB_CONTROL_IDLE] = "IDLE",
    [LW_MB_CONTROL_REQUEST] = "CONTROL_REQUEST",
    [LW_MB_CONTROL_DONE] = "CONTROL_DONE",
};

const char *lw__mailbox_task_state_name(uint32_t state) {
  if (state >= sizeof(task_state_names) / sizeof(task_state_names[0])) return "UNKNOWN";
  return task_state_names[state];
}

static const char *control_state_name(uint32_t state) {
  if (state >= sizeof(control_state_names) / sizeof(control_state_names[0])) return "UNKNOWN";
  return control_state_names[state];
}

bool lw__mailbox_task_state_is_terminal(uint32_t state) {
  return state == LW_MB_TASK_DONE || state == LW_MB_TASK_FAILED ||
         state == LW_MB_TASK_CANCELLED;
}

static bool status_is_valid(int32_t status) {
  // Unsigned compare: a negative value read from shared memory is invalid too.
  return (uint32_t)status < (uint32_t)LW_STATUS_COUNT_;
}

static bool command_is_known(uint32_t command) {
  return command == LW_MB_CMD_PING || command == LW_MB_CMD_REGISTER ||
         command == LW_MB_CMD_UNREGISTER || command == LW_MB_CMD_REGISTER_SUB ||
         command == LW_MB_CMD_CANCEL;
}

static bool task_kind_is_known(uint32_t kind) {
  return kind == LW_MB_TASK_KERNEL || kind == LW_MB_TASK_SUB;
}

// Messages never name the child: the header's kind and index live in memory the child can
// write, so a broken child could make them say anything. The caller knows which child it
// talks to from its own records and puts that name in front (worker_id stays -1 here).

static void force_nul(lw_error_t *e) { e->message[LW_ERROR_MESSAGE_BYTES - 1] = '\0'; }

// Copies an error's fields and its message up to its NUL (the whole buffer at most), and
// terminates dst. Both sides of a mailbox copy errors this way: a short message (an OK
// result's empty one) moves one cache line between the processes instead of the 272-byte
// struct. src may be the other side's memory: each byte is read once and dst always ends.
static void error_copy(lw_error_t *dst, const lw_error_t *src) {
  dst->code = src->code;
  dst->worker_id = src->worker_id;
  dst->task_id = src->task_id;
  size_t n = strnlen(src->message, LW_ERROR_MESSAGE_BYTES - 1);
  memcpy(dst->message, src->message, n);
  dst->message[n] = '\0';
}

// An error saying nothing, in three stores (lw__error_clear also zeroes the message buffer).
static void error_none(lw_error_t *e) {
  e->code = LW_OK;
  e->worker_id = -1;
  e->task_id = 0;
  e->message[0] = '\0';
}

static lw_status_t frame_index_error(lw_error_t *err, const char *op, uint32_t frame) {
  return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                       "%s: task frame %u out of range (%u frames)", op, frame, LW_MB_TASK_FRAMES);
}

static lw_status_t task_state_error(lw_error_t *err, lw_status_t code, const char *op,
                                    uint32_t frame, const char *expected, uint32_t actual) {
  return lw__error_set(err, code, -1, 0, "%s: task frame %u is %s (%u), expected %s", op, frame,
                       lw__mailbox_task_state_name(actual), actual, expected);
}

static lw_status_t control_state_error(lw_error_t *err, lw_status_t code, const char *op,
                                       const char *expected, uint32_t actual) {
  return lw__error_set(err, code, -1, 0, "%s: control frame is %s (%u), expected %s", op,
                       control_state_name(actual), actual, expected);
}

// True when the NUL-terminated s fits in a LW_MB_NAME_BYTES field.
static bool name_is_terminated(const char *s) {
  return memchr(s, '\0', LW_MB_NAME_BYTES) != NULL;
}

// Copies src (NULL: empty) into a LW_MB_NAME_BYTES field, truncating and zero-filling.
static void name_copy(char *dst, const char *src) {
  memset(dst, 0, LW_MB_NAME_BYTES);
  if (src != NULL) {
    size_t n = strnlen(src, LW_MB_NAME_BYTES - 1);
    memcpy(dst, src, n);
  }
}

// After a post into frame (LW_MB_POST_CONTROL: the control frame): index it, publish its
// number and wake a sleeping child.
static void ring_doorbell(lw_mailbox_t *mb, uint64_t seq, uint8_t frame) {
  atomic_store_explicit(&mb->post_index.frame[seq % LW_MB_POST_SLOTS], frame,
                        memory_order_relaxed);
  // Release: a child that reads post_seq >= seq (acquire) also sees the state it announces
  // and the slot above.
  atomic_store_explicit(&mb->doorbell.post_seq, seq, memory_order_release);
  // A hint only (relaxed): where the poster runs, for the child's spin.
  atomic_store_explicit(&mb->doorbell.poster_cpu, lw__sys_cpu(), memory_order_relaxed);
  // Shared futex: the child sleeps on this word from another process.
  lw__waitword_wake(&mb->doorbell.word, true);
}

// ---------------------------------------------------------------------------------------------
// Common

void lw__mailbox_initialize(lw_mailbox_t *mb, lw_mb_child_kind_t kind, uint32_t child_index,
                           uint64_t arena_bytes) {
  memset(mb, 0, sizeof(*mb));
  lw_mb_header_t *h = &mb->header;
  h->magic = LW_MB_MAGIC;
  h->version = LW_MB_VERSION;
  h->total_bytes = (uint32_t)sizeof(lw_mailbox_t);
  h->child_kind = (uint32_t)kind;
  h->child_index = child_index;
  h->n_task_frames = LW_MB_TASK_FRAMES;
  h->ring_entries = LW_MB_RING_ENTRIES;
  h->arena_bytes = arena_bytes;
  // atomic_init (plain stores): no other thread or process sees the mailbox yet; fork or the
  // thread start that hands it over is the synchronization.
  atomic_init(&h->child_pid, 0);
  atomic_init(&h->numa_node, -1);
  atomic_init(&h->init_state, LW_MB_INIT_NONE);
  atomic_init(&h->shutdown, 0);
  atomic_init(&h->generation, 0);
  lw__waitword_initialize(&h->init_word);
  h->init_error.worker_id = (int32_t)child_index;
  lw__waitword_initialize(&mb->doorbell.word);
  lw__waitword_initialize(&mb->doorbell.loop_word);
  atomic_init(&mb->doorbell.post_seq, 0);
  atomic_init(&mb->doorbell.cancel_seq, 0);
  for (uint32_t i = 0; i < LW_MB_POST_SLOTS; ++i) {
    atomic_init(&mb->post_index.frame[i], LW_MB_POST_NONE);
  }
  atomic_init(&h->heartbeat, 0);
  atomic_init(&mb->parent.sleeping, 0);
  atomic_init(&mb->control.state, LW_MB_CONTROL_IDLE);
  lw__waitword_initialize(&mb->control.done_word);
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    atomic_init(&mb->task[i].state, LW_MB_TASK_IDLE);
    atomic_init(&mb->task[i].cancel, 0);
  }
  atomic_init(&mb->ring_head.value, 0);
  atomic_init(&mb->ring_tail.value, 0);
  atomic_init(&mb->ring_head.cpu, -1);
  atomic_init(&mb->ring_tail.cpu, -1);
  atomic_init(&mb->doorbell.poster_cpu, -1);
}

lw_status_t lw__mailbox_validate_header(const lw_mailbox_t *mb, lw_error_t *err) {
  const lw_mb_header_t *h = &mb->header;
  if (h->magic != LW_MB_MAGIC) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "mailbox header: magic is 0x%08" PRIx32 ", expected 0x%08x", h->magic,
                         LW_MB_MAGIC);
  }
  if (h->version != LW_MB_VERSION) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "mailbox header: version is %" PRIu32 ", expected %u", h->version,
                         LW_MB_VERSION);
  }
  if (h->total_bytes != sizeof(lw_mailbox_t)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "mailbox header: total_bytes is %" PRIu32 ", expected %zu",
                         h->total_bytes, sizeof(lw_mailbox_t));
  }
  if (h->n_task_frames != LW_MB_TASK_FRAMES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "mailbox header: n_task_frames is %" PRIu32 ", expected %u",
                         h->n_task_frames, LW_MB_TASK_FRAMES);
  }
  if (h->ring_entries != LW_MB_RING_ENTRIES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "mailbox header: ring_entries is %" PRIu32 ", expected %u",
                         h->ring_entries, LW_MB_RING_ENTRIES);
  }
  if (h->child_kind != LW_MB_CHILD_CHIP && h->child_kind != LW_MB_CHILD_SUB) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "mailbox header: child_kind is %" PRIu32
                         ", expected %d (chip) or %d (sub)",
                         h->child_kind, LW_MB_CHILD_CHIP, LW_MB_CHILD_SUB);
  }
  return LW_OK;
}

bool lw__mailbox_task_transition_legal(lw_mb_task_state_t from, lw_mb_task_state_t to) {
  switch (from) {
    case LW_MB_TASK_IDLE:
      return to == LW_MB_TASK_READY;
    case LW_MB_TASK_READY:
      // READY -> terminal: the child fails a task it cannot take (bad args, unknown callable)
      // without ever running it.
      return to == LW_MB_TASK_RUNNING || lw__mailbox_task_state_is_terminal(to);
    case LW_MB_TASK_RUNNING:
      return lw__mailbox_task_state_is_terminal(to);
    case LW_MB_TASK_DONE:
    case LW_MB_TASK_FAILED:
    case LW_MB_TASK_CANCELLED:
      return to == LW_MB_TASK_IDLE;
  }
  return false;
}

lw_status_t lw__mailbox_args_encode(const lw_args_t *args, const lw_mb_arena_t *arena,
                                   lw_mb_args_t *out, lw_error_t *err) {
  memset(out, 0, sizeof(*out));
  if (args->n_tensors > LW_MAX_TENSORS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: %u tensors > %d",
                         args->n_tensors, LW_MAX_TENSORS);
  }
  if (args->n_scalars > LW_MAX_SCALARS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: %u scalars > %d",
                         args->n_scalars, LW_MAX_SCALARS);
  }
  uintptr_t base = arena != NULL ? (uintptr_t)arena->base : 0;
  uint64_t arena_bytes = arena != NULL && arena->base != NULL ? arena->bytes : 0;
  for (uint32_t i = 0; i < args->n_tensors; ++i) {
    const lw_args_tensor_t *t = &args->tensor[i];
    if (t->data == NULL && t->bytes == 0) continue;  // an empty tensor: offset 0, 0 bytes
    uintptr_t p = (uintptr_t)t->data;
    // Unsigned arithmetic on integers, not pointers: comparing pointers into different
    // objects is undefined, and p - base must not be formed when p < base.
    bool inside = t->data != NULL && p >= base && (uint64_t)(p - base) < arena_bytes &&
                  t->bytes <= arena_bytes - (uint64_t)(p - base);
    if (!inside) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "tensor %u at %p (%llu bytes) is outside the worker's shared "
                           "memory; allocate it with lw_worker_alloc",
                           i, t->data, (unsigned long long)t->bytes);
    }
    out->tensor[i].offset = (uint64_t)(p - base);
    out->tensor[i].bytes = t->bytes;
  }
  LW_RETURN_IF_ERROR(lw__launch_check(&args->launch, err));
  out->n_tensors = args->n_tensors;
  out->n_scalars = args->n_scalars;
  memcpy(out->scalar, args->scalar, sizeof(uint64_t) * args->n_scalars);
  out->launch = args->launch;
  return LW_OK;
}

lw_status_t lw__mailbox_args_decode(const lw_mb_args_t *in, const lw_mb_arena_t *arena,
                                   lw_kernel_args_t *out, lw_error_t *err) {
  memset(out, 0, sizeof(*out));
  // Read each count once: in may point into shared memory.
  uint32_t n_tensors = in->n_tensors;
  uint32_t n_scalars = in->n_scalars;
  if (n_tensors > LW_MAX_TENSORS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: %u tensors > %d", n_tensors,
                         LW_MAX_TENSORS);
  }
  if (n_scalars > LW_MAX_SCALARS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "args: %u scalars > %d", n_scalars,
                         LW_MAX_SCALARS);
  }
  uint64_t arena_bytes = arena != NULL && arena->base != NULL ? arena->bytes : 0;
  for (uint32_t i = 0; i < n_tensors; ++i) {
    uint64_t offset = in->tensor[i].offset;
    uint64_t bytes = in->tensor[i].bytes;
    // Two comparisons instead of offset + bytes <= arena_bytes, which can overflow.
    if (offset > arena_bytes || bytes > arena_bytes - offset) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "args: tensor %u [offset %llu, %llu bytes] is outside the %llu-byte "
                           "arena",
                           i, (unsigned long long)offset, (unsigned long long)bytes,
                           (unsigned long long)arena_bytes);
    }
    // A zero-byte tensor has nothing to address and arrives as NULL.
    out->tensor[i].data = bytes == 0 ? NULL : arena->base + offset;
    out->tensor[i].bytes = bytes;
  }
  // Check a private copy: in may point into shared memory the other side still writes.
  lw_launch_t launch = in->launch;
  LW_RETURN_IF_ERROR(lw__launch_check(&launch, err));
  out->n_tensors = n_tensors;
  out->n_scalars = n_scalars;
  memcpy(out->scalar, in->scalar, sizeof(uint64_t) * n_scalars);
  out->launch = launch;
  return LW_OK;
}

// ---------------------------------------------------------------------------------------------
// Parent side

lw_status_t lw__mailbox_post_task(lw_mailbox_t *mb, uint32_t frame, const lw_mb_task_post_t *post,
                                 lw_error_t *err) {
  if (frame >= LW_MB_TASK_FRAMES) return frame_index_error(err, "post_task", frame);
  if (!task_kind_is_known((uint32_t)post->kind)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, post->identity.task_id,
                         "post_task: unknown task kind %d", (int)post->kind);
  }
  if (post->args.n_tensors > LW_MAX_TENSORS || post->args.n_scalars > LW_MAX_SCALARS) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, post->identity.task_id,
                         "post_task: args with %u tensors, %u scalars exceed a "
                         "frame (%d, %d)",
                         post->args.n_tensors, post->args.n_scalars, LW_MAX_TENSORS,
                         LW_MAX_SCALARS);
  }
  lw_mb_task_t *t = &mb->task[frame];
  // Acquire: pairs with consume_task's release of IDLE, so this thread's reads of the old
  // result are ordered before the writes below (in case another parent thread consumed).
  uint32_t state = atomic_load_explicit(&t->state, memory_order_acquire);
  if (state != LW_MB_TASK_IDLE) {
    return task_state_error(err, LW_FAILED_PRECONDITION, "post_task", frame, "IDLE", state);
  }
  // The frame is IDLE: only the parent writes it now. The cancel word is left alone: the
  // run lane stores a fresh generation at run start (lw__cancel_begin).
  t->kind = (uint32_t)post->kind;
  atomic_store_explicit(&t->seq, post->seq, memory_order_relaxed);
  t->identity = post->identity;
  t->callable = post->callable;
  t->timeout_ns = post->timeout_ns;
  // Only the slots the post uses: the child reads no further (decode stops at the counts), and
  // a line the parent does not write is one the child's cache keeps (docs/protocol.md).
  t->args.n_tensors = post->args.n_tensors;
  t->args.n_scalars = post->args.n_scalars;
  memcpy(t->args.tensor, post->args.tensor, sizeof(t->args.tensor[0]) * post->args.n_tensors);
  memcpy(t->args.scalar, post->args.scalar, sizeof(t->args.scalar[0]) * post->args.n_scalars);
  t->args.launch = post->args.launch;
  // The cancel line (cancel_dispatch, started_ns) is the child's: a cancel names its post by
  // dispatch id, and the child zeroed started_ns when the frame's last task ended, so a post
  // leaves the line in the child's cache. The result fields are left as the last task left
  // them: the child writes every one of them before it moves the frame to a terminal state
  // (lw__mailbox_task_complete), the only state in which the parent reads them, so resetting
  // them here would only write a line the child last wrote.
  // Release: the payload above is visible to a child that acquires TASK_READY. A store, not a
  // compare-and-swap: the frame was checked IDLE above, the parent's state (see the header on
  // state changes).
  atomic_store_explicit(&t->state, LW_MB_TASK_READY, memory_order_release);
  ring_doorbell(mb, post->seq, (uint8_t)frame);
  return LW_OK;
}

static void format_identity(char *buf, size_t n, const lw_mb_identity_t *id) {
  snprintf(buf, n, "{run %llu, task %llu, dispatch %llu, generation %llu}",
           (unsigned long long)id->run_id, (unsigned long long)id->task_id,
           (unsigned long long)id->dispatch_id, (unsigned long long)id->generation);
}

static lw_status_t identity_mismatch(lw_error_t *err, uint32_t frame,
                                     const lw_mb_identity_t *expected,
                                     const lw_mb_identity_t *found) {
  char want[160], got[160];
  format_identity(want, sizeof(want), expected);
  format_identity(got, sizeof(got), found);
  return lw__error_set(err, LW_INTERNAL, -1, expected->task_id,
                       "identity mismatch on frame %u: expected %s, found %s", frame, want, got);
}

lw_status_t lw__mailbox_consume_task(lw_mailbox_t *mb, const lw_mb_completion_t *c,
                                     const lw_mb_identity_t *expected, lw_mb_task_result_t *out,
                                     lw_error_t *err) {
  uint32_t frame = c->frame;
  if (frame >= LW_MB_TASK_FRAMES) return frame_index_error(err, "consume_task", frame);
  lw_mb_task_t *t = &mb->task[frame];
  if (c->kind == LW_MB_COMPLETION_TASK_OK) {
    if (memcmp(&c->identity, expected, sizeof(*expected)) != 0) {
      return identity_mismatch(err, frame, expected, &c->identity);
    }
    memset(out, 0, sizeof(*out));
    out->status = LW_OK;
    out->kernel_ns = c->kernel_ns;
    out->queue_ns = c->queue_ns;
    out->final_state = LW_MB_TASK_DONE;
    error_none(&out->error);
    // Release: the reads of the entry are done before the frame can be posted again. A store
    // without a look at the frame (the transfer of its line this saves is the point): the child
    // stored DONE before it pushed, and the entry's acquire orders that store before this one.
    atomic_store_explicit(&t->state, LW_MB_TASK_IDLE, memory_order_release);
    // The parent posts into its frames in turn, so mostly into this one next: the args' first
    // line (the counts, always written) is asked for now, beside the state's line the store
    // above asks for, so the post's barrier finds both here.
    lw__prefetch_for_write(&t->args);
    return LW_OK;
  }
  // The parent writes this line next (IDLE, then the next post): one transfer, not two.
  lw__prefetch_for_write(&t->state);
  // Acquire: pairs with task_complete's release store; the result below was written before it.
  uint32_t state = atomic_load_explicit(&t->state, memory_order_acquire);
  if (!lw__mailbox_task_state_is_terminal(state)) {
    return task_state_error(err, LW_FAILED_PRECONDITION, "consume_task", frame,
                            "TASK_DONE, TASK_FAILED or TASK_CANCELLED", state);
  }
  // Snapshot the result once: the child must not write a terminal frame, but if it does the
  // checks and the copy still see one consistent set of values.
  lw_mb_identity_t id = t->identity;
  int32_t status = t->result_status;
  if (memcmp(&id, expected, sizeof(id)) != 0) return identity_mismatch(err, frame, expected, &id);
  bool consistent = status_is_valid(status) &&
                    (state == LW_MB_TASK_DONE ? status == LW_OK : status != LW_OK);
  if (!consistent) {
    return lw__error_set(err, LW_INTERNAL, -1, expected->task_id,
                         "frame %u is %s with result status %" PRId32 " (%s)", frame,
                         lw__mailbox_task_state_name(state), status,
                         lw_status_name((lw_status_t)status));
  }
  out->status = (lw_status_t)status;
  out->kernel_rc = t->kernel_rc;
  out->kernel_ns = t->kernel_ns;
  out->queue_ns = t->queue_ns;
  out->final_state = (lw_mb_task_state_t)state;
  // The other side is untrusted: its message is copied up to its NUL and terminated, and the
  // code agrees with the status that was validated above.
  error_copy(&out->error, &t->result_error);
  out->error.code = (lw_status_t)status;
  // Release: the reads above complete before the frame can be posted (and written) again. A
  // store: a terminal frame is the parent's (see the header on state changes).
  atomic_store_explicit(&t->state, LW_MB_TASK_IDLE, memory_order_release);
  return LW_OK;
}

bool lw__mailbox_cancel_task(lw_mailbox_t *mb, uint32_t frame, uint64_t dispatch_id) {
  if (frame >= LW_MB_TASK_FRAMES) return false;
  lw_cancel_word_t *word = &mb->task[frame].cancel;
  // seq_cst: pairs with the child's fence after lw__cancel_begin: either the starting run sees
  // the mark, or the load below sees its fresh generation.
  atomic_store_explicit(&mb->task[frame].cancel_dispatch, dispatch_id, memory_order_seq_cst);
  uint64_t loaded = atomic_load_explicit(word, memory_order_seq_cst);
  // 0: no run ever began on this frame; odd: the last run was cancelled or has completed
  // (task_complete retires the generation). Only an even, nonzero word is a live run.
  bool hit = loaded != 0 && (loaded & 1u) == 0 && lw__cancel_request(word, loaded);
  // Release: a child that sees the new cancel_seq (acquire) sees cancel_dispatch too.
  atomic_fetch_add_explicit(&mb->doorbell.cancel_seq, 1, memory_order_release);
  lw__waitword_wake(&mb->doorbell.word, true);
  lw__waitword_wake(&mb->doorbell.loop_word, true);
  return hit;
}

lw_status_t lw__mailbox_post_control(lw_mailbox_t *mb, const lw_mb_control_post_t *p,
                                    lw_error_t *err) {
  if (!command_is_known((uint32_t)p->command)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "post_control: unknown command %d",
                         (int)p->command);
  }
  if (p->n_params > sizeof(p->param_dirs)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "post_control: %u params > %zu",
                         p->n_params, sizeof(p->param_dirs));
  }
  if (p->build_options && strnlen(p->build_options, LW_MAX_BUILD_OPTIONS_BYTES) >=
                              LW_MAX_BUILD_OPTIONS_BYTES) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "post_control: build options longer than %d characters",
                         LW_MAX_BUILD_OPTIONS_BYTES - 1);
  }
  lw_mb_control_t *c = &mb->control;
  // Acquire: pairs with consume_control's release of IDLE (the previous ack was read first).
  uint32_t state = atomic_load_explicit(&c->state, memory_order_acquire);
  if (state != LW_MB_CONTROL_IDLE) {
    return control_state_error(err, LW_FAILED_PRECONDITION, "post_control", "IDLE", state);
  }
  c->command = (uint32_t)p->command;
  c->seq = p->seq;
  c->control_id = p->control_id;
  c->image_offset = p->image_offset;
  c->image_bytes = p->image_bytes;
  c->target = p->target;
  c->n_params = p->n_params;
  c->reserved0 = 0;
  memcpy(c->param_dirs, p->param_dirs, sizeof(c->param_dirs));
  name_copy(c->name, p->name);
  name_copy(c->entry, p->entry);
  c->format = p->format;
  c->reserved2 = 0;
  memset(c->build_options, 0, sizeof(c->build_options));
  if (p->build_options) {
    memcpy(c->build_options, p->build_options, strlen(p->build_options));
  }
  c->ack_status = LW_OK;
  c->ack_async = 0;
  c->ack_value = 0;
  memset(&c->ack_error, 0, sizeof(c->ack_error));
  uint32_t expected = LW_MB_CONTROL_IDLE;
  // Release: the request above is visible to a child that acquires CONTROL_REQUEST.
  if (!atomic_compare_exchange_strong_explicit(&c->state, &expected, LW_MB_CONTROL_REQUEST,
                                               memory_order_release, memory_order_relaxed)) {
    return control_state_error(err, LW_INTERNAL, "post_control", "IDLE", expected);
  }
  ring_doorbell(mb, p->seq, LW_MB_POST_CONTROL);
  lw__waitword_wake(&mb->doorbell.loop_word, true);  // controls are the mailbox loop's too
  return LW_OK;
}

lw_status_t lw__mailbox_consume_control(lw_mailbox_t *mb, lw_mb_control_ack_t *out,
                                       lw_error_t *err) {
  lw_mb_control_t *c = &mb->control;
  // Acquire: pairs with ack_control's release CAS; the ack below was written before it.
  uint32_t state = atomic_load_explicit(&c->state, memory_order_acquire);
  if (state == LW_MB_CONTROL_REQUEST) {
    return lw__error_set(err, LW_FAILED_PRECONDITION, -1, 0,
                         "consume_control: control frame not done (CONTROL_REQUEST)");
  }
  if (state != LW_MB_CONTROL_DONE) {
    return control_state_error(err,
                               state == LW_MB_CONTROL_IDLE ? LW_FAILED_PRECONDITION : LW_INTERNAL,
                               "consume_control", "CONTROL_DONE", state);
  }
  int32_t status = c->ack_status;
  uint32_t async = c->ack_async;
  if (!status_is_valid(status) || async > 1) {
    return lw__error_set(err, LW_INTERNAL, -1, 0,
                         "control ack has status %" PRId32 " (%s), async %" PRIu32, status,
                         lw_status_name((lw_status_t)status), async);
  }
  memset(out, 0, sizeof(*out));
  out->status = (lw_status_t)status;
  out->async = async != 0;
  out->value = c->ack_value;
  out->error = c->ack_error;
  force_nul(&out->error);  // untrusted
  out->error.code = (lw_status_t)status;
  uint32_t from = LW_MB_CONTROL_DONE;
  // Release: the ack is read before the frame can be posted (and written) again.
  if (!atomic_compare_exchange_strong_explicit(&c->state, &from, LW_MB_CONTROL_IDLE,
                                               memory_order_release, memory_order_relaxed)) {
    return control_state_error(err, LW_INTERNAL, "consume_control", "CONTROL_DONE", from);
  }
  return LW_OK;
}

// The entry at the tail carries its mark (acquire: pairs with push's release of it, so the
// entry's other fields, and what the child wrote before it, are visible).
static bool tail_marked(const lw_mailbox_t *mb, uint64_t tail) {
  const lw_mb_completion_t *slot = &mb->ring[tail % LW_MB_RING_ENTRIES];
  return atomic_load_explicit(&slot->mark, memory_order_acquire) ==
         lw__mailbox_completion_mark(tail);
}

// The head says the ring holds nothing for the parent: it is at the tail, or one behind it, the
// parent having taken entry tail - 1 by its mark before the push that stored the mark stored
// the head (never further: a push stores its mark after the head of the push before it, so
// the mark's acquire brings that head along).
static bool head_at_tail(uint64_t head, uint64_t tail) { return head == tail || head + 1 == tail; }

// Pop's look at the head, for a tail entry without its mark: NOT_FOUND (empty), OK (the entry
// came meanwhile: its mark is there now), INTERNAL (corrupt head, or a head past an entry
// without its mark; *out_consume says whether the entry is consumed).
static lw_status_t check_head(lw_mailbox_t *mb, uint64_t tail, bool *out_consume, lw_error_t *err) {
  *out_consume = false;
  // seq_cst (acquire and more): the acquire pairs with push's head store, so the entry and
  // its mark are visible; seq_cst makes "store parent.sleeping = 1, then pop" a Dekker pair
  // with push's "store head, then load sleeping" (no lost wake-up).
  uint64_t head = atomic_load_explicit(&mb->ring_head.value, memory_order_seq_cst);
  if (head_at_tail(head, tail)) return LW_NOT_FOUND;
  if (head - tail > LW_MB_RING_ENTRIES) {
    return lw__error_set(err, LW_INTERNAL, -1, 0,
                         "completion ring head %llu is %llu entries past tail %llu "
                         "(ring holds %u)",
                         (unsigned long long)head, (unsigned long long)(head - tail),
                         (unsigned long long)tail, LW_MB_RING_ENTRIES);
  }
  // Push stores the mark before the head: a head past the tail means the mark is there.
  if (tail_marked(mb, tail)) return LW_OK;
  *out_consume = true;
  const lw_mb_completion_t *slot = &mb->ring[tail % LW_MB_RING_ENTRIES];
  return lw__error_set(err, LW_INTERNAL, -1, 0,
                       "completion %llu has mark %" PRIu32 ", not %" PRIu32
                       " (the head, %llu, says it was pushed)",
                       (unsigned long long)tail, atomic_load(&slot->mark),
                       lw__mailbox_completion_mark(tail), (unsigned long long)head);
}

static lw_status_t pop(lw_mailbox_t *mb, lw_mb_completion_t *out, bool may_check_head,
                       lw_error_t *err) {
  // Relaxed: the tail is written only by this (the single consuming) thread.
  uint64_t tail = atomic_load_explicit(&mb->ring_tail.value, memory_order_relaxed);
  if (!tail_marked(mb, tail)) {
    if (!may_check_head) return LW_NOT_FOUND;
    bool consume = false;
    lw_status_t st = check_head(mb, tail, &consume, err);
    if (st != LW_OK) {
      if (consume) atomic_store_explicit(&mb->ring_tail.value, tail + 1, memory_order_release);
      return st;
    }
  }
  // A task entry's first line (its result is in its frame: push writes no more of the entry,
  // and the rest of the copy is zeroed); a control entry's fields and its error.
  const lw_mb_completion_t *slot = &mb->ring[tail % LW_MB_RING_ENTRIES];
  memcpy(out, slot, LW_MB_TASK_COMPLETION_BYTES);
  if (out->kind == LW_MB_COMPLETION_CONTROL) {
    memcpy((char *)out + LW_MB_TASK_COMPLETION_BYTES,
           (const char *)slot + LW_MB_TASK_COMPLETION_BYTES,
           offsetof(lw_mb_completion_t, error) - LW_MB_TASK_COMPLETION_BYTES);
    error_copy(&out->error, &slot->error);  // untrusted: terminated
  } else {
    memset((char *)out + LW_MB_TASK_COMPLETION_BYTES, 0,
           offsetof(lw_mb_completion_t, error) - LW_MB_TASK_COMPLETION_BYTES);
    error_none(&out->error);
  }
  // Release: the copy above is complete before the child may overwrite the slot.
  atomic_store_explicit(&mb->ring_tail.cpu, lw__sys_cpu(), memory_order_relaxed);  // a hint
  atomic_store_explicit(&mb->ring_tail.value, tail + 1, memory_order_release);
  switch (out->kind) {
    case LW_MB_COMPLETION_TASK:
    case LW_MB_COMPLETION_TASK_OK:
      if (out->frame < LW_MB_TASK_FRAMES) return LW_OK;
      return lw__error_set(err, LW_INTERNAL, -1, out->identity.task_id,
                           "completion %llu names task frame %" PRIu32 " (%u frames)",
                           (unsigned long long)tail, out->frame, LW_MB_TASK_FRAMES);
    case LW_MB_COMPLETION_CONTROL:
      if (status_is_valid(out->status)) return LW_OK;
      return lw__error_set(
          err, LW_INTERNAL, -1, 0, "completion %llu (control %llu) has status %" PRId32,
          (unsigned long long)tail, (unsigned long long)out->control_id, out->status);
    default:
      return lw__error_set(err, LW_INTERNAL, -1, 0, "completion %llu has kind %" PRIu32,
                           (unsigned long long)tail, out->kind);
  }
}

lw_status_t lw__mailbox_pop_completion(lw_mailbox_t *mb, lw_mb_completion_t *out, lw_error_t *err) {
  return pop(mb, out, true, err);
}

lw_status_t lw__mailbox_pop_next_completion(lw_mailbox_t *mb, lw_mb_completion_t *out,
                                            lw_error_t *err) {
  return pop(mb, out, false, err);
}

bool lw__mailbox_completion_pending(lw_mailbox_t *mb) {
  uint64_t tail = atomic_load_explicit(&mb->ring_tail.value, memory_order_acquire);
  if (tail_marked(mb, tail)) return true;
  // seq_cst: see check_head (the re-check before a sleep).
  return !head_at_tail(atomic_load_explicit(&mb->ring_head.value, memory_order_seq_cst), tail);
}

// ---------------------------------------------------------------------------------------------
// Child side

// True with the post when task frame f (any value: out of range is false) holds post seq,
// checked as the scan checks it: acquire on the state, then the number.
static bool find_post_in_frame(lw_mailbox_t *mb, uint64_t seq, uint32_t f, bool *out_is_control,
                               uint32_t *out_frame) {
  if (f >= LW_MB_TASK_FRAMES) return false;
  const lw_mb_task_t *t = &mb->task[f];
  // The child writes this line next (RUNNING, then the terminal state): one transfer, not two.
  lw__prefetch_for_write(&t->state);
  if (atomic_load_explicit(&t->state, memory_order_acquire) != LW_MB_TASK_READY ||
      atomic_load_explicit(&t->seq, memory_order_relaxed) != seq) {
    return false;
  }
  *out_is_control = false;
  *out_frame = f;
  return true;
}

void lw__mailbox_prefetch_post(const lw_mailbox_t *mb, uint32_t frame) {
  if (frame >= LW_MB_TASK_FRAMES) return;
  lw__prefetch_for_write(&mb->task[frame].state);
  __builtin_prefetch(&mb->task[frame].args, 0, 3);
}

bool lw__mailbox_post_in_frame(lw_mailbox_t *mb, uint64_t seq, uint32_t frame) {
  bool is_control = false;
  uint32_t found = 0;
  return find_post_in_frame(mb, seq, frame, &is_control, &found);
}

// The post index's answer for seq (see lw_mb_doorbell_t): true with the post when the slot
// names a frame that holds post seq, checked as the scan checks it (acquire on the state, then
// the number). Anything else, a stale or broken slot included, is left to the scan.
static bool find_post_indexed(lw_mailbox_t *mb, uint64_t seq, bool *out_is_control,
                              uint32_t *out_frame) {
  uint8_t slot = atomic_load_explicit(&mb->post_index.frame[seq % LW_MB_POST_SLOTS],
                                      memory_order_relaxed);
  if (slot == LW_MB_POST_CONTROL) {
    if (atomic_load_explicit(&mb->control.state, memory_order_acquire) != LW_MB_CONTROL_REQUEST ||
        mb->control.seq != seq) {
      return false;
    }
    *out_is_control = true;
    *out_frame = 0;
    return true;
  }
  return find_post_in_frame(mb, seq, slot, out_is_control, out_frame);
}

lw_status_t lw__mailbox_find_post(lw_mailbox_t *mb, uint64_t seq, uint32_t hint,
                                  bool *out_is_control, uint32_t *out_frame, lw_error_t *err) {
  if (find_post_in_frame(mb, seq, hint, out_is_control, out_frame)) return LW_OK;
  if (find_post_indexed(mb, seq, out_is_control, out_frame)) return LW_OK;
  bool found = false;
  bool is_control = false;
  uint32_t found_frame = 0;
  // Acquire on each state: pairs with the post's release store (the control frame's: a CAS),
  // so seq is read only after the parent finished writing it (and never while the parent may
  // be writing it).
  uint32_t cstate = atomic_load_explicit(&mb->control.state, memory_order_acquire);
  if (cstate == LW_MB_CONTROL_REQUEST) {
    uint64_t cseq = mb->control.seq;
    if (cseq < seq) {
      return lw__error_set(err, LW_INTERNAL, -1, 0,
                           "control request has sequence number %llu, below the "
                           "next expected %llu (stale or out of order)",
                           (unsigned long long)cseq, (unsigned long long)seq);
    }
    if (cseq == seq) found = is_control = true;
  }
  for (uint32_t i = 0; i < LW_MB_TASK_FRAMES; ++i) {
    const lw_mb_task_t *t = &mb->task[i];
    if (atomic_load_explicit(&t->state, memory_order_acquire) != LW_MB_TASK_READY) continue;
    uint64_t tseq = atomic_load_explicit(&t->seq, memory_order_relaxed);
    if (tseq < seq) {
      return lw__error_set(err, LW_INTERNAL, -1, t->identity.task_id,
                           "task frame %u is TASK_READY with sequence number %llu, "
                           "below the next expected %llu (stale or out of order)",
                           i, (unsigned long long)tseq, (unsigned long long)seq);
    }
    if (tseq != seq) continue;
    if (found) {
      return lw__error_set(err, LW_INTERNAL, -1, 0,
                           "sequence number %llu is posted twice (%s and task "
                           "frame %u)",
                           (unsigned long long)seq,
                           is_control ? "the control frame" : "another task frame", i);
    }
    found = true;
    is_control = false;
    found_frame = i;
  }
  if (!found) {
    return lw__error_set(err, LW_NOT_FOUND, -1, 0, "post %llu is not visible yet",
                         (unsigned long long)seq);
  }
  *out_is_control = is_control;
  *out_frame = is_control ? 0 : found_frame;
  return LW_OK;
}

lw_status_t lw__mailbox_take_task(lw_mailbox_t *mb, uint32_t frame, const lw_mb_arena_t *arena,
                                 lw_mb_task_taken_t *out, lw_error_t *err) {
  if (frame >= LW_MB_TASK_FRAMES) return frame_index_error(err, "take_task", frame);
  lw_mb_task_t *t = &mb->task[frame];
  // Acquire: pairs with post_task's release store; the payload was written before READY.
  uint32_t state = atomic_load_explicit(&t->state, memory_order_acquire);
  if (state != LW_MB_TASK_READY) {
    return task_state_error(err, LW_FAILED_PRECONDITION, "take_task", frame, "TASK_READY", state);
  }
  memset(out, 0, sizeof(*out));
  out->identity = t->identity;
  uint32_t kind = t->kind;
  if (!task_kind_is_known(kind)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, out->identity.task_id,
                         "task frame %u has unknown kind %" PRIu32, frame, kind);
  }
  out->kind = (lw_mb_task_kind_t)kind;
  out->callable = t->callable;
  out->timeout_ns = t->timeout_ns;
  // What the child writes when the task ends, the parent's to read last: the result's line and
  // the completion ring's next slot. Asked for now, they come over while the task runs.
  lw__prefetch_for_write(&t->result_status);
  lw__prefetch_for_write(
      &mb->ring[atomic_load_explicit(&mb->ring_head.value, memory_order_relaxed) %
                LW_MB_RING_ENTRIES]);
  // Decoded in place: decode reads each field of the shared frame once, so its checks and
  // its pointers come from the same values, and it reads only the slots the counts name.
  lw_status_t st = lw__mailbox_args_decode(&t->args, arena, &out->args, err);
  if (st != LW_OK && err != NULL) {
    err->task_id = out->identity.task_id;
  }
  return st;
}

lw_status_t lw__mailbox_task_set_running(lw_mailbox_t *mb, uint32_t frame, lw_error_t *err) {
  if (frame >= LW_MB_TASK_FRAMES) return frame_index_error(err, "task_set_running", frame);
  uint32_t state = atomic_load_explicit(&mb->task[frame].state, memory_order_acquire);
  if (state != LW_MB_TASK_READY) {
    return task_state_error(err, LW_FAILED_PRECONDITION, "task_set_running", frame, "TASK_READY",
                            state);
  }
  // Release: the child's reads of the payload (take_task) are done before RUNNING is seen. A
  // store: a READY frame is the child's (see the header on state changes).
  atomic_store_explicit(&mb->task[frame].state, LW_MB_TASK_RUNNING, memory_order_release);
  return LW_OK;
}

lw_status_t lw__mailbox_task_complete(lw_mailbox_t *mb, uint32_t frame,
                                     const lw_mb_task_result_t *result, lw_error_t *err) {
  if (frame >= LW_MB_TASK_FRAMES) return frame_index_error(err, "task_complete", frame);
  if (!status_is_valid((int32_t)result->status)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "task_complete: frame %u: invalid status %d", frame, (int)result->status);
  }
  lw_mb_task_t *t = &mb->task[frame];
  // Acquire: the frame is the child's only in READY or RUNNING; check before writing into it.
  uint32_t state = atomic_load_explicit(&t->state, memory_order_acquire);
  if (state != LW_MB_TASK_READY && state != LW_MB_TASK_RUNNING) {
    return task_state_error(err, LW_FAILED_PRECONDITION, "task_complete", frame,
                            "TASK_READY or TASK_RUNNING", state);
  }
  lw_mb_task_state_t final_state;
  switch (result->status) {
    case LW_OK:
      final_state = LW_MB_TASK_DONE;
      break;
    case LW_CANCELLED:
    case LW_DEADLINE_EXCEEDED:
      final_state = LW_MB_TASK_CANCELLED;
      break;
    default:
      final_state = LW_MB_TASK_FAILED;
      break;
  }
  // Retire the run's generation (set bit 0): from now on lw__mailbox_cancel_task finds no live
  // run on this frame and returns false, and a late cancel or watchdog misses. An RMW, so it
  // composes with a racing lw__cancel_request CAS (whichever comes first, the word ends odd).
  // First, on the child's own line: an RMW is a full barrier on x86, and after the stores into
  // the parent's lines below it would wait for their transfers. Relaxed: the state store below
  // publishes it.
  atomic_fetch_or_explicit(&t->cancel, 1u, memory_order_relaxed);
  // The frame's next task has not started (the parent reads started_ns as "the kernel began";
  // its post does not reset it). Relaxed: the state store below publishes it.
  atomic_store_explicit(&t->started_ns, 0, memory_order_relaxed);
  t->result_status = (int32_t)result->status;
  t->kernel_rc = result->kernel_rc;
  t->kernel_ns = result->kernel_ns;
  t->queue_ns = result->queue_ns;
  error_copy(&t->result_error, &result->error);
  t->result_error.code = result->status;
  // Release: the result above is visible to a parent that acquires the terminal state. A store:
  // a READY or RUNNING frame is the child's (see the header on state changes).
  atomic_store_explicit(&t->state, (uint32_t)final_state, memory_order_release);
  return LW_OK;
}

lw_status_t lw__mailbox_take_control(lw_mailbox_t *mb, const lw_mb_arena_t *arena,
                                    lw_mb_control_taken_t *out, lw_error_t *err) {
  const lw_mb_control_t *c = &mb->control;
  // Acquire: pairs with post_control's release CAS; the request was written before it.
  uint32_t state = atomic_load_explicit(&c->state, memory_order_acquire);
  if (state != LW_MB_CONTROL_REQUEST) {
    return control_state_error(err, LW_FAILED_PRECONDITION, "take_control", "CONTROL_REQUEST",
                               state);
  }
  memset(out, 0, sizeof(*out));
  uint32_t command = c->command;
  out->control_id = c->control_id;
  out->image_offset = c->image_offset;
  out->image_bytes = c->image_bytes;
  out->target = c->target;
  out->n_params = c->n_params;
  memcpy(out->param_dirs, c->param_dirs, sizeof(out->param_dirs));
  memcpy(out->name, c->name, sizeof(out->name));
  memcpy(out->entry, c->entry, sizeof(out->entry));
  out->format = c->format;
  memcpy(out->build_options, c->build_options, sizeof(out->build_options));
  // Validate the private copy, not the shared frame.
  if (!command_is_known(command)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "control %llu: unknown command %" PRIu32,
                         (unsigned long long)out->control_id, command);
  }
  out->command = (lw_mb_command_t)command;
  if (!name_is_terminated(out->name) || !name_is_terminated(out->entry)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "control %llu: %s is not NUL-terminated within %d bytes",
                         (unsigned long long)out->control_id,
                         name_is_terminated(out->name) ? "entry" : "name", LW_MB_NAME_BYTES);
  }
  if (out->n_params > sizeof(out->param_dirs)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "control %llu: %" PRIu32 " params > %zu",
                         (unsigned long long)out->control_id, out->n_params,
                         sizeof(out->param_dirs));
  }
  if (command == LW_MB_CMD_REGISTER) {
    uint64_t arena_bytes = arena != NULL && arena->base != NULL ? arena->bytes : 0;
    if (out->image_bytes == 0 || out->image_offset > arena_bytes ||
        out->image_bytes > arena_bytes - out->image_offset) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "control %llu: REGISTER image [offset %llu, %llu bytes] "
                           "is empty or outside the %llu-byte arena",
                           (unsigned long long)out->control_id,
                           (unsigned long long)out->image_offset,
                           (unsigned long long)out->image_bytes, (unsigned long long)arena_bytes);
    }
    if (out->format > (uint32_t)LW_IMAGE_FATBIN) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "control %llu: REGISTER image format %" PRIu32
                           " is not an LW_IMAGE_* value (0..%d)",
                           (unsigned long long)out->control_id, out->format, LW_IMAGE_FATBIN);
    }
    if (memchr(out->build_options, 0, sizeof(out->build_options)) == NULL) {
      return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                           "control %llu: REGISTER build options are not NUL-terminated "
                           "within %d bytes",
                           (unsigned long long)out->control_id, LW_MAX_BUILD_OPTIONS_BYTES);
    }
  }
  return LW_OK;
}

lw_status_t lw__mailbox_ack_control(lw_mailbox_t *mb, const lw_mb_control_ack_t *ack,
                                   lw_error_t *err) {
  if (!status_is_valid((int32_t)ack->status)) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "ack_control: invalid status %d",
                         (int)ack->status);
  }
  lw_mb_control_t *c = &mb->control;
  // Acquire: the frame is the child's only in CONTROL_REQUEST; check before writing into it.
  uint32_t state = atomic_load_explicit(&c->state, memory_order_acquire);
  if (state != LW_MB_CONTROL_REQUEST) {
    return control_state_error(err, LW_FAILED_PRECONDITION, "ack_control", "CONTROL_REQUEST",
                               state);
  }
  c->ack_status = (int32_t)ack->status;
  c->ack_async = ack->async ? 1u : 0u;
  c->ack_value = ack->value;
  c->ack_error = ack->error;
  force_nul(&c->ack_error);
  uint32_t from = LW_MB_CONTROL_REQUEST;
  // Release: the ack above is visible to a parent that acquires CONTROL_DONE.
  if (!atomic_compare_exchange_strong_explicit(&c->state, &from, LW_MB_CONTROL_DONE,
                                               memory_order_release, memory_order_acquire)) {
    return control_state_error(err, LW_INTERNAL, "ack_control", "CONTROL_REQUEST", from);
  }
  // Shared futex: the poster sleeps on done_word from the parent process.
  lw__waitword_wake(&c->done_word, true);
  return LW_OK;
}

static bool deadline_passed(int64_t deadline_ns) {
  return deadline_ns != LW_DEADLINE_NEVER && lw__now_ns() >= deadline_ns;
}

lw_status_t lw__mailbox_push_completion(lw_mailbox_t *mb, const lw_mb_completion_t *c,
                                       int64_t deadline_ns, bool *out_wake, lw_error_t *err) {
  *out_wake = false;
  // Relaxed: the head is written only by the (serialized) producer, i.e. by us.
  uint64_t head = atomic_load_explicit(&mb->ring_head.value, memory_order_relaxed);
  lw__spin_t spin = LW__SPIN_INIT;
  // The tail this side saw last: while it leaves room, the slot is free (the tail only moves
  // on), and the parent's tail line is not read.
  uint64_t tail = mb->ring_head.tail_seen;
  for (;;) {
    if (head - tail < LW_MB_RING_ENTRIES) break;
    // Acquire: pairs with pop's release of the tail; the parent finished copying the slot
    // we are about to reuse.
    tail = atomic_load_explicit(&mb->ring_tail.value, memory_order_acquire);
    mb->ring_head.tail_seen = tail;
    uint64_t used = head - tail;
    if (used < LW_MB_RING_ENTRIES) break;
    if (used > LW_MB_RING_ENTRIES) {
      return lw__error_set(err, LW_INTERNAL, -1, 0,
                           "completion ring tail %llu is not within %u entries of "
                           "head %llu",
                           (unsigned long long)tail, LW_MB_RING_ENTRIES, (unsigned long long)head);
    }
    if (deadline_passed(deadline_ns)) {
      return lw__error_set(err, LW_DEADLINE_EXCEEDED, -1, 0,
                           "completion ring full (%u entries) until the deadline; "
                           "the parent is not draining",
                           LW_MB_RING_ENTRIES);
    }
    if (lw__spin_step(&spin) == LW__SPIN_BLOCK) {
      struct timespec nap = {0, LW_MB_PUSH_NAP_NS};
      nanosleep(&nap, NULL);  // EINTR is fine: the loop re-checks
    }
  }
  lw_mb_completion_t *slot = &mb->ring[head % LW_MB_RING_ENTRIES];
  // A task's first line; a control's fields and its error (what pop reads of each). Around the
  // mark, which the parent may be reading (it holds the slot's last entry's): stored last.
  const size_t mark_at = offsetof(lw_mb_completion_t, mark), after_mark = mark_at + 4;
  memcpy(slot, c, mark_at);
  if (c->kind == LW_MB_COMPLETION_CONTROL) {
    memcpy((char *)slot + after_mark, (const char *)c + after_mark,
           offsetof(lw_mb_completion_t, error) - after_mark);
    error_copy(&slot->error, &c->error);
  } else {
    memcpy((char *)slot + after_mark, (const char *)c + after_mark,
           LW_MB_TASK_COMPLETION_BYTES - after_mark);
  }
  // Release: a parent that finds this mark at its tail (acquire) has the entry without
  // reading the head.
  atomic_store_explicit(&slot->mark, lw__mailbox_completion_mark(head), memory_order_release);
  // seq_cst (a release and more): the release publishes the entry to pop's acquire; seq_cst
  // orders this store before the sleeping load below (Dekker pair with the parent's
  // "sleeping = 1, then re-check the ring"), so either the parent sees the entry or we see
  // its flag.
  atomic_store_explicit(&mb->ring_head.cpu, lw__sys_cpu(), memory_order_relaxed);  // a hint
  atomic_store_explicit(&mb->ring_head.value, head + 1, memory_order_seq_cst);
  // seq_cst: the other half of the Dekker pair above.
  *out_wake = atomic_load_explicit(&mb->parent.sleeping, memory_order_seq_cst) != 0;
  return LW_OK;
}
