"""Noise calibration: from sensitivities and a privacy budget to a noise scale.

Every closed form for a noise scale lives here, once, cited to its source.
All functions round *up* (more noise) whenever they round: privacy is never
approximated downward.

Notation: Δ₁, Δ₂ are the ℓ₁ and ℓ₂ sensitivities of the released vector (the
largest change between neighbouring inputs); λ is a Laplace scale
(variance 2λ²); σ is a Gaussian standard deviation; ρ is a zero-concentrated DP
(zCDP) parameter; t is a discrete Laplace scale.

The continuous Laplace/Gaussian calibrations assume real-valued noise; the counting
releases of their floating-point samplers are made float-safe by
:mod:`dpcount.privacy.float_safe` (a grid and a δ term). The
discrete calibrations (:func:`discrete_laplace_scale`,
:func:`discrete_gaussian_sigma`) go with the exact integer samplers of
:mod:`dpcount.privacy.discrete` and are the ones recommended for production.

References:
    * C. Dwork, F. McSherry, K. Nissim, A. Smith. "Calibrating noise to
      sensitivity in private data analysis". TCC 2006, LNCS 3876. (no link)
    * C. Dwork, A. Roth. "The Algorithmic Foundations of Differential Privacy".
      Foundations and Trends in Theoretical Computer Science 9(3–4), 2014.
      https://doi.org/10.1561/0400000042
    * B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
      privacy: analytical calibration and optimal denoising". ICML 2018.
      https://arxiv.org/abs/1805.06530
    * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
      Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
      https://arxiv.org/abs/2408.07021
    * P. Kairouz, S. Oh, P. Viswanath. "The composition theorem for
      differential privacy". ICML 2015. https://arxiv.org/abs/1311.0776
    * H. Fichtenberger, M. Henzinger, J. Upadhyay. "Constant Matters:
      Fine-grained Error Bound on Differentially Private Continual Observation".
      ICML 2023. https://arxiv.org/abs/2202.11205
    * P. Dharangutte, J. Gao, R. Gong, G. Wang. "Differentially Private Range
      Queries with Correlated Input Perturbation". 2024.
      https://arxiv.org/abs/2402.07066
    * A. Ghosh, T. Roughgarden, M. Sundararajan. "Universally
      utility-maximizing privacy mechanisms". STOC 2009.
      https://arxiv.org/abs/0811.2841
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
    * M. Bun, T. Steinke. "Concentrated differential privacy: simplifications,
      extensions, and lower bounds". TCC 2016. https://arxiv.org/abs/1605.02065
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Literal

import numpy as np

from dpcount._numeric import bisect
from dpcount._validate import (
    check_choice,
    check_probability,
    check_real,
    check_scale_in_range,
)
from dpcount.privacy.tails import log_ndtr

__all__ = [
    "GaussianMethod",
    "analytic_gaussian_delta",
    "discrete_gaussian_sigma",
    "discrete_laplace_scale",
    "fhu_constant",
    "fhu_delta",
    "gaussian_sigma",
    "laplace_epsilon",
    "laplace_scale",
    "laplace_scale_approximate",
    "paper_gaussian_sigma",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
]

GaussianMethod = Literal["analytic", "classic", "fhu", "paper"]
GAUSSIAN_METHODS: tuple[str, ...] = ("analytic", "classic", "fhu", "paper")

# Relative safety margin added to numerically solved scales (the solver's own
# tolerance is ~1e-15; this absorbs floating-point error in evaluating δ(σ)).
_SOLVER_MARGIN = 1e-10


def laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """Laplace scale λ = Δ₁/ε for pure ε-DP (the Laplace mechanism).

    Dwork, McSherry, Nissim, Smith 2006; count-on-your-elders Lemma 26.

    Args:
        l1_sensitivity: Δ₁ > 0.
        epsilon: ε > 0.
    """
    d1 = check_real("l1_sensitivity", l1_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    return check_scale_in_range(
        "Laplace scale", d1 / eps, inputs=f"l1_sensitivity={d1!r} and epsilon={eps!r}"
    )


def analytic_gaussian_delta(sigma: float, l2_sensitivity: float, epsilon: float) -> float:
    """The exact δ(ε) of the Gaussian mechanism N(0, σ²) with ℓ₂ sensitivity Δ₂.

    Balle & Wang 2018, Theorem 8:
    δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ). Evaluated in log space so it
    stays accurate when δ is tiny (down to ~1e-300).
    """
    s = check_real("sigma", sigma, gt=0)
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    return math.exp(_log_analytic_delta(s, d2, eps))


def _log_analytic_delta(sigma: float, l2: float, epsilon: float) -> float:
    u = l2 / sigma
    a = u / 2.0 - epsilon / u
    b = -u / 2.0 - epsilon / u
    log_pa = float(log_ndtr(a))
    log_pb = float(log_ndtr(b))
    x = epsilon + log_pb - log_pa  # log of e^ε Φ(b)/Φ(a), always < 0
    if x >= 0.0:  # only reachable through rounding when δ is below ~1e-308
        return -math.inf
    return log_pa + math.log(-math.expm1(x))


@lru_cache(maxsize=4096)
def _analytic_gaussian_sigma(l2: float, epsilon: float, delta: float) -> float:
    """Smallest σ with δ(σ) ≤ delta, by bisection on log σ (keeps the upper end).

    Cached: a deterministic function of its three floats, asked for again and again
    when ``auto`` ranks the trees (one calibration per branching factor and height)."""
    target = math.log(delta)

    def excess(log_sigma: float) -> float:
        return _log_analytic_delta(math.exp(log_sigma), l2, epsilon) - target

    # Bracket: δ(σ) decreases in σ. The classic bound is a good starting point.
    guess = math.log(l2 * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
    lo, hi = guess - 1.0, guess + 1.0
    while excess(lo) <= 0.0:
        lo -= 2.0
    while excess(hi) > 0.0:
        hi += 2.0
    lo, hi = bisect(lambda s: excess(s) > 0.0, lo, hi, done=lambda a, b: b - a < 1e-15)
    return math.exp(hi) * (1.0 + _SOLVER_MARGIN)


def fhu_constant(epsilon: float, delta: float) -> float:
    """C_{ε,δ} = (2/ε)·√(4/9 + ln((1/δ)·√(2/π))) of constant-matters eq. (2).

    Fichtenberger, Henzinger, Upadhyay (ICML 2023); valid for ε, δ ∈ (0, 1).
    """
    eps = check_real("epsilon", epsilon, gt=0)
    if eps >= 1.0:
        raise ValueError(f"epsilon must be < 1 for the fhu constant C_(eps,delta), got {epsilon!r}")
    dlt = check_probability("delta", delta)
    return check_scale_in_range(
        "C_(eps,delta)",
        (2.0 / eps) * math.sqrt(4.0 / 9.0 + math.log(math.sqrt(2.0 / math.pi) / dlt)),
        inputs=f"epsilon={eps!r} and delta={dlt!r}",
    )


def fhu_delta(epsilon: float, constant: float) -> float:
    """The δ at which C_{ε,δ} (constant-matters eq. 2) equals ``constant``, capped at 1.

    Inverts C = (2/ε)·√(4/9 + ln((1/δ)·√(2/π))):
    δ = √(2/π)·exp(4/9 − ε²C²/4).
    """
    eps = check_real("epsilon", epsilon, gt=0)
    c = check_real("constant", constant, gt=0)
    return min(1.0, math.sqrt(2.0 / math.pi) * math.exp(4.0 / 9.0 - eps * eps * c * c / 4.0))


def paper_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ·√(2 ln(2/δ))/ε: correlated-input-perturbation Theorem 3.7 (and 3.8).

    For correlated noise Δ² = ‖diag C⁻¹‖_∞ (the theorem's statement); for i.i.d.
    noise on a vector with ℓ₂ sensitivity Δ it is the same tail bound. Valid only for
    ε ∈ (0, 1] and δ ∈ (0, 1/2], as the theorem requires. Rounded up by a relative
    1e-12.

    Raises:
        ValueError: ε > 1 or δ > 1/2 (use ``calibration="analytic"``, exact for all ε).
    """
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    if eps > 1.0:
        raise ValueError(
            f"epsilon must be <= 1 for calibration='paper' (Theorem 3.7 assumes epsilon in "
            f"(0, 1]), got {epsilon!r}; use calibration='analytic', exact for every epsilon"
        )
    if dlt > 0.5:
        raise ValueError(
            f"delta must be <= 0.5 for calibration='paper' (Theorem 3.7 assumes delta in "
            f"(0, 1/2]), got {delta!r}"
        )
    return d2 * math.sqrt(2.0 * math.log(2.0 / dlt)) / eps * (1.0 + 1e-12)


def gaussian_sigma(
    l2_sensitivity: float,
    epsilon: float,
    delta: float,
    method: GaussianMethod = "analytic",
) -> float:
    """Standard deviation σ of Gaussian noise giving (ε, δ)-DP for ℓ₂ sensitivity Δ₂.

    Methods:
        ``"analytic"``: the exact analytic Gaussian mechanism (Balle & Wang 2018,
            Theorem 8 / Algorithm 1): the smallest σ with
            Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ, solved by bisection in log
            space and rounded up. Valid for every ε > 0.
        ``"classic"``: σ = Δ₂·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Theorem A.1),
            only for ε < 1.
        ``"fhu"``: σ = C_{ε,δ}·Δ₂ with C_{ε,δ} from constant-matters eq. (2), for
            ε, δ ∈ (0, 1).
        ``"paper"``: σ = Δ₂·√(2 ln(2/δ))/ε, the tail bound of
            correlated-input-perturbation Theorem 3.7/3.8 (ε ≤ 1, δ ≤ 1/2), for
            comparison with that paper (:func:`paper_gaussian_sigma`).

    Edge cases: σ → ∞ as δ → 0 and σ → 0 as ε → ∞; δ must lie strictly in (0, 1).

    Raises:
        ValueError: non-positive sensitivity or ε, δ outside (0, 1), or ε ≥ 1 for
            ``"classic"``/``"fhu"``, or an unknown method.
    """
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    check_choice("method", method, GAUSSIAN_METHODS)
    inputs = f"l2_sensitivity={d2!r}, epsilon={eps!r} and delta={dlt!r}"
    if method == "analytic":
        try:
            sigma = _analytic_gaussian_sigma(d2, eps, dlt)
        except (ZeroDivisionError, OverflowError):
            # The bracket left the float range: σ would be 0 or infinite in float64.
            sigma = math.inf
        return check_scale_in_range("Gaussian sigma", sigma, inputs=inputs)
    if method == "paper":
        return check_scale_in_range(
            "Gaussian sigma", paper_gaussian_sigma(d2, eps, dlt), inputs=inputs
        )
    if eps >= 1.0:
        raise ValueError(
            f"epsilon must be < 1 for the {method!r} Gaussian calibration, got {epsilon!r} "
            "(use method='analytic', which is exact for every epsilon)"
        )
    if method == "classic":
        sigma = d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    else:
        sigma = fhu_constant(eps, dlt) * d2
    return check_scale_in_range("Gaussian sigma", sigma, inputs=inputs)


def _check_sensitivities(l1_sensitivity: float, l2_sensitivity: float) -> tuple[float, float]:
    d1 = check_real("l1_sensitivity", l1_sensitivity, gt=0)
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    if d2 > d1 * (1.0 + 1e-12):
        raise ValueError(
            f"l2_sensitivity must be <= l1_sensitivity (an l2 norm never exceeds the l1 norm), "
            f"got l2_sensitivity={l2_sensitivity!r} > l1_sensitivity={l1_sensitivity!r}"
        )
    return d1, d2


def laplace_epsilon(
    l1_sensitivity: float, l2_sensitivity: float, scale: float, delta: float
) -> float:
    """The ε for which Laplace(λ) noise on every coordinate is (ε, δ)-DP.

    Count-on-your-elders Theorem 3 (via Lemma 20/21):
    ε = min{ Δ₁/λ,  (Δ₂/λ)·(Δ₂/(2λ) + √(2 ln(1/δ))) }.

    The first term is the pure Laplace mechanism. The second is the heterogeneous
    composition theorem (Kairouz, Oh, Viswanath 2015, Thm 3.5) over coordinates,
    each ε_j-DP with ε_j = |y_j − y'_j|/λ, using (e^x − 1)/(e^x + 1) = tanh(x/2) ≤ x/2
    and Σ ε_j² ≤ (Δ₂/λ)². Both steps hold for every λ > 0; the paper's condition
    λ > Δ₁ only serves to keep its statement in ε < 1.

    Args:
        l1_sensitivity: Δ₁ > 0.
        l2_sensitivity: Δ₂ ∈ (0, Δ₁].
        scale: λ > 0.
        delta: δ ∈ (0, 1).
    """
    d1, d2 = _check_sensitivities(l1_sensitivity, l2_sensitivity)
    lam = check_real("scale", scale, gt=0)
    dlt = check_probability("delta", delta)
    a = d2 / lam
    return min(d1 / lam, a * (a / 2.0 + math.sqrt(2.0 * math.log(1.0 / dlt))))


def laplace_scale_approximate(
    l1_sensitivity: float, l2_sensitivity: float, epsilon: float, delta: float
) -> float:
    """Smallest Laplace scale λ whose :func:`laplace_epsilon` is ≤ ε at this δ.

    The inverse of count-on-your-elders Theorem 3: λ = min{Δ₁/ε, Δ₂/a_{ε,δ}} with
    a_{ε,δ} = √(2 ln(1/δ))·(√(1 + ε/ln(1/δ)) − 1) (Lemma 21). The result is checked
    against :func:`laplace_epsilon` and nudged up if rounding left it a hair short.
    """
    d1, d2 = _check_sensitivities(l1_sensitivity, l2_sensitivity)
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    return _laplace_scale_approximate(d1, d2, eps, dlt)


@lru_cache(maxsize=1024)
def _laplace_scale_approximate(d1: float, d2: float, eps: float, dlt: float) -> float:
    """:func:`laplace_scale_approximate` of checked floats. Cached: a deterministic
    function of its four floats, asked for once per tree height when ``compare``
    searches the k-ary trees with δ (each k builds its tree)."""
    log_inv_delta = math.log(1.0 / dlt)
    w = eps / log_inv_delta
    # √(1+w) − 1 written as w/(√(1+w) + 1) to avoid cancellation for small w.
    a = math.sqrt(2.0 * log_inv_delta) * w / (math.sqrt(1.0 + w) + 1.0)
    lam = check_scale_in_range(
        "Laplace scale",
        min(d1 / eps, d2 / a),
        inputs=f"l1_sensitivity={d1!r}, l2_sensitivity={d2!r}, epsilon={eps!r} and delta={dlt!r}",
    )
    while laplace_epsilon(d1, d2, lam, dlt) > eps:
        lam = float(np.nextafter(lam, math.inf)) * (1.0 + 1e-15)
    return lam


# ----------------------------------------------------------------------------------------
# Discrete noise (Canonne, Kamath, Steinke 2020) and zCDP conversion
# ----------------------------------------------------------------------------------------
#: Relative upward margin on a computed δ (absorbs rounding in exp/log of the bound).
_DELTA_MARGIN = 1e-9
_SMALLEST_DELTA = 5e-324


def discrete_laplace_scale(l1_sensitivity: float, epsilon: float) -> Fraction:
    """Smallest dyadic rational scale t ≥ Δ₁/ε for discrete Laplace noise (ε-DP exactly).

    The geometric mechanism (Ghosh, Roughgarden, Sundararajan 2009; CKS 2020 §1):
    adding i.i.d. Lap_Z(t) to an integer vector whose neighbours differ by an
    integer vector of ℓ₁ norm ≤ Δ₁ is (Δ₁/t)-DP, because the density ratio at every
    output is at most exp(‖shift‖₁/t). The division Δ₁/ε is done in exact rational
    arithmetic and rounded *up* to a rational whose numerator fits the sampler
    (relative increase < 1e-11 for t ≥ 1).

    Args:
        l1_sensitivity: Δ₁ > 0 (an integer for integer-valued queries).
        epsilon: ε > 0.
    """
    from dpcount.privacy.discrete import _LAPLACE_MAX_NUM, _check_laplace_scale, rational_at_least

    d1 = check_real("l1_sensitivity", l1_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    t = rational_at_least(Fraction(d1) / Fraction(eps), _LAPLACE_MAX_NUM)
    # Tiny epsilon: t beyond the float range is reported as inf (float(t) would raise).
    shown = float(t) if t < Fraction(2**1023) else math.inf
    return _check_laplace_scale(
        f"the discrete Laplace scale l1_sensitivity/epsilon = {d1!r}/{eps!r}", t, shown
    )


def _log_zcdp_delta_at(rho: float, epsilon: float, alpha: float) -> float:
    # log of e^{(α−1)(αρ−ε)}/(α−1) · (1 − 1/α)^α
    return (
        (alpha - 1.0) * (alpha * rho - epsilon)
        + alpha * math.log1p(-1.0 / alpha)
        - math.log(alpha - 1.0)
    )


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ such that ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath, Steinke 2020, Cor. 13).

    δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1 − 1/α)^α. Every α > 1 gives a valid
    bound, so the minimizer is found by bisection on the derivative
    (2α−1)ρ − ε + log(1 − 1/α) (increasing in α) and the bound is evaluated there,
    then raised by a relative 1e-9 against rounding. Never below the true
    infimum; capped at 1. Sharper than the classic e^{−(ε−ρ)²/(4ρ)} (Bun &
    Steinke 2016, Prop. 1.3).

    Edge cases: ρ → 0 gives δ → 0 (reported as at least 5e-324, the smallest
    positive double, never 0); ε ≤ ρ gives δ close to 1.
    """
    r = check_real("rho", rho, gt=0)
    eps = check_real("epsilon", epsilon, ge=0)
    lo, hi = 1.0 + 1e-12, max((eps + 1.0) / (2.0 * r) + 2.0, 2.0)
    lo, hi = bisect(
        lambda a: (2.0 * a - 1.0) * r - eps + math.log1p(-1.0 / a) < 0.0,
        lo,
        hi,
        done=lambda a, b: b - a <= 1e-13 * b,
        steps=400,
    )
    log_delta = _log_zcdp_delta_at(r, eps, hi)
    if log_delta >= 0.0:
        return 1.0
    # Below the smallest subnormal the bound is reported as that subnormal (never as 0).
    return min(1.0, max(math.exp(log_delta) * (1.0 + _DELTA_MARGIN), _SMALLEST_DELTA))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε (to ~1e-12 relative, rounded up) with :func:`zcdp_delta` (ρ, ε) ≤ δ."""
    r = check_real("rho", rho, gt=0)
    dlt = check_probability("delta", delta)
    lo, hi = 0.0, r + 2.0 * math.sqrt(r * math.log(1.0 / dlt))  # Bun–Steinke bound: valid
    while zcdp_delta(r, hi) > dlt:
        hi *= 2.0
    lo, hi = bisect(lambda e: zcdp_delta(r, e) > dlt, lo, hi, done=lambda a, b: b - a <= 1e-12 * b)
    return hi


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ (to ~1e-12 relative, rounded down) with :func:`zcdp_delta` (ρ, ε) ≤ δ."""
    return _zcdp_rho(check_real("epsilon", epsilon, gt=0), check_probability("delta", delta))


@lru_cache(maxsize=256)
def _zcdp_rho(eps: float, dlt: float) -> float:
    """:func:`zcdp_rho` of checked floats. Cached: a deterministic function of its two
    floats (~700 evaluations of :func:`zcdp_delta`), asked for once per discrete Gaussian
    calibration, e.g. for every tree ``auto`` builds with discrete Gaussian noise."""
    lo, hi = 0.0, eps + 1.0  # δ(ε + 1, ε) > δ for every δ < 1 of interest
    while zcdp_delta(hi, eps) <= dlt:
        hi *= 2.0
    lo = hi / 2.0
    while zcdp_delta(lo, eps) > dlt:
        lo /= 2.0
    lo, hi = bisect(
        lambda q: zcdp_delta(q, eps) <= dlt, lo, hi, done=lambda a, b: b - a <= 1e-12 * b
    )
    return lo


def discrete_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """σ of discrete Gaussian noise for (ε, δ)-DP at ℓ₂ sensitivity Δ₂ (integer vectors).

    Canonne, Kamath, Steinke 2020: i.i.d. N_Z(0, σ²) on every coordinate of an
    integer vector whose neighbours differ by an integer vector of ℓ₂ norm ≤ Δ₂ is
    ρ-zCDP with ρ = Δ₂²/(2σ²) (Thm 14, multivariate: the Rényi divergences of the
    coordinates, each ≤ α·μ_j²/(2σ²), add up). ρ-zCDP implies (ε, δ)-DP with δ
    from Corollary 13 (:func:`zcdp_delta`). This returns σ = Δ₂/√(2ρ*) for the
    largest ρ* with δ(ρ*, ε) ≤ δ, raised by a relative 1e-10; the sampler then
    rounds σ² up once more. The smallest such σ up to that margin.

    The zCDP route holds for every integer shift vector of the given ℓ₂ norm,
    including vector-valued steps; it is conservative by a few percent in σ
    against the exact continuous-Gaussian calibration.
    """
    from dpcount.privacy.discrete import _GAUSS_MAX_SIGMA

    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    rho = zcdp_rho(epsilon, delta)
    sigma = d2 / math.sqrt(2.0 * rho) * (1.0 + _SOLVER_MARGIN)
    if not sigma <= _GAUSS_MAX_SIGMA:
        raise ValueError(
            f"l2_sensitivity={d2!r}, epsilon={epsilon!r} and delta={delta!r} give a discrete "
            f"Gaussian sigma of {sigma!r}, above the exact sampler's limit 2^40 - 1"
        )
    return check_scale_in_range(
        "discrete Gaussian sigma", sigma, inputs=f"l2_sensitivity={d2!r}, epsilon={epsilon!r}"
    )
