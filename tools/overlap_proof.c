// tools/overlap_proof.c — see overlap_proof.h.
#include "tools/overlap_proof.h"

#include <string.h>

static bool named(const lw_trace_event_t *e, const char *name) {
  return strncmp(e->name, name, LW_TRACE_NAME_BYTES - 1) == 0;
}

void lw__overlap_arm_read(const lw_trace_capture_t *c, const char *c1_name, const char *c2_name,
                          lw_overlap_arm_t *out) {
  memset(out, 0, sizeof(*out));
  out->by_events = -1;
  out->load_ns = -1;
  bool run = false, reg = false;
  for (size_t i = 0; i < c->n; ++i) {
    const lw_trace_record_t *r = &c->rec[i];
    const lw_trace_event_t *e = &r->ev;
    if (e->kind == LW_TRACE_STALL) {
      ++out->stalls;
    } else if (!run && e->kind == LW_TRACE_RUN && named(e, c1_name)) {
      out->run_t0_ns = e->ts_ns;
      out->run_t1_ns = e->ts_ns + e->dur_ns;
      out->run_pid = c->tracks[r->track].pid;
      out->run_chip = e->chip;
      run = true;
    } else if (!reg && e->kind == LW_TRACE_REGISTER && named(e, c2_name)) {
      out->reg_t0_ns = e->ts_ns;
      out->reg_t1_ns = e->ts_ns + e->dur_ns;
      out->reg_pid = c->tracks[r->track].pid;
      out->reg_chip = e->chip;
      out->by_events = lw__trace_register_covered(c, i);
      reg = true;
    } else if (out->load_ns < 0 && e->kind == LW_TRACE_LOAD && named(e, c2_name)) {
      out->load_ns = e->dur_ns;
    }
  }
}

double lw__overlap_hidden_by_events(double by_events, double run_overlapped, double run_alone,
                                    double reg) {
  if (reg <= 0) return 0.0;
  double stretch = run_overlapped - run_alone;
  double h = by_events - (stretch > 0 ? stretch : 0) / reg;
  return h < 0 ? 0.0 : h > 1 ? 1.0 : h;
}

bool lw__overlap_proof(const lw_overlap_arm_t *serial, const lw_overlap_arm_t *overlapped,
                       lw_overlap_proof_t *out) {
  double alone = (double)(serial->run_t1_ns - serial->run_t0_ns);
  double ov = (double)(overlapped->run_t1_ns - overlapped->run_t0_ns);
  double reg = (double)(overlapped->reg_t1_ns - overlapped->reg_t0_ns);
  if (alone <= 0 || ov <= 0 || reg <= 0 || overlapped->by_events < 0) return false;
  if (overlapped->run_pid != overlapped->reg_pid || overlapped->run_chip != overlapped->reg_chip) {
    return false;
  }
  out->by_events = overlapped->by_events;
  out->run_stretch = ov / alone;
  out->hidden_by_events = lw__overlap_hidden_by_events(overlapped->by_events, ov, alone, reg);
  return true;
}
