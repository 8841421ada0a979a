"""Sparse-vector key selection: the calibration of its threshold and its keyed noise.

AboveThreshold for monotone queries (Lyu, Su, Li, "Understanding the Sparse Vector
Technique for Differential Privacy", PVLDB 10(6), 2017,
<https://arxiv.org/abs/1603.01699>, Alg. 1 with
c = 1 and the monotone-query remark of its Theorem 2; Dwork & Roth, "The Algorithmic
Foundations of Differential Privacy", 2014, §3.6, Algorithm 1), with exact discrete
Laplace noise. Per key: one noisy threshold offset ρ ~ Lap_Z(t_ρ), fresh noise
ν_s ~ Lap_Z(t_ν) at each checked step s, and the key is selected at the first
checked step s with c_s + ν_s ≥ τ + ρ (c_s its exact running count). The privacy
argument is in :mod:`dpcount.keyed.selection`; this module holds the closed forms.

Notation (math → code):

=====================================  ================================================
Lap_Z(t): P[Y = y] ∝ q^{|y|}, q=e^{−1/t}  the exact sampler of :mod:`dpcount.keyed.prf`
t_ρ, t_ν (noise scales)                 ``rho_scale``, ``nu_scale`` (Fractions)
n (checked steps over the horizon)      ``checks``
x = τ − C (threshold above one unit)    ``offset``
B(x) (release bound, below)             :func:`release_bound`
=====================================  ================================================

Closed forms of Lap_Z(t) (Inusah & Kozubowski 2006, "A discrete analogue of the
Laplace distribution"): P[Y = y] = (1 − q)/(1 + q)·q^{|y|}; for x ≥ 1
P[Y ≥ x] = q^x/(1 + q), and for x ≤ 0 P[Y < x] = P[Y ≥ 1 − x] = q^{1−x}/(1 + q).

The release bound. A key whose running count is at most C at every checked step
(one unit's keys, :mod:`dpcount.keyed.selection`) is selected with probability

    P[∃ checked s: c_s + ν_s ≥ τ + ρ] ≤ 1 − E_ρ[(1 − S(x + ρ))^n] =: B(x),

S(y) = P[ν ≥ y], since c_s ≤ C and, given ρ, the n checks are independent. B is
non-increasing in x. :func:`release_bound` computes an upper bound on B(x): the sum
over ρ = z ∈ [z₋, z₊] of P[ρ = z]·(1 − (1 − S(x + z))^n), each term as one
exponential of a sum of logarithms (log-space: terms as small as e^{−700} keep their
relative accuracy), plus P[ρ < z₋] + P[ρ > z₊] for the terms left out (each term is
at most P[ρ = z]). Rounding: every logarithm is a sum of at most eight floating-point
values below 10⁴ in magnitude, each within a few units in the last place (numpy's
log, log1p, expm1, exp: a few ulp), so each term's relative error is below 10⁻¹⁰; the
sum is multiplied by 1 + 10⁻⁹ (:data:`_SLACK`), and a term whose logarithm is below
−700 is counted as e^{−700} (never rounded down to 0). The result is therefore never
below B(x) (tested against mpmath at 50 digits and against direct simulation).

The threshold: τ = C + x*, x* the least integer x ≥ 0 with the bound on B(x) at most
p₁ (:func:`least_offset`, a doubling then bisection on the monotone bound).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpcount.keyed.prf import F64, I64, PositionPRF, PRFKey, keyed_discrete_laplace

__all__ = [
    "SparseVectorCalibration",
    "SparseVectorNoise",
    "calibrate",
    "least_offset",
    "release_bound",
    "release_profile",
]

#: relative inflation of the floating-point sums (their error is below 1e-10)
_SLACK = 1e-9
#: a term whose logarithm is below this is counted as e^{_FLOOR_LOG} (not as 0)
_FLOOR_LOG = -700.0


@functools.lru_cache(maxsize=1024)
def _log_q(scale: Fraction) -> float:
    """ln q = −1/t, correctly rounded from the exact rational."""
    return -float(1 / Fraction(scale))


@functools.lru_cache(maxsize=1024)
def _log_pmf_norm(scale: Fraction) -> float:
    """ln((1 − q)/(1 + q))."""
    lq = _log_q(scale)
    return math.log(-math.expm1(lq)) - math.log1p(math.exp(lq))


def _log_upper_tail(scale: Fraction, x: int) -> float:
    """ln P[Y ≥ x] for x ≥ 1: x·ln q − ln(1 + q)."""
    lq = _log_q(scale)
    return x * lq - math.log1p(math.exp(lq))


def _log_no_cross(nu_scale: Fraction, y: I64) -> F64:
    """ln(1 − S(y)) = ln P[ν < y] for every y: for y ≤ 0 the closed form
    (1 − y)·ln q − ln(1 + q); for y ≥ 1 log1p(−S(y)), S(y) = q^y/(1 + q)."""
    lq = _log_q(nu_scale)
    l1q = math.log1p(math.exp(lq))
    yf = y.astype(np.float64)
    low = (1.0 - yf) * lq - l1q
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # y ≤ 0: unused
        high = np.log1p(-np.exp(np.minimum(yf, 1e9) * lq - l1q))
    out: F64 = np.where(y <= 0, low, high)
    return out


def _log_minus_expm1(a: F64) -> F64:
    """ln(1 − e^a) for a ≤ 0 (−inf at a = 0), accurate for a near 0 and for a ≪ 0."""
    with np.errstate(divide="ignore"):
        near = np.log(-np.expm1(np.minimum(a, -1e-300)))
        far = np.log1p(-np.exp(a))
    out: F64 = np.where(a > -math.log(2.0), near, far)
    return out


def _rho_range(rho_scale: Fraction, target: float) -> tuple[int, int, float]:
    """z₋ = −z₊, z₊ with P[ρ > z₊] = P[ρ < z₋] ≤ ``target`` (both bounded exactly by
    the closed form), and that tail mass (upper bound, one side)."""
    t = float(rho_scale)
    z = max(1, math.ceil(t * (math.log(1.0 / target) + 1.0)))
    tail = math.exp(_log_upper_tail(rho_scale, z + 1))
    return -z, z, tail


def release_bound(offset: int, checks: int, rho_scale: Fraction, nu_scale: Fraction) -> float:
    """An upper bound on B(x) = 1 − E_ρ[(1 − P[ν ≥ x + ρ])^n] (module docstring).

    Args:
        offset: x = τ − C, an integer.
        checks: n ≥ 1, the number of checked steps.
        rho_scale, nu_scale: t_ρ, t_ν of the discrete Laplace noises.

    Returns:
        A float at least B(x) (never rounded downward), within about 10⁻⁶ of it
        relatively when B(x) > 10⁻³⁰⁰.
    """
    if checks < 1:
        raise ValueError(f"checks must be >= 1, got {checks!r}")
    # a first pass fixes the truncation at 1e-7 of a crude size of the result
    lo, hi, tail = _rho_range(rho_scale, 1e-12)
    total = _bound_sum(offset, checks, rho_scale, nu_scale, lo, hi)
    if total > 0.0 and tail > 1e-7 * total:
        lo, hi, tail = _rho_range(rho_scale, max(1e-7 * total, 1e-300))
        total = _bound_sum(offset, checks, rho_scale, nu_scale, lo, hi)
    return min(1.0, (total + 2.0 * tail) * (1.0 + _SLACK))


def _bound_sum(
    offset: int, checks: int, rho_scale: Fraction, nu_scale: Fraction, lo: int, hi: int
) -> float:
    """Σ_{z = lo}^{hi} P[ρ = z]·(1 − (1 − S(x + z))^n), every term rounded up to
    at least e^{−700}."""
    z = np.arange(lo, hi + 1, dtype=np.int64)
    log_p = _log_pmf_norm(rho_scale) + np.abs(z).astype(np.float64) * _log_q(rho_scale)
    log_g = _log_minus_expm1(checks * _log_no_cross(nu_scale, offset + z))
    terms = np.exp(np.maximum(log_p + log_g, _FLOOR_LOG))
    return float(np.sum(terms))


def least_offset(
    checks: int,
    rho_scale: Fraction,
    nu_scale: Fraction,
    key_delta: float,
    start: int | None = None,
) -> int:
    """x*, the least integer x ≥ 0 with :func:`release_bound` (x) ≤ ``key_delta`` (the
    bound is non-increasing in x). ``start``: a guess near x* (default 0), from which a
    galloping search brackets x* before a bisection; the result does not depend on it."""
    if not 0 < key_delta < 1:
        raise ValueError(f"key_delta must be in (0, 1), got {key_delta!r}")

    def ok(x: int) -> bool:
        return release_bound(x, checks, rho_scale, nu_scale) <= key_delta

    lo, hi = -1, None  # invariant: not ok(lo) (lo = −1: none), ok(hi)
    guess = 0 if start is None else max(0, start)
    step = 1
    if ok(guess):  # gallop down from the guess
        hi = guess
        while hi > 0:
            below = max(0, hi - step)
            if not ok(below):
                lo = below
                break
            hi, step = below, 2 * step
    else:  # gallop up
        lo = guess
        while True:
            above = lo + step
            if ok(above):
                hi = above
                break
            lo, step = above, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def release_profile(counts: I64, threshold: int, rho_scale: Fraction, nu_scale: Fraction) -> F64:
    """P[a key is selected at check i] for each check i, given its exact running count
    ``counts``[i] at the i-th checked step (the rest of the mass: never selected).

    P[σ = i] = E_ρ[Π_{i′<i}(1 − S(τ + ρ − c_{i′}))·S(τ + ρ − c_i)], summed over ρ
    within P[|ρ| > z₊] < 10⁻¹² (an estimate for planning, not a privacy bound).
    """
    lo, hi, _ = _rho_range(rho_scale, 1e-12)
    z = np.arange(lo, hi + 1, dtype=np.int64)
    log_p = _log_pmf_norm(rho_scale) + np.abs(z).astype(np.float64) * _log_q(rho_scale)
    y = threshold + z[:, None] - np.asarray(counts, dtype=np.int64)[None, :]
    log_stay = _log_no_cross(nu_scale, y)  # (z, checks)
    before = np.cumsum(log_stay, axis=1) - log_stay  # Π over earlier checks
    cross = _log_minus_expm1(log_stay)  # ln S(y)
    out: F64 = np.exp(log_p[:, None] + before + cross).sum(axis=0)
    return out


@dataclass(frozen=True)
class SparseVectorCalibration:
    """The public calibration of sparse-vector selection (no data, no secret).

    Attributes:
        threshold: τ = C + x*.
        rho_share: ε₁/ε_s, the share of the selection ε spent on ρ (ν gets the rest).
        rho_scale: t_ρ = m·C/ε₁.
        nu_scale: t_ν = m·C/ε₂.
        checks: n, the checked steps over the horizon.
        key_delta: p₁, the bound on a one-unit key's selection probability.
        bound: the computed upper bound on B(τ − C) (at most ``key_delta``).
    """

    threshold: int
    rho_share: Fraction
    rho_scale: Fraction
    nu_scale: Fraction
    checks: int
    key_delta: float
    bound: float


#: the splits ε₁ = ε_s·i/N searched (i = 1..N − 1)
SPLIT_GRID = 100


def calibrate(
    *, epsilon: float, key_delta: float, checks: int, per_key_total: int, max_keys: int
) -> SparseVectorCalibration:
    """τ and the split of ε_s = ``epsilon`` between ρ and ν: every split ε₁ = ε_s·i/N
    (N = :data:`SPLIT_GRID`, i = 1..N − 1; ε₂ = ε_s − ε₁, exact rationals) is tried,
    with scales t_ρ = m·C/ε₁, t_ν = m·C/ε₂ (each key's selection is (ε_s/m)-DP for a
    change of C in its count, :mod:`dpcount.keyed.selection`), and the one with the
    least τ = C + :func:`least_offset` is kept (ties: the least i). A public function
    of public parameters.
    """
    if not (isinstance(per_key_total, int) and per_key_total >= 1):
        raise ValueError(f"per_key_total must be a positive integer, got {per_key_total!r}")
    if not (isinstance(max_keys, int) and max_keys >= 1):
        raise ValueError(f"max_keys must be a positive integer, got {max_keys!r}")
    eps = Fraction(epsilon)
    if not eps > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    return _calibrate(eps, key_delta, checks, per_key_total, max_keys)


@functools.lru_cache(maxsize=64)
def _calibrate(
    eps: Fraction, key_delta: float, checks: int, c: int, m: int
) -> SparseVectorCalibration:
    best: tuple[int, int] | None = None
    x = None
    for i in range(1, SPLIT_GRID):
        e1 = eps * i / SPLIT_GRID
        # the neighbouring split's x* as the start: the same x*, found in a few steps
        x = least_offset(checks, m * c / e1, m * c / (eps - e1), key_delta, start=x)
        if best is None or x < best[0]:
            best = (x, i)
    assert best is not None
    x, i = best
    share = Fraction(i, SPLIT_GRID)
    rho, nu = m * c / (eps * share), m * c / (eps * (1 - share))
    bound = release_bound(x, checks, rho, nu)
    return SparseVectorCalibration(c + x, share, rho, nu, checks, key_delta, bound)


# --------------------------------------------------------------------------------------
# The keyed noise
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SparseVectorNoise:
    """ρ and ν as pure functions of (secret, key position, step), exact Lap_Z.

    ρ of key i is the sample at position (level 0, node 0, key i) of the PRF domain
    ``threshold``; ν of key i at step s the sample at (level 0, node s, key i) of the
    domain ``step`` (:class:`~dpcount.keyed.prf.PositionPRF`, both under the
    selection's own secret). So a key's noise does not depend on the chunking, the
    engine, the run split or the other keys.
    """

    secret: PRFKey | bytes
    key_block: int
    rho_scale: Fraction
    nu_scale: Fraction

    def rho(self, lo: int, hi: int) -> I64:
        prf = PositionPRF(self.secret, "sparse-vector/threshold", self.key_block)
        out: I64 = keyed_discrete_laplace(prf, (0, 0, 1, lo, hi), self.rho_scale)[0]
        return out

    def nu(self, steps: I64, lo: int, hi: int) -> I64:
        """ν at ``steps`` (increasing) for keys [lo, hi): shape (len(steps), hi − lo)."""
        prf = PositionPRF(self.secret, "sparse-vector/step", self.key_block)
        out = np.empty((len(steps), hi - lo), dtype=np.int64)
        if len(steps) == 0:
            return out
        # contiguous runs of steps: one rectangle each
        breaks = np.flatnonzero(np.diff(steps) != 1) + 1
        for part in np.split(np.arange(len(steps)), breaks):
            s0, s1 = int(steps[part[0]]), int(steps[part[-1]]) + 1
            out[part] = keyed_discrete_laplace(prf, (0, s0, s1, lo, hi), self.nu_scale)
        return out
