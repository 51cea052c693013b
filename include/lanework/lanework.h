// lanework/lanework.h — the umbrella header: the whole public API, L2 (chip) and L3 (worker,
// orch). Kernels include lanework/kernel.h instead (header-only, nothing to link).
#ifndef LANEWORK_LANEWORK_H_
#define LANEWORK_LANEWORK_H_

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/chip.h"
#include "lanework/config.h"
#include "lanework/handle.h"
#include "lanework/log.h"
#include "lanework/orch.h"
#include "lanework/stats.h"
#include "lanework/status.h"
#include "lanework/trace.h"
#include "lanework/version.h"
#include "lanework/worker.h"

#endif  // LANEWORK_LANEWORK_H_
