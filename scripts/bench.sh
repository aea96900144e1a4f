#!/usr/bin/env bash
# scripts/bench.sh CASE [--key=value ...]: runs tessera-bench CASE at each rank count
# the case needs, prints one merged table with the goals, writes bench-CASE.json.
# TESSERA_BENCH_RANKS="2 4" overrides the rank counts.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/bench.sh CASE [--key=value ...]"; exit 2; }
case_name=$1
shift
[ -x build/apps/tessera-bench ] || scripts/setup.sh
source scripts/mpi-env.sh
bench=build/apps/tessera-bench
ranks=${TESSERA_BENCH_RANKS:-$($bench ranks "$case_name")}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
parts=()
for n in $ranks; do
  echo "== $case_name at $n rank(s)"
  "${TESSERA_MPIRUN[@]}" -np "$n" "$bench" "$case_name" "$@" --out="$tmp/part-$n.json"
  parts+=("$tmp/part-$n.json")
done
echo
$bench merge "$case_name" "bench-$case_name.json" "${parts[@]}"
