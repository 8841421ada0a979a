"""Noise calibration: from sensitivities and a privacy budget to a noise scale.

Every closed form for a noise scale lives here, once, cited to its source.
All functions round *up* (more noise) whenever they round: privacy is never
approximated downward.

Notation: Δ₁, Δ₂ are the ℓ₁ and ℓ₂ sensitivities of the released vector (the
largest change between neighbouring inputs); λ is a Laplace scale
(variance 2λ²); σ is a Gaussian standard deviation.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy.special import log_ndtr

from dpcount._validate import check_choice, check_probability, check_real

__all__ = [
    "GaussianMethod",
    "analytic_gaussian_delta",
    "fhu_constant",
    "gaussian_sigma",
    "laplace_epsilon",
    "laplace_scale",
    "laplace_scale_approximate",
]

GaussianMethod = Literal["analytic", "classic", "fhu"]
GAUSSIAN_METHODS: tuple[str, ...] = ("analytic", "classic", "fhu")

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
    return d1 / eps


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


def _analytic_gaussian_sigma(l2: float, epsilon: float, delta: float) -> float:
    """Smallest σ with δ(σ) ≤ delta, by bisection on log σ (keeps the upper end)."""
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
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return math.exp(hi) * (1.0 + _SOLVER_MARGIN)


def fhu_constant(epsilon: float, delta: float) -> float:
    """C_{ε,δ} = (2/ε)·√(4/9 + ln((1/δ)·√(2/π))) of constant-matters eq. (2).

    Fichtenberger, Henzinger, Upadhyay (ICML 2023); valid for ε, δ ∈ (0, 1).
    """
    eps = check_real("epsilon", epsilon, gt=0)
    if eps >= 1.0:
        raise ValueError(f"epsilon must be < 1 for the fhu constant C_(eps,delta), got {epsilon!r}")
    dlt = check_probability("delta", delta)
    return (2.0 / eps) * math.sqrt(4.0 / 9.0 + math.log(math.sqrt(2.0 / math.pi) / dlt))


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

    Edge cases: σ → ∞ as δ → 0 and σ → 0 as ε → ∞; δ must lie strictly in (0, 1).

    Raises:
        ValueError: non-positive sensitivity or ε, δ outside (0, 1), or ε ≥ 1 for
            ``"classic"``/``"fhu"``, or an unknown method.
    """
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    check_choice("method", method, GAUSSIAN_METHODS)
    if method == "analytic":
        return _analytic_gaussian_sigma(d2, eps, dlt)
    if eps >= 1.0:
        raise ValueError(
            f"epsilon must be < 1 for the {method!r} Gaussian calibration, got {epsilon!r} "
            "(use method='analytic', which is exact for every epsilon)"
        )
    if method == "classic":
        return d2 * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    return fhu_constant(eps, dlt) * d2


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
    log_inv_delta = math.log(1.0 / dlt)
    w = eps / log_inv_delta
    # √(1+w) − 1 written as w/(√(1+w) + 1) to avoid cancellation for small w.
    a = math.sqrt(2.0 * log_inv_delta) * w / (math.sqrt(1.0 + w) + 1.0)
    lam = min(d1 / eps, d2 / a)
    while laplace_epsilon(d1, d2, lam, dlt) > eps:
        lam = float(np.nextafter(lam, math.inf)) * (1.0 + 1e-15)
    return lam
