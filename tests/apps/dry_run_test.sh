#!/usr/bin/env bash
# tessera-train --dry-run against a measured step, for every grid model (UNet, FNO, ViT,
# Transolver): at 1, 2, 4 and 8 ranks, what the dry run says the busiest rank hands to MPI
# equals what the benchmark's training step of the same model hands to it (counted through
# the MPI profiling interface; the halo forced onto MPI messages): point-to-point bytes and
# messages (halo exchanges, ring hops), all-to-all bytes (FFT transposes, Ulysses attention),
# float64 all-reduce bytes (statistics, slice sums, the loss) and the gradient all-reduce
# bytes, which also equal GradSync's own count. The bench's models and the demo configs with
# the overrides below agree (UNet: width 8, depth 3, GroupNorm of 4 groups; FNO: width 16,
# modes 8, 4 layers, projection 32; ViT: dim 32, depth 2, 4 heads, 4x4 patches; Transolver:
# width 32, 2 layers, 4 heads, 16 slices; GELU, float32, relative L2 loss).
# Args: BIN_DIR WORK_DIR MPIEXEC NP_FLAG [launcher flags...]
set -uo pipefail
bin=$1 work=$2 mpiexec=$3 npflag=$4
shift 4
flags=("$@")
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
cd "$work" || exit 1
fail=0
demo=$src/scripts/demo
check() {  # model n grid batch [bench options...]
  local model=$1 n=$2 grid=$3 batch=$4
  shift 4
  local bench_opts=("$@") config dry_opts=()
  case $model in
    unet) config=$demo/darcy_unet.toml ;;
    fno*)
      config=$demo/darcy_fno.toml
      dry_opts=(--model.width=16 --model.modes=8 --model.layers=4 --model.projection=32
        --model.weights=replicated)
      [ "$model" = fno-sharded ] && dry_opts+=(--model.weights=mode_sharded) &&
        bench_opts+=(--fno-weights=mode_sharded)
      ;;
    vit*)
      config=$demo/darcy_vit.toml
      dry_opts=(--model.dim=32 --model.depth=2 --model.heads=4 --model.patch=4)
      [ "$model" = vit-ring ] && dry_opts+=(--model.attention=ring) && bench_opts+=(--vit-attention=ring)
      [ "$model" = vit-learned ] && dry_opts+=(--model.positions=learned) &&
        bench_opts+=(--vit-positions=learned)
      ;;
    transolver)
      config=$demo/darcy_vit.toml
      dry_opts=(--model.type=transolver --model.width=32 --model.layers=2 --model.heads=4
        --model.slices=16)
      ;;
  esac
  local tag=$model-$n
  TESSERA_NODE_SHARED_FREE_BYTES=0 OMP_NUM_THREADS=1 timeout 300 "$mpiexec" "$npflag" "$n" \
    "${flags[@]}" "$bin/tessera-bench" scaling --which=strong --models="${model%-*}" \
    --strong="$grid" --batch="$batch" --reps=1 --warmup=1 "${bench_opts[@]}" \
    --out="measured-$tag.json" >"bench-$tag.log" 2>&1 ||
    { cat "bench-$tag.log"; echo "dry_run_test: the $model bench failed at $n ranks"; fail=1; return; }
  "$bin/tessera-train" "$config" --dry-run=json --grid="$grid" --ranks="$n" --batch="$batch" \
    "${dry_opts[@]}" >"dry-$tag.json" 2>"dry-$tag.log" ||
    { cat "dry-$tag.log"; echo "dry_run_test: the $model dry run failed at $n ranks"; fail=1; return; }
  python3 - "measured-$tag.json" "dry-$tag.json" "$n" "$grid" "$model" <<'PY' || fail=1
import json, sys
m = json.load(open(sys.argv[1]))["rows"][0]
d = json.load(open(sys.argv[2]))
n, model = int(sys.argv[3]), sys.argv[5]
pairs = [("point-to-point bytes (halo, ring)", d["halo_bytes"] + d["ring_bytes"], m["mpi_send_bytes"]),
         ("point-to-point messages", d["halo_messages"] + d["ring_messages"], m["mpi_sends"]),
         ("all-to-all bytes", d["alltoall_bytes"], m["mpi_alltoall_bytes"]),
         ("all-gather bytes", d["allgather_bytes"], m["mpi_allgather_bytes"]),
         ("reduce-scatter bytes", d["reduce_scatter_bytes"], m["mpi_reduce_scatter_bytes"]),
         ("gradient all-reduce bytes (GradSync)", d["grad_allreduce_bytes"], m["grad_allreduce_bytes"]),
         ("gradient all-reduce bytes (MPI)", d["grad_allreduce_bytes"], m["mpi_iallreduce_bytes"])]
if n > 1:  # one rank's loss still calls MPI_Allreduce on its one-rank communicator
    pairs.append(("float64 all-reduce bytes (statistics, slices, loss)",
                  d["allreduce_bytes"] + d["loss_allreduce_bytes"], m["mpi_allreduce_f64_bytes"]))
bad = [p for p in pairs if p[1] != p[2]]
for what, dry, measured in pairs:
    print(f"dry_run_test: {model}, {n} ranks, {sys.argv[4]}: {what}: dry run {dry}, "
          f"measured {measured}" + ("" if dry == measured else "  MISMATCH"))
# The training memory estimate (parameters with gradients and optimizer state, activations)
# against the step's measured peak of tracked memory, busiest rank.
est = d["memory_parameters_bytes"] + d["memory_activations_bytes"]
peak = m["peak_mib"] * 2**20
print(f"dry_run_test: {model}, {n} ranks, {sys.argv[4]}: memory estimate {est / 2**20:.3f} MiB, "
      f"measured peak {peak / 2**20:.3f} MiB")
if not (peak <= 1.15 * est and est <= 2.0 * peak):
    print("  MISMATCH: the estimate does not bound the peak closely")
    bad.append(("memory", est, peak))
moved = (d["halo_bytes"] + d["ring_bytes"] + d["alltoall_bytes"] + d["allgather_bytes"] +
         d["allreduce_bytes"])
if n > 1 and moved == 0:
    print(f"dry_run_test: {model}: no activation traffic at several ranks")
    sys.exit(1)
sys.exit(1 if bad else 0)
PY
}
for model in unet fno vit transolver; do
  check $model 1 64x32 2
  check $model 2 64x32 2
  check $model 4 64x32 2
  check $model 8 128x16 1
done
check vit-ring 4 64x32 2
check fno-sharded 4 64x32 2
check vit-learned 4 64x32 2
# Ranks holding no cell at the UNet's coarsest level, and no patch of the ViT's.
check unet 4 16x32 2
check vit 3 8x32 2

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
expect_error "--grid=0x32: every extent is at least 1" --dry-run=table --grid=0x32
expect_error "--grid=2x2x2x2: 1 to 3 spatial extents" --dry-run=table --grid=2x2x2x2
expect_error "not divisible" --dry-run=table --grid=60x32
expect_error "option --ranks 0: must lie in [1," --dry-run=table --grid=64x32 --ranks=0
expect_error "option --batch -2: must lie in [1," --dry-run=table --grid=64x32 --batch=-2
expect_error "the dry run covers grid inputs" --dry-run=table --grid=64x32 --data.inputs=coords,a
expect_error "dry run: spatial extent 64 (dim 2 of (8, 1, 64, 32)) is not a multiple of model.patch = 65536" \
  --dry-run=table --grid=64x32 --model.type=vit --model.patch=65536
# Any layer of the UNet has a cost: transposed-conv up-sampling and strided-conv down too.
"$bin/tessera-train" "$src/scripts/demo/darcy_unet.toml" --dry-run=json --grid=64x32 --ranks=2 \
  --model.up=transposed_conv --model.down=conv >updown.json 2>&1 ||
  { cat updown.json; echo "dry_run_test: the UNet with transposed/strided convs has no dry run"; fail=1; }
# Recompute: each model's activations estimated lower.
for model in darcy_unet darcy_fno darcy_vit; do
  for rc in false true; do
    "$bin/tessera-train" "$src/scripts/demo/$model.toml" --dry-run=json --grid=64x32 --ranks=2 \
      --train.recompute=$rc >"rc-$model-$rc.json" 2>&1 ||
      { cat "rc-$model-$rc.json"; echo "dry_run_test: $model recompute=$rc has no dry run"; fail=1; }
  done
  python3 - "rc-$model-false.json" "rc-$model-true.json" <<'PY' ||
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["activation_bytes"] < 0.9 * a["activation_bytes"], (a["activation_bytes"], b["activation_bytes"])
# The replay's cost: none without recompute; with it, a third of the replayed layers' flops,
# which are some of the step's (the stem and head lie outside the segments).
assert a["replay_flops"] == 0 and a["replay_halo_bytes"] == 0, a["replay_flops"]
replayed = [l for l in b["layers"] if l["segment"] >= 0]
want = sum(l["flops"] for l in replayed) / 3
assert replayed and abs(b["replay_flops"] - want) <= 1e-9 * want, (b["replay_flops"], want)
assert 0 < b["replay_flops"] < b["flops"] / 3, (b["replay_flops"], b["flops"])
assert b["flops"] == a["flops"], "recompute changes the step's own flops"
PY
    { echo "dry_run_test: $model: recompute's estimates (activations lower, replay flops)"; fail=1; }
done
# train.accumulate: a micro-batch's figures, said as such; a given mesh.shape (the dry run
# splits as "auto") is named on stderr, the JSON on stdout whole.
"$bin/tessera-train" "$src/scripts/demo/darcy_unet.toml" --dry-run=json --grid=64x32 --ranks=2 \
  --batch=8 --train.accumulate=4 --mesh.shape=domain=2 >acc.json 2>acc.log ||
  { cat acc.log; echo "dry_run_test: no dry run with train.accumulate"; fail=1; }
"$bin/tessera-train" "$src/scripts/demo/darcy_unet.toml" --dry-run=json --grid=64x32 --ranks=2 \
  --batch=2 >b2.json 2>/dev/null || { echo "dry_run_test: no dry run of batch 2"; fail=1; }
grep -q 'warning: mesh.shape = "domain=2" is not used by --dry-run' acc.log ||
  { cat acc.log; echo "dry_run_test: a given mesh.shape was not named"; fail=1; }
python3 - acc.json b2.json <<'PY' || { echo "dry_run_test: train.accumulate's figures"; fail=1; }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["micro_batches"] == 4 and b["micro_batches"] == 1, (a["micro_batches"], b["micro_batches"])
assert a["input_shape"][0] == 2 and a["flops"] == b["flops"], (a["input_shape"], a["flops"], b["flops"])
assert a["memory_activations_bytes"] == b["memory_activations_bytes"]
PY
[ $fail = 0 ] && echo "dry_run_test: passed" || echo "dry_run_test: FAILED"
exit $fail
