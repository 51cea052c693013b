// Fixture: a static helper and an lw__ function set the thread-local last error.
static lw_status_t check_n(int n) {
  if (n < 0) return lw__fail(LW_INVALID_ARGUMENT, "thing: n %d < 0", n);
  return LW_OK;
}

lw_status_t lw__thing_create(int n, lw_thing_t **out, lw_error_t *err) {
  lw_status_t st = check_n(n);
  if (st != LW_OK) return lw__last_error_store(err);
  *out = calloc(1, sizeof(**out));
  return LW_OK;
}

// A public entry point may set it; this one is fine.
lw_status_t lw_thing_open(int n, lw_thing_t **out) {
  lw_error_t err;
  if (lw__thing_create(n, out, &err) != LW_OK) return lw__last_error_store(&err);
  return lw__fail(LW_OK, "unused");
}
