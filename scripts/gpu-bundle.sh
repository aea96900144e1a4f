#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that lacks the build's dependencies (a compute node
# image with the CUDA driver and toolkit libraries but no MPI, HDF5, oneDNN or FFTW): the
# GPU test programs, the apps, Tessera's libraries, every non-system library they load,
# and a relocatable copy of Open MPI (mpirun, its components and help files), plus a
# manifest of the GPU tests and their rank counts. CUDA's own libraries (cudart, cuBLAS,
# cuFFT, cuDNN) stay out: the GPU machine's driver stack provides them.
#   scripts/gpu-bundle.sh [BUILD_DIR] [OUT.tar.xz]     (defaults: build, gpu-bundle.tar.xz)
# Then, on the GPU machine, in a checkout of the same commit:
#   TESSERA_GPU_BUNDLE=OUT.tar.xz scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-gpu-bundle.tar.xz}
grep -q "TESSERA_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "gpu-bundle: $build is not a CUDA build (TESSERA_CUDA=ON)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib,ompi/bin,ompi/share}

# The GPU tests (ctest label gpu) as "program ranks" lines; their programs.
ctest --test-dir "$build" -L gpu -N | sed -n 's/^ *Test *#[0-9]*: \(.*\)\.np\([0-9]*\)$/\1 \2/p' \
  >"$stage/gpu-tests.txt"
[ -s "$stage/gpu-tests.txt" ] || { echo "gpu-bundle: no GPU tests in $build" >&2; exit 1; }
cut -d' ' -f1 "$stage/gpu-tests.txt" | sort -u | while read -r t; do cp "$build/tests/$t" "$stage/bin/"; done
cp "$build"/apps/tessera-{bench,train,prep,infer} "$stage/bin/"
find "$build" -name 'libtessera_*.so.0' -exec cp -L {} "$stage/lib/" \;

# Open MPI, relocatable through OPAL_PREFIX: the launcher, the daemon, the components.
ompi_lib=$(dirname "$(find /usr/lib /usr/lib64 -path '*openmpi*' -name 'mca_btl_self.so' | head -1)")
[ -d "$ompi_lib" ] || { echo "gpu-bundle: Open MPI's components not found" >&2; exit 1; }
prefix=$(ompi_info --path prefix --parsable 2>/dev/null | sed -n 's/^path:prefix://p')
rel=${ompi_lib#"${prefix:-/usr}/"}
mkdir -p "$stage/ompi/$rel"
cp "$ompi_lib"/*.so "$stage/ompi/$rel/"
cp "$(command -v orterun)" "$(command -v orted)" "$stage/ompi/bin/"
ln -s orterun "$stage/ompi/bin/mpirun"
cp -r "${prefix:-/usr}/share/openmpi" "$stage/ompi/share/"

# Every library these load, except the C runtime (the GPU machine's own, newer or equal),
# CUDA's, and the network fabrics' (their Open MPI components then just don't load).
system='linux-vdso|ld-linux|lib(c|m|mvec|dl|rt|pthread|resolv)\.so|libstdc\+\+|libgcc_s'
cuda='libcuda|libcudnn|libcufft|libcublas|libcudart|libnvidia|libOpenCL'
fabric='libfabric|libuc[pstm]|libibverbs|librdmacm|libpsm|libnl-|libefa|libmlx'
find "$stage/bin" "$stage/lib" "$stage/ompi" -type f \( -perm -u+x -o -name '*.so*' \) |
  while read -r f; do ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'; done | sort -u |
  grep -Ev "$system|$cuda|$fabric|/libtessera_" | while read -r l; do cp -Ln "$l" "$stage/lib/"; done
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true
git rev-parse HEAD >"$stage/commit" 2>/dev/null || true
tar -C "$stage" -cJf "$out" .
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1)), $(wc -l <"$stage/gpu-tests.txt") GPU test runs"
