# scripts/common.sh — sourced by the other scripts: installs build dependencies from
# Debian's packages when missing, and configures + builds lanework.
set -euo pipefail

LW_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LW_BUILD="${LW_BUILD:-$LW_ROOT/build}"

# The Debian packages lanework builds and tests with.
# The OpenCL ones (loader, headers and PoCL, a CPU device) make every OpenCL test run for real.
# jansson reads JSON (traces, bench output) in `lanework trace svg` and the tests; rsvg-convert
# (librsvg2-bin) renders the swimlane SVGs in a test. valgrind and gdb run an L2 and an L3
# program in the tools tests (tests/tools/run_under_tool.sh). Open MPI (openmpi-bin,
# libopenmpi-dev) builds the L4's transport and runs its tests under mpirun (docs/l4.md).
LW_PACKAGES=(build-essential cmake pkg-config libcriterion-dev libzstd-dev libxxhash-dev
             libnuma-dev zstd ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd
             libjansson-dev librsvg2-bin valgrind gdb openmpi-bin libopenmpi-dev)

lw_install_deps() {
  local missing=()
  for p in "${LW_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  echo "==> installing: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# lw_build [extra cmake args...]
lw_build() {
  echo "==> configuring $LW_BUILD"
  cmake -S "$LW_ROOT" -B "$LW_BUILD" -DCMAKE_BUILD_TYPE="${LW_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
  echo "==> building"
  cmake --build "$LW_BUILD" -j"$(nproc)"
}
