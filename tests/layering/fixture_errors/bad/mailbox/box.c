// Fixture: an internal function reads the thread-local last error (a multi-line signature).
void lw__box_report(lw_box_t *box,
                    int code) {
  lw_error_t e = *lw_last_error();
  box->code = code + e.code;
}
