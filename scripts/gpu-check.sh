#!/usr/bin/env bash
# The GPU check, one call well inside 10 minutes on a machine with an NVIDIA GPU:
#  - every GPU test (ctest label gpu: CUDA against the host for each kernel, the device
#    halo exchange, device layers, attention, FFTs, training pieces) at its rank counts,
#    and the device's distributed FFT and SpectralConv against numpy;
#  - the kernel benchmarks on the device: cuDNN convolution next to oneDNN on the host
#    (conv-kernel), the local attention kernel (cuBLAS GEMMs, and the fused kernels) next to
#    the host's, and the FNO block (512^2, width 64, 32 modes) with each CUDA spectral mixing
#    (kernel, cuBLAS GEMMs);
#  - three training steps of each demo model at 1 and 2 ranks with the device traffic of a
#    step (train.device_stats);
# and prints a short table; logs go to $TESSERA_GPU_LOGS (default gpu-logs/).
# Two ways to get the programs:
#  - default: build here with CUDA (sm_90) into build-gpu (scripts/setup.sh);
#  - TESSERA_GPU_BUNDLE=FILE: a bundle made by scripts/gpu-bundle.sh on a build machine,
#    for GPU nodes without MPI, HDF5, oneDNN or FFTW (CUDA's own libraries come from here).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/cuda/bin
start=$(date +%s)
logs=${TESSERA_GPU_LOGS:-gpu-logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
source scripts/mpi-env.sh
export PMIX_MCA_pcompress_base_silence_warning=1

if [ -n "${TESSERA_GPU_BUNDLE:-}" ]; then
  root=$(mktemp -d)
  tar -xJf "$TESSERA_GPU_BUNDLE" -C "$root" || { echo "cannot unpack $TESSERA_GPU_BUNDLE"; exit 1; }
  tests=$root/bin apps=$root/bin manifest=$root/gpu-tests.txt
  # CUDA's libraries the programs need, from wherever this machine keeps them.
  extra=""
  for n in $(LD_LIBRARY_PATH=$root/lib ldd "$root/bin/tessera-bench" | awk '/not found/ {print $1}'); do
    p=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /usr/lib64 /opt -name "$n" 2>/dev/null | head -1)
    [ -n "$p" ] && extra="$extra:$(dirname "$p")" || echo "missing on this machine: $n"
  done
  export LD_LIBRARY_PATH=$root/lib$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$root/ompi PATH=$root/ompi/bin:$PATH
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_plm=isolated
  export OMPI_MCA_mca_base_component_show_load_errors=0
  mpirun=("$root/ompi/bin/mpirun" --oversubscribe --bind-to none)
  echo "bundle of commit $(cat "$root/commit" 2>/dev/null)"
else
  TESSERA_BUILD_DIR=build-gpu TESSERA_CMAKE_ARGS="-DTESSERA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" \
    scripts/setup.sh >"$logs/build.log" 2>&1 || { tail -50 "$logs/build.log"; exit 1; }
  tests=build-gpu/tests apps=build-gpu/apps manifest=$logs/gpu-tests.txt
  ctest --test-dir build-gpu -L gpu -N | sed -n 's/^ *Test *#[0-9]*: \(.*\)\.np\([0-9]*\)$/\1 \2/p' \
    >"$manifest"
  mpirun=("${TESSERA_MPIRUN[@]}")
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
run() { "${mpirun[@]}" "$@"; }

# The GPU tests, six at a time (one GPU, many cores); a line per run.
export tests logs MPIRUN_LINE="${mpirun[*]}"
xargs -P 6 -L 1 bash -c '
  mpirun=($MPIRUN_LINE); log=$logs/$0.np$1.log; s=$(date +%s)
  timeout 300 "${mpirun[@]}" -np $1 "$tests/$0" >"$log" 2>&1; rc=$?
  grep -q "SKIPPED: no CUDA device" "$log" && rc=skipped
  printf "%s np%s %s %ss\n" "$0" "$1" "$rc" $(( $(date +%s) - s ))' <"$manifest" |
  sort >"$logs/gpu-tests.result"
total=$(wc -l <"$logs/gpu-tests.result")
passed=$(awk '$3 == "0"' "$logs/gpu-tests.result" | wc -l)
printf '%-40s %s\n' check result
skipped=$(awk '$3 == "skipped"' "$logs/gpu-tests.result" | wc -l)
if [ "$skipped" = "$total" ]; then
  printf '%-40s %s\n' "GPU tests ($total runs)" "skipped: no CUDA device visible"
else
  printf '%-40s %s\n' "GPU tests ($total runs)" "$passed passed$([ "$passed" = "$total" ] ||
    echo ", FAILED: $(awk '$3 != "0" {printf "%s.np%s (rc %s) ", $1, $2, $3}' "$logs/gpu-tests.result")")"
fi

# The case that leaves the device almost no free memory (spilling kernels beside a full block
# cache), alone after the parallel tests.
full_cache_rc=0
if run -np 1 "$tests/test_gpu_attention" "[.full_cache]" >"$logs/full-cache.log" 2>&1; then
  if grep -q "SKIPPED: no CUDA device" "$logs/full-cache.log"; then
    printf '%-40s %s\n' "launch beside a full device cache" "skipped: no CUDA device visible"
  else
    printf '%-40s %s\n' "launch beside a full device cache" passed
  fi
else
  full_cache_rc=1
  printf '%-40s %s\n' "launch beside a full device cache" "FAILED (logs: full-cache.log)"
fi

# numpy against the device's distributed FFT and SpectralConv (cuFFT, the CUDA spectral
# mixing; tests/runtime/numpy_reference.py), where this build has the test (not bundles).
numpy_rc=0
if [ -z "${TESSERA_GPU_BUNDLE:-}" ]; then
  if ctest --test-dir build-gpu -R '^numpy_reference_cuda' --output-on-failure -V \
    >"$logs/numpy-cuda.log" 2>&1; then
    n_ok=$(grep -cE '^[0-9]+: ok +cuda' "$logs/numpy-cuda.log")
    worst=$(grep -oE 'ok +cuda .*relative error [0-9.e+-]+' "$logs/numpy-cuda.log" |
      awk '{print $NF}' | sort -g | tail -1)
    if grep -q 'SKIPPED: no CUDA device' "$logs/numpy-cuda.log"; then
      printf '%-40s %s\n' "numpy reference (device)" "skipped: no CUDA device visible"
    else
      printf '%-40s %s\n' "numpy reference (device)" "$n_ok results ok, worst relative error $worst"
    fi
  else
    numpy_rc=1
    printf '%-40s %s\n' "numpy reference (device)" "FAILED: $(grep -m3 FAIL "$logs/numpy-cuda.log" | tr '\n' ' ')"
  fi
fi

# Kernel benchmarks: device next to host, same problems, one run.
if run -np 1 "$apps/tessera-bench" conv-kernel --out="$logs/conv-kernel.json" >"$logs/bench-conv.log" 2>&1; then
  grep -E "^ *(problem|conv)" "$logs/bench-conv.log" | cut -c1-100
else
  printf '%-40s %s\n' "conv-kernel benchmark" FAIL
  tail -5 "$logs/bench-conv.log"
fi
if run -np 1 -x OMP_NUM_THREADS=8 "$apps/tessera-bench" attention --which=local --seq=1024,4096,16384 \
  --threads=8 --out="$logs/attention.json" >"$logs/bench-attention.log" 2>&1; then
  grep -E "^ *(what|local)" "$logs/bench-attention.log" | cut -c1-180
else
  printf '%-40s %s\n' "attention benchmark" FAIL
  tail -5 "$logs/bench-attention.log"
fi
# The FNO block on the device with each spectral mixing (own kernel, cuBLAS batched GEMMs).
for mix in kernel gemm; do
  if run -np 1 -x TESSERA_SPECTRAL_MIX=$mix "$apps/tessera-bench" fft --which=fno --space=cuda \
    --nfno=512 --width=64 --modes=32 --out="$logs/fno-$mix.json" >"$logs/bench-fno-$mix.log" 2>&1; then
    grep -E "^ *FNO block" "$logs/bench-fno-$mix.log" | head -1 | cut -c1-120
  else
    printf '%-40s %s\n' "FNO block benchmark ($mix)" FAIL
    tail -5 "$logs/bench-fno-$mix.log"
  fi
done

# Training on the device: three steps of each demo model at 1 and 2 ranks.
data=$(mktemp -d)
run -np 1 "$apps/tessera-prep" generate darcy --grid 32x32 --samples 16 --seed 1 \
  --out "$data/d.h5" --quiet >"$logs/prep.log" 2>&1
run -np 1 "$apps/tessera-prep" generate points --points 2048 --samples 16 --seed 1 \
  --out "$data/p.h5" --quiet >>"$logs/prep.log" 2>&1
train_rc=0
# One training run and its table line: model, ranks and optionally VAR=value for the ranks.
train_row() {
  local m=$1 np=$2 env=${3:-} extra=() label="train $1 np$2" log=$logs/train-$1.np$2
  if [ -n "$env" ]; then extra=(-x "$env") label="$label $env" log=$log-${env//=/_}; fi
  log=$log.log
  # A folder per run: a new run refuses one that holds another run's checkpoints.
  if timeout 120 "${mpirun[@]}" -np "$np" "${extra[@]}" "$apps/tessera-train" "$data/$m.toml" \
    --train.checkpoint_dir="$data/ck-${label//[ =]/_}" --train.log_interval=1 --train.device_stats=true \
    >"$log" 2>&1; then
    step=$(grep '^step 3/3' "$log" | grep -oE '[0-9.e+]+ ms/step')
    dev=$(grep '^  device' "$log" | tail -1 | sed 's/^  device (rank 0): //')
    where=$(grep -q "no CUDA kernels yet" "$log" && echo "host (no CUDA kernels)" || echo "$dev")
    printf '%-40s %s | %s\n' "$label" "$step" "$where"
  else
    train_rc=1
    printf '%-40s %s\n' "$label" "FAIL: $(grep -m1 -i error "$log")"
  fi
}
for m in darcy_unet darcy_fno darcy_vit points_transolver points_pointconv; do
  h5=$data/d.h5
  case $m in points*) h5=$data/p.h5 ;; esac
  sed -e "s|^path = .*|path = \"$h5\"|" -e 's|^steps = .*|steps = 3|' \
    -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$data/ck-$m\"|" -e 's|^metrics_csv = .*|metrics_csv = ""|' \
    "scripts/demo/$m.toml" >"$data/$m.toml"
  for np in 1 2; do train_row "$m" $np; done
done
# What the device block cache saves: the UNet step with cudaMalloc/cudaFree per tensor.
train_row darcy_unet 1 TESSERA_DEVICE_CACHE_MB=0
rm -rf "$data"
printf '%-40s %s s\n' "wall time" "$(($(date +%s) - start))"
[ "$passed" = "$total" ] && [ $train_rc = 0 ] && [ $numpy_rc = 0 ] && [ $full_cache_rc = 0 ]
