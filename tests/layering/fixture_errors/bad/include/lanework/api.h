// Fixture: the public API of a tree that breaks the error-channel rule on purpose.
LW_API lw_status_t lw_thing_open(int n, lw_thing_t **out);
LW_API lw_status_t lw_thing_poke(lw_thing_t *t);
