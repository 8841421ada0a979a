"""High-probability bounds on the largest error over the horizon (ℓ∞ error).

Every mechanism here releases S_t + N_t with N_t = Σ_s a_{t,s} ζ_s, ζ_s i.i.d.
(Gaussian or Laplace). The bounds hold simultaneously for all t ≤ T with
probability ≥ 1 − β by a union bound over the T steps and both signs.
"""

from __future__ import annotations

import math

from scipy.special import ndtri

from dpcount._validate import check_instance, check_integer, check_real
from dpcount.counting.base import CountingMechanism
from dpcount.counting.tree import KaryTree
from dpcount.privacy.noise import GaussianNoise, LaplaceNoise

__all__ = ["gaussian_linf_bound", "laplace_linf_bound", "linf_bound"]


def _check_beta(beta: float) -> float:
    b = check_real("beta", beta)
    if not 0.0 < b < 1.0:
        raise ValueError(f"beta must be in (0, 1), got {beta!r}")
    return b


def gaussian_linf_bound(max_variance: float, horizon: int, beta: float) -> float:
    """b with P(max_{t≤T} |N_t| > b) ≤ β for Gaussian N_t of variance ≤ ``max_variance``.

    b = σ_max·Φ⁻¹(1 − β/(2T)): each |N_t| exceeds b with probability
    2Φ̄(b/σ_t) ≤ 2Φ̄(b/σ_max) = β/T, and the union bound over the T steps gives β.
    Holds whatever the correlation between steps.
    """
    v = check_real("max_variance", max_variance, ge=0)
    T = check_integer("horizon", horizon, ge=1)
    b = _check_beta(beta)
    return math.sqrt(v) * float(-ndtri(b / (2.0 * T)))


def laplace_linf_bound(
    scale: float,
    coefficient_l2_squared: float,
    horizon: int,
    beta: float,
    max_coefficient: float = 1.0,
) -> float:
    """b with P(max_{t≤T} |N_t| > b) ≤ β for N_t = Σ_s a_{t,s}ζ_s, ζ_s ~ Laplace(λ) i.i.d.

    Chernoff bound. With E e^{θaζ} = 1/(1 − θ²λ²a²) for |θaλ| < 1 and
    −ln(1 − u) ≤ u/(1 − u_max) for u ≤ u_max < 1:
    ln E e^{θN_t} ≤ θ²λ²·A/(1 − θ²λ²a_max²), where A ≥ Σ_s a_{t,s}² for every t and
    a_max ≥ max |a_{t,s}|. Writing x = θλa_max ∈ (0, 1), r = A/a_max² and
    ℓ = ln(2T/β), setting 2T·P(N_t > b) = β gives
    b = λ·a_max·(ℓ/x + r·x/(1 − x²)), minimized in closed form at
    x² = 2ℓ/((2ℓ + r) + √(r(r + 8ℓ))).

    Args:
        scale: λ of the Laplace noise.
        coefficient_l2_squared: A, an upper bound on Σ_s a_{t,s}² over all t
            (Var_t / (2λ²) at the worst step).
        horizon: T, the number of steps in the union bound.
        beta: failure probability β ∈ (0, 1).
        max_coefficient: a_max ≥ max_{t,s} |a_{t,s}| (1 for every counting
            mechanism in dpcount).
    """
    lam = check_real("scale", scale, gt=0)
    A = check_real("coefficient_l2_squared", coefficient_l2_squared, gt=0)
    T = check_integer("horizon", horizon, ge=1)
    b = _check_beta(beta)
    a_max = check_real("max_coefficient", max_coefficient, gt=0)
    ell = math.log(2.0 * T / b)
    r = A / (a_max * a_max)
    y = 2.0 * ell / ((2.0 * ell + r) + math.sqrt(r * (r + 8.0 * ell)))
    x = math.sqrt(y)
    return lam * a_max * (ell / x + r * x / (1.0 - y))


def linf_bound(
    mechanism: CountingMechanism, beta: float, *, max_variance: float | None = None
) -> float:
    """A (1 − β) bound on max_{t≤T} |release_t − S_t| for a calibrated mechanism.

    Gaussian noise: :func:`gaussian_linf_bound` with the exact largest variance.
    Laplace noise: :func:`laplace_linf_bound` with A = max_variance/(2λ²) and the
    mechanism's largest noise coefficient (``max_noise_coefficient``; 1 for the
    tree mechanisms).

    Args:
        mechanism: a calibrated counting mechanism.
        beta: failure probability β ∈ (0, 1).
        max_variance: the mechanism's exact largest variance if already known
            (otherwise ``mechanism.max_variance()`` is called).

    Raises:
        ValueError: a sampler that is neither Gaussian nor Laplace (e.g. after
            ``with_sampler(ZeroNoise())``), or Laplace noise on a mechanism whose
            largest coefficient is unknown.
    """
    check_instance("mechanism", mechanism, CountingMechanism, "a CountingMechanism")
    sampler = mechanism.sampler
    T = mechanism.horizon
    if not isinstance(sampler, (GaussianNoise, LaplaceNoise)):
        raise ValueError(f"linf bounds need Gaussian or Laplace noise, got sampler {sampler!r}")
    v = (
        mechanism.max_variance()
        if max_variance is None
        else check_real("max_variance", max_variance, gt=0)
    )
    if isinstance(sampler, GaussianNoise):
        return gaussian_linf_bound(v, T, beta)
    a_max = getattr(mechanism, "max_noise_coefficient", None)
    if a_max is None:
        if not isinstance(mechanism, KaryTree):
            raise ValueError(
                f"no Laplace tail bound for {mechanism!r}: its largest noise coefficient "
                "is unknown (set max_noise_coefficient)"
            )
        a_max = 1.0  # every tree node enters a release with coefficient ±1
    return laplace_linf_bound(sampler.scale, v / sampler.variance, T, beta, float(a_max))
