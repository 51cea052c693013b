// child/config.h — reading the caller's config structs (lanework/config.h, "Growing structs")
// into this library's full layout. Used by child/ (lw_chip_open, lw_chip_run_async) and parent/
// (lw_worker_create, lw_orch_submit_next_level).
#ifndef LANEWORK_CHILD_CONFIG_H_
#define LANEWORK_CHILD_CONFIG_H_

#include "lanework/config.h"
#include "lanework/status.h"

// The first released layout of each struct (0.2.0), the smallest struct_size accepted. These
// stay as they are when fields are appended (child/config.c checks them against the layout).
#define LW__CHIP_CONFIG_V1_BYTES 56u
#define LW__RUN_CONFIG_V1_BYTES 16u

// *out = the defaults overlaid with in (NULL: the defaults alone), with out->struct_size the
// full size. INVALID_ARGUMENT naming the struct for a bad struct_size (lw__sized_config_read).
lw_status_t lw__chip_config_read(const lw_chip_config_t *in, lw_chip_config_t *out,
                                 lw_error_t *err);
lw_status_t lw__run_config_read(const lw_run_config_t *in, lw_run_config_t *out,
                                lw_error_t *err);

#endif  // LANEWORK_CHILD_CONFIG_H_
