"""Post-processing: the covariance fit of ``--monotone``'s comparison (issue 22, item 5).

The noise matrix is read off each mechanism's own noise process; it is checked
against the dense factorizations (an independent computation), the fit against the
truth with no noise and against its guarantee (non-expansive in the Σ⁻¹-norm).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcount.counting import Honaker, KaryTree, SqrtFactorization
from dpcount.postprocess import gls_fitter, monotone_gls, noise_matrix


@pytest.mark.parametrize(
    "mech",
    [Honaker(40, epsilon=1.0), SqrtFactorization(40, epsilon=1.0, delta=1e-6)],
    ids=["honaker", "sqrt"],
)
def test_noise_matrix_equals_the_dense_factorization(mech: object) -> None:
    L, _ = mech.dense_factorization()  # type: ignore[attr-defined]
    probed = noise_matrix(mech, 40)
    np.testing.assert_allclose(probed @ probed.T, L @ L.T, atol=1e-12)


def test_noise_matrix_of_a_tree_has_its_exact_variances() -> None:
    mech = KaryTree(50, epsilon=1.0, k=4)
    probed = noise_matrix(mech, 50)
    np.testing.assert_array_equal(np.diag(probed @ probed.T), mech.noise_coefficients())


def test_gls_fit_returns_a_feasible_truth_exactly() -> None:
    x = (np.random.default_rng(0).random(60) < 0.3).astype(float)
    fit = monotone_gls(np.cumsum(x), KaryTree(60, epsilon=1.0, k=4))
    np.testing.assert_allclose(fit, np.cumsum(x), atol=1e-9)


def test_gls_fit_is_non_expansive_in_the_covariance_norm() -> None:
    """For every draw: ‖P(r) − s‖_Σ⁻¹ ≤ ‖r − s‖_Σ⁻¹, and the fit has non-negative steps."""
    T = 60
    x = (np.random.default_rng(1).random(T) < 0.2).astype(np.int64)
    truth = np.cumsum(x)
    mech = KaryTree(T, epsilon=1.0, k=4)
    L = noise_matrix(mech, T)
    inv = np.linalg.inv(L @ L.T)
    fit = gls_fitter(mech, T)
    for seed in range(20):
        r = np.asarray(KaryTree(T, epsilon=1.0, k=4, rng=seed).release(x), dtype=float)
        g = fit(r)
        assert (np.diff(g) >= -1e-9).all() and g[0] >= -1e-9
        d_fit, d_raw = g - truth, r - truth
        assert d_fit @ inv @ d_fit <= d_raw @ inv @ d_raw * (1 + 1e-9)


def test_gls_fit_refuses_a_long_series() -> None:
    with pytest.raises(ValueError, match="at most 4096 steps for the covariance fit, got 5000"):
        gls_fitter(KaryTree(5000, epsilon=1.0), 5000)
