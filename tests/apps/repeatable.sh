#!/usr/bin/env bash
# Repeatable by default: the same training twice at one rank count, with shards thin
# enough that halos reach past the next rank (depth 3 on 32x32: 1-2 cells per rank at
# the coarsest level), gives bitwise identical losses and checkpoints.
# Usage: repeatable.sh NRANKS MESH WORKDIR BIN_DIR LAUNCH...
set -u
n=$1 mesh=$2 work=$3 bin=$4
shift 4
launch=("$@")
# shellcheck source=tests/apps/workdir.sh
source "$(dirname "$0")/workdir.sh"
enter_workdir "$work" "np$n"
fail() { echo "repeatable np$n: FAILED: $*"; exit 1; }
mpi() { local k=$1; shift; timeout 240 "${launch[@]}" -np "$k" "$@"; }

mpi 1 "$bin/tessera-prep" generate darcy --grid 32x32 --samples 4 --seed 5 --out d.h5 --quiet ||
  fail "generate"
cat >cfg.toml <<'EOF'
[data]
path = "d.h5"
inputs = ["permeability"]
targets = ["pressure"]
[model]
width = 4
depth = 3
groups = 2
dtype = "float32"
[optim]
lr = 0.01
[train]
steps = 3
batch_size = 2
validation_split = 0.25
log_interval = 3
EOF
for run in a b; do
  mpi "$n" "$bin/tessera-train" cfg.toml --mesh.shape="$mesh" --train.checkpoint_dir="ck-$run" \
    --train.metrics_csv="m-$run.csv" ${TRAIN_EXTRA:-} >"$run.log" 2>&1 || { cat "$run.log"; fail "run $run"; }
done
# Losses bit for bit (printed with 17 digits), then every checkpoint dataset.
cut -d, -f1,4,5,6,7 m-a.csv >la.txt
cut -d, -f1,4,5,6,7 m-b.csv >lb.txt
cmp -s la.txt lb.txt || { paste -d'|' la.txt lb.txt; fail "the losses differ"; }
for f in ck-a/*.h5; do
  g=ck-b/$(basename "$f")
  [ -f "$g" ] || fail "$g missing"
  h5diff -q "$f" "$g" /params /params || fail "parameters differ in $(basename "$f")"
  h5diff -q "$f" "$g" /optimizer /optimizer || fail "optimizer state differs in $(basename "$f")"
done
echo "repeatable np$n ($mesh): losses and checkpoints bitwise equal"
