#!/usr/bin/env bash
# The fault-injection suite: one case per run, at 3 ranks. Each case must end with a
# non-zero exit within a bound (never a hang), print its error once (one line
# "tessera-APP: error ..."), and leave the files on disk intact.
# Faults come from TESSERA_FAULT_INJECT=SITE:RANK[:NTH] (runtime/comm/fault_inject.hpp):
# an HDF5 write that reports ENOSPC on one rank, an exception inside a training step on
# one rank, a rank that kills itself with SIGKILL.
# Usage: faults.sh CASE WORKDIR BIN_DIR LAUNCH... (LAUNCH: the mpirun command without -np)
set -u
case_name=$1 work=$2 bin=$3
shift 3
launch=("$@")
mkdir -p "$work"
dir=$(mktemp -d "$work/$case_name.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
# A rank that fails alone waits this long for the others before it ends the job.
export TESSERA_FAILURE_TIMEOUT=3

fail() { echo "faults $case_name: FAILED: $*"; exit 1; }
run() {  # run NRANKS PROGRAM ARGS...: output in $out, status in $rc, seconds in $secs
  local n=$1 prog=$2
  shift 2
  local t0=$SECONDS
  out=$(timeout 90 "${launch[@]}" -np "$n" "$bin/$prog" "$@" 2>&1)
  rc=$?
  secs=$((SECONDS - t0))
}
expect_ok() {
  run "$@"
  [ "$rc" -eq 0 ] || { echo "$out"; fail "$* exited $rc"; }
}
# expect_fail BOUND PATTERN NRANKS PROGRAM ARGS...: non-zero exit within BOUND seconds,
# exactly one error line, matching PATTERN.
expect_fail() {
  local bound=$1 pattern=$2
  shift 2
  run "$@"
  echo "$out"
  [ "$rc" -eq 124 ] && fail "hung (killed by the test's timeout)"
  [ "$rc" -eq 0 ] && fail "exited 0"
  [ "$secs" -le "$bound" ] || fail "took $secs s, more than $bound s"
  local lines
  lines=$(echo "$out" | grep -cE "^tessera-[a-z]+: error")
  [ "$lines" -eq 1 ] || fail "$lines error lines, expected one"
  echo "$out" | grep -E "^tessera-[a-z]+: error" | grep -qE -- "$pattern" ||
    fail "the error does not match '$pattern'"
  echo "$out" | grep -q "HDF5-DIAG" && fail "an HDF5 error stack leaked to the output"
  echo "ok ($secs s, exit $rc): $pattern"
}
# Checksums of files, to show they are untouched.
sums() { sha256sum "$@" 2>/dev/null; }

data() {
  expect_ok 1 tessera-prep generate darcy --grid 24x24 --samples 6 --seed 3 --out train.h5 --quiet
  cat >cfg.toml <<'EOF'
[data]
path = "train.h5"
inputs = ["permeability"]
targets = ["pressure"]
[model]
width = 4
depth = 2
groups = 2
dtype = "float64"
[optim]
lr = 0.005
[train]
steps = 2
batch_size = 2
validation_split = 0.25
checkpoint_interval = 2
checkpoint_dir = "ck"
metrics_csv = "metrics.csv"
EOF
}

case "$case_name" in
  step_error_rank2)  # an exception inside the forward pass on rank 2 only
    data
    TESSERA_FAULT_INJECT=step.forward:2:2 expect_fail 30 \
      "\(rank 2 of 3\): injected fault at step.forward" 3 tessera-train cfg.toml
    ;;
  step_error_rank0)  # after backward, before the gradient all-reduce finishes, rank 0 only
    data
    TESSERA_FAULT_INJECT=step.backward:0 expect_fail 30 \
      "\(rank 0 of 3\): injected fault at step.backward" 3 tessera-train cfg.toml
    ;;
  update_error_rank2)  # after the optimizer step (the others go on to the next collective)
    data
    TESSERA_FAULT_INJECT=step.update:2 expect_fail 30 \
      "\(rank 2 of 3\): injected fault at step.update" 3 tessera-train cfg.toml
    ;;
  batch_error_rank0)  # reading the batch
    data
    TESSERA_FAULT_INJECT=step.batch:0:2 expect_fail 30 \
      "\(rank 0 of 3\): injected fault at step.batch" 3 tessera-train cfg.toml
    ;;
  sigkill_rank1)  # a rank dies (SIGKILL) in the middle of a step
    data
    TESSERA_FAULT_INJECT=step.sigkill:1:2 run 3 tessera-train cfg.toml
    echo "$out"
    [ "$rc" -eq 124 ] && fail "hung after a rank was killed"
    [ "$rc" -eq 0 ] && fail "exited 0 after a rank was killed"
    [ "$secs" -le 30 ] || fail "took $secs s"
    echo "ok ($secs s, exit $rc): the job ended after a rank was killed"
    ;;
  metrics_rank0)  # train.metrics_csv unwritable (only rank 0 writes it), found before step 1
    data
    expect_fail 30 "train.metrics_csv = 'train.h5' does not take files" 3 tessera-train \
      cfg.toml --train.metrics_csv=train.h5/m.csv
    [ -e ck ] && [ -n "$(ls ck)" ] && fail "checkpoints were written"
    ;;
  checkpoint_dir_unwritable)  # found before step 1, not at the first checkpoint
    data
    expect_fail 30 "train.checkpoint_dir = 'train.h5/ck' does not take files" 3 tessera-train \
      cfg.toml --train.checkpoint_dir=train.h5/ck
    echo "$out" | grep -q "^step 1/" && fail "training started"
    ;;
  checkpoint_enospc)  # the second checkpoint's write fails on rank 0 (ENOSPC in HDF5)
    data
    expect_ok 3 tessera-train cfg.toml
    before=$(sums ck/ckpt_00000002.h5 metrics.csv)
    TESSERA_FAULT_INJECT=h5write:0:1 expect_fail 30 "No space left on device" 3 tessera-train \
      cfg.toml --train.steps=4 --resume
    [ "$(sums ck/ckpt_00000002.h5)" = "$(echo "$before" | head -1)" ] ||
      fail "the previous checkpoint changed"
    [ -f ck/ckpt_00000004.h5 ] && fail "a failed checkpoint was renamed into place"
    expect_ok 3 tessera-train cfg.toml --resume  # it still loads (step 2 of 2: nothing to do)
    echo "$out" | grep -q "resume: ck/ckpt_00000002.h5 (step 2)" || fail "the checkpoint is unreadable"
    ;;
  prep_enospc)  # tessera-prep generate onto a full disk, rank 1 fails its write
    expect_ok 1 tessera-prep generate darcy --grid 24x24 --samples 2 --seed 1 --out keep.h5 --quiet
    TESSERA_FAULT_INJECT=h5write:1:2 expect_fail 30 "No space left on device" 3 tessera-prep \
      generate darcy --grid 24x24 --samples 4 --seed 3 --out out.h5 --quiet
    [ -e out.h5 ] && fail "a partial out.h5 was left under its final name"
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "faults $case_name: passed"
