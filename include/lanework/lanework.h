// lanework/lanework.h — the umbrella header.
#ifndef LANEWORK_LANEWORK_H_
#define LANEWORK_LANEWORK_H_

#include "lanework/args.h"
#include "lanework/callable.h"
#include "lanework/chip.h"
#include "lanework/config.h"
#include "lanework/handle.h"
#include "lanework/log.h"
#include "lanework/stats.h"
#include "lanework/status.h"
#include "lanework/trace.h"

#endif  // LANEWORK_LANEWORK_H_
