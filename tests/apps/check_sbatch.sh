#!/usr/bin/env bash
# Static checks of the SLURM templates (no SLURM here): valid bash, one rank per GPU
# (--ntasks-per-node equals --gpus-per-node), #SBATCH lines before the first command,
# srun launches the app (ending the step when a rank dies), and the usage message appears without arguments.
set -euo pipefail
dir=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
for f in "$dir"/train.sbatch "$dir"/infer.sbatch; do
  [[ -f $f ]] || fail "$f missing"
  bash -n "$f" || fail "$f: bash syntax"
  tasks=$(sed -n 's/^#SBATCH --ntasks-per-node=\([0-9]*\)$/\1/p' "$f")
  gpus=$(sed -n 's/^#SBATCH --gpus-per-node=\([0-9]*\)$/\1/p' "$f")
  [[ -n $tasks && $tasks == "$gpus" ]] || fail "$f: --ntasks-per-node ($tasks) != --gpus-per-node ($gpus)"
  first_cmd=$(grep -n -v -E '^(#|[[:space:]]*$)' "$f" | head -1 | cut -d: -f1)
  last_sbatch=$(grep -n '^#SBATCH' "$f" | tail -1 | cut -d: -f1)
  (( last_sbatch < first_cmd )) || fail "$f: #SBATCH after the first command (SLURM ignores it)"
  grep -q '^srun ' "$f" || fail "$f: no srun launch"
  # The srun command with its continuation lines joined, so the flag is checked on it.
  srun_cmd=$(sed -n '/^srun /,/[^\\]$/p' "$f" | tr -d '\\\n')
  [[ $srun_cmd == *--kill-on-bad-exit=1* ]] ||
    fail "$f: srun without --kill-on-bad-exit=1 (a dead rank would leave the others waiting)"
  out=$(bash "$f" 2>&1 || true)
  [[ $out == usage:* ]] || fail "$f: no usage message without arguments (got: $out)"
done
grep -q 'tessera-train" "$config"' "$dir/train.sbatch" || fail "train.sbatch does not run tessera-train CONFIG"
grep -q 'tessera-infer" --checkpoint=' "$dir/infer.sbatch" || fail "infer.sbatch does not run tessera-infer with flags"
echo "sbatch templates OK"
