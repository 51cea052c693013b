// A fixture for check_calls.sh: b.c calls back into a.c.
int lw_fixture_a(int x);
int lw_fixture_b(int x);
int lw_fixture_b(int x) { return lw_fixture_a(x); }
