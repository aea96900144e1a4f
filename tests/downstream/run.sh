#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/downstream against it
# with find_package(tessera), and runs it under MPI.
# Args: BUILD_DIR DOWNSTREAM_SRC TESSERA_CUDA LAUNCH...
set -euo pipefail
build=$1 src=$2 cuda=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
# The installed programs start without LD_LIBRARY_PATH (their RPATH finds the floors).
for app in tessera-prep tessera-train tessera-infer tessera-bench; do
  env -u LD_LIBRARY_PATH "$work/prefix/bin/$app" --help > "$work/$app.help" 2>&1 ||
    { cat "$work/$app.help"; echo "installed $app does not start"; exit 1; }
done
cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$@" "$work/build/downstream"
