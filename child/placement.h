// child/placement.h — where a chip child's run lane runs: whether it moves off the CPU it
// shares with the parent's poster (the decision only; child/chip_child.c makes the move).
//
// Why (the measurements are in docs/benchmarks.md, "Moving the run lane only where it gets a
// CPU"): a thread woken from a sleep is placed by the kernel, and on a VM whose idle vCPUs halt
// (Firecracker, KVM) a halted vCPU does not count as idle, so a run lane woken by a post lands
// on the poster's CPU and the two take turns there while another CPU idles: every hand-off a
// yield and a context switch. So a run lane that takes move_after posts in a row on the
// poster's CPU looks at the machine's runnable threads (lw__sys_runnable_threads: the run lane
// among them, and the poster while it spins or runs) against the machine's CPUs, and:
//   - moves off when some CPU has nothing to run (runnable <= CPUs);
//   - stays beside the poster when every other CPU runs one thread and theirs runs only the two
//     of them (runnable == CPUs + 1): a move would put the run lane behind another program's
//     thread (or a busy thread of the host program itself), to wait for its timeslice, 4-12 ms,
//     a 1000-task DAG's time several times over, while the poster's CPU has room for both of
//     them at a yield per hand-off;
//   - moves off when there are more (runnable >= CPUs + 2): the CPU they share is crowded too,
//     and two CPUs' shares are worth more than one (with autogroup, the kernel shares each CPU
//     between sessions, not threads).
// The count is an instant's, and a thread runnable for a moment (the parent's scheduler in its
// spin, a kernel worker) changes it: a verdict is acted on only when the look before said the
// same; otherwise it stays and looks again after move_after posts. A confirmed stay doubles the
// posts before the next look, up to LW_PLACEMENT_BACKOFF times move_after (each look reads
// /proc/loadavg, a few microseconds); anything else looks again after move_after.
//
// The count is the whole machine's: when the run lane may use only some of its CPUs (a taskset,
// a cpuset, a NUMA node's CPUs) or the count cannot be read, the rule cannot tell, and it moves
// off as it did before the rule: every move_after posts on the poster's CPU.
//
// Thread safety: none; one per run lane, used by that thread only.
#ifndef LANEWORK_CHILD_PLACEMENT_H_
#define LANEWORK_CHILD_PLACEMENT_H_

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LW_PLACEMENT_MOVE_AFTER 64
#define LW_PLACEMENT_BACKOFF 64
// The largest move_after (larger is taken as this): due stays below INT_MAX.
#define LW_PLACEMENT_MOVE_AFTER_MAX (1 << 24)

typedef enum lw_placement_verdict {
  LW_PLACEMENT_MOVE_IDLE = 0,     // another CPU has nothing to run: move off this one
  LW_PLACEMENT_MOVE_CROWDED = 1,  // every CPU crowded, this one too: move off (a share elsewhere)
  LW_PLACEMENT_MOVE_UNKNOWN = 2,  // the count cannot be told against its CPUs: move off
  LW_PLACEMENT_STAY_BUSY = 3,     // every other CPU runs a thread: stay beside the poster
  LW_PLACEMENT_STAY_PINNED = 4,   // it may use this CPU only
  LW_PLACEMENT_UNSURE = 5,        // the look before said otherwise: stay, look again soon
} lw_placement_verdict_t;

typedef struct lw_placement {
  int move_after;      // posts in a row on the poster's CPU before a look; 0: never look
  int due;             // posts before the next look (move_after .. BACKOFF * move_after)
  int same_cpu_posts;  // posts taken in a row on the poster's CPU since the last look
  // What the last look said, confirmed or not (UNSURE: none yet, or the count was unknown).
  lw_placement_verdict_t last;
} lw_placement_t;

// Whether the verdict is a move.
static inline bool lw__placement_moves(lw_placement_verdict_t v) {
  return v == LW_PLACEMENT_MOVE_IDLE || v == LW_PLACEMENT_MOVE_CROWDED ||
         v == LW_PLACEMENT_MOVE_UNKNOWN;
}

// move_after < 0 is taken as 0 (never), above LW_PLACEMENT_MOVE_AFTER_MAX as that.
void lw__placement_init(lw_placement_t *p, int move_after);

// Counts n posts taken by the run lane on CPU me; poster is the CPU the parent's poster last ran
// on (-1, or me < 0: unknown). A post on another CPU than the poster's starts the count over.
// Returns true when it is time to look (lw__placement_decide), the count then starting over.
bool lw__placement_count(lw_placement_t *p, int me, int poster, int n);

// The look's verdict from the machine's runnable threads (-1: unknown), the number of CPUs the
// run lane may use and the machine's online CPUs; updates when the next look is due.
lw_placement_verdict_t lw__placement_decide(lw_placement_t *p, int runnable, int allowed_cpus,
                                            int machine_cpus);

// The verdict in a few words, for traces ("moved off (a cpu idle)", "stays on (other cpus
// busy)", ...).
const char *lw__placement_verdict_name(lw_placement_verdict_t v);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_PLACEMENT_H_
