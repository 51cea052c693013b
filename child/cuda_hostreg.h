// child/cuda_hostreg.h — host memory registered with the CUDA driver for runs' mapped and live
// tensors (child/backend_cuda.c), one table for every cuda chip of the process.
//
// Why one table: a registration belongs to the process (PORTABLE: every context sees the pages
// pinned) and the driver refuses a second registration of the same pages, so two chips running
// on one host buffer share one registration. Each run takes a reference on the registration
// of each such tensor and drops it when it finishes; the memory is never unregistered under a
// run that still uses it.
//
// Why released late: registering and unregistering cost ~90 us at 4 KiB on an H100, more with
// more pages, and the unregister is work the run's result need not wait for: once its stream
// is done the device is done with the pages (docs/cuda.md, "Memory", has the figures). A
// registration whose last reference was dropped is therefore unregistered by
// lw__cuda_hostreg_flush, which the run lane calls after the run's handle finished
// (ops.after_run); a closing device's go at lw__cuda_hostreg_forget.
//
// Never reused once unreferenced: after a run's handle finished the program may free that
// memory and get other pages at the same address, which an old registration does not map. A
// take of pages an unreferenced registration still covers unregisters it first and registers
// the range again.
//
// Threads: every function locks the table; driver calls are made under the lock with the
// calling thread's context current (the run lane's, or close's), so one chip's flush delays
// another chip's take by the unregisters it makes. Registrations die with the context that
// made them (the driver's rule), so lw__cuda_hostreg_forget takes a closing device's entries
// out of the table once no run holds them.
#ifndef LANEWORK_CHILD_CUDA_HOSTREG_H_
#define LANEWORK_CHILD_CUDA_HOSTREG_H_

#include <stdbool.h>
#include <stdint.h>

#include "child/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

// Makes [host, host + bytes) mapped for a run of the device owner. On success *out_ref names
// the registration the run now holds a reference on (drop it with lw__cuda_hostreg_drop), or
// is 0 when the pages were registered by the program: mapped as the driver has them, with no
// reference taken. Fails with LW_CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED when a registration a
// run holds covers part of the range but not all of it (the driver would map only that part),
// else with the driver's answer.
lw_cu_result_t lw__cuda_hostreg_take(const lw_cuda_driver_t *api, const void *owner, void *host,
                                     uint64_t bytes, uint64_t *out_ref);

// Drops the reference a take returned (ref non-zero). Never calls the driver.
void lw__cuda_hostreg_drop(uint64_t ref);

// Unregisters every registration without references, whichever device made it (any context
// may unregister while the registering one lives, and forget takes a closing device's out of
// the table first); one whose unregister fails stays for the next flush. The run lane after a
// run.
void lw__cuda_hostreg_flush(const lw_cuda_driver_t *api);

// Takes owner's entries out of the table before its context is destroyed (which ends its
// registrations): waits until no run holds any of them (another chip's run may: two chips on
// one buffer), unregisters them and forgets them. Close only, after the device's last run.
void lw__cuda_hostreg_forget(const lw_cuda_driver_t *api, const void *owner);

// The number of registrations the table holds, referenced or not (tests).
uint32_t lw__cuda_hostreg_count(void);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHILD_CUDA_HOSTREG_H_
