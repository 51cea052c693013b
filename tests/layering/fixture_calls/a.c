// A fixture for check_calls.sh: a.c and b.c call each other, a circle the check must name.
int lw_fixture_a(int x);
int lw_fixture_b(int x);
int lw_fixture_a(int x) { return x > 0 ? lw_fixture_b(x - 1) : 0; }
