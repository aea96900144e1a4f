#!/usr/bin/env bash
# The demo, one command on a fresh machine: sets up (packages, build), generates a small
# Darcy dataset with tessera-prep, trains a UNet on 4 ranks (each sample split across
# them) for 200 steps with a falling loss, runs the trained model on grids twice as large,
# draws the prediction beside the truth and the training curves (scripts/plot.py), and
# says where everything is.
#   TESSERA_DEMO_OUT   output folder (default: demo-out/ in the repository; a relative
#                      path given here is taken from the calling directory). It must be new,
#                      empty or one the demo made (it marks it with a .tessera-demo file): a
#                      re-run replaces the demo's outputs there; a folder holding anything
#                      else is refused, nothing in it touched
#   TESSERA_DEMO_RANKS ranks (default 4)
#   TESSERA_DEMO_MODEL unet (default: 32x32 training, 64x64 inference), fno (64x64
#                      training, 128x128 inference; scripts/demo/darcy_fno.toml), vit (32x32
#                      training on 4x4 patches, 64x64 inference; scripts/demo/darcy_vit.toml) or
#                      transolver (point clouds on a torus, learning a neighbourhood mean
#                      of a field; new clouds at inference; scripts/demo/points_transolver.toml)
#                      or pointconv (the same with point convolutions; points_pointconv.toml)
#   TESSERA_DEMO_SKIP_SETUP=1  use the binaries in TESSERA_BUILD_DIR (default build/) as they are
# Extra arguments go to tessera-train (e.g. --train.steps=400); the demo reads the metrics
# and checkpoints where its config puts them, so train.metrics_csv and train.checkpoint_dir
# stay as they are.
set -euo pipefail
for arg in "$@"; do
  case "$arg" in
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    --train.metrics_csv* | --train.checkpoint_dir*)
      echo "demo: $arg: the demo reads metrics.csv and checkpoints/ in TESSERA_DEMO_OUT; set that instead" >&2
      exit 2
      ;;
  esac
done
ranks=${TESSERA_DEMO_RANKS:-4}
[[ $ranks =~ ^[1-9][0-9]*$ ]] || { echo "demo: TESSERA_DEMO_RANKS=$ranks is not a rank count >= 1" >&2; exit 2; }
model=${TESSERA_DEMO_MODEL:-unet}
case "$model" in
  unet) train_n=32 train_samples=128 test_n=64 ;;
  fno) train_n=64 train_samples=256 test_n=128 ;;
  vit) train_n=32 train_samples=128 test_n=64 ;;
  transolver | pointconv) points=2048 train_samples=96 ;;
  *) echo "demo: TESSERA_DEMO_MODEL=$model is not unet, fno, vit, transolver or pointconv" >&2; exit 2 ;;
esac
caller=$PWD
cd "$(dirname "$0")/.."
root=$(pwd)
build=${TESSERA_BUILD_DIR:-build}
out=${TESSERA_DEMO_OUT:-demo-out}
# A folder the caller names is taken from where they called from; the default is the repo's.
if [[ $out != /* ]]; then
  if [ -n "${TESSERA_DEMO_OUT:-}" ]; then out=$caller/$out; else out=$root/$out; fi
fi
# The demo deletes and overwrites its outputs in $out (checkpoints/, metrics.csv, the
# datasets...), so it writes only where that loses nothing: a new or empty folder, or one
# holding its marker (which a folder from before the marker lacks: refused too, to be safe).
# Checked before the set-up, so a bad folder is told at once, and before anything is written.
marker=.tessera-demo
if [ -e "$out" ] && [ ! -d "$out" ]; then
  echo "demo: TESSERA_DEMO_OUT=$out is a file, not a folder: choose an empty or new folder" >&2
  exit 2
fi
if [ -d "$out" ] && [ ! -f "$out/$marker" ]; then
  contents=$(ls -A -- "$out" 2>/dev/null) ||
    { echo "demo: TESSERA_DEMO_OUT=$out cannot be read: choose an empty or new folder" >&2; exit 2; }
  [ -z "$contents" ] || {
    echo "demo: TESSERA_DEMO_OUT=$out holds files the demo did not make: choose an empty or new folder" \
      "(a demo folder from before its $marker marker: delete it first)" >&2
    exit 2
  }
fi
[ "${TESSERA_DEMO_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
for app in tessera-prep tessera-train tessera-infer; do
  # Without the set-up step nothing builds them: say where they were looked for, not cd's error.
  [ -x "$build/apps/$app" ] || {
    # A relative build folder is the repository's (not the caller's): name where it looked.
    where=$build
    [[ $where == /* ]] || where=$root/$build
    echo "demo: TESSERA_BUILD_DIR = '$where' holds no apps/$app: build it with" \
      "TESSERA_BUILD_DIR=$build scripts/setup.sh, or leave out TESSERA_DEMO_SKIP_SETUP=1 so the demo builds it" >&2
    exit 2
  }
done
source scripts/mpi-env.sh
# One thread per rank: the ranks share the cores (more ranks than cores on a laptop).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
bin=$(cd "$build/apps" && pwd)
{ mkdir -p -- "$out" && echo "made by scripts/demo.sh, which may replace the files here" >"$out/$marker"; } 2>/dev/null ||
  { echo "demo: cannot create TESSERA_DEMO_OUT=$out or write in it: choose an empty or new folder" >&2; exit 2; }
out=$(cd "$out" && pwd)
run() { "${TESSERA_MPIRUN[@]}" -np "$ranks" "$@"; }
start=$(date +%s)
if [ -n "${points:-}" ]; then
  test_n=$points
  test_h5="$out/points_test.h5"
  train_h5=points_train.h5
  config=$root/scripts/demo/points_$model.toml
  echo "== 1. data: $train_samples point clouds of $points points on a torus, f and its mean over 16 neighbours"
  run "$bin/tessera-prep" generate points --points "$points" --samples "$train_samples" --seed 1 \
    --out "$out/$train_h5" --quiet
  run "$bin/tessera-prep" generate points --points "$points" --samples 8 --seed 2 --out "$test_h5" --quiet
  what="8 new clouds"
else
  test_h5="$out/darcy_test$test_n.h5"
  train_h5=darcy_train.h5
  config=$root/scripts/demo/darcy_$model.toml
  echo "== 1. data: Darcy flow on ${train_n}x$train_n ($train_samples samples) and ${test_n}x$test_n (8 samples) grids"
  run "$bin/tessera-prep" generate darcy --grid "${train_n}x$train_n" --samples "$train_samples" --seed 1 \
    --out "$out/$train_h5" --quiet
  run "$bin/tessera-prep" generate darcy --grid "${test_n}x$test_n" --samples 8 --seed 2 --out "$test_h5" --quiet
  what="the ${test_n}x$test_n grids (4x the cells of training)"
fi

echo "== 2. training a model of type $model on $ranks ranks"
rm -rf "$out/checkpoints" "$out/metrics.csv"  # a previous run's would be read as this one's
(cd "$out" && run "$bin/tessera-train" "$config" "$@") | tee "$out/train.log"
t_train=$(($(date +%s) - start))

echo "== 3. inference on $what"
ckpt=$(ls "$out"/checkpoints/ckpt_*.h5 | sort | tail -1)
run "$bin/tessera-infer" --checkpoint "$ckpt" --input "$test_h5" \
  --output "$out/prediction$test_n.h5" | tee "$out/infer.log"

first=$(awk -F, 'NR > 1 && $6 != "" { print $6; exit }' "$out/metrics.csv")
last=$(awk -F, 'NR > 1 && $6 != "" { v = $6 } END { print v }' "$out/metrics.csv")
echo "== 4. pictures"
pictures=0
if python3 "$root/scripts/plot.py" --check 2>/dev/null; then
  python3 "$root/scripts/plot.py" fields "$out/fields.png" --input "$test_h5" \
    --prediction "$out/prediction$test_n.h5"
  python3 "$root/scripts/plot.py" training "$out/training.png" "$out/metrics.csv"
  pictures=1
else
  echo "demo: no pictures: scripts/plot.py needs matplotlib, h5py and numpy (scripts/setup.sh)"
fi

echo
echo "demo: validation relative L2 error $first (step $(awk -F, 'NR > 1 && $6 != "" { print $1; exit }' "$out/metrics.csv")) -> $last (last step), in $t_train s up to the end of training"
echo "demo: outputs in $out"
echo "  $train_h5, $(basename "$test_h5")   the generated datasets (tessera-prep inspect FILE)"
echo "  train.log, metrics.csv             progress and per-step metrics"
echo "  checkpoints/                       HDF5 checkpoints (tessera-train ... --resume continues)"
echo "  prediction$test_n.h5, infer.log        the prediction on $what and its error"
[ $pictures = 0 ] ||
  echo "  fields.png, training.png           the prediction beside the truth; loss curves"
