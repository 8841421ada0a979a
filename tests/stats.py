"""Statistical checks with tolerances derived from standard errors.

Every check returns the z-scores it computed, so a test can also assert that a
wrong answer (e.g. twice the variance) would have been rejected.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Z_TOLERANCE = 5.5  # per-check two-sided tail ~4e-8 under the null


def variance_z_scores(
    errors: NDArray[np.float64], expected: NDArray[np.float64]
) -> NDArray[np.float64]:
    """z-scores of the per-column second moment of zero-mean ``errors`` (reps × steps).

    The estimator mean(e²) has standard error sd(e²)/√reps, estimated from the data.
    """
    sq = errors**2
    reps = errors.shape[0]
    se = sq.std(axis=0, ddof=1) / np.sqrt(reps)
    return (sq.mean(axis=0) - expected) / se


def pooled_variance_z(errors: NDArray[np.float64], expected: NDArray[np.float64]) -> float:
    """z-score of Σ_t e_t²/v_t per replicate vs its mean (number of steps).

    Uses the replicate-level spread, so it is valid however the steps correlate.
    """
    ratio = (errors**2 / expected).sum(axis=1)
    se = ratio.std(ddof=1) / np.sqrt(len(ratio))
    return float((ratio.mean() - expected.shape[0]) / se)


def mean_z_scores(errors: NDArray[np.float64]) -> NDArray[np.float64]:
    """z-scores of the per-column mean of ``errors`` against 0 (unbiasedness)."""
    se = errors.std(axis=0, ddof=1) / np.sqrt(errors.shape[0])
    return errors.mean(axis=0) / se


def assert_variances_match(errors: NDArray[np.float64], expected: NDArray[np.float64]) -> None:
    """Per-step and pooled variance agree with ``expected``; doubling it is rejected."""
    z = variance_z_scores(errors, expected)
    assert np.max(np.abs(z)) < Z_TOLERANCE, f"max |z| = {np.max(np.abs(z)):.2f}"
    pooled = pooled_variance_z(errors, expected)
    assert abs(pooled) < Z_TOLERANCE, f"pooled z = {pooled:.2f}"
    assert np.max(np.abs(mean_z_scores(errors))) < Z_TOLERANCE
    # The same data must reject a wrong answer.
    assert abs(pooled_variance_z(errors, 2.0 * expected)) > Z_TOLERANCE
    assert abs(pooled_variance_z(errors, 0.8 * expected)) > Z_TOLERANCE
