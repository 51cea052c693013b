// Fixture: the implementation of the thread-local last error is not checked.
static _Thread_local lw_error_t last_error;
const lw_error_t *lw_last_error(void) { return &last_error; }
lw_status_t lw__last_error_store(const lw_error_t *err) { last_error = *err; return err->code; }
lw_status_t lw__fail(lw_status_t code, const char *fmt, ...) { return lw__last_error_store(0); }
