"""Calibration of the correlated mechanism: precision diagonals vs dense inverses, the
paper's formula exactly, the analytic calibration against an independent privacy-loss
computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpcount.privacy import analytic_gaussian_delta, gaussian_sigma
from dpcount.privacy.calibration import paper_gaussian_sigma
from dpcount.ranges import (
    CorrelatedPerturbation,
    level_profile,
    precision_diagonal,
    precision_max_diag,
)
from dpcount.ranges.calibration import depth_precisions
from dpcount.ranges.cascade import sample_rows
from tests.ranges_reference import cascade_covariance, definition_3_1, random_profile


@pytest.mark.parametrize("k", range(1, 8))
def test_corollary_3_10_against_dense_inverse(k: int) -> None:
    inverse = np.linalg.inv(definition_3_1(k))
    np.testing.assert_allclose(np.diag(inverse), 1.0 + k / 3.0, rtol=1e-9)
    assert precision_max_diag([level_profile(2**k)]) == pytest.approx(1.0 + k / 3.0, rel=1e-15)


@pytest.mark.parametrize("n", [*range(1, 40), 63, 65, 100, 129])
def test_precision_diagonal_any_n_and_profile(n: int) -> None:
    """diag(C⁻¹) = 1/v_0 + Σ 1/(4β²) over the splits above each leaf (dense inverse)."""
    rng = np.random.default_rng(n)
    for profile in (level_profile(n), random_profile(n, rng)):
        inverse = np.linalg.inv(cascade_covariance(n, profile))
        np.testing.assert_allclose(precision_diagonal(n, profile), np.diag(inverse), rtol=1e-8)
        assert precision_max_diag([profile]) == pytest.approx(np.diag(inverse).max(), rel=1e-8)
    depth = 0 if n == 1 else math.ceil(math.log2(n))
    assert precision_max_diag([level_profile(n)]) == pytest.approx(1 + depth / 3, rel=1e-15)


def test_depth_precisions_default() -> None:
    np.testing.assert_allclose(depth_precisions(level_profile(16)), [1 + d / 3 for d in range(5)])


@pytest.mark.parametrize("shape", [(3, 5), (4, 4), (1, 7), (6, 2)])
def test_two_dimensional_precision_is_the_product(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(3)
    profiles = [random_profile(n, rng) for n in shape]
    cov = np.kron(
        cascade_covariance(shape[0], profiles[0]), cascade_covariance(shape[1], profiles[1])
    )
    assert precision_max_diag(profiles) == pytest.approx(
        np.diag(np.linalg.inv(cov)).max(), rel=1e-8
    )


@pytest.mark.parametrize("n", [1, 2, 7, 8, 1000, 4096])
@pytest.mark.parametrize(("epsilon", "delta"), [(0.1, 1e-9), (0.5, 1e-6), (1.0, 0.01)])
def test_paper_calibration_is_theorem_3_8(n: int, epsilon: float, delta: float) -> None:
    mech = CorrelatedPerturbation(n, epsilon=epsilon, delta=delta, calibration="paper", rng=0)
    depth = 0 if n == 1 else math.ceil(math.log2(n))
    # Thm 3.8 (n = 2^k): σ² = (2/ε² + 2 log₂(n)/(3ε²))·ln(2/δ); any n: log₂ n → ⌈log₂ n⌉.
    expected = (2 / epsilon**2 + 2 * depth / (3 * epsilon**2)) * math.log(2 / delta)
    assert mech.sigma**2 == pytest.approx(expected, rel=1e-11)
    assert mech.sigma**2 >= expected  # rounded up, never down


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-9, 1e-5, 0.1, 0.5])
@pytest.mark.parametrize("n", [2, 1000, 2**20])
def test_analytic_never_exceeds_paper_and_is_exact(epsilon: float, delta: float, n: int) -> None:
    analytic = CorrelatedPerturbation(n, epsilon=epsilon, delta=delta, rng=0)
    paper = CorrelatedPerturbation(n, epsilon=epsilon, delta=delta, calibration="paper", rng=0)
    assert analytic.sigma <= paper.sigma
    sensitivity = math.sqrt(analytic.precision_max_diag)
    assert analytic_gaussian_delta(analytic.sigma, sensitivity, epsilon) <= delta
    # Tight: 0.1% less noise would break the budget.
    assert analytic_gaussian_delta(analytic.sigma * 0.999, sensitivity, epsilon) > delta
    assert analytic.sigma == pytest.approx(
        gaussian_sigma(1.0, epsilon, delta) * sensitivity, rel=1e-9
    )


def test_analytic_works_for_large_epsilon() -> None:
    mech = CorrelatedPerturbation(64, epsilon=5.0, delta=1e-6, rng=0)
    assert analytic_gaussian_delta(mech.sigma, math.sqrt(1 + 6 / 3), 5.0) <= 1e-6


def test_privacy_loss_is_gaussian_as_theorem_3_7_states() -> None:
    """Independent check of the analytic calibration's premise on a small tree.

    For x' = x + e_i the privacy loss at an output drawn from M(x) is
    L = (C⁻¹)_ii/(2σ²) + sᵀC⁻¹e_i/σ² with s the noise; δ(ε) = E[(1 − e^{ε−L})₊].
    Monte Carlo over cascade draws (dense C⁻¹ from the oracle) must match the
    analytic Gaussian δ for sensitivity √((C⁻¹)_ii).
    """
    n, sigma, epsilon = 6, 1.2, 0.5
    cov = cascade_covariance(n, level_profile(n))
    inverse = np.linalg.inv(cov)
    noise = sample_rows(40000, n, level_profile(n), sigma, np.random.default_rng(9))
    for i in (0, 2, 5):
        loss = inverse[i, i] / (2 * sigma**2) + noise @ inverse[:, i] / sigma**2
        hockey = np.maximum(0.0, 1.0 - np.exp(epsilon - loss))
        exact = analytic_gaussian_delta(sigma, math.sqrt(inverse[i, i]), epsilon)
        z = (hockey.mean() - exact) / (hockey.std(ddof=1) / math.sqrt(hockey.size))
        assert abs(z) < 5.5
        # The loss is N(μ, 2μ) with μ = (C⁻¹)_ii/(2σ²): a KS test accepts it...
        mu = inverse[i, i] / (2 * sigma**2)
        standardized = (loss - mu) / math.sqrt(2 * mu)
        assert np.abs(np.sort(norm.cdf(standardized)) - np.linspace(0, 1, loss.size)).max() < 0.012
        # ...and rejects twice the variance.
        wrong = (loss - mu) / math.sqrt(4 * mu)
        assert np.abs(np.sort(norm.cdf(wrong)) - np.linspace(0, 1, loss.size)).max() > 0.02


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 1.5, "calibration": "paper"}, r"epsilon must be <= 1 for calibration='paper'"),
        ({"delta": 0.6, "calibration": "paper"}, r"delta must be <= 0.5 for calibration='paper'"),
        (
            {"calibration": "bogus"},
            r"calibration must be one of \('pure', ",
        ),
        ({"epsilon": 0.0}, "epsilon must be > 0, got 0.0"),
        ({"delta": 1.0}, r"delta must be in \(0, 1\), got 1.0"),
        ({"epsilon": 2.0, "calibration": "classic"}, "epsilon must be < 1 for the 'classic'"),
    ],
)
def test_calibration_errors(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"epsilon": 0.5, "delta": 1e-6, **kwargs}
    with pytest.raises(ValueError, match=match):
        CorrelatedPerturbation(16, **args)  # type: ignore[arg-type]


def test_paper_sigma_formula_directly() -> None:
    assert paper_gaussian_sigma(2.0, 0.5, 1e-6) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(2e6)) / 0.5, rel=1e-11
    )
    assert gaussian_sigma(1.0, 0.5, 1e-6, method="classic") == pytest.approx(
        math.sqrt(2 * math.log(1.25e6)) / 0.5
    )


def test_level_variances_change_the_calibration_exactly() -> None:
    profile = [4.0, 2.0, 1.0, 0.5]  # β² = 1, 0.5, 0.25
    mech = CorrelatedPerturbation(8, epsilon=1.0, delta=1e-6, level_variances=profile, rng=0)
    expected = 1 / 4 + 1 / 4 + 1 / 2 + 1 / 1
    assert mech.precision_max_diag == pytest.approx(expected)
    assert mech.sigma == pytest.approx(gaussian_sigma(math.sqrt(expected), 1.0, 1e-6), rel=1e-12)
