// tests/fuzz/fuzz_harness.h — the fuzz harnesses, shared by the libFuzzer targets
// (tests/fuzz/fuzz_<target>.c, clang only) and the corpus replay tests (every build): the
// mailbox readers' (tests/mailbox/test_fuzz_corpus.c) and the kernel image checks'
// (lw_fuzz_image_check, tests/fuzz/harness_image_check.c, replayed by
// tests/callables/test_image_check_corpus.c; its input is the image itself, with no parameter
// block).
//
// Each harness plays one side of the protocol against a mailbox whose fields the other side
// owns come from the input, and checks the reader's contract (docs/protocol.md §6): whatever
// the bytes, the reader either returns LW_OK with values it validated, or an error whose
// message is non-empty and NUL-terminated; it never crashes and never reads outside the
// mailbox or the arena (ASan/UBSan in the libFuzzer build). A violated invariant calls
// lw__fuzz_fail, which prints what failed and traps, so libFuzzer and Criterion both report it.
//
// Inputs are a fixed-size parameter block (read with zero fill when the input is shorter),
// then raw bytes laid over the part of the mailbox the other process writes. The blocks are
// declared here so tests/fuzz/make_corpus.c writes seeds the harnesses read back exactly.
#ifndef LANEWORK_TESTS_FUZZ_FUZZ_HARNESS_H_
#define LANEWORK_TESTS_FUZZ_FUZZ_HARNESS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanework/status.h"
#include "mailbox/mailbox.h"

#ifdef __cplusplus
extern "C" {
#endif

// The harnesses; each returns 0 (libFuzzer's "keep going").
int lw_fuzz_take_task(const uint8_t *data, size_t size);
int lw_fuzz_take_control(const uint8_t *data, size_t size);
int lw_fuzz_completions(const uint8_t *data, size_t size);
int lw_fuzz_args_decode(const uint8_t *data, size_t size);
int lw_fuzz_image_check(const uint8_t *data, size_t size);
int lw_fuzz_l4_wire(const uint8_t *data, size_t size);

// The child's arena in the take_task / take_control harnesses: one malloc of exactly this
// size, so ASan flags any access past a decoded range.
#define LW_FUZZ_ARENA_BYTES 65536u

// Arena views (the `arena` selector modulo LW_FUZZ_ARENA_VIEWS): the whole arena, a 4 KiB
// prefix, an empty view, a view with a NULL base, and no arena at all (NULL).
enum {
  LW_FUZZ_ARENA_FULL = 0,
  LW_FUZZ_ARENA_4K = 1,
  LW_FUZZ_ARENA_EMPTY = 2,
  LW_FUZZ_ARENA_NULL_BASE = 3,
  LW_FUZZ_ARENA_NONE = 4,
  LW_FUZZ_ARENA_VIEWS = 5,
};

// take_task input: this block, then bytes laid over task frame `frame % D` from its offset 0
// (state, kind, seq, identity, callable, timeout, cancel word, args, result: up to 1024).
typedef struct lw_fuzz_task_params {
  uint64_t next_seq;       // the child's next expected sequence number
  uint64_t post_seq;       // doorbell.post_seq
  uint32_t header_xor[8];  // flips bits of the header's first 32 bytes (0: as initialized)
  uint32_t probe_frame;    // a raw frame index also passed to take_task (may be out of range)
  uint8_t frame;           // which task frame the payload bytes overwrite (mod D); also, as
                           // is, the post index's slot for next_seq (find_post's first look)
  uint8_t arena;           // arena view selector
  uint8_t result_status;   // the kernel's status (mod LW_STATUS_COUNT_ + 2: two invalid ones)
  uint8_t control_state;   // control frame state, with control_seq: find_post looks at it
  uint64_t control_seq;
  uint32_t other_state[LW_MB_TASK_FRAMES];  // states and seqs of the frames not overwritten
  uint64_t other_seq[LW_MB_TASK_FRAMES];
} lw_fuzz_task_params_t;

// take_control input: this block, then bytes laid over the control frame from its offset 0
// (state, command, seq, ids, image range, target, params, name, entry, ack: up to 1024).
typedef struct lw_fuzz_control_params {
  uint64_t next_seq;
  uint64_t post_seq;
  uint64_t ack_value;
  uint32_t header_xor[8];  // as in lw_fuzz_task_params_t
  uint8_t arena;           // arena view selector
  uint8_t ack_status;      // the child's answer (mod LW_STATUS_COUNT_ + 2)
  uint8_t ack_async;       // bit 0
  uint8_t post_slot;       // the post index's slot for next_seq (0xff: the control frame)
  uint32_t reserved1;
  uint32_t task_state[LW_MB_TASK_FRAMES];  // task frames find_post also looks at
  uint64_t task_seq[LW_MB_TASK_FRAMES];
} lw_fuzz_control_params_t;

// completions input: this block, then bytes laid over the ring entries from ring[tail % R]
// on (wrapping), each 384 bytes.
typedef struct lw_fuzz_completion_frame {
  uint32_t state;           // the task frame's state (written by the child)
  int32_t result_status;
  int32_t kernel_rc;
  uint32_t same_identity;   // bit 0: the frame holds the expected identity, else `identity`
  lw_mb_identity_t identity;
} lw_fuzz_completion_frame_t;

typedef struct lw_fuzz_completion_params {
  uint64_t head;            // ring cursors (child: head, parent: tail), possibly corrupt
  uint64_t tail;
  uint32_t header_xor[8];   // as in lw_fuzz_task_params_t
  lw_mb_identity_t expected[LW_MB_TASK_FRAMES];  // what the parent posted on each frame
  lw_fuzz_completion_frame_t frame[LW_MB_TASK_FRAMES];
  uint64_t push_head;       // the cursors the child's push_completion then sees
  uint64_t push_tail;
} lw_fuzz_completion_params_t;

// args_decode input: this block, then bytes laid over a zeroed lw_mb_args_t (448 bytes).
typedef struct lw_fuzz_args_params {
  uint32_t arena_bytes;     // mod LW_FUZZ_ARENA_BYTES + 1: the size of a fresh malloc
  uint8_t arena_mode;       // mod 3: 0 malloc'ed arena, 1 NULL base, 2 no arena (NULL)
  uint8_t reserved0[3];
} lw_fuzz_args_params_t;

// l4_wire input: this block, then the bytes of one message as the L4 or an L3 rank received
// it (parent/l4_wire.h), decoded as message `seq` of rank `from_rank`.
typedef struct lw_fuzz_l4_params {
  int32_t from_rank;
  uint32_t reserved0;
  uint64_t seq;
} lw_fuzz_l4_params_t;

// No implicit padding: the seeds are these structs' bytes.
_Static_assert(sizeof(lw_fuzz_task_params_t) == 64 + 12 * LW_MB_TASK_FRAMES, "task params layout");
_Static_assert(sizeof(lw_fuzz_control_params_t) == 64 + 12 * LW_MB_TASK_FRAMES,
               "control params layout");
_Static_assert(sizeof(lw_fuzz_completion_params_t) == 64 + 80 * LW_MB_TASK_FRAMES,
               "completion params layout");
_Static_assert(sizeof(lw_fuzz_args_params_t) == 8, "args params layout");
_Static_assert(sizeof(lw_fuzz_l4_params_t) == 16, "l4 params layout");

// ---------------------------------------------------------------------------------------------
// Shared by the harnesses (tests/fuzz/harness_common.c).

// Names the input being replayed in failure reports (the replay test sets it; may be NULL).
extern const char *lw__fuzz_input_name;

// Prints "fuzz invariant violated: <what> (file:line)" and traps.
_Noreturn void lw__fuzz_fail(const char *what, const char *file, int line);

#define LW_FUZZ_CHECK(cond)                                              \
  do {                                                                   \
    if (!(cond)) lw__fuzz_fail(#cond, __FILE__, __LINE__);               \
  } while (0)

// Copies the parameter block from the front of the input (zero-filled when the input is
// shorter) and returns how many input bytes it used.
size_t lw__fuzz_read_params(void *params, size_t params_size, const uint8_t *data, size_t size);

// Fills err with non-NUL garbage, so an error path that forgets its message is caught.
void lw__fuzz_poison_error(lw_error_t *err);

// The contract of every failing reader call: st is a valid non-OK status, err->code == st,
// and the message is non-empty and NUL-terminated.
void lw__fuzz_check_error(lw_status_t st, const lw_error_t *err);

// True when the fixed-size field holds a NUL.
bool lw__fuzz_terminated(const char *s, size_t n);

// The process-wide mailbox, initialized afresh (kind, arena size) with header_xor applied to
// the header's first 32 bytes (magic, version, total_bytes, child_kind, child_index,
// n_task_frames, ring_entries, reserved0): what the messages and validate_header read.
lw_mailbox_t *lw__fuzz_mailbox(lw_mb_child_kind_t kind, const uint32_t header_xor[8]);

// The arena view for selector sel (see LW_FUZZ_ARENA_*) over the LW_FUZZ_ARENA_BYTES arena;
// NULL for LW_FUZZ_ARENA_NONE.
const lw_mb_arena_t *lw__fuzz_arena_view(uint8_t sel);

// Checks that [data, data + bytes) lies inside arena (NULL only with 0 bytes) and reads its
// first and last byte, so ASan also vouches for the range.
void lw__fuzz_check_range(const lw_mb_arena_t *arena, const void *data, uint64_t bytes);

// Maps a fuzzer byte to a status: the 13 valid ones, then two invalid values (13 and -1).
lw_status_t lw__fuzz_status(uint8_t b);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_TESTS_FUZZ_FUZZ_HARNESS_H_
