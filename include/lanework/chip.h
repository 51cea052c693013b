// lanework/chip.h — the L2 chip worker: one chip with a run lane and a register lane.
//
// Lanes:
//   - run lane: a thread that runs kernels one at a time in submission order (FIFO);
//   - register lane: a second thread that registers (decompress, load, prepare) and
//     unregisters callables in submission order, concurrently with the run lane. A register
//     posted while a run executes is prepared at the same time; the run lane never waits for
//     a register.
//
// Sync calls are the async call plus a wait, on the same lanes: a sync run never overtakes
// an earlier async run.
//
// Pins and tombstones: a run pins its callable's slot when run/run_async accepts it. An
// unregister of a pinned callable tombstones it: new runs and same-digest registers fail
// FAILED_PRECONDITION ("pending unregister"), and the free is deferred until the last pinned
// run finishes; the unregister handle finishes only then.
//
// Lifecycle: lw_chip_open -> any calls -> lw_chip_close. Handles from a chip may outlive it
// (close finishes or cancels every operation first).
//
// Thread safety: every function but lw_chip_close may be called from any thread concurrently.
// lw_chip_close MUST NOT race other calls on the same chip.
#ifndef LANEWORK_CHIP_H_
#define LANEWORK_CHIP_H_

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/config.h"
#include "lanework/handle.h"
#include "lanework/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_chip lw_chip_t;

// Opens the chip named by cfg (NULL: defaults). INVALID_ARGUMENT for an unknown backend.
LW_API LW_MUST_USE lw_status_t lw_chip_open(const lw_chip_config_t *cfg, lw_chip_t **out_chip);

// Lets queued and running runs finish, withdraws queued registers (CANCELLED), frees every
// callable and joins the lanes. NULL is ignored.
LW_API void lw_chip_close(lw_chip_t *chip);

LW_API LW_MUST_USE lw_status_t lw_chip_register(lw_chip_t *chip, const lw_callable_t *c,
                                                lw_callable_handle_t *out);
// The image is copied before this returns: the caller may free it at once.
LW_API LW_MUST_USE lw_status_t lw_chip_register_async(lw_chip_t *chip, const lw_callable_t *c,
                                                      lw_handle_t **out);
LW_API LW_MUST_USE lw_status_t lw_chip_unregister(lw_chip_t *chip, lw_callable_handle_t h);
LW_API LW_MUST_USE lw_status_t lw_chip_unregister_async(lw_chip_t *chip, lw_callable_handle_t h,
                                                        lw_handle_t **out);

// cfg NULL: defaults. out_timing may be NULL. Runs after every run accepted before it. When
// the run lane is idle the kernel runs on the calling thread, as the lane's next item (runs
// submitted meanwhile wait behind it): no thread hand-off. A kernel that must run on the run
// lane's thread pins the lane (lw_chip_config_t.run_lane_cpu) or is run with
// lw_chip_run_async; tracing and LW_L2_RUN_HERE=0 also keep runs on the lane.
LW_API LW_MUST_USE lw_status_t lw_chip_run(lw_chip_t *chip, lw_callable_handle_t h,
                                           const lw_args_t *args, const lw_run_config_t *cfg,
                                           lw_run_timing_t *out_timing);
LW_API LW_MUST_USE lw_status_t lw_chip_run_async(lw_chip_t *chip, lw_callable_handle_t h,
                                                 const lw_args_t *args,
                                                 const lw_run_config_t *cfg, lw_handle_t **out);

// The chip's device id, for messages.
LW_API int32_t lw_chip_device_id(const lw_chip_t *chip);

#ifdef __cplusplus
}
#endif
#endif  // LANEWORK_CHIP_H_
