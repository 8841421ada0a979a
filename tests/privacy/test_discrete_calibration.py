"""Calibration of discrete noise: zCDP conversion (CKS Cor. 13) and the exact discrete Laplace ε.

Independent computations: the zCDP → (ε, δ) bound minimized over α with mpmath
on a grid, and the exact δ of the discrete Gaussian mechanism itself (brute-force
sum over the privacy loss, which for h equal integer shifts depends only on the
sum of the h noise coordinates).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from dpcount.privacy import (
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    calibrate,
    discrete_gaussian_sigma,
    discrete_laplace_scale,
    gaussian_sigma,
    laplace_scale_approximate,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_rho,
)

mpmath.mp.dps = 50


def mp_zcdp_delta(rho: float, eps: float) -> mpmath.mpf:
    """inf over alpha of CKS Cor. 13's bound: golden-section search in mpmath (independent)."""
    r, e = mpmath.mpf(rho), mpmath.mpf(eps)

    def f(a: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp((a - 1) * (a * r - e)) / (a - 1) * (1 - 1 / a) ** a

    lo, hi = mpmath.mpf(1) + mpmath.mpf(10) ** -30, (e + 1) / (2 * r) + 2
    g = (mpmath.sqrt(5) - 1) / 2
    for _ in range(300):
        c, d = hi - g * (hi - lo), lo + g * (hi - lo)
        if f(c) < f(d):
            hi = d
        else:
            lo = c
    return min(f((lo + hi) / 2), mpmath.mpf(1))


def exact_discrete_gaussian_delta(sigma2: float, shift: int, h: int, eps: float) -> float:
    """Exact δ(ε) of N_Z(0, σ²)^h against the shift (c, …, c): brute-force sum.

    The privacy loss at output o is (h c² − 2c·Σo_j)/(2σ²), a function of s = Σ o_j,
    whose pmf is the h-fold convolution of the discrete Gaussian pmf.
    """
    r = math.ceil(40 * math.sqrt(sigma2)) + 2
    y = np.arange(-r, r + 1, dtype=np.float64)
    p = np.exp(-(y * y) / (2 * sigma2))
    p /= p.sum()
    ps = np.array([1.0])
    for _ in range(h):
        ps = np.convolve(ps, p)
    s = np.arange(-h * r, h * r + 1, dtype=np.float64)
    loss = (h * shift * shift - 2.0 * shift * s) / (2.0 * sigma2)
    return float(np.sum(ps * np.clip(1.0 - np.exp(eps - loss), 0.0, None)))


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.0244, 0.5, 3.0])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_zcdp_delta_matches_mpmath_and_never_below(rho: float, eps: float) -> None:
    got = zcdp_delta(rho, eps)
    want = mp_zcdp_delta(rho, eps)
    assert got >= want or want >= 1
    if want > 1e-300:
        assert got == pytest.approx(float(want), rel=1e-7)
    else:  # below double range: reported as the smallest subnormal, never 0
        assert got == 5e-324
    # Sharper than the classic exp(-(eps - rho)^2 / (4 rho)) bound when eps > rho.
    if eps > rho and want > 1e-300:
        assert got <= math.exp(-((eps - rho) ** 2) / (4 * rho))


def test_zcdp_known_values() -> None:
    # Gaussian with sensitivity 1 and sigma^2 = 20 is 0.025-zCDP.
    assert zcdp_delta(0.025, 1.0) == pytest.approx(float(mp_zcdp_delta(0.025, 1.0)), rel=1e-8)
    eps = zcdp_epsilon(0.025, 1e-6)
    assert zcdp_delta(0.025, eps) <= 1e-6 < zcdp_delta(0.025, eps * (1 - 1e-6))
    rho = zcdp_rho(1.0, 1e-6)
    assert zcdp_delta(rho, 1.0) <= 1e-6 < zcdp_delta(rho * (1 + 1e-6), 1.0)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_discrete_gaussian_sigma_smallest_and_valid(eps: float, delta: float) -> None:
    d2 = 3.0  # e.g. h = 9 nodes changing by 1
    sigma = discrete_gaussian_sigma(d2, eps, delta)
    rho = d2**2 / (2 * sigma**2)
    assert mp_zcdp_delta(rho, eps) <= delta
    rho_less_noise = d2**2 / (2 * (sigma * (1 - 1e-6)) ** 2)
    assert mp_zcdp_delta(rho_less_noise, eps) > delta
    # Never less noise than the continuous analytic Gaussian (which is exact for reals).
    assert sigma >= gaussian_sigma(d2, eps, delta)


@pytest.mark.parametrize(("h", "shift"), [(1, 1), (4, 1), (9, 1), (3, 2)])
def test_zcdp_route_is_conservative_against_the_exact_mechanism(h: int, shift: int) -> None:
    """The certified δ is >= the true δ of the discrete Gaussian mechanism (brute force)."""
    eps, delta = 1.0, 1e-6
    d2 = math.sqrt(h) * shift
    cal = calibrate(
        "discrete-gaussian",
        epsilon=eps,
        delta=delta,
        l1_sensitivity=h * shift,
        l2_sensitivity=d2,
        neighbouring="test",
    )
    s2 = float(cal.sampler.sigma2)  # type: ignore[attr-defined]
    assert cal.privacy.delta <= delta
    assert cal.privacy.rho == pytest.approx(d2**2 / (2 * s2), rel=1e-15)
    exact = exact_discrete_gaussian_delta(s2, shift, h, eps)
    assert exact <= cal.privacy.delta
    # And the exact δ is not wildly smaller: the bound is informative (within 20x).
    assert exact > cal.privacy.delta / 20


def test_discrete_laplace_scale_exact() -> None:
    t = discrete_laplace_scale(24, 1.0)
    assert t == Fraction(24)
    t = discrete_laplace_scale(7, 0.3)
    assert t >= Fraction(7) / Fraction(0.3)
    assert float(t) == pytest.approx(7 / 0.3, rel=1e-11)
    cal = calibrate(
        "discrete-laplace",
        epsilon=0.3,
        delta=None,
        l1_sensitivity=7,
        l2_sensitivity=math.sqrt(7),
        neighbouring="test",
    )
    assert isinstance(cal.sampler, DiscreteLaplaceNoise)
    assert cal.privacy.epsilon <= 0.3
    assert cal.privacy.epsilon == pytest.approx(0.3, rel=1e-11)
    assert cal.privacy.delta == 0.0
    assert "discrete Laplace" in cal.privacy.describe()


def test_discrete_laplace_with_delta_uses_theorem3() -> None:
    cal = calibrate(
        "discrete-laplace",
        epsilon=1.0,
        delta=1e-6,
        l1_sensitivity=256,
        l2_sensitivity=16,
        neighbouring="test",
    )
    assert cal.privacy.calibration == "theorem3"
    assert cal.privacy.epsilon <= 1.0
    assert float(cal.sampler.scale) < 256  # type: ignore[attr-defined]


def test_calibrate_discrete_errors() -> None:
    kw = {"l1_sensitivity": 4.0, "l2_sensitivity": 2.0, "neighbouring": "t"}
    with pytest.raises(ValueError, match=r"delta must be given for noise='discrete-gaussian'"):
        calibrate("discrete-gaussian", epsilon=1.0, delta=None, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"calibration must be None or 'zcdp'.*got 'analytic'"):
        calibrate(
            "discrete-gaussian",
            epsilon=1.0,
            delta=1e-6,
            calibration="analytic",
            **kw,  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match=r"calibration must be one of \('theorem3',\)"):
        calibrate(
            "discrete-laplace",
            epsilon=1.0,
            delta=1e-6,
            calibration="pld",
            **kw,  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match=r"rho must be > 0, got 0"):
        zcdp_delta(0, 1.0)


def test_discrete_gaussian_sampler_from_calibration() -> None:
    cal = calibrate(
        "discrete-gaussian",
        epsilon=0.5,
        delta=1e-8,
        l1_sensitivity=16.0,
        l2_sensitivity=4.0,
        neighbouring="t",
    )
    assert isinstance(cal.sampler, DiscreteGaussianNoise)
    assert cal.scale == pytest.approx(math.sqrt(float(cal.sampler.sigma2)), rel=1e-15)
    assert "rho=" in cal.privacy.describe()


def test_reported_rho_is_never_below_the_exact_rho() -> None:
    """ρ = hΔ²/(2σ²) in exact rationals (the true squared ℓ₂ sensitivity of a tree is
    the integer hΔ², not the square of the rounded float √h·Δ): the guarantee's ρ may
    not be below it. Rounding to nearest, as before, was below it for some h."""
    from fractions import Fraction

    from dpcount.counting import KaryTree

    for T in (1, 2, 5, 40, 1000, 10**6):
        for step in (1, 3):
            m = KaryTree(
                T, epsilon=1.0, delta=1e-6, noise="discrete-gaussian", step_sensitivity=step
            )
            assert m.privacy is not None and m.privacy.rho is not None
            exact = Fraction(m.height * step * step) / (2 * Fraction(m.sampler.sigma2))
            assert Fraction(m.privacy.rho) >= exact, (T, step)


@pytest.mark.parametrize(("l1", "l2"), [(4, 2), (8, 2.9), (30, 5.5), (256, 16)])
def test_discrete_laplace_with_delta_is_never_noisier_than_pure(l1: float, l2: float) -> None:
    """Audit finding 2 (discrete side): the smaller of the pure and Theorem 3 scales, named."""
    eps, delta = 1.0, 1e-6
    cal = calibrate(
        "discrete-laplace",
        epsilon=eps,
        delta=delta,
        l1_sensitivity=l1,
        l2_sensitivity=l2,
        neighbouring="test",
    )
    pure = discrete_laplace_scale(l1, eps)
    thm3 = DiscreteLaplaceNoise(laplace_scale_approximate(l1, l2, eps, delta)).scale
    scale = cal.sampler.scale  # type: ignore[attr-defined]
    assert scale == min(pure, thm3)
    assert cal.privacy.calibration == ("pure" if pure <= thm3 else "theorem3")
    assert cal.privacy.epsilon <= eps
    assert cal.privacy.delta == (0.0 if pure <= thm3 else delta)
