#!/usr/bin/env bash
# scripts/bench_capacity.sh N PART.json [--key=value ...]: the capacity search of the
# scaling case at N ranks for one model (--models=NAME): the largest grid whose training
# step fits the per-rank memory limit TESSERA_CAPACITY_LIMIT_MB (default 24; each try runs
# with TESSERA_MEMORY_LIMIT_MB set to it). A try is one launch of `tessera-bench scaling
# --which=capacity --rows=M` (grid M * N * 8 rows); a try past the limit fails on the rank
# that passes it and ends the job. Grows M from TESSERA_CAPACITY_START (default 4) until a
# try fails, then bisects to the exact M. Writes the row of the largest grid that fits to
# PART.json.
set -euo pipefail
cd "$(dirname "$0")/.."
n=$1 part=$2
shift 2
source scripts/mpi-env.sh
bench=${TESSERA_BUILD_DIR:-build}/apps/tessera-bench
limit=${TESSERA_CAPACITY_LIMIT_MB:-24}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
best=0
tries=0

# fits M: 0 when the step fits (and keeps its row), 1 when it passes the memory limit;
# any other failure ends the search with the try's output.
fits() {
  local m=$1
  shift
  tries=$((tries + 1))
  if TESSERA_MEMORY_LIMIT_MB=$limit TESSERA_FAILURE_TIMEOUT=${TESSERA_FAILURE_TIMEOUT:-3} \
    OMP_NUM_THREADS=1 "${TESSERA_MPIRUN[@]}" -np "$n" "$bench" \
    scaling "$@" --which=capacity --rows="$m" --out="$tmp/try.json" >"$tmp/log" 2>&1; then
    if [ "$m" -gt "$best" ]; then best=$m; cp "$tmp/try.json" "$tmp/best.json"; fi
    echo "  rows $m: fits"
    return 0
  fi
  if grep -q "memory limit:" "$tmp/log"; then
    echo "  rows $m: $(grep -m1 -o 'memory limit:.*' "$tmp/log")"
    return 1
  fi
  cat "$tmp/log" >&2
  echo "bench_capacity: a try at $n ranks, rows $m failed for another reason" >&2
  exit 1
}

m=${TESSERA_CAPACITY_START:-4}
if fits "$m" "$@"; then
  lo=$m
  hi=$((2 * m))
  while fits "$hi" "$@"; do lo=$hi; hi=$((2 * hi)); done
else
  hi=$m
  lo=$((m / 2))
  while [ "$lo" -ge 1 ] && ! fits "$lo" "$@"; do hi=$lo; lo=$((lo / 2)); done
  [ "$lo" -ge 1 ] || { echo "bench_capacity: nothing fits $limit MiB per rank at $n ranks" >&2; exit 1; }
fi
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if fits "$mid" "$@"; then lo=$mid; else hi=$mid; fi
done
cp "$tmp/best.json" "$part"
echo "capacity at $n rank(s), $limit MiB per rank: rows $best fit, rows $hi do not ($tries tries)"
