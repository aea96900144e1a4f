#!/usr/bin/env python3
"""Pictures of Tessera's outputs, as PNG files (matplotlib, Agg backend).

  plot.py fields OUT.png --input IN.h5 --prediction PRED.h5 [--sample K] [--slice z=MID]
  plot.py training OUT.png metrics.csv [more.csv ...]
  plot.py scaling OUT.png bench-*.json
  plot.py --check      exit 0 when matplotlib, h5py and numpy import, else 3

Reads the dataset schema (io/schema.hpp), tessera-train's metrics CSV and the benchmark
JSON (apps/bench/report.hpp) as files; imports no project code. Needs matplotlib, h5py
and numpy (Debian's python3-matplotlib, python3-h5py, python3-numpy; scripts/setup.sh).
"""
import argparse
import csv
import json
import math
import os
import re
import sys
import warnings

# Debian installs the libraries for its own interpreter; another python3 first on PATH
# (a virtual environment, pyenv) may lack them, so the script re-runs itself under it.
SYSTEM_PYTHON = "/usr/bin/python3"
LIBS_HINT = "needs matplotlib, h5py and numpy (scripts/setup.sh installs them)"


def load_libs():
    """Imports the plotting libraries, or re-runs under the system python, or exits 3."""
    try:
        import h5py  # noqa: F401
        import matplotlib
        import numpy  # noqa: F401
        matplotlib.use("Agg")
        return
    except ImportError as e:
        missing = str(e)
    here = os.path.realpath(sys.executable)
    if (os.path.exists(SYSTEM_PYTHON) and here != os.path.realpath(SYSTEM_PYTHON)
            and not os.environ.get("TESSERA_PLOT_REEXEC")):
        os.environ["TESSERA_PLOT_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(f"plot.py: {LIBS_HINT}: {missing}", file=sys.stderr)
    sys.exit(3)


def parse_size(text):
    """'WxH' in pixels -> (w, h)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size '{text}' is not WxH in pixels")
    if w < 100 or h < 100:
        raise argparse.ArgumentTypeError(f"size '{text}': at least 100x100 pixels")
    if w > 20000 or h > 20000:
        raise argparse.ArgumentTypeError(f"size '{text}': at most 20000x20000 pixels")
    return w, h


def parse_dpi(text):
    try:
        d = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"dpi '{text}' is not a whole number")
    if not 10 <= d <= 1200:
        raise argparse.ArgumentTypeError(f"dpi {d}: 10 to 1200")
    return d


def png_path(text):
    """The PNG to write: a file name ending in .png (a folder, or a name matplotlib would
    turn into NAME.png behind the caller's back, is refused)."""
    if not text or text.endswith("/") or os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"'{text}' is a folder, not a PNG file name")
    if not text.lower().endswith(".png"):
        raise argparse.ArgumentTypeError(f"'{text}' does not end in .png")
    return text


def new_figure(size, dpi, rows, cols):
    import matplotlib.pyplot as plt
    # The PNG has exactly size pixels: no tight bounding box, the layout engine fits inside.
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi,
                             layout="constrained", squeeze=False)
    return fig, axes


def save(fig, out, dpi):
    import matplotlib.pyplot as plt
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    print(f"plot.py: wrote {out}")


# --- fields -------------------------------------------------------------------------------

def parse_slice(text, spatial_dims):
    """'z=MID' or 'z=12' (axes z, y, x of a 3-D grid) -> (axis index, cell or None)."""
    names = "zyx"[3 - spatial_dims:] if spatial_dims <= 3 else None
    m = re.fullmatch(r"([zyx])=(MID|mid|[0-9]+)", text, flags=re.ASCII)
    if not names or not m or m.group(1) not in names:
        raise SystemExit(f"plot.py fields: --slice '{text}': expected AXIS=MID or AXIS=K (K a "
                         f"cell index) with AXIS one of {', '.join(names or 'zyx')}")
    axis, where = m.group(1), m.group(2)
    return names.index(axis), None if where.upper() == "MID" else int(where)


def refuse_slice(slice_spec, why):
    raise SystemExit(f"plot.py fields: --slice {slice_spec}: a slice only applies to 3-D "
                     f"grids, {why}")


def grid_plane(a, spatial_dims, slice_spec):
    """A (spatial...) array reduced to a 2-D plane and the words saying which plane."""
    if slice_spec is not None and spatial_dims != 3:
        # A 1-D or 2-D grid is drawn whole: a slice asked for there is a mistaken file.
        shape = "x".join(str(n) for n in a.shape)
        refuse_slice(slice_spec, f"this one is {spatial_dims}-D ({shape})")
    if spatial_dims == 2:
        return a, ""
    if spatial_dims == 1:
        return a[None, :], ""
    if spatial_dims != 3:
        raise SystemExit(f"plot.py fields: {spatial_dims}-D grids are not drawn")
    axis, k = parse_slice(slice_spec or "z=MID", 3)
    k = a.shape[axis] // 2 if k is None else k
    if not 0 <= k < a.shape[axis]:
        raise SystemExit(f"plot.py fields: --slice cell {k} outside 0..{a.shape[axis] - 1}")
    return a.take(k, axis=axis), f", {'zyx'[axis]}={k}"


def rel_l2_words(pred, target):
    """The title's relative L2 error, or why there is none (never a bare 'nan')."""
    import numpy as np
    if not (np.isfinite(pred).all() and np.isfinite(target).all()):
        return "relative L2 error undefined (non-finite values)"
    norm = float(np.linalg.norm(target))
    if norm == 0:
        return "relative L2 error undefined (zero target)"
    return f"relative L2 error {float(np.linalg.norm(pred - target)) / norm:.3g}"


def read_sample(ds, k, path):
    """Sample k of an HDF5 dataset (N, ...) as float64, or one line saying why not."""
    import numpy as np
    # numpy would drop an imaginary part with only a ComplexWarning: refuse instead.
    if ds.dtype.kind == "c":
        raise SystemExit(f"plot.py fields: {ds.name} in {path} is complex ({ds.dtype}); "
                         "fields are real")
    if ds.dtype.kind not in "biuf":
        raise SystemExit(f"plot.py fields: {ds.name} in {path} holds {ds.dtype}, not numbers")
    # The input may hold fewer samples than the prediction: name the file that is short.
    n = ds.shape[0] if ds.shape else 0
    if not 0 <= k < n:
        held = f"{n} sample{'' if n == 1 else 's'}" if n else "no samples"
        raise SystemExit(f"plot.py fields: --sample {k} outside 0..{n - 1}: {path} holds "
                         f"{held} ({ds.name})")
    return np.asarray(ds[k], dtype=np.float64)


def box_aspect(xyz):
    """The 3-D box shaped like the cloud's finite extent (a torus is flat); a cube where the
    cloud has no extent (one point, all alike) or no finite coordinate."""
    import numpy as np
    finite = xyz[np.isfinite(xyz).all(axis=1)]
    ext = np.ptp(finite, axis=0) if len(finite) else np.zeros(3)
    if not ext.max() > 0:
        return (1.0, 1.0, 1.0)
    return tuple(np.maximum(ext, 1e-3 * ext.max()))


def check_finite(values, drawn, what, a):
    """Warns of NaN/Inf in a sample (matplotlib leaves those cells blank); refuses when the
    drawn values (the channel, on a 3-D grid the plane) hold no finite one, since the
    picture would then show nothing."""
    import numpy as np
    bad = int(values.size - np.count_nonzero(np.isfinite(values)))
    if not np.isfinite(drawn).any():
        raise SystemExit(f"plot.py fields: the {what} holds no finite value where drawn "
                         f"(sample {a.sample}, channel {a.channel}"
                         f"{', ' + a.slice if a.slice else ''}; {int(drawn.size)} values; "
                         f"{bad} non-finite in the sample)")
    if bad:
        print(f"plot.py fields: warning: the {what} holds {bad} non-finite values in sample "
              f"{a.sample} (drawn blank)", file=sys.stderr)


def finite_range(*arrays):
    """(lo, hi) over the finite values only: one NaN or Inf must not wreck the colour scale."""
    import numpy as np
    vals = [v[np.isfinite(v)] for v in arrays]
    vals = [v for v in vals if v.size]
    return (min(v.min() for v in vals), max(v.max() for v in vals)) if vals else (None, None)


def error_limit(e):
    """The symmetric colour limit of an error map: its largest finite magnitude."""
    _, hi = finite_range(abs(e))
    return float(hi or 1.0)


def pick_field(names, wanted, what, path, predicted=None):
    if wanted:
        if wanted == predicted:
            raise SystemExit(f"plot.py fields: --input-field {wanted} is the predicted field; "
                             f"the input drawn is another of {path} "
                             f"({', '.join(names) or 'none'})")
        if wanted not in names:
            raise SystemExit(f"plot.py fields: no field '{wanted}' in {path} "
                             f"(it has {', '.join(names) or 'none'})")
        return wanted
    if not names:
        raise SystemExit(f"plot.py fields: {path} has no {what} fields under /fields")
    return names[0]


def open_h5(path, option):
    """An HDF5 file opened for reading, or one line naming the option and the file."""
    import h5py
    try:
        return h5py.File(path, "r")
    except OSError as e:
        why = str(e).split(" (")[0] if str(e) else "unreadable"
        detail = re.search(r"\((.*)\)", str(e))
        raise SystemExit(f"plot.py fields: {option} {path}: cannot open it as HDF5 ({why}"
                         f"{': ' + detail.group(1) if detail else ''})")


def plot_fields(a):
    with open_h5(a.input, "--input") as fin, open_h5(a.prediction, "--prediction") as fpred:
        if "points/features" in fpred:
            return plot_points(a, fin, fpred)
        pred_names = sorted(fpred["fields"].keys()) if "fields" in fpred else []
        target = pick_field(pred_names, a.field, "predicted", a.prediction)
        in_names = [n for n in sorted(fin["fields"].keys()) if n != target] \
            if "fields" in fin else []
        source = pick_field(in_names, a.input_field, "input", a.input, target)
        pds, xds = fpred[f"fields/{target}"], fin[f"fields/{source}"]
        # A prediction of this input covers its samples on its grid (tessera-infer's output).
        if pds.shape[:1] != xds.shape[:1] or pds.shape[2:] != xds.shape[2:]:
            raise SystemExit(f"plot.py fields: {a.prediction} ({target} {pds.shape}) is no "
                             f"prediction of {a.input} ({source} {xds.shape}): the samples "
                             "and the grid differ")
        pred = read_sample(pds, a.sample, a.prediction)
        x = read_sample(xds, a.sample, a.input)
        truth = None
        if f"fields/{target}" in fin:
            truth = read_sample(fin[f"fields/{target}"], a.sample, a.input)
            if truth.shape != pred.shape:
                raise SystemExit(f"plot.py fields: {target} is {truth.shape} in {a.input} but "
                                 f"{pred.shape} in {a.prediction}")
    dims = pred.ndim - 1
    ch = a.channel
    if not 0 <= ch < pred.shape[0]:
        raise SystemExit(f"plot.py fields: --channel {ch} outside 0..{pred.shape[0] - 1}")
    p2, where = grid_plane(pred[ch], dims, a.slice)
    x2, _ = grid_plane(x[0], dims, a.slice)
    check_finite(pred, p2, "prediction", a)
    check_finite(x, x2, "input", a)
    panels = [(x2, f"input: {source}", "viridis", None)]
    pred_title = f"prediction: {target}"
    if truth is not None:
        t2, _ = grid_plane(truth[ch], dims, a.slice)
        check_finite(truth, t2, "target", a)
        lo, hi = finite_range(p2, t2)  # one scale for both
        e2 = p2 - t2
        emax = error_limit(e2)
        panels += [(p2, f"{pred_title}\n{rel_l2_words(pred, truth)}", "viridis", (lo, hi)),
                   (t2, f"target: {target}", "viridis", (lo, hi)),
                   (e2, "error: prediction - target", "RdBu_r", (-emax, emax))]
    else:
        panels.append((p2, f"{pred_title}\n(no target in {os.path.basename(a.input)})",
                       "viridis", None))
    size = a.size or (400 * len(panels), 420)
    fig, axes = new_figure(size, a.dpi, 1, len(panels))
    # A 1-D field is a curve (as an image it was a line of one pixel); a grid far longer
    # than wide is stretched to the panel rather than drawn as a hairline.
    stretched = dims == 2 and max(p2.shape) > 8 * min(p2.shape)
    for ax, (img, title, cmap, lim) in zip(axes[0], panels):
        if dims == 1:
            ax.plot(img[0], color="C3" if cmap == "RdBu_r" else "C0", lw=1)
            if lim:
                ax.set_ylim(*lim)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("cell")
            ax.grid(True, alpha=0.3)
            continue
        vmin, vmax = lim if lim else (None, None)
        im = ax.imshow(img, origin="lower", cmap=cmap, vmin=vmin, vmax=vmax,
                       interpolation="nearest", aspect="auto" if stretched else "equal")
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, shrink=0.8)
    shape = "x".join(str(s) for s in pred.shape[1:])
    fig.suptitle(f"sample {a.sample}, channel {ch}, grid {shape}{where}", fontsize=10)
    save(fig, a.out, a.dpi)


def plot_points(a, fin, fpred):
    """Point clouds: the surface seen in 3-D, coloured by prediction, target and error."""
    import numpy as np
    if "points/coords" not in fin:
        raise SystemExit(f"plot.py fields: {a.prediction} holds points, {a.input} has no "
                         "/points/coords")
    if a.slice is not None:
        refuse_slice(a.slice, f"{a.prediction} holds points")
    pred = read_sample(fpred["points/features"], a.sample, a.prediction)
    xyz = read_sample(fin["points/coords"], a.sample, a.input)
    if xyz.ndim != 2 or xyz.shape[-1] != 3 or not np.isfinite(xyz).all(axis=1).any():
        raise SystemExit(f"plot.py fields: the coordinates of sample {a.sample} in {a.input} "
                         f"({xyz.shape}) hold no finite (x, y, z) point to draw")
    truth = None
    if "points/features" in fin:
        # The target channels by variable name (a prediction holds the targets only).
        names = lambda d: [v.decode() if isinstance(v, bytes) else str(v)
                           for v in d.attrs.get("variables", [])]
        pred_vars, in_vars = names(fpred["points/features"]), names(fin["points/features"])
        truth = read_sample(fin["points/features"], a.sample, a.input)
        if pred_vars and all(v in in_vars for v in pred_vars):
            truth = truth[:, [in_vars.index(v) for v in pred_vars]]
    ch = a.channel
    if not 0 <= ch < pred.shape[-1]:
        raise SystemExit(f"plot.py fields: --channel {ch} outside 0..{pred.shape[-1] - 1}")
    check_finite(pred, pred[:, ch], "prediction", a)
    panels = [(pred[:, ch], "prediction", "viridis", None)]
    if truth is not None and truth.shape == pred.shape:
        check_finite(truth, truth[:, ch], "target", a)
        lo, hi = finite_range(pred[:, ch], truth[:, ch])
        e = pred[:, ch] - truth[:, ch]
        emax = error_limit(e)
        panels = [(pred[:, ch], f"prediction\n{rel_l2_words(pred, truth)}",
                   "viridis", (lo, hi)),
                  (truth[:, ch], "target", "viridis", (lo, hi)),
                  (e, "error: prediction - target", "RdBu_r", (-emax, emax))]
    size = a.size or (400 * len(panels), 420)
    import matplotlib.pyplot as plt
    # No layout engine: the constrained one cannot size 3-D axes (it warns and collapses them).
    fig = plt.figure(figsize=(size[0] / a.dpi, size[1] / a.dpi), dpi=a.dpi)
    fig.subplots_adjust(left=0.02, right=0.97, bottom=0.02, top=0.9, wspace=0.08)
    for i, (c, title, cmap, lim) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1, projection="3d")
        vmin, vmax = lim if lim else (None, None)
        sc = ax.scatter(xyz[:, 0], xyz[:, 1], xyz[:, 2], c=c, cmap=cmap, vmin=vmin, vmax=vmax,
                        s=2, depthshade=False)
        ax.set_box_aspect(box_aspect(xyz))
        ax.set_title(title, fontsize=9)
        ax.set_xticklabels([])
        ax.set_yticklabels([])
        ax.set_zticklabels([])
        fig.colorbar(sc, ax=ax, shrink=0.6, pad=0.08)
    fig.suptitle(f"sample {a.sample}, channel {ch}, {xyz.shape[0]} points", fontsize=10)
    save(fig, a.out, a.dpi)


# --- training -----------------------------------------------------------------------------

METRIC_COLUMNS = ["step", "lr", "loss", "val_loss", "val_rel_l2", "ms_compute", "ms_halo",
                  "ms_allreduce"]


def read_metrics(path):
    """tessera-train's metrics CSV -> {column: [(step, value), ...]}, empty cells left out."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet's BOM too
            reader = csv.DictReader(f)
            rows = list(reader)
            columns = reader.fieldnames or []
    except (UnicodeDecodeError, csv.Error) as e:
        raise SystemExit(f"plot.py training: {path} is not a tessera-train metrics CSV ({e})")
    if any(c not in columns for c in METRIC_COLUMNS):
        raise SystemExit(f"plot.py training: {path} is not a tessera-train metrics CSV "
                         f"(needs columns {', '.join(METRIC_COLUMNS)})")
    if not rows:
        raise SystemExit(f"plot.py training: {path} has no rows yet (a run that stopped before "
                         "step 0)")
    out = {c: [] for c in METRIC_COLUMNS[1:] + ["ms_alltoall"]}  # all-to-all: newer runs

    def number(r, i, c):
        try:
            return float(r.get(c, ""))
        except (TypeError, ValueError):
            raise SystemExit(f"plot.py training: {path} line {i + 2}, column {c}: "
                             f"'{r.get(c)}' is not a number")
    last = None
    for i, r in enumerate(rows):
        step = number(r, i, "step")
        # Rows of a resumed run appended after a failed one's: drawn as they stand, said.
        if last is not None and step < last:
            print(f"plot.py training: warning: {path} line {i + 2}: step {step:g} after step "
                  f"{last:g} (rows of two runs? drawn in file order)", file=sys.stderr)
        last = step
        if r["loss"] in ("", None):  # the validation before the first step: no step's lr
            r = dict(r, lr="")
        for c in out:
            if r.get(c, "") not in ("", None) and math.isfinite(v := number(r, i, c)):
                out[c].append((step, v))
    if not out["loss"]:
        print(f"plot.py training: warning: {path} holds no finite loss (a run that diverged?)",
              file=sys.stderr)
    return out


def median(values):
    s = sorted(values)
    return s[len(s) // 2] if s else 0.0


def plot_training(a):
    runs = [(os.path.basename(os.path.dirname(os.path.abspath(p))) + "/" + os.path.basename(p)
             if len(a.csv) > 1 else os.path.basename(p), read_metrics(p)) for p in a.csv]
    fig, axes = new_figure(a.size or (1400, 900), a.dpi, 2, 2)
    ax_loss, ax_l2, ax_lr, ax_ms = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    colours = [f"C{i}" for i in range(10)]
    for i, (name, m) in enumerate(runs):
        c = colours[i % len(colours)]
        if m["loss"]:
            ax_loss.plot(*zip(*m["loss"]), color=c, lw=1, label=f"{name}: loss")
        if m["val_loss"]:
            ax_loss.plot(*zip(*m["val_loss"]), color=c, lw=2, ls="--", marker="o", ms=3,
                         label=f"{name}: validation loss")
        if m["val_rel_l2"]:
            ax_l2.plot(*zip(*m["val_rel_l2"]), color=c, marker="o", ms=3, label=name)
        if m["lr"]:
            ax_lr.plot(*zip(*m["lr"]), color=c, label=name)
    # A log axis leaves out values <= 0: said, not silently dropped.
    for name, m in runs:
        for col in ("loss", "val_loss", "val_rel_l2"):
            if n := sum(1 for _, v in m[col] if v <= 0):
                print(f"plot.py training: warning: {name}: {n} {col} value(s) <= 0 not drawn on "
                      "the log scale", file=sys.stderr)
    for ax, title in ((ax_loss, "loss per step"), (ax_l2, "validation relative L2 error")):
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    ax_lr.set_title("learning rate")
    ax_lr.set_xlabel("step")
    ax_lr.grid(True, alpha=0.3)
    # Median time per step of each run (robust to the first steps' warm-up), split.
    parts = [("ms_compute", "compute", "C0"), ("ms_halo", "halo", "C1"),
             ("ms_allreduce", "all-reduce", "C2"), ("ms_alltoall", "all-to-all", "C3")]
    bottom = [0.0] * len(runs)
    for col, label, colour in parts:
        vals = [median([v for _, v in m[col]]) for _, m in runs]
        ax_ms.bar(range(len(runs)), vals, bottom=bottom, color=colour, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax_ms.set_xticks(range(len(runs)), [name for name, _ in runs], fontsize=8)
    ax_ms.set_ylabel("ms per step (median)")
    ax_ms.set_title("time per step: compute / halo / all-reduce / all-to-all")
    ax_ms.legend(fontsize=8)
    save(fig, a.out, a.dpi)


# --- scaling ------------------------------------------------------------------------------

def read_bench(paths):
    """Rows of benchmark JSON files that carry scaling measurements, tagged with a series."""
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                doc = json.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SystemExit(f"plot.py scaling: {p} is not a tessera-bench JSON ({e})")
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise SystemExit(f"plot.py scaling: {p} is not a tessera-bench JSON (no rows)")
        for r in doc["rows"]:
            if isinstance(r, dict) and "ranks" in r and "scaling" in r:
                if not all(isinstance(r.get(k, 0), (int, float)) and not isinstance(r.get(k), bool)
                           for k in ("ranks", "t_step_s", "peak_mib", "threads")):
                    raise SystemExit(f"plot.py scaling: {p}: a row whose ranks, t_step_s, "
                                     f"peak_mib or threads is not a number: {json.dumps(r)[:120]}")
                r = dict(r)
                r["series"] = r.get("model", doc.get("case", os.path.basename(p)))
                r["file"] = os.path.basename(p)
                rows.append(r)
    # A model measured in several files: one series per file (merged, one would hide another).
    files_of = {}
    for r in rows:
        files_of.setdefault(r["series"], set()).add(r["file"])
    for r in rows:
        if len(files_of[r["series"]]) > 1:
            r["series"] = f"{r['series']} ({r['file']})"
    if not rows:
        raise SystemExit("plot.py scaling: no rows with 'scaling' and 'ranks' in "
                         + ", ".join(paths))
    return rows


def per_rank(rows, series, scaling):
    """One row per rank count (the fewest threads where several), sorted by ranks."""
    best = {}
    for r in rows:
        if r["series"] == series and r["scaling"] == scaling:
            k = r["ranks"]
            if k not in best or r.get("threads", 1) < best[k].get("threads", 1):
                best[k] = r
    return [best[k] for k in sorted(best)]


def plot_scaling(a):
    rows = read_bench(a.json)
    if not any(r.get("t_step_s") for r in rows if r["scaling"] in ("strong", "weak")) and \
            not any(r["scaling"] == "capacity" for r in rows):
        raise SystemExit("plot.py scaling: no strong or weak row with a time (t_step_s) and no "
                         "capacity row in " + ", ".join(a.json) + ": nothing to draw")
    series = sorted({r["series"] for r in rows})
    capacity = [r for r in rows if r["scaling"] == "capacity"]
    cols = 4 if capacity else 3
    fig, axes = new_figure(a.size or (450 * cols, 850), a.dpi, 2, cols)
    ax_sp, ax_eff, ax_weak = axes[0][0], axes[0][1], axes[0][2]
    ax_mem, ax_bs, ax_bw = axes[1][0], axes[1][1], axes[1][2]
    all_ranks = sorted({r["ranks"] for r in rows})
    for i, s in enumerate(series):
        c = f"C{i}"
        strong = [r for r in per_rank(rows, s, "strong") if r.get("t_step_s")]
        weak = [r for r in per_rank(rows, s, "weak") if r.get("t_step_s")]
        if strong and strong[0]["ranks"] != 1:
            print(f"plot.py scaling: warning: {s}'s strong rows start at {strong[0]['ranks']} "
                  "ranks: no 1-rank time, so no speedup or efficiency drawn", file=sys.stderr)
        if strong and strong[0]["ranks"] == 1:
            t1 = strong[0]["t_step_s"]
            n = [r["ranks"] for r in strong]
            ax_sp.plot(n, [t1 / r["t_step_s"] for r in strong], "o-", color=c,
                       label=f"{s} ({strong[0]['shape']})" if strong[0].get("shape") else s)
            ax_eff.plot(n, [t1 / (r["ranks"] * r["t_step_s"]) for r in strong], "o-", color=c,
                        label=s)
        if weak:
            ax_weak.plot([r["ranks"] for r in weak], [r["t_step_s"] * 1e3 for r in weak], "o-",
                         color=c, label=s)
            ax_weak.axhline(weak[0]["t_step_s"] * 1e3, color=c, ls=":", lw=1)
        for rs, style, what in ((strong, "o-", "strong"), (weak, "s--", "weak")):
            pts = [(r["ranks"], r["peak_mib"]) for r in rs if "peak_mib" in r]
            if pts:
                ax_mem.plot(*zip(*pts), style, color=c, label=f"{s}, {what}")
        for ax, rs, what in ((ax_bs, strong, "strong"), (ax_bw, weak, "weak")):
            stacked_bars(ax, rs, i, len(series), s)
            ax.set_title(f"{what} scaling: time per step split")
    if all_ranks:
        ax_sp.plot(all_ranks, all_ranks, "k:", label="ideal")
        ax_eff.axhline(1.0, color="k", ls=":", label="ideal")
        # Ranks beyond the machine's cores share them: the best such a machine can do.
        cores = min((r["cores"] for r in rows if r.get("cores")), default=0)
        if cores and all_ranks[-1] > cores:
            ax_sp.plot(all_ranks, [min(n, cores) for n in all_ranks], "--", color="grey",
                       label=f"ideal on {cores} cores")
            ax_eff.plot(all_ranks, [min(n, cores) / n for n in all_ranks], "--", color="grey",
                        label=f"ideal on {cores} cores")
            for i, s in enumerate(series):
                weak = [r for r in per_rank(rows, s, "weak") if r.get("t_step_s")]
                if weak and weak[0]["ranks"] == 1:
                    ax_weak.plot([r["ranks"] for r in weak],
                                 [weak[0]["t_step_s"] * 1e3 * max(1, r["ranks"] / cores)
                                  for r in weak], "--", color="grey",
                                 label=f"ideal on {cores} cores" if i == 0 else None)
    titles = ((ax_sp, "strong scaling: speedup T(1)/T(n)", "speedup"),
              (ax_eff, "strong scaling: efficiency T(1)/(n T(n))", "efficiency"),
              (ax_weak, "weak scaling: time per step (dotted: the fewest ranks)", "ms per step"),
              (ax_mem, "peak memory per rank", "MiB"),
              (ax_bs, None, "ms per step"), (ax_bw, None, "ms per step"))
    for ax, title, ylabel in titles:
        if title:
            ax.set_title(title)
        ax.set_xlabel("ranks")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    for ax in (ax_sp, ax_weak, ax_mem):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_ranks, [str(n) for n in all_ranks])
    ax_eff.set_xscale("log", base=2)
    ax_eff.set_xticks(all_ranks, [str(n) for n in all_ranks])
    top = max([1.1] + [1.05 * y for line in ax_eff.get_lines() for y in line.get_ydata()
                       if math.isfinite(y)])
    ax_eff.set_ylim(0, top)  # a superlinear point stays in view
    if capacity:
        plot_capacity(axes[0][3], capacity, series)
        axes[1][3].axis("off")
    save(fig, a.out, a.dpi)


def stacked_bars(ax, rs, i, count, label):
    """Compute / halo / all-reduce (/ all-to-all) per rank count, one bar group per series."""
    if not rs:
        return
    width = 0.8 / count
    x = [j + (i - (count - 1) / 2) * width for j in range(len(rs))]
    bottom = [0.0] * len(rs)
    for col, part, colour in (("ms_compute", "compute", "C0"), ("ms_halo", "halo", "C1"),
                              ("ms_allreduce", "all-reduce", "C2"),
                              ("ms_alltoall", "all-to-all", "C3")):
        vals = [r.get(col, 0.0) for r in rs]
        if col == "ms_alltoall" and not any(vals):
            continue  # models without transposes
        ax.bar(x, vals, width, bottom=bottom, color=colour,
               label=None if part in ax.get_legend_handles_labels()[1] else part,
               edgecolor="k", lw=0.3)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(rs)), [str(r["ranks"]) for r in rs])
    if count > 1:
        for xi, b in zip(x, bottom):
            ax.text(xi, b, label, ha="center", va="bottom", fontsize=6, rotation=90)


def plot_capacity(ax, capacity, series):
    """Largest global grid that fits the per-rank memory limit, against linear growth."""
    for i, s in enumerate(series):
        rs = sorted((r for r in capacity if r["series"] == s), key=lambda r: r["ranks"])
        if not rs:
            continue
        n = [r["ranks"] for r in rs]
        cells = [r["cells"] for r in rs]
        ax.plot(n, cells, "o-", color=f"C{i}", label=s)
        ax.plot(n, [cells[0] * k / n[0] for k in n], ":", color=f"C{i}", label=f"{s}: linear")
        for k, c, r in zip(n, cells, rs):
            ax.annotate(r.get("shape", ""), (k, c), fontsize=6, textcoords="offset points",
                        xytext=(3, -10))
    limit = capacity[0].get("limit_mib")
    ax.set_title("capacity: largest grid" + (f" at {limit:g} MiB per rank" if limit else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ranks = sorted({r["ranks"] for r in capacity})
    ax.set_xticks(ranks, [str(k) for k in ranks])
    ax.set_xlabel("ranks")
    ax.set_ylabel("cells")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


# --- command line -------------------------------------------------------------------------

def main(argv):
    p = argparse.ArgumentParser(prog="plot.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true",
                   help="exit 0 when matplotlib, h5py and numpy import, else 3 with a message")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def common(sp):
        sp.add_argument("out", metavar="OUT.png", type=png_path, help="the PNG file to write")
        sp.add_argument("--size", type=parse_size, metavar="WxH",
                        help="image size in pixels (default depends on the plot)")
        sp.add_argument("--dpi", type=parse_dpi, default=100,
                        help="dots per inch, 10 to 1200 (default 100)")

    f = sub.add_parser("fields", help="input, prediction, target and error side by side",
                       description="Input, prediction, target and error maps of one sample side "
                       "by side (shared colour scale for prediction and target; titles with "
                       "the relative L2 error). 3-D grids: a mid-plane slice. Point clouds "
                       "(/points/features in PRED.h5): 3-D scatters of the points coloured by "
                       "prediction, target and error. Default size: 400 px per panel x 420.")
    common(f)
    f.add_argument("--input", required=True, metavar="IN.h5",
                   help="dataset with the input fields (and the targets, for the error)")
    f.add_argument("--prediction", required=True, metavar="PRED.h5",
                   help="tessera-infer's output (/fields/TARGET)")
    f.add_argument("--sample", type=int, default=0, metavar="K", help="sample index (default 0)")
    # No default value: a --slice given for a 2-D grid or points is refused, not ignored.
    f.add_argument("--slice", metavar="AXIS=K|MID",
                   help="plane of a 3-D grid: z, y or x at a cell or MID (default z=MID; "
                   "refused for 1-D and 2-D grids and points)")
    f.add_argument("--channel", type=int, default=0, help="target channel (default 0)")
    f.add_argument("--field", help="predicted field (default: the first in PRED.h5)")
    f.add_argument("--input-field", help="input field drawn (default: the first of IN.h5 "
                   "that is not predicted)")
    f.set_defaults(run=plot_fields)

    t = sub.add_parser("training", help="loss curves, learning rate, time per step",
                       description="Loss and validation loss per step (log scale), validation "
                       "relative L2 error (log scale), learning rate, and the median ms per "
                       "step split into compute / halo / all-reduce, from tessera-train's "
                       "metrics CSV (train.metrics_csv); several CSVs overlay. Default size "
                       "1400x900.")
    common(t)
    t.add_argument("csv", nargs="+", metavar="metrics.csv")
    t.set_defaults(run=plot_training)

    s = sub.add_parser("scaling", help="strong/weak scaling, memory, time split, capacity",
                       description="Strong-scaling speedup and efficiency against ranks with "
                       "the ideal line, weak-scaling time, peak memory per rank, and stacked "
                       "compute / halo / all-reduce bars per rank count, from tessera-bench "
                       "JSON (rows with 'scaling' and 'ranks'; bench-train.json, "
                       "bench-scaling.json). Rows with scaling 'capacity' add the largest grid "
                       "per rank count. Default size 1350x850 (1800x850 with capacity).")
    common(s)
    s.add_argument("json", nargs="+", metavar="bench.json")
    s.set_defaults(run=plot_scaling)

    a = p.parse_args(argv)
    if a.check:
        load_libs()
        return 0
    if not a.command:
        p.print_help()
        return 2
    load_libs()
    inputs = ([a.input, a.prediction] if a.command == "fields" else
              a.csv if a.command == "training" else a.json)
    # The picture never replaces what it is drawn from (a .png-named input, a link to one).
    for path in inputs:
        if os.path.exists(path) and os.path.lexists(a.out) and os.path.exists(a.out) and \
                os.path.samefile(path, a.out):
            print(f"plot.py {a.command}: {a.out} is the input {path}: the picture would "
                  "replace it", file=sys.stderr)
            return 1
    if a.command == "fields" and os.path.exists(a.input) and os.path.exists(a.prediction) \
            and os.path.samefile(a.input, a.prediction):
        print(f"plot.py fields: --input and --prediction are the same file ({a.input}): a "
              "dataset is no prediction of itself", file=sys.stderr)
        return 1
    warnings.filterwarnings("ignore")  # matplotlib's layout notes; what matters is said above
    try:
        a.run(a)
    except OSError as e:  # a missing or unreadable input: one line, not a traceback
        print(f"plot.py {a.command}: {e.strerror or e}: {e.filename}", file=sys.stderr)
        return 1
    except SystemExit:
        raise
    except Exception as e:  # anything else the inputs lead to: one line, not a traceback
        print(f"plot.py {a.command}: cannot draw these inputs: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
