"""Exact integer-valued noise: discrete Laplace and discrete Gaussian samplers.

Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020; CKS below). Every sample is produced with integer arithmetic
only, from uniform integers drawn with the Generator, so no floating-point
rounding can leak the data (Mironov 2012; Jin et al. 2022):

* Algorithm 1 — Bernoulli(exp(−γ)) for rational γ = n/d ≥ 0: for γ ≤ 1, draw
  A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first failure K and return
  [K odd]; for γ > 1, ⌊γ⌋ successes of Bernoulli(exp(−1)) and then
  Bernoulli(exp(−(γ − ⌊γ⌋))). Bernoulli(γ/k) is Bernoulli(n/d)·Bernoulli(1/k),
  each a comparison of a uniform integer.
* Algorithm 2 — discrete Laplace Lap_Z(t) with rational scale t = num/den:
  P[Y = y] ∝ exp(−|y|/t).
* Algorithm 3 — discrete Gaussian N_Z(0, σ²) with rational σ² = a/b:
  P[Y = y] ∝ exp(−y²/(2σ²)), by rejection from Lap_Z(⌊σ⌋ + 1).

Vectorization: each algorithm runs in *rounds* over the samples still
outstanding (a NumPy index array); every round draws one uniform integer per
outstanding sample and retires those whose loop has ended. The rounds needed
grow like the logarithm of the batch size, so a batch costs O(n) array work.

Scales are rationals (:class:`fractions.Fraction`). :func:`rational_at_least`
rounds a requested scale *up* to a rational whose integers fit in int64
arithmetic, so the noise is never smaller than calibrated. For the discrete
Gaussian the int64 path holds while |y| ≤ ``_ymax`` (about 20σ or more for
σ ≤ 10^4); rarer or larger samples take an exact Python-integer path, which is
much slower: σ beyond about 2·10^4 is exact but far below the 1M samples/s of
the vectorized path.

Notation (paper → code): t (Lap scale) → ``num/den``; σ² → ``a/b``;
t in Alg. 3 → ``t = ⌊σ⌋ + 1``; γ → ``gamma_num/gamma_den``.

References:
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * A. Ghosh, T. Roughgarden, M. Sundararajan. "Universally
      utility-maximizing privacy mechanisms". STOC 2009.
      https://arxiv.org/abs/0811.2841
    * I. Mironov. "On significance of the least significant bits for
      differential privacy". ACM CCS 2012. (no link)
    * J. Jin, E. McMurtry, B. I. P. Rubinstein, O. Ohrimenko. "Are we there
      yet? Timing and floating-point attacks on differential privacy systems".
      IEEE S&P 2022. https://arxiv.org/abs/2112.05307
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcount._validate import (
    as_array,
    check_generator,
    check_integer,
    check_real,
    check_real_dtype,
    check_size,
)

__all__ = [
    "DiscreteGaussianNoise",
    "DiscreteLaplaceNoise",
    "bernoulli_exp",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "rational_at_least",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
]

Shape = int | tuple[int, ...]
IntArray = NDArray[np.int64]

_INT64_SQRT = math.isqrt(2**63 - 1)
#: Largest numerator of a discrete Laplace scale (keeps U + num·V far inside int64).
_LAPLACE_MAX_NUM = 2**40
#: A discrete Gaussian σ² = a/b is stored with a ≥ 2^26 when possible (σ² to ~1e-8).
_GAUSS_NUM_BITS = 26
#: Largest denominator of a discrete Laplace scale (int64 arithmetic in Alg. 2).
_LAPLACE_MAX_DEN = 2**62
#: Largest discrete Gaussian σ: Alg. 3 draws Lap_Z(⌊σ⌋ + 1), whose scale must fit 2^40.
_GAUSS_MAX_SIGMA = float(2**40 - 1)


def _as_fraction(name: str, value: object) -> Fraction:
    """``Fraction(value)`` for an int, a Fraction or a finite real; errors name ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, np.integer, Fraction, float, np.floating)
    ):
        raise TypeError(
            f"{name} must be a positive rational or real number, got {value!r} of type "
            f"{type(value).__name__}"
        )
    if not isinstance(value, (int, np.integer, Fraction)):
        check_real(name, value)
    out = Fraction(value)  # type: ignore[arg-type]
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def _check_laplace_scale(name: str, t: Fraction, requested: object) -> Fraction:
    """A rounded discrete Laplace scale the int64 sampler can use exactly."""
    if t.numerator > _LAPLACE_MAX_NUM:
        raise ValueError(
            f"{name} must be <= 2^40 for the exact discrete Laplace sampler, got {requested!r}"
        )
    if t.denominator > _LAPLACE_MAX_DEN:
        raise ValueError(
            f"{name} must be >= 2^-22 for the exact discrete Laplace sampler (int64 "
            f"arithmetic; smaller scales add no noise in practice), got {requested!r}"
        )
    return t


def rational_at_least(value: float | Fraction, max_numerator: int) -> Fraction:
    """The smallest p/2^k ≥ ``value`` with the largest k keeping p ≤ ``max_numerator``.

    Exact: ``value`` is converted with :class:`~fractions.Fraction` (a float is a
    dyadic rational), so the result is never below the real number given.
    """
    x = _as_fraction("value", value)
    check_integer("max_numerator", max_numerator, ge=1)
    k = 0
    # Largest power-of-two denominator 2^k with ceil(x·2^k) ≤ max_numerator.
    while math.ceil(x * 2 ** (k + 1)) <= max_numerator and k < 200:
        k += 1
    while k > -200 and math.ceil(x * Fraction(2) ** k) > max_numerator:
        k -= 1
    scaled = x * Fraction(2) ** k
    return Fraction(math.ceil(scaled)) / Fraction(2) ** k


# --------------------------------------------------------------------------------------
# Algorithm 1: Bernoulli(exp(−γ)), vectorized
# --------------------------------------------------------------------------------------
def _bernoulli_exp_small(rng: np.random.Generator, num: IntArray, den: int) -> NDArray[np.bool_]:
    """Bernoulli(exp(−num/den)) elementwise for 0 ≤ num ≤ den < 2^63 (CKS Alg. 1, γ ≤ 1)."""
    n = num.shape[0]
    out = np.empty(n, dtype=bool)
    active = np.arange(n)
    cur = num
    k = 1
    while active.size:
        # A_k ~ Bernoulli(γ/k) = Bernoulli(γ)·Bernoulli(1/k), independent.
        a = rng.integers(0, den, size=active.size) < cur
        if k > 1:
            a &= rng.integers(0, k, size=active.size) == 0
        out[active[~a]] = k % 2 == 1
        active = active[a]
        cur = cur[a]
        k += 1
    return out


_F20 = math.factorial(20)
#: F20/k! for k = 20, 19, …, 1 (ascending): with U uniform on [0, 20!), the event
#: U < 20!/k! has probability exactly 1/k!.
_FACTORIAL_THRESHOLDS = np.array(
    [_F20 // math.factorial(k) for k in range(20, 0, -1)], dtype=np.int64
)


def _bernoulli_exp_one(rng: np.random.Generator, n: int) -> NDArray[np.bool_]:
    """n draws of Bernoulli(exp(−1)) (CKS Alg. 1 with γ = 1), one uniform integer each.

    In Algorithm 1 with γ = 1, A_k ~ Bernoulli(1/k) and K is the first failure, so
    P[K > k] = 1/k!. One uniform U on [0, 20!) decides all of A_1..A_20 at once:
    K > k exactly when U < 20!/k!. If K > 20 (U = 0, probability 1/20!), the
    loop continues with fresh Bernoulli(1/k) draws for k = 21, 22, …
    """
    u = rng.integers(0, _F20, size=n)
    passed = 20 - np.searchsorted(_FACTORIAL_THRESHOLDS, u, side="right")  # #{k: U < 20!/k!}
    k_first_fail = passed + 1
    for i in np.flatnonzero(passed == 20):
        k = 21
        while int(rng.integers(0, k)) == 0:
            k += 1
        k_first_fail[i] = k
    return np.asarray(k_first_fail % 2 == 1)


def _all_exp_one(rng: np.random.Generator, counts: IntArray) -> NDArray[np.bool_]:
    """Whether ``counts[i]`` independent Bernoulli(exp(−1)) draws all succeed (prob e^−count)."""
    ok = np.ones(counts.shape[0], dtype=bool)
    left = counts.copy()
    active = np.flatnonzero(left > 0)
    while active.size:
        success = _bernoulli_exp_one(rng, active.size)
        ok[active[~success]] = False
        active = active[success]
        left[active] -= 1
        active = active[left[active] > 0]
    return ok


def _geometric_exp_one(rng: np.random.Generator, n: int) -> IntArray:
    """Successes of Bernoulli(exp(−1)) before the first failure: P[V ≥ v] = e^−v."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        success = _bernoulli_exp_one(rng, active.size)
        active = active[success]
        v[active] += 1
    return v


def bernoulli_exp(
    rng: np.random.Generator, gamma_num: IntArray | int, gamma_den: int, size: int | None = None
) -> NDArray[np.bool_]:
    """Bernoulli(exp(−γ)) for rational γ = gamma_num/gamma_den ≥ 0 (CKS Algorithm 1).

    Args:
        rng: the Generator.
        gamma_num: non-negative integers (array) or one integer (with ``size``).
        gamma_den: positive integer < 2^63.
        size: number of draws when ``gamma_num`` is a scalar.
    """
    check_generator("rng", rng)
    if isinstance(gamma_den, bool) or not isinstance(gamma_den, (int, np.integer)):
        raise TypeError(f"gamma_den must be an integer, got {gamma_den!r}")
    if not 0 < gamma_den < 2**63:
        raise ValueError(f"gamma_den must be in (0, 2^63), got {gamma_den}")
    raw = check_real_dtype("gamma_num", as_array("gamma_num", gamma_num))
    if not np.issubdtype(raw.dtype, np.integer):
        raise TypeError(f"gamma_num must hold integers, got dtype {raw.dtype}")
    nums = raw.astype(np.int64)
    if nums.ndim == 0:
        if size is not None:
            check_integer("size", size, ge=0)
        nums = np.full(1 if size is None else size, int(nums), dtype=np.int64)
    if np.any(nums < 0):
        raise ValueError("gamma_num must be >= 0")
    whole, frac = np.divmod(nums, np.int64(gamma_den))
    ok = _all_exp_one(rng, whole)
    idx = np.flatnonzero(ok)
    ok[idx] = _bernoulli_exp_small(rng, frac[idx], gamma_den)
    return ok


# --------------------------------------------------------------------------------------
# Algorithm 2: discrete Laplace
# --------------------------------------------------------------------------------------
def _laplace_candidates(rng: np.random.Generator, num: int, den: int, m: int) -> IntArray:
    """Run m independent trials of CKS Alg. 2's loop body; return the accepted outputs in order."""
    u = rng.integers(0, num, size=m)
    pos = np.flatnonzero(_bernoulli_exp_small(rng, u, num))  # D ~ Bernoulli(exp(−U/t))
    v = _geometric_exp_one(rng, pos.size)
    y = (u[pos] + num * v) // den  # X = U + t·V ~ Geom(e^{−1/t}); Y = ⌊X/s⌋
    negative = rng.integers(0, 2, size=pos.size).astype(bool)
    keep = ~(negative & (y == 0))  # B = 1 and Y = 0: reject (0 counted once)
    out: IntArray = np.where(negative[keep], -y[keep], y[keep])
    return out


def _laplace_accept_probability(num: int, den: int) -> float:
    # P[D = 1] = (1 − e^{−1})/(t(1 − e^{−1/t})), P[keep] = (1 + e^{−s/t})/2
    p_d = -math.expm1(-1.0) / (num * -math.expm1(-1.0 / num))
    return p_d * (1.0 + math.exp(-den / num)) / 2.0


def _fill(n: int, accept: float, trials: Callable[[int], IntArray]) -> IntArray:
    """n outputs of a rejection sampler: trials in batches sized for one round (10% slack).

    Accepted trials are i.i.d. from the target, so keeping the first n accepted in
    trial order is exact; surplus accepted outputs are discarded, never reused.
    """
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        got = trials(min(int(need / accept * 1.1) + 16, 1 << 24))[:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out


def _discrete_laplace_flat(rng: np.random.Generator, num: int, den: int, n: int) -> IntArray:
    return _fill(
        n,
        _laplace_accept_probability(num, den),
        lambda m: _laplace_candidates(rng, num, den, m),
    )


def sample_discrete_laplace(
    rng: np.random.Generator, scale: Fraction | int, size: Shape
) -> IntArray:
    """Exact samples of Lap_Z(scale): P[y] = tanh(1/(2·scale))·exp(−|y|/scale) (CKS Alg. 2).

    ``scale`` is a rational num/den with num ≤ 2^40 (see :func:`rational_at_least`).
    """
    check_generator("rng", rng)
    t = _as_fraction("scale", scale)
    if t.numerator > _LAPLACE_MAX_NUM:
        raise ValueError(f"scale must be a rational in (0, 2^40] with numerator <= 2^40, got {t}")
    _check_laplace_scale("scale", t, scale)
    shape = check_size("size", size)
    n = math.prod(shape)
    return _discrete_laplace_flat(rng, t.numerator, t.denominator, n).reshape(shape)


# --------------------------------------------------------------------------------------
# Algorithm 3: discrete Gaussian
# --------------------------------------------------------------------------------------
def _gaussian_params(sigma2: Fraction) -> tuple[int, int, int, int, int]:
    """(a, b, t, D, ymax): σ² = a/b, t = ⌊σ⌋ + 1, γ-denominator D = 2abt², int64 bound."""
    a, b = sigma2.numerator, sigma2.denominator
    t = math.isqrt(a // b) + 1
    den = 2 * a * b * t * t
    if den >= 2**62:
        return a, b, t, den, -1
    # |y·b·t − a| ≤ isqrt(2^63 − 1) keeps (y·b·t − a)² inside int64.
    ymax = (_INT64_SQRT - 1 + a) // (b * t) if a < _INT64_SQRT else -1
    return a, b, t, den, ymax


def _uniform_below(rng: np.random.Generator, n: int) -> int:
    """Uniform integer in [0, n) for any Python int n ≥ 1 (rejection on random bytes)."""
    if n <= 2**62:
        return int(rng.integers(0, n))
    bits = (n - 1).bit_length()
    nbytes = (bits + 7) // 8
    mask = (1 << bits) - 1
    while True:
        v = int.from_bytes(rng.bytes(nbytes), "little") & mask
        if v < n:
            return v


def _bernoulli_exp_exact(rng: np.random.Generator, num: int, den: int) -> bool:
    """Bernoulli(exp(−num/den)) with Python integers of any size (CKS Alg. 1)."""
    whole, frac = divmod(num, den)
    for _ in range(whole):
        if not bool(_bernoulli_exp_one(rng, 1)[0]):
            return False
    k = 1
    while True:
        a = _uniform_below(rng, den) < frac and (k == 1 or _uniform_below(rng, k) == 0)
        if not a:
            return k % 2 == 1
        k += 1


def _gaussian_candidates(
    rng: np.random.Generator, params: tuple[int, int, int, int, int], m: int
) -> IntArray:
    """m independent trials of CKS Alg. 3's loop body; the accepted outputs in order."""
    a, b, t, den, ymax = params
    y = _discrete_laplace_flat(rng, t, 1, m)
    mag = np.abs(y)
    accept = np.zeros(m, dtype=bool)
    fast = np.flatnonzero(mag <= ymax)
    if fast.size:
        # γ = (|y| − σ²/t)²/(2σ²) = (|y|·b·t − a)² / (2·a·b·t²)
        diff = mag[fast] * (b * t) - a
        accept[fast] = bernoulli_exp(rng, diff * diff, den)
    for i in np.flatnonzero(mag > ymax):
        accept[i] = _bernoulli_exp_exact(rng, (int(mag[i]) * b * t - a) ** 2, den)
    return y[accept]


@functools.lru_cache(maxsize=64)
def _gaussian_accept_probability(sigma2: Fraction) -> float:
    """P[C = 1] in Alg. 3 (float; only sizes the batches): Σ_y Lap_Z(t)(y)·e^{−γ(y)}."""
    s2 = float(sigma2)
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    length = math.ceil(40.0 * math.sqrt(s2) + 40.0 * t) + 1
    # Beyond 2^22 terms (σ ≳ 5·10^4) sum every stride-th term times the stride: the
    # terms vary on the scale of σ ≫ stride, and a batch-size estimate needs no more
    # (summing all terms would allocate ~80σ floats).
    stride = max(1, length >> 22)
    y = np.arange(0, length, stride, dtype=np.float64)
    lap = discrete_laplace_pmf(y, float(t))
    accept = np.exp(-((y - s2 / t) ** 2) / (2.0 * s2))
    return max(float(lap[0] * accept[0] + 2.0 * stride * np.dot(lap[1:], accept[1:])), 1e-3)


def _discrete_gaussian_flat(rng: np.random.Generator, sigma2: Fraction, n: int) -> IntArray:
    params = _gaussian_params(sigma2)
    return _fill(
        n,
        _gaussian_accept_probability(sigma2),
        lambda m: _gaussian_candidates(rng, params, m),
    )


def sample_discrete_gaussian(
    rng: np.random.Generator, sigma2: Fraction | int, size: Shape
) -> IntArray:
    """Exact samples of N_Z(0, σ²): P[y] ∝ exp(−y²/(2σ²)) (CKS Algorithm 3).

    ``sigma2`` is the rational σ² (not σ).
    """
    check_generator("rng", rng)
    s2 = _as_fraction("sigma2", sigma2)
    if s2 > Fraction(_GAUSS_MAX_SIGMA) ** 2:
        raise ValueError(f"sigma2 must be <= (2^40 - 1)^2 for the exact sampler, got {sigma2!r}")
    shape = check_size("size", size)
    return _discrete_gaussian_flat(rng, s2, math.prod(shape)).reshape(shape)


# --------------------------------------------------------------------------------------
# Exact pmfs and variances
# --------------------------------------------------------------------------------------
def discrete_laplace_pmf(y: NDArray[Any] | int, scale: float) -> NDArray[np.float64]:
    """P[Y = y] = (1 − p)/(1 + p)·p^|y| with p = exp(−1/scale)."""
    s = check_real("scale", scale, gt=0)
    yy = check_real_dtype("y", as_array("y", y)).astype(np.float64)
    p = math.exp(-1.0 / s)
    c = -math.expm1(-1.0 / s) / (1.0 + p)
    return c * np.exp(-np.abs(yy) / s)


def discrete_laplace_variance(scale: float) -> float:
    """Var Lap_Z(scale) = 2p/(1 − p)² with p = exp(−1/scale) (exact closed form)."""
    s = check_real("scale", scale, gt=0)
    p = math.exp(-1.0 / s)
    q = -math.expm1(-1.0 / s)  # 1 − p without cancellation
    return 2.0 * p / (q * q)


def _gaussian_support(sigma: float) -> NDArray[np.float64]:
    # e^{−x²/(2σ²)} < 1e-320 beyond 39σ: the sum has converged in double precision.
    return np.arange(1, math.ceil(39.0 * sigma) + 2, dtype=np.float64)


def _gaussian_terms(sigma2: float) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    x = _gaussian_support(math.sqrt(sigma2))
    w = np.exp(-(x * x) / (2.0 * sigma2))
    return x, w, 1.0 + 2.0 * float(w.sum())


def discrete_gaussian_pmf(y: NDArray[Any] | int, sigma2: float) -> NDArray[np.float64]:
    """P[Y = y] = exp(−y²/(2σ²))/Σ_z exp(−z²/(2σ²)), normalizer summed to convergence."""
    s2 = check_real("sigma2", sigma2, gt=0)
    yy = check_real_dtype("y", as_array("y", y)).astype(np.float64)
    _, _, norm = _gaussian_terms(s2)
    return np.exp(-(yy * yy) / (2.0 * s2)) / norm


#: Above this σ the sum has over a million terms; by Poisson summation the
#: variance then equals σ² to double precision (σ² − Var < 8π²σ⁴e^{−2π²σ²}).
_VARIANCE_SUM_MAX_SIGMA = 25_000.0


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance of N_Z(0, σ²): 2Σ_{y≥1} y²e^{−y²/(2σ²)} / Σ_y e^{−y²/(2σ²)} (< σ²).

    Summed to convergence in double precision (CKS Prop. 19 gives Var < σ²;
    the gap is below double resolution once σ ≳ 3).
    """
    s2 = check_real("sigma2", sigma2, gt=0)
    if math.sqrt(s2) > _VARIANCE_SUM_MAX_SIGMA:
        return s2
    x, w, norm = _gaussian_terms(s2)
    # The true variance is strictly below σ²; rounding in the sum must not lift it above.
    return min(2.0 * float(np.dot(x * x, w)) / norm, s2)


# --------------------------------------------------------------------------------------
# Samplers (NoiseSampler protocol)
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiscreteLaplaceNoise:
    """Discrete Laplace Lap_Z(t) noise, exact (CKS 2020 Alg. 2), as int64.

    With ℓ₁ sensitivity Δ₁ (an integer change of an integer vector) i.i.d.
    Lap_Z(t) noise is (Δ₁/t)-DP exactly (the geometric mechanism, Ghosh,
    Roughgarden, Sundararajan 2009). Variance 2p/(1 − p)², p = e^{−1/t}.

    Args:
        scale: t > 0; rounded *up* to a rational with numerator ≤ 2^40
            (relative change below 1e-11 for t ≥ 1). ``scale`` afterwards is that rational.
    """

    scale: Fraction
    integer: ClassVar[bool] = True

    def __init__(self, scale: float | Fraction) -> None:
        if not isinstance(scale, Fraction):
            check_real("scale", scale, gt=0)
        t = rational_at_least(_as_fraction("scale", scale), _LAPLACE_MAX_NUM)
        object.__setattr__(self, "scale", _check_laplace_scale("scale", t, scale))

    @property
    def variance(self) -> float:
        return discrete_laplace_variance(float(self.scale))

    def sample(self, rng: np.random.Generator, size: Shape) -> IntArray:
        return sample_discrete_laplace(rng, self.scale, size)


@dataclass(frozen=True)
class DiscreteGaussianNoise:
    """Discrete Gaussian N_Z(0, σ²) noise, exact (CKS 2020 Alg. 3), as int64.

    For an integer vector with ℓ₂ sensitivity Δ₂, i.i.d. N_Z(0, σ²) noise on every
    coordinate is ρ-zCDP with ρ = Δ₂²/(2σ²) (CKS Thm 14). The variance is computed
    exactly by summation (:func:`discrete_gaussian_variance`); it is below σ².

    Args:
        sigma: σ > 0; σ² is rounded *up* to a dyadic rational (relative change
            below ~1.5e-8). ``sigma2`` is that rational, ``sigma`` its square root.
    """

    sigma2: Fraction
    _variance: float = field(repr=False, compare=False)
    integer: ClassVar[bool] = True

    def __init__(self, sigma: float | Fraction) -> None:
        if not isinstance(sigma, Fraction):
            check_real("sigma", sigma, gt=0, le=_GAUSS_MAX_SIGMA)
        s = _as_fraction("sigma", sigma)
        if s > _GAUSS_MAX_SIGMA:
            raise ValueError(f"sigma must be <= 2^40 - 1 for the exact sampler, got {sigma!r}")
        s2 = s * s
        bits = max(s2.numerator.bit_length() - s2.denominator.bit_length() + 1, 1)
        s2 = rational_at_least(s2, 2 ** max(_GAUSS_NUM_BITS, bits))
        object.__setattr__(self, "sigma2", s2)
        object.__setattr__(self, "_variance", discrete_gaussian_variance(float(s2)))

    @property
    def sigma(self) -> float:
        """σ = √(σ²) rounded up to a float (σ² is exact in ``sigma2``)."""
        r = math.sqrt(float(self.sigma2))
        while Fraction(r) ** 2 < self.sigma2:
            r = math.nextafter(r, math.inf)
        return r

    @property
    def variance(self) -> float:
        return self._variance

    def sample(self, rng: np.random.Generator, size: Shape) -> IntArray:
        return sample_discrete_gaussian(rng, self.sigma2, size)
