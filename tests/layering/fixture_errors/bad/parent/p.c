// Fixture: parent/ is checked; a helper there that sets the thread-local error is reported.
static lw_status_t helper(void) {
  return lw__fail(LW_INTERNAL, "parent");
}
