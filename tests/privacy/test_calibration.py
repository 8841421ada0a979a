"""Calibration: each formula against an independent computation."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpcount.privacy import (
    analytic_gaussian_delta,
    calibrate,
    fhu_constant,
    fhu_delta,
    gaussian_sigma,
    laplace_epsilon,
    laplace_scale,
    laplace_scale_approximate,
)

mpmath.mp.dps = 60


def mp_gaussian_delta(sigma: float, sens: float, eps: float) -> mpmath.mpf:
    """Balle & Wang Thm 8 at 60 digits (independent of scipy's log_ndtr)."""
    s, d, e = mpmath.mpf(sigma), mpmath.mpf(sens), mpmath.mpf(eps)
    phi = lambda x: mpmath.ncdf(x)  # noqa: E731
    return phi(d / (2 * s) - e * s / d) - mpmath.e**e * phi(-d / (2 * s) - e * s / d)


EPSILONS = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0]
DELTAS = [1e-2, 1e-6, 1e-10, 1e-30, 1e-100]


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_analytic_gaussian_is_valid_and_tight(eps: float, delta: float) -> None:
    sens = 2.5
    sigma = gaussian_sigma(sens, eps, delta)
    assert mp_gaussian_delta(sigma, sens, eps) <= delta
    # Tight: 1e-6 less noise already breaks the budget.
    assert mp_gaussian_delta(sigma * (1 - 1e-6), sens, eps) > delta


def test_analytic_gaussian_known_value() -> None:
    # Balle & Wang (2018): eps = 1, delta = 1e-5, sensitivity 1 gives sigma ~ 3.73.
    assert gaussian_sigma(1.0, 1.0, 1e-5) == pytest.approx(3.7306, abs=1e-3)


def test_analytic_delta_function_matches_mpmath() -> None:
    for sigma in [0.3, 1.0, 5.0, 40.0]:
        got = analytic_gaussian_delta(sigma, 1.0, 1.0)
        want = float(mp_gaussian_delta(sigma, 1.0, 1.0))
        assert got == pytest.approx(want, rel=1e-9)


def test_sigma_scales_linearly_in_sensitivity() -> None:
    assert gaussian_sigma(3.0, 0.7, 1e-8) == pytest.approx(
        3 * gaussian_sigma(1.0, 0.7, 1e-8), rel=1e-12
    )


@pytest.mark.parametrize("eps", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("delta", [1e-3, 1e-8, 1e-20])
def test_classic_and_fhu_formulas_and_never_below_analytic(eps: float, delta: float) -> None:
    classic = gaussian_sigma(2.0, eps, delta, method="classic")
    assert classic == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25 / delta)) / eps, rel=1e-15)
    fhu = gaussian_sigma(2.0, eps, delta, method="fhu")
    c = (2 / eps) * math.sqrt(4 / 9 + math.log(math.sqrt(2 / math.pi) / delta))
    assert fhu == pytest.approx(2.0 * c, rel=1e-15)
    assert fhu_constant(eps, delta) == pytest.approx(c, rel=1e-15)
    analytic = gaussian_sigma(2.0, eps, delta)
    assert classic >= analytic
    assert fhu >= analytic


@pytest.mark.parametrize("method", ["classic", "fhu"])
def test_classic_and_fhu_reject_large_epsilon(method: str) -> None:
    with pytest.raises(ValueError, match=r"epsilon must be < 1 .*got 1\.5"):
        gaussian_sigma(1.0, 1.5, 1e-6, method=method)  # type: ignore[arg-type]


def test_laplace_scale() -> None:
    assert laplace_scale(6.0, 0.5) == 12.0


def test_laplace_epsilon_is_min_of_two_bounds() -> None:
    d1, d2, lam, delta = 24.0, math.sqrt(24.0), 10.0, 1e-6
    pure = d1 / lam
    l2 = (d2 / lam) * (d2 / (2 * lam) + math.sqrt(2 * math.log(1 / delta)))
    assert laplace_epsilon(d1, d2, lam, delta) == pytest.approx(min(pure, l2), rel=1e-15)
    # High-dimensional profile: the l2 bound wins by far.
    assert laplace_epsilon(1000.0, 3.0, 50.0, 1e-6) < 1000.0 / 50.0


def kov_epsilon(profile: np.ndarray, delta: float) -> float:
    """Kairouz-Oh-Viswanath Thm 3.5, third term, for per-coordinate epsilons (unsimplified)."""
    e = profile
    return float(
        np.sum((np.expm1(e)) * e / (np.exp(e) + 1))
        + math.sqrt(2 * math.log(1 / delta) * np.sum(e**2))
    )


@pytest.mark.parametrize("seed", range(5))
def test_theorem3_never_below_unsimplified_composition(seed: int) -> None:
    """For any change vector within (D1, D2) the composition theorem's epsilon is <= ours."""
    rng = np.random.default_rng(seed)
    d1, d2, delta = 40.0, 6.0, 1e-7
    for lam in [2.0, 8.0, 30.0, 200.0]:
        ours = laplace_epsilon(d1, d2, lam, delta)
        for _ in range(200):
            m = rng.integers(1, 200)
            v = np.abs(rng.standard_normal(m)) ** rng.uniform(0.2, 3)
            v *= min(d1 / v.sum(), d2 / np.linalg.norm(v))  # scale onto the constraint set
            assert min(v.sum() / lam, kov_epsilon(v / lam, delta)) <= ours * (1 + 1e-12)


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-9])
@pytest.mark.parametrize(("d1", "d2"), [(24.0, 24**0.5), (1000.0, 3.0), (5.0, 5.0)])
def test_laplace_scale_approximate_is_smallest(
    eps: float, delta: float, d1: float, d2: float
) -> None:
    lam = laplace_scale_approximate(d1, d2, eps, delta)
    assert laplace_epsilon(d1, d2, lam, delta) <= eps
    assert laplace_epsilon(d1, d2, lam * (1 - 1e-9), delta) > eps
    assert lam <= d1 / eps  # never worse than pure DP


def test_lemma21_closed_form() -> None:
    eps, delta, d2 = 0.5, 1e-6, 3.0
    L = math.log(1 / delta)
    a = math.sqrt(2 * L) * (math.sqrt(1 + eps / L) - 1)
    assert laplace_scale_approximate(1e6, d2, eps, delta) == pytest.approx(d2 / a, rel=1e-12)


def test_calibrate_records_guarantee() -> None:
    c = calibrate(
        "gaussian",
        epsilon=1.0,
        delta=1e-6,
        l1_sensitivity=4.0,
        l2_sensitivity=2.0,
        neighbouring="x",
    )
    assert c.privacy.calibration == "analytic"
    assert c.scale == pytest.approx(gaussian_sigma(2.0, 1.0, 1e-6))
    c = calibrate(
        "laplace", epsilon=0.5, delta=None, l1_sensitivity=4.0, l2_sensitivity=2.0, neighbouring="x"
    )
    assert c.scale == 8.0 and c.privacy.delta == 0.0
    c = calibrate(
        "laplace",
        epsilon=0.5,
        delta=1e-6,
        l1_sensitivity=400.0,
        l2_sensitivity=20.0,
        neighbouring="x",
    )
    assert c.privacy.epsilon <= 0.5 and c.scale < 400.0 / 0.5
    assert "Thm 3" in c.privacy.describe()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: laplace_scale(-1.0, 1.0), r"l1_sensitivity must be > 0, got -1\.0"),
        (lambda: laplace_scale(1.0, 0), r"epsilon must be > 0, got 0"),
        (lambda: gaussian_sigma(1.0, float("nan"), 1e-5), r"epsilon must not be NaN"),
        (lambda: gaussian_sigma(1.0, 1.0, 1.0), r"delta must be in \(0, 1\), got 1\.0"),
        (lambda: gaussian_sigma(1.0, 1.0, 0.0), r"delta must be in \(0, 1\), got 0\.0"),
        (lambda: gaussian_sigma(1.0, float("inf"), 1e-5), r"epsilon must be finite, got inf"),
        (lambda: gaussian_sigma(1.0, 1.0, 1e-5, method="exact"), r"method must be one of"),  # type: ignore[arg-type]
        (lambda: laplace_epsilon(1.0, 2.0, 1.0, 1e-5), r"l2_sensitivity must be <= l1_sensitivity"),
        (
            lambda: laplace_scale_approximate(1.0, 1.0, 1.0, 2.0),
            r"delta must be in \(0, 1\), got 2\.0",
        ),
        (
            lambda: calibrate(
                "gaussian",
                epsilon=1.0,
                delta=None,
                l1_sensitivity=1.0,
                l2_sensitivity=1.0,
                neighbouring="",
            ),
            r"delta must be given for noise='gaussian'",
        ),
        (
            lambda: calibrate(
                "cauchy",
                epsilon=1.0,
                delta=None,
                l1_sensitivity=1.0,
                l2_sensitivity=1.0,
                neighbouring="",
            ),
            r"noise must be one of",
        ),
    ],
)
def test_bad_values(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_types() -> None:
    with pytest.raises(TypeError, match=r"epsilon must be a real number, got '1'"):
        laplace_scale(1.0, "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"delta must be a real number, got True"):
        gaussian_sigma(1.0, 1.0, True)


@pytest.mark.parametrize("eps", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-3, 1e-10, 1e-40])
def test_fhu_delta_inverts_fhu_constant(eps: float, delta: float) -> None:
    assert fhu_delta(eps, fhu_constant(eps, delta)) == pytest.approx(delta, rel=1e-9)


def test_log_ndtr_is_scipys_ufunc_loaded_alone() -> None:
    """The calibration's log Φ is scipy.special.log_ndtr itself, loaded without
    ``scipy/__init__`` or ``scipy/special/__init__`` in a fresh interpreter: the same
    doubles over a grid (down to x = -1e5), ``scipy`` absent until imported, then the
    very same ufunc object (so later imports are unharmed: scipy.special works)."""
    import subprocess
    import sys

    code = """
import sys
from dpcount.privacy import tails
xs = [-1e5, -1e3, -40.0, -37.5, -20.0, -5.0, -1.0, -0.5, 0.0, 0.3, 2.0, 9.0, 40.0]
values = [tails.log_ndtr(x) for x in xs]
assert "scipy" not in sys.modules and "scipy.special" not in sys.modules, "scipy imported"
assert "scipy.special._special_ufuncs" in sys.modules
import scipy.special
assert scipy.special.log_ndtr is tails._log_ndtr_ufunc()
assert values == [float(scipy.special.log_ndtr(x)) for x in xs]
assert scipy.special.ndtr(0.0) == 0.5 and scipy.special.gammaln(1.0) == 0.0
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
