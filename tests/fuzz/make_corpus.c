// tests/fuzz/make_corpus.c — writes the seed corpus: a few valid (and a few deliberately
// malformed) inputs per harness, built with the real encoders (lw__mailbox_post_task,
// lw__mailbox_post_control, ...) so fuzzing starts from frames the parent actually writes, and
// for image_check a real kernel (tests/fuzz/tiny_kernel.c, built by tests/fuzz/CMakeLists.txt
// for this host: LW_FUZZ_TINY_KERNEL) with truncated and damaged copies.
//
//   lw_fuzz_make_corpus DIR    writes DIR/<target>/<name> (the committed copy is
//                              tests/fuzz/corpus; regression inputs live there too)
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "callables/cuda_images.h"
#include "fuzz/fuzz_harness.h"
#include "parent/l4_wire.h"

static const char *g_dir;

static void die(const char *what) {
  fprintf(stderr, "lw_fuzz_make_corpus: %s\n", what);
  exit(1);
}

static void make_dir(const char *path) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST) die(path);
}

static void write_seed(const char *target, const char *name, const void *params,
                       size_t params_size, const void *payload, size_t payload_size) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", g_dir, target);
  make_dir(path);
  snprintf(path, sizeof(path), "%s/%s/%s", g_dir, target, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL) die(path);
  if (fwrite(params, 1, params_size, f) != params_size ||
      (payload_size > 0 && fwrite(payload, 1, payload_size, f) != payload_size) ||
      fclose(f) != 0) {
    die(path);
  }
}

static void check(lw_status_t st, const lw_error_t *err) {
  if (st != LW_OK) die(err->message);
}

static lw_mb_identity_t ident(uint64_t n) {
  return (lw_mb_identity_t){.run_id = 10 + n, .task_id = 20 + n, .dispatch_id = 30 + n,
                            .generation = 2};
}

// ---------------------------------------------------------------------------------------------
// take_task

// How many bytes of a task frame the seeds carry: through the args (the child reads nothing
// after them).
#define TASK_PAYLOAD_BYTES (offsetof(lw_mb_task_t, args) + sizeof(lw_mb_args_t))

static lw_mb_task_post_t task_post(uint64_t seq, uint64_t n, lw_mb_task_kind_t kind) {
  lw_mb_task_post_t p;
  memset(&p, 0, sizeof(p));
  p.seq = seq;
  p.identity = ident(n);
  p.kind = kind;
  p.callable = 3;
  p.timeout_ns = 0;
  return p;
}

// Posts post on a scratch mailbox and writes params + the frame's bytes.
static void task_seed(const char *name, lw_fuzz_task_params_t *params,
                      const lw_mb_task_post_t *post, uint32_t raw_kind) {
  static _Alignas(64) lw_mailbox_t mb;
  lw__mailbox_initialize(&mb, LW_MB_CHILD_CHIP, 0, LW_FUZZ_ARENA_BYTES);
  lw_error_t err;
  uint32_t frame = params->frame % LW_MB_TASK_FRAMES;
  check(lw__mailbox_post_task(&mb, frame, post, &err), &err);
  if (raw_kind != 0) mb.task[frame].kind = raw_kind;  // what post_task refuses to write
  params->post_seq = post->seq;
  write_seed("take_task", name, params, sizeof(*params), &mb.task[frame], TASK_PAYLOAD_BYTES);
}

static void take_task_seeds(void) {
  lw_fuzz_task_params_t p;
  lw_mb_task_post_t t;

  // A kernel task with two tensors (one at the arena's end) and three scalars.
  memset(&p, 0, sizeof(p));
  p.next_seq = 1;
  p.probe_frame = LW_MB_TASK_FRAMES;
  p.arena = LW_FUZZ_ARENA_FULL;
  p.result_status = LW_OK;
  t = task_post(1, 1, LW_MB_TASK_KERNEL);
  t.args.n_tensors = 2;
  t.args.tensor[0].offset = 0;
  t.args.tensor[0].bytes = 256;
  t.args.tensor[1].offset = LW_FUZZ_ARENA_BYTES - 64;
  t.args.tensor[1].bytes = 64;
  t.args.n_scalars = 3;
  t.args.scalar[0] = 1;
  t.args.scalar[1] = 2;
  t.args.scalar[2] = UINT64_MAX;
  task_seed("kernel_two_tensors", &p, &t, 0);

  // A sub task with every slot used, a zero-byte tensor at the arena's end; a later post and
  // a later control request are visible too (find_post must pick seq 5).
  memset(&p, 0, sizeof(p));
  p.next_seq = 5;
  p.frame = 2;
  p.probe_frame = 1;
  p.arena = LW_FUZZ_ARENA_FULL;
  p.result_status = LW_TASK_FAILED;
  p.control_state = LW_MB_CONTROL_REQUEST;
  p.control_seq = 7;
  p.other_state[1] = LW_MB_TASK_READY;
  p.other_seq[1] = 6;
  p.other_state[3] = LW_MB_TASK_RUNNING;
  p.other_seq[3] = 4;
  t = task_post(5, 2, LW_MB_TASK_SUB);
  t.args.n_tensors = LW_MAX_TENSORS;
  for (uint32_t i = 0; i < LW_MAX_TENSORS; ++i) {
    t.args.tensor[i].offset = 4096u * i;
    t.args.tensor[i].bytes = 4096;
  }
  t.args.tensor[15].offset = LW_FUZZ_ARENA_BYTES;
  t.args.tensor[15].bytes = 0;
  t.args.n_scalars = LW_MAX_SCALARS;
  for (uint32_t i = 0; i < LW_MAX_SCALARS; ++i) t.args.scalar[i] = 100 + i;
  task_seed("sub_all_slots", &p, &t, 0);

  // A tensor running 8 bytes past the arena: the child fails the task from READY.
  memset(&p, 0, sizeof(p));
  p.next_seq = 3;
  p.frame = 1;
  p.probe_frame = 1;
  p.arena = LW_FUZZ_ARENA_FULL;
  t = task_post(3, 3, LW_MB_TASK_KERNEL);
  t.args.n_tensors = 1;
  t.args.tensor[0].offset = LW_FUZZ_ARENA_BYTES - 8;
  t.args.tensor[0].bytes = 16;
  task_seed("tensor_past_arena", &p, &t, 0);

  // An unknown task kind, in a mailbox whose header has the wrong version.
  memset(&p, 0, sizeof(p));
  p.header_xor[1] = 2;
  p.next_seq = 9;
  p.frame = 3;
  p.probe_frame = 0xffffffffu;
  p.arena = LW_FUZZ_ARENA_FULL;
  t = task_post(9, 4, LW_MB_TASK_KERNEL);
  task_seed("unknown_kind", &p, &t, 7);

  // The control request holds the expected number; the task is the next one.
  memset(&p, 0, sizeof(p));
  p.next_seq = 1;
  p.arena = LW_FUZZ_ARENA_FULL;
  p.control_state = LW_MB_CONTROL_REQUEST;
  p.control_seq = 1;
  t = task_post(2, 5, LW_MB_TASK_KERNEL);
  t.args.n_scalars = 1;
  t.args.scalar[0] = 42;
  task_seed("control_first", &p, &t, 0);

  // A 4 KiB arena view, and a kernel that was cancelled.
  memset(&p, 0, sizeof(p));
  p.next_seq = 12;
  p.probe_frame = 2;
  p.arena = LW_FUZZ_ARENA_4K;
  p.result_status = LW_CANCELLED;
  t = task_post(12, 6, LW_MB_TASK_KERNEL);
  t.timeout_ns = 1000000;
  t.args.n_tensors = 1;
  t.args.tensor[0].offset = 1024;
  t.args.tensor[0].bytes = 3072;
  task_seed("cancelled_in_4k_view", &p, &t, 0);
}

// ---------------------------------------------------------------------------------------------
// take_control

// The request fields (the child reads nothing after them while it is a request).
#define CONTROL_REQUEST_BYTES offsetof(lw_mb_control_t, ack_status)

static lw_mb_control_post_t control_post(uint64_t seq, lw_mb_command_t command) {
  lw_mb_control_post_t c;
  memset(&c, 0, sizeof(c));
  c.seq = seq;
  c.command = command;
  c.control_id = 100 + seq;
  return c;
}

static void control_seed(const char *name, lw_fuzz_control_params_t *params,
                         const lw_mb_control_post_t *post, const lw_mb_control_ack_t *ack) {
  static _Alignas(64) lw_mailbox_t mb;
  lw__mailbox_initialize(&mb, LW_MB_CHILD_SUB, 0, LW_FUZZ_ARENA_BYTES);
  lw_error_t err;
  check(lw__mailbox_post_control(&mb, post, &err), &err);
  size_t bytes = CONTROL_REQUEST_BYTES;
  if (ack != NULL) {
    // A frame the child already answered: the parent's side reads the ack.
    check(lw__mailbox_ack_control(&mb, ack, &err), &err);
    bytes = sizeof(lw_mb_control_t);
  }
  params->post_seq = post->seq;
  params->post_slot = LW_MB_POST_CONTROL;  // as the parent's post indexes it
  write_seed("take_control", name, params, sizeof(*params), &mb.control, bytes);
}

static void take_control_seeds(void) {
  lw_fuzz_control_params_t p;
  lw_mb_control_post_t c;

  memset(&p, 0, sizeof(p));
  p.next_seq = 1;
  p.ack_value = 4242;
  c = control_post(1, LW_MB_CMD_PING);
  control_seed("ping", &p, &c, NULL);

  memset(&p, 0, sizeof(p));
  p.next_seq = 2;
  p.ack_async = 1;
  p.ack_value = 7;
  p.task_state[0] = LW_MB_TASK_READY;
  p.task_seq[0] = 3;
  c = control_post(2, LW_MB_CMD_REGISTER);
  c.image_offset = 4096;
  c.image_bytes = 8192;
  c.n_params = 3;
  c.param_dirs[0] = 0;
  c.param_dirs[1] = 0;
  c.param_dirs[2] = 1;
  c.name = "vector_add";
  c.entry = "lw_kernel_main";
  control_seed("register", &p, &c, NULL);

  memset(&p, 0, sizeof(p));
  p.next_seq = 4;
  p.ack_value = 1;
  c = control_post(4, LW_MB_CMD_REGISTER_SUB);
  c.target = 0x401000;
  c.n_params = 2;
  c.name = "sub_scale";
  control_seed("register_sub", &p, &c, NULL);

  memset(&p, 0, sizeof(p));
  p.next_seq = 6;
  p.ack_async = 1;
  p.ack_status = LW_NOT_FOUND;
  c = control_post(6, LW_MB_CMD_UNREGISTER);
  c.target = 5;
  control_seed("unregister", &p, &c, NULL);

  // Withdraw a queued register (control 102).
  memset(&p, 0, sizeof(p));
  p.next_seq = 7;
  c = control_post(7, LW_MB_CMD_CANCEL);
  c.target = 102;
  control_seed("cancel", &p, &c, NULL);

  // The image ends past the 4 KiB arena view: INVALID_ARGUMENT, acked with the error.
  memset(&p, 0, sizeof(p));
  p.next_seq = 8;
  p.arena = LW_FUZZ_ARENA_4K;
  c = control_post(8, LW_MB_CMD_REGISTER);
  c.image_offset = 2048;
  c.image_bytes = 4096;
  c.name = "too_big";
  c.entry = "main";
  control_seed("register_outside_arena", &p, &c, NULL);

  // CONTROL_DONE with a failed ack: what consume_control validates.
  memset(&p, 0, sizeof(p));
  p.next_seq = 10;
  c = control_post(10, LW_MB_CMD_PING);
  lw_mb_control_ack_t ack;
  memset(&ack, 0, sizeof(ack));
  ack.status = LW_UNAVAILABLE;
  ack.value = 99;
  snprintf(ack.error.message, sizeof(ack.error.message), "sub child 0: shutting down");
  control_seed("done_ack", &p, &c, &ack);
}

// ---------------------------------------------------------------------------------------------
// completions

static lw_mb_completion_t task_completion(uint32_t frame, lw_mb_identity_t id) {
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_TASK;
  c.frame = frame;
  c.identity = id;
  return c;
}

static lw_mb_completion_t task_ok_completion(uint32_t frame, lw_mb_identity_t id,
                                             uint64_t kernel_ns, uint64_t queue_ns) {
  lw_mb_completion_t c = task_completion(frame, id);
  c.kind = LW_MB_COMPLETION_TASK_OK;
  c.kernel_ns = kernel_ns;
  c.queue_ns = queue_ns;
  return c;
}

static lw_mb_completion_t control_completion(uint64_t control_id, lw_status_t st,
                                             uint64_t value, const char *msg) {
  lw_mb_completion_t c;
  memset(&c, 0, sizeof(c));
  c.kind = LW_MB_COMPLETION_CONTROL;
  c.control_id = control_id;
  c.status = (int32_t)st;
  c.value = value;
  c.error.code = st;
  snprintf(c.error.message, sizeof(c.error.message), "%s", msg);
  return c;
}

// The entries as push leaves them: each with the mark of its ring position (from the tail on),
// but for those listed in unmarked (a bit per entry).
static void completion_seed_marks(const char *name, const lw_fuzz_completion_params_t *p,
                                  const lw_mb_completion_t *entries, size_t n, uint32_t unmarked) {
  lw_mb_completion_t marked[4];
  if (n > sizeof(marked) / sizeof(marked[0])) abort();
  for (size_t i = 0; i < n; ++i) {
    marked[i] = entries[i];
    uint32_t mark = (unmarked >> i) & 1u ? 0 : lw__mailbox_completion_mark(p->tail + i);
    atomic_store_explicit(&marked[i].mark, mark, memory_order_relaxed);
  }
  write_seed("completions", name, p, sizeof(*p), marked, n * sizeof(*entries));
}

static void completion_seed(const char *name, const lw_fuzz_completion_params_t *p,
                            const lw_mb_completion_t *entries, size_t n) {
  completion_seed_marks(name, p, entries, n, 0);
}

static void frame_result(lw_fuzz_completion_params_t *p, uint32_t frame, uint64_t n,
                         lw_mb_task_state_t state, lw_status_t st) {
  p->expected[frame] = ident(n);
  p->frame[frame].state = state;
  p->frame[frame].result_status = (int32_t)st;
  p->frame[frame].kernel_rc = st == LW_OK ? 0 : -22;
  p->frame[frame].same_identity = 1;
}

// A fresh params block with the ring's cursors: the parent's (head, tail) and those the
// child's push then sees.
static void ring_params(lw_fuzz_completion_params_t *p, uint64_t tail, uint64_t head,
                        uint64_t push_tail, uint64_t push_head) {
  memset(p, 0, sizeof(*p));
  p->tail = tail;
  p->head = head;
  p->push_tail = push_tail;
  p->push_head = push_head;
}

static void completions_seeds(void) {
  lw_fuzz_completion_params_t p;
  lw_mb_completion_t e[4];

  // Two finished tasks and a register's completion.
  ring_params(&p, 0, 3, 3, 3);
  frame_result(&p, 0, 1, LW_MB_TASK_DONE, LW_OK);
  frame_result(&p, 1, 2, LW_MB_TASK_FAILED, LW_TASK_FAILED);
  e[0] = task_ok_completion(0, ident(1), 1500, 300);
  e[1] = control_completion(102, LW_OK, 5, "");
  e[2] = task_completion(1, ident(2));
  completion_seed("two_tasks_one_register", &p, e, 3);

  // Entries across the ring's wrap; the push then finds the ring full.
  ring_params(&p, 2 * LW_MB_RING_ENTRIES - 2, 2 * LW_MB_RING_ENTRIES + 2, 10,
              10 + LW_MB_RING_ENTRIES);
  p.header_xor[3] = LW_MB_CHILD_CHIP ^ LW_MB_CHILD_SUB;  // sub child 1
  p.header_xor[4] = 1;
  frame_result(&p, 2, 3, LW_MB_TASK_CANCELLED, LW_CANCELLED);
  frame_result(&p, 3, 4, LW_MB_TASK_CANCELLED, LW_DEADLINE_EXCEEDED);
  e[0] = task_completion(2, ident(3));
  e[1] = control_completion(7, LW_INVALID_ARGUMENT, 0, "register: image is not a kernel");
  e[2] = task_completion(3, ident(4));
  e[3] = control_completion(8, LW_OK, 0, "");
  completion_seed("wrapping_ring_full_push", &p, e, 4);

  // A stale identity, and a DONE frame with a failure status: both INTERNAL.
  ring_params(&p, 5, 7, 5, 7);
  frame_result(&p, 0, 5, LW_MB_TASK_DONE, LW_OK);
  p.frame[0].same_identity = 0;
  p.frame[0].identity = ident(5);
  p.frame[0].identity.generation = 1;
  frame_result(&p, 1, 6, LW_MB_TASK_DONE, LW_TASK_FAILED);
  e[0] = task_completion(0, ident(5));
  e[1] = task_completion(1, ident(6));
  completion_seed("identity_and_status_mismatch", &p, e, 2);

  // An OK entry whose identity is not the one posted on its frame (INTERNAL), then one that
  // is, over a frame that says something else (not read).
  ring_params(&p, 17, 19, 19, 19);
  frame_result(&p, 5, 20, LW_MB_TASK_FAILED, LW_TASK_FAILED);
  frame_result(&p, 6, 21, LW_MB_TASK_RUNNING, LW_OK);
  lw_mb_identity_t stale = ident(20);
  stale.generation = 2;
  e[0] = task_ok_completion(5, stale, 10, 20);
  e[1] = task_ok_completion(6, ident(21), 30, 40);
  completion_seed("ok_entries", &p, e, 2);

  // A head 65 entries past the tail, and push cursors with the tail past the head.
  ring_params(&p, 100, 100 + LW_MB_RING_ENTRIES + 1, 4, 3);
  e[0] = task_completion(9, ident(9));
  completion_seed_marks("corrupt_cursors", &p, e, 1, 1u);

  // The first entry marked but the head not moved yet (a push between its mark and its head);
  // then a head that announces two entries of which the second has no mark.
  ring_params(&p, 40, 40, 41, 41);
  frame_result(&p, 4, 10, LW_MB_TASK_DONE, LW_OK);
  e[0] = task_completion(4, ident(10));
  completion_seed("marked_before_the_head", &p, e, 1);
  p.head = 42;
  e[1] = control_completion(9, LW_OK, 1, "");
  completion_seed_marks("head_past_an_unmarked_entry", &p, e, 2, 2u);
}

// ---------------------------------------------------------------------------------------------
// args_decode

static void args_seed(const char *name, uint32_t arena_bytes, uint8_t mode,
                      const lw_mb_args_t *a) {
  lw_fuzz_args_params_t p;
  memset(&p, 0, sizeof(p));
  p.arena_bytes = arena_bytes;
  p.arena_mode = mode;
  write_seed("args_decode", name, &p, sizeof(p), a, sizeof(*a));
}

static void args_decode_seeds(void) {
  lw_mb_args_t a;

  memset(&a, 0, sizeof(a));
  a.n_tensors = 2;
  a.tensor[0].offset = 0;
  a.tensor[0].bytes = 1024;
  a.tensor[1].offset = 1024;
  a.tensor[1].bytes = 3072;
  a.n_scalars = 2;
  a.scalar[0] = 7;
  a.scalar[1] = 8;
  args_seed("two_tensors_4k", 4096, 0, &a);

  memset(&a, 0, sizeof(a));
  a.n_tensors = LW_MAX_TENSORS;
  for (uint32_t i = 0; i < LW_MAX_TENSORS; ++i) {
    a.tensor[i].offset = 64u * i;
    a.tensor[i].bytes = 64;
  }
  a.tensor[15].offset = 1024;
  a.tensor[15].bytes = 0;
  a.n_scalars = LW_MAX_SCALARS;
  for (uint32_t i = 0; i < LW_MAX_SCALARS; ++i) a.scalar[i] = i;
  args_seed("all_slots_1k", 1024, 0, &a);

  // offset + bytes wraps around 2^64.
  memset(&a, 0, sizeof(a));
  a.n_tensors = 1;
  a.tensor[0].offset = UINT64_MAX - 7;
  a.tensor[0].bytes = 16;
  args_seed("offset_overflow", 65536, 0, &a);

  // No memory behind the view: only empty tensors decode.
  memset(&a, 0, sizeof(a));
  a.n_tensors = 2;
  a.n_scalars = 1;
  a.scalar[0] = 1;
  args_seed("null_base_empty_tensors", 512, 1, &a);
}

// ---------------------------------------------------------------------------------------------
// image_check (no parameter block: the input is the image)

#ifndef LW_FUZZ_TINY_KERNEL
#error "LW_FUZZ_TINY_KERNEL must name the tiny kernel seed (tests/fuzz/CMakeLists.txt)"
#endif

static void image_seed(const char *name, const void *bytes, size_t n) {
  write_seed("image_check", name, NULL, 0, bytes, n);
}

static void image_check_seeds(void) {
  FILE *f = fopen(LW_FUZZ_TINY_KERNEL, "rb");
  if (f == NULL) die(LW_FUZZ_TINY_KERNEL);
  static uint8_t elf[65536];
  size_t n = fread(elf, 1, sizeof elf, f);
  if (ferror(f) || n == sizeof elf || n < 1024) die("the tiny kernel is unreadable or odd-sized");
  fclose(f);
  image_seed("tiny_kernel", elf, n);
  image_seed("tiny_kernel_cut_16", elf, 16);
  image_seed("tiny_kernel_cut_64", elf, 64);
  image_seed("tiny_kernel_cut_600", elf, 600);
  image_seed("tiny_kernel_cut_half", elf, n / 2);
  image_seed("tiny_kernel_cut_1_short", elf, n - 1);
  static uint8_t other[65536];
  memcpy(other, elf, n);
  Elf64_Half machine = EM_RISCV;
  memcpy(other + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof machine);
  image_seed("tiny_kernel_other_machine", other, n);

  // The SPIR-V header, OpCapability Shader, OpMemoryModel Logical GLSL450; then cut inside the
  // last instruction.
  const uint32_t spirv[10] = {0x07230203u, 0x00010000u, 0, 8, 0, (2u << 16) | 17u, 1,
                              (3u << 16) | 14u, 0, 1};
  image_seed("spirv_module", spirv, sizeof spirv);
  image_seed("spirv_cut_in_an_instruction", spirv, sizeof spirv - 4);
  static const char src[] = "__kernel void k(__global int *a) { a[get_global_id(0)] = 1; }";
  image_seed("opencl_source", src, sizeof src);
  static const uint8_t junk[] = {0x13, 0x37, 0x00, 0x42, 0x99, 0xfe, 0x7f, 0x45, 0x4c, 0x46};
  image_seed("garbage", junk, sizeof junk);

  // The CUDA formats (tests/callables/cuda_images.h), each whole: the replay cuts them.
  static uint8_t cubin[LW_TEST_CUBIN_BYTES], fatbin[LW_TEST_FATBIN_BYTES];
  lw_test_cubin_make(cubin);
  lw_test_fatbin_make(fatbin);
  image_seed("cubin", cubin, sizeof cubin);
  image_seed("fatbin", fatbin, sizeof fatbin);
  image_seed("ptx", lw_test_ptx, sizeof lw_test_ptx);
  image_seed("cuda_c", lw_test_cuda_c, sizeof lw_test_cuda_c);
}

// ---------------------------------------------------------------------------------------------
// l4_wire: messages as parent/l4_wire.h encodes them, and a few broken ones

static void l4_seed(const char *name, int32_t from, uint64_t seq, const void *msg, size_t n) {
  lw_fuzz_l4_params_t p;
  memset(&p, 0, sizeof(p));
  p.from_rank = from;
  p.seq = seq;
  write_seed("l4_wire", name, &p, sizeof(p), msg, n);
}

static void l4_wire_seeds(void) {
  static uint8_t buf[1 << 16];
  uint8_t small[40], out[24];
  memset(small, 0x11, sizeof(small));
  memset(out, 0x22, sizeof(out));
  lw_l4_task_t t;
  memset(&t, 0, sizeof(t));
  t.identity = ident(1);
  t.frame = 3;
  t.kind = LW_L4_TASK_KERNEL;
  t.chip = -1;
  t.timeout_ns = 1000;
  snprintf(t.name, sizeof(t.name), "vector_add");
  t.launch.dims = 1;
  t.launch.global[0] = 64;
  t.n_tensors = 2;
  t.tensor[0] = (lw_l4_tensor_t){.tensor_id = 5, .version = 2, .bytes = sizeof(small),
                                 .home_rank = 1, .tag = LW_TAG_INPUT,
                                 .flags = LW_L4_TENSOR_INLINE, .data = small};
  t.tensor[1] = (lw_l4_tensor_t){.tensor_id = 6, .version = 0, .bytes = 1 << 20,
                                 .home_rank = 2, .tag = LW_TAG_OUTPUT};
  t.n_scalars = 1;
  t.scalar[0] = 64;
  size_t n = 0;
  lw_error_t err;
  check(lw__l4_wire_task_encode(&t, 0, 7, buf, sizeof(buf), &n, &err), &err);
  l4_seed("task", 0, 7, buf, n);
  l4_seed("task_wrong_seq", 0, 8, buf, n);
  l4_seed("task_cut", 0, 7, buf, n / 2);
  uint32_t half = (uint32_t)(n / 2);
  memcpy(buf + offsetof(lw_l4_wire_header_t, bytes), &half, sizeof(half));
  l4_seed("task_cut_with_its_length", 0, 7, buf, n / 2);  // the body ends inside a tensor
  uint32_t whole = (uint32_t)n;
  memcpy(buf + offsetof(lw_l4_wire_header_t, bytes), &whole, sizeof(whole));
  buf[32 + 32 + 12] = 17;  // n_tensors past the bound
  l4_seed("task_too_many_tensors", 0, 7, buf, n);

  lw_l4_done_t d;
  memset(&d, 0, sizeof(d));
  d.identity = ident(1);
  d.frame = 3;
  d.status = LW_TASK_FAILED;
  d.kernel_rc = -1;
  snprintf(d.error, sizeof(d.error), "chip 0: kernel vector_add returned -1");
  d.n_produced = 1;
  d.produced[0] = (lw_l4_tensor_t){.tensor_id = 6, .version = 1, .bytes = sizeof(out),
                                   .home_rank = -1, .flags = LW_L4_TENSOR_INLINE, .data = out};
  check(lw__l4_wire_done_encode(&d, 2, 1, buf, sizeof(buf), &n, &err), &err);
  l4_seed("done", 2, 1, buf, n);
  buf[32 + 64] = 255;  // an error text longer than the bound
  l4_seed("done_long_text", 2, 1, buf, n);

  lw_l4_cancel_t c = {.identity = ident(1), .frame = 3};
  check(lw__l4_wire_cancel_encode(&c, 0, 9, buf, sizeof(buf), &n, &err), &err);
  l4_seed("cancel", 0, 9, buf, n);

  lw_l4_move_t mv = {.tensor_id = 6, .version = 1, .bytes = 1 << 20, .to_rank = 2, .xfer = 17};
  check(lw__l4_wire_move_encode(LW_L4_WIRE_MOVE, &mv, 0, 10, buf, sizeof(buf), &n, &err), &err);
  l4_seed("move", 0, 10, buf, n);
  check(lw__l4_wire_move_encode(LW_L4_WIRE_FREE, &mv, 0, 11, buf, sizeof(buf), &n, &err), &err);
  l4_seed("free", 0, 11, buf, n);
  buf[32 + 8] = 1;  // a free that names a version
  l4_seed("free_with_a_version", 0, 11, buf, n);
  lw_l4_move_t lost = {.to_rank = 2};
  check(lw__l4_wire_move_encode(LW_L4_WIRE_LOST, &lost, 0, 12, buf, sizeof(buf), &n, &err), &err);
  l4_seed("lost", 0, 12, buf, n);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  make_dir(g_dir);
  take_task_seeds();
  take_control_seeds();
  completions_seeds();
  args_decode_seeds();
  image_check_seeds();
  l4_wire_seeds();
  return 0;
}
