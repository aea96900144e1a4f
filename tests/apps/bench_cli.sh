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
expect_error "cannot write" fft --which=fno --nfno=16 --width=2 --modes=2 --reps=1 \
  --out=/nonexistent/dir/part.json
exit $fail
