#!/usr/bin/env bash
# tessera-bench's errors at 3 ranks: one error line, a non-zero exit, no hang, for errors
# every rank makes (an unknown case or option, a size out of range) and for one that only
# rank 0 meets (an unwritable --out). Usage: bench_cli.sh BENCH LAUNCH...
set -u
bench=$1
shift
launch=("$@")
fail=0
expect_error() {  # PATTERN ARGS...
  local pattern=$1
  shift
  out=$(TESSERA_FAILURE_TIMEOUT=3 timeout 60 "${launch[@]}" -np 3 "$bench" "$@" 2>&1)
  rc=$?
  lines=$(echo "$out" | grep -c "^tessera-bench: error")
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$lines" -ne 1 ] ||
    ! echo "$out" | grep "^tessera-bench: error" | grep -qF -- "$pattern"; then
    echo "$out"
    echo "bench_cli: '$*' exited $rc with $lines error lines; expected one matching: $pattern"
    fail=1
  else
    echo "ok: $*: $pattern"
  fi
}
expect_error "unknown benchmark case 'nosuch'" nosuch
expect_error "unknown option '--bogus'" fft --bogus=1
expect_error "option --n3d 0: must lie in [1, 1048576]" fft --n3d=0 --which=3d
expect_error "points: --k=10 and --ball=2 must not exceed --points=5" points --points=5 --k=10 --ball=2
expect_error "cannot write" fft --which=fno --nfno=16 --width=2 --modes=2 --reps=1 \
  --out=/nonexistent/dir/part.json
# sizes and counts: integers in range (a zero batch or repetition count crashed, fractions
# were cut, a grid of one extent read past its end)
expect_error "option --reps 0: must lie in [1, 1000000]" scaling --models=fno --which=strong \
  --strong=8x8 --fno-width=2 --fno-layers=1 --fno-modes=2 --warmup=0 --reps=0
expect_error "option --batch 0: must lie in [1," scaling --models=fno --which=strong \
  --strong=8x8 --fno-width=2 --fno-layers=1 --fno-modes=2 --warmup=0 --reps=1 --batch=0
expect_error "option --strong=8: a grid HxW of two extents >= 1" scaling --models=fno \
  --which=strong --strong=8 --fno-width=2 --fno-layers=1 --fno-modes=2 --reps=1
expect_error "option --nfno 8.9 is not an integer" fft --which=fno --nfno=8.9 --width=2 \
  --modes=2 --reps=1
expect_error "option --na_kernel 0: must lie in [1," attention --which=neighbourhood \
  --na_kernel=0 --reps=1
expect_error "option --mib -1: " redistribute --mib=-1 --reps=1
expect_error "option --dtype float64: f32 or f64" conv-kernel --hw=4 --d=2 --reps=1 --dtype=float64
expect_error "--vit-dim = 6 is not divisible by the benchmark vit's 4 attention heads" scaling \
  --models=vit --vit-dim=6 --which=strong --strong=8x8 --reps=1
# a tensor that 3 ranks do not split evenly: the raw all-to-all baseline's counts agree
TESSERA_FAILURE_TIMEOUT=3 timeout 60 "${launch[@]}" -np 3 "$bench" redistribute --mib=1 --reps=1 \
  >/dev/null 2>&1 || { echo "bench_cli: redistribute --mib=1 at 3 ranks failed"; fail=1; }
# merge (serial): parts of another case, no JSON, twice, or lacking what the goals read
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
merge_error() {  # PATTERN ARGS...
  local pattern=$1
  shift
  out=$("$bench" merge "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ] || ! echo "$out" | grep -qF -- "$pattern"; then
    echo "$out"
    echo "bench_cli: merge $* exited $rc; expected: $pattern"
    fail=1
  else
    echo "ok: merge: $pattern"
  fi
}
"${launch[@]}" -np 2 "$bench" halo --n=16 --reps=1 --out="$dir/halo-2.json" >/dev/null 2>&1 ||
  { echo "bench_cli: the halo part"; fail=1; }
echo '{"case":"halo","rows":[{"ranks":4}]}' >"$dir/halo-4.json"
: >"$dir/empty.json"
merge_error "holds case 'halo', not 'conv'" conv "$dir/out.json" "$dir/halo-2.json"
merge_error "empty.json is no JSON part" halo "$dir/out.json" "$dir/halo-2.json" "$dir/empty.json"
merge_error "is given twice" halo "$dir/out.json" "$dir/halo-2.json" "$dir/./halo-2.json"
merge_error "lacks a value the halo goals read" halo "$dir/out.json" "$dir/halo-2.json" \
  "$dir/halo-4.json"
echo '{"case":"halo","rows":[]}' >"$dir/none.json"
merge_error "the parts hold no rows: no goal can be judged" halo "$dir/out.json" "$dir/none.json"
cp "$dir/halo-2.json" "$dir/copy.json"
merge_error "copy.json repeats a row of an earlier part" halo "$dir/out.json" "$dir/halo-2.json" \
  "$dir/copy.json"
[ -e "$dir/out.json" ] && { echo "bench_cli: a refused merge wrote its output"; fail=1; }
merge_error "the output $dir/halo-2.json is also a part" halo "$dir/halo-2.json" "$dir/halo-2.json"
exit $fail
