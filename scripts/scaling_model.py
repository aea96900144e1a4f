#!/usr/bin/env python3
"""Performance model of a training step: step time, efficiency and memory per device for
strong and weak scaling, from the volumes tessera-train --dry-run reports and a machine
description (scripts/machines/*.json).

  scaling_model.py predict --machine M.json --grid HxW [--batch N] [--ranks 1,2,...,1024]
                           [--weak] [--model unet|fno|vit|transolver] [--config CFG.toml]
  scaling_model.py check --machine M.json bench-scaling.json [more runs ...]

The model, per step of the busiest rank (every figure from the dry run):
  compute   = sum over layers of max(FLOPs / rate, bytes / mem_bw_bytes_per_s), the rate
              flops_per_s, or flops_per_s_by_op[prefix] for ops whose name starts with it
  halo      = sum over layers of messages * latency + halo bytes / link bandwidth
              (the inter-node link once the ranks span nodes: a slab's neighbour is there)
  all-to-all= FFT transposes and Ulysses attention: per call (p-1) * latency + bytes / bw;
              ring hops: messages * latency + bytes / bw; all-gathers: (p-1) * block / bw +
              log2(p) latencies; reduce-scatters: (p-1)/p * buffer / bw + log2(p) latencies
  all-reduce= gradients: ring, 2 (p-1)/p * bytes / bandwidth + 2 log2(p) * latency (within a
              node, then across nodes); activations (statistics, slice sums) and the loss:
              2 (p-1)/p * bytes / bw + calls * 2 log2(p) * latency
  step      = compute + halo + all-to-all + all-reduce (no overlap assumed)
  memory    = the dry run's training memory per rank (tessera-train's own estimate: kept
              outputs and saved tensors, backward's transient gradients, the largest
              scratch, the batch, parameters with gradients and optimizer state; the host
              kernels' own scratch, the convolutions' channels-last copies, only where the
              machine file says "host_kernels": true)
Ranks beyond cores_per_node (CPU machines) share the cores: every term takes
ranks/cores times longer, and each synchronizing round (a halo exchange; an all-to-all's
p-1 rounds; an all-reduce's, all-gather's or reduce-scatter's log2 p; a ring hop) waits
timeslice_s * (1 - cores/ranks) for its peer to be scheduled. Only the Python standard library; runs the dry run itself.
The models of the scaling benchmark are the demo configs with the bench's sizes (MODELS).
"""
import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.join(HERE, "demo")
# Each model of tessera-bench scaling as a tessera-train config and overrides (the bench's
# sizes: apps/bench/bench_scaling.cpp's defaults).
MODELS = {
    "unet": (os.path.join(DEMO, "darcy_unet.toml"), []),
    "fno": (os.path.join(DEMO, "darcy_fno.toml"),
            ["--model.width=16", "--model.modes=8", "--model.layers=4", "--model.projection=32",
             "--model.weights=replicated"]),
    "vit": (os.path.join(DEMO, "darcy_vit.toml"),
            ["--model.dim=32", "--model.depth=2", "--model.heads=4", "--model.patch=4"]),
    "transolver": (os.path.join(DEMO, "darcy_vit.toml"),
                   ["--model.type=transolver", "--model.width=32", "--model.layers=2",
                    "--model.heads=4", "--model.slices=16"]),
}


class DryRunError(Exception):
    """tessera-train refused a configuration: its error line."""


def dry_run(train, config, grid, ranks, batch, extra=()):
    """tessera-train --dry-run=json for one configuration -> dict; DryRunError with the
    program's error line when it refuses it."""
    cmd = [train, config, "--dry-run=json", f"--grid={grid}", f"--ranks={ranks}",
           f"--batch={batch}", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.splitlines() if "error" in ln] or p.stderr.splitlines()
        why = lines[0] if lines else f"exit {p.returncode}"
        raise DryRunError(why.replace("tessera-train: error: ", ""))
    return json.loads(p.stdout)


def ring_allreduce(nbytes, p, bw, lat):
    if p <= 1 or nbytes == 0:
        return 0.0
    return 2 * (p - 1) / p * nbytes / bw + 2 * math.log2(p) * lat


def rate_of(m, op):
    """The FLOP rate of an op: flops_per_s_by_op's longest matching prefix, else flops_per_s."""
    best, rate = -1, m["flops_per_s"]
    for prefix, r in m.get("flops_per_s_by_op", {}).items():
        if op.startswith(prefix) and len(prefix) > best:
            best, rate = len(prefix), r
    return rate


def predict(m, v):
    """Machine m and dry-run volumes v -> dict of seconds and bytes."""
    n = v["ranks"]
    per_node = min(n, m["ranks_per_node"])
    nodes = math.ceil(n / m["ranks_per_node"])
    cores = m.get("cores_per_node") or 0
    share = max(1.0, per_node / cores) if cores else 1.0  # time-slicing of shared cores
    # With recompute, a replayed layer's forward runs again in backward (replay_flops, a third
    # of its step's; older dry runs have none).
    compute = sum(max((l["flops"] + l.get("replay_flops", 0)) / rate_of(m, l.get("op", "")),
                      l["bytes"] / m["mem_bw_bytes_per_s"]) for l in v["layers"])
    off_node = nodes > 1
    bw = m["inter_bw_bytes_per_s"] if off_node else m["intra_bw_bytes_per_s"]
    lat = m["inter_latency_s"] if off_node else m["intra_latency_s"]
    logp = math.log2(n) if n > 1 else 0.0
    halo = sum(l["halo_messages"] * lat + (l["halo_bytes"] + l.get("replay_halo_bytes", 0)) / bw
               for l in v["layers"])
    t = {k: sum(l.get(k, 0) for l in v["layers"]) for k in (
        "alltoall_bytes", "alltoalls", "ring_bytes", "ring_messages", "allgather_bytes",
        "allgathers", "reduce_scatter_bytes", "reduce_scatters", "allreduce_bytes", "allreduces")}
    alltoall = 0.0
    if n > 1:
        alltoall = (t["alltoalls"] * (n - 1) * lat + t["alltoall_bytes"] / bw +
                    t["ring_messages"] * lat + t["ring_bytes"] / bw +
                    (n - 1) * t["allgather_bytes"] / bw + t["allgathers"] * logp * lat +
                    (n - 1) / n * t["reduce_scatter_bytes"] / bw +
                    t["reduce_scatters"] * logp * lat)
    # The gradient all-reduce, once a step; the activations' and the loss's, per micro-batch.
    g = v["grad_allreduce_bytes"]
    grad_ar = ring_allreduce(g, per_node, m["intra_bw_bytes_per_s"], m["intra_latency_s"])
    if nodes > 1:
        grad_ar += ring_allreduce(g, nodes, m["inter_bw_bytes_per_s"], m["inter_latency_s"])
    act_ar = 0.0
    loss_calls = 1 if v.get("loss_allreduce_bytes", 0) else 0
    if n > 1:
        act = t["allreduce_bytes"] + v.get("loss_allreduce_bytes", 0)
        act_ar = 2 * (n - 1) / n * act / bw + (t["allreduces"] + loss_calls) * 2 * logp * lat
    # Ranks time-sliced on fewer cores: each synchronizing round of a collective waits for
    # its peer to be scheduled, on average the descheduled fraction of a time slice.
    wait = {"halo": 0.0, "alltoall": 0.0, "grad": 0.0, "act": 0.0}
    if cores and per_node > cores and n > 1:
        q = m.get("timeslice_s", 0.0) * (1 - cores / per_node)
        wait["halo"] = q * sum(l["halo_exchanges"] for l in v["layers"])
        wait["alltoall"] = q * (t["alltoalls"] * (n - 1) + t["ring_messages"] +
                                (t["allgathers"] + t["reduce_scatters"]) * logp)
        wait["grad"] = q * logp * (1 if g else 0)
        wait["act"] = q * logp * (t["allreduces"] + loss_calls)
    # One estimate of memory, tessera-train's (apps/common/memory_estimate.cpp), not a second.
    memory = v["memory_parameters_bytes"] + v["memory_activations_bytes"]
    if not m.get("host_kernels", False):  # a device run takes no host kernel scratch
        memory -= v.get("memory_host_only_bytes", 0)
    # train.accumulate: the layers' figures are a micro-batch's, run k times a step.
    k = v.get("micro_batches", 1)
    out = {"compute": k * compute * share, "halo": k * (halo * share + wait["halo"]),
           "alltoall": k * (alltoall * share + wait["alltoall"]),
           "allreduce": grad_ar * share + wait["grad"] + k * (act_ar * share + wait["act"]),
           "memory": memory}
    out["step"] = out["compute"] + out["halo"] + out["alltoall"] + out["allreduce"]
    return out


def parse_grid(text):
    try:
        g = [int(x) for x in text.lower().split("x")]
    except ValueError:
        g = []
    if not 1 <= len(g) <= 3 or min(g) < 1:
        raise SystemExit(f"scaling_model.py: grid '{text}' is not HxW or DxHxW of extents >= 1")
    return g


def parse_ranks(text):
    try:
        r = [int(x) for x in text.split(",")]
    except ValueError:
        r = []
    if not r or min(r) < 1:
        raise SystemExit(f"scaling_model.py: --ranks '{text}' is not a list of rank counts >= 1")
    return r


def cmd_predict(a, m):
    ranks = parse_ranks(a.ranks)
    base = parse_grid(a.grid)
    if a.batch < 1:
        raise SystemExit(f"scaling_model.py: --batch {a.batch}: at least 1")
    kind = "weak (grid per rank)" if a.weak else "strong (global grid)"
    config, extra = model_config(a)
    print(f"# {m['name']}\n# {a.model}, {kind}: {a.grid}, batch {a.batch}\n")
    print("| ranks | global grid | compute ms | halo ms | all-to-all ms | all-reduce ms | step ms "
          "| efficiency | memory per rank GB | fits |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    t1 = None
    for n in ranks:
        g = list(base)
        if a.weak:
            g[0] *= n
        grid = "x".join(str(x) for x in g)
        try:
            v = dry_run(a.train, config, grid, n, a.batch, extra)
        except DryRunError as e:  # a split this model cannot take: a row that says why
            print(f"| {n} | {grid} | cannot: {e} |" + " |" * 7)
            continue
        p = predict(m, v)
        if t1 is None:
            t1, n1 = p["step"], n
        eff = (t1 / p["step"]) if a.weak else (t1 * n1 / (n * p["step"]))
        fits = "yes" if p["memory"] <= m["memory_bytes"] else "no"
        print(f"| {n} | {grid} | {p['compute'] * 1e3:.4g} | {p['halo'] * 1e3:.3g} | "
              f"{p['alltoall'] * 1e3:.3g} | {p['allreduce'] * 1e3:.3g} | {p['step'] * 1e3:.4g} | "
              f"{eff:.2f} | {p['memory'] / 1e9:.3g} | {fits} |")


def model_config(a):
    """(config, overrides) of --model, or --config as given."""
    if a.config:
        return a.config, []
    return MODELS[a.model]


def read_json(path, what):
    """A JSON object from path, or one error line."""
    try:
        with open(path) as f:
            v = json.load(f)
    except OSError as e:
        raise SystemExit(f"scaling_model.py: cannot read the {what} {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise SystemExit(f"scaling_model.py: the {what} {path} is no JSON: {e}")
    if not isinstance(v, dict):
        raise SystemExit(f"scaling_model.py: the {what} {path} is no JSON object")
    return v


def median_rows(paths):
    """Strong and weak rows of the models; per (model, scaling, ranks) over several runs, the
    row of the run with the median step time (the lower one of an even count)."""
    groups = {}
    for path in paths:
        for r in read_json(path, "bench file").get("rows", []):
            if r.get("scaling") in ("strong", "weak") and r.get("model", "unet") in MODELS:
                key = (r.get("model", "unet"), r["scaling"], r["ranks"], r["shape"])
                groups.setdefault(key, []).append(r)
    rows = []
    for runs in groups.values():
        runs.sort(key=lambda r: r["t_step_s"])
        rows.append(runs[(len(runs) - 1) // 2])
    return rows


def cmd_check(a, m):
    rows = median_rows(a.bench)
    if not rows:
        raise SystemExit(f"scaling_model.py: no strong or weak rows of {', '.join(MODELS)} in "
                         f"{' '.join(a.bench)}")
    print(f"# {m['name']}\n")
    print("| model | scaling | ranks | shape | measured ms | predicted ms | predicted / measured "
          "| measured MiB | predicted MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = worst_mem = 0.0
    order = list(MODELS)
    for r in sorted(rows, key=lambda r: (order.index(r.get("model", "unet")), r["scaling"],
                                         r["ranks"])):
        model = r.get("model", "unet")
        shape = [int(x) for x in r["shape"].strip("()").split(",")]
        grid = "x".join(str(x) for x in shape[2:])
        config, extra = MODELS[model]
        try:
            v = dry_run(a.train, config, grid, r["ranks"], shape[0], extra)
        except DryRunError as e:
            raise SystemExit(f"scaling_model.py: the row {model} {r['scaling']} at {r['ranks']} "
                             f"ranks: tessera-train refused it: {e}")
        p = predict(m, v)
        ratio = p["step"] / r["t_step_s"]
        worst = max(worst, abs(ratio - 1))
        worst_mem = max(worst_mem, abs(p["memory"] / 2**20 / r["peak_mib"] - 1))
        print(f"| {model} | {r['scaling']} | {r['ranks']} | {r['shape']} | "
              f"{r['t_step_s'] * 1e3:.4g} | {p['step'] * 1e3:.4g} | {ratio:.2f} | "
              f"{r['peak_mib']:.3g} | {p['memory'] / 2**20:.3g} |")
    print(f"\nlargest deviation of the step time: {worst:.0%} (target: within 25%); of the "
          f"peak memory: {worst_mem:.0%}")
    return 0 if worst <= 0.25 else 1


def main(argv):
    p = argparse.ArgumentParser(prog="scaling_model.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def common(sp):
        sp.add_argument("--machine", required=True, metavar="M.json",
                        help="machine description (scripts/machines/)")
        sp.add_argument("--model", default="unet", choices=sorted(MODELS),
                        help="one of the scaling benchmark's models (default unet)")
        sp.add_argument("--config", metavar="CFG.toml",
                        help="a tessera-train config instead of --model's")
        sp.add_argument("--train", default=os.path.join(
            os.environ.get("TESSERA_BUILD_DIR", "build"), "apps", "tessera-train"),
            help="tessera-train binary (default $TESSERA_BUILD_DIR/apps/tessera-train)")

    pr = sub.add_parser("predict", help="step time, efficiency and memory at each rank count",
                        description="Predicted step time (compute / halo / all-reduce), "
                        "efficiency against the first rank count and memory per rank, as a "
                        "markdown table.")
    common(pr)
    pr.add_argument("--grid", required=True, help="global grid (strong) or grid per rank "
                    "(--weak; the first dim grows with the ranks)")
    pr.add_argument("--batch", type=int, default=1, help="samples per step (default 1)")
    pr.add_argument("--ranks", default="1,2,4,8,16,32,64,128,256,512,1024",
                    help="rank counts (default 1 to 1024 in powers of 2)")
    pr.add_argument("--weak", action="store_true", help="weak scaling")
    ck = sub.add_parser("check", help="predicted against measured steps",
                        description="Predicts every strong and weak row of a "
                        "bench-scaling.json (UNet, FNO, ViT, Transolver) "
                        "and prints predicted against measured (exit 1 when a step time is "
                        "off by more than 25 percent).")
    common(ck)
    ck.add_argument("bench", metavar="bench-scaling.json", nargs="+",
                    help="one or more runs; several: each row's median run is compared")
    a = p.parse_args(argv)
    if not os.access(a.train, os.X_OK):
        raise SystemExit(f"scaling_model.py: no tessera-train at {a.train} (--train or "
                         "TESSERA_BUILD_DIR)")
    m = read_json(a.machine, "machine file")
    try:
        if a.command == "predict":
            cmd_predict(a, m)
            return 0
        return cmd_check(a, m)
    except KeyError as e:  # a machine file or bench row without a figure the model reads
        raise SystemExit(f"scaling_model.py: no {e} in the machine file {a.machine} or a row of "
                         "the bench files (see scripts/machines/)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
