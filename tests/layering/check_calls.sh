#!/bin/sh
# tests/layering/check_calls.sh OBJ... — DESIGN §9: no circle of calls among parent files.
# Each object file is one source file; file A calls file B when A needs (nm -u) a symbol B
# defines. The file graph goes to tsort(1), which names any loop and fails. Prints the graph
# on failure so the loop can be read with its edges.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for o in "$@"; do
  n=$(basename "$o" .o); n=${n%.c}
  nm -g --defined-only "$o" > "$work/nm" || { echo "cannot read $o"; exit 2; }
  awk -v f="$n" 'NF == 3 {print "D", $3, f}' "$work/nm" >> "$work/syms"
  nm -u "$o" > "$work/nm" || { echo "cannot read $o"; exit 2; }
  awk -v f="$n" '{print "U", $NF, f}' "$work/nm" >> "$work/syms"
  echo "$n $n" >> "$work/edges"  # every file is a node, even one that calls nothing
done
# Definitions first, then every use of a defined symbol from another file is an edge.
awk '$1 == "D"' "$work/syms" > "$work/d"
awk '$1 == "U"' "$work/syms" > "$work/u"
cat "$work/d" "$work/u" | awk '$1 == "D" {def[$2] = $3; next}
  ($2 in def) && def[$2] != $3 {print $3, def[$2]}' >> "$work/edges"
sort -u "$work/edges" -o "$work/edges"
if ! tsort "$work/edges" > /dev/null 2> "$work/err"; then
  echo "calls among these files go in a circle (caller callee):"
  awk '$1 != $2' "$work/edges"
  cat "$work/err"
  exit 1
fi
echo "no circle of calls among $# files"
