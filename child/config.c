// child/config.c — configuration defaults.
#include <string.h>

#include "lanework/config.h"

void lw_chip_config_default(lw_chip_config_t *c) {
  memset(c, 0, sizeof(*c));
  strcpy(c->backend, "sim");
  c->device_id = 0;
  c->numa_node = -1;
  c->run_queue_depth = 256;
  c->register_queue_depth = 64;
  c->submit_timeout_ns = 10ll * 1000 * 1000 * 1000;
  c->run_lane_cpu = -1;
  c->register_lane_cpu = -1;
}

void lw_run_config_default(lw_run_config_t *c) { memset(c, 0, sizeof(*c)); }
