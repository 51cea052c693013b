// Fixture: the public API of a tree that keeps the error-channel rule.
LW_API lw_status_t lw_thing_open(int n, lw_thing_t **out);
LW_API const lw_error_t *lw_last_error(void);
