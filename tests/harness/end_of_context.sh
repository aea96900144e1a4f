#!/usr/bin/env bash
# Runs tests/harness/end_of_context.cpp in its modes (args: the launch command and the
# program): a rank left by an exception ends the job within the failure deadline with the
# error named; every rank failing alike ends at once; success is silent.
set -u
fail() { echo "end_of_context: $*"; exit 1; }
export TESSERA_FAILURE_TIMEOUT=2
start=$(date +%s)
out=$(timeout 60 "$@" one 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 124 ] && fail "a rank that failed alone hung the job (timeout)"
[ "$rc" -eq 0 ] && fail "the job passed but must fail"
echo "$out" | grep -q "error (rank 1 of 3): an exception left the scope of tessera::Context on this rank (injected failure on rank 1)" ||
  fail "the error was not named"
echo "$out" | grep -q "did not join within 2 s (TESSERA_FAILURE_TIMEOUT)" || fail "no reason given"
echo "one rank: ended after $(($(date +%s) - start)) s (exit $rc)"

out=$(timeout 60 "$@" preinit 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 124 ] && fail "MPI initialized before the Context: a rank that failed alone hung the job"
echo "$out" | grep -q "error (rank 1 of 3): an exception left the scope of tessera::Context" ||
  fail "MPI initialized before the Context: the error was not named"

start=$(date +%s)
out=$(timeout 60 "$@" all 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "every rank failing alike: exit $rc, not 1"
[ "$(echo "$out" | grep -c '^caught: injected failure')" -eq 3 ] || fail "not every rank's catch ran"
echo "$out" | grep -q "did not join" && fail "a watch fired though every rank arrived"
[ $(($(date +%s) - start)) -lt 30 ] || fail "every rank failing alike took too long"

# The Context's constructor fails on one rank: the same bound, the error named.
out=$(timeout 60 "$@" start_one 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 124 ] && fail "a Context that failed to start on one rank hung the job"
[ "$rc" -eq 0 ] && fail "a Context that failed to start on one rank: the job passed"
echo "$out" | grep -q "error (rank 1 of 3): tessera::Context could not start on this rank (environment variable TESSERA_DEVICE='abc' is not an integer)" ||
  fail "a Context that failed to start on one rank: the error was not named"

# ... on every rank: each releases MPI (no rank leaves without MPI_Finalize) and throws.
out=$(timeout 60 "$@" start_all 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "every Context failing to start: exit $rc, not 1"
[ "$(echo "$out" | grep -c "^caught: environment variable TESSERA_DEVICE='abc'")" -eq 3 ] ||
  fail "every Context failing to start: not every rank's catch ran"
echo "$out" | grep -qi "finalize\|did not join" && fail "every Context failing to start: MPI was left initialized or a watch fired"

out=$(timeout 60 "$@" none 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "the succeeding program: exit $rc"
[ -z "$out" ] || fail "the succeeding program printed something"
echo "end_of_context: ok"
