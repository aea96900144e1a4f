#!/usr/bin/env bash
# scripts/gpu-bundle.sh on the CUDA build: the bundle lists the GPU tests, every program in
# it finds all its libraries in the bundle except CUDA's own, and a GPU test runs at 2
# ranks through the bundle's relocated Open MPI with the bundle's libraries alone (here,
# without a GPU, it says it skips).
# Args: BUILD_DIR WORK_DIR
set -uo pipefail
build=$(cd "$1" && pwd) work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work/root" || exit 1
fail=0
check() {  # check "what" condition...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
XZ_OPT=-0 "$src/scripts/gpu-bundle.sh" "$build" "$work/b.tar.xz" || { echo "FAIL: bundle"; exit 1; }
tar -xJf "$work/b.tar.xz" -C "$work/root" || exit 1
root=$work/root
check "manifest lists the device halo test at 1-4 ranks" \
  test "$(grep -c '^test_gpu_halo [1-4]$' "$root/gpu-tests.txt")" = 4
# Every library a program loads resolves inside the bundle, unless it is the C runtime, a
# CUDA library or a network fabric's (those the GPU node provides).
allowed='linux-vdso|ld-linux|lib(c|m|mvec|dl|rt|pthread|resolv)\.so|libstdc\+\+|libgcc_s|libcuda|libcudnn|libcufft|libcublas|libcudart|libnvidia|libOpenCL|libfabric|libuc[pstm]|libibverbs|librdmacm|libpsm|libnl-|libefa|libmlx'
outside=$(for f in "$root"/bin/* "$root"/lib/*.so*; do
  LD_LIBRARY_PATH=$root/lib ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $1, $3}'
done | sort -u | grep -v " $root/" | grep -Ev "^($allowed)" | cut -d' ' -f1 | sort -u | tr '\n' ' ')
check "every other library comes from the bundle (from outside: ${outside:-none})" test -z "$outside"
cudalib=$(dirname "$(ldd "$build/kernels/libtessera_kernels.so.0" | awk '/libcudart/ {print $3}')")
out=$(env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$root/lib:$cudalib" \
  OPAL_PREFIX="$root/ompi" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_plm=isolated \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mca_base_component_show_load_errors=0 \
  "$root/ompi/bin/mpirun" --oversubscribe --bind-to none -np 2 "$root/bin/test_gpu_halo" 2>&1)
rc=$?
echo "$out" | tail -3
check "test_gpu_halo at 2 ranks through the bundle's mpirun (rc $rc)" test $rc = 0
check "it ran the test program (passed or skipped)" \
  grep -qE "SKIPPED: no CUDA device|All tests passed" <<<"$out"
exit $fail
