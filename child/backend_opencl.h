// child/backend_opencl.h — what the opencl backend shares with code that talks to the same
// device through the OpenCL API directly (the raw floor of `lanework bench dispatch`). Only
// built, and only to be included, where LW_HAVE_OPENCL is defined.
#ifndef LANEWORK_CHILD_BACKEND_OPENCL_H_
#define LANEWORK_CHILD_BACKEND_OPENCL_H_

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <stdbool.h>
#include <stdint.h>

#include "lanes/error.h"

// The device an opencl chip on device_id runs and builds on.
typedef struct lw_opencl_chip_device {
  cl_device_id root;    // the device as listed (`lanework info`)
  cl_device_id dev;     // root, or the sub-device made for the chip
  bool sub;             // dev is a sub-device: the caller releases it with clReleaseDevice
  uint32_t root_units;  // compute units of root
  uint32_t units;       // compute units of dev
  char name[128];       // CL_DEVICE_NAME of root
} lw_opencl_chip_device_t;

// Picks the device exactly as opening an opencl chip does: device_id over every device of
// every platform; on a CPU device with more than one compute unit, a sub-device of all but
// one unit (LW_OPENCL_CPU_UNITS overrides; 0: the whole device). UNAVAILABLE when there is no
// platform or device, INVALID_ARGUMENT naming the range when device_id is outside it.
LW_MUST_USE lw_status_t lw__opencl_chip_device(int32_t device_id, lw_opencl_chip_device_t *out,
                                               lw_error_t *err);

#endif  // LANEWORK_CHILD_BACKEND_OPENCL_H_
