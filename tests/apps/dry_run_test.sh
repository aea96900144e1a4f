#!/usr/bin/env bash
# tessera-train --dry-run against a measured step: at 1, 2, 4 and 8 ranks,
# the halo bytes and messages the dry run reports equal what the busiest rank hands
# to MPI in the benchmark's UNet training step (the halo forced onto MPI messages, counted
# through the MPI profiling interface), and its gradient all-reduce bytes equal both
# GradSync's count and the MPI-level count. The bench's UNet and the demo config's agree
# (width 8, depth 3, GroupNorm with 4 groups, GELU, pool/upsample, float32).
# Args: BIN_DIR WORK_DIR MPIEXEC NP_FLAG [launcher flags...]
set -uo pipefail
bin=$1 work=$2 mpiexec=$3 npflag=$4
shift 4
flags=("$@")
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
cd "$work" || exit 1
fail=0
check() {  # n grid batch
  local n=$1 grid=$2 batch=$3
  TESSERA_NODE_SHARED_FREE_BYTES=0 OMP_NUM_THREADS=1 timeout 300 "$mpiexec" "$npflag" "$n" \
    "${flags[@]}" "$bin/tessera-bench" scaling --which=strong --models=unet --strong="$grid" \
    --batch="$batch" --reps=1 --warmup=1 --out="measured-$n.json" >"bench-$n.log" 2>&1 ||
    { cat "bench-$n.log"; echo "dry_run_test: the bench failed at $n ranks"; fail=1; return; }
  "$bin/tessera-train" "$src/scripts/demo/darcy_unet.toml" --dry-run=json --grid="$grid" \
    --ranks="$n" --batch="$batch" >"dry-$n.json" 2>"dry-$n.log" ||
    { cat "dry-$n.log"; echo "dry_run_test: the dry run failed at $n ranks"; fail=1; return; }
  python3 - "measured-$n.json" "dry-$n.json" "$n" "$grid" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))["rows"][0]
d = json.load(open(sys.argv[2]))
pairs = [("halo bytes", d["halo_bytes"], m["mpi_send_bytes"]),
         ("halo messages", d["halo_messages"], m["mpi_sends"]),
         ("gradient all-reduce bytes (GradSync)", d["grad_allreduce_bytes"], m["grad_allreduce_bytes"]),
         ("gradient all-reduce bytes (MPI)", d["grad_allreduce_bytes"], m["mpi_iallreduce_bytes"])]
bad = [p for p in pairs if p[1] != p[2]]
for what, dry, measured in pairs:
    print(f"dry_run_test: {sys.argv[3]} ranks, {sys.argv[4]}: {what}: dry run {dry}, "
          f"measured {measured}" + ("" if dry == measured else "  MISMATCH"))
if int(sys.argv[3]) > 1 and d["halo_bytes"] == 0:
    print("dry_run_test: no halo bytes at several ranks")
    sys.exit(1)
sys.exit(1 if bad else 0)
PY
}
check 1 64x32 2
check 2 64x32 2
check 4 64x32 2
check 8 128x16 1

# The rank count defaults to the ranks launched; one report, from rank 0.
timeout 120 "$mpiexec" "$npflag" 2 "${flags[@]}" "$bin/tessera-train" \
  "$src/scripts/demo/darcy_unet.toml" --dry-run=json --grid=64x32 >launched.json 2>&1
python3 -c 'import json,sys; d=json.load(open("launched.json")); sys.exit(d["ranks"] != 2)' ||
  { cat launched.json; echo "dry_run_test: under 2 launched ranks, not one report for 2 ranks"; fail=1; }
# Bad requests fail with a message.
expect_error() {  # message args...
  local msg=$1
  shift
  if "$bin/tessera-train" "$src/scripts/demo/darcy_unet.toml" "$@" >err.log 2>&1 ||
    ! grep -qF -- "$msg" err.log; then
    cat err.log
    echo "dry_run_test: '$*' should fail with: $msg"
    fail=1
  fi
}
expect_error "the format is table or json" --dry-run=xml --grid=64x32
expect_error "--dry-run needs --grid" --dry-run=table
expect_error "belong to --dry-run" --grid=64x32
expect_error "not divisible" --dry-run=table --grid=60x32
expect_error "fewer than its 16 domain ranks" --dry-run=table --grid=64x32 --ranks=16
expect_error "the dry run covers UNets" --dry-run=table --grid=64x32 --model.type=fno
expect_error "model.up = " --dry-run=table --grid=64x32 --model.up=transposed_conv
[ $fail = 0 ] && echo "dry_run_test: passed" || echo "dry_run_test: FAILED"
exit $fail
