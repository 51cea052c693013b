#!/usr/bin/env bash
# tests/tools/run_under_tool.sh — runs a program of lanework's tools tests under valgrind or
# gdb and fails when the tool found something, the program failed, or a process of lanework's
# outlived it.
#
#   run_under_tool.sh valgrind SECONDS SUPP VALGRIND PROGRAM
#   run_under_tool.sh gdb      SECONDS GDB PROGRAM
#
# valgrind: memcheck with --trace-children=yes. The zygote, the sub server and the sub children
#   are forks of the program, which valgrind follows anyway; the chip side starts with an exec
#   (the helper lanework-forkserver, an ordinary dynamically linked program), which it follows
#   only when told. Without it the chip servers and the chip children (the mailbox loop,
#   child/chip.c, the backend, the kernel) would run unchecked; with it an L3 run takes a few
#   seconds more. Each process writes its own log (--log-file=DIR/%p.log), as the zygote
#   outlives the program. Fails when the program's exit status is not 0 (99: memcheck found
#   errors in it), or when any process's log has an "ERROR SUMMARY" above 0 or holds a stack
#   trace ("at 0x..."/"by 0x..." lines: an error record, a definite leak, the only kind shown,
#   or a fatal signal). The stack check is what catches an error in a chip or sub child:
#   destroy ends those with SIGKILL, so they never print a summary. SUPP holds the suppressions
#   (known third-party noise only; tests/tools/valgrind.supp).
# gdb: gdb -batch -nx -ex run -ex 'info inferiors' --args PROGRAM; fails unless gdb says
#   "[Inferior 1 (process N) exited normally]".
#
# Either way the program runs with LW_TOOLS_TAG=<a fresh tag> in its environment, which every
# process of lanework's inherits (the helper is exec'd with the program's environment). After
# the program ends, every live process with that tag must be gone within 30 s (the zygote
# leaves when the program's end hangs up its socket); one that is not is listed, killed and
# fails the test. The whole run is limited to SECONDS (timeout(1)), so a hang fails with a
# message, and what is left of it is cleaned up, before ctest's own TIMEOUT.
set -u

kind="${1:?kind: valgrind or gdb}"
limit="${2:?seconds}"
shift 2
tag="lw-tools-$$-$(date +%s%N)"
work="$(mktemp -d "${TMPDIR:-/tmp}/lw_tools_XXXXXX")"
out="$work/out.txt"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The pids of the live processes (not zombies) whose environment holds LW_TOOLS_TAG=<tag>.
tagged_pids() {
  local d pid stat rest
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -qxF "LW_TOOLS_TAG=$tag" || continue
    stat="$(cat "$d/stat" 2>/dev/null)" || continue
    rest="${stat##*) }"  # the name may hold spaces and parentheses
    case "${rest%% *}" in Z | X) continue ;; esac
    echo "$pid"
  done
}

describe_pids() {
  local pid
  for pid in "$@"; do
    echo "  $pid: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" \
      "(parent $(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null))"
  done
}

case "$kind" in
  valgrind)
    supp="${1:?suppressions file}"
    valgrind="${2:?valgrind}"
    program="${3:?program}"
    mkdir "$work/logs"
    echo "==> $valgrind --trace-children=yes ... $program (logs in $work/logs)"
    env LW_TOOLS_TAG="$tag" timeout -k 10 "$limit" "$valgrind" --error-exitcode=99 \
      --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
      --trace-children=yes --suppressions="$supp" --log-file="$work/logs/%p.log" \
      "$program" </dev/null >"$out" 2>&1
    rc=$?
    ;;
  gdb)
    gdb="${1:?gdb}"
    program="${2:?program}"
    echo "==> $gdb -batch -nx -ex run -ex 'info inferiors' --args $program"
    env LW_TOOLS_TAG="$tag" timeout -k 10 "$limit" "$gdb" -batch -nx -ex run \
      -ex 'info inferiors' --args "$program" </dev/null >"$out" 2>&1
    rc=$?
    ;;
  *)
    echo "run_under_tool.sh: unknown kind '$kind'" >&2
    exit 2
    ;;
esac

# Whatever is still running after the program: none within 30 s.
left=""
for _ in $(seq 300); do
  left="$(tagged_pids)"
  [ -z "$left" ] && break
  sleep 0.1
done

echo "--- output of the run:"
cat "$out"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  fail "the run did not end within $limit s (timeout(1) ended it)"
fi

case "$kind" in
  valgrind)
    for log in "$work"/logs/*.log; do
      [ -e "$log" ] || continue
      if grep -Eq '^==[0-9]+== ERROR SUMMARY: [1-9]' "$log" ||
         grep -Eq '^==[0-9]+== +(at|by) 0x' "$log"; then
        echo "--- $log:"
        cat "$log"
        fail "memcheck reported errors in process ${log##*/}"
      fi
    done
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; then
      main_log="$(grep -l "Command: $program\$" "$work"/logs/*.log 2>/dev/null | head -1)"
      [ -n "$main_log" ] && { echo "--- $main_log:"; cat "$main_log"; }
      if [ "$rc" -eq 99 ]; then
        fail "memcheck found errors in the program (exit status 99)"
      else
        fail "the program exited with status $rc under valgrind"
      fi
    fi
    ;;
  gdb)
    if ! grep -Eq '^\[Inferior 1 \(process [0-9]+\) exited normally\]' "$out"; then
      fail "gdb did not report that the program exited normally (gdb's status: $rc)"
    fi
    ;;
esac

if [ -n "$left" ]; then
  # shellcheck disable=SC2086
  fail "30 s after the run, process(es) of lanework's still run:
$(describe_pids $left)"
  # shellcheck disable=SC2086
  kill -KILL $left 2>/dev/null
fi

if [ "$failures" -eq 0 ]; then
  rm -rf "$work"
  echo "PASS: $kind ran $program cleanly and nothing of it is left"
  exit 0
fi
echo "($failures failure(s); files kept in $work)"
exit 1
