"""Fit horizon-free BLT parameters and print the frontier: buffers (state per coordinate
= buffers + 1) against the largest ratio to the plain square root told t over a range
of t.

The ratio at step t is ‖c‖²·V(t)/F(t)², with ‖c‖² = 1 + Σ ω_iω_j/(1 − θ_iθ_j) the
infinite-stream sensitivity², V(t) = Σ_{k<t} b_k² the BLT's variance (closed form) and
F(t) = Σ_{k<t} f(k)² (the plain square root told t has variance F(t)², same units).
For the search the decoder's decays are the eigenvalues of diag(θ) − 1ωᵀ (numpy, fast);
every printed ratio is recomputed with the library's root finder
(:func:`dpcount.counting.factorization.blt.blt_inverse`) on sixteen points per octave.

Method: θ log-spaced in −ln(1 − θ) ∈ [0.7, s_max], ω from the quadrature of the
square root's arcsine measure times a mild damping, then L-BFGS on a soft maximum of
the ratios over four points per octave (temperatures 30 … 3000), over log ω and
log(−ln(1 − θ)); the best of three s_max is kept. The shipped parameters
(:data:`dpcount.counting.factorization.horizon_free_blt.HORIZON_FREE_BLT_PARAMETERS`)
came from 24 buffers on t = 2^4 … 2^24, the buffers with ω < 10⁻⁴ dropped (17 left)
and refitted on eight points per octave (temperatures 3000 … 30000): 1.5603.
Minutes per buffer count on a loaded machine.

With ``--growing``: the same for the BLT with growing columns
(:class:`dpcount.counting.HorizonFreeGrowingBLT`: column s has output scales
ω_i·(K·s/(K·s + τ_i))^{1/2}, τ_i = 1/(1 − θ_i), constant on the library's blocks, and is
normalized to norm 1). θ, ω are the arcsine quadrature on [s_lo, s_hi] in −ln(1 − θ)
times exp(−tilt·s); Nelder–Mead on (ln K, s_lo, s_hi, tilt) for the largest ratio over
four points per octave (variances by the exact covariance recursion across the blocks,
by repeated squaring); the printed ratio is the library's, on sixteen points per octave.
The shipped parameters (:data:`dpcount.counting.factorization.horizon_free_growing.
HORIZON_FREE_GROWING_PARAMETERS`) are ``--growing --buffers 12 --largest 26``: 1.2992
up to 2^24 (and 2^26). With ``--refine`` every θ_i, ω_i and K is then freed (L-BFGS on
a soft maximum, as above): 1.2838 on sixteen points per octave to 2^26 (an earlier such
fit: 1.2840, 1.2846 at every t ≤ 2^16), but 1.68 instead of 1.52 at t = 1 and 1.59
instead of 1.50 at 2^28, so it is not shipped. Seconds per buffer count (minutes with ``--refine``).

With ``--head``: the head factors of the shipped growing BLT
(:data:`dpcount.counting.factorization.horizon_free_growing.HORIZON_FREE_GROWING_HEAD`,
β_b on the output scales of block b ≤ 16 — steps 1 … 15 one each, block 16 steps
16 … 18 — each column still normalized to norm 1), the
other parameters fixed: SLSQP on the largest ratio over t = 1 … 128 (as an epigraph:
minimize r subject to ratio(t) ≤ r; variances from the library's exact recursion),
rounded to four digits; a single factor on step 1 alone (bounded scalar search) for
comparison. Then the ratio is checked (library ``variance_at``, sensitivity² included)
at every t ≤ 4096, at 2^k and 2^k ± 1 for k ≤ 24 and at 3,000 random t ≤ 2^24 (seed 0),
with and without the factors: 1.3293 at t = 1 … 16 (and 19), the largest anywhere,
against 1.5225 at t = 1 without (1.3909 with the best single factor, 0.865 on step 1).
About two minutes.

Usage: python benchmarks/make_horizon_free_blt.py [--buffers 4,8,16] [--largest 24] [--growing]
[--head]
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
from scipy.optimize import minimize

from dpcount.counting import HorizonFreeGrowingBLT
from dpcount.counting.factorization import horizon_free_growing as hfg
from dpcount.counting.factorization.blt import blt_losses
from dpcount.counting.factorization.horizon_free_blt import infinite_sensitivity_squared
from dpcount.counting.factorization.sqrt_toeplitz import sqrt_coefficients, sqrt_l2_norm_squared

Array = np.ndarray[Any, np.dtype[np.float64]]


def steps(largest: int, per_octave: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    e = np.arange(4 * per_octave, largest * per_octave + 1) / per_octave
    out: np.ndarray[Any, np.dtype[np.int64]] = np.unique(np.round(2.0**e).astype(np.int64))
    return out


def plain_sqrt(ts: np.ndarray[Any, np.dtype[np.int64]]) -> Array:
    """F(t) = Σ_{k<t} f(k)², directly."""
    f = sqrt_coefficients(int(ts.max()))
    out: Array = np.cumsum(f * f)[ts - 1]
    return out


def fast_ratios(theta: Array, omega: Array, ts: Any, F: Array) -> Array | None:
    """The ratios with the decoder from numpy's eigenvalues (None if unstable)."""
    lam = np.sort(np.linalg.eigvals(np.diag(theta) - np.outer(np.ones_like(theta), omega)).real)
    if lam[0] <= -1 + 1e-6 or lam[-1] >= 1:
        return None
    gp = np.sum(omega[None, :] / (theta[None, :] - lam[:, None]) ** 2, axis=1)
    beta = 1 / (gp * (1 - lam))
    a = 1 / (1 + np.sum(omega / (1 - theta)))
    norm2 = 1 + np.sum(np.outer(omega, omega) / (1 - np.outer(theta, theta)))
    T = ts[:, None].astype(float)
    g1 = -np.expm1(T * np.log(np.abs(lam))[None, :]) / (1 - lam)[None, :]
    ll = np.outer(lam, lam).ravel()
    g2 = -np.expm1(T * np.log(np.abs(ll))[None, :]) / (1 - ll)[None, :]
    V = a * a * ts + 2 * a * (g1 @ beta) + g2 @ np.outer(beta, beta).ravel()
    out: Array = norm2 * V / F**2
    return out


def exact_ratios(theta: Array, omega: Array, ts: Any, F: Array) -> Array:
    """The ratios with the library's certified norm and closed-form variances."""
    norm2 = infinite_sensitivity_squared(theta, omega)
    V = np.array([blt_losses(theta, omega, int(t)).max_variance for t in ts])
    out: Array = norm2 * V / F**2
    return out


def fit(theta: Array, omega: Array, ts: Any, F: Array, temps: tuple[float, ...]) -> Any:
    m = len(theta)

    def unpack(x: Array) -> tuple[Array, Array]:
        return -np.expm1(-np.exp(x[m:])), np.exp(x[:m])

    def objective(x: Array, temp: float) -> float:
        th, om = unpack(x)
        if np.any(np.diff(np.sort(th)) <= 1e-12) or np.sum(om / (1 + th)) >= 1:
            return 1e3
        r = fast_ratios(th, om, ts, F)
        if r is None or not np.all(np.isfinite(r)):
            return 1e3
        top = float(r.max())
        return top + math.log(float(np.sum(np.exp(temp * (r - top))))) / temp

    x = np.concatenate([np.log(omega), np.log(-np.log1p(-theta))])
    for temp in temps:
        x = minimize(objective, x, args=(temp,), method="L-BFGS-B", options={"maxiter": 200}).x
    th, om = unpack(x)
    order = np.argsort(th)
    return th[order], om[order]


def start(m: int, s_max: float) -> tuple[Array, Array]:
    s = np.linspace(0.7, s_max, m)
    theta = -np.expm1(-s)
    h = s[1] - s[0]
    return theta, h / math.pi * np.sqrt(theta * (1 - theta)) * np.exp(-0.05 * s)


def quadrature(m: int, s_lo: float, s_hi: float, tilt: float) -> tuple[Array, Array]:
    """θ log-spaced in −ln(1 − θ) ∈ [s_lo, s_hi], ω the arcsine quadrature times exp(−tilt·s)."""
    s = np.linspace(s_lo, s_hi, m)
    theta = -np.expm1(-s)
    h = s[1] - s[0]
    return theta, h / math.pi * np.sqrt(theta * (1 - theta)) * np.exp(-tilt * s)


def growing_variances(theta: Array, omega: Array, K: float, ts: Any) -> Array:
    """V(t)/σ² of the growing-column BLT at the sorted steps ts: the covariance of (u, N)
    advanced block by block by repeated squaring (the library's recursion, without its
    restart points; ν without its rounding up)."""
    starts = hfg.block_starts()
    bounds = [*starts[1:], None]
    tau = 1 / (1 - theta)
    G = 1 / (1 - np.outer(theta, theta))
    n = len(theta)
    P = np.zeros((n + 1, n + 1))
    t, b, out = 0, 0, []
    for target in (int(v) for v in ts):
        while t < target:
            s = float(starts[b])
            w = omega * np.sqrt(K * s / (K * s + tau))
            nu = math.sqrt(1 + float(w @ G @ w))
            M = np.zeros((n + 1, n + 1))
            M[:n, :n] = np.diag(theta) - np.outer(w, np.ones(n))
            M[n, :n], M[n, n] = -nu, 1.0
            bound = bounds[b]
            end = target if bound is None else min(target, bound - 1)
            P = hfg._advance(P, M, np.append(w, nu), end - t)
            t = end
            if bound is not None and t == bound - 1:
                b += 1
        out.append(P[n, n])
    return np.array(out)


def fit_growing(m: int, largest: int, refine: bool) -> tuple[float, Array, Array, float]:
    ts = steps(largest, 4)
    F2 = np.array([sqrt_l2_norm_squared(int(t)) ** 2 for t in ts])

    def objective(x: Array) -> float:
        lK, s_lo, s_hi, tilt = x
        if not 0.01 < s_lo < s_hi < 40:
            return 10.0
        th, om = quadrature(m, s_lo, s_hi, tilt)
        r = growing_variances(th, om, math.exp(lK), ts) / F2
        return float(r.max()) if np.all(np.isfinite(r)) else 10.0

    best = None
    for x0 in (
        [2.85, 0.6, 17 + (largest - 24) * 0.7, 0.0],
        [2.85, 0.4, 19 + (largest - 24) * 0.7, 0.0],
    ):
        res = minimize(objective, x0, method="Nelder-Mead", options={"maxfev": 300, "xatol": 1e-4})
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    lK, s_lo, s_hi, tilt = best.x
    th, om = quadrature(m, s_lo, s_hi, tilt)
    K = math.exp(lK)
    if refine:
        th, om, K = refine_growing(th, om, K, ts, F2)
    mech = HorizonFreeGrowingBLT(
        1 << 53, buffer_decay=th, output_scale=om, scale=K, epsilon=1.0, delta=1e-6
    )
    assert mech.privacy is not None
    sens2, unit = mech.privacy.l2_sensitivity**2, mech.sampler.variance
    check = steps(largest, 16)
    r = [sens2 * mech.variance_at(int(t)) / unit / sqrt_l2_norm_squared(int(t)) ** 2 for t in check]
    return max(r), th, om, K


def refine_growing(
    theta: Array, omega: Array, K: float, ts: Any, F2: Array
) -> tuple[Array, Array, float]:
    """Every θ_i, ω_i and K free: L-BFGS on a soft maximum of the ratios (temperatures
    300, 1000, 3000; 60 iterations each) over ln(−ln(1 − θ)), ln ω and ln K."""
    n = len(theta)

    def unpack(x: Array) -> tuple[Array, Array, float]:
        return -np.expm1(-np.exp(x[:n])), np.exp(x[n : 2 * n]), math.exp(x[-1])

    def objective(x: Array, temp: float) -> float:
        th, om, k = unpack(x)
        if np.any(np.diff(th) <= 1e-12 * th[1:]) or th.max() >= 1:  # the BLT domain
            return 10.0
        r = growing_variances(th, om, k, ts) / F2
        if not np.all(np.isfinite(r)):
            return 10.0
        top = float(r.max())
        return top + math.log(float(np.sum(np.exp(temp * (r - top))))) / temp

    x = np.concatenate([np.log(-np.log1p(-theta)), np.log(omega), [math.log(K)]])
    for temp in (300.0, 1000.0, 3000.0):
        x = minimize(objective, x, args=(temp,), method="L-BFGS-B", options={"maxiter": 60}).x
    return unpack(x)


def head_ratios(head: Any, ts: Any) -> Array:
    """The shipped growing BLT's ratio to the plain square root told t at the sorted
    steps ts, with head factors ``head``: sens²·V(t)/F(t)², exact (``variance_at``;
    every t ≤ 4096 from one table)."""
    ts = np.asarray(ts, dtype=np.int64)
    small = ts[ts <= 4096]
    top = int(small.max()) if len(small) else 1
    mech = HorizonFreeGrowingBLT(top, head_factors=tuple(head), epsilon=1.0, delta=1e-6)
    far = HorizonFreeGrowingBLT(1 << 53, head_factors=tuple(head), epsilon=1.0, delta=1e-6)
    assert mech.privacy is not None
    sens2, unit = mech.privacy.l2_sensitivity**2, mech.sampler.variance
    table = mech.noise_coefficients()
    V = np.array(
        [table[t - 1] if t <= top else far.variance_at(int(t)) / unit for t in ts.tolist()]
    )
    F = np.array([sqrt_l2_norm_squared(int(t)) for t in ts.tolist()])
    out: Array = sens2 * V / F**2
    return out


def fit_head(count: int = hfg._SINGLE_STEPS, largest: int = 128) -> tuple[Array, float]:
    """The head factors β_1 … β_count minimizing the largest ratio over t ≤ ``largest``
    (SLSQP on the epigraph from β = 0.9, rounded to four digits) and the best single
    factor on step 1 alone."""
    from scipy.optimize import minimize_scalar

    ts = np.arange(1, largest + 1)
    cache: dict[tuple[float, ...], Array] = {}

    def ratios(x: Array) -> Array:
        key = tuple(np.round(x, 12).tolist())
        if key not in cache:
            cache[key] = head_ratios(np.clip(x, 1e-3, 1.0), ts)
        return cache[key]

    v0 = np.append(np.full(count, 0.9), ratios(np.full(count, 0.9)).max())
    res = minimize(
        lambda v: v[-1],
        v0,
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda v: v[-1] - ratios(v[:-1])}],
        bounds=[(0.3, 1.0)] * count + [(1.0, 2.0)],
        options={"maxiter": 300, "ftol": 1e-10},
    )
    single = minimize_scalar(
        lambda b: float(head_ratios([b], ts).max()), bounds=(0.5, 1.0), method="bounded"
    )
    return np.round(res.x[:-1], 4), float(single.x)


def report_head(head: tuple[float, ...], single: float) -> None:
    """The ratio table with and without the head factors (and with the single factor):
    every t ≤ 4096, 2^k and 2^k ± 1 (k ≤ 24), 3,000 random t ≤ 2^24."""
    rng = np.random.default_rng(0)
    powers = {v for k in range(25) for v in ((1 << k) - 1, 1 << k, (1 << k) + 1)}
    ts = np.array(
        sorted(
            {*range(1, 4097), *powers, *rng.integers(4097, 1 << 24, 3000, endpoint=True).tolist()}
            - {0}
        )
    )
    shown = [1, 2, 3, 4, 8, 16, 19, *(1 << k for k in range(5, 25))]
    runs = {"none": (), f"β_1 = {single:.4f}": (single,), "shipped": head}
    table = {name: head_ratios(h, ts) for name, h in runs.items()}
    print(f"{'t':>10}" + "".join(f"{name:>16}" for name in runs))
    for t in shown:
        i = int(np.searchsorted(ts, t))
        print(f"{t:>10}" + "".join(f"{table[name][i]:>16.5f}" for name in runs))
    for name, r in table.items():
        top, later = int(ts[r.argmax()]), int(ts[1 + r[1:].argmax()])
        print(f"{name}: largest {r.max():.5f} at t = {top}; t ≥ 2: {r[1:].max():.5f} at "
              f"t = {later}; over {len(ts)} steps")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--buffers", default="4,8,16")
    parser.add_argument("--largest", type=int, default=24, help="t = 2^4 ... 2^largest")
    parser.add_argument("--growing", action="store_true", help="the BLT with growing columns")
    parser.add_argument("--refine", action="store_true", help="--growing: then every θ, ω, K free")
    parser.add_argument("--head", action="store_true", help="the growing BLT's head factors")
    args = parser.parse_args()
    if args.head:
        head, single = fit_head()
        print(f"head factors (steps 1 … {len(head)}): {head.tolist()}")
        print(f"the best single factor on step 1: {single:.4f}")
        report_head(hfg.HORIZON_FREE_GROWING_HEAD, single)
        if tuple(head.tolist()) != hfg.HORIZON_FREE_GROWING_HEAD:
            print("(fitted factors differ from the shipped; their table:)")
            report_head(tuple(head.tolist()), single)
        return
    if args.growing:
        top = args.largest
        print(
            f"growing columns: largest ratio to the plain square root told t, t = 2^4 ... 2^{top}"
        )
        print(f"{'buffers':>8}{'state/coord':>13}{'ratio':>9}")
        for m in (int(v) for v in args.buffers.split(",")):
            r, th, om, K = fit_growing(m, args.largest, args.refine)
            print(f"{m:>8}{m + 1:>13}{r:>9.4f}", flush=True)
            print(f"  buffer_decay={th.tolist()}\n  output_scale={om.tolist()}\n  scale={K!r}")
        return
    ts, check = steps(args.largest, 4), steps(args.largest, 16)
    F, F_check = plain_sqrt(ts), plain_sqrt(check)
    print(f"largest ratio to the plain square root told t, t = 2^4 ... 2^{args.largest}")
    print(f"{'buffers':>8}{'state/coord':>13}{'ratio':>9}")
    for m in (int(v) for v in args.buffers.split(",")):
        best: tuple[float, Array, Array] | None = None
        for s_max in (0.67, 0.8, 0.92):
            th, om = fit(*start(m, s_max * args.largest), ts, F, (30, 100, 300, 1000, 3000))
            r = float(exact_ratios(th, om, check, F_check).max())
            if best is None or r < best[0]:
                best = (r, th, om)
        assert best is not None
        print(f"{m:>8}{m + 1:>13}{best[0]:>9.4f}", flush=True)
        print(f"  buffer_decay={best[1].tolist()}\n  output_scale={best[2].tolist()}")


if __name__ == "__main__":
    main()
