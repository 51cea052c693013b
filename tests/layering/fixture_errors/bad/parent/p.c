// Fixture: parent/ is not checked yet; this must not be reported.
static lw_status_t helper(void) { return lw__fail(LW_INTERNAL, "parent"); }
