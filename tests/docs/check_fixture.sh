#!/usr/bin/env bash
# tests/docs/check_fixture.sh CHECKER BUILD FIXTURE.md EXPECT accept|reject
# Runs scripts/check_doc_code on a fixture page whose answer is known, so the checker can
# neither pass everything nor fail everything unnoticed.
#   accept: the checker must exit 0 and its summary line must equal EXPECT's one line (which
#           says how many blocks ran, were linked, compiled and skipped).
#   reject: the checker must exit 1 and report exactly the failures EXPECT lists, one
#           "LINE|text" per line: a "FIXTURE:LINE: FAIL..." line containing text, and no other.
set -uo pipefail
checker="$1" build="$2" fixture="$3" expect="$4" want="$5"
out="$("$checker" --build "$build" "$fixture" 2>&1)"
rc=$?
echo "$out"
name="$(basename "$fixture")"
case "$want" in
  accept)
    [ "$rc" -eq 0 ] || { echo "check_fixture: $name: the checker failed (exit $rc); it must accept it"; exit 1; }
    summary="$(printf '%s\n' "$out" | tail -n 1)"
    [ "$summary" = "$(cat "$expect")" ] || {
      echo "check_fixture: $name: summary '$summary', expected '$(cat "$expect")'"; exit 1; }
    ;;
  reject)
    [ "$rc" -eq 1 ] || { echo "check_fixture: $name: the checker exited $rc; it must reject it (1)"; exit 1; }
    n=0
    while IFS='|' read -r line text; do
      [ -n "$line" ] || continue
      n=$((n + 1))
      printf '%s\n' "$out" | grep -F "$name:$line: FAIL" | grep -qF "$text" || {
        echo "check_fixture: $name: no failure at line $line saying '$text'"; exit 1; }
    done < "$expect"
    got="$(printf '%s\n' "$out" | grep -c ": FAIL")"
    [ "$got" -eq "$n" ] || { echo "check_fixture: $name: $got failures reported, $n expected"; exit 1; }
    ;;
  *) echo "check_fixture: accept or reject, not '$want'"; exit 2 ;;
esac
echo "check_fixture: $name: as expected"
