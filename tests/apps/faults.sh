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
# shellcheck source=tests/apps/workdir.sh
source "$(dirname "$0")/workdir.sh"
enter_workdir "$work" "$case_name"
# A rank that fails alone waits this long for the others before it ends the job.
export TESSERA_FAILURE_TIMEOUT=3

fail() { echo "faults $case_name: FAILED: $*"; exit 1; }
# A job's temporary output (PATH.tmp.HOST.PID) is there.
temp_left() { compgen -G "$1.tmp*" >/dev/null; }
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
  echo "$out" | grep -qiE "segmentation|signal: |core dumped" && fail "a rank crashed"
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

# raw FILE COUNT [NAN_AT]: COUNT float32 values (smooth, non-zero), NaN at index NAN_AT
# (NAN_AT = zero: all zero; big: all times 2e38, finite float32 at the edge of the range;
# zero_last:K: the last K values zero).
raw() {
  python3 -c "
import math, struct, sys
n, bad = int(sys.argv[2]), sys.argv[3]
v = [1.0 + 0.5 * math.sin(0.37 * i) for i in range(n)]
if bad == 'zero': v = [0.0] * n
elif bad == 'big': v = [2e38 * x for x in v]
elif bad.startswith('zero_last:'): v[n - int(bad[10:]):] = [0.0] * int(bad[10:])
elif 0 <= int(bad) < n: v[int(bad)] = float('nan')
open(sys.argv[1], 'wb').write(struct.pack('<%df' % n, *v))" "$1" "$2" "${3:--1}"
}
# field FILE NAME SHAPE [NAN_AT]: adds /fields/NAME of SHAPE (N,C,H,W) to FILE.
field() {
  local file=$1 name=$2 shape=$3 count=1 append=()
  for x in ${shape//,/ }; do count=$((count * x)); done
  local nan_at=-1 values=${4:--1}
  # convert refuses a NaN: h5py writes it into the finished file
  [[ $values =~ ^[0-9]+$ ]] && nan_at=$values values=-1
  raw "$name.raw" "$count" "$values"
  [ -e "$file" ] && append=(--append)
  [ "$count" -eq 0 ] && append+=(--allow-empty)  # a file of no samples, asked for
  expect_ok 1 tessera-prep convert "$name.raw" --shape "$shape" --dtype float32 --out "$file" \
    --name "$name" "${append[@]}" --quiet
  if [ "$nan_at" -ge 0 ]; then
    /usr/bin/python3 -c "
import sys, h5py, numpy as np
d = h5py.File(sys.argv[1], 'r+')['/fields/' + sys.argv[2]]
d[np.unravel_index(int(sys.argv[3]), d.shape)] = float('nan')" "$file" "$name" "$nan_at" ||
      fail "h5py could not write the NaN"
  fi
}
# A trained checkpoint (one step) for the inference cases: ck/ckpt_00000001.h5.
trained() {
  data
  expect_ok 3 tessera-train cfg.toml --train.steps=1
}

case "$case_name" in
  step_error_rank2)  # an exception inside the forward pass on rank 2 only
    data
    TESSERA_FAULT_INJECT=step.forward:2:2 expect_fail 30 \
      "\(rank 2 of 3\): injected fault at step.forward" 3 tessera-train cfg.toml
    ;;
  layer_error_rank1)  # an exception inside a layer's forward on rank 1 (its 7th layer call)
    data
    TESSERA_FAULT_INJECT=layer:1:7 expect_fail 30 \
      "\(rank 1 of 3\): injected fault in layer '.*'" 3 tessera-train cfg.toml
    ;;
  ring_error_rank1)  # an exception on rank 1 while a ring attention K/V block is in flight
    data
    TESSERA_FAULT_INJECT=ring_block:1:2 expect_fail 30 \
      "\(rank 1 of 3\): injected fault in a ring attention block" 3 tessera-train cfg.toml \
      --model.type=vit --model.patch=4 --model.dim=8 --model.depth=1 --model.heads=2 \
      --model.attention=ring --model.dtype=float32
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
    # SIGTERM (scancel, a time limit) reaching rank 0: the job ends with a word, not mute.
    TESSERA_FAULT_INJECT=step.sigterm:0:2 run 3 tessera-train cfg.toml --train.checkpoint_dir=ck-t \
      --train.metrics_csv=m-t.csv
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "$out"; fail "exit $rc after SIGTERM"; }
    echo "$out" | grep -q "^tessera-train: stopped by SIGTERM " || { echo "$out"; fail "no word of SIGTERM"; }
    ;;
  metrics_rank0)  # train.metrics_csv unwritable (only rank 0 writes it), found before step 1
    data
    expect_fail 30 "train.metrics_csv = 'train.h5' does not take files" 3 tessera-train \
      cfg.toml --train.metrics_csv=train.h5/m.csv
    [ -e ck ] && [ -n "$(ls ck)" ] && fail "checkpoints were written"
    ;;
  metrics_is_data)  # train.metrics_csv naming the data file: refused, the data intact
    data
    before=$(sums train.h5)
    expect_fail 30 "train.metrics_csv 'train.h5' is the same file as data.path" 3 tessera-train \
      cfg.toml --train.metrics_csv=train.h5
    [ "$(sums train.h5)" = "$before" ] || fail "the data file changed"
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
    temp_left ck/ckpt_00000004.h5 && fail "the failed checkpoint's temporary was left"
    expect_ok 3 tessera-train cfg.toml --resume  # it still loads (step 2 of 2: nothing to do)
    echo "$out" | grep -q "resume: ck/ckpt_00000002.h5 (step 2)" || fail "the checkpoint is unreadable"
    ;;
  tmpfs_enospc)  # a real full disk: a 200 KiB tmpfs (skipped where none can be mounted)
    mkdir -p full
    mount -t tmpfs -o size=200k tmpfs full 2>/dev/null ||
      { echo "faults $case_name: SKIPPED: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$dir/full"; rm -rf "$dir"' EXIT
    data
    # the write fails, or a dataset is refused first for want of space (whichever comes first)
    expect_fail 60 "ckpt_00000002.h5.tmp[^']*'(: MPI_File_write_at_all failed| of shape .* needs .* [KMG]iB, the file system has .* [KMG]iB free)" 3 tessera-train cfg.toml \
      --train.checkpoint_dir=full/ck
    [ -e full/ck/ckpt_00000002.h5 ] && fail "a partial checkpoint under its final name"
    rm -rf full/ck
    # tessera-prep generate onto the full disk: the disk fills at a point that depends on
    # buffering - every rank's write fails and every rank then waits in HDF5's collective
    # close, or one rank's write fails first while the others wait in a later collective;
    # either way the watch ends the job with one line naming the file and the I/O error.
    expect_fail 60 "(closing 'full/gen.h5.tmp[^']*' after .*input/output error|'full/gen.h5.tmp[^']*': MPI_File_write_at_all failed: .*input/output error|'full/gen.h5.tmp[^']*' of shape .* needs .* [KMG]iB, the file system has .* [KMG]iB free)" 3 tessera-prep \
      generate darcy --grid 96x96 --samples 4 --seed 3 --out full/gen.h5 --quiet
    [ -e full/gen.h5 ] && fail "a partial output under its final name"
    temp_left full/gen.h5 && fail "the temporary full/gen.h5.tmp was left"
    # The metrics file fills the disk (the checkpoints live elsewhere): the run stops with
    # the step it reached saved first, and --resume continues from there.
    rm -rf full/* && dd if=/dev/zero of=full/fill bs=4096 count=46 2>/dev/null
    expect_fail 60 "cannot write train.metrics_csv = 'full/m.csv': No space left on device .*; checkpoint ck-m/ckpt_[0-9]*.h5 was written first: --resume continues from step [0-9]*" \
      3 tessera-train cfg.toml --train.steps=1000 --train.checkpoint_interval=5000 \
      --train.log_interval=5000 --train.checkpoint_dir=ck-m --train.metrics_csv=full/m.csv
    saved=$(ls ck-m) && [ -n "$saved" ] || fail "no checkpoint was saved"
    rm full/fill
    expect_ok 3 tessera-train cfg.toml --train.steps=$((10#${saved:5:8} + 2)) --resume \
      --train.checkpoint_dir=ck-m --train.metrics_csv=full/m.csv
    echo "$out" | grep -q "resume: ck-m/$saved" || { echo "$out"; fail "did not resume from $saved"; }
    ;;
  prep_enospc)  # tessera-prep generate onto a full disk, rank 1 fails its write
    expect_ok 1 tessera-prep generate darcy --grid 24x24 --samples 2 --seed 1 --out keep.h5 --quiet
    TESSERA_FAULT_INJECT=h5write:1:2 expect_fail 30 "No space left on device" 3 tessera-prep \
      generate darcy --grid 24x24 --samples 4 --seed 3 --out out.h5 --quiet
    [ -e out.h5 ] && fail "a partial out.h5 was left under its final name"
    temp_left out.h5 && fail "the temporary out.h5.tmp was left"
    ;;
  infer_output_is_input)  # --output naming --input (through another name): refused
    trained
    ln -s train.h5 alias.h5
    before=$(sums train.h5)
    expect_fail 30 "is the same file as --input" 3 tessera-infer --checkpoint ck/ckpt_00000001.h5 \
      --input train.h5 --output alias.h5
    [ "$(sums train.h5)" = "$before" ] || fail "the input changed"
    ;;
  infer_output_is_checkpoint)  # --output naming the checkpoint: refused, the model intact
    trained
    before=$(sums ck/ckpt_00000001.h5)
    expect_fail 30 "is the same file as --checkpoint" 3 tessera-infer \
      --checkpoint ck/ckpt_00000001.h5 --input train.h5 --output ck/ckpt_00000001.h5
    [ "$(sums ck/ckpt_00000001.h5)" = "$before" ] || fail "the checkpoint changed"
    ;;
  infer_target_grid)  # targets on another grid than the inputs
    trained
    field bad.h5 permeability 2,1,32,24
    field bad.h5 pressure 2,1,16,16
    expect_fail 30 "'/fields/pressure' in 'bad.h5' has shape \(2, 1, 16, 16\), the inputs need \(2, 1, 32, 24\)" \
      3 tessera-infer --checkpoint ck/ckpt_00000001.h5 --input bad.h5 --output pred.h5
    [ -e pred.h5 ] && fail "a partial prediction was left"
    ;;
  infer_target_count)  # targets with another sample count (the schema's one-N rule)
    trained
    field bad.h5 permeability 2,1,32,24
    field three.h5 pressure 3,1,32,24  # --append refuses another N: h5copy makes the file
    h5copy -i three.h5 -o bad.h5 -s /fields/pressure -d /fields/pressure || fail "h5copy"
    expect_fail 30 "'bad.h5': datasets disagree on the sample count N" \
      3 tessera-infer --checkpoint ck/ckpt_00000001.h5 --input bad.h5 --output pred.h5
    [ -e pred.h5 ] && fail "a partial prediction was left"
    ;;
  infer_layer_error_rank1)  # an exception in a layer on rank 1 only, the output file open
    trained
    TESSERA_FAULT_INJECT=layer:1:3 expect_fail 30 \
      "\(rank 1 of 3\).*injected fault in layer '.*'" 3 tessera-infer \
      --checkpoint ck/ckpt_00000001.h5 --input train.h5 --output pred.h5
    [ -e pred.h5 ] && fail "a partial prediction was left"
    temp_left pred.h5 && fail "the temporary pred.h5.tmp was left"
    ;;
  infer_nonfinite_prediction)  # finite inputs a float32 FNO overflows on: no file of NaNs
    data
    expect_ok 3 tessera-train cfg.toml --train.steps=1 --model.type=fno --model.modes=4 \
      --model.layers=1 --model.dtype=float32
    field big.h5 permeability 2,1,24,24 big
    expect_fail 30 "sample 0: the prediction holds a non-finite value" 3 tessera-infer \
      --checkpoint ck/ckpt_00000001.h5 --input big.h5 --output pred.h5
    [ -e pred.h5 ] && fail "a prediction of non-finite values was written"
    temp_left pred.h5 && fail "the temporary pred.h5.tmp was left"
    ;;
  infer_output_directory)  # --output naming a folder: refused before the work, not at the end
    trained
    mkdir out
    expect_fail 30 "output 'out' is a directory \(name a file in it\)" 3 tessera-infer \
      --checkpoint ck/ckpt_00000001.h5 --input train.h5 --output out
    temp_left out && fail "out.tmp was left"
    echo "$out" | grep -q "^sample " && fail "the samples ran before the check"
    ;;
  infer_channel_mismatch)  # inputs with another channel count than in training
    trained
    field c2.h5 permeability 2,2,24,24
    expect_fail 30 "c2.h5: its input fields \(permeability: 2 channels\) do not fit the checkpoint's model \(in=1, not in=2" \
      3 tessera-infer --checkpoint ck/ckpt_00000001.h5 --input c2.h5 --output pred.h5
    [ -e pred.h5 ] && fail "a prediction was written"
    field d3.h5 permeability 2,1,8,8,8  # 3-D fields for a 2-D model
    expect_fail 30 "d3.h5: its fields have 3 spatial dims, the checkpoint's model was trained on the 2-D grid \(24, 24\)" \
      3 tessera-infer --checkpoint ck/ckpt_00000001.h5 --input d3.h5 --output pred.h5
    # a file without the model's input field: which model reads which fields, said
    field other.h5 pressure 2,1,24,24
    expect_fail 30 "other.h5: the checkpoint's model \(model.type = 'unet'\) reads the fields permeability \(its data.inputs: a grid\): field 'permeability' not found" \
      3 tessera-infer --checkpoint ck/ckpt_00000001.h5 --input other.h5 --output pred.h5
    ;;
  resume_other_model)  # --resume with another optimizer or model width: what differs, said
    trained
    expect_fail 30 "the checkpoint's optimizer state was written with optim.name = '[a-z]+', this run sets 'sgd'" \
      3 tessera-train cfg.toml --train.steps=2 --resume --optim.name=sgd
    expect_fail 30 "checkpoint of another model \(width=4, not width=8\)" \
      3 tessera-train cfg.toml --train.steps=2 --resume --model.width=8
    # another dataset (another sample count): said as such, not passed over as damage
    expect_ok 1 tessera-prep generate darcy --grid 24x24 --samples 9 --seed 4 --out nine.h5 --quiet
    expect_fail 30 "the checkpoint's run trained on [0-9]+ training samples \(data.path = 'train.h5', train.validation_split = [0-9.]+\), this run's 'nine.h5' gives [0-9]+: resume with the checkpoint's data" \
      3 tessera-train cfg.toml --train.steps=2 --resume --data.path=nine.h5
    ;;
  train_zero_target)  # a sample whose target is zero everywhere (no relative error)
    field z.h5 permeability 6,1,24,24
    field z.h5 pressure 6,1,24,24 zero_last:576  # sample 5
    data
    # In validation: left out of the relative error, with any loss; training runs.
    expect_ok 3 tessera-train cfg.toml --data.path=z.h5 --data.normalize=false \
      --train.loss=mse --data.shuffle=false
    echo "$out" | grep -qE "step 2/2 .*rel_l2 [0-9]" || fail "no finite validation error"
    # Normalized, the zero target comes back from the round trip as rounding noise: still
    # zero, still left out (it was divided by, giving a relative error of 1e7).
    expect_ok 3 tessera-train cfg.toml --data.path=z.h5 --train.loss=mse --data.shuffle=false \
      --model.dtype=float32 --train.checkpoint_dir=ckn --train.metrics_csv=
    r=$(echo "$out" | sed -n 's/^step 2\/2 .*rel_l2 \([0-9.e+-]*\).*/\1/p')
    awk -v r="$r" 'BEGIN { exit !(r != "" && r + 0 < 100) }' ||
      { echo "$out"; fail "validation relative error '$r' with a normalized zero target"; }
    expect_ok 3 tessera-train cfg.toml --data.path=z.h5 --data.normalize=false \
      --train.loss=rel_l2 --train.checkpoint_dir=ck2 --train.metrics_csv=metrics2.csv
    # Every held-out target zero under rel_l2: no validation loss, not a non-finite one.
    field z2.h5 permeability 6,1,24,24
    field z2.h5 pressure 6,1,24,24 zero_last:1152  # samples 4 and 5
    expect_ok 3 tessera-train cfg.toml --data.path=z2.h5 --data.normalize=false \
      --train.loss=rel_l2 --train.checkpoint_dir=ck3 --train.metrics_csv=
    # In the training split with rel_l2: refused before step 1, naming the dataset's sample.
    expect_fail 30 "the target of sample 5 of z.h5 is zero everywhere \(1 such training samples\)" \
      3 tessera-train cfg.toml --data.path=z.h5 --data.normalize=false --train.loss=rel_l2 \
      --train.validation_split=0 --train.checkpoint_dir=ck3 --train.metrics_csv=metrics3.csv
    echo "$out" | grep -q "^step 1/" && fail "training started"
    # A resume takes the checkpoint's normalization: the check runs under it. r0's targets have
    # mean 0.5 exactly (a checkerboard about it); in r1 sample 2 is 0.5 everywhere (zero under
    # the checkpoint's normalization, not under r1's own, whose mean sample 0 moves); in r2
    # sample 2 is r2's own mean everywhere (zero under r2's statistics, not the checkpoint's).
    data
    /usr/bin/python3 - <<'PY' || fail "h5py could not write the resume files"
import h5py, numpy as np, shutil
for name, centre, flat in (('r0.h5', 0.5, None), ('r1.h5', 0.5, 0.5), ('r2.h5', 0.75, 0.75)):
    shutil.copy('train.h5', name)
    with h5py.File(name, 'r+') as f:
        p = f['/fields/pressure']
        n = p.shape[0]
        board = np.where(np.indices(p.shape[2:]).sum(0) % 2 == 0, 1.0, -1.0)
        v = centre + board[None, None] * 2.0 ** -10 * np.arange(1, n + 1)[:, None, None, None]
        if flat is not None:
            v[2] = flat
            if name == 'r1.h5':
                v[0] += 0.25
        p[...] = v.astype('f4')
PY
    expect_ok 3 tessera-train cfg.toml --data.path=r0.h5 --train.loss=rel_l2 \
      --train.checkpoint_dir=ckR --train.metrics_csv=
    cp -r ckR ckR2
    expect_fail 30 "the target of sample 2 of r1.h5 is zero everywhere after normalization" \
      3 tessera-train cfg.toml --data.path=r1.h5 --train.loss=rel_l2 --train.steps=4 \
      --train.checkpoint_dir=ckR --train.metrics_csv= --resume
    echo "$out" | grep -q "^step 3/" && fail "training went on after the resume"
    expect_ok 3 tessera-train cfg.toml --data.path=r2.h5 --train.loss=rel_l2 --train.steps=4 \
      --train.checkpoint_dir=ckR2 --train.metrics_csv= --resume
    echo "$out" | grep -q "^step 4/4" || { echo "$out"; fail "the resume onto r2.h5 did not train"; }
    # Without a checkpoint to resume, the file's own statistics: r2's sample 2 is refused.
    expect_fail 30 "the target of sample 2 of r2.h5 is zero everywhere after normalization" \
      3 tessera-train cfg.toml --data.path=r2.h5 --train.loss=rel_l2 --train.steps=4 \
      --train.checkpoint_dir=ckR3 --train.metrics_csv= --resume
    ;;
  resume_past_steps)  # --resume of a checkpoint past train.steps: said, nothing trained
    data
    expect_ok 3 tessera-train cfg.toml
    before=$(sums ck/ckpt_00000002.h5)
    expect_ok 3 tessera-train cfg.toml --train.steps=1 --resume
    echo "$out" | grep -q "resume: the checkpoint is past the run's 1 steps" ||
      { echo "$out"; fail "no word that nothing was trained"; }
    [ "$(sums ck/ckpt_00000002.h5)" = "$before" ] || fail "the checkpoint changed"
    ;;
  points_overflow_normalized)  # a finite coordinate that leaves float32 once normalized
    expect_ok 2 tessera-prep generate points --points 64 --samples 4 --out train.h5 --quiet
    pc=(--data.path=train.h5 --data.inputs=coords,f --data.targets=f_smooth --model.type=pointconv
      --model.width=8 --model.layers=1 --model.neighbours=4 --train.steps=2 --train.batch_size=1
      --train.validation_split=0.25 --train.checkpoint_dir=ck)
    expect_ok 3 tessera-train /dev/null "${pc[@]}"
    cp train.h5 big.h5
    /usr/bin/python3 -c "import h5py; h5py.File('big.h5', 'r+')['/points/coords'][0, 3, 1] = 3e38" ||
      fail "h5py"
    # at once on every rank (one rank's layout check made the others wait for the watch)
    expect_fail 8 "big.h5: sample 0 leaves the range of float32 once normalized" 3 tessera-infer \
      --checkpoint ck/ckpt_00000002.h5 --input big.h5 --output pred.h5
    [ -e pred.h5 ] || temp_left pred.h5 && fail "a prediction was left"
    # in training: in the validation sample (the statistics come from the training split)
    cp train.h5 bigv.h5
    /usr/bin/python3 -c "import h5py; h5py.File('bigv.h5', 'r+')['/points/coords'][3, 3, 1] = 3e38" ||
      fail "h5py"
    expect_fail 8 "the inputs of sample 3 leave the range of float32 once normalized" 3 \
      tessera-train /dev/null "${pc[@]}" --data.path=bigv.h5 --train.checkpoint_dir=ck2
    # streamed (data.stream): the same, from the scan at the start
    expect_fail 8 "the inputs of sample 3 leave the range of float32 once normalized" 3 \
      tessera-train /dev/null "${pc[@]}" --data.path=bigv.h5 --train.checkpoint_dir=ck3 --data.stream=true
    ;;
  interrupted_output)  # SIGINT or SIGTERM to the ranks (as scancel sends) while writing
    for sig in INT TERM; do
      timeout 60 "${launch[@]}" -np 2 "$bin/tessera-prep" generate darcy --grid 128x128 \
        --samples 5000 --out d.h5 --quiet >/dev/null 2>&1 &
      pid=$!
      for _ in $(seq 150); do temp_left d.h5 && break; sleep 0.2; done
      temp_left d.h5 || { kill -KILL $pid; fail "no d.h5.tmp appeared"; }
      sleep 0.5
      # The ranks themselves: mpirun, signalled, may follow with SIGKILL before a loaded
      # machine schedules the ranks' handlers.
      pkill -$sig -f "^$bin/tessera-prep generate darcy --grid 128x128 --samples 5000" ||
        fail "no rank to signal"
      wait $pid
      for _ in $(seq 50); do temp_left d.h5 || break; sleep 0.2; done
      temp_left d.h5 && fail "SIG$sig left d.h5.tmp"
      [ -e d.h5 ] && fail "SIG$sig left d.h5"
      echo "ok: SIG$sig removed d.h5.tmp"
    done
    ;;
  infer_zero_samples)
    trained
    field empty.h5 permeability 0,1,32,24
    expect_fail 30 "holds 0 samples" 3 tessera-infer --checkpoint ck/ckpt_00000001.h5 \
      --input empty.h5 --output pred.h5
    [ -e pred.h5 ] && fail "an empty prediction was written"
    ;;
  nonfinite_input)  # a NaN in the training data: refused as loaded, naming the sample
    field nan.h5 permeability 6,1,24,24 1500
    field nan.h5 pressure 6,1,24,24
    data
    expect_fail 30 "'/fields/permeability' in 'nan.h5': non-finite value nan in sample 2" \
      3 tessera-train cfg.toml --data.path=nan.h5
    # Streamed from the file (data.stream): found by the scan at the start, not at its batch.
    expect_fail 30 "'/fields/permeability' in 'nan.h5': non-finite value nan in sample 2" \
      3 tessera-train cfg.toml --data.path=nan.h5 --data.stream=true
    echo "$out" | grep -q "^step 1/" && fail "training started"
    ;;
  infer_zero_target)  # targets that are zero everywhere: reported, left out, no abort
    trained
    field zt.h5 permeability 2,1,32,24
    field zt.h5 pressure 2,1,32,24 zero
    expect_ok 3 tessera-infer --checkpoint ck/ckpt_00000001.h5 --input zt.h5 --output pred.h5
    echo "$out" | grep -q "sample 1: the target is zero everywhere: no relative error" ||
      { echo "$out"; fail "no word of the zero target"; }
    [ -f pred.h5 ] || fail "no prediction written"
    echo "ok: zero targets reported, prediction written"
    ;;
  invalid_data)  # a data file that fails the schema is refused before training
    field bad.h5 permeability 6,1,24,24
    field bad.h5 pressure 6,1,24,24
    expect_ok 1 tessera-prep convert pressure.raw --shape 6,1,24,24 --dtype float32 --out bad.h5 \
      --name extra --append --quiet
    # convert refuses such metadata: h5py writes it
    /usr/bin/python3 -c "import h5py, numpy as np; h5py.File('bad.h5', 'r+')['/fields/extra'].attrs.modify('spacing', np.array([1.0, 1.0]))" ||
      fail "h5py could not set the attribute"
    data
    expect_fail 30 "'/fields/extra' in 'bad.h5': spatial dim 0 has 24 nodes at spacing 1.000000" \
      3 tessera-train cfg.toml --data.path=bad.h5
    ;;
  retention_resume)  # keep_checkpoints; --resume passes over a damaged newest one and
    # truncates metrics.csv to the step it resumed from
    data
    expect_ok 3 tessera-train cfg.toml --train.steps=5 --train.checkpoint_interval=1 \
      --train.keep_checkpoints=2
    [ "$(ls ck)" = "$(printf 'ckpt_00000004.h5\nckpt_00000005.h5')" ] ||
      { ls ck; fail "train.keep_checkpoints=2 kept something else"; }
    truncate -s 100 ck/ckpt_00000005.h5
    expect_ok 3 tessera-train cfg.toml --train.steps=6 --train.checkpoint_interval=1 \
      --train.keep_checkpoints=2 --resume
    echo "$out" | grep -q "resume: passing over ck/ckpt_00000005.h5" || fail "no word of the damaged one"
    echo "$out" | grep -q "resume: ck/ckpt_00000004.h5 (step 4)" || { echo "$out"; fail "did not fall back"; }
    steps=$(cut -d, -f1 metrics.csv | tail -n +2 | tr '\n' ' ')
    [ "$steps" = "0 1 2 3 4 5 6 " ] || fail "metrics.csv steps after resume: $steps"
    echo "ok: kept 2, fell back to step 4, metrics.csv steps $steps"
    # A link named like a checkpoint is none: neither counted nor pruned.
    cp ck/ckpt_00000006.h5 keep.h5 && ln -s ../keep.h5 ck/ckpt_00000001.h5
    expect_ok 3 tessera-train cfg.toml --train.steps=7 --train.checkpoint_interval=1 \
      --train.keep_checkpoints=2 --resume
    [ -L ck/ckpt_00000001.h5 ] && [ -e keep.h5 ] || fail "retention pruned a link"
    [ -e ck/ckpt_00000006.h5 ] && [ -e ck/ckpt_00000007.h5 ] || { ls ck; fail "kept something else"; }
    # A damaged checkpoint of a later step (a run abandoned there) is passed over, and the
    # resumed run's retention neither counts it nor drops its own newest for it.
    head -c 100 ck/ckpt_00000007.h5 > ck/ckpt_00000009.h5
    expect_ok 3 tessera-train cfg.toml --train.steps=8 --train.checkpoint_interval=1 \
      --train.keep_checkpoints=1 --resume
    echo "$out" | grep -q "resume: ck/ckpt_00000007.h5 (step 7)" || { echo "$out"; fail "did not fall back to 7"; }
    [ "$(ls ck | tr '\n' ' ')" = "ckpt_00000001.h5 ckpt_00000008.h5 ckpt_00000009.h5 " ] ||
      { ls ck; fail "retention with a later damaged checkpoint kept something else"; }
    # Metrics rows missing before the resumed step (the file cut by hand): said, once.
    head -3 metrics.csv >cut.csv && mv cut.csv metrics.csv
    expect_ok 3 tessera-train cfg.toml --train.steps=9 --train.checkpoint_interval=1 \
      --train.keep_checkpoints=1 --resume
    echo "$out" | grep -q "warning: train.metrics_csv = 'metrics.csv' ends at step 1, the run resumes after step 8: the rows of steps 2 to 8 are not in it" ||
      { echo "$out"; fail "no word of the missing metrics rows"; }
    [ "$(ls ck | tr '\n' ' ')" = "ckpt_00000001.h5 ckpt_00000009.h5 " ] ||
      { ls ck; fail "the damaged checkpoint was not replaced when the run got there"; }
    ;;
  upfront_checks)  # config and size checks before any work
    data
    # the message pieces' count limit: malformed, or not the same on every rank
    TESSERA_MPI_COUNT_LIMIT=abc expect_fail 30 "TESSERA_MPI_COUNT_LIMIT=abc: give an integer" \
      3 tessera-train cfg.toml
    printf '#!/bin/bash\n[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export TESSERA_MPI_COUNT_LIMIT=7\nexec "$@"\n' \
      >limit.sh && chmod +x limit.sh
    bin_was=$bin
    mkdir -p wrapped && for p in tessera-train; do
      printf '#!/bin/bash\nexec "%s/limit.sh" "%s/%s" "$@"\n' "$PWD" "$bin_was" "$p" >wrapped/$p
      chmod +x wrapped/$p
    done
    bin=$PWD/wrapped
    TESSERA_MPI_COUNT_LIMIT=5 expect_fail 30 "TESSERA_MPI_COUNT_LIMIT differs between the ranks \(5 to 7\)" \
      3 tessera-train cfg.toml
    bin=$bin_was
    expect_fail 30 "mesh axis 'domain' has size 0: a size is >= 1 or 'auto'" 3 tessera-train \
      cfg.toml --mesh.shape=domain=0
    expect_fail 30 "train.epochs = 9223372036854775807 of 4 training samples overflows" 3 \
      tessera-train cfg.toml --train.steps=0 --train.epochs=9223372036854775807
    # epochs x samples fits, rounding up to whole batches would not
    expect_fail 30 "train.epochs = 3074457345618258602 of 3 training samples overflows" 3 \
      tessera-train cfg.toml --train.steps=0 --train.epochs=3074457345618258602 \
      --train.batch_size=3 --train.validation_split=0.5
    # parameters past the node's share, as they are built (before any estimate): one that
    # malloc refuses, and one it grants (overcommit) that filled the node until the OOM
    # killer ended a rank
    for width in 200000 20000; do
      expect_fail 30 "model.type = 'unet': its parameters do not fit this rank's memory \\(memory limit: allocating .* of host memory would pass this rank's share of the node's available memory for the parameters' values and gradients \\(2 of the 4 copies training holds" \
        3 tessera-train cfg.toml --model.width=$width --model.groups=1
    done
    # a grid of 6 x 65536^2 cells (storage allocated, never filled: a sparse file of 8 KB
    # on disk; unallocated storage the schema refuses first): refused from the shapes,
    # before a value is read
    /usr/bin/python3 - <<'PY' || fail "h5py could not write big.h5"
import h5py, numpy as np
src = h5py.File('train.h5', 'r')
with h5py.File('big.h5', 'w') as f:
    for k, v in src.attrs.items(): f.attrs[k] = v
    g = f.require_group('fields')
    for name in ('permeability', 'pressure'):
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        h5py.h5d.create(g.id, name.encode(), h5py.h5t.IEEE_F32LE,
                        h5py.h5s.create_simple((6, 1, 65536, 65536)), dcpl=dcpl)
        d = g[name]
        for k, v in src['fields'][name].attrs.items(): d.attrs[k] = v
        d.attrs['spacing'] = np.array([1 / 65536] * 2); d.attrs['origin'] = np.zeros(2)
PY
    expect_fail 30 "training needs about .* GiB per rank \\(data .* GiB, parameters and optimizer .* MiB, activations .* GiB\\), .* for the 3 ranks of this node; the node has .* GiB available" \
      3 tessera-train cfg.toml --data.path=big.h5
    # a step that passes the per-rank limit: refused before the data is read
    TESSERA_MEMORY_LIMIT_MB=0.5 expect_fail 30 \
      "training needs about .* MiB of host memory per rank \\(data .*, activations .* MiB\\); TESSERA_MEMORY_LIMIT_MB allows 0.5 MiB" \
      3 tessera-train cfg.toml
    # a failure timeout that is no number of seconds: named, not 10 s in its place
    TESSERA_FAILURE_TIMEOUT=abc expect_fail 30 \
      "TESSERA_FAILURE_TIMEOUT = 'abc' is not a number of seconds > 0" 3 tessera-train cfg.toml
    expect_ok 3 tessera-train cfg.toml --model.activation=tanh --train.steps=1
    ;;
  ompio_warning)  # the OMPIO warning only where OMPIO can be selected
    env -u OMPI_MCA_io "${launch[@]}" -np 2 "$bin/tessera-prep" generate darcy --grid 8x8 \
      --samples 1 --out a.h5 --quiet >plain.log 2>&1 || { cat plain.log; fail "plain run"; }
    grep -q "may run through OMPIO" plain.log && fail "warned although Context excluded OMPIO"
    OMPI_MCA_io=ompio OMPI_MCA_fcoll=vulcan "${launch[@]}" -np 2 "$bin/tessera-prep" generate \
      darcy --grid 8x8 --samples 1 --out b.h5 --quiet >ompio.log 2>&1
    grep -q "may run through OMPIO" ompio.log || { cat ompio.log; fail "no warning under OMPIO"; }
    echo "ok: warned under OMPI_MCA_io=ompio only"
    ;;
  late_end)  # a rank that reaches the end late: the others say for whom they wait, then finish
    gen=(tessera-prep generate darcy --grid 8x8 --samples 1 --out a.h5 --quiet)
    TESSERA_END_NOTICE=1 TESSERA_FAULT_INJECT=late_end:2 expect_ok 3 "${gen[@]}"
    echo "$out"
    echo "$out" | grep -q "^tessera-prep: rank 0 has waited 1 s at the end of the program for rank 2 of 3" ||
      fail "no notice naming rank 2"
    TESSERA_END_NOTICE=1 TESSERA_FAULT_INJECT=late_end:0 expect_ok 3 "${gen[@]}"
    echo "$out" | grep -q "^tessera-prep: rank 1 has waited 1 s at the end of the program for rank 0 " ||
      fail "no notice naming rank 0"
    TESSERA_FAULT_INJECT=late_end:2 expect_ok 3 "${gen[@]}"  # default: 300 s
    echo "$out" | grep -q "has waited" && fail "a notice before TESSERA_END_NOTICE's default"
    TESSERA_END_NOTICE=soon expect_fail 30 "TESSERA_END_NOTICE = 'soon' is not a number" 3 "${gen[@]}"
    ;;
  nonfinite_lr)
    data
    expect_fail 30 "optim.lr = inf is not a finite number" 3 tessera-train cfg.toml --optim.lr=inf
    ;;
  divergence)  # a learning rate that blows up: stopped at the step, nothing non-finite saved
    data
    diverge=(--model.dtype=float32 --optim.name=sgd --optim.lr=1e30)
    expect_fail 60 "non-finite" 3 tessera-train cfg.toml "${diverge[@]}" --train.steps=6 \
      --train.checkpoint_interval=1
    # Whatever was saved loads (a non-finite checkpoint would be passed over, saying so); the
    # first step's weights are finite but the validation loss is not: nothing saved at all.
    echo "$out" | grep -q "step 1: non-finite validation loss" ||
      { echo "$out"; fail "not stopped at step 1's validation"; }
    if compgen -G "ck/ckpt_*.h5" >/dev/null; then
      expect_ok 3 tessera-train cfg.toml "${diverge[@]}" --train.steps=1 --resume
      echo "$out" | grep -q "passing over" && { echo "$out"; fail "a non-finite checkpoint was saved"; }
    fi
    ;;
  divergence_skip)  # train.nonfinite = skip_step: skipped updates, then stopped after max_skips
    data
    expect_fail 60 "training stopped after 2 skipped steps in a row" 3 tessera-train cfg.toml \
      --model.dtype=float32 --optim.name=sgd --optim.lr=1e30 --train.steps=8 \
      --train.nonfinite=skip_step --train.max_skips=2
    echo "$out" | grep -q "update skipped (1 in a row)" || fail "no skipped-update line"
    ;;
  epochs_skip)  # train.epochs with a skipped update: the passes drawn end the run, straight or resumed
    data
    skip=(--train.steps=0 --train.epochs=2 --train.validation_split=0 --train.log_interval=1
      --train.nonfinite=skip_step --train.keep_checkpoints=10)
    # 6 samples, batch 2: 6 steps draw 2 passes; rank 1's gradient NaN in the 3rd.
    TESSERA_FAULT_INJECT=step.nonfinite:1:3 expect_ok 3 tessera-train cfg.toml "${skip[@]}" \
      --train.checkpoint_interval=1 --train.checkpoint_dir=ckA --train.metrics_csv=mA.csv
    echo "$out" | grep -q "step 3: non-finite .*update skipped (1 in a row); train.epochs = 2 is drawn after step 5" ||
      { echo "$out"; fail "no skipped-update line with the new end"; }
    echo "$out" | grep -q "^done: 5 steps" || { echo "$out"; fail "the straight run did not end at step 5"; }
    [ "$(tail -n 1 mA.csv | cut -d, -f1,2)" = "5,2" ] || { cat mA.csv; fail "the last row is not step 5 at 2 passes"; }
    # Resumed after the skip (step 3's checkpoint, 8 samples drawn): the same end, the same losses.
    mkdir -p ckB && cp ckA/ckpt_00000003.h5 ckB/
    expect_ok 3 tessera-train cfg.toml "${skip[@]}" --train.checkpoint_dir=ckB --train.metrics_csv=mB.csv --resume
    echo "$out" | grep -q "^done: 2 steps" || { echo "$out"; fail "the resumed run did not take the 2 steps left"; }
    for step in 4 5; do
      a=$(grep "^$step," mA.csv | cut -d, -f4) b=$(grep "^$step," mB.csv | cut -d, -f4)
      [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $step: loss $a straight, $b resumed"
    done
    # The last batch's update skipped: the update before it ends the run and is saved.
    TESSERA_FAULT_INJECT=step.nonfinite:1:6 expect_ok 3 tessera-train cfg.toml "${skip[@]}" \
      --train.checkpoint_dir=ckC --train.metrics_csv=mC.csv --train.validation_split=0.34 \
      --train.log_interval=2 --train.epochs=3
    # 4 training samples, 3 passes: 6 steps, the 6th skipped; step 5 validated after the loop.
    echo "$out" | grep -q "step 5/5 | val [0-9.e+-]* rel_l2 [0-9.e+-]* (the run's last update)" ||
      { echo "$out"; fail "no validated last-update line"; }
    echo "$out" | grep -q "^done: 5 steps" || { echo "$out"; fail "the run did not end at step 5"; }
    [ -f ckC/ckpt_00000005.h5 ] || { ls ckC; fail "the last update's checkpoint is missing"; }
    # Its validation is in the CSV: step 5's own row (a loss, no validation), then a row of
    # step 5's validation alone (no loss), as step 0's.
    tail -n 2 mC.csv | awk -F, 'NR == 1 && !($1 == 5 && $4 != "" && $5 == "") { exit 1 }
      NR == 2 && !($1 == 5 && $2 == 3 && $4 == "" && $5 != "" && $6 != "" && NF == 14) { exit 1 }' ||
      { cat mC.csv; fail "step 5's validation row is missing after the loop"; }
    ;;
  stop_signal)  # SLURM's warning signal before a time limit: the step saved, resumed alike
    data
    long=(--train.steps=8 --train.checkpoint_interval=0 --train.log_interval=4 --train.keep_checkpoints=0)
    expect_ok 3 tessera-train cfg.toml "${long[@]}" --train.checkpoint_dir=ckA --train.metrics_csv=mA.csv
    # SIGUSR1 to rank 1 alone, mid-step 3: every rank stops after step 3, which is validated
    # and saved although neither interval asks for it.
    TESSERA_FAULT_INJECT=step.stop_signal:1:3 run 3 tessera-train cfg.toml "${long[@]}" \
      --train.checkpoint_dir=ckB --train.metrics_csv=mB.csv
    [ "$rc" -eq 0 ] || { echo "$out"; fail "exit $rc after the stop signal"; }
    echo "$out" | grep -q "^tessera-train: stopped by SIGUSR1 (train.stop_signal) at step 3 of 8: checkpoint ckB/ckpt_00000003.h5 written; --resume continues from it$" ||
      { echo "$out"; fail "no line of the stop at step 3"; }
    echo "$out" | grep -q "^step 3/8 | loss .* | val " || { echo "$out"; fail "step 3 not logged with its validation"; }
    echo "$out" | grep -qiE "error|SIGTERM|abort" && { echo "$out"; fail "an error, a SIGTERM or an abort"; }
    [ "$(ls ckB)" = "ckpt_00000003.h5" ] || { ls ckB; fail "expected step 3's checkpoint alone"; }
    [ "$(tail -n 1 mB.csv | cut -d, -f1)" = 3 ] && [ -n "$(tail -n 1 mB.csv | cut -d, -f5)" ] ||
      { cat mB.csv; fail "the last metrics row is not step 3 with its validation"; }
    # Resumed, the data now streamed from the file (data.stream, the same numbers): steps 4-8
    # as the straight run had them, to the last digit.
    expect_ok 3 tessera-train cfg.toml "${long[@]}" --train.checkpoint_dir=ckB --train.metrics_csv=mB.csv \
      --data.stream=true --resume
    echo "$out" | grep -q "^done: 5 steps" || { echo "$out"; fail "the resumed run did not take the 5 steps left"; }
    for step in 4 5 6 7 8; do
      a=$(grep "^$step," mA.csv | cut -d, -f4) b=$(grep "^$step," mB.csv | cut -d, -f4)
      [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $step: loss $a straight, $b stopped and resumed"
    done
    [ "$(grep "^8," mA.csv | cut -d, -f5,6)" = "$(grep "^8," mB.csv | cut -d, -f5,6)" ] ||
      fail "step 8's validation differs"
    # The stop landing on a skipped update (train.nonfinite = "skip_step"): the update before
    # it is the one saved.
    TESSERA_FAULT_INJECT=step.stop_signal:1:3,step.nonfinite:2:3 run 3 tessera-train cfg.toml \
      "${long[@]}" --train.nonfinite=skip_step --train.checkpoint_dir=ckC --train.metrics_csv=mC.csv
    [ "$rc" -eq 0 ] || { echo "$out"; fail "exit $rc after a stop on a skipped update"; }
    echo "$out" | grep -q "stopped by SIGUSR1 (train.stop_signal) at step 2 of 8: checkpoint ckC/ckpt_00000002.h5 written" ||
      { echo "$out"; fail "the update before the skipped one was not the one saved"; }
    echo "$out" | grep -q "^done: 2 steps" || { echo "$out"; fail "not 2 steps done"; }
    [ "$(ls ckC)" = "ckpt_00000002.h5" ] || { ls ckC; fail "expected step 2's checkpoint alone"; }
    # step 2's own row (a loss), then its validation's row (no loss)
    tail -n 2 mC.csv | awk -F, 'NR == 1 && !($1 == 2 && $4 != "" && $5 == "") { exit 1 }
      NR == 2 && !($1 == 2 && $4 == "" && $5 != "") { exit 1 }' || { cat mC.csv; fail "step 2's rows"; }
    # The signal from the launcher, as SLURM or a user sends it: mpirun passes SIGUSR1 to the
    # ranks. Sent once step 2's row is out (a run of 10^6 steps); the job stops at once.
    "${launch[@]}" -np 3 "$bin/tessera-train" cfg.toml --train.steps=1000000 \
      --train.checkpoint_interval=0 --train.log_interval=1000 --train.checkpoint_dir=ckD \
      --train.metrics_csv=mD.csv >outD.txt 2>&1 &
    pid=$!
    for _ in $(seq 600); do
      grep -q "^2," mD.csv 2>/dev/null && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -USR1 "$pid"
    t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt 60 ]; do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; cat outD.txt; fail "mpirun did not end within 60 s of SIGUSR1"; }
    wait "$pid"
    rc=$?
    [ "$rc" -eq 0 ] || { cat outD.txt; fail "mpirun exited $rc after SIGUSR1"; }
    grep -qiE "error|SIGTERM|abort" outD.txt && { cat outD.txt; fail "an error, a SIGTERM or an abort"; }
    step=$(sed -n 's/^tessera-train: stopped by SIGUSR1 (train.stop_signal) at step \([0-9]*\) of 1000000: .*/\1/p' outD.txt)
    [ -n "$step" ] && [ -f "ckD/ckpt_$(printf %08d "$step").h5" ] ||
      { cat outD.txt; ls ckD; fail "no checkpoint of the step the stop named"; }
    # train.stop_signal = "none": the signal's own action, the job ended (not a hang, not 0).
    TESSERA_FAULT_INJECT=step.stop_signal:1:1 run 3 tessera-train cfg.toml "${long[@]}" \
      --train.stop_signal=none --train.checkpoint_dir=ckE --train.metrics_csv=
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "$out"; fail "exit $rc with train.stop_signal = none"; }
    # A warning that comes before the config is read (MPI starting, the file parsed) is held
    # and kept: the run stops after its first step, saved.
    TESSERA_FAULT_INJECT=start.usr1:1 run 3 tessera-train cfg.toml "${long[@]}" \
      --train.checkpoint_dir=ckF --train.metrics_csv=
    [ "$rc" -eq 0 ] || { echo "$out"; fail "exit $rc after an early SIGUSR1"; }
    echo "$out" | grep -q "^tessera-train: stopped by SIGUSR1 (train.stop_signal) at step 1 of 8: checkpoint ckF/ckpt_00000001.h5 written" ||
      { echo "$out"; fail "an early SIGUSR1 did not stop the run after step 1"; }
    TESSERA_FAULT_INJECT=start.usr2:2 run 3 tessera-train cfg.toml "${long[@]}" \
      --train.stop_signal=USR2 --train.checkpoint_dir=ckG --train.metrics_csv=
    [ "$rc" -eq 0 ] || { echo "$out"; fail "exit $rc after an early SIGUSR2 with train.stop_signal = USR2"; }
    echo "$out" | grep -q "stopped by SIGUSR2 (train.stop_signal) at step 1 of 8" ||
      { echo "$out"; fail "an early SIGUSR2 did not stop a USR2 run after step 1"; }
    # The signal the config does not name takes its default action, as if never held.
    TESSERA_FAULT_INJECT=start.usr2:1 run 3 tessera-train cfg.toml "${long[@]}" \
      --train.checkpoint_dir=ckH --train.metrics_csv=
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "$out"; fail "exit $rc after an early SIGUSR2 (stop signal USR1)"; }
    echo "$out" | grep -q "exited on signal 12 (User defined signal 2)" ||
      { echo "$out"; fail "rank 1 did not end by the early SIGUSR2's default action"; }
    ls ckH/ckpt_* >/dev/null 2>&1 && fail "a checkpoint after an early SIGUSR2 (stop signal USR1)"
    # An early warning and a config error: the error is said (the signal is not taken while it
    # is reported, which would end the rank before its message).
    TESSERA_FAULT_INJECT=start.usr1:0 run 3 tessera-train cfg.toml --optim.lrr=1
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "$out"; fail "exit $rc for a config error"; }
    echo "$out" | grep -q "^tessera-train: error.*optim.lrr" ||
      { echo "$out"; fail "the config error was not said after an early SIGUSR1"; }
    ;;
  validation_nonfinite)  # finite weights, but held-out samples (4, 5) the model overflows on
    data
    /usr/bin/python3 -c "
import sys, h5py
d = h5py.File('train.h5', 'r+')['/fields/permeability']
d[4:] = 3e38" || fail "h5py"
    fno=(--model.type=fno --model.modes=4 --model.layers=1 --model.dtype=float32)
    expect_fail 30 "step 0: non-finite validation loss \((inf|nan)\).*training stopped" 3 \
      tessera-train cfg.toml "${fno[@]}"
    ls ck/ckpt_* >/dev/null 2>&1 && fail "a checkpoint was written"
    grep -q "^0,0," metrics.csv || fail "the step's metrics row is missing"
    expect_ok 3 tessera-train cfg.toml "${fno[@]}" --train.nonfinite=skip_step \
      --train.checkpoint_dir=ck2 --train.metrics_csv=
    echo "$out" | grep -q "step 2: non-finite validation loss .*going on" ||
      { echo "$out"; fail "no word of the validation loss under skip_step"; }
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "faults $case_name: passed"
