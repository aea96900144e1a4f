#!/usr/bin/env bash
# Messages cut in pieces, end to end: every model trained 3 steps at 3 ranks under
# TESSERA_MPI_COUNT_LIMIT=1 (every point-to-point message, all-to-all-v and all-reduce
# cut into pieces of one element, runtime/comm/message_pieces) gives the losses of the run
# without it, to the last digit printed (17 significant digits, float64).
# Usage: count_limit.sh WORKDIR BIN_DIR LAUNCH...
set -u
work=$1 bin=$2
shift 2
launch=("$@")
# shellcheck source=tests/apps/workdir.sh
source "$(dirname "$0")/workdir.sh"
enter_workdir "$work" "run"
fail() { echo "count_limit: FAILED: $*"; exit 1; }
mpi() { local k=$1; shift; timeout 240 "${launch[@]}" -np "$k" "$@"; }

mpi 1 "$bin/tessera-prep" generate darcy --grid 32x32 --samples 6 --seed 5 --out d.h5 --quiet ||
  fail "generate darcy"
mpi 2 "$bin/tessera-prep" generate points --points 400 --samples 6 --smooth 8 --out p.h5 \
  --quiet || fail "generate points"
common='[optim]
lr = 0.003
[train]
steps = 3
batch_size = 2
validation_split = 0.34
checkpoint_interval = 0
log_interval = 3'
printf '[data]\npath = "d.h5"\ninputs = ["permeability"]\ntargets = ["pressure"]\n[model]\ndtype = "float64"\n%s\n' \
  "$common" >grid.toml
printf '[data]\npath = "p.h5"\ninputs = ["coords", "f"]\ntargets = ["f_smooth"]\n[model]\ndtype = "float64"\n%s\n' \
  "$common" >points.toml
vit="--model.type=vit --model.patch=4 --model.dim=8 --model.depth=1 --model.heads=2"
cases=(
  "unet|grid|--model.width=4 --model.depth=2 --model.groups=2"
  "fno|grid|--model.type=fno --model.width=8 --model.modes=6 --model.layers=2 --model.weights=mode_sharded"
  "vit-ring|grid|$vit --model.attention=ring"
  "vit-all-to-all|grid|$vit --model.attention=all_to_all"
  "vit-neighbourhood|grid|$vit --model.attention=neighbourhood --model.window=3"
  "transolver|points|--model.type=transolver --model.width=8 --model.layers=1 --model.heads=2 --model.slices=4"
  "pointconv|points|--model.type=pointconv --model.width=8"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name cfg opts <<<"$c"
  for lim in none 1; do
    env_lim=() pass=()
    [ "$lim" = 1 ] && env_lim=(env TESSERA_MPI_COUNT_LIMIT=1) pass=(-x TESSERA_MPI_COUNT_LIMIT)
    # shellcheck disable=SC2086
    "${env_lim[@]}" timeout 240 "${launch[@]}" -np 3 "${pass[@]}" \
      "$bin/tessera-train" "$cfg.toml" $opts --train.checkpoint_dir="ck-$name-$lim" \
      --train.metrics_csv="m-$name-$lim.csv" >"$name-$lim.log" 2>&1 ||
      { cat "$name-$lim.log"; fail "$name (limit $lim)"; }
  done
  cut -d, -f1,4,5,6,7 "m-$name-none.csv" >a.txt
  cut -d, -f1,4,5,6,7 "m-$name-1.csv" >b.txt
  [ "$(wc -l <a.txt)" -ge 4 ] || fail "$name: no losses in its metrics"
  cmp -s a.txt b.txt || { paste -d'|' a.txt b.txt; fail "$name: the losses differ in pieces"; }
  echo "ok: $name, the same losses with every message in one-element pieces"
done
echo "count_limit: passed"
