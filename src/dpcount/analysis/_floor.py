"""A lower bound on the MSE of every Gaussian-noise counting mechanism, without scipy.

``auto`` with δ ranks the Gaussian rows (continuous and discrete Gaussian) against
the Laplace rows. When the best Laplace-family figures lie clearly below
:func:`gaussian_mse_floor`, no Gaussian row can rank first, and
:func:`~dpcount.analysis.recommend.recommend_mechanism` skips building them (the
optimized Toeplitz and BLT rows import ``scipy.optimize``, the analytic Gaussian
calibration ``scipy.special``). The floor only decides what to skip; every mechanism
that is built keeps its own calibration.

Why it is a floor: a Gaussian-noise counting mechanism is a factorization A = BC of
the T×T all-ones lower-triangular matrix (the trees, Honaker's estimator and input
perturbation are linear too) with noise of standard deviation σ = step·‖C‖_{1→2}·σ₁,
σ₁ ≥ σ_a the smallest σ for which the Gaussian mechanism of sensitivity 1 is (ε, δ)-DP
(Balle & Wang 2018, Theorem 8: the analytic calibration is exact; the classic, fhu
and zCDP calibrations give a larger σ). Its MSE is σ²‖B‖_F²/T ≥
step²σ_a²·(‖A‖_*/T)², because ‖B‖_F‖C‖_{1→2} ≥ ‖A‖_* (the nuclear-norm bound of
:func:`~dpcount.analysis.certificates.certified_lower_bound`). A discrete Gaussian of
parameter s ≥ 1 has variance above s²(1 − 10⁻⁶) (:data:`DISCRETE_VARIANCE_FACTOR`,
its gap to s² is about 8π²s²e^{−2π²s²}·s², 2·10⁻⁷ at s = 1; tested over a grid), so
with step·σ_a ≥ 1 the floor times that factor bounds the discrete rows too.

σ_a is computed here from :func:`math.erfc` (:func:`analytic_sigma_floor`) and
lowered by a relative :data:`SIGMA_FLOOR_MARGIN`, far above the floating-point error
of the evaluation; the tests check it stays below
:func:`~dpcount.privacy.calibration.gaussian_sigma` over a grid.
:func:`analytic_sigma_ceiling` is the same bisection's upper end raised by that
margin (tested above ``gaussian_sigma``): with it ``auto`` bounds the MSE of one
Gaussian row from above (the BLT's closed forms), to say that a Gaussian row ranks
first without building it. Neither bound ever calibrates noise.

References:
    [references: bw18, cks20]
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from dpcount._numeric import bisect
from dpcount._validate import check_integer
from dpcount.privacy._statements import cite

__doc__ = cite(__doc__)

__all__ = [
    "DISCRETE_VARIANCE_FACTOR",
    "NUCLEAR_NORM_MAX_HORIZON",
    "SIGMA_FLOOR_MARGIN",
    "analytic_sigma_ceiling",
    "analytic_sigma_floor",
    "counting_nuclear_norm",
    "gaussian_mse_floor",
    "normalized_sqrt_dense_losses",
]

#: largest T whose nuclear norm ‖A‖_* :func:`counting_nuclear_norm` sums (chunked, O(T))
NUCLEAR_NORM_MAX_HORIZON = 1 << 26
#: relative amount subtracted from the summed nuclear norm (floating-point margin)
_NUCLEAR_MARGIN = 1e-12
_CHUNK = 1 << 20
#: relative amount :func:`analytic_sigma_floor` lowers its σ by
SIGMA_FLOOR_MARGIN = 1e-6
#: a discrete Gaussian of parameter s ≥ 1 has variance ≥ s² times this
DISCRETE_VARIANCE_FACTOR = 1.0 - 1e-6
#: largest T :func:`normalized_sqrt_dense_losses` builds its T×T matrices for
NORMALIZED_SQRT_DENSE_MAX_HORIZON = 1024
#: below this Φ(x) is not taken from erfc (it would underflow): no floor
_LOG_NDTR_MIN_X = -37.0


@lru_cache(maxsize=64)
def counting_nuclear_norm(horizon: int) -> float:
    """‖A‖_*, the nuclear norm of the T×T lower-triangular all-ones matrix, rounded
    down by a relative 10⁻¹².

    Its singular values are σ_k = 1/(2 sin((2k − 1)π/(4T + 2))), k = 1..T
    (AAᵀ has the tridiagonal inverse with diagonal (2, …, 2, 1) and off-diagonal
    −1, whose eigenvalues are 4 sin²((2k − 1)π/(4T + 2)); checked against a dense SVD
    in the tests). Summed in float64 in chunks, O(T).

    Raises:
        ValueError: ``horizon`` outside [1, 2^26] (naming it).
    """
    T = check_integer("horizon", horizon, ge=1, le=NUCLEAR_NORM_MAX_HORIZON)
    total = 0.0
    for lo in range(1, T + 1, _CHUNK):
        k = np.arange(lo, min(T, lo + _CHUNK - 1) + 1, dtype=np.float64)
        total += float(np.sum(0.5 / np.sin((2.0 * k - 1.0) * math.pi / (4.0 * T + 2.0))))
    return total * (1.0 - _NUCLEAR_MARGIN)


def _log_ndtr(x: float) -> float:
    """log Φ(x) from erfc (accurate to a few ulp of Φ for x ≥ −37)."""
    return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))


@lru_cache(maxsize=256)
def _analytic_bracket(epsilon: float, delta: float) -> tuple[float, float] | None:
    """(lo, hi): log σ just below and just above the root of Balle & Wang's δ(σ) = δ
    (Theorem 8) at sensitivity 1, the bisection of
    :func:`~dpcount.privacy.calibration.gaussian_sigma` with Φ from :func:`math.erfc`
    (width below 10⁻¹⁵); None when Φ's argument leaves erfc's range."""
    target = math.log(delta)

    def excess(log_sigma: float) -> float:
        u = math.exp(-log_sigma)
        a, b = u / 2.0 - epsilon / u, -u / 2.0 - epsilon / u
        if b < _LOG_NDTR_MIN_X:
            raise OverflowError
        log_pa, log_pb = _log_ndtr(a), _log_ndtr(b)
        x = epsilon + log_pb - log_pa
        if x >= 0.0:
            raise OverflowError
        return log_pa + math.log(-math.expm1(x)) - target

    try:
        guess = math.log(math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
        lo, hi = guess - 1.0, guess + 1.0
        for _ in range(20):
            if excess(lo) > 0.0:
                break
            lo -= 2.0
        else:
            return None
        for _ in range(20):
            if excess(hi) <= 0.0:
                break
            hi += 2.0
        else:
            return None
        return bisect(lambda s: excess(s) > 0.0, lo, hi, done=lambda a, b: b - a < 1e-15)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None


def analytic_sigma_floor(epsilon: float, delta: float) -> float | None:
    """A lower bound on the analytic Gaussian σ at sensitivity 1
    (:func:`~dpcount.privacy.calibration.gaussian_sigma`), or None when it cannot be
    evaluated without scipy (Φ's argument below −37).

    The same bisection on log σ of Balle & Wang's δ(σ) (Theorem 8), keeping the
    lower end, then lowered by a relative :data:`SIGMA_FLOOR_MARGIN`.
    """
    bracket = _analytic_bracket(float(epsilon), float(delta))
    return None if bracket is None else math.exp(bracket[0]) * (1.0 - SIGMA_FLOOR_MARGIN)


def analytic_sigma_ceiling(epsilon: float, delta: float) -> float | None:
    """An upper bound on the analytic Gaussian σ at sensitivity 1, as
    :func:`~dpcount.privacy.calibration.gaussian_sigma` computes it (rounded up by its
    solver margin), or None as for :func:`analytic_sigma_floor`.

    The bisection's upper end raised by a relative :data:`SIGMA_FLOOR_MARGIN` (far
    above both the error of erfc here and the 10⁻¹⁰ that ``gaussian_sigma`` adds). It
    only bounds figures ``auto`` reports (:mod:`dpcount.analysis.recommend`); no
    noise is ever calibrated with it.
    """
    bracket = _analytic_bracket(float(epsilon), float(delta))
    return None if bracket is None else math.exp(bracket[1]) * (1.0 + SIGMA_FLOOR_MARGIN)


def gaussian_mse_floor(
    horizon: int,
    epsilon: float,
    delta: float,
    step_sensitivity: float,
    *,
    discrete: bool = True,
) -> float | None:
    """A lower bound on the exact MSE of every counting mechanism with continuous or
    discrete Gaussian noise (single participation) at (ε, δ), or None when there is
    none here (see the module: step·σ_a < 1, Φ out of erfc's range, or T > 2^26).
    ``discrete=False``: of every mechanism with continuous Gaussian noise only (no
    step·σ_a ≥ 1 needed, no discrete variance factor)."""
    if horizon > NUCLEAR_NORM_MAX_HORIZON:
        return None
    sigma = analytic_sigma_floor(float(epsilon), float(delta))
    if sigma is None or (discrete and step_sensitivity * sigma < 1.0):
        return None
    loss = (counting_nuclear_norm(horizon) / horizon) ** 2
    return (step_sensitivity * sigma) ** 2 * loss * (DISCRETE_VARIANCE_FACTOR if discrete else 1.0)


@lru_cache(maxsize=16)
def normalized_sqrt_dense_losses(horizon: int) -> tuple[float, float] | None:
    """(squared ℓ₂ sensitivity, mean variance per unit noise variance) of the
    column-normalized square-root factorization (``normalized-sqrt``), from its T×T
    matrices by the definition, or None for T above
    :data:`NORMALIZED_SQRT_DENSE_MAX_HORIZON`.

    The encoder C′ = C·diag(1/e) is the square root C of the counting matrix A
    (lower-triangular Toeplitz of f(0) = 1, f(k) = f(k − 1)(2k − 1)/(2k): C² = A) with
    every column scaled to the first one's norm (e_j: column j's norm over column 0's);
    the decoder is B′ = A·C′⁻¹ = A·diag(e)·C⁻¹, C⁻¹ the Toeplitz matrix of the inverse
    power series of f (g_0 = 1, g_n = −Σ_{k=1..n} f(k)·g_{n−k}; not the module's
    closed forms: :func:`~dpcount.counting.factorization.normalized_sqrt.normalized_sqrt_losses`
    is checked against this in the tests), and A's cumulative sum over rows. The
    sensitivity is C′'s largest squared column norm, the variance ‖B′‖_F²/T. Used only
    to bound the MSE of plan's ``normalized-sqrt`` row from above
    (:mod:`dpcount.analysis.recommend`), never to calibrate noise; O(T²), a few ms.
    """
    T = check_integer("horizon", horizon, ge=1)
    if T > NORMALIZED_SQRT_DENSE_MAX_HORIZON:
        return None
    k = np.arange(1, T, dtype=np.float64)
    f = np.concatenate(([1.0], np.cumprod((2.0 * k - 1.0) / (2.0 * k))))
    g = np.zeros(T)
    g[0] = 1.0
    for n in range(1, T):
        g[n] = -float(np.dot(f[1 : n + 1], g[n - 1 :: -1]))
    lag = np.subtract.outer(np.arange(T), np.arange(T))
    inside = lag >= 0
    C = np.where(inside, f[np.where(inside, lag, 0)], 0.0)
    squares = np.sum(C * C, axis=0)
    e = np.sqrt(squares / squares[0])
    encoder = C / e
    inverse = np.where(inside, g[np.where(inside, lag, 0)], 0.0)  # C⁻¹
    decoder = np.cumsum(e[:, None] * inverse, axis=0)  # A·diag(e)·C⁻¹
    sensitivity = float(np.max(np.sum(encoder * encoder, axis=0)))
    return sensitivity, float(np.sum(decoder * decoder)) / T
