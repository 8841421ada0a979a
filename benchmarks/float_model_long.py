"""The float model (F) of :mod:`dpcount.privacy.float_safe` at long horizons, for every
registered mechanism and noise path.

For each mechanism (registry discovery: every :data:`~dpcount.counting.registry.REGISTRY`
entry with continuous noise — its class default, Laplace or Gaussian —, the unnamed
horizon-free classes by their ``name``), each noise path

==========  ===========================================================================
``batch``   one scalar ``next_many(T)``
``blocks``  scalar ``next_many`` in blocks of 1, 7, 1000, 4097, 1, 7, … steps
``scalar``  T scalar ``next()`` calls
``vector``  T vector ``next()`` steps (dim 2, 3, 4 for seeds 1, 2, 3)
``vbatch``  one vector ``next_many(T)`` (the same dims)
==========  ===========================================================================

and each horizon it builds at, the ratio

    max_t (|N̂_t − N_t| + u·|N̂_t|) / (u·σ_t·(1 + Z*/σ₁))

of the float noise N̂ to the exact noise N of the mechanism's definition, from the very
draws the release used (recorded from the sampler), over every step and coordinate. σ_t
is the mechanism's exact std (``variances()``), σ₁ the sampler's std and Z* the largest
|draw|. (F) holds with κ = MODEL_KAPPA = 256; the target is ≤ κ/4 = 64 on every path.
The unbounded counter releases its blocks' float-safe releases plus sums of earlier
*released* values (post-processing): its model is its inners' (the trees, Honaker,
the horizon-free BLT and square root), measured here.

The exact reference N, by mechanism (long double: x87 80-bit, 64-bit significand,
u_LD = 2^-64 = u/2048):

* trees (binary, kary), smooth binary, input perturbation — their noise only *adds*
  draws (running sums of node values): exact by splitting, z = a + b with a = z rounded
  to a multiple of 2^-K (K chosen so every sum of up to T of them is a float), run on a
  (every addition exact) and on b (|b| ≤ 2^-K-1: its rounding is ~2^-30 of the
  measured one): N = N(a) + N(b);
* Honaker — the estimator's recursion e_j = a_j ζ + c_j(e_left + e_right) in long
  double with the exact a_j = 2^j/(2^(j+1) − 1), c_j = (2^j − 1)/(2^(j+1) − 1), the
  draws mapped to nodes in the path's draw order (batch, scalar, vector, vbatch);
* the convolutions (sqrt, toeplitz, horizon-free sqrt: N = b * z with the decoder
  kernel b; normalized sqrt: e·(f * z) plus its carry, or Σ e·(g * z); row-scaled
  sqrt and banded Toeplitz: Σ n·(g * (z/w))) — long-double FFTs (scipy.fft; error
  ~u_LD·‖kernel‖·‖z‖, checked against direct long-double dot products on 40 steps);
* the BLT family (blt, normalized-blt, row-scaled-blt, horizon-free BLT) — per buffer
  a long-double ``lfilter`` with the accurate decays λ_i = 1 − d_i (d_i the inverse's
  ``one_minus_decay``), not the rounded fl(λ_i) the recursion multiplies by: the filter
  with λ_i rounded to long double plus a second filter for the rounding's correction
  (since 2026-12-07: the rounding alone, ≤ 2^-65 relatively, adds up over the 1/d_i
  steps a buffer remembers to ~2^-65/d_i of it, above u at the scaled BLTs' slowest
  decays at 2^23 — the column-normalized BLT's batch at 2^23, seed 1: 45.9 against the
  rounded decays, 26.2 against the exact ones, before its buffers' fix);
* dense (dense-optimum, dense-max-optimum) — L·z in long double.

The float coefficients (kernels, weights, L, decays) are the mechanism's definition:
its exact variances are computed from them.

The horizon-free classes are built with the unbounded counter's span
(:data:`HORIZON_FREE_SPAN`, so their compensated paths are those it runs) and their
first T steps measured.

Run: ``PYTHONPATH=src python benchmarks/float_model_long.py [--horizons 11,14,17,20]
[--paths batch,blocks,scalar,vector,vbatch] [--mechanisms binary,kary,...] [--seeds 1,2,3]
[--step-limit 17]`` (per-step paths ``scalar``/``vector`` only up to 2^step-limit:
Python loops). Horizons a mechanism does not build at, and paths it refuses
(``FLOAT_MODEL_HORIZONS``), print as ``-`` and ``refused``. Cost on the shared 2-core
machine (3 seeds): all mechanisms and paths at 2^11, 2^14, 2^17 ≈ 10 min; each path at
2^20 10–70 s; the BLT's block paths 5–40 s a seed at 2^23 and 2^24 (vbatch dim 4 at 2^24:
6 GB); the horizon-free BLT's batch 270 s at 2^24, 415 s at 2^26 (one seed,
≈ 5 GB); the scaled BLTs' paths 15–45 s a seed at 2^22 (≈ 2 GB; their long forms
beyond 2^16 / 2^17); toeplitz's vector filter is O(T²) (30 s at 2^14, > 10 min at
2^16). The figures are in docs/safe-noise.md.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.fft as sf
from scipy.signal import lfilter

from dpcount.counting.registry import REGISTRY, build_mechanism, class_noise
from dpcount.privacy import Budget
from dpcount.privacy.float_safe import MODEL_KAPPA
from dpcount.privacy.source import NoiseSource

LD = np.longdouble
U = 2.0**-53
PATHS = ("batch", "blocks", "scalar", "vector", "vbatch")
#: vector dim per seed (seed 1 → 2, 2 → 3, 3 → 4; other seeds 3)
VECTOR_DIMS = {1: 2, 2: 3, 3: 4}
#: the block sizes of the ``blocks`` path, cycled
BLOCKS = (1, 7, 1000, 4097)
DELTA = 1e-6


def mechanism_names() -> tuple[str, ...]:
    """Every registered mechanism (the unnamed classes by their class ``name``)."""
    out = []
    for entry in REGISTRY:
        name = entry.name if entry.name is not None else str(entry.cls.name)
        if name not in out:
            out.append(name)
    return tuple(out)


def max_horizon(name: str) -> int | None:
    for entry in REGISTRY:
        if name in (entry.name, getattr(entry.cls, "name", None)):
            return entry.capabilities.max_horizon
    raise ValueError(f"unknown mechanism {name!r}")


#: the horizon the horizon-free classes are built with (the unbounded counter's block 0
#: span for the horizon-free BLT), of which the first T steps are measured
HORIZON_FREE_SPAN = (1 << 26) - 1


def steps(mech: Any) -> int:
    """The steps measured: the horizon, or T of a horizon-free class built longer."""
    return int(mech.__dict__.get("_fm_steps", mech.horizon))


def mechanism(name: str, horizon: int) -> Any:
    """``name`` at ``horizon`` with its continuous class-default noise, ε = 1, δ = 1e-6
    (a horizon-free class at :data:`HORIZON_FREE_SPAN`, ``horizon`` steps measured)."""
    for entry in REGISTRY:
        if entry.name is None and entry.cls.name == name:
            span = max(horizon, HORIZON_FREE_SPAN)
            mech = entry.cls(span, budget=Budget(epsilon=1.0, delta=DELTA))  # type: ignore[call-arg]
            mech.__dict__["_fm_steps"] = horizon
            return mech
    noise = class_noise(name, DELTA)
    return build_mechanism(
        name, horizon=horizon, budget=Budget(epsilon=1.0, delta=DELTA, noise=noise)
    )


class Recorder:
    """The sampler, recording every draw (in draw order); with ``replay``, returning
    those values instead of drawing."""

    integer = False

    def __init__(self, base: Any, replay: np.ndarray | None = None) -> None:
        self.base = base
        self.draws: list[np.ndarray] = []
        self.replay = replay
        self._at = 0

    @property
    def variance(self) -> float:
        return float(self.base.variance)

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        if self.replay is None:
            out = self.base.sample(rng, size)
        else:
            n = int(np.prod(size))
            out = self.replay[self._at : self._at + n].reshape(size)
            self._at += n
        self.draws.append(np.asarray(out).reshape(-1).copy())
        return out  # type: ignore[no-any-return]


def dim_of(path: str, seed: int) -> int | None:
    return VECTOR_DIMS.get(seed, 3) if path in ("vector", "vbatch") else None


def drive(mech: Any, path: str, rec: Recorder, seed: int, dim: int | None) -> np.ndarray:
    """N̂ (T, D) of one path, drawing through ``rec``."""
    T = steps(mech)
    process = mech.noise_process(NoiseSource.generator(rec, np.random.default_rng(seed), dim), dim)
    if path in ("batch", "vbatch"):
        out = process.next_many(T)
    elif path == "blocks":
        parts, done, i = [], 0, 0
        while done < T:
            n = min(BLOCKS[i % len(BLOCKS)], T - done)
            parts.append(np.asarray(process.next_many(n)).reshape(n, -1))
            done, i = done + n, i + 1
        out = np.concatenate(parts)
    else:
        out = np.array([process.next() for _ in range(T)])
    return np.asarray(out, dtype=np.float64).reshape(T, 1 if dim is None else dim)


def run_path(mech: Any, path: str, seed: int = 1) -> tuple[np.ndarray, np.ndarray, Any]:
    """(N̂ (T, D), every draw in draw order (rows of D), the recorder)."""
    rec = Recorder(mech.sampler)
    dim = dim_of(path, seed)
    noise = drive(mech, path, rec, seed, dim)
    D = 1 if dim is None else dim
    z = np.concatenate(rec.draws).reshape(-1, D)
    return noise, z, rec


# -- exact references -----------------------------------------------------------------
def _ld_conv(kernel: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Σ_{s≤t} kernel[t − s]·z_s for t < len(z), along axis 0, by long-double FFT."""
    T = len(z)
    size = sf.next_fast_len(2 * T)
    k = sf.rfft(np.asarray(kernel[:T]).astype(LD), size)
    zz = sf.rfft(z.astype(LD), size, axis=0)
    return sf.irfft(zz * k[:, None], size, axis=0)[:T]  # type: ignore[no-any-return]


def _direct_conv(kernel: np.ndarray, z: np.ndarray, ts: np.ndarray) -> np.ndarray:
    k, zl = np.asarray(kernel).astype(LD), z.astype(LD)
    return np.array([k[t::-1] @ zl[: t + 1] for t in ts.tolist()])


def check_conv(kernel: np.ndarray, z: np.ndarray, conv: np.ndarray) -> float:
    """The long-double FFT convolution's largest deviation from direct long-double dot
    products on 40 steps, in units of u·max|conv| (expected ≪ 1)."""
    T = len(z)
    ts = np.unique(np.concatenate([np.arange(min(20, T)), np.linspace(0, T - 1, 20).astype(int)]))
    direct = _direct_conv(kernel, z, ts)
    scale = float(np.max(np.abs(conv.astype(np.float64)))) or 1.0
    return float(np.max(np.abs(direct - conv[ts]))) / (U * scale)


def _buffer(z: np.ndarray, d: float) -> np.ndarray:
    """q(t) = λ q(t−1) + z_t, λ = 1 − d exactly (long double, along axis 0): the filter
    with λ′ = λ rounded to long double, plus its correction c(t) = λ′ c(t−1) + δ·q(t−1)
    for δ = λ − λ′ (exact: Sterbenz). Without it the filter's powers λ′^k are off by
    k·2^-65 relatively, ~2^-65/d of the buffer: 2^7 u at d = 2^-19, the slowest decays of
    the scaled BLTs at 2^24."""
    one = np.array([1.0], dtype=LD)
    lam = LD(1) - LD(d)
    delta = -LD(d) - (lam - LD(1))
    den = np.array([1.0, -lam], dtype=LD)
    q = lfilter(one, den, z, axis=0)
    drive = np.zeros_like(q)
    drive[1:] = delta * q[:-1]
    q += lfilter(one, den, drive, axis=0)
    return q  # type: ignore[no-any-return]


def _buffers(z: np.ndarray, d: np.ndarray) -> Iterator[np.ndarray]:
    """q_i(t) = λ_i q_i(t−1) + z_t for each buffer, λ_i = 1 − d_i (:func:`_buffer`), one
    at a time (memory: T·D long doubles each)."""
    return (_buffer(z, float(d_i)) for d_i in d)


def blt_noise(mech: Any, z: np.ndarray) -> np.ndarray:
    """The BLT family's exact noise."""
    from dpcount.counting.factorization.blt import BLT
    from dpcount.counting.factorization.row_scaled_blt import RowScaledBLT

    inv = mech.inverse
    zl = z.astype(LD)
    d = np.asarray(inv.one_minus_decay, dtype=np.float64)
    if isinstance(mech, BLT):  # one buffer at a time (memory: T·D long doubles each)
        total = LD(inv.a) * np.cumsum(zl, axis=0)
        for beta, d_i in zip(np.asarray(inv.beta), d, strict=True):
            total += LD(beta) * _buffer(zl, float(d_i))
        return total  # type: ignore[no-any-return]
    if isinstance(mech, RowScaledBLT):
        zl = zl / mech.row_weights().astype(LD)[:, None]
    w = zl.copy()
    for scale, p in zip(np.asarray(inv.scale), _buffers(zl, d), strict=True):
        w[1:] += LD(scale) * p[:-1]
    e = mech._weight_table().astype(LD)
    return np.cumsum(w * e[:, None], axis=0)  # type: ignore[no-any-return]


def additive_noise(mech: Any, path: str, rec: Recorder, seed: int, z: np.ndarray) -> np.ndarray:
    """Exact noise of a process that only adds draws: N(a) (exact) + N(b) (see module)."""
    T = steps(mech)
    flat = np.concatenate(rec.draws)
    top = float(np.max(np.abs(flat))) * T * 4.0  # any sum of ≤ T of them, with room
    K = 52 - math.ceil(math.log2(top))
    a = np.ldexp(np.rint(np.ldexp(flat, K)), -K)
    b = flat - a  # exact (Sterbenz-like: a is z rounded at a coarser bit)
    dim = dim_of(path, seed)
    na = drive(mech, path, Recorder(mech.sampler, a), seed, dim)
    if not np.array_equal(np.ldexp(np.rint(np.ldexp(na, K)), -K), na):
        raise AssertionError("N(a) is not on the 2^-K grid: the process is not additive")
    nb = drive(mech, path, Recorder(mech.sampler, b), seed, dim)
    return na.astype(LD) + nb.astype(LD)  # type: ignore[no-any-return]


def _chunks(T: int, path: str) -> list[int]:
    """The sizes of the path's requests (``next()`` is a request of 1)."""
    if path in ("batch", "vbatch"):
        return [T]
    if path in ("scalar", "vector"):
        return [1] * T
    sizes, done, i = [], 0, 0
    while done < T:
        sizes.append(min(BLOCKS[i % len(BLOCKS)], T - done))
        done, i = done + sizes[-1], i + 1
    return sizes


def _honaker_order(T: int, path: str) -> list[np.ndarray]:
    """Per level j, the draw index of node m = 0 … (T >> j) − 1 in the path's draw order:
    each request (t0, t1] draws, level by level, the nodes m = t0 >> j … (t1 >> j) − 1
    completing in it (``next`` and ``next_many`` alike)."""
    H = T.bit_length()
    parts: list[list[np.ndarray]] = [[] for _ in range(H + 1)]
    at, t0 = 0, 0
    if path in ("scalar", "vector"):  # vectorized: step t draws levels 0 … v(t)
        t = np.arange(1, T + 1, dtype=np.int64)
        v = np.zeros(T, dtype=np.int64)
        rest = t.copy()
        while True:
            even = (rest & 1) == 0
            if not even.any():
                break
            v[even] += 1
            rest[even] >>= 1
        off = np.concatenate([[0], np.cumsum(1 + v)[:-1]])
        return [off[(np.arange(T >> j) + 1) * (1 << j) - 1] + j for j in range(H + 1)]
    for n in _chunks(T, path):
        t1 = t0 + n
        for j in range(H + 1):
            count = (t1 >> j) - (t0 >> j)
            parts[j].append(np.arange(at, at + count))
            at += count
        t0 = t1
    return [np.concatenate(p) for p in parts]


def honaker_noise(mech: Any, path: str, z: np.ndarray) -> np.ndarray:
    """Honaker's exact noise (exact coefficients, long double)."""
    T = steps(mech)
    zl = z.astype(LD)
    order = _honaker_order(T, path)
    e: list[np.ndarray] = []
    for j, idx in enumerate(order):
        own = zl[idx]
        if j == 0:
            e.append(own)
            continue
        a = LD(2**j) / LD(2 ** (j + 1) - 1)
        c = LD(2**j - 1) / LD(2 ** (j + 1) - 1)
        kids = e[j - 1][0 : 2 * len(idx) : 2] + e[j - 1][1 : 2 * len(idx) : 2]
        e.append(a * own + c * kids)
    t = np.arange(1, T + 1)
    out = np.zeros((T, z.shape[1]), dtype=LD)
    for j in range(len(order)):
        use = ((t >> j) & 1) == 1
        out[use] += e[j][(t[use] >> j) - 1]
    return out


def conv_noise(mech: Any, z: np.ndarray, checks: list[float]) -> np.ndarray:
    """The convolution mechanisms' exact noise (long-double FFTs)."""
    from dpcount.counting.factorization import horizon_free, normalized_sqrt, row_scaled_sqrt
    from dpcount.counting.factorization.sqrt import SqrtFactorization
    from dpcount.counting.factorization.toeplitz import ToeplitzFactorization

    T = steps(mech)
    z = z[:T]
    if isinstance(mech, row_scaled_sqrt.RowScaledSqrtFactorization):
        _, g, w, n = row_scaled_sqrt._structure(mech._key())
        zs = z.astype(LD) / np.asarray(w).astype(LD)[:, None]  # z/w in long double
        size = sf.next_fast_len(2 * T)
        kern = sf.rfft(np.asarray(g).astype(LD), size)
        conv = sf.irfft(sf.rfft(zs, size, axis=0) * kern[:, None], size, axis=0)[:T]
        return np.cumsum(conv * np.asarray(n).astype(LD)[:, None], axis=0)  # type: ignore[no-any-return]
    if isinstance(mech, normalized_sqrt.NormalizedSqrtFactorization):
        e = np.asarray(mech._weights).astype(LD)
        if mech._starts is None:
            g = np.asarray(mech._kernel)
            w = _ld_conv(g, z)
            checks.append(check_conv(g, z, w))
            return np.cumsum(w * e[:, None], axis=0)  # type: ignore[no-any-return]
        f = np.asarray(normalized_sqrt.sqrt_coefficients(T))
        y = _ld_conv(f, z)
        checks.append(check_conv(f, z, y))
        ends = np.asarray(mech._starts[1:], dtype=np.int64) - 1
        jumps = np.zeros_like(y)  # Δ_q·Y_q, added to every step after q
        for q in ends.tolist():
            jumps[q + 1] = (e[q] - e[q + 1]) * y[q]
        return e[:, None] * y + np.cumsum(jumps, axis=0)  # type: ignore[no-any-return]
    if isinstance(mech, horizon_free.HorizonFreeSqrt):
        kernel = np.asarray(horizon_free.decoder_coefficients(T))
    elif isinstance(mech, ToeplitzFactorization):
        kernel = np.asarray(mech.decoder_coefficients())
    elif isinstance(mech, SqrtFactorization):
        kernel = np.asarray(
            mech.noise_process(NoiseSource.generator(mech.sampler, np.random.default_rng(0))).kernel
        )
    else:  # pragma: no cover
        raise TypeError(type(mech).__name__)
    conv = _ld_conv(kernel, z)
    checks.append(check_conv(kernel, z, conv))
    return conv


def exact_noise(
    mech: Any, path: str, rec: Recorder, seed: int, z: np.ndarray, checks: list[float]
) -> np.ndarray:
    """The mechanism's exact noise N (T, D) for the recorded draws, in long double."""
    from dpcount.counting.factorization.blt import BLT
    from dpcount.counting.factorization.dense import FactorizationMechanism
    from dpcount.counting.factorization.normalized_blt import NormalizedBLT
    from dpcount.counting.honaker import Honaker
    from dpcount.counting.input_perturbation import InputPerturbation
    from dpcount.counting.smooth_binary import SmoothBinary
    from dpcount.counting.tree import KaryTree

    if isinstance(mech, (KaryTree, SmoothBinary, InputPerturbation)):  # only adds draws
        return additive_noise(mech, path, rec, seed, z)
    if isinstance(mech, Honaker):
        return honaker_noise(mech, path, z)
    if isinstance(mech, (BLT, NormalizedBLT)):
        return blt_noise(mech, z[: steps(mech)])
    if isinstance(mech, FactorizationMechanism):
        L = np.asarray(mech.L).astype(LD)
        return L @ z[: L.shape[1]].astype(LD)  # type: ignore[no-any-return]
    return conv_noise(mech, z, checks)


def model_ratio(mech: Any, noise: np.ndarray, exact: np.ndarray, z: np.ndarray) -> float:
    """max_t (|N̂_t − N_t| + u|N̂_t|)/(u·σ_t·(1 + Z*/σ₁)) over every step and coordinate."""
    T = steps(mech)
    v = (
        mech.variances()
        if mech.horizon == T
        else np.fromiter(itertools.islice(mech.iter_variances(), T), np.float64, count=T)
    )
    sd = np.sqrt(np.asarray(v, dtype=np.float64))[:, None]
    err = np.abs(noise.astype(LD) - exact) + LD(U) * np.abs(noise).astype(LD)
    zstar = float(np.max(np.abs(z))) / math.sqrt(mech.sampler.variance)
    return float(np.max(err.astype(np.float64) / (U * sd * (1.0 + zstar))))


def measure(
    name: str,
    horizon: int,
    path: str,
    seed: int = 1,
    checks: list[float] | None = None,
    build: Callable[[str, int], Any] = mechanism,
) -> float:
    """The (F) ratio of ``name`` at ``horizon`` on ``path`` with ``seed``."""
    mech = build(name, horizon)
    noise, z, rec = run_path(mech, path, seed)
    exact = exact_noise(mech, path, rec, seed, z, [] if checks is None else checks)
    return model_ratio(mech, noise, exact, z)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--horizons", default="11,14,17,20", help="log2 of the horizons")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--mechanisms", default=",".join(mechanism_names()))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--step-limit", type=int, default=17, help="log2: scalar/vector paths")
    args = ap.parse_args()
    horizons = [1 << int(k) for k in args.horizons.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        f"(F) ratio, units u·σ_t·(1 + Z*/σ₁), max over seeds {seeds}; κ = {MODEL_KAPPA}, "
        f"target ≤ κ/4 = {MODEL_KAPPA // 4}"
    )
    print(
        f"{'mechanism':18} {'path':7} "
        + " ".join(f"{'T=2^' + str(T.bit_length() - 1):>10}" for T in horizons)
    )
    for name in args.mechanisms.split(","):
        limit = max_horizon(name)
        for path in args.paths.split(","):
            cells = []
            for T in horizons:
                per_step = path in ("scalar", "vector")
                too_long = per_step and T.bit_length() > args.step_limit + 1
                if too_long or (limit is not None and limit < T):
                    cells.append(f"{'-':>10}")
                    continue
                start = time.perf_counter()
                checks: list[float] = []
                try:
                    r = max(measure(name, T, path, s, checks) for s in seeds)
                except ValueError as exc:  # beyond the horizon the path is measured at
                    if "is refused" not in str(exc):
                        raise
                    cells.append(f"{'refused':>10}")
                    continue
                except NotImplementedError:
                    cells.append(f"{'n/a':>10}")
                    continue
                cells.append(f"{r:10.2f}")
                fft = f", FFT check {max(checks):.2g}" if checks else ""
                print(
                    f"  ({name} {path} T=2^{T.bit_length() - 1}: {r:.3f}, "
                    f"{time.perf_counter() - start:.1f} s{fft})",
                    flush=True,
                )
            print(f"{name:18} {path:7} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
