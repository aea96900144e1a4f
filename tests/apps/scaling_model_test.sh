#!/usr/bin/env bash
# scripts/scaling_model.py end to end: the scaling bench of every model at 1 and 2 ranks on a
# small grid, then `check` predicts each of its rows (one table row per measured row, with
# a ratio; the deviation itself is a figure of the quiet-machine benchmark, not asserted
# here), and `predict` tabulates each model on the 8x H200 file to 1024 ranks (strong on
# 8192x1024, weak on 16x1024 per rank) with finite times and efficiencies in [0, 1.05]; a
# split the model cannot take is a row saying why. Bad arguments fail with a message.
# Args: BIN_DIR WORK_DIR MPIEXEC NP_FLAG [launcher flags...]
set -uo pipefail
bin=$1 work=$2 mpiexec=$3 npflag=$4
shift 4
flags=("$@")
src=$(cd "$(dirname "$0")/../.." && pwd)
model=$src/scripts/scaling_model.py
mkdir -p "$work"
cd "$work" || exit 1
fail=0
for n in 1 2; do
  OMP_NUM_THREADS=1 timeout 300 "$mpiexec" "$npflag" "$n" "${flags[@]}" "$bin/tessera-bench" \
    scaling --strong=64x32 --weak=32x32 --reps=1 --warmup=1 --out="bench-$n.json" >"bench-$n.log" 2>&1 ||
    { cat "bench-$n.log"; echo "scaling_model_test: the bench failed at $n ranks"; exit 1; }
done
python3 "$model" check --train "$bin/tessera-train" --machine "$src/scripts/machines/cpu-2core.json" \
  bench-1.json bench-2.json >check.md 2>check.err
rc=$?
cat check.md
if [ $rc -gt 1 ]; then cat check.err; echo "scaling_model_test: check crashed"; fail=1; fi
python3 - check.md <<'PY' || fail=1
import sys
rows = [l for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| model")]
want = {(m, s, r) for m in ("unet", "fno", "vit", "transolver") for s in ("strong", "weak")
        for r in ("1", "2")}
got = set()
for l in rows:
    c = [x.strip() for x in l.strip().strip("|").split("|")]
    got.add((c[0], c[1], c[2]))
    if not float(c[5]) > 0 or not float(c[6]) > 0:
        print("scaling_model_test: no prediction in", l.strip()); sys.exit(1)
if got != want:
    print("scaling_model_test: rows", sorted(got), "expected", sorted(want)); sys.exit(1)
PY
for m in unet fno vit transolver; do
  for weak in "" --weak; do
    grid=8192x1024
    [ -n "$weak" ] && grid=16x1024
    python3 "$model" predict --train "$bin/tessera-train" --model "$m" $weak \
      --machine "$src/scripts/machines/h200-8x-ib400.json" --grid=$grid >"predict-$m$weak.md" \
      2>&1 || { cat "predict-$m$weak.md"; echo "scaling_model_test: predict $m $weak failed"; fail=1; continue; }
    python3 - "predict-$m$weak.md" <<'PY' || fail=1
import math, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| ranks")]
if len(rows) != 11:
    print(sys.argv[1], ": expected 11 rank counts, got", len(rows)); sys.exit(1)
for l in rows:
    c = [x.strip() for x in l.strip().strip("|").split("|")]
    step, eff = float(c[6]), float(c[7])
    if not (math.isfinite(step) and step > 0 and 0 <= eff <= 1.05):
        print(sys.argv[1], ": bad row", l.strip()); sys.exit(1)
PY
  done
done
if python3 "$model" predict --train "$bin/tessera-train" --machine "$src/scripts/machines/cpu-2core.json" \
  --grid=12x34x5x6 >bad.log 2>&1; then
  echo "scaling_model_test: a 4-D grid for a 2-D model should fail"; fail=1
fi
grep -q "grid '12x34x5x6' is not HxW or DxHxW" bad.log ||
  { cat bad.log; echo "scaling_model_test: no message for a bad grid"; fail=1; }
# A grid the model cannot take: each row says why (the table whole, exit 0).
python3 "$model" predict --train "$bin/tessera-train" --ranks=1,2 \
  --machine "$src/scripts/machines/cpu-2core.json" --grid=63x64 >odd.md 2>&1 &&
  [ "$(grep -c "^| [12] | 63x64 | cannot: dry run: spatial extent 63 .* is not divisible by 2^depth" odd.md)" = 2 ] ||
  { cat odd.md; echo "scaling_model_test: no row saying why 63x64 cannot split"; fail=1; }
# Bad inputs: one line each, no Python traceback.
echo '{}' >empty-machine.json
for args in "predict --machine missing.json --grid=64x64" "predict --machine empty-machine.json --grid=64x64 --ranks=1" \
    "predict --machine $src/scripts/machines/cpu-2core.json --grid=64x64 --ranks=x" \
    "check --machine $src/scripts/machines/cpu-2core.json missing.json"; do
  # shellcheck disable=SC2086
  if python3 "$model" $args --train "$bin/tessera-train" >bad.log 2>&1 || grep -q Traceback bad.log ||
    [ "$(grep -c "^scaling_model.py: " bad.log)" != 1 ]; then
    cat bad.log; echo "scaling_model_test: '$args' gave no single error line"; fail=1
  fi
done
# More ranks than the ViT has patch rows: the last ranks hold none, and the prediction says
# what that costs rather than refusing.
python3 "$model" predict --train "$bin/tessera-train" --model vit --ranks=1,3 \
  --machine "$src/scripts/machines/cpu-2core.json" --grid=8x32 >split.md 2>&1 &&
  grep -q "^| 3 | 8x32 | [0-9]" split.md ||
  { cat split.md; echo "scaling_model_test: no prediction for 3 ranks over 2 patch rows"; fail=1; }
[ $fail = 0 ] && echo "scaling_model_test: passed" || echo "scaling_model_test: FAILED"
exit $fail
