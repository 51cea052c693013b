// child/config.c — configuration defaults, and reading a caller's config of any version.
#include "child/config.h"

#include <stddef.h>
#include <string.h>

#include "lanes/error.h"

// A field appended to a struct moves its sizeof past the first version's: the V1 sizes must
// stay (they are the smallest struct_size accepted), so only these asserts change with it.
_Static_assert(offsetof(lw_chip_config_t, register_lane_cpu) + sizeof(int32_t) ==
                   LW__CHIP_CONFIG_V1_BYTES,
               "lw_chip_config_t's first version ends after register_lane_cpu");
_Static_assert(sizeof(lw_chip_config_t) >= LW__CHIP_CONFIG_V1_BYTES, "layouts only grow");
_Static_assert(offsetof(lw_run_config_t, timeout_ns) + sizeof(int64_t) == LW__RUN_CONFIG_V1_BYTES,
               "lw_run_config_t's first version ends after timeout_ns");
_Static_assert(sizeof(lw_run_config_t) >= LW__RUN_CONFIG_V1_BYTES, "layouts only grow");

static void chip_defaults(lw_chip_config_t *c) {
  memset(c, 0, sizeof(*c));
  c->struct_size = (uint32_t)sizeof(*c);
  strcpy(c->backend, "sim");
  c->device_id = 0;
  c->numa_node = -1;
  c->run_queue_depth = 256;
  c->register_queue_depth = 64;
  c->submit_timeout_ns = 10ll * 1000 * 1000 * 1000;
  c->run_lane_cpu = -1;
  c->register_lane_cpu = -1;
}

void lw_chip_config_default_sized(lw_chip_config_t *c, uint32_t struct_size) {
  if (c == NULL) return;
  lw_chip_config_t d;
  chip_defaults(&d);
  lw__sized_config_fill(c, struct_size, &d, sizeof(d));
}

void lw_run_config_default_sized(lw_run_config_t *c, uint32_t struct_size) {
  if (c == NULL) return;
  lw_run_config_t d;
  memset(&d, 0, sizeof(d));
  lw__sized_config_fill(c, struct_size, &d, sizeof(d));
}

lw_status_t lw__chip_config_read(const lw_chip_config_t *in, lw_chip_config_t *out,
                                 lw_error_t *err) {
  chip_defaults(out);
  if (in == NULL) return LW_OK;
  return lw__sized_config_read("lw_chip_config_t", in, LW__CHIP_CONFIG_V1_BYTES, sizeof(*out),
                               out, err);
}

lw_status_t lw__run_config_read(const lw_run_config_t *in, lw_run_config_t *out,
                                lw_error_t *err) {
  memset(out, 0, sizeof(*out));
  out->struct_size = (uint32_t)sizeof(*out);
  if (in == NULL) return LW_OK;
  return lw__sized_config_read("lw_run_config_t", in, LW__RUN_CONFIG_V1_BYTES, sizeof(*out),
                               out, err);
}
