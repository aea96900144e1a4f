#!/usr/bin/env bash
# tessera-train and tessera-infer from the command line, at 1 and 2 ranks:
#  - bad configs (unknown key, wrong type, a mesh that does not fit the ranks, a dataset
#    the model cannot take, a missing data file) exit non-zero with the error printed once;
#  - --help, --print-config (which parses back to itself); train.device_stats lines;
#  - a run with checkpoints and metrics; a run killed in the middle of a checkpoint write
#    (TESSERA_CHECKPOINT_FAULT) keeps the previous checkpoint, and --resume from it at
#    another rank count reproduces the uninterrupted run's losses (float64, 1e-9); a new
#    run into that folder without --resume, or with no folder name, is refused;
#  - tessera-infer on a larger grid writes the prediction in the dataset schema;
#  - a UNet with reflect padding: its signature, inference at 1 and 2 ranks, resume refused
#    under another padding;
#  - a Transolver on point clouds: trained at 2 ranks, inference at 1 and 2 ranks writes
#    /points/coords and /points/features (equal at both rank counts); a point quantity
#    that does not exist is refused; a NaN in a point target is reported by inference, named
#    (variable, sample, point) by training, and one in an unread variable stops nothing.
# Args: BIN_DIR WORK_DIR MPIEXEC NUMPROC_FLAG [MPIEXEC FLAGS...]
set -uo pipefail
bin=$1 work=$2 mpiexec=$3 npflag=$4
shift 4
flags=("$@")
mpi() { local n=$1; shift; timeout 120 "$mpiexec" "$npflag" "$n" "${flags[@]}" "$@"; }
fail() { echo "train_cli: FAILED: $*"; exit 1; }
# A job's temporary output (PATH.tmp.HOST.PID) is there.
temp_left() { compgen -G "$1.tmp*" >/dev/null; }
# Makes FILE a checkpoint of before checksums, so that an edit reaches the checks behind them.
strip_checksums() {
  /usr/bin/python3 - "$1" <<'EOF' || fail "h5py could not strip the checksums of $1"
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    for a in ("checksum", "crc32"):
        del f.attrs[a]
    for g in ("params", "optimizer", "buffers"):
        for d in f[g].values():
            del d.attrs["crc32"]
EOF
}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

mpi 1 "$bin/tessera-prep" generate darcy --grid 16x16 --samples 8 --seed 3 --out train.h5 --quiet ||
  fail "tessera-prep generate darcy"
mpi 1 "$bin/tessera-prep" generate darcy --grid 32x24 --samples 2 --seed 9 --out big.h5 --quiet ||
  fail "tessera-prep generate darcy (inference grid)"
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
name = "adam"
lr = 0.005
[train]
steps = 6
batch_size = 2
validation_split = 0.25
checkpoint_interval = 2
checkpoint_dir = "ck"
metrics_csv = "metrics.csv"
seed = 1
EOF

# expect_error NRANKS TEXT ARGS...: non-zero exit, TEXT in the one error line (printed once,
# not once per rank).
expect_error() {
  local n=$1 text=$2
  shift 2
  local out rc
  out=$(mpi "$n" "$bin/tessera-train" "$@" 2>&1)
  rc=$?
  [ $rc -eq 0 ] && fail "'$*' exited 0, expected an error containing '$text'"
  [ $rc -eq 124 ] && fail "'$*' hung"
  local hits
  hits=$(echo "$out" | grep -c "^tessera-train: error")
  [ "$hits" -eq 1 ] || { echo "$out"; fail "'$*': $hits error lines, expected one"; }
  echo "$out" | grep "^tessera-train: error" | grep -q -- "$text" ||
    { echo "$out"; fail "'$*': the error does not say '$text'"; }
  echo "ok: one error line: $text"
}
expect_error 2 "unknown key" cfg.toml --model.widht=8
expect_error 2 "model.width" cfg.toml --model.width=wide
expect_error 2 "does not fit 2 ranks" cfg.toml --mesh.shape=domain=3
expect_error 2 "not divisible by 2^depth" cfg.toml --model.depth=5
# Past 32 bits: refused, not cut to depth 1 (and a ViT's blocks have the same bound).
expect_error 2 "model.depth = 4294967297 is out of range: must be \[1, 64\]" cfg.toml \
  --model.depth=4294967297
expect_error 2 "model.depth = 65 is out of range: must be \[1, 64\]" cfg.toml --model.type=vit \
  --model.depth=65
# A patch past the grid is said as such before its weights' size is.
expect_error 2 "spatial extent 16 (dim 2 of (8, 1, 16, 16)) is not a multiple of model.patch = 65536" \
  cfg.toml --model.type=vit --model.patch=65536
expect_error 2 "mesh spec 'domain=2,' ends with ',': an empty item" cfg.toml --mesh.shape=domain=2,
expect_error 2 "train.batch_size = 3 is not divisible by the 2 ranks" cfg.toml \
  --mesh.shape=domain=1,data=2 --train.batch_size=3
expect_error 2 "nothere.h5" cfg.toml --data.path=nothere.h5

# (Into a file first: grep -q leaving early would end a pipe's writer with SIGPIPE, which
# pipefail reports as the pipe's failure.)
mpi 1 "$bin/tessera-train" --help >help.txt || fail "--help"
grep -q "model.width" help.txt || fail "--help lists no keys"
mpi 1 "$bin/tessera-train" cfg.toml --print-config >resolved.toml || fail "--print-config"
mpi 1 "$bin/tessera-train" resolved.toml --print-config | cmp -s - resolved.toml ||
  fail "--print-config does not parse back to itself"
echo "ok: --help, --print-config round trip"

# train.device_stats: one line per logged step with the step's device traffic (none on the
# host, so zero copies and launches; the counters themselves are tested in tests/kernels).
mpi 2 "$bin/tessera-train" cfg.toml --train.steps=2 --train.checkpoint_dir=ck-stats \
  --train.metrics_csv= --train.device_stats=true >stats.log 2>&1 || { cat stats.log; fail "device_stats run"; }
[ "$(grep -c '^  device (rank 0): h2d 0 copies 0 MiB | d2h 0 copies 0 MiB | d2d 0 copies 0 MiB | launches 0 | cudaMalloc 0$' stats.log)" = 2 ] ||
  { cat stats.log; fail "train.device_stats: expected one device line per step"; }
echo "ok: train.device_stats"

# The uninterrupted run (2 ranks, domain x data).
mpi 2 "$bin/tessera-train" cfg.toml --mesh.shape=domain=1,data=2 >straight.log 2>&1 ||
  { cat straight.log; fail "training run"; }
grep -q "step 6/6" straight.log || fail "no progress line for step 6"
grep -q "ms/step (compute" straight.log || fail "progress line lacks the time split"
[ -f ck/ckpt_00000002.h5 ] && [ -f ck/ckpt_00000006.h5 ] || fail "checkpoints missing"
[ "$(wc -l <metrics.csv)" -eq 8 ] || fail "metrics.csv should have a header and steps 0 to 6"
cp metrics.csv straight.csv
echo "ok: trained, 3 checkpoints, metrics"

# Killed while writing the second checkpoint: the first survives and is the latest.
rm -rf ck metrics.csv
TESSERA_CHECKPOINT_FAULT=optimizer:2 mpi 2 "$bin/tessera-train" cfg.toml >fault.log 2>&1 &&
  fail "the run with a checkpoint fault exited 0"
[ -f ck/ckpt_00000002.h5 ] || fail "the checkpoint before the fault is gone"
[ -f ck/ckpt_00000004.h5 ] && fail "the interrupted checkpoint was renamed into place"
temp_left ck/ckpt_00000004.h5 || fail "no partial temp file (did the fault fire?)"
echo "ok: an interrupted write leaves the previous checkpoint"
# Resume at another rank count: the losses of steps 3..6 equal the uninterrupted run's.
mpi 1 "$bin/tessera-train" cfg.toml --resume >resume.log 2>&1 || { cat resume.log; fail "--resume"; }
grep -q "resume: ck/ckpt_00000002.h5 (step 2)" resume.log || { cat resume.log; fail "did not resume from step 2"; }
# The same settings: no word of a change.
grep -q "changed since the checkpoint" resume.log && { cat resume.log; fail "a change reported"; }
python3 - straight.csv metrics.csv <<'EOF' || fail "resumed losses differ from the straight run"
import csv, sys
a = {r["step"]: float(r["loss"]) for r in csv.DictReader(open(sys.argv[1])) if r["loss"]}
b = {r["step"]: float(r["loss"]) for r in csv.DictReader(open(sys.argv[2])) if r["loss"]}
assert set(map(str, range(1, 7))) <= set(b), sorted(b)
for s in map(str, range(3, 7)):
    rel = abs(a[s] - b[s]) / abs(a[s])
    print(f"step {s}: straight {a[s]:.15g} resumed {b[s]:.15g} rel {rel:.2e}")
    assert rel < 1e-9
EOF
echo "ok: resumed at 1 rank == straight at 2 ranks"
# A new run (no --resume) into a folder of another run's checkpoints is refused before any
# step (it would overwrite them and could prune its own newest), and they stay as they were.
sum_before=$(cat ck/ckpt_*.h5 | md5sum)
expect_error 2 "already holds" cfg.toml --model.width=6
[ "$(cat ck/ckpt_*.h5 | md5sum)" = "$sum_before" ] || fail "a refused run changed the checkpoints"
# An empty checkpoint folder name would put checkpoints in the filesystem root.
expect_error 2 "train.checkpoint_dir is empty" cfg.toml --train.checkpoint_dir=

# Files of other runs are never destroyed. The metrics file: a new run refuses one that
# holds rows (another run's), a resumed one a file that is not a tessera-train metrics
# file, and neither changes it; one named as checkpoints are in the checkpoint folder
# would be replaced or pruned.
cp metrics.csv metrics.keep
expect_error 2 "already holds the metrics of another run" cfg.toml --train.checkpoint_dir=ck-new
cmp -s metrics.csv metrics.keep || fail "a refused run changed metrics.csv"
printf 'name,score\nalice,10\n' >other.csv
cp other.csv other.keep
expect_error 2 "is not a tessera-train metrics file (its first line: 'name,score')" cfg.toml \
  --resume --train.metrics_csv=other.csv
cmp -s other.csv other.keep || fail "a refused resume changed other.csv"
expect_error 2 "is named as checkpoints are in train.checkpoint_dir" cfg.toml --resume \
  --train.metrics_csv=ck/ckpt_00000001.h5
# A metrics write that fails (a full disk) stops the run with its cause, on every rank.
expect_error 2 "cannot write train.metrics_csv = '/dev/full': No space left on device" cfg.toml \
  --train.checkpoint_dir=ck-full --train.metrics_csv=/dev/full
# A checkpoint folder another run holds (its lock) is refused.
flock -o ck/.tessera-lock sleep 30 &  # -o: the lock stays with flock, not with sleep
holder=$!
sleep 0.5
expect_error 2 "train.checkpoint_dir 'ck' is in use by another run" cfg.toml --resume
pkill -P $holder sleep
kill $holder
wait $holder 2>/dev/null
# Resume passes over a checkpoint whose state does not load (an optimizer entry deleted)
# to the one before it; with none usable it stops rather than start over among them; and
# another data.normalize than the checkpoint's is refused.
rm -rf ck-dmg && cp -r ck ck-dmg && rm -f ck-dmg/.tessera-lock
strip_checksums ck-dmg/ckpt_00000006.h5  # (they would report the deletion first)
/usr/bin/python3 - ck-dmg/ckpt_00000006.h5 <<'EOF' || fail "h5py"
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    del f["optimizer"][sorted(f["optimizer"])[0]]
EOF
mpi 2 "$bin/tessera-train" cfg.toml --resume --train.checkpoint_dir=ck-dmg \
  --train.metrics_csv= >dmg.log 2>&1 || { cat dmg.log; fail "resume past a damaged checkpoint"; }
grep -q "resume: passing over ck-dmg/ckpt_00000006.h5: its state does not load" dmg.log &&
  grep -q "resume: ck-dmg/ckpt_00000004.h5 (step 4)" dmg.log ||
  { cat dmg.log; fail "did not pass over the damaged checkpoint to step 4"; }
grep -q 'resume: changed since the checkpoint: train.checkpoint_dir: "ck" -> "ck-dmg"' dmg.log ||
  { cat dmg.log; fail "the changed setting was not said"; }
# A bit flipped in a parameter on disk: the checksum finds it; resume passes over it,
# inference refuses it. The stored value is zlib's CRC-32 of the data's bytes.
rm -rf ck-flip && cp -r ck ck-flip && rm -f ck-flip/.tessera-lock
/usr/bin/python3 - ck-flip/ckpt_00000006.h5 <<'EOF' || fail "h5py"
import h5py, sys, zlib
import numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    d = f["params"][sorted(f["params"])[0]]
    a = d[()]
    assert zlib.crc32(a.tobytes()) == int(d.attrs["crc32"]), "crc32 is not zlib's of the bytes"
    a.reshape(-1).view(np.uint64)[0] ^= np.uint64(1 << 20)  # one bit of the mantissa
    d[...] = a
EOF
out=$(mpi 1 "$bin/tessera-infer" --checkpoint ck-flip/ckpt_00000006.h5 --input big.h5 \
  --output flip-pred.h5 2>&1) && fail "inference with a damaged checkpoint exited 0"
echo "$out" | grep -q "does not match its checksum" || { echo "$out"; fail "no word of the checksum"; }
[ -e flip-pred.h5 ] && fail "inference with a damaged checkpoint wrote a prediction"
mpi 2 "$bin/tessera-train" cfg.toml --resume --train.checkpoint_dir=ck-flip \
  --train.metrics_csv= >flip.log 2>&1 || { cat flip.log; fail "resume past a flipped bit"; }
grep -q "resume: passing over ck-flip/ckpt_00000006.h5: .*is damaged: /params/.* does not match its checksum" flip.log &&
  grep -q "resume: ck-flip/ckpt_00000004.h5 (step 4)" flip.log ||
  { cat flip.log; fail "did not pass over the flipped checkpoint to step 4"; }
rm -rf ck-bad && mkdir ck-bad && cp ck/ckpt_00000006.h5 ck-bad/ && truncate -s 2000 ck-bad/ckpt_00000006.h5
expect_error 2 "resume: none of the 1 checkpoint(s) in ck-bad can be used" cfg.toml --resume \
  --train.checkpoint_dir=ck-bad --train.metrics_csv=
[ "$(stat -c %s ck-bad/ckpt_00000006.h5)" = 2000 ] || fail "the unusable checkpoint was touched"
expect_error 2 "the checkpoint was trained with data.normalize = true" cfg.toml --resume \
  --data.normalize=false --train.metrics_csv=
# Other fields of the same channel counts (inputs and targets swapped): another run.
expect_error 2 "the checkpoint was trained on the fields 'permeability' -> 'pressure' (data.inputs -> data.targets), this run reads 'pressure' -> 'permeability'" \
  cfg.toml --resume '--data.inputs=["pressure"]' '--data.targets=["permeability"]' --train.metrics_csv=
# A FIFO as the metrics file would stall the run once its reader stops: refused. A resume
# that finds no checkpoint (a mistyped folder) would cut another run's rows: refused.
mkfifo metrics.fifo
expect_error 2 "is a FIFO or socket" cfg.toml --train.checkpoint_dir=ck-fifo \
  --train.metrics_csv=metrics.fifo
expect_error 2 "but no checkpoint was resumed" cfg.toml --resume --train.checkpoint_dir=ck-typo
cmp -s metrics.csv metrics.keep || fail "a refused resume changed metrics.csv"
# A link planted at the folder's lock file: its target is never written.
rm -rf ck-link && mkdir ck-link && echo precious >victim.txt && ln -s ../victim.txt ck-link/.tessera-lock
expect_error 2 "cannot create the lock file 'ck-link/.tessera-lock'" cfg.toml \
  --train.checkpoint_dir=ck-link --train.metrics_csv=
[ "$(cat victim.txt)" = precious ] || fail "the lock file's link target was written"
# A changed train.validation_split is a setting, not damage.
expect_error 2 "trained with train.validation_split = 0.25" cfg.toml --resume \
  --train.validation_split=0.5 --train.metrics_csv=
# So is a changed seed (the restored weights and sampler would ignore it).
expect_error 2 "seeded with train.seed = " cfg.toml --resume --train.seed=12345 \
  --train.metrics_csv=
# A checkpoint passed over after its normalization was read leaves the data as it was: the
# resume from step 4 equals the one above (its newest had an entry deleted instead).
rm -rf ck-dmg2 && cp -r ck ck-dmg2 && rm -f ck-dmg2/.tessera-lock
/usr/bin/python3 - ck-dmg2/ckpt_00000006.h5 <<'EOF' || fail "h5py"
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f["buffers/data.input_mean"][...] = 1e20
    f["buffers/data.target_mean"][...] = 1e20
    f.attrs["rng"] = "garbage 1 2"
EOF
mpi 2 "$bin/tessera-train" cfg.toml --resume --train.checkpoint_dir=ck-dmg2 \
  --train.metrics_csv= >dmg2.log 2>&1 || { cat dmg2.log; fail "resume past a checkpoint of bad state"; }
grep -q "resume: ck-dmg2/ckpt_00000004.h5 (step 4)" dmg2.log || { cat dmg2.log; fail "not from step 4"; }
[ "$(grep '^step 6/6' dmg.log | cut -d'|' -f2,3)" = "$(grep '^step 6/6' dmg2.log | cut -d'|' -f2,3)" ] ||
  { grep '^step 6/6' dmg.log dmg2.log; fail "a passed-over checkpoint changed the resumed run"; }
echo "ok: other runs' metrics, checkpoints and folders are refused and left as they were"

# Inference on a larger grid, 2 ranks.
mpi 2 "$bin/tessera-infer" --checkpoint ck/ckpt_00000006.h5 --input big.h5 --output pred.h5 \
  >infer.log 2>&1 || { cat infer.log; fail "tessera-infer"; }
cat infer.log
grep -q "mean relative L2 error" infer.log || fail "no error report"
mpi 1 "$bin/tessera-prep" validate pred.h5 >/dev/null || fail "prediction is not a valid dataset"
mpi 1 "$bin/tessera-prep" inspect pred.h5 >inspect.txt || fail "tessera-prep inspect"
grep "pressure" inspect.txt | grep -q "(2, 1, 32, 24)" || { cat inspect.txt; fail "prediction shape"; }
echo "ok: inference on 32x24 wrote /fields/pressure (2, 1, 32, 24)"
# The prediction names its channels as the input file's target does (the generator's 'p').
/usr/bin/python3 - pred.h5 big.h5 <<'EOF' || fail "prediction's variables are not the target's"
import h5py, sys
def names(f):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in f["/fields/pressure"].attrs["variables"]]
with h5py.File(sys.argv[1], "r") as p, h5py.File(sys.argv[2], "r") as t:
    assert names(p) == names(t), (names(p), names(t))
EOF
# A checkpoint whose normalization was deleted would predict unnormalized values: refused.
# A non-finite target value gives no error figure for its sample, and the others still do.
cp ck/ckpt_00000006.h5 nobuf.h5
strip_checksums nobuf.h5
/usr/bin/python3 - nobuf.h5 big.h5 nan.h5 <<'EOF' || fail "h5py"
import h5py, shutil, sys
with h5py.File(sys.argv[1], "r+") as f:
    del f["buffers"]["data.input_mean"]
shutil.copy(sys.argv[2], sys.argv[3])
with h5py.File(sys.argv[3], "r+") as f:
    f["/fields/pressure"][1, 0, 5, 5] = float("nan")
EOF
mpi 2 "$bin/tessera-infer" --checkpoint nobuf.h5 --input big.h5 --output nobuf_pred.h5 \
  >nobuf.log 2>&1 && fail "a checkpoint without its normalization was used"
grep -q "trained with data.normalize = true, but it holds no normalization" nobuf.log ||
  { cat nobuf.log; fail "no reason for refusing the checkpoint"; }
# A checkpoint whose config does not build the model it stores (edited): the checkpoint is
# named, not the input file.
cp ck/ckpt_00000006.h5 edited.h5
strip_checksums edited.h5
/usr/bin/python3 - edited.h5 <<'EOF' || fail "h5py"
import h5py, re, sys
with h5py.File(sys.argv[1], "r+") as f:
    c = f.attrs["config"]
    text = c if isinstance(c, str) else (c[0].decode() if isinstance(c[0], bytes) else str(c[0]))
    width = int(re.search(r"^width = (\d+)", text, re.M).group(1))
    f.attrs["config"] = re.sub(r"^width = \d+", "width = %d" % (width + 4), text, flags=re.M)
EOF
mpi 2 "$bin/tessera-infer" --checkpoint edited.h5 --input big.h5 --output edited_pred.h5 \
  >edited.log 2>&1 && fail "a checkpoint whose config contradicts its model was used"
grep -q "edited.h5: its config does not build the model it stores (width=" edited.log ||
  { cat edited.log; fail "the contradicting checkpoint was not named"; }
mpi 2 "$bin/tessera-infer" --checkpoint ck/ckpt_00000006.h5 --input nan.h5 --output nan_pred.h5 \
  >nan.log 2>&1 || { cat nan.log; fail "tessera-infer with a NaN target"; }
grep -q "sample 1: the target (pressure in nan.h5) holds a non-finite value: no relative error" nan.log &&
  grep -q "sample 0: relative L2 error" nan.log && grep -q "mean relative L2 error" nan.log ||
  { cat nan.log; fail "a NaN target: not reported per sample"; }
# A target normalization that takes finite outputs past float64: named, not blamed on the model.
cp ck/ckpt_00000006.h5 hugestd.h5
strip_checksums hugestd.h5
/usr/bin/python3 - hugestd.h5 <<'EOF' || fail "h5py"
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f["buffers/data.target_mean"][...] = 1.7e308
    f["buffers/data.target_std"][...] = 1e308
EOF
mpi 2 "$bin/tessera-infer" --checkpoint hugestd.h5 --input big.h5 --output hugestd_pred.h5 \
  >hugestd.log 2>&1 && fail "a prediction past float64 was written"
grep -q "the model's output is finite; undoing the target normalization .* overflows" hugestd.log ||
  { cat hugestd.log; fail "the overflow not named as the normalization's"; }
echo "ok: inference refuses a checkpoint without its normalization; a NaN target is reported"
# A UNet with reflect padding: the checkpoint's signature names it, inference at 1 and 2 ranks
# gives the same prediction, and resuming it with the default (zero) padding is refused.
mpi 2 "$bin/tessera-train" cfg.toml --model.padding=reflect --train.steps=2 \
  --train.checkpoint_dir=ck-refl --train.metrics_csv= >refl.log 2>&1 ||
  { cat refl.log; fail "tessera-train (reflect padding)"; }
for n in 1 2; do
  mpi $n "$bin/tessera-infer" --checkpoint ck-refl/ckpt_00000002.h5 --input big.h5 \
    --output refl_pred$n.h5 >refl_infer$n.log 2>&1 ||
    { cat refl_infer$n.log; fail "tessera-infer (reflect padding, $n ranks)"; }
done
/usr/bin/python3 - <<'EOF' || fail "reflect padding: signature or predictions"
import h5py, numpy as np
with h5py.File("ck-refl/ckpt_00000002.h5", "r") as f:
    sig = f.attrs["model"]
    sig = sig.decode() if isinstance(sig, bytes) else str(sig)
    assert sig.endswith(" padding=reflect"), sig
a, b = h5py.File("refl_pred1.h5", "r"), h5py.File("refl_pred2.h5", "r")
pa, pb = a["fields/pressure"][...], b["fields/pressure"][...]
assert pa.shape == (2, 1, 32, 24) and np.isfinite(pa).all(), pa.shape
assert np.abs(pa - pb).max() <= 1e-6 * np.abs(pa).max(), np.abs(pa - pb).max()
EOF
expect_error 2 "checkpoint of another model" cfg.toml --resume --train.checkpoint_dir=ck-refl \
  --train.metrics_csv=
echo "ok: a reflect-padded UNet trains, names its padding, infers alike at 1 and 2 ranks"
# A ViT with learned positions (a table per patch of 16x16, sharded with the patches at 2
# ranks): inference on 32x24 interpolates the table; the checkpoint holds it whole.
mpi 2 "$bin/tessera-train" cfg.toml --model.type=vit --model.patch=4 --model.dim=8 \
  --model.depth=1 --model.heads=2 --model.positions=learned --train.checkpoint_dir=ck-vit --train.metrics_csv=vit.csv \
  >vit.log 2>&1 || { cat vit.log; fail "tessera-train (vit, learned positions)"; }
# Debian's python3 (python3-h5py, from scripts/setup.sh), ahead of any other on PATH.
py=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3)
"$py" - ck-vit/ckpt_00000006.h5 <<'EOF' || fail "the checkpoint lacks the whole table or the grid"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f["/params/positions.table"].shape == (8, 4, 4), f["/params/positions.table"].shape
assert list(f["/buffers/data.grid"][...]) == [16, 16], f["/buffers/data.grid"][...]
EOF
for n in 1 2; do
  mpi $n "$bin/tessera-infer" --checkpoint ck-vit/ckpt_00000006.h5 --input big.h5 \
    --output vit_pred$n.h5 >vit_infer.log 2>&1 ||
    { cat vit_infer.log; fail "tessera-infer (vit, learned positions, $n ranks)"; }
  grep -q "mean relative L2 error" vit_infer.log || { cat vit_infer.log; fail "no vit error report"; }
done
"$py" - vit_pred1.h5 vit_pred2.h5 <<'EOF' || fail "vit inference differs between 1 and 2 ranks"
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r")["/fields/pressure"][...] for f in sys.argv[1:3])
assert a.shape == (2, 1, 32, 24), a.shape
d = np.abs(a - b).max() / np.abs(a).max()
print(f"vit (learned positions) on 32x24: 1 vs 2 ranks max rel diff {d:.2e}")
assert d < 1e-12
EOF
echo "ok: vit with learned positions trained on 16x16 at 2 ranks, inferred on 32x24 at 1 and 2 ranks"
# Point clouds: a Transolver trained on coords + f -> f_smooth, inference at 1 and 2 ranks.
mpi 2 "$bin/tessera-prep" generate points --points 300 --samples 6 --smooth 8 --out pts.h5 \
  --quiet || fail "tessera-prep generate points"
mpi 1 "$bin/tessera-prep" generate points --points 500 --samples 2 --smooth 8 --seed 4 \
  --out pts_test.h5 --quiet || fail "tessera-prep generate points (inference clouds)"
cat >pts.toml <<'EOF'
[data]
path = "pts.h5"
inputs = ["coords", "f"]
targets = ["f_smooth"]
[model]
type = "transolver"
width = 8
layers = 1
heads = 2
slices = 4
dtype = "float64"
[train]
steps = 3
batch_size = 2
validation_split = 0.2
checkpoint_interval = 3
checkpoint_dir = "ck-pts"
seed = 1
EOF
mpi 2 "$bin/tessera-train" pts.toml >pts.log 2>&1 || { cat pts.log; fail "transolver training"; }
expect_error 2 "not 'coords' or a /points/features variable" pts.toml '--data.inputs=["coords","g"]'
for n in 1 2; do
  mpi $n "$bin/tessera-infer" --checkpoint ck-pts/ckpt_00000003.h5 --input pts_test.h5 \
    --output pts_pred$n.h5 >pts_infer.log 2>&1 ||
    { cat pts_infer.log; fail "tessera-infer (points, $n ranks)"; }
  grep -q "mean relative L2 error" pts_infer.log || { cat pts_infer.log; fail "no point error report"; }
  mpi 1 "$bin/tessera-prep" validate pts_pred$n.h5 >/dev/null || fail "point prediction is not valid"
done
python3 - pts_pred1.h5 pts_pred2.h5 pts_test.h5 <<'EOF' || fail "point predictions"
import sys
try:
    import h5py, numpy as np
except ImportError:
    print("no h5py: predictions not compared"); sys.exit(0)
a, b, t = (h5py.File(p, "r") for p in sys.argv[1:])
fa, fb = a["points/features"][:], b["points/features"][:]
assert fa.shape == (2, 500, 1), fa.shape
names = [v.decode() if isinstance(v, bytes) else v for v in a["points/features"].attrs["variables"]]
assert names == ["f_smooth"], names
assert np.array_equal(a["points/coords"][:], t["points/coords"][:])
d = np.abs(fa - fb).max() / np.abs(fa).max()
print(f"points: prediction at 1 vs 2 ranks, max rel diff {d:.2e}")
assert d < 1e-6
EOF
echo "ok: transolver on point clouds, inference at 1 and 2 ranks"
# A NaN in a point target: inference writes the prediction and reports no error for that
# sample (as for grid fields); training refuses it naming the variable, sample and point.
# One in a variable the model does not read stops nothing.
/usr/bin/python3 - pts_test.h5 pts.h5 <<'EOF' || fail "h5py (NaN point files)"
import h5py, numpy as np, shutil, sys
for src, dst, (n, p) in ((sys.argv[1], "pts_nan_test.h5", (0, 7)), (sys.argv[2], "pts_nan.h5", (1, 11))):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        d = f["points/features"]
        a = d[()]
        a[n, p, 1] = np.nan  # f_smooth
        d[...] = a
EOF
mpi 2 "$bin/tessera-infer" --checkpoint ck-pts/ckpt_00000003.h5 --input pts_nan_test.h5 \
  --output pts_nan_pred.h5 >nan_infer.log 2>&1 || { cat nan_infer.log; fail "tessera-infer, NaN target"; }
grep -q "sample 0: the target (f_smooth in pts_nan_test.h5) holds a non-finite value: no relative error" \
  nan_infer.log || { cat nan_infer.log; fail "a NaN point target was not reported"; }
expect_error 2 "non-finite value nan of 'f_smooth' in sample 1, point 11" pts.toml \
  --data.path=pts_nan.h5 --train.checkpoint_dir=ck-nan
mpi 2 "$bin/tessera-train" pts.toml --data.path=pts_nan.h5 --data.targets=f '--data.inputs=["coords"]' \
  --train.steps=1 --train.checkpoint_dir=ck-nan2 >nan2.log 2>&1 ||
  { cat nan2.log; fail "a NaN in a variable the model does not read stopped training"; }
echo "ok: NaN in point quantities: a target's at inference and in training, an unread one's"
# Validation runs where logged and before every checkpoint: with log_interval 3 and
# checkpoints every 2 steps, step 1 has no validation columns, step 2 has them.
mpi 2 "$bin/tessera-train" cfg.toml --train.steps=4 --train.log_interval=3 \
  --train.checkpoint_dir=ck-val --train.metrics_csv=val.csv >val.log 2>&1 ||
  { cat val.log; fail "training with log_interval 3"; }
[ "$(awk -F, '$1 == 1 {print $5}' val.csv)" = "" ] && [ -n "$(awk -F, '$1 == 2 {print $5}' val.csv)" ] ||
  { cat val.csv; fail "step 2's checkpoint was not validated, or step 1 was"; }
# A validation split that rounds to no sample is said as such (not as a split of 0).
mpi 1 "$bin/tessera-prep" generate darcy --grid 16x16 --samples 2 --out two.h5 --quiet ||
  fail "tessera-prep generate darcy (2 samples)"
mpi 1 "$bin/tessera-train" cfg.toml --data.path=two.h5 --train.batch_size=1 --train.steps=1 \
  --train.validation_split=0.2 --train.checkpoint_dir=ck-two --train.metrics_csv= >two.log 2>&1 ||
  { cat two.log; fail "training on 2 samples"; }
grep -q "no validation (train.validation_split = 0.2 of 2 samples rounds to none)" two.log ||
  { cat two.log; fail "the split that rounds to none was not said"; }
# More neighbours than a cloud has points: said, and each point takes the whole cloud.
mpi 1 "$bin/tessera-train" pts.toml --model.type=pointconv --model.neighbours=400 \
  --train.steps=1 --train.checkpoint_dir=ck-pc >pc.log 2>&1 || { cat pc.log; fail "pointconv"; }
grep -q "warning: model.neighbours = 400 is more than the 300 points of a cloud" pc.log ||
  { cat pc.log; fail "no warning of more neighbours than points"; }
# Its inputs in another order on resume: said as the fields (not as its coordinates' offset).
expect_error 1 "the checkpoint was trained on the fields 'coords', 'f' -> 'f_smooth' (data.inputs -> data.targets), this run reads 'f', 'coords' -> 'f_smooth'" \
  pts.toml --model.type=pointconv --model.neighbours=400 '--data.inputs=["f","coords"]' \
  --train.steps=2 --train.checkpoint_dir=ck-pc --resume
# A point cloud without its coordinates: /points/coords named, not a grid field.
/usr/bin/python3 -c "
import h5py, shutil
shutil.copy('pts_test.h5', 'pts_nocoords.h5')
with h5py.File('pts_nocoords.h5', 'r+') as f:
    del f['points/coords']" || fail "h5py (a cloud without coords)"
out=$(mpi 2 "$bin/tessera-infer" --checkpoint ck-pc/ckpt_00000001.h5 --input pts_nocoords.h5 \
  --output nocoords_pred.h5 2>&1) && fail "tessera-infer took a cloud without coordinates"
echo "$out" | grep "^tessera-infer: error" | grep -q "'coords' (the points' coordinates) not found: no dataset '/points/coords'" ||
  { echo "$out"; fail "a cloud without coordinates was not said as such"; }
# More slices than a cloud has points: said (the cost grows with them, nothing else does).
mpi 1 "$bin/tessera-train" pts.toml --model.slices=400 --train.steps=1 \
  --train.checkpoint_dir=ck-sl >sl.log 2>&1 || { cat sl.log; fail "transolver, 400 slices"; }
grep -q "warning: model.slices = 400 is more than the 300 points of a cloud" sl.log ||
  { cat sl.log; fail "no warning of more slices than points"; }
# A target that is an input too: said (the model learns to copy it).
mpi 1 "$bin/tessera-train" pts.toml '--data.inputs=["coords","f"]' --data.targets=f \
  --train.steps=1 --train.checkpoint_dir=ck-copy >copy.log 2>&1 || { cat copy.log; fail "f -> f"; }
grep -q "warning: data.targets names 'f', which data.inputs names too" copy.log ||
  { cat copy.log; fail "no warning of a target that is an input"; }
# The coordinates as the target: their truth is in the file, so the error is reported.
mpi 1 "$bin/tessera-train" pts.toml --data.targets=coords --train.steps=1 \
  --train.checkpoint_dir=ck-xyz >xyz.log 2>&1 || { cat xyz.log; fail "training on coords"; }
mpi 1 "$bin/tessera-infer" --checkpoint ck-xyz/ckpt_00000001.h5 --input pts_test.h5 \
  --output xyz_pred.h5 >xyz_infer.log 2>&1 || { cat xyz_infer.log; fail "tessera-infer (coords)"; }
grep -q "mean relative L2 error" xyz_infer.log || { cat xyz_infer.log; fail "no error for coords"; }
echo "ok: coords as the target: inference reports its error"
echo "train_cli: all passed"
