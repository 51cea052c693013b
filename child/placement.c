// child/placement.c — the run lane's move decision (placement.h).
#include "child/placement.h"

void lw__placement_init(lw_placement_t *p, int move_after) {
  p->move_after = move_after > 0 ? move_after : 0;
  p->due = p->move_after;
  p->same_cpu_posts = 0;
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

lw_placement_verdict_t lw__placement_decide(lw_placement_t *p, int runnable, int allowed_cpus) {
  if (allowed_cpus < 2) {
    // Nowhere else to go, now or later (a new mask comes with a new child): look as seldom as
    // a busy machine is looked at.
    p->due = p->move_after * LW_PLACEMENT_BACKOFF;
    return LW_PLACEMENT_STAY_PINNED;
  }
  if (runnable < 0 || runnable == allowed_cpus + 1) {
    if (p->due <= p->move_after * (LW_PLACEMENT_BACKOFF / 2)) p->due *= 2;
    return runnable < 0 ? LW_PLACEMENT_STAY_UNKNOWN : LW_PLACEMENT_STAY_BUSY;
  }
  p->due = p->move_after;
  return runnable <= allowed_cpus ? LW_PLACEMENT_MOVE_IDLE : LW_PLACEMENT_MOVE_CROWDED;
}

const char *lw__placement_verdict_name(lw_placement_verdict_t v) {
  switch (v) {
    case LW_PLACEMENT_MOVE_IDLE: return "moved off (a cpu idle)";
    case LW_PLACEMENT_MOVE_CROWDED: return "moved off (all crowded)";
    case LW_PLACEMENT_STAY_BUSY: return "stays on (other cpus busy)";
    case LW_PLACEMENT_STAY_PINNED: return "stays on (one cpu allowed)";
    case LW_PLACEMENT_STAY_UNKNOWN: return "stays on (load unknown)";
  }
  return "?";
}
