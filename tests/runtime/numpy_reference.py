#!/usr/bin/env python3
"""The distributed FFT and FNO SpectralConv against numpy, an independent reference
(pocketfft, not the FFTW the C++ tests compare with): h5py writes random fields, spectra
and spectral weights; numpy_reference (MPI, sharded as KIND says) computes the transforms
and layers and writes them with Tessera's sharded HDF5 writer (complex as h5py's
compound); numpy computes the same and every result must agree to 1e-12 relative (float64).
The spectral layer is the reference FNO's: irfftn of the per-mode channel mixing at the
retained corners (the imaginary part of each zero-frequency column dropped, as irfftn does).
Exits 77 (ctest's skip code) without h5py or numpy, or (SPACE cuda) without a GPU.
Args: PROG TMPDIR KIND[:SPACE] LAUNCH... (KIND line, pencil or data; SPACE host, the
default, or cuda; LAUNCH the mpiexec command with its rank count)"""
import os
import subprocess
import sys

SKIP = 77
SYSTEM_PYTHON = "/usr/bin/python3"
try:
    import h5py
    import numpy as np
except ImportError as e:
    # Debian installs python3-h5py and python3-numpy for the system interpreter.
    if (os.path.exists(SYSTEM_PYTHON) and
            os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and
            not os.environ.get("TESSERA_NUMPY_REEXEC")):
        os.environ["TESSERA_NUMPY_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(f"numpy_reference: skipped: needs h5py and numpy ({e}); scripts/setup.sh installs them")
    sys.exit(SKIP)

TOL = 1e-12


def kept_index(n, m, real_dim):
    """The retained bins of one dim as Tessera stores them (and the reference FNO's
    corners): [0, m) of the real dim; [0, m) then [n - m, n) of a complex dim; all if m is 0."""
    if m == 0:
        return np.arange(n)
    if real_dim:
        return np.arange(m)
    return np.concatenate([np.arange(m), np.arange(n - m, n)])


def prune(spec, modes):
    """The retained modes of a half spectrum (N, C, complex dims..., real dim)."""
    nd = len(modes)
    for d, m in enumerate(modes):
        axis = spec.ndim - nd + d
        spec = np.take(spec, kept_index(spec.shape[axis], m, d == nd - 1), axis=axis)
    return spec


def pad(kept, shape, modes):
    """A full half spectrum of `shape` with the retained modes `kept` and zeros elsewhere."""
    full = np.zeros(shape, dtype=np.complex128)
    nd = len(modes)
    idx = [slice(None), slice(None)] + [
        kept_index(shape[2 + d], m, d == nd - 1) for d, m in enumerate(modes)]
    full[np.ix_(*[np.arange(s) if isinstance(i, slice) else i for s, i in zip(shape, idx)])] = kept
    return full


def half_shape(real_shape):
    return tuple(real_shape[:-1]) + (real_shape[-1] // 2 + 1,)


def spatial_axes(ndim):
    return tuple(range(2, ndim))


def fno_layer(x, w, modes):
    """The reference FNO SpectralConv: mixing per retained mode, then irfftn."""
    axes = spatial_axes(x.ndim)
    wc = w[..., 0] + 1j * w[..., 1]
    xk = prune(np.fft.rfftn(x, axes=axes), modes)
    letters = "xyz"[:len(modes)]
    yk = np.einsum(f"bi{letters},io{letters}->bo{letters}", xk, wc)
    out_shape = (x.shape[0], w.shape[1]) + half_shape(x.shape[2:])
    return np.fft.irfftn(pad(yk, out_shape, modes), s=x.shape[2:], axes=axes)


def main():
    prog, tmp, kind = sys.argv[1:4]
    kind, _, space = kind.partition(":")
    space = space or "host"
    launch = sys.argv[4:]
    os.makedirs(tmp, exist_ok=True)
    src = os.path.join(tmp, f"in-{kind}-{space}.h5")
    dst = os.path.join(tmp, f"out-{kind}-{space}.h5")
    for p in (src, dst):
        if os.path.exists(p):
            os.remove(p)
    rng = np.random.default_rng(7)
    x2 = rng.uniform(-1, 1, (2, 3, 11, 10))   # a prime and an even extent
    x3 = rng.uniform(-1, 1, (2, 2, 7, 6, 5))  # odd real dim
    modes2, modes3 = (3, 2), (2, 3, 2)
    # Spectra to invert, none Hermitian where a half spectrum can break it (the imaginary
    # parts of the zero-frequency and Nyquist columns, and their mirrored bins): a real
    # field's with noise added, and the retained corners of one (the FNO's case).
    X2 = np.fft.rfftn(rng.uniform(-1, 1, x2.shape), axes=(2, 3))
    X2 = X2 + 0.5j * rng.uniform(-1, 1, X2.shape)
    X2p = prune(np.fft.rfftn(rng.uniform(-1, 1, x2.shape), axes=(2, 3)), modes2)
    X2p = X2p + 0.5j * rng.uniform(-1, 1, X2p.shape)
    X3p = prune(np.fft.rfftn(rng.uniform(-1, 1, x3.shape), axes=(2, 3, 4)), modes3)
    X3p = X3p + 0.5j * rng.uniform(-1, 1, X3p.shape)
    W2 = rng.uniform(-1, 1, (3, 4, 6, 2, 2))
    W3 = rng.uniform(-1, 1, (2, 3, 4, 6, 2, 2))
    with h5py.File(src, "w") as f:
        for name, v in dict(x2=x2, x3=x3, X2=X2, X2_pruned=X2p, X3_pruned=X3p, W2=W2,
                            W3=W3).items():
            f[name] = v
    cmd = launch + [prog, src, dst, kind, space]
    r = subprocess.run(cmd, timeout=240, capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if "SKIPPED: no CUDA device visible" in r.stdout:
        return SKIP
    if r.returncode != 0:
        print(f"FAIL {' '.join(cmd)} exited {r.returncode}")
        return 1

    a2, a3 = (2, 3), (2, 3, 4)
    n2, n3 = 11 * 10, 7 * 6 * 5
    expected = {
        "rfft2": np.fft.rfftn(x2, axes=a2),
        "rfft2_pruned": prune(np.fft.rfftn(x2, axes=a2, norm="ortho"), modes2),
        "rfft3": np.fft.rfftn(x3, axes=a3, norm="forward"),
        "rfft3_pruned": prune(np.fft.rfftn(x3, axes=a3), modes3),
        "irfft2": np.fft.irfftn(X2, s=x2.shape[2:], axes=a2),
        "irfft2_pruned": np.fft.irfftn(pad(X2p, half_shape(x2.shape), modes2), s=x2.shape[2:],
                                       axes=a2, norm="ortho"),
        "irfft3_pruned": np.fft.irfftn(pad(X3p, half_shape(x3.shape), modes3), s=x3.shape[2:],
                                       axes=a3, norm="forward"),
        "sconv2": fno_layer(x2, W2, modes2),
        "sconv2_mode_sharded": fno_layer(x2, W2, modes2),
        "sconv3": fno_layer(x3, W3, modes3),
        "sconv3_mode_sharded": fno_layer(x3, W3, modes3),
    }
    assert n2 and n3
    failures = 0
    with h5py.File(dst, "r") as f:
        for name, want in expected.items():
            if name not in f:
                print(f"FAIL {name}: missing from {dst}")
                failures += 1
                continue
            got = f[name][()]
            if got.shape != want.shape or got.dtype.kind != want.dtype.kind:
                print(f"FAIL {name}: {got.dtype} {got.shape}, numpy {want.dtype} {want.shape}")
                failures += 1
                continue
            err = np.max(np.abs(got - want)) / np.max(np.abs(want))
            ok = err <= TOL
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {space} {name} {got.dtype} {got.shape}: relative error {err:.2e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
