#!/usr/bin/env python3
"""scripts/plot.py end to end: makes small HDF5, CSV and JSON inputs in a temporary folder,
renders each plot and checks that every PNG exists, has the expected pixel size and is not
blank; bad inputs fail with a message. Exits 77 (ctest SKIP_RETURN_CODE) without
matplotlib, h5py or numpy.  Args: PLOT_PY [TMPDIR]"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
SYSTEM_PYTHON = "/usr/bin/python3"


def load_libs():
    try:
        import h5py  # noqa: F401
        import matplotlib
        import numpy  # noqa: F401
        matplotlib.use("Agg")
        return
    except ImportError as e:
        missing = str(e)
    # The same rule as plot.py: Debian installs the libraries for the system interpreter.
    if (os.path.exists(SYSTEM_PYTHON) and
            os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and
            not os.environ.get("TESSERA_PLOT_REEXEC")):
        os.environ["TESSERA_PLOT_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(f"plot_test: skipped: needs matplotlib, h5py and numpy ({missing}); "
          "scripts/setup.sh installs them")
    sys.exit(SKIP)


failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run_plot(plot, *args):
    p = subprocess.run([sys.executable, plot, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check_png(path, size, what):
    """Exists, is size (w, h) pixels, and shows something: many colours, much non-white."""
    import matplotlib.image
    import numpy as np
    if not os.path.exists(path):
        check(False, f"{what}: {path} written")
        return
    img = matplotlib.image.imread(path)
    h, w = img.shape[:2]
    check((w, h) == size, f"{what}: {w}x{h} pixels, expected {size[0]}x{size[1]}")
    rgb = img[:, :, :3]
    colours = len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    inked = float(np.mean(np.any(rgb < 0.95, axis=2)))
    check(colours >= 20 and inked >= 0.03,
          f"{what}: not blank ({colours} colours, {inked:.1%} of pixels not white)")


def make_grids(d, np, h5py):
    rng = np.random.default_rng(1)
    yy, xx = np.meshgrid(np.linspace(0, 1, 16), np.linspace(0, 1, 24), indexing="ij")
    truth = np.stack([np.sin(3 * xx + k) * np.cos(2 * yy) for k in range(3)])[:, None]
    perm = rng.uniform(1, 2, size=truth.shape)
    with h5py.File(f"{d}/in2d.h5", "w") as f:
        f["fields/permeability"] = perm.astype(np.float32)
        f["fields/pressure"] = truth.astype(np.float32)
    with h5py.File(f"{d}/pred2d.h5", "w") as f:
        f["fields/pressure"] = (truth + 0.05 * rng.standard_normal(truth.shape)).astype(
            np.float32)
    with h5py.File(f"{d}/in2d_notarget.h5", "w") as f:
        f["fields/permeability"] = perm.astype(np.float32)
    z, y, x = np.meshgrid(*(np.linspace(0, 1, n) for n in (8, 12, 16)), indexing="ij")
    # Two samples of two channels.
    t3 = np.stack([np.sin(4 * x + 2 * z) * y, np.cos(3 * y + z) * x])[None] + \
        np.arange(2).reshape(2, 1, 1, 1, 1)
    with h5py.File(f"{d}/in3d.h5", "w") as f:
        f["fields/temperature0"] = rng.uniform(size=t3.shape).astype(np.float32)
        f["fields/temperature"] = t3.astype(np.float32)
    with h5py.File(f"{d}/pred3d.h5", "w") as f:
        f["fields/temperature"] = (t3 * 1.1).astype(np.float32)
    theta = rng.uniform(0, 2 * np.pi, (2, 300))
    phi = rng.uniform(0, np.pi, (2, 300))
    xyz = np.stack([np.sin(phi) * np.cos(theta), np.sin(phi) * np.sin(theta), np.cos(phi)], -1)
    feat = (xyz[..., :1] ** 2 + xyz[..., 2:] * 0.5)
    with h5py.File(f"{d}/inpts.h5", "w") as f:
        f["points/coords"] = xyz.astype(np.float32)
        f["points/features"] = feat.astype(np.float32)
    with h5py.File(f"{d}/predpts.h5", "w") as f:
        f["points/features"] = (feat + 0.1 * xyz[..., 1:2]).astype(np.float32)


def make_odd_fields(d, np, h5py):
    """Files plot.py fields must refuse or warn about: an input shorter than the prediction,
    NaN and Inf in a prediction, a prediction of only NaN, a complex prediction."""
    with h5py.File(f"{d}/in2d.h5", "r") as f, h5py.File(f"{d}/in2d_one.h5", "w") as g:
        for name in f["fields"]:
            g[f"fields/{name}"] = f[f"fields/{name}"][:1]
    with h5py.File(f"{d}/inpts.h5", "r") as f, h5py.File(f"{d}/inpts_one.h5", "w") as g:
        for name in ("coords", "features"):
            g[f"points/{name}"] = f[f"points/{name}"][:1]
    with h5py.File(f"{d}/inpts.h5", "r") as f, h5py.File(f"{d}/inpts_nan.h5", "w") as g:
        g["points/coords"] = np.full_like(f["points/coords"][:], np.nan)
        g["points/features"] = f["points/features"][:]
    with h5py.File(f"{d}/pred2d.h5", "r") as f:
        pred = f["fields/pressure"][:]
    nan = pred.copy()
    nan[0, 0, :3, :4] = np.nan
    nan[0, 0, 5, 5] = np.inf
    with h5py.File(f"{d}/pred2d_nan.h5", "w") as f:
        f["fields/pressure"] = nan
    with h5py.File(f"{d}/pred2d_allnan.h5", "w") as f:
        f["fields/pressure"] = np.full_like(pred, np.nan)
    with h5py.File(f"{d}/pred2d_complex.h5", "w") as f:
        f["fields/pressure"] = (pred + 1j * pred).astype(np.complex64)
    with h5py.File(f"{d}/predpts.h5", "r") as f:
        feat = f["points/features"][:]
    feat[0, :7] = np.nan
    with h5py.File(f"{d}/predpts_nan.h5", "w") as f:
        f["points/features"] = feat


def make_metrics(path, steps, scale):
    """The columns and empty cells tessera-train writes (apps/train/main.cpp)."""
    cols = ("step,epoch,lr,loss,val_loss,val_rel_l2,grad_norm,samples_per_s,ms_step,ms_compute,"
            "ms_halo,ms_allreduce,peak_mib_per_rank")
    lines = [cols, "0,0,0.005,,1.1,0.9,,,,,,,"]
    for s in range(1, steps + 1):
        loss = scale * 2.0 / (1 + s)
        val = f"{loss * 1.1},{loss * 0.8}" if s % 5 == 0 else ","
        lines.append(f"{s},{s / 10},{0.005 / (1 + s / 20)},{loss},{val},0.5,40,"
                     f"{20 + s % 3},{14 + s % 2},{4 * scale},{2 * scale},1.5")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def make_bench(d):
    """The rows bench cases write (apps/bench/bench_train.cpp, bench_scaling.cpp)."""
    rows = []
    for n in (1, 2, 4, 8):
        # Two models: the second with the all-to-all part (an FNO's transposes).
        for model, a2a in (("unet", 0.0), ("fno", 100.0)):
            for scaling, t in (("strong", 0.4 / n ** 0.8), ("weak", 0.1 * (1 + 0.05 * n))):
                rows.append({"scaling": scaling, "model": model, "ranks": n, "threads": 1,
                             "cores": 2, "shape": f"2x1x{64 * n if scaling == 'weak' else 256}x64",
                             "t_step_s": t, "ms_compute": t * 800, "ms_halo": t * 150,
                             "ms_allreduce": t * 50, "ms_alltoall": t * a2a,
                             "peak_mib": 40 / n + 3})
            rows.append({"scaling": "capacity", "model": model, "ranks": n,
                         "shape": f"{96 * n}x64", "cells": 96 * n * 64 * (1 - 0.02 * n),
                         "limit_mib": 32})
    rows.append(dict(rows[0], threads=2, t_step_s=0.3))  # a 2-thread baseline is not used
    with open(f"{d}/bench-scaling.json", "w") as f:
        json.dump({"case": "scaling", "rows": rows, "goals": []}, f)
    train = [{"scaling": "strong", "ranks": n, "threads": 1, "shape": "2x1x256x256",
              "t_step_s": 0.5 / n, "ms_compute": 400 / n, "ms_halo": 50, "ms_allreduce": 10,
              "peak_mib": 80 / n} for n in (1, 2, 4)]
    with open(f"{d}/bench-train.json", "w") as f:
        json.dump({"case": "train", "rows": train, "goals": []}, f)


def main():
    load_libs()
    import h5py
    import numpy as np
    plot = sys.argv[1]
    base = sys.argv[2] if len(sys.argv) > 2 else None
    if base:
        os.makedirs(base, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as d:
        make_grids(d, np, h5py)
        make_odd_fields(d, np, h5py)
        make_metrics(f"{d}/a.csv", 60, 1.0)
        make_metrics(f"{d}/b.csv", 40, 2.0)
        make_bench(d)

        for cmd in ("fields", "training", "scaling"):
            rc, out = run_plot(plot, cmd, "--help")
            check(rc == 0 and "usage: plot.py " + cmd in out, f"{cmd} --help")

        cases = [
            ("fields 2-D", (1600, 420), ["fields", f"{d}/f2.png", "--input", f"{d}/in2d.h5",
                                         "--prediction", f"{d}/pred2d.h5", "--sample", "2"]),
            ("fields 2-D, no target", (800, 420),
             ["fields", f"{d}/f2n.png", "--input", f"{d}/in2d_notarget.h5",
              "--prediction", f"{d}/pred2d.h5"]),
            ("fields 3-D, z=MID", (1000, 300),
             ["fields", f"{d}/f3.png", "--input", f"{d}/in3d.h5", "--prediction",
              f"{d}/pred3d.h5", "--size", "1000x300"]),
            ("fields 3-D, x=3, channel 1", (1200, 400),
             ["fields", f"{d}/f3x.png", "--input", f"{d}/in3d.h5", "--prediction",
              f"{d}/pred3d.h5", "--slice", "x=3", "--channel", "1", "--dpi", "80",
              "--size", "1200x400"]),
            ("fields, points", (1200, 420),
             ["fields", f"{d}/fp.png", "--input", f"{d}/inpts.h5", "--prediction",
              f"{d}/predpts.h5", "--sample", "1"]),
            ("training, one run", (1400, 900), ["training", f"{d}/t1.png", f"{d}/a.csv"]),
            ("training, two runs", (1000, 700),
             ["training", f"{d}/t2.png", f"{d}/a.csv", f"{d}/b.csv", "--size", "1000x700"]),
            ("scaling with capacity", (1800, 850),
             ["scaling", f"{d}/s.png", f"{d}/bench-scaling.json", f"{d}/bench-train.json"]),
            ("scaling without capacity", (1350, 850),
             ["scaling", f"{d}/s2.png", f"{d}/bench-train.json"]),
        ]
        for what, size, args in cases:
            rc, out = run_plot(plot, *args)
            check(rc == 0, f"{what}: exit status 0" + ("" if rc == 0 else f"\n{out}"))
            # matplotlib's warnings (a layout engine giving up on 3-D axes) reach the user
            check("Warning" not in out, f"{what}: no warning" + ("" if "Warning" not in out
                                                                  else f"\n{out}"))
            check_png(args[1], size, what)

        # NaN/Inf in a prediction: a warning line, blank cells, exit 0 (the picture helps).
        for what, size, inp, pred, count in (
                ("fields 2-D, NaN and Inf", (1600, 420), "in2d.h5", "pred2d_nan.h5", 13),
                ("fields, points with NaN", (1200, 420), "inpts.h5", "predpts_nan.h5", 7)):
            out_png = f"{d}/{pred}.png"
            rc, out = run_plot(plot, "fields", out_png, "--input", f"{d}/{inp}",
                               "--prediction", f"{d}/{pred}")
            line = f"plot.py fields: warning: the prediction holds {count} non-finite values"
            check(rc == 0 and line in out and "Warning" not in out and "Traceback" not in out,
                  f"{what}: exit 0, one warning line" + ("" if line in out else f"\n{out}"))
            check_png(out_png, size, what)

        bad = [
            ("a CSV without the metrics columns", ["training", f"{d}/x.png", f"{d}/in2d.h5"],
             "not a tessera-train metrics CSV"),
            ("a sample past the end", ["fields", f"{d}/x.png", "--input", f"{d}/in2d.h5",
                                       "--prediction", f"{d}/pred2d.h5", "--sample", "3"],
             "--sample 3 outside 0..2"),
            ("a bad slice", ["fields", f"{d}/x.png", "--input", f"{d}/in3d.h5",
                             "--prediction", f"{d}/pred3d.h5", "--slice", "w=2"],
             "expected AXIS=MID"),
            ("an input shorter than the prediction",
             ["fields", f"{d}/x.png", "--input", f"{d}/in2d_one.h5", "--prediction",
              f"{d}/pred2d.h5", "--sample", "1"],
             "is no prediction of " + f"{d}/in2d_one.h5 (permeability (1, 1,"),
            ("the same file as input and prediction",
             ["fields", f"{d}/x.png", "--input", f"{d}/in2d.h5", "--prediction", f"{d}/in2d.h5"],
             "--input and --prediction are the same file"),
            ("a picture named as its input", ["training", f"{d}/m.png", f"{d}/m.png"],
             "the picture would replace it"),
            ("a slice of no number", ["fields", f"{d}/x.png", "--input", f"{d}/in3d.h5",
                                      "--prediction", f"{d}/pred3d.h5", "--slice", "z=1.5"],
             "expected AXIS=MID or AXIS=K"),
            ("a metrics cell of no number", ["training", f"{d}/x.png", f"{d}/badcell.csv"],
             "badcell.csv line 2, column loss: 'oops' is not a number"),
            ("a bench row of no number", ["scaling", f"{d}/x.png", f"{d}/badrow.json"],
             "a row whose ranks, t_step_s, peak_mib or threads is not a number"),
            ("points input shorter than the prediction",
             ["fields", f"{d}/x.png", "--input", f"{d}/inpts_one.h5", "--prediction",
              f"{d}/predpts.h5", "--sample", "1"], "inpts_one.h5 holds 1 sample"),
            ("a slice of a 2-D grid", ["fields", f"{d}/x.png", "--input", f"{d}/in2d.h5",
                                       "--prediction", f"{d}/pred2d.h5", "--slice", "z=3"],
             "a slice only applies to 3-D grids, this one is 2-D"),
            ("a slice of points", ["fields", f"{d}/x.png", "--input", f"{d}/inpts.h5",
                                   "--prediction", f"{d}/predpts.h5", "--slice", "z=3"],
             "a slice only applies to 3-D grids, " + f"{d}/predpts.h5 holds points"),
            ("a prediction of only NaN",
             ["fields", f"{d}/x.png", "--input", f"{d}/in2d.h5", "--prediction",
              f"{d}/pred2d_allnan.h5"], "the prediction holds no finite value where drawn"),
            ("coordinates of no finite point",
             ["fields", f"{d}/x.png", "--input", f"{d}/inpts_nan.h5", "--prediction",
              f"{d}/predpts.h5"], "hold no finite (x, y, z) point to draw"),
            ("a complex prediction",
             ["fields", f"{d}/x.png", "--input", f"{d}/in2d.h5", "--prediction",
              f"{d}/pred2d_complex.h5"], "is complex (complex64); fields are real"),
            ("JSON without scaling rows", ["scaling", f"{d}/x.png", f"{d}/empty.json"],
             "no rows with 'scaling'"),
            # one line naming the file, not a traceback
            ("a binary file as metrics", ["training", f"{d}/x.png", f"{d}/in2d.h5"],
             "in2d.h5 is not a tessera-train metrics CSV ('utf-8' codec"),
            ("metrics without rows yet", ["training", f"{d}/x.png", f"{d}/header.csv"],
             "header.csv has no rows yet"),
            ("truncated JSON", ["scaling", f"{d}/x.png", f"{d}/cut.json"],
             "cut.json is not a tessera-bench JSON (Expecting value"),
        ]
        with open(f"{d}/header.csv", "w") as f:
            f.write("step,epoch,lr,loss,val_loss,val_rel_l2,grad_norm,samples_per_s,ms_step,"
                    "ms_compute,ms_halo,ms_allreduce,ms_alltoall,peak_mib_per_rank\n")
        with open(f"{d}/cut.json", "w") as f:
            f.write('{"rows": [')
        with open(f"{d}/badcell.csv", "w") as f:
            f.write("step,epoch,lr,loss,val_loss,val_rel_l2,grad_norm,samples_per_s,ms_step,"
                    "ms_compute,ms_halo,ms_allreduce,ms_alltoall,peak_mib_per_rank\n"
                    "1,0.5,0.001,oops,,,1,1,1,1,0,0,0,1\n")
        shutil.copy(f"{d}/badcell.csv", f"{d}/m.png")  # a metrics file named as a picture
        with open(f"{d}/badrow.json", "w") as f:
            json.dump({"case": "scaling", "rows": [{"scaling": "strong", "ranks": "1",
                                                    "t_step_s": 0.1}]}, f)
        with open(f"{d}/empty.json", "w") as f:
            json.dump({"case": "halo", "rows": [{"bytes": 1}], "goals": []}, f)
        with open(f"{d}/in2d.h5.csv", "w") as f:
            f.write("a,b\n1,2\n")
        bad[0][1][2] = f"{d}/in2d.h5.csv"
        for what, args, msg in bad:
            rc, out = run_plot(plot, *args)
            check(rc != 0 and msg in out and "Traceback" not in out
                  and not os.path.exists(f"{d}/x.png"),
                  f"{what}: fails with '{msg}'" + ("" if msg in out else f"\n{out}"))
    if failures:
        print(f"plot_test: {len(failures)} check(s) failed")
        return 1
    print("plot_test: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
