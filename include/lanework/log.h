// lanework/log.h — what no handle reports: a child respawned, a crash loop, a kernel's child
// killed because it ignored its cancel word, a liveness kill, a protocol violation. Handles
// carry the errors of the operations they stand for; these events happen between them.
//
// Where they go: to the function set with lw_set_log_fn (one per process), else to stderr when
// the environment variable LW_LOG is "warn", "info" or "debug" (read when the library loads),
// else nowhere. A message is one line without a newline; events about a child start with its
// name ("chip 0: ...").
//
// Threads: events come from the library's threads (the scheduler, the supervisor) and from
// callers; the function must be quick, thread-safe, and must not call back into the worker
// that logged. lw_set_log_fn may be called at any time from any thread; an event already being
// delivered may still reach the previous function.
#ifndef LANEWORK_LOG_H_
#define LANEWORK_LOG_H_

#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lw_log_level {
  LW_LOG_OFF = 0,
  LW_LOG_WARN = 1,   // work was lost or a child failed for good: a death, a kill, a crash loop
  LW_LOG_INFO = 2,   // recovery: a respawn, a replay done
  LW_LOG_DEBUG = 3,  // details of the above
} lw_log_level_t;

typedef void (*lw_log_fn)(lw_log_level_t level, const char *message, void *user);

// Sends events of level <= max_level to fn(level, message, user). fn NULL goes back to the
// default (LW_LOG, see above).
LW_API void lw_set_log_fn(lw_log_fn fn, void *user, lw_log_level_t max_level);
// "off", "warn", "info", "debug"; "unknown" for another value.
LW_API const char *lw_log_level_name(lw_log_level_t level);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LOG_H_
