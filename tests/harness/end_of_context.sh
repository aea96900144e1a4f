#!/usr/bin/env bash
# Runs tests/harness/end_of_context.cpp in its modes (args: the launch command and the
# program): a rank left by an exception ends the job within the failure deadline with the
# error named; every rank failing alike ends at once; success is silent.
set -u
fail() { echo "end_of_context: $*"; exit 1; }
export TESSERA_FAILURE_TIMEOUT=2
launch=("$@")
# Rank 1 fails alone in MODE: the job must end (not hang, not pass) with the error NAMED.
fails_alone() {
  local mode=$1 named=$2 what=$3
  out=$(timeout 60 "${launch[@]}" "$mode" 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" -eq 124 ] && fail "$what: a rank that failed alone hung the job (timeout)"
  [ "$rc" -eq 0 ] && fail "$what: the job passed but must fail"
  echo "$out" | grep -q -- "$named" || fail "$what: the error was not named"
}
start=$(date +%s)
fails_alone one "error (rank 1 of 3): an exception left the scope of tessera::Context on this rank (injected failure on rank 1)" \
  "an exception"
echo "$out" | grep -q "did not join within 2 s (TESSERA_FAILURE_TIMEOUT)" || fail "no reason given"
echo "one rank: ended after $(($(date +%s) - start)) s (exit $rc)"
fails_alone preinit "error (rank 1 of 3): an exception left the scope of tessera::Context" \
  "MPI initialized before the Context"

start=$(date +%s)
out=$(timeout 60 "${launch[@]}" all 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "every rank failing alike: exit $rc, not 1"
[ "$(echo "$out" | grep -c '^caught: injected failure')" -eq 3 ] || fail "not every rank's catch ran"
echo "$out" | grep -q "did not join" && fail "a watch fired though every rank arrived"
[ $(($(date +%s) - start)) -lt 30 ] || fail "every rank failing alike took too long"

# The Context's constructor fails on one rank: the same bound, the error named.
fails_alone start_one "error (rank 1 of 3): tessera::Context could not start on this rank (environment variable TESSERA_DEVICE='abc' is not an integer)" \
  "a Context that failed to start"

# ... on every rank: each releases MPI (no rank leaves without MPI_Finalize) and throws.
out=$(timeout 60 "${launch[@]}" start_all 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "every Context failing to start: exit $rc, not 1"
[ "$(echo "$out" | grep -c "^caught: environment variable TESSERA_DEVICE='abc'")" -eq 3 ] ||
  fail "every Context failing to start: not every rank's catch ran"
echo "$out" | grep -qi "finalize\|did not join" && fail "every Context failing to start: MPI was left initialized or a watch fired"

out=$(timeout 60 "${launch[@]}" none 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || fail "the succeeding program: exit $rc"
[ -z "$out" ] || fail "the succeeding program printed something"
echo "end_of_context: ok"
