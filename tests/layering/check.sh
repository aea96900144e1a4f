#!/usr/bin/env bash
# Builds each layering probe: the control must build, every probe of an upward include
# (or of MPI below the runtime) must fail, and fail for that reason.
# Args: CMAKE BUILD_DIR
set -uo pipefail
cmake=$1 build=$2
fail=0
expect() {  # target, "ok" or the regex its compiler error must match
  local target=$1 want=$2 out rc
  out=$("$cmake" --build "$build" --target "$target" 2>&1)
  rc=$?
  if [ "$want" = ok ]; then
    if [ $rc -ne 0 ]; then echo "FAIL: $target should build:"; echo "$out" | tail -20; fail=1;
    else echo "ok: $target builds"; fi
  elif [ $rc -eq 0 ]; then
    echo "FAIL: $target built, but its floor forbids it"; fail=1
  elif ! grep -qE "$want" <<<"$out"; then
    echo "FAIL: $target failed for another reason than '$want':"; echo "$out" | tail -20; fail=1
  else
    echo "ok: $target refused ($(grep -oE "$want" <<<"$out" | head -1))"
  fi
}
expect kernels_control ok
expect kernels_includes_mpi "mpi\.h: No such file"
expect kernels_includes_runtime "floors link only the floors below them"
expect decomp_includes_kernels "floors link only the floors below them"
expect runtime_includes_io "floors link only the floors below them"
exit $fail
