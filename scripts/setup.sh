#!/usr/bin/env bash
# Installs the Debian packages Tessera needs (only those missing; the python3-* ones draw
# scripts/plot.py's pictures), then configures and builds into build/ (Release).
# Idempotent: a second run installs nothing and only rebuilds what changed.
# Options: --no-build (packages only); env TESSERA_BUILD_DIR, TESSERA_CMAKE_ARGS
# (e.g. "-DTESSERA_CUDA=OFF").
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libhdf5-openmpi-dev
  zlib1g-dev hdf5-tools libdnnl-dev libfftw3-dev libfftw3-mpi-dev catch2 libtomlplusplus-dev
  nlohmann-json3-dev libnanoflann-dev python3-matplotlib python3-h5py python3-numpy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--no-build" ] && exit 0

# nvcc from the machine image's CUDA toolkit, where it exists.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
build=${TESSERA_BUILD_DIR:-build}
# shellcheck disable=SC2086
mkdir -p "$build"
log="$build/configure.log"  # inside the (ignored) build folder, never in the tree
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release ${TESSERA_CMAKE_ARGS:-} >"$log" 2>&1 ||
  { cat "$log"; exit 1; }
grep -E "^-- Tessera" "$log" || true
cmake --build "$build" -j "$(nproc)"
