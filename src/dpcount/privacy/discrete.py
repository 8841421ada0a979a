"""Exact integer-valued noise: discrete Laplace and discrete Gaussian samplers.

Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020; CKS below). Every sample is an exact function of uniform random
words, so no floating-point rounding can leak the data (Mironov 2012; Jin et al.
2022). The samplers are those of :mod:`dpcount.privacy.sampling`, the same for a
Generator (``sample(rng, size)``) and for the keyed PRF (``draw(block)``):

* Bernoulli(exp(−γ)) for rational γ ≥ 0 (the role of CKS Algorithm 1) is [−ln V > γ]
  for a uniform V read to as many bits as the comparison needs;
* discrete Laplace Lap_Z(t), P[Y = y] ∝ exp(−|y|/t), is G₁ − G₂ of two geometric
  variables G = ⌊t·(−ln V)⌋ (Inusah & Kozubowski 2006), decided exactly;
* discrete Gaussian N_Z(0, σ²), P[Y = y] ∝ exp(−y²/(2σ²)), by CKS Algorithm 3:
  rejection from Lap_Z(⌊σ⌋ + 1) with acceptance Bernoulli(exp(−γ(y))).

Each runs vectorized over the samples still outstanding. Scales are rationals
(:class:`fractions.Fraction`). :func:`rational_at_least` rounds a requested scale
*up* to a rational whose integers fit in int64 arithmetic, so the noise is never
smaller than calibrated.

Notation (paper → code): t (Lap scale) → ``num/den``; σ² → ``a/b``;
t in Alg. 3 → ``t = ⌊σ⌋ + 1``; γ → ``gamma_num/gamma_den``.

References:
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * S. Inusah, T. J. Kozubowski. "A discrete analogue of the Laplace
      distribution". J. Statistical Planning and Inference 136(3), 2006. (no link)
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

import math
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
from dpcount.privacy import sampling
from dpcount.privacy.noise import WordSampler
from dpcount.privacy.sampling import GeneratorBlock, WordBlock

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

#: Largest numerator of a discrete Laplace scale (keeps U + num·V far inside int64).
_LAPLACE_MAX_NUM = 2**40
#: A discrete Gaussian σ² = a/b is stored with a ≥ 2^26 when possible (σ² to ~1e-8).
_GAUSS_NUM_BITS = 26
#: Largest denominator of a discrete Laplace scale (kept from the int64 arithmetic of
#: CKS Alg. 2, which 0.4 used: the same scales are accepted).
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
# Sampling on a Generator: the word samplers of dpcount.privacy.sampling
# --------------------------------------------------------------------------------------
def bernoulli_exp(
    rng: np.random.Generator, gamma_num: IntArray | int, gamma_den: int, size: int | None = None
) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(−γ)) for rational γ = gamma_num/gamma_den ≥ 0: [−ln V > γ] for
    a uniform V read from the Generator's words to as many bits as the comparison needs
    (:func:`dpcount.privacy.sampling.bernoulli_exp`; the role of CKS Algorithm 1).

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
    return sampling.bernoulli_exp(GeneratorBlock(rng, nums.shape), nums, int(gamma_den))


def sample_discrete_laplace(
    rng: np.random.Generator, scale: Fraction | int, size: Shape
) -> IntArray:
    """Exact samples of Lap_Z(scale): P[y] = tanh(1/(2·scale))·exp(−|y|/scale).

    G₁ − G₂ of two exact geometric variables drawn from the Generator's words
    (:func:`dpcount.privacy.sampling.discrete_laplace`). ``scale`` is a rational
    num/den with num ≤ 2^40 (see :func:`rational_at_least`).
    """
    check_generator("rng", rng)
    t = _as_fraction("scale", scale)
    if t.numerator > _LAPLACE_MAX_NUM:
        raise ValueError(f"scale must be a rational in (0, 2^40] with numerator <= 2^40, got {t}")
    _check_laplace_scale("scale", t, scale)
    shape = check_size("size", size)
    return sampling.discrete_laplace(GeneratorBlock(rng, shape), t)


def sample_discrete_gaussian(
    rng: np.random.Generator, sigma2: Fraction | int, size: Shape
) -> IntArray:
    """Exact samples of N_Z(0, σ²): P[y] ∝ exp(−y²/(2σ²)) (CKS Algorithm 3 on the
    Generator's words, :func:`dpcount.privacy.sampling.discrete_gaussian`).

    ``sigma2`` is the rational σ² (not σ).
    """
    check_generator("rng", rng)
    s2 = _as_fraction("sigma2", sigma2)
    if s2 > Fraction(_GAUSS_MAX_SIGMA) ** 2:
        raise ValueError(f"sigma2 must be <= (2^40 - 1)^2 for the exact sampler, got {sigma2!r}")
    shape = check_size("size", size)
    return sampling.discrete_gaussian(GeneratorBlock(rng, shape), s2)


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
class DiscreteLaplaceNoise(WordSampler):
    """Discrete Laplace Lap_Z(t) noise, exact (G₁ − G₂ of two geometric variables,
    :func:`dpcount.privacy.sampling.discrete_laplace`), as int64.

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

    def draw(self, block: WordBlock) -> IntArray:
        """Lap_Z(scale) at every position of ``block``
        (:func:`~dpcount.privacy.sampling.discrete_laplace`)."""
        return sampling.discrete_laplace(block, self.scale)


@dataclass(frozen=True)
class DiscreteGaussianNoise(WordSampler):
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

    def draw(self, block: WordBlock) -> IntArray:
        """N_Z(0, σ²) at every position of ``block``
        (:func:`~dpcount.privacy.sampling.discrete_gaussian`)."""
        return sampling.discrete_gaussian(block, self.sigma2)
