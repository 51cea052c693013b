// lanes/log.h — the library's side of lanework/log.h: lw__log formats one event and hands it
// to the process's log function (or stderr under LW_LOG). Off costs one relaxed load.
// Threads: any; no lock is held while the user's function runs.
#ifndef LANEWORK_LANES_LOG_H_
#define LANEWORK_LANES_LOG_H_

#include <stdatomic.h>

#include "lanework/log.h"

#ifdef __cplusplus
extern "C" {
#endif

// The level events are delivered up to (LW_LOG_OFF until a sink is set or LW_LOG read).
extern _Atomic int lw__log_max;

void lw__log_emit(lw_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// The level LW_LOG names ("warn", "info", "debug", "off" or unset); LW_LOG_OFF for anything
// else. Exposed for tests.
lw_log_level_t lw__log_parse_level(const char *value);

// Logs one event if its level is delivered.
#define lw__log(level, ...)                                                        \
  do {                                                                             \
    if ((int)(level) <= atomic_load_explicit(&lw__log_max, memory_order_relaxed)) \
      lw__log_emit((level), __VA_ARGS__);                                          \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_LANES_LOG_H_
