// Fixture: a macro at file scope hides the caller.
#define CB_FAIL(...) lw__fail(LW_INTERNAL, __VA_ARGS__)

static int table[4] = {[0] = 1};
