"""The float model (F) of :mod:`dpcount.privacy.float_safe` at long horizons.

For each BLT-family mechanism (``blt``, ``normalized-blt``, ``row-scaled-blt``) and the
FFT convolutions ``sqrt`` and ``toeplitz`` (N_t = Σ_{s≤t} kernel[t − s]·z_s with the
process's float kernel as the definition, checked on about 250 steps: the first 64
and the rest spread), each
noise path (``batch``: one ``next_many(T)``; ``scalar``: T scalar ``next()`` calls;
``vector``: T vector ``next()`` steps of dim 3; ``vbatch``: one vector ``next_many(T)``
of dim 3) and each horizon, the ratio

    max_t (|N̂_t − N_t| + u·|N̂_t|) / (u·σ_t·(1 + Z*/σ₁))

of the float noise N̂ to the exact noise N of the mechanism's definition, computed in
long double (x87 80-bit: 64-bit significand) from the very draws the release used
(recorded from the sampler), with the accurate decays λ_i = 1 − d_i (d_i the inverse's
``one_minus_decay``, accurate to a few ulps of d_i) — not the rounded fl(λ_i) the per-step
recursion multiplies by. σ_t is the mechanism's exact std (``variances()``), σ₁ the
sampler's std and Z* the largest |draw|. (F) holds with κ = MODEL_KAPPA = 256; the target
is a ratio ≤ κ/4 = 64 on every path.

The reference: BLT N_t = a·Σ_{s≤t} z_s + Σ_i β_i q_i(t), q_i(t) = λ_i q_i(t−1) + z_t;
column-normalized / row-scaled BLT N_t = Σ_{s≤t} e_s w_s, w_t = z'_t + Σ_i ω'_i p_i(t−1),
p_i(t) = λ_i p_i(t−1) + z'_t, z' = z (row-scaled: z / r_t, the row weights). Each a
long-double ``lfilter`` per buffer.

Run: ``PYTHONPATH=src python benchmarks/float_model_long.py [--horizons 14,17,20]
[--paths batch,scalar,vector] [--mechanisms blt,normalized-blt,row-scaled-blt]``
(≈ 1 min per mechanism at 2^20 on a loaded 2-core machine, the vector path the slowest).
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np
from scipy.signal import lfilter

from dpcount.counting.registry import build_mechanism
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.source import NoiseSource

LD = np.longdouble
U = 2.0**-53
MECHANISMS = ("blt", "normalized-blt", "row-scaled-blt", "sqrt", "toeplitz")
#: mechanisms whose noise is a causal convolution with the process's ``kernel`` (FFT
#: blocks): N_t = Σ_{s≤t} kernel[t − s]·z_s, checked on a subsample of t
KERNEL = ("sqrt", "toeplitz")
PATHS = ("batch", "scalar", "vector", "vbatch")
VECTOR_DIM = 3


class Recorder:
    """The sampler, recording every draw (in draw order)."""

    integer = False

    def __init__(self, base: Any) -> None:
        self.base = base
        self.draws: list[np.ndarray] = []

    @property
    def variance(self) -> float:
        return float(self.base.variance)

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        out = self.base.sample(rng, size)
        self.draws.append(np.asarray(out).reshape(-1).copy())
        return out  # type: ignore[no-any-return]


def mechanism(name: str, horizon: int) -> Any:
    return build_mechanism(name, horizon=horizon, budget=Budget(epsilon=1.0, delta=1e-6))


def run_path(mech: Any, path: str, seed: int = 1) -> tuple[np.ndarray, np.ndarray, Any]:
    """(N̂ of shape (T, D), the draws z of shape (T, D), the process's convolution kernel
    or None) for one path."""
    T = mech.horizon
    rec = Recorder(mech.sampler)
    dim = VECTOR_DIM if path in ("vector", "vbatch") else None
    process = mech.noise_process(NoiseSource.generator(rec, np.random.default_rng(seed), dim), dim)
    if path in ("batch", "vbatch"):
        out = process.next_many(T)
    else:
        out = np.array([process.next() for _ in range(T)])
    D = 1 if dim is None else dim
    z = np.concatenate(rec.draws)[: T * D].reshape(T, D)
    kernel = None
    if mech.name in KERNEL:  # the scalar process's kernel (a vector process may have none)
        scalar = mech.noise_process(NoiseSource.generator(mech.sampler, np.random.default_rng(0)))
        kernel = scalar.kernel
    return np.asarray(out, dtype=np.float64).reshape(T, D), z, kernel


def _decays(inverse: Any) -> np.ndarray:
    """The accurate decays 1 − d_i in long double."""
    return LD(1) - np.asarray(inverse.one_minus_decay, dtype=np.float64).astype(LD)


def _buffers(z: np.ndarray, lam: np.ndarray) -> list[np.ndarray]:
    """q_i(t) = λ_i q_i(t−1) + z_t for each buffer (long double, along axis 0)."""
    one = np.array([1.0], dtype=LD)
    return [lfilter(one, np.array([1.0, -lam_i], dtype=LD), z, axis=0) for lam_i in lam]


def exact_noise(mech: Any, z: np.ndarray) -> np.ndarray:
    """The mechanism's exact noise N for draws z (T, D), in long double."""
    inv = mech.inverse
    zl = z.astype(LD)
    lam = _decays(inv)
    if mech.name == "blt":
        total = LD(inv.a) * np.cumsum(zl, axis=0)
        for beta, q in zip(np.asarray(inv.beta), _buffers(zl, lam), strict=True):
            total += LD(beta) * q
        return total  # type: ignore[no-any-return]
    if mech.name == "row-scaled-blt":
        zl = zl / mech.row_weights().astype(LD)[:, None]
    w = zl.copy()
    for scale, p in zip(np.asarray(inv.scale), _buffers(zl, lam), strict=True):
        w[1:] += LD(scale) * p[:-1]
    e = mech._weight_table().astype(LD)
    return np.cumsum(w * e[:, None], axis=0)  # type: ignore[no-any-return]


def sample_steps(T: int) -> np.ndarray:
    """The steps a convolution is checked at: the first 64, the last and 190 spread."""
    spread = np.unique(np.geomspace(64, T - 1, 120).astype(np.int64))
    even = np.linspace(0, T - 1, 70).astype(np.int64)
    return np.unique(np.concatenate([np.arange(min(64, T)), spread, even, [T - 1]]))


def kernel_noise(kernel: np.ndarray, z: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """N_t = Σ_{s≤t} kernel[t − s]·z_s at the steps ts (long double dot products)."""
    k = kernel.astype(LD)
    zl = z.astype(LD)
    return np.array([k[t::-1] @ zl[: t + 1] for t in ts.tolist()])


def model_ratio(mech: Any, noise: np.ndarray, z: np.ndarray, kernel: Any = None) -> float:
    """max_t (|N̂_t − N_t| + u|N̂_t|)/(u·σ_t·(1 + Z*/σ₁)) over every coordinate (every t;
    a convolution's on :func:`sample_steps`)."""
    sd = np.sqrt(mech.variances())[:, None]
    if kernel is not None:
        ts = sample_steps(len(z))
        noise, sd = noise[ts], sd[ts]
        exact = kernel_noise(np.asarray(kernel), z, ts)
    else:
        exact = exact_noise(mech, z)
    err = np.abs(noise.astype(LD) - exact) + LD(U) * np.abs(noise).astype(LD)
    zstar = float(np.max(np.abs(z))) / math.sqrt(mech.sampler.variance)
    return float(np.max(err.astype(np.float64) / (U * sd * (1.0 + zstar))))


def measure(name: str, horizon: int, path: str, seed: int = 1) -> float:
    mech = mechanism(name, horizon)
    noise, z, kernel = run_path(mech, path, seed)
    return model_ratio(mech, noise, z, kernel)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--horizons", default="14,17,20", help="log2 of the horizons")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS))
    args = ap.parse_args()
    horizons = [1 << int(k) for k in args.horizons.split(",")]
    print(
        f"(F) ratio, units u·σ_t·(1 + Z*/σ₁); κ = {MODEL_KAPPA}, target ≤ κ/4 = {MODEL_KAPPA // 4}"
    )
    print(
        f"{'mechanism':16} {'path':7} "
        + " ".join(f"{'T=2^' + str(T.bit_length() - 1):>10}" for T in horizons)
    )
    for name in args.mechanisms.split(","):
        for path in args.paths.split(","):
            cells = []
            for T in horizons:
                start = time.perf_counter()
                try:
                    r = measure(name, T, path)
                except ValueError as exc:  # beyond the horizon the path is measured at
                    if "is refused" not in str(exc):
                        raise
                    cells.append(f"{'refused':>10}")
                    continue
                cells.append(f"{r:10.2f}")
                print(
                    f"  ({name} {path} T={T}: {r:.3f}, {time.perf_counter() - start:.1f} s)",
                    flush=True,
                )
            print(f"{name:16} {path:7} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
