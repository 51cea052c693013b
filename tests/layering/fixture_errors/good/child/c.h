// Fixture: a declaration names lw__fail-like functions without calling them.
lw_status_t lw__child_open(int n, lw_error_t *err);
