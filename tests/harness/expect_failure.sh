#!/usr/bin/env bash
# Runs a deliberately failing MPI test (args: the launch command) and passes only if it
# failed on every rank: non-zero exit, not a timeout, the failing rank named, the
# failed rank's own output shown, and no hang.
set -u
out=$(timeout 100 "$@" 2>&1)
rc=$?
echo "$out"
fail() { echo "expect_failure: $*"; exit 1; }
[ "$rc" -eq 124 ] && fail "the run hung (timeout)"
[ "$rc" -eq 0 ] && fail "the run passed but must fail"
echo "$out" | grep -q "failed on rank(s) 2" || fail "failing rank not named on rank 0's report"
echo "$out" | grep -q "output of failed rank 2" || fail "failed rank's output not shown"
echo "$out" | grep -q "later test cases still run in lockstep" && fail "a passing case was reported failed"
echo "$out" | grep -q "MPI test run on 3 rank(s): FAILED" || fail "no collective verdict"
echo "expect_failure: failed on every rank as it must (exit $rc)"
