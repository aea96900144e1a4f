#!/usr/bin/env bash
# scripts/bench.sh CASE [--key=value ...]: runs tessera-bench CASE at each rank count
# the case needs, prints one merged table with the goals, writes bench-CASE.json.
# TESSERA_BENCH_RANKS="2 4" overrides the rank counts; TESSERA_BUILD_DIR (default build/)
# holds the binaries. The scaling case also runs the capacity search of each model
# (TESSERA_BENCH_MODELS, default "unet fno transolver vit") at each rank count
# (scripts/bench_capacity.sh; TESSERA_CAPACITY=0 leaves it out) and draws scaling.png
# (scripts/plot.py, where matplotlib exists).
set -euo pipefail
caller=$PWD  # bench-CASE.json (and scaling.png) go where the script is called from
cd "$(dirname "$0")/.."
usage="usage: scripts/bench.sh CASE [--key=value ...]   (CASE --help lists its options)"
[ $# -ge 1 ] || { echo "$usage"; exit 2; }
case_name=$1
shift
build=${TESSERA_BUILD_DIR:-build}
if [ ! -x "$build/apps/tessera-bench" ]; then
  # A build dir named by the caller and missing is a mistake, not a cue to build one.
  [ -z "${TESSERA_BUILD_DIR:-}" ] ||
    { echo "bench: TESSERA_BUILD_DIR = '$build' holds no apps/tessera-bench" >&2; exit 2; }
  scripts/setup.sh
fi
source scripts/mpi-env.sh
bench=$build/apps/tessera-bench
if [ "$case_name" = --help ] || [ "$case_name" = -h ]; then
  echo "$usage"
  "$bench" --help
  exit 0
fi
ranks=${TESSERA_BENCH_RANKS:-$($bench ranks "$case_name")}
seen=" "
for n in $ranks; do  # checked before the first run, not after the last
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench: rank count '$n' is not a whole number >= 1" >&2; exit 2; }
  [[ $seen == *" $n "* ]] && { echo "bench: rank count $n is given twice" >&2; exit 2; }
  seen+="$n "
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
parts=()
for n in $ranks; do
  echo "== $case_name at $n rank(s)"
  "${TESSERA_MPIRUN[@]}" -np "$n" "$bench" "$case_name" "$@" --out="$tmp/part-$n.json"
  parts+=("$tmp/part-$n.json")
done
if [ "$case_name" = scaling ] && [ "${TESSERA_CAPACITY:-1}" = 1 ]; then
  for model in ${TESSERA_BENCH_MODELS:-unet fno transolver vit}; do
    start=4
    for n in $ranks; do
      echo "== capacity of the $model at $n rank(s)"
      # The search starts from the rows per rank of the previous rank count (weak scaling).
      part=$tmp/capacity-$model-$n.json
      TESSERA_CAPACITY_START=$start scripts/bench_capacity.sh "$n" "$part" "$@" --models="$model"
      parts+=("$part")
      start=$(grep -o '"rows": [0-9]*' "$part" | grep -o '[0-9]*$')
    done
  done
fi
echo
$bench merge "$case_name" "$caller/bench-$case_name.json" "${parts[@]}"
if [ "$case_name" = scaling ]; then
  if python3 scripts/plot.py --check 2>/dev/null; then
    python3 scripts/plot.py scaling "$caller/scaling.png" "$caller/bench-$case_name.json"
  else
    echo "bench: no scaling.png: scripts/plot.py needs matplotlib, h5py and numpy"
  fi
fi
