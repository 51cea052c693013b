#!/usr/bin/env bash
# tests/gpu_check/check_bundle.sh GPU_CHECK PACK_BUILD CHECK_SUMMARY
# `scripts/gpu-check pack` makes a bundle that runs from any path: packed (a Release build in
# PACK_BUILD), moved to another folder whose path holds a space, and used from a third folder
# with LD_LIBRARY_PATH unset, its programs must load every library from the bundle (glibc's
# own excepted), `lanework info` must exit 0 naming the bundle's kernel folder, and a part of
# `gpu-check run` must pass against this machine's OpenCL driver (PoCL in CI) and write a
# summary CHECK_SUMMARY accepts. A run whose "ICD" is no ICD must fail, naming why, and say so
# in its summary and exit status. A cuda step where no CUDA driver can be loaded must be
# skipped, naming why, and a skip must leave the run not passed. Every folder it makes is
# removed when it ends.
set -euo pipefail
gpu_check="$1" pack_build="$2" check_summary="$3"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/lw-gpu-check.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "check_bundle: $*" >&2
  exit 1
}

# The steps' limits sum to at most the default budget, so every step starts even if all hang.
limits="$(awk '/^steps_table\(\)/ {on = 1} on && $1 == "step" {sum += $4} on && /^}/ {exit} END {print sum + 0}' "$gpu_check")"
budget="$(sed -n 's/^  budget="${LW_GPU_CHECK_BUDGET:-\([0-9]*\)}"$/\1/p' "$gpu_check")"
[ -n "$budget" ] && [ "$limits" -gt 0 ] && [ "$limits" -le "$budget" ] ||
  fail "the steps' limits sum to $limits s, over the default budget (${budget:-unknown} s)"

LW_PACK_BUILD="$pack_build" "$gpu_check" pack "$tmp/packed"
mkdir -p "$tmp/else where" "$tmp/cwd"
mv "$tmp/packed" "$tmp/else where/bundle"
b="$tmp/else where/bundle"
cd "$tmp/cwd"
unset LD_LIBRARY_PATH LW_KERNEL_DIR

# The bundle's size, and no library of glibc, PoCL or a driver in it.
bytes="$(du -sb "$b" | cut -f1)"
[ "$bytes" -le $((60 * 1024 * 1024)) ] || fail "the bundle is $bytes bytes, over 60 MiB"
for f in "$b"/lib/*.so*; do
  case "$(basename "$f")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libresolv.so* | *pocl* | *nvidia*)
      fail "$(basename "$f") must not be bundled" ;;
  esac
done

# Every library each program loads comes from the bundle, or is one of glibc's.
for p in "$b"/bin/*; do
  deps="$(ldd "$p")" || fail "ldd $p failed: $deps"
  echo "$deps" | grep -q "not found" && fail "$p: a library is not found:"$'\n'"$deps"
  while IFS= read -r line; do
    [[ "$line" == *" => "* ]] || continue
    name="${line%% => *}" path="${line#* => }"
    name="${name#"${name%%[![:space:]]*}"}" path="${path% (0x*}"
    case "$path" in
      "$b"/bin/../lib/*) ;;
      *) [[ "$name" =~ ^(libc|libm|libpthread|libdl|librt|libresolv)\.so ]] ||
           fail "$(basename "$p") loads $name from $path, not from the bundle" ;;
    esac
  done <<<"$deps"
  case "$(basename "$p")" in
    lanework | test_*) echo "$deps" | grep -qF "libOpenCL.so.1 => $b/bin/../lib/libOpenCL.so.1" ||
      fail "$(basename "$p") does not load the bundle's libOpenCL.so.1:"$'\n'"$deps" ;;
  esac
done

# `lanework info` from elsewhere finds the kernels beside itself.
info="$("$b/bin/lanework" info)" || fail "lanework info failed: $info"
grep -qF "kernels:    $b/lib/lanework/kernels (" <<<"$info" ||
  fail "lanework info does not name the bundle's kernel folder:"$'\n'"$info"
# grep reads all of it (-q would stop at the match and SIGPIPE the writer under pipefail).
"$b/gpu-check" --help | grep "bench_dispatch_sim" >/dev/null || fail "gpu-check --help lists no steps"
"$b/gpu-check" --help | grep "bench_cancel_cuda_l3 .*(needs cuda)" >/dev/null ||
  fail "gpu-check --help lists no cuda steps"

# A part of run, one step of each kind, against the ICD the search finds here. The steps are
# the short ones, with three times their limits: this checks the mechanics, on a machine the
# rest of the suite (or anything else) may load; sim's 20000-round-trip dispatch bench alone
# takes over 80 s on two vCPUs beside two busy loops.
LW_GPU_CHECK_TIMEOUT_SCALE=3 \
  LW_GPU_CHECK_STEPS=info,info_json,unit_opencl_l3,bench_cancel_opencl_l2 \
  "$b/gpu-check" run "$b" "$tmp/out" || fail "gpu-check run failed: see the log above"
"$check_summary" "$tmp/out/gpu-check.json" true info=passed info_json=passed \
  unit_opencl_l3=passed bench_cancel_opencl_l2=passed \
  "target:cuda_cancel_l2=not_measured%step bench_cancel_cuda_l2 did not run"
grep -q "^==> bench_cancel_opencl_l2" "$tmp/out/gpu-check.log" || fail "the log lacks the steps"
grep -q "^0 hold, 0 missed, 11 not measured" "$tmp/out/gpu-check.log" ||
  fail "the log lacks the targets' table"

# A library that is no ICD: the loader finds no platform, so an opencl bench fails.
rc=0
LW_GPU_CHECK_ICD="$b/lib/libzstd.so.1" LW_GPU_CHECK_STEPS=info,bench_dispatch_opencl \
  "$b/gpu-check" run "$b" "$tmp/out-no-icd" || rc=$?
[ "$rc" -eq 1 ] || fail "a run with a failing step exited $rc, not 1"
"$check_summary" "$tmp/out-no-icd/gpu-check.json" false info=passed \
  bench_dispatch_opencl=failed "bench_dispatch_opencl~no OpenCL platform found"

# No CUDA driver (a name that loads nothing, whatever this machine has): the cuda step is
# skipped with the reason `lanework info` gives, and the run does not pass.
rc=0
LW_CUDA_LIBRARY="$tmp/none/libcuda.so.1" LW_GPU_CHECK_STEPS=info,bench_dispatch_cuda \
  "$b/gpu-check" run "$b" "$tmp/out-no-cuda" || rc=$?
[ "$rc" -eq 1 ] || fail "a run with a skipped cuda step exited $rc, not 1"
"$check_summary" "$tmp/out-no-cuda/gpu-check.json" false info=passed \
  bench_dispatch_cuda=skipped "bench_dispatch_cuda@no CUDA device: cannot load the CUDA driver" \
  "target:cuda_l2_dispatch=not_measured%step bench_dispatch_cuda skipped: no CUDA device"
grep -q '"ready": false' "$tmp/out-no-cuda/gpu-check.json" || fail "machine.cuda.ready is not false"

# A missed target does not end the run (lanework targets exits 1 then; the script runs under
# set -e): a copy of the bundle whose lanework prints a bench parallel that misses its target
# (its SHA256SUMS made again, so the bundle stays intact) still writes the targets into the
# summary and ends as every run does.
cp -a "$b" "$tmp/missed"
m="$tmp/missed"
mv "$m/bin/lanework" "$m/bin/lanework.real"
cat >"$m/bin/lanework" <<'WRAP'
#!/usr/bin/env bash
if [ "${1:-} ${2:-}" = "bench parallel" ]; then
  echo '{"schema": "lanework.bench.parallel", "rows": [{"shape": "chain", "chips": 2, "efficiency": 0.5}]}'
  exit 0
fi
exec "$(dirname "$0")/lanework.real" "$@"
WRAP
chmod +x "$m/bin/lanework"
(cd "$m" && awk '{print $2}' SHA256SUMS >"$tmp/sums" && echo bin/lanework.real >>"$tmp/sums" &&
  xargs sha256sum <"$tmp/sums" >SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS)
LW_GPU_CHECK_STEPS=info,bench_parallel_sim "$m/gpu-check" run "$m" "$tmp/out-missed" ||
  fail "a run whose steps passed but a target missed did not pass"
"$check_summary" "$tmp/out-missed/gpu-check.json" true info=passed bench_parallel_sim=passed \
  "target:parallel_sim=missed%least 0.500"
grep -q "^0 hold, 1 missed, 10 not measured" "$tmp/out-missed/gpu-check.log" ||
  fail "the missed run's log lacks its targets' table"
grep -q "^gpu-check: .* steps: 2, passed 2" "$tmp/out-missed/gpu-check.log" ||
  fail "the missed run stopped before its last lines"
echo "check_bundle: as expected"
