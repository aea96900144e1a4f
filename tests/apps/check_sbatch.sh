#!/usr/bin/env bash
# Static checks of the SLURM templates (no SLURM here): valid bash, one rank per GPU
# (--ntasks-per-node equals --gpus-per-node), #SBATCH lines before the first command,
# srun launches the app (ending the step when a rank dies), and the usage message appears without arguments.
# With stand-ins for srun and scontrol: the run folder, resuming a requeued job (its own
# checkpoint folder or the user's), and the time limit's warning passed on and requeued.
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
  [[ $out == usage:\ sbatch\ scripts/slurm/* ]] ||
    fail "$f: no usage message naming the template without arguments (got: $out)"
  # The step takes the job's tasks: a fixed --ntasks-per-node fallback would override --ntasks.
  [[ $srun_cmd != *--ntasks-per-node* ]] || fail "$f: srun sets --ntasks-per-node itself"
done
# The launch, with srun standing in: TESSERA_RUN_DIR continues an earlier run in its folder.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "$@"\n' >"$tmp/srun" && chmod +x "$tmp/srun"
out=$(cd "$tmp" && PATH="$tmp:$PATH" TESSERA_RUN_DIR="$tmp/runs/7" bash "$dir/train.sbatch" c.toml --train.resume=true)
[[ $out == *"--train.checkpoint_dir=$tmp/runs/7/checkpoints --train.metrics_csv=$tmp/runs/7/metrics.csv --train.resume=true"* ]] ||
  fail "train.sbatch with TESSERA_RUN_DIR: $out"
# A job requeued before its first checkpoint starts over, its metrics kept aside; after it,
# resumes (SLURM_RESTART_COUNT > 0).
mkdir -p "$tmp/runs/42/checkpoints" && echo "step" >"$tmp/runs/42/metrics.csv"
out=$(cd "$tmp" && PATH="$tmp:$PATH" SLURM_JOB_ID=42 SLURM_RESTART_COUNT=1 bash "$dir/train.sbatch" c.toml)
[[ $out != *--train.resume=true* && -f $tmp/runs/42/metrics.before-restart-1.csv && ! -e $tmp/runs/42/metrics.csv ]] ||
  fail "train.sbatch requeued without a checkpoint: $out"
# The user's own checkpoint folder is where a requeued job looks.
mkdir -p "$tmp/mine" && touch "$tmp/mine/ckpt_00000003.h5"
out=$(cd "$tmp" && PATH="$tmp:$PATH" SLURM_JOB_ID=42 SLURM_RESTART_COUNT=1 bash "$dir/train.sbatch" c.toml \
  --train.checkpoint_dir="$tmp/mine")
[[ $out == *"--train.checkpoint_dir=$tmp/mine --train.resume=true"* ]] ||
  fail "train.sbatch after a requeue does not resume from the user's checkpoint folder: $out"
touch "$tmp/runs/42/checkpoints/ckpt_00000007.h5"
out=$(cd "$tmp" && PATH="$tmp:$PATH" SLURM_JOB_ID=42 SLURM_RESTART_COUNT=2 bash "$dir/train.sbatch" c.toml)
[[ $out == *"--train.metrics_csv=$tmp/runs/42/metrics.csv --train.resume=true"* ]] ||
  fail "train.sbatch after a requeue does not resume: $out"
# The time limit's warning (SIGUSR1 to the script, --signal=B:USR1@...): passed on to srun (a
# stand-in that ends on it, with 0 as tessera-train after its checkpoint), then the job
# requeued; with TESSERA_REQUEUE=0 not requeued, the continuation named.
cat >"$tmp/srun" <<'EOS'
#!/bin/bash
trap 'echo "srun: SIGUSR1 passed on"; exit "${SRUN_STATUS:-0}"' USR1
echo started >"$SRUN_MARK"
for _ in $(seq 300); do sleep 0.1; done
exit 0
EOS
printf '#!/bin/sh\necho "scontrol $*" >>"%s/scontrol.log"\n' "$tmp" >"$tmp/scontrol"
chmod +x "$tmp/srun" "$tmp/scontrol"
# A failure after the warning (status 3) is not requeued.
for requeue in 1 0 failed; do
  rm -f "$tmp/started" "$tmp/scontrol.log"
  status=0
  [[ $requeue == failed ]] && status=3
  PATH="$tmp:$PATH" SLURM_SUBMIT_DIR="$tmp" SRUN_MARK="$tmp/started" SLURM_JOB_ID=42 \
    SRUN_STATUS=$status TESSERA_REQUEUE=${requeue/failed/1} bash "$dir/train.sbatch" c.toml \
    --train.steps=5000 --data.path="my data.h5" >"$tmp/out.txt" 2>&1 &
  job=$!
  for _ in $(seq 100); do [[ -f $tmp/started ]] && break; sleep 0.1; done
  kill -USR1 "$job"
  rc=0
  wait "$job" || rc=$?
  grep -q "srun: SIGUSR1 passed on" "$tmp/out.txt" || fail "the warning did not reach srun: $(cat "$tmp/out.txt")"
  if [[ $requeue == 1 ]]; then
    [[ $rc == 0 ]] && [[ $(cat "$tmp/scontrol.log" 2>/dev/null) == "scontrol requeue 42" ]] ||
      fail "warned job not requeued (exit $rc): $(cat "$tmp/out.txt")"
  elif [[ $requeue == 0 ]]; then
    # The continuation keeps the arguments as submitted (quoted for the shell).
    [[ $rc == 0 && ! -f $tmp/scontrol.log ]] &&
      grep -qF 'c.toml --train.steps=5000 --data.path=my\ data.h5 --train.resume=true' "$tmp/out.txt" ||
      fail "TESSERA_REQUEUE=0: exit $rc, $(cat "$tmp/out.txt")"
  else
    [[ $rc == 3 && ! -f $tmp/scontrol.log ]] && grep -q "failed (status 3) after the time limit's warning: not requeued" "$tmp/out.txt" ||
      fail "a failure after the warning: exit $rc, $(cat "$tmp/out.txt")"
  fi
done
grep -q 'tessera-train" "$config"' "$dir/train.sbatch" || fail "train.sbatch does not run tessera-train CONFIG"
grep -q 'tessera-infer" --checkpoint=' "$dir/infer.sbatch" || fail "infer.sbatch does not run tessera-infer with flags"
echo "sbatch templates OK"
