// child/child_exit.h — the exit statuses of lanework's helper processes: the chip and sub
// children, and the fork server and zygote that start them. A child that finds its parent
// breaking the protocol, or gone, has nobody to tell but its exit status, which the fork
// server publishes and the parent quotes in the failure of the work the child held. The table
// with each status' meaning is in docs/protocol.md ("Child exit statuses").
//
// Any other status (or a signal) is the kernel's or the user code's: a kernel that calls
// exit(), a crash, a SIGKILL from the parent's escalation or supervisor.
#ifndef LANEWORK_CHILD_CHILD_EXIT_H_
#define LANEWORK_CHILD_CHILD_EXIT_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lw_child_exit {
  // Left as asked: the sticky shutdown word (children), or the process it serves is gone
  // (a child whose worker process died, the fork server's and the zygote's program).
  LW_CHILD_EXIT_OK = 0,
  // Could not start: the fork server could not hand the child its fds or lost its server
  // before the child began, the chip child could not bind its NUMA node or open its chip
  // (after publishing INIT_FAILED with the reason), the fork server's setup failed (after
  // reporting the step), or the zygote could not wait for requests.
  LW_CHILD_EXIT_START_FAILED = 1,
  // 2 is not used: it is what a shell or getopt-style error returns, easy to mistake.
  // The completion ring stayed full (or its tail was out of range) until the push deadline:
  // the parent stopped draining, so it is gone or broken.
  LW_CHILD_EXIT_RING_STUCK = 3,
  // A task frame was not READY or RUNNING when the child completed its task: the parent
  // rewrote a frame the child owned.
  LW_CHILD_EXIT_FRAME_LOST = 4,
  // The control frame was not CONTROL_REQUEST when the child acknowledged it: the parent
  // rewrote a control the child was serving.
  LW_CHILD_EXIT_CONTROL_LOST = 5,
  // The doorbell announced a post that no frame holds (or holds twice, or out of order).
  LW_CHILD_EXIT_POST_MISSING = 6,
  // A task frame the child took was not READY when it marked it RUNNING.
  LW_CHILD_EXIT_TAKE_FAILED = 7,
  // The chip's device was lost (a sticky CUDA error: the context cannot be used again): the
  // chip child reported the task that lost it, naming the error, and left so that the worker
  // respawns it on a fresh context with its callables replayed.
  LW_CHILD_EXIT_DEVICE_LOST = 8,
} lw_child_exit_t;

// A few words for a status above, for death messages ("exited with status 3 (completion ring
// stuck: the parent stopped draining)"); NULL for a status lanework does not give.
static inline const char *lw__child_exit_reason(int status) {
  switch (status) {
    case LW_CHILD_EXIT_OK:
      return "left normally";
    case LW_CHILD_EXIT_START_FAILED:
      return "could not start";
    case LW_CHILD_EXIT_RING_STUCK:
      return "completion ring stuck: the parent stopped draining";
    case LW_CHILD_EXIT_FRAME_LOST:
      return "its task frame was rewritten while it ran the task";
    case LW_CHILD_EXIT_CONTROL_LOST:
      return "its control frame was rewritten while it served the control";
    case LW_CHILD_EXIT_POST_MISSING:
      return "the doorbell announced a post no frame holds";
    case LW_CHILD_EXIT_TAKE_FAILED:
      return "a task frame it took was not ready";
    case LW_CHILD_EXIT_DEVICE_LOST:
      return "its device was lost: the task it ran names the error";
    default:
      return NULL;
  }
}

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_CHILD_EXIT_H_
