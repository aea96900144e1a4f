#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds with CUDA (sm_90), runs the GPU tests (CUDA
# against CPU for every kernel, device halo exchange, device layers, training pieces) and
# the CUDA conv kernel benchmark, and prints a short table. Meant to run as one call well
# inside 10 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
source scripts/mpi-env.sh
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
TESSERA_BUILD_DIR=build-gpu TESSERA_CMAKE_ARGS="-DTESSERA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" \
  scripts/setup.sh >build-gpu.log 2>&1 || { tail -50 build-gpu.log; exit 1; }
printf '%-40s %s\n' check result
ctest --test-dir build-gpu -L gpu --output-on-failure >gpu-tests.log 2>&1
rc=$?
grep -q "SKIPPED: no CUDA device" gpu-tests.log && gpu="skipped (no device)" || gpu=$([ $rc = 0 ] && echo pass || echo FAIL)
printf '%-40s %s\n' "GPU tests (ctest -L gpu)" "$gpu"
# Kernel benchmark: cuDNN conv forward/backward on device next to oneDNN on the host.
if "${TESSERA_MPIRUN[@]}" -np 1 build-gpu/apps/tessera-bench conv-kernel --out=gpu-conv-part.json \
  >gpu-bench.log 2>&1; then
  build-gpu/apps/tessera-bench merge conv-kernel gpu-bench-conv-kernel.json gpu-conv-part.json |
    tail -n +2
else
  printf '%-40s %s\n' "conv-kernel benchmark" FAIL
  tail -20 gpu-bench.log
fi
printf '%-40s %s s\n' "wall time" "$(( $(date +%s) - start ))"
[ $rc = 0 ] || tail -40 gpu-tests.log
exit $rc
