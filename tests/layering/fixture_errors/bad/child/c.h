// Fixture: an inline helper in a header.
static inline lw_status_t child_fail(void) { return 0; }
static inline lw_status_t child_fail2(void) {
  return lw__fail(LW_INTERNAL, "child");
}
