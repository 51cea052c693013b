#!/bin/sh
# tests/parent/run_mpi.sh PROGRAM FAULT EXPECT [CASE] — runs PROGRAM as `mpirun -np 3` on this machine
# (oversubscribed, unbound, shared-memory transport) with LW_L4_TEST_FAULT=FAULT ("-": none), under
# `timeout -s KILL`, prints what it said, and passes when a line matches EXPECT (grep -E) and
# mpirun's exit status fits: 0 without a fault, non-zero with one. CASE, when given, goes to
# the program as LW_L4_TEST_CASE.
set -u
prog=$1
fault=$2
[ "$fault" = "-" ] && fault=""
expect=$3
if [ "$(id -u)" = 0 ]; then
  # Open MPI refuses to run as root unless told it is meant.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export LW_L4_TEST_FAULT="$fault"
export LW_L4_TEST_CASE="${4:-}"
# In a sanitizer build: Open MPI keeps memory past MPI_Finalize. Its components stay loaded
# (no dlclose) and stacks are unwound in full, so the suppressions (mpi_lsan.supp, Open MPI's
# libraries only) match them; any other leak is still reported. No effect in other builds.
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="suppressions=$here/mpi_lsan.supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
out=$(timeout -s KILL 60 mpirun -np 3 --oversubscribe --bind-to none --mca btl self,vader \
        -x LW_L4_TEST_FAULT -x LW_L4_TEST_CASE -x LSAN_OPTIONS -x ASAN_OPTIONS \
        -x OMPI_MCA_mca_base_component_disable_dlclose "$prog" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "mpirun exit status: $rc"
if ! printf '%s\n' "$out" | grep -Eq "$expect"; then
  echo "FAIL: no line matches: $expect"
  exit 1
fi
if [ -z "$fault" ] && [ "$rc" -ne 0 ]; then
  echo "FAIL: mpirun exited $rc without a fault"
  exit 1
fi
if [ -n "$fault" ] && [ "$rc" -eq 0 ]; then
  echo "FAIL: mpirun exited 0 although a rank was lost"
  exit 1
fi
exit 0
