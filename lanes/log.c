// lanes/log.c — one sink per process for the events of lanework/log.h: the user's function,
// or stderr when LW_LOG asks for it (read when the library loads), or nothing.
#include "lanes/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanework/log.h"

_Atomic int lw__log_max = LW_LOG_OFF;

static pthread_mutex_t sink_mu = PTHREAD_MUTEX_INITIALIZER;
static lw_log_fn sink_fn;        // sink_mu
static void *sink_user;          // sink_mu
static lw_log_level_t env_level;  // from LW_LOG, fixed at load

lw_log_level_t lw__log_parse_level(const char *value) {
  if (!value) return LW_LOG_OFF;
  if (strcmp(value, "warn") == 0) return LW_LOG_WARN;
  if (strcmp(value, "info") == 0) return LW_LOG_INFO;
  if (strcmp(value, "debug") == 0) return LW_LOG_DEBUG;
  return LW_LOG_OFF;
}

__attribute__((constructor)) static void log_from_env(void) {
  env_level = lw__log_parse_level(getenv("LW_LOG"));
  atomic_store(&lw__log_max, (int)env_level);
}

void lw_set_log_fn(lw_log_fn fn, void *user, lw_log_level_t max_level) {
  if (max_level > LW_LOG_DEBUG) max_level = LW_LOG_DEBUG;
  pthread_mutex_lock(&sink_mu);
  sink_fn = fn;
  sink_user = user;
  atomic_store(&lw__log_max, fn ? (int)max_level : (int)env_level);
  pthread_mutex_unlock(&sink_mu);
}

const char *lw_log_level_name(lw_log_level_t level) {
  switch (level) {
    case LW_LOG_OFF: return "off";
    case LW_LOG_WARN: return "warn";
    case LW_LOG_INFO: return "info";
    case LW_LOG_DEBUG: return "debug";
  }
  return "unknown";
}

void lw__log_emit(lw_log_level_t level, const char *fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&sink_mu);
  lw_log_fn fn = sink_fn;
  void *user = sink_user;
  int max = atomic_load(&lw__log_max);
  pthread_mutex_unlock(&sink_mu);
  if ((int)level > max) return;  // the sink changed since the caller looked
  if (fn) {
    fn(level, message, user);
  } else {
    // One write per line, so lines from several threads or processes do not interleave.
    char line[600];
    int n = snprintf(line, sizeof(line), "lanework %s: %s\n", lw_log_level_name(level), message);
    if (n > 0) fputs(line, stderr);
  }
}
