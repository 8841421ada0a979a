"""Tight accounting with privacy loss distributions (optional: ``dpcount[accounting]``).

Uses Google's ``dp-accounting`` package (PLD accountant: Meiser & Mohammadi
2018; Koskela et al. 2020; Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022),
imported lazily so the core of dpcount works without it.

A mechanism that adds i.i.d. Laplace(λ) noise to a vector whose neighbours
differ by the *profile* c = (c_1, …, c_m) (absolute per-coordinate changes) has
privacy loss equal to the sum of m independent single-coordinate Laplace privacy
losses with sensitivities c_j. Its exact (ε, δ) curve is that of the composed
PLD; with ``pessimistic_estimate=True`` dp-accounting discretizes every loss
*upwards* (and counts truncated tail mass in δ), so the ε it reports is never
below the true one. For trees the profile of a unit change at one step is h
coordinates each changing by Δ.

Compared with count-on-your-elders Theorem 3 (heterogeneous advanced
composition), the PLD ε at the same λ is always smaller; calibrating λ to the PLD
saves about 22% of the noise scale at ε = 1, δ = 1e-6 for 256 equal coordinates
(21.7% measured; 15% at 21 coordinates, none at 8, where pure DP is tighter).

References:
    * S. Meiser, E. Mohammadi. "Tight on budget? Tight bounds for r-fold
      approximate differential privacy". ACM CCS 2018. (no link)
    * A. Koskela, J. Jälkö, A. Honkela. "Computing tight differential privacy
      guarantees using FFT". AISTATS 2020. https://arxiv.org/abs/1906.03049
    * V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi. "Connect the
      dots: tighter discrete approximations of privacy loss distributions".
      PETS 2022. https://arxiv.org/abs/2207.04380
    * J. D. Andersson, R. Pagh, T. A. Steiner, S. Torkamani. "Count on Your
      Elders: Laplace vs Gaussian Noise". FORC 2025 (LIPIcs 329).
      https://arxiv.org/abs/2408.07021
    * C. L. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for
      Differential Privacy". NeurIPS 2020. https://arxiv.org/abs/2004.00010
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcount._numeric import bisect, geometric_mid
from dpcount._validate import check_probability, check_real
from dpcount.privacy.calibration import laplace_epsilon, laplace_scale_approximate

__all__ = [
    "accounting_available",
    "check_profile",
    "dp_event",
    "laplace_pld_epsilon",
    "laplace_scale_pld",
    "theorem3_epsilon_for_profile",
]

#: Width of the privacy-loss grid relative to ε (finer = tighter, slower).
_RELATIVE_GRID = 1e-4
#: Relative upward margin on the reported ε and the returned scale.
_MARGIN = 1e-9

_INSTALL_HINT = (
    "calibration='pld' needs the optional dependency dp-accounting: "
    "pip install 'dpcount[accounting]'"
)


def accounting_available() -> bool:
    """Whether the optional ``dp-accounting`` package can be imported."""
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        return False
    return True


def _pld_module() -> Any:
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return privacy_loss_distribution


def check_profile(profile: ArrayLike) -> NDArray[np.float64]:
    """Validate a sensitivity profile: a non-empty 1-D array of finite values ≥ 0, not all 0.

    Returns the absolute values as float64 (the sign of a change does not matter
    for symmetric noise).
    """
    arr = np.asarray(profile)
    if arr.dtype.kind not in "iuf" or arr.dtype == np.bool_:
        raise TypeError(f"profile must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"profile must be a non-empty 1-D array, got shape {arr.shape}")
    out = np.abs(arr.astype(np.float64))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"profile must be finite, got {profile!r}")
    if not np.any(out > 0):
        raise ValueError("profile must have a non-zero entry, got all zeros")
    return out


def _composed_laplace_pld(scale: float, profile: NDArray[np.float64], interval: float) -> Any:
    pld_mod = _pld_module()
    values, counts = np.unique(profile[profile > 0], return_counts=True)
    total = None
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        one = pld_mod.from_laplace_mechanism(
            scale,
            sensitivity=value,
            pessimistic_estimate=True,
            value_discretization_interval=interval,
        )
        part = one.self_compose(int(count)) if count > 1 else one
        total = part if total is None else total.compose(part)
    return total


def laplace_pld_epsilon(
    scale: float, profile: ArrayLike, delta: float, *, grid: float | None = None
) -> float:
    """ε of i.i.d. Laplace(λ) noise for the given profile at δ, from the composed PLD.

    Pessimistic discretization (never below the true ε), raised by a relative 1e-9.

    Args:
        scale: λ > 0.
        profile: absolute per-coordinate changes between the worst neighbours.
        delta: δ ∈ (0, 1).
        grid: width of the privacy-loss grid (default: 1e-4 × the pure-DP ε
            ‖profile‖₁/λ, at most 1e-4).
    """
    lam = check_real("scale", scale, gt=0)
    prof = check_profile(profile)
    dlt = check_probability("delta", delta)
    if grid is None:
        grid = min(1e-4, _RELATIVE_GRID * float(prof.sum()) / lam)
    interval = check_real("grid", grid, gt=0)
    eps = float(_composed_laplace_pld(lam, prof, interval).get_epsilon_for_delta(dlt))
    return max(eps, 0.0) * (1.0 + _MARGIN)


def laplace_scale_pld(profile: ArrayLike, epsilon: float, delta: float) -> float:
    """Smallest Laplace scale λ (to 1e-6 relative, rounded up) whose PLD ε is ≤ ε at δ.

    Bisection on log λ between a scale that fails and one that passes, keeping the
    passing end: the result always satisfies :func:`laplace_pld_epsilon` ≤ ε.
    The privacy loss decreases with λ (a larger scale is a smaller relative
    shift), so the bisection is sound. The starting upper end is
    count-on-your-elders Theorem 3's scale for the same ‖profile‖₁, ‖profile‖₂,
    which the PLD always certifies (tested).

    The grid is fixed from ε (1e-4·ε) for every trial scale so the bound is
    monotone along the search.
    """
    prof = check_profile(profile)
    eps = check_real("epsilon", epsilon, gt=0)
    dlt = check_probability("delta", delta)
    grid = min(1e-4, _RELATIVE_GRID * eps)
    d1 = float(prof.sum())
    d2 = min(float(np.sqrt(np.dot(prof, prof))), d1)

    def ok(lam: float) -> bool:
        return laplace_pld_epsilon(lam, prof, dlt, grid=grid) <= eps

    hi = laplace_scale_approximate(d1, d2, eps, dlt)
    while not ok(hi):  # not expected: Theorem 3 is looser than the PLD
        hi *= 1.01
    lo = hi / 2.0
    while ok(lo):
        hi, lo = lo, lo / 2.0
    lo, hi = bisect(
        lambda lam: not ok(lam), lo, hi, done=lambda a, b: b / a - 1.0 <= 1e-6, mid=geometric_mid
    )
    return hi


def theorem3_epsilon_for_profile(scale: float, profile: ArrayLike, delta: float) -> float:
    """Count-on-your-elders Theorem 3's ε for the profile's ℓ₁ and ℓ₂ norms (for comparison)."""
    prof = check_profile(profile)
    d1 = float(prof.sum())
    d2 = min(float(np.sqrt(np.dot(prof, prof))), d1)
    return laplace_epsilon(d1, d2, scale, delta)


def dp_event(
    *,
    noise: str,
    scale: float,
    l1_sensitivity: float,
    l2_sensitivity: float,
    rho: float | None = None,
    profile: ArrayLike | None = None,
) -> Any:
    """The dp_accounting ``DpEvent`` of i.i.d. noise on a vector with these sensitivities.

    So that several releases compose with dp_accounting's accountants
    (``PLDAccountant`` for every kind but the discrete Gaussian, ``RdpAccountant``
    for all of them).

    * ``"gaussian"``: ``GaussianDpEvent(σ/Δ₂)`` — exact: the Gaussian mechanism on
      a vector is characterized by its ℓ₂ shift (rotation invariance).
    * ``"discrete-gaussian"``: ``ZCDpEvent(ρ)`` with ρ = Δ₂²/(2σ²) (Canonne,
      Kamath, Steinke 2020, Thm 14); only the RDP accountant accepts it.
    * ``"laplace"`` / ``"discrete-laplace"`` with a ``profile`` c (the absolute
      per-coordinate changes between the worst neighbours): the composition of one
      (discrete) Laplace event per coordinate with sensitivity c_j — the vector
      mechanism *is* that composition of independent coordinates. Without a
      profile: one event with sensitivity Δ₁, dp_accounting's own convention for
      a vector with ℓ₁ sensitivity Δ₁ (``LaplaceDpEvent`` docstring).

    Args:
        noise: the noise kind.
        scale: the sampler's scale: Laplace λ, discrete Laplace t, Gaussian σ.
        l1_sensitivity, l2_sensitivity: Δ₁, Δ₂ of the perturbed vector.
        rho: the zCDP ρ (discrete Gaussian).
        profile: per-coordinate changes (Laplace kinds), or None.

    Raises:
        ImportError: without the optional dp-accounting package.
    """
    try:
        from dp_accounting import dp_event as events
    except ImportError as exc:
        raise ImportError(
            "dp_event() needs the optional dependency dp-accounting: "
            "pip install 'dpcount[accounting]'"
        ) from exc
    lam = check_real("scale", scale, gt=0)
    d1 = check_real("l1_sensitivity", l1_sensitivity, gt=0)
    d2 = check_real("l2_sensitivity", l2_sensitivity, gt=0)
    if noise == "gaussian":
        return events.GaussianDpEvent(noise_multiplier=lam / d2)
    if noise == "discrete-gaussian":
        r = check_real("rho", rho, gt=0) if rho is not None else d2 * d2 / (2.0 * lam * lam)
        return events.ZCDpEvent(rho=r)
    if noise not in ("laplace", "discrete-laplace"):
        raise ValueError(f"noise must be a dpcount noise kind, got {noise!r}")
    prof = np.array([d1]) if profile is None else check_profile(profile)
    values, counts = np.unique(prof[prof > 0], return_counts=True)
    parts = []
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        if noise == "laplace":
            one: Any = events.LaplaceDpEvent(noise_multiplier=lam / value)
        else:
            whole = math.ceil(value)  # integer vectors change by whole amounts
            one = events.DiscreteLaplaceDpEvent(noise_parameter=1.0 / lam, sensitivity=whole)
        parts.append(one if count == 1 else events.SelfComposedDpEvent(one, int(count)))
    return parts[0] if len(parts) == 1 else events.ComposedDpEvent(parts)
