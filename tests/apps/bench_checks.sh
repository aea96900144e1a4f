#!/usr/bin/env bash
# The attention and conv cases check what they time: on small problems, the local attention
# kernel at 1 rank, the sequence-sharded algorithms and neighbourhood attention at 3 ranks
# (uneven blocks), the sharded conv layers at 3 ranks (and 1, against bare oneDNN), every row
# must say correct and the merged goal "every result checked correct" must be met.
# Usage: bench_checks.sh BENCH LAUNCH...
set -u
bench=$1
shift
launch=("$@")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
run() {  # RANKS NAME ARGS...
  local ranks=$1 name=$2
  shift 2
  if ! timeout 60 "${launch[@]}" -np "$ranks" "$bench" "$@" --out="$dir/$name.json" \
    >"$dir/$name.log" 2>&1; then
    cat "$dir/$name.log"
    echo "bench_checks: $name failed"
    fail=1
  fi
}
run 1 att1 attention --which=local --seq=67 --heads=2 --dim=8 --gemm=64 --local_reps=1
run 3 att3 attention --which=sharded,neighbourhood --ring_seq=97 --heads=2 --dim=8 \
  --na_grid=13 --na_channels=4 --na_kernel=3 --reps=1
run 1 conv1 conv --n2d=19 --c2d=3 --n3d=7 --c3d=2 --threads=1 --reps=1
run 3 conv3 conv --n2d=19 --c2d=3 --n3d=7 --c3d=2 --threads=1 --reps=1
for c in attention:att conv:conv; do
  case=${c%%:*} stem=${c##*:}
  out=$("$bench" merge "$case" "$dir/$stem.json" "$dir/${stem}1.json" "$dir/${stem}3.json" 2>&1)
  rows=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"]; print(len(r), sum(1 for x in r if x.get("correct") is True))' "$dir/$stem.json" 2>&1)
  if ! echo "$out" | grep -qE "every result checked correct +1 +== +1 +true" ||
    [ "$(echo "$rows" | cut -d' ' -f1)" != "$(echo "$rows" | cut -d' ' -f2)" ] ||
    [ "$(echo "$rows" | cut -d' ' -f1)" -lt 4 ]; then
    echo "$out"
    echo "bench_checks: $case: rows, correct rows = $rows; expected all correct"
    fail=1
  else
    echo "ok: $case: $rows rows, all correct"
  fi
done
exit $fail
