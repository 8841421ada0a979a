"""The Gaussian MSE floor that lets ``auto`` skip the Gaussian rows (analysis/_floor.py):
each ingredient below its exact counterpart over a grid, and the floor below every
Gaussian row ``compare`` lists and every discrete-Gaussian tree."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcount.analysis._floor import (
    DISCRETE_VARIANCE_FACTOR,
    NUCLEAR_NORM_MAX_HORIZON,
    SIGMA_FLOOR_MARGIN,
    analytic_sigma_ceiling,
    analytic_sigma_floor,
    gaussian_mse_floor,
    normalized_sqrt_dense_losses,
)
from dpcount.analysis.compare import compare
from dpcount.counting.registry import DISCRETE_CAPABLE, build_mechanism
from dpcount.privacy import Budget
from dpcount.privacy.calibration import discrete_gaussian_sigma, gaussian_sigma
from dpcount.privacy.discrete import discrete_gaussian_variance

EPSILONS = (0.01, 0.1, 0.5, 1.0, 2.0, 8.0, 20.0)
DELTAS = (1e-15, 1e-10, 1e-6, 1e-3, 0.1, 0.5)


def test_sigma_floor_is_below_both_gaussian_calibrations() -> None:
    """Below the analytic σ (scipy's log_ndtr) and the discrete Gaussian's zCDP σ, and
    within twice its margin of the analytic σ (so it is the same quantity)."""
    for eps, delta in itertools.product(EPSILONS, DELTAS):
        floor = analytic_sigma_floor(eps, delta)
        assert floor is not None, (eps, delta)
        exact = gaussian_sigma(1.0, eps, delta)
        assert floor <= exact, (eps, delta, floor, exact)
        assert floor >= exact * (1.0 - 2.0 * SIGMA_FLOOR_MARGIN), (eps, delta, floor, exact)
        assert floor <= discrete_gaussian_sigma(1.0, eps, delta), (eps, delta)


def test_sigma_ceiling_is_above_the_analytic_calibration() -> None:
    """Above the analytic σ as calibrated (scipy's log_ndtr, its solver margin), at
    sensitivities 1 and 3 (σ is proportional to it), and within twice its margin (a
    ceiling 10x looser would fail the second check)."""
    for eps, delta in itertools.product(EPSILONS, DELTAS):
        ceiling = analytic_sigma_ceiling(eps, delta)
        assert ceiling is not None, (eps, delta)
        exact = gaussian_sigma(1.0, eps, delta)
        assert exact <= ceiling <= exact * (1.0 + 2.0 * SIGMA_FLOOR_MARGIN), (eps, delta)
        assert gaussian_sigma(3.0, eps, delta) <= 3.0 * ceiling, (eps, delta)


def test_sigma_floor_gives_up_out_of_erfc_range() -> None:
    assert analytic_sigma_floor(1e-3, 1e-300) is None  # Φ's argument below -37
    assert analytic_sigma_ceiling(1e-3, 1e-300) is None


def test_discrete_variance_factor_holds_from_one() -> None:
    """Var N_Z(0, s²) ≥ s²·factor for s ≥ 1 (the gap shrinks with s; at s = 1 it is
    2.1e-7), and a factor ten times tighter would be wrong at s = 1."""
    s = np.concatenate([np.linspace(1.0, 1.5, 201), [2.0, 3.0, 10.0, 1e3]])
    ratios = [discrete_gaussian_variance(v * v) / (v * v) for v in s]
    assert min(ratios) >= DISCRETE_VARIANCE_FACTOR
    assert ratios[0] < 1.0 - (1.0 - DISCRETE_VARIANCE_FACTOR) / 10.0


def test_floor_gives_up_where_its_bounds_do_not_hold() -> None:
    assert gaussian_mse_floor(100, 4.0, 1e-3, 1.0) is None  # step·σ < 1
    assert gaussian_mse_floor(NUCLEAR_NORM_MAX_HORIZON + 1, 1.0, 1e-6, 1.0) is None


def test_continuous_floor_needs_no_unit_sigma() -> None:
    """``discrete=False`` bounds the continuous Gaussian rows only: no discrete factor,
    and defined where step·σ < 1, still below a built continuous row (the BLT, the
    sqrt, the best trees)."""
    both = gaussian_mse_floor(100, 1.0, 1e-6, 1.0)
    continuous = gaussian_mse_floor(100, 1.0, 1e-6, 1.0, discrete=False)
    assert both is not None and continuous == pytest.approx(both / DISCRETE_VARIANCE_FACTOR)
    floor = gaussian_mse_floor(100, 4.0, 1e-3, 1.0, discrete=False)
    assert floor is not None
    budget = Budget(epsilon=4.0, delta=1e-3, noise="gaussian")
    for name in ("blt", "sqrt", "honaker"):
        assert floor <= build_mechanism(name, horizon=100, budget=budget, rng=0).mse(), name


@pytest.mark.slow
@pytest.mark.parametrize(
    ("T", "eps", "delta", "step"), [(7, 1.0, 1e-6, 1.0), (100, 0.5, 1e-10, 2.0)]
)
def test_floor_is_below_every_gaussian_row(T: int, eps: float, delta: float, step: float) -> None:
    """Every Gaussian row compare lists (BLT, optimized Toeplitz, dense optima, the
    square roots, the trees) and every discrete-Gaussian tree over all k has an exact
    MSE above the floor; the lowest is within a factor 3 of it (a floor of 3x would
    be wrong)."""
    floor = gaussian_mse_floor(T, eps, delta, step)
    assert floor is not None
    budget = Budget(epsilon=eps, delta=delta, step_sensitivity=step)
    rows = [r for r in compare(T, budget=budget, certificates=False) if r.noise == "gaussian"]
    assert len(rows) >= 8
    mses = [r.mse for r in rows]
    noise = budget.replace(noise="discrete-gaussian")
    for name in sorted(DISCRETE_CAPABLE):
        opts: list[dict[str, object]] = [{}]
        if name == "kary":
            opts = [{"k": k, "subtract": s} for k in range(2, 17) for s in (False, True)]
        for o in opts:
            mech = build_mechanism(name, horizon=T, budget=noise, rng=0, **o)
            mses.append(float(mech.mse()))
    assert min(mses) >= floor
    assert min(mses) < 3.0 * floor
    assert math.isfinite(floor)


@pytest.mark.parametrize("T", [1, 2, 7, 100, 1024])
def test_normalized_sqrt_dense_losses_match_the_mechanism(T: int) -> None:
    """The dense matrices' sensitivity and variance (its own power-series inverse and
    cumulative sum) give the module's closed-form mean loss and sensitivity to 10^-12
    (a wrong column scaling or a missing A would fail it); None above the limit."""
    from dpcount.counting.factorization.normalized_sqrt import normalized_sqrt_losses
    from dpcount.counting.factorization.sqrt_toeplitz import sqrt_l2_norm_squared

    losses = normalized_sqrt_dense_losses(T)
    assert losses is not None
    sensitivity, variance = losses
    assert sensitivity == pytest.approx(sqrt_l2_norm_squared(T), rel=1e-12)
    assert sensitivity * variance == pytest.approx(normalized_sqrt_losses(T)[0], rel=1e-12)
    assert normalized_sqrt_dense_losses(1025) is None
