// mailbox/mailbox.h — the shared-memory mailbox between the parent (L3 worker) and one child.
// The wire format is documented in docs/protocol.md; this header is its source of truth.
//
//   offset  size  what                                     written by
//   ------  ----  ---------------------------------------  -----------------------
//   0       512   lw_mb_header_t (magic, version, sizes,   parent (init), child
//                 pid, NUMA node, INIT state, shutdown,    (pid/numa/init state,
//                 heartbeat)                               heartbeat)
//   512     64    lw_mb_doorbell_t   parent -> child       parent
//   576     64    lw_mb_parent_line_t child -> parent      parent (sleeping flag)
//   640     256   lw_mb_post_index_t post index            parent
//   896     1024  lw_mb_control_t    one control frame     both (state machine)
//   1920    D x 1024  lw_mb_task_t   task frames           both (state machine)
//   ...     64    ring head (child produces)               child
//   ...     64    ring tail (parent consumes)              parent
//   ...     R x 384   lw_mb_completion_t entries           child
//
// Every field is fixed width; memory is referenced by arena offsets, never pointers. Every
// field the other process writes is untrusted: decoders validate states, indices, counts and
// arena bounds and say what was wrong. Error messages name the operation and the frame but
// never the child, and worker_id is -1: the header's kind and index are memory a child can
// write, so the caller names the child from its own records.
//
// Task frame states:
//   IDLE -> TASK_READY       parent wrote identity, callable, config, args (then the state,
//                            release)
//        -> TASK_RUNNING     child copied the payload out, pinned the callable, queued it
//        -> TASK_DONE | TASK_FAILED | TASK_CANCELLED   child wrote the result first
//        -> IDLE             parent consumed the result after checking the identity
// Control frame: IDLE -> CONTROL_REQUEST -> CONTROL_DONE -> IDLE.
// Each state belongs to one side: IDLE and the terminal states to the parent, READY and
// RUNNING to the child; only the owner writes the frame's state, payload and result (the cancel
// line's atomics are the exception: the parent's cancel writes cancel_dispatch and the cancel
// word in any state). A task frame's state change is the
// owner's check of the state it expects (a wrong one is a protocol error, never silently
// ignored) and then a release store, not a compare-and-swap: a CAS is a full barrier on x86,
// which waits for every store still in flight, and right after a post or a result those are
// cache-line transfers to the other process (a many-core host pays each as a stall). What a
// CAS would add, catching the other side writing between the check and the store, is a broken
// peer's race; the identity and state checks of the next step catch a broken peer anyway. The
// control frame, changed a few times per register, keeps its compare-and-swaps.
//
// Sequence numbers: every post (task or control) carries the next number of one per-mailbox
// counter; the child applies posts strictly in that order.
#ifndef LANEWORK_MAILBOX_MAILBOX_H_
#define LANEWORK_MAILBOX_MAILBOX_H_

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lanes/cancel.h"
#include "lanes/wait.h"
#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LW_MB_MAGIC 0x424d574cu  // "LWMB"
// The wire format's version. 3: image format, build options, launch geometry; 4: 16 task
// frames; 5: the doorbell's loop_word; 6: the doorbell's post index; 7: 128 task frames, 256
// ring entries, the post index on its own lines; 8: fewer lines per task (the args' counts and
// launch on one line, an OK result on one line, the frame's cancel mark a dispatch id that no
// post clears, a task completion one line, the pusher's record of the tail).
#define LW_MB_VERSION 9u
// A chip child holds up to D posted tasks: enough for the parent to post a long run of tasks
// (wait elision, DESIGN 4.5) ahead of the run lane, so that neither side waits on the other
// every task when a CPU is taken from one of them (docs/benchmarks.md).
#define LW_MB_TASK_FRAMES 128u   // D
#define LW_MB_RING_ENTRIES 256u  // R: room for every frame's completion and the controls'.
#define LW_MB_NAME_BYTES 128
// The post index (see lw_mb_post_index_t): slot seq % LW_MB_POST_SLOTS names the frame of post
// seq. At most LW_MB_TASK_FRAMES + 1 posts are untaken at once (each holds a task frame or the
// control frame), so a slot is not reused before its post is taken.
#define LW_MB_POST_SLOTS 256u
#define LW_MB_POST_CONTROL 0xffu  // the slot's post is in the control frame
#define LW_MB_POST_NONE 0xfeu     // nothing posted through the slot yet

typedef enum lw_mb_child_kind {
  LW_MB_CHILD_CHIP = 1,
  LW_MB_CHILD_SUB = 2,
} lw_mb_child_kind_t;

typedef enum lw_mb_init_state {
  LW_MB_INIT_NONE = 0,
  LW_MB_INIT_READY = 1,
  LW_MB_INIT_FAILED = 2,
} lw_mb_init_state_t;

typedef enum lw_mb_task_state {
  LW_MB_TASK_IDLE = 0,
  LW_MB_TASK_READY = 1,
  LW_MB_TASK_RUNNING = 2,
  LW_MB_TASK_DONE = 3,
  LW_MB_TASK_FAILED = 4,
  LW_MB_TASK_CANCELLED = 5,
} lw_mb_task_state_t;

typedef enum lw_mb_control_state {
  LW_MB_CONTROL_IDLE = 0,
  LW_MB_CONTROL_REQUEST = 1,
  LW_MB_CONTROL_DONE = 2,
} lw_mb_control_state_t;

typedef enum lw_mb_command {
  LW_MB_CMD_PING = 1,          // ack_value = child pid
  LW_MB_CMD_REGISTER = 2,      // async: image in the arena; completion value = child-local id
  LW_MB_CMD_UNREGISTER = 3,    // async: target = child-local id
  LW_MB_CMD_REGISTER_SUB = 4,  // sync: target = function address, name; ack_value = sub index
  LW_MB_CMD_CANCEL = 5,        // sync: target = control_id of a queued REGISTER/UNREGISTER to
                               // withdraw (one already running finishes normally)
} lw_mb_command_t;

typedef enum lw_mb_task_kind {
  LW_MB_TASK_KERNEL = 1,  // callable = child-local callable handle id
  LW_MB_TASK_SUB = 2,     // callable = (tag << 32) | sub index from REGISTER_SUB
} lw_mb_task_kind_t;

typedef enum lw_mb_completion_kind {
  LW_MB_COMPLETION_TASK = 1,  // a task ended: its result is in its frame
  LW_MB_COMPLETION_CONTROL = 2,
  // A task ended OK (kernel_rc 0): its result is the entry (kernel_ns, queue_ns), and the
  // parent does not read the frame (one line transfer fewer per task; v9).
  LW_MB_COMPLETION_TASK_OK = 3,
} lw_mb_completion_kind_t;

// Who a task is: the parent checks it on every completion.
typedef struct lw_mb_identity {
  uint64_t run_id;
  uint64_t task_id;
  uint64_t dispatch_id;  // unique per post on this mailbox
  uint64_t generation;   // the child's incarnation (bumped at each respawn)
} lw_mb_identity_t;
_Static_assert(sizeof(lw_mb_identity_t) == 32, "identity layout");

// Args as they cross the mailbox: tensors are arena offsets. The counts and the launch fill
// the first 64-byte line, so a task without tensors or scalars moves one line of args.
typedef struct lw_mb_args {
  uint32_t n_tensors;
  uint32_t n_scalars;
  lw_launch_t launch;  // launch geometry (lanework/args.h), checked by decode
  struct {
    uint64_t offset;
    uint64_t bytes;
  } tensor[LW_MAX_TENSORS];
  uint64_t scalar[LW_MAX_SCALARS];
} lw_mb_args_t;
_Static_assert(sizeof(lw_launch_t) == 8 + 16 * LW_MAX_LAUNCH_DIMS, "launch layout");
_Static_assert(sizeof(lw_mb_args_t) ==
                   8 + 16 * LW_MAX_TENSORS + 8 * LW_MAX_SCALARS + sizeof(lw_launch_t),
               "args blob layout");
_Static_assert(offsetof(lw_mb_args_t, launch) == 8, "launch beside the counts");
_Static_assert(offsetof(lw_mb_args_t, tensor) == 64, "counts and launch fill one line");

typedef struct lw_mb_header {
  uint32_t magic;
  uint32_t version;
  uint32_t total_bytes;
  uint32_t child_kind;     // lw_mb_child_kind_t
  uint32_t child_index;    // chip or sub index
  uint32_t n_task_frames;
  uint32_t ring_entries;
  uint32_t reserved0;
  uint64_t arena_bytes;    // the arena the offsets refer to
  _Atomic int32_t child_pid;
  _Atomic int32_t numa_node;  // -1: not bound
  _Atomic uint32_t init_state;
  _Atomic uint32_t shutdown;  // sticky: once 1, the child leaves
  _Atomic uint64_t generation;  // incarnation; parent bumps before each (re)spawn
  lw_waitword_t init_word;      // woken when init_state changes
  // Liveness (DESIGN 4.6): the child's mailbox loop adds 1 at least every heartbeat_period_ns
  // (parent-written at initialize, 0: the child picks its own period). The parent watches it
  // only while the child holds work and kills a child whose count stops moving.
  _Atomic uint64_t heartbeat;
  uint64_t heartbeat_period_ns;
  // The parent's spin budget (lanes/spin.h: a few of its measured futex wakes), written at
  // initialize: the child's waits spin as long. 0: the child keeps its own minimum; the child
  // bounds what it reads (LW_SPIN_MIN/MAX_BUDGET_NS).
  uint64_t spin_budget_ns;
  uint8_t reserved1[144];
  lw_error_t init_error;        // INIT_FAILED: why
} lw_mb_header_t;

typedef struct lw_mb_doorbell {
  lw_waitword_t word;          // bumped after every post; the child sleeps on it
  _Atomic uint64_t post_seq;   // the last sequence number posted
  // Bumped by lw__mailbox_cancel_task after it set a frame's cancel_dispatch: wakes the child's
  // mailbox loop, which withdraws a cancelled task still queued behind another kernel.
  _Atomic uint64_t cancel_seq;
  // Woken (after the doorbell word) by a control post, a cancel notice and shutdown, never by
  // a task post: a chip child's mailbox loop sleeps here while the run lane takes task posts
  // itself from the doorbell (child/chip_child.c), so a task post wakes one thread, not two.
  lw_waitword_t loop_word;
  // The CPU the parent's posting thread ran on at its last post (-1: none yet). A hint for the
  // child's spin (lanes/spin.h, LW__PARTNER_SAME_CPU): a run lane waiting for the next post on
  // the poster's own CPU yields at once, since the poster cannot post while it spins.
  _Atomic int32_t poster_cpu;
  uint8_t pad[28];
} lw_mb_doorbell_t;

// The post index: before it publishes post seq (doorbell.post_seq, release), the parent stores
// in frame[seq % LW_MB_POST_SLOTS] the task frame it used (LW_MB_POST_CONTROL: the control
// frame). The child finds its next post there in one look instead of scanning every frame; a
// slot whose frame does not hold that post (a broken parent) sends it to the full scan, which
// says what is wrong. Relaxed: post_seq's release/acquire orders it.
typedef struct lw_mb_post_index {
  _Atomic uint8_t frame[LW_MB_POST_SLOTS];
} lw_mb_post_index_t;

typedef struct lw_mb_parent_line {
  _Atomic uint32_t sleeping;   // parent is (about to be) asleep: child must ring the eventfd
  uint8_t pad[60];
} lw_mb_parent_line_t;

typedef struct lw_mb_control {
  _Atomic uint32_t state;      // lw_mb_control_state_t
  uint32_t command;            // lw_mb_command_t
  uint64_t seq;
  uint64_t control_id;         // parent-chosen; echoed by the completion of an async command;
                               // REGISTER_SUB: the function's tag (low 32 bits)
  uint64_t image_offset;       // REGISTER: arena offset of the image
  uint64_t image_bytes;
  uint64_t target;             // UNREGISTER: child-local id; REGISTER_SUB: function address
  uint32_t n_params;
  uint32_t reserved0;
  uint8_t param_dirs[LW_MAX_PARAMS];
  char name[LW_MB_NAME_BYTES];
  char entry[LW_MB_NAME_BYTES];
  // The child's answer, written before CONTROL_DONE.
  int32_t ack_status;          // lw_status_t
  uint32_t ack_async;          // 1: the command's end comes through the completion ring
  uint64_t ack_value;
  lw_waitword_t done_word;     // the poster sleeps here for CONTROL_DONE
  uint32_t format;             // REGISTER: lw_image_format_t as the caller gave it (AUTO too)
  uint32_t reserved2;
  char build_options[LW_MAX_BUILD_OPTIONS_BYTES];  // REGISTER: NUL-terminated, "" for none
  uint8_t reserved1[120];
  lw_error_t ack_error;
} lw_mb_control_t;

typedef struct lw_mb_task {
  _Atomic uint32_t state;      // lw_mb_task_state_t
  uint32_t kind;               // lw_mb_task_kind_t
  // Atomic (relaxed; the state's acquire orders it): a child thread may look at a frame
  // without taking it (the run lane's idle hook), while the task there is taken, ends and the
  // parent posts the next one.
  _Atomic uint64_t seq;
  lw_mb_identity_t identity;
  uint64_t callable;
  int64_t timeout_ns;          // 0: none
  // The child's line: the parent writes it only to cancel (and initialize re-zeroes it), never
  // to post, so a post moves no line of it.
  alignas(64) lw_cancel_word_t cancel;  // the run's cancel word; the kernel reads it here
  // The dispatch_id of the post the parent cancelled (0: none), set by the parent's cancel
  // before it tries the word: a run that has not started yet sees it at its start (the word
  // holds no live generation then). A run is cancelled by it only when it names the run's own
  // post, so a cancel that came after its task ended is never seen by the frame's next task.
  _Atomic uint64_t cancel_dispatch;
  // CLOCK_MONOTONIC ns when the kernel started (0: not since the frame's last task ended);
  // the parent's escalation clock. The child stores 0 before it writes a terminal state.
  _Atomic uint64_t started_ns;
  uint8_t reserved1[40];
  lw_mb_args_t args;
  // The result, written by the child before the terminal state: the four fields, the error's
  // code, worker and task and the first 24 bytes of its message share one line, so an OK
  // result (an empty message) moves one line.
  int32_t result_status;       // lw_status_t
  int32_t kernel_rc;
  uint64_t kernel_ns;
  uint64_t queue_ns;
  // Its message is written up to its NUL; the bytes after it are stale (a reader copies up to
  // the NUL, at most the buffer, and terminates).
  lw_error_t result_error;
  uint8_t reserved2[152];
} lw_mb_task_t;

// A TASK or TASK_OK entry is its first LW_MB_TASK_COMPLETION_BYTES only (kind, frame,
// identity, TASK_OK's times, mark): push writes and pop reads no more of it. A CONTROL entry is
// every field, its error up to the message's NUL.
#define LW_MB_TASK_COMPLETION_BYTES 64u
typedef struct lw_mb_completion {
  uint32_t kind;               // lw_mb_completion_kind_t
  uint32_t frame;              // TASK, TASK_OK: the frame index
  lw_mb_identity_t identity;   // TASK, TASK_OK: the frame's identity
  union {
    uint64_t control_id;  // CONTROL: the id from the request
    uint64_t kernel_ns;   // TASK_OK: the result's kernel_ns
  };
  int32_t status;              // CONTROL: the command's status
  // The entry's ring position plus one, low 32 bits (lw__mailbox_completion_mark): stored by
  // push after the entry's other fields (release) and before the head, so a parent that finds
  // the mark it expects at its tail has the entry without reading the head's line, which the
  // child writes at every push. Never a valid mark before the first push into the slot (the
  // ring starts zeroed, and position + 1 is 0 only after 2^32 - 1 entries).
  _Atomic uint32_t mark;
  union {
    uint64_t value;     // CONTROL: e.g. the child-local callable id
    uint64_t queue_ns;  // TASK_OK: the result's queue_ns
  };
  uint8_t reserved1[48];
  // CONTROL: why it failed; its message is written up to its NUL. A TASK entry's error bytes
  // are not written (stale): its result is in the frame.
  lw_error_t error;
} lw_mb_completion_t;

typedef struct lw_mb_ring_cursor {
  _Atomic uint64_t value;
  // The CPU of the thread that last moved the cursor (-1: none yet): on ring_head, the child's
  // pushing thread; on ring_tail, the parent's draining one. A hint for the other side's spin
  // (lanes/spin.h, LW__PARTNER_SAME_CPU); untrusted like all shared memory, and only ever
  // compared with the reader's own CPU.
  _Atomic int32_t cpu;
  uint32_t reserved0;
  // ring_head only: the tail the pusher last read (its own cache, on the line it writes
  // anyway). A push reads ring_tail, the line the parent writes at every pop, only when this
  // one says the ring may be full. Written and read by the pushing side only.
  uint64_t tail_seen;
  uint8_t pad[40];
} lw_mb_ring_cursor_t;

typedef struct lw_mailbox {
  lw_mb_header_t header;
  lw_mb_doorbell_t doorbell;
  lw_mb_parent_line_t parent;
  lw_mb_post_index_t post_index;
  lw_mb_control_t control;
  lw_mb_task_t task[LW_MB_TASK_FRAMES];
  lw_mb_ring_cursor_t ring_head;  // next entry the child writes
  lw_mb_ring_cursor_t ring_tail;  // next entry the parent reads
  lw_mb_completion_t ring[LW_MB_RING_ENTRIES];
} lw_mailbox_t;

_Static_assert(sizeof(lw_mb_header_t) == 512, "header size");
_Static_assert(sizeof(lw_mb_doorbell_t) == 64, "doorbell size");
_Static_assert((LW_MB_POST_SLOTS & (LW_MB_POST_SLOTS - 1)) == 0 &&
                   LW_MB_POST_SLOTS >= LW_MB_TASK_FRAMES + 1,
               "a post's slot is not reused while it is untaken");
_Static_assert(LW_MB_TASK_FRAMES < LW_MB_POST_NONE, "frame indices fit a slot");
_Static_assert(sizeof(lw_mb_parent_line_t) == 64, "parent line size");
_Static_assert(sizeof(lw_mb_control_t) == 1024, "control frame size");
// The control frame's param_dirs holds every parameter a callable may declare; the layout
// above is fixed for LW_MAX_PARAMS == 32, so changing the limit must change the frame too.
_Static_assert(LW_MAX_PARAMS == 32, "control frame layout assumes LW_MAX_PARAMS == 32");
_Static_assert(sizeof(((lw_mb_control_t *)0)->param_dirs) == LW_MAX_PARAMS,
               "control frame param_dirs holds LW_MAX_PARAMS entries");
_Static_assert(LW_MAX_BUILD_OPTIONS_BYTES == 256, "control frame layout assumes 256-byte options");
_Static_assert(offsetof(lw_mb_control_t, format) == 368, "format after done_word");
_Static_assert(offsetof(lw_mb_control_t, build_options) == 376, "build options offset");
_Static_assert(sizeof(lw_mb_task_t) == 1024, "task frame size");
_Static_assert(offsetof(lw_mb_task_t, result_status) == 576, "result after the args");
_Static_assert(offsetof(lw_mb_task_t, result_error) == 600 &&
                   offsetof(lw_mb_task_t, result_error.message) == 616,
               "an OK result (fields, error header, empty message) is one line");
_Static_assert(sizeof(lw_mb_completion_t) == 384, "completion entry size");
_Static_assert(LW_MB_TASK_COMPLETION_BYTES == 64, "a task completion is one line");
_Static_assert(offsetof(lw_mb_completion_t, identity) + sizeof(lw_mb_identity_t) <=
                   LW_MB_TASK_COMPLETION_BYTES,
               "a task completion's fields are on the entry's first line");
_Static_assert(offsetof(lw_mb_completion_t, mark) == 52 &&
                   offsetof(lw_mb_completion_t, mark) + sizeof(uint32_t) <=
                       LW_MB_TASK_COMPLETION_BYTES,
               "the mark is on the entry's first line, with what a task completion says");
_Static_assert(offsetof(lw_mb_header_t, heartbeat) == 72, "heartbeat offset");
_Static_assert(offsetof(lw_mb_header_t, heartbeat_period_ns) == 80, "heartbeat period offset");
_Static_assert(offsetof(lw_mb_header_t, spin_budget_ns) == 88, "spin budget offset");
_Static_assert(offsetof(lw_mb_doorbell_t, poster_cpu) == 32, "poster cpu offset");
_Static_assert(sizeof(lw_mb_ring_cursor_t) == 64, "ring cursor size");
_Static_assert(offsetof(lw_mb_ring_cursor_t, cpu) == 8, "ring cursor cpu offset");
_Static_assert(offsetof(lw_mb_ring_cursor_t, tail_seen) == 16, "pusher's tail cache offset");
_Static_assert(offsetof(lw_mb_doorbell_t, cancel_seq) == 16, "cancel notice offset");
_Static_assert(offsetof(lw_mb_doorbell_t, loop_word) == 24, "mailbox loop's word offset");
_Static_assert(offsetof(lw_mailbox_t, doorbell) == 512, "doorbell offset");
_Static_assert(offsetof(lw_mailbox_t, parent) == 576, "parent line offset");
_Static_assert(offsetof(lw_mailbox_t, post_index) == 640, "post index offset");
_Static_assert(sizeof(lw_mb_post_index_t) == LW_MB_POST_SLOTS, "post index size");
_Static_assert(offsetof(lw_mailbox_t, control) == 896, "control offset");
_Static_assert(offsetof(lw_mailbox_t, task) == 1920, "task frames offset");
_Static_assert(offsetof(lw_mb_task_t, cancel) == 64, "cancel word on its own line");
_Static_assert(offsetof(lw_mb_task_t, cancel_dispatch) == 72, "cancel mark beside the word");
_Static_assert(offsetof(lw_mb_task_t, started_ns) == 80, "start time beside the word");
_Static_assert(offsetof(lw_mailbox_t, ring_head) == 1920 + 1024 * LW_MB_TASK_FRAMES,
               "ring head offset");
_Static_assert(offsetof(lw_mailbox_t, ring_tail) % 64 == 0, "ring tail on its own line");
_Static_assert(offsetof(lw_mailbox_t, ring) == offsetof(lw_mailbox_t, ring_head) + 128,
               "ring offset");
_Static_assert(sizeof(lw_mailbox_t) % 64 == 0, "mailbox is whole cache lines");
_Static_assert(sizeof(lw_mailbox_t) == 231424, "mailbox size (docs/protocol.md)");
_Static_assert(LW_MB_RING_ENTRIES >= LW_MB_TASK_FRAMES + 1, "a completion for every frame");

// ---------------------------------------------------------------------------------------------
// Common

// Initializes a zeroed mailbox (parent, before fork).
void lw__mailbox_initialize(lw_mailbox_t *mb, lw_mb_child_kind_t kind, uint32_t child_index,
                           uint64_t arena_bytes);
// Checks magic, version, sizes and kind. INVALID_ARGUMENT with the field in err.
LW_MUST_USE lw_status_t lw__mailbox_validate_header(const lw_mailbox_t *mb, lw_error_t *err);

// True when from -> to is a legal task frame transition (see the diagram above).
bool lw__mailbox_task_transition_legal(lw_mb_task_state_t from, lw_mb_task_state_t to);
const char *lw__mailbox_task_state_name(uint32_t state);
// True for TASK_DONE, TASK_FAILED and TASK_CANCELLED (any other value, unknown ones too: false).
bool lw__mailbox_task_state_is_terminal(uint32_t state);

// Arena view used to turn offsets into pointers and check bounds.
typedef struct lw_mb_arena {
  uint8_t *base;
  uint64_t bytes;
} lw_mb_arena_t;

// Encodes args (pointers into the arena) into the wire form. INVALID_ARGUMENT naming the
// tensor index when a tensor lies outside the arena, or counts exceed the limits.
LW_MUST_USE lw_status_t lw__mailbox_args_encode(const lw_args_t *args, const lw_mb_arena_t *arena,
                                               lw_mb_args_t *out, lw_error_t *err);
// Decodes the wire form (untrusted) into kernel args: validates counts and that every
// [offset, offset + bytes) lies inside the arena (no overflow).
LW_MUST_USE lw_status_t lw__mailbox_args_decode(const lw_mb_args_t *in, const lw_mb_arena_t *arena,
                                               lw_kernel_args_t *out, lw_error_t *err);

// ---------------------------------------------------------------------------------------------
// Parent side. One poster at a time per mailbox (the caller serializes posts).

// The next post sequence number (from one per-mailbox counter the caller keeps). Writes the
// frame (IDLE expected; FAILED_PRECONDITION otherwise), then publishes TASK_READY (release)
// and rings the doorbell. Pairs with lw__mailbox_take_task (acquire).
typedef struct lw_mb_task_post {
  uint64_t seq;
  lw_mb_identity_t identity;
  lw_mb_task_kind_t kind;
  uint64_t callable;
  int64_t timeout_ns;
  lw_mb_args_t args;
} lw_mb_task_post_t;
LW_MUST_USE lw_status_t lw__mailbox_post_task(lw_mailbox_t *mb, uint32_t frame,
                                             const lw_mb_task_post_t *post, lw_error_t *err);

// The result of the task a TASK or TASK_OK completion c (popped: kind and frame checked)
// reported, and its frame set IDLE (release). TASK: reads the frame: checks it is in a terminal
// state and that its identity equals expected (a stale or foreign identity is INTERNAL
// "identity mismatch": the child is broken) and copies the result out. TASK_OK: the result is
// the entry's (status OK, kernel_rc 0, its times, final state DONE), its identity checked the
// same way; the frame is not read (the child made it terminal before it pushed, and c's
// acquire brought that along), only set IDLE.
typedef struct lw_mb_task_result {
  lw_status_t status;
  int32_t kernel_rc;
  uint64_t kernel_ns;
  uint64_t queue_ns;
  lw_mb_task_state_t final_state;
  lw_error_t error;
} lw_mb_task_result_t;
LW_MUST_USE lw_status_t lw__mailbox_consume_task(lw_mailbox_t *mb, const lw_mb_completion_t *c,
                                                 const lw_mb_identity_t *expected,
                                                 lw_mb_task_result_t *out, lw_error_t *err);

// Cancels the frame's task, the post dispatch_id (its identity's): marks the frame with it
// (cancel_dispatch, seq_cst; a run that has not started sees it when it starts), then sets bit
// 0 of the cancel word iff it holds a live generation (the running kernel's), then bumps
// doorbell.cancel_seq and wakes the child, whose mailbox loop finishes a task still queued
// behind another kernel CANCELLED at once. Returns true when it hit a running kernel.
// Idempotent.
bool lw__mailbox_cancel_task(lw_mailbox_t *mb, uint32_t frame, uint64_t dispatch_id);

typedef struct lw_mb_control_post {
  uint64_t seq;
  lw_mb_command_t command;
  uint64_t control_id;
  uint64_t image_offset, image_bytes;
  uint64_t target;
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
  const char *name;   // copied, truncated to LW_MB_NAME_BYTES - 1
  const char *entry;  // copied
  uint32_t format;    // REGISTER: lw_image_format_t
  const char *build_options;  // REGISTER: copied (NULL: none); longer than the frame's field
                              // is INVALID_ARGUMENT
} lw_mb_control_post_t;
// Writes the control frame (IDLE expected), publishes CONTROL_REQUEST, rings the doorbell.
LW_MUST_USE lw_status_t lw__mailbox_post_control(lw_mailbox_t *mb, const lw_mb_control_post_t *p,
                                                lw_error_t *err);

typedef struct lw_mb_control_ack {
  lw_status_t status;
  bool async;
  uint64_t value;
  lw_error_t error;
} lw_mb_control_ack_t;
// If the control frame is CONTROL_DONE: copies the ack (validated) and sets IDLE; returns OK.
// FAILED_PRECONDITION "not done" while it is still CONTROL_REQUEST.
LW_MUST_USE lw_status_t lw__mailbox_consume_control(lw_mailbox_t *mb, lw_mb_control_ack_t *out,
                                                   lw_error_t *err);

// The mark of the entry at ring position pos (lw_mb_completion_t.mark).
static inline uint32_t lw__mailbox_completion_mark(uint64_t pos) { return (uint32_t)(pos + 1); }

// Pops one completion, validates kind and indices, advances tail (release). The entry at the
// tail is taken when it carries its mark (acquire); only when it does not is the head read
// (seq_cst: the parent's half of the sleep handshake, docs/protocol.md): NOT_FOUND when the
// ring is empty (the head at the tail, or one behind it: the push of the entry taken last by
// its mark has not stored the head yet); INTERNAL when the head is corrupt (not consumed) or
// says the entry is there while its mark is not (consumed). INTERNAL also when the entry is
// malformed (the child is broken; the entry is still consumed).
LW_MUST_USE lw_status_t lw__mailbox_pop_completion(lw_mailbox_t *mb, lw_mb_completion_t *out,
                                                  lw_error_t *err);

// The same, but for the pops after one that found an entry: without the mark at the tail it
// answers NOT_FOUND without reading the head (a drain that took what was there stops without a
// cross-core read). Not before a sleep (no handshake), and not as the only pop of a drain: the
// head's checks are lw__mailbox_pop_completion's.
LW_MUST_USE lw_status_t lw__mailbox_pop_next_completion(lw_mailbox_t *mb, lw_mb_completion_t *out,
                                                        lw_error_t *err);

// Whether the ring holds a completion for the parent, or says so with a head that moved (a
// broken entry then: the next lw__mailbox_pop_completion reports it). The mark first, then the
// head (seq_cst: the parent's re-check before it sleeps). Any thread of the parent; a hint
// unless the caller is the ring's one reader.
bool lw__mailbox_completion_pending(lw_mailbox_t *mb);

// ---------------------------------------------------------------------------------------------
// Child side.

// The post with sequence number seq, if it is visible: *out_is_control tells which, *out_frame
// the task frame. First in task frame hint (LW_MB_TASK_FRAMES: none), where the caller expects
// it: the parent takes frames in turn, so the one after the last task frame taken mostly holds
// the next task, and looking there first reads no line but the frame's own; then through the
// post index (one slot, one frame: no scan); when neither leads to post seq, by scanning the
// control frame and every task frame.
// NOT_FOUND when not posted yet. INTERNAL when the scan finds a frame READY with a sequence
// number out of order, or one number posted twice (the parent is broken). A post the index
// leads to is taken without looking at the other frames: a stale or repeated number elsewhere
// is then not seen by this call.
// Asks for task frame frame's first line (for writing: the taker stores RUNNING there) and the
// args' first line (for reading) to come over now (out of range: nothing). A hint with no
// effect on what the mailbox holds: for a taker that expects its next post there while it runs
// the current one (docs/protocol.md, §4).
void lw__mailbox_prefetch_post(const lw_mailbox_t *mb, uint32_t frame);

// True when task frame frame (any value: out of range is false) holds post seq, checked as
// lw__mailbox_find_post checks a frame (acquire on the state, then the number). It reads the
// frame's first line only: a taker that expects post seq there looks without reading the
// doorbell, whose line the parent writes at every post.
bool lw__mailbox_post_in_frame(lw_mailbox_t *mb, uint64_t seq, uint32_t frame);

LW_MUST_USE lw_status_t lw__mailbox_find_post(lw_mailbox_t *mb, uint64_t seq, uint32_t hint,
                                              bool *out_is_control, uint32_t *out_frame,
                                              lw_error_t *err);

// Copies a TASK_READY frame's payload out, decoding and validating the args against the arena.
typedef struct lw_mb_task_taken {
  lw_mb_identity_t identity;
  lw_mb_task_kind_t kind;
  uint64_t callable;
  int64_t timeout_ns;
  lw_kernel_args_t args;
} lw_mb_task_taken_t;
LW_MUST_USE lw_status_t lw__mailbox_take_task(lw_mailbox_t *mb, uint32_t frame,
                                             const lw_mb_arena_t *arena, lw_mb_task_taken_t *out,
                                             lw_error_t *err);
// TASK_READY -> TASK_RUNNING (checked, then a release store). FAILED_PRECONDITION if the frame
// was not READY.
LW_MUST_USE lw_status_t lw__mailbox_task_set_running(lw_mailbox_t *mb, uint32_t frame,
                                                    lw_error_t *err);
// Writes the result, then READY|RUNNING -> DONE / FAILED / CANCELLED (from status: OK ->
// DONE, CANCELLED or DEADLINE_EXCEEDED -> CANCELLED, others -> FAILED) with release.
LW_MUST_USE lw_status_t lw__mailbox_task_complete(lw_mailbox_t *mb, uint32_t frame,
                                                 const lw_mb_task_result_t *result,
                                                 lw_error_t *err);

// Copies a CONTROL_REQUEST out (validated: known command, NUL-terminated strings, n_params,
// image range inside the arena, format value and NUL-terminated build options for REGISTER).
typedef struct lw_mb_control_taken {
  lw_mb_command_t command;
  uint64_t control_id;
  uint64_t image_offset, image_bytes;
  uint64_t target;
  uint32_t n_params;
  uint8_t param_dirs[LW_MAX_PARAMS];
  char name[LW_MB_NAME_BYTES];
  char entry[LW_MB_NAME_BYTES];
  uint32_t format;  // checked: an lw_image_format_t value
  char build_options[LW_MAX_BUILD_OPTIONS_BYTES];  // checked: NUL-terminated
} lw_mb_control_taken_t;
LW_MUST_USE lw_status_t lw__mailbox_take_control(lw_mailbox_t *mb, const lw_mb_arena_t *arena,
                                                lw_mb_control_taken_t *out, lw_error_t *err);
// Writes the ack, then CONTROL_REQUEST -> CONTROL_DONE (release), wakes done_word.
LW_MUST_USE lw_status_t lw__mailbox_ack_control(lw_mailbox_t *mb, const lw_mb_control_ack_t *ack,
                                               lw_error_t *err);

// Pushes a completion (the caller serializes pushes within the child). Waits (spin, then
// yield: lanes/spin.h; then futex-free naps of 50 us) while the ring is full, until deadline_ns:
// DEADLINE_EXCEEDED then. Returns whether the parent must be woken (its sleeping flag was
// set) in *out_wake.
LW_MUST_USE lw_status_t lw__mailbox_push_completion(lw_mailbox_t *mb, const lw_mb_completion_t *c,
                                                   int64_t deadline_ns, bool *out_wake,
                                                   lw_error_t *err);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_MAILBOX_MAILBOX_H_
