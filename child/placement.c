// child/placement.c — the run lane's move decision (placement.h).
#include "child/placement.h"

void lw__placement_init(lw_placement_t *p, int move_after) {
  if (move_after < 0) move_after = 0;
  if (move_after > LW_PLACEMENT_MOVE_AFTER_MAX) move_after = LW_PLACEMENT_MOVE_AFTER_MAX;
  p->move_after = move_after;
  p->due = p->move_after;
  p->same_cpu_posts = 0;
  p->last = LW_PLACEMENT_UNSURE;
}

bool lw__placement_count(lw_placement_t *p, int me, int poster, int n) {
  if (p->move_after == 0) return false;
  if (me < 0 || me != poster) {
    p->same_cpu_posts = 0;
    return false;
  }
  p->same_cpu_posts += n;
  if (p->same_cpu_posts < p->due) return false;
  p->same_cpu_posts = 0;
  return true;
}

// What one look says, before it is confirmed by the next.
static lw_placement_verdict_t raw_verdict(int runnable, int allowed_cpus) {
  if (runnable <= allowed_cpus) return LW_PLACEMENT_MOVE_IDLE;
  return runnable == allowed_cpus + 1 ? LW_PLACEMENT_STAY_BUSY : LW_PLACEMENT_MOVE_CROWDED;
}

lw_placement_verdict_t lw__placement_decide(lw_placement_t *p, int runnable, int allowed_cpus,
                                            int machine_cpus) {
  if (allowed_cpus < 2) {
    // Nowhere else to go, now or later (a new mask comes with a new child): look as seldom as
    // a busy machine is looked at.
    p->due = p->move_after * LW_PLACEMENT_BACKOFF;
    return LW_PLACEMENT_STAY_PINNED;
  }
  if (runnable < 0 || allowed_cpus != machine_cpus) {
    // The count cannot be told against the CPUs it may use: as before the rule, it moves.
    p->due = p->move_after;
    p->last = LW_PLACEMENT_UNSURE;
    return LW_PLACEMENT_MOVE_UNKNOWN;
  }
  lw_placement_verdict_t v = raw_verdict(runnable, allowed_cpus);
  if (v != p->last) {
    // Not what the last look said: a thread that was runnable for a moment (the parent's
    // scheduler in its spin, a kernel worker) may have made the difference. Look again soon.
    p->last = v;
    p->due = p->move_after;
    return LW_PLACEMENT_UNSURE;
  }
  if (v == LW_PLACEMENT_STAY_BUSY) {
    if (p->due <= p->move_after * (LW_PLACEMENT_BACKOFF / 2)) p->due *= 2;
  } else {
    p->due = p->move_after;
  }
  return v;
}

const char *lw__placement_verdict_name(lw_placement_verdict_t v) {
  switch (v) {
    case LW_PLACEMENT_MOVE_IDLE: return "moved off (a cpu idle)";
    case LW_PLACEMENT_MOVE_CROWDED: return "moved off (all crowded)";
    case LW_PLACEMENT_MOVE_UNKNOWN: return "moved off (load unknown)";
    case LW_PLACEMENT_STAY_BUSY: return "stays on (other cpus busy)";
    case LW_PLACEMENT_STAY_PINNED: return "stays on (one cpu allowed)";
    case LW_PLACEMENT_UNSURE: return "stays on (to look again)";
  }
  return "?";
}
