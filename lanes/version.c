// lanes/version.c — lw_version(): the version this library was built as.
#include "lanework/version.h"

const char *lw_version(void) { return LW_VERSION_STRING; }

int lw_version_number(void) { return LW_VERSION_NUMBER; }
