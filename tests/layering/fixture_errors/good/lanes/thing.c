// Fixture: internal functions fill err; only the public entry point stores it.
static lw_status_t check_n(int n, lw_error_t *err) {
  // Not lw__fail(...): the caller decides where the error goes.
  if (n < 0) return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "thing: n %d < 0", n);
  return LW_OK;
}

lw_status_t lw__thing_create(int n, lw_thing_t **out, lw_error_t *err) {
  LW_RETURN_IF_ERROR(check_n(n, err));
  *out = calloc(1, sizeof(**out));
  return LW_OK;
}

lw_status_t lw_thing_open(int n,
                          lw_thing_t **out) {
  lw_error_t err;
  if (lw__thing_create(n, out, &err) != LW_OK) return lw__last_error_store(&err);
  if (n > 100) return lw__fail(LW_INVALID_ARGUMENT, "thing: n %d > 100", n);
  return LW_OK;
}
