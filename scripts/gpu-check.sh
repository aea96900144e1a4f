#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds with CUDA (sm_90), runs the GPU tests (CUDA
# against CPU for every kernel, device halo exchange, device layers, training pieces) and
# the CUDA conv kernel benchmark, a short training run on the device with its
# host<->device copies and kernel launches per step (train.device_stats), and prints a short
# table. Meant to run as one call well
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
# Training on the device: three steps of a small UNet, the device traffic of each step.
tdir=$(mktemp -d)
if "${TESSERA_MPIRUN[@]}" -np 1 build-gpu/apps/tessera-prep generate darcy --grid 32x32 \
    --samples 16 --seed 1 --out "$tdir/d.h5" --quiet >"$tdir/prep.log" 2>&1 &&
  sed -e "s|path = .*|path = \"$tdir/d.h5\"|" -e 's|^steps = .*|steps = 3|' \
    -e 's|^log_interval = .*|log_interval = 1|' -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$tdir/ck\"|" \
    -e 's|^metrics_csv = .*|metrics_csv = ""|' scripts/demo/darcy_unet.toml >"$tdir/cfg.toml" &&
  "${TESSERA_MPIRUN[@]}" -np 1 build-gpu/apps/tessera-train "$tdir/cfg.toml" \
    --train.device_stats=true >gpu-train.log 2>&1; then
  printf '%-40s %s\n' "training step on the device (step 3)" \
    "$(grep '^  device' gpu-train.log | tail -1 | sed 's/^  device (rank 0): //')"
else
  printf '%-40s %s\n' "training on the device" FAIL
  tail -20 gpu-train.log "$tdir/prep.log" 2>/dev/null
fi
rm -rf "$tdir"
printf '%-40s %s s\n' "wall time" "$(( $(date +%s) - start ))"
[ $rc = 0 ] || tail -40 gpu-tests.log
exit $rc
