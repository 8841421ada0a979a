"""Local median and 1-D convex risk minimization (constant-matters App. B.5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcount.apps import LocalMedianProtocol, local_median, local_risk_minimization
from dpcount.apps.local import smith_randomizer_buckets
from dpcount.privacy import ZeroNoise
from tests.stats import Z_TOLERANCE, assert_variances_match


def exact_slopes(buckets: np.ndarray, w: int) -> np.ndarray:
    counts = np.bincount(buckets, minlength=w)
    below = np.cumsum(counts)
    return (below - (len(buckets) - below)) / len(buckets)


@pytest.mark.parametrize(("mechanism", "delta"), [("kary", None), ("binary", 1e-6)])
def test_zero_noise_protocol_is_exact(mechanism: str, delta: float | None) -> None:
    data = np.random.default_rng(0).beta(2, 5, size=5000)
    protocol = LocalMedianProtocol(
        5000, epsilon=0.5, delta=delta, mechanism=mechanism
    ).with_sampler(ZeroNoise())
    w = protocol.buckets
    assert w == math.ceil(0.5 * math.sqrt(5000))
    buckets = np.minimum((data * w).astype(int), w - 1)
    np.testing.assert_array_equal(protocol.bucket_of(data), buckets)
    result = protocol.run(data)
    np.testing.assert_allclose(result.slopes, exact_slopes(buckets, w), atol=1e-12)
    # f on the grid is the running sum of slopes / w; the estimate is its first minimizer,
    # the left edge of the bucket where the count first reaches n/2.
    k = int(np.argmax(np.cumsum(np.bincount(buckets, minlength=w)) >= 2500))
    assert result.estimate == pytest.approx(k / w)
    assert abs(result.estimate - np.median(data)) <= 1 / w
    np.testing.assert_array_equal(result.slope_variances, np.zeros(w))


def test_client_messages_are_private_prefix_sums() -> None:
    protocol = LocalMedianProtocol(3, epsilon=1.0, buckets=5).with_sampler(ZeroNoise())
    y, z = protocol.client_messages([0, 2, 4])
    np.testing.assert_array_equal(y, np.cumsum(np.eye(5)[[0, 2, 4]], axis=1))
    np.testing.assert_array_equal(z, np.cumsum(np.eye(5)[[4, 2, 0]], axis=1))


def test_calibration_for_any_two_inputs() -> None:
    lap = LocalMedianProtocol(10_000, epsilon=1.0)
    assert lap.mechanism.horizon == 100
    assert lap.mechanism.noise_scale == pytest.approx(lap.mechanism.height * 4.0)
    gau = LocalMedianProtocol(10_000, epsilon=1.0, delta=1e-6, mechanism="binary", noise="gaussian")
    assert gau.mechanism.step_sensitivity == pytest.approx(2 * math.sqrt(2))
    assert "any two inputs" in gau.describe()


@pytest.mark.slow
@pytest.mark.parametrize(("mechanism", "delta"), [("kary", None), ("binary", 1e-6)])
def test_slope_variances_match_exact(mechanism: str, delta: float | None) -> None:
    n, reps = 40, 3000
    protocol = LocalMedianProtocol(
        n, epsilon=1.0, delta=delta, buckets=9, mechanism=mechanism, k=3, rng=5
    )
    data = np.random.default_rng(1).uniform(size=n)
    truth = exact_slopes(protocol.bucket_of(data), 9)
    errors = np.array([protocol.run(data).slopes - truth for _ in range(reps)])
    v = protocol.mechanism.variances()
    expected = (v + np.concatenate([v[-2::-1], [0.0]])) / n
    np.testing.assert_allclose(protocol.slope_variances(), expected, rtol=1e-12)
    assert_variances_match(errors, protocol.slope_variances())


def test_blocks_do_not_change_the_result() -> None:
    """Many clients are simulated in blocks; zero noise makes the result block-independent."""
    import dpcount.apps.local as local

    data = np.random.default_rng(2).uniform(size=3001)
    protocol = LocalMedianProtocol(3001, epsilon=1.0).with_sampler(ZeroNoise())
    whole = protocol.run(data)
    old = local._BLOCK_FLOATS
    try:
        local._BLOCK_FLOATS = 2 * protocol.buckets * 7  # blocks of 7 clients
        np.testing.assert_allclose(protocol.run(data).slopes, whole.slopes, atol=1e-12)
    finally:
        local._BLOCK_FLOATS = old


@pytest.mark.slow
def test_local_median_accuracy_with_noise() -> None:
    data = np.random.default_rng(3).beta(2, 5, size=20_000)
    errors = [local_median(data, epsilon=1.0, rng=s).estimate - np.median(data) for s in range(6)]
    # Slope noise sd ≈ 0.4 here; the median moves by at most ~0.2 (a loose, documented check).
    assert np.max(np.abs(errors)) < 0.25


def test_randomizer_has_the_stated_distribution() -> None:
    """z ~ CDF (1 + ∂ℓ(θ; d))/2: bucket frequencies for the squared loss at d = 0.3."""
    w, n = 10, 200_000
    buckets = smith_randomizer_buckets(
        np.full(n, 0.3), lambda th, d: th - d, w, np.random.default_rng(0)
    )
    edges = np.arange(1, w) / w
    cdf = np.concatenate([[0.0], (1 + edges - 0.3) / 2, [1.0]])
    p = np.diff(cdf)
    freq = np.bincount(buckets, minlength=w) / n
    se = np.sqrt(p * (1 - p) / n)
    assert np.max(np.abs(freq - p) / se) < Z_TOLERANCE
    wrong = np.diff(np.concatenate([[0.0], (1 + edges - 0.4) / 2, [1.0]]))
    assert np.max(np.abs(freq - wrong) / se) > Z_TOLERANCE


@pytest.mark.slow  # statistical; CI runs the slow set
def test_zero_noise_risk_minimization_finds_the_mean() -> None:
    """Squared loss: the risk minimizer is the mean (not the median) of skewed data."""
    rng = np.random.default_rng(4)
    data = np.where(rng.random(40_000) < 0.7, 0.1, 0.9) + rng.uniform(-0.05, 0.05, 40_000)
    result = local_risk_minimization(
        data, lambda th, d: th - d, epsilon=1.0, rng=5, buckets=50, mechanism="kary"
    )
    assert result.buckets == 50
    protocol = LocalMedianProtocol(40_000, epsilon=1.0, buckets=50).with_sampler(ZeroNoise())
    buckets = smith_randomizer_buckets(data, lambda th, d: th - d, 50, np.random.default_rng(6))
    exact = protocol.run_buckets(buckets)
    assert abs(exact.estimate - data.mean()) <= 1 / 50 + 0.02
    assert abs(exact.estimate - np.median(data)) > 0.15  # median ≈ 0.1, mean ≈ 0.34


def test_default_with_delta_is_the_integer_tree() -> None:
    protocol = LocalMedianProtocol(400, epsilon=1.0, delta=1e-6)
    assert protocol.noise == "discrete-gaussian" and protocol.mechanism.name == "kary-19-sub"
    protocol = LocalMedianProtocol(400, epsilon=1.0, delta=1e-6, noise="gaussian")
    assert protocol.noise == "gaussian" and protocol.mechanism.name == "sqrt"
    exact = protocol.with_sampler(ZeroNoise()).run(np.full(400, 0.5))
    assert exact.estimate == pytest.approx(0.5)


def test_local_input_errors() -> None:
    protocol = LocalMedianProtocol(3, epsilon=1.0, buckets=4)
    with pytest.raises(
        ValueError, match=r"data must be finite and in \[0, 1\], got 1.5 at index 2"
    ):
        protocol.run([0.1, 0.2, 1.5])
    with pytest.raises(ValueError, match=r"data must have shape \(3\), got shape \(2,\)"):
        protocol.run([0.1, 0.2])
    with pytest.raises(ValueError, match=r"bucket_indices must be in \[0, 4\), got 4"):
        protocol.client_messages([4])
    with pytest.raises(ValueError, match=r"bucket_indices must have 3 entries"):
        protocol.run_buckets([0, 1])
    with pytest.raises(ValueError, match=r"data must contain at least one value"):
        local_median([], epsilon=1.0)
    with pytest.raises(
        ValueError, match=r"gradient\(theta, data\) must be finite and in \[-1, 1\]"
    ):
        local_risk_minimization([0.5, 0.6], lambda th, d: 2 * (th - d) + 5, epsilon=1.0, buckets=4)
    with pytest.raises(ValueError, match=r"must be non-decreasing in theta .* data\[0\] = 0.5"):
        local_risk_minimization([0.5, 0.6], lambda th, d: -(th - d), epsilon=1.0, buckets=4)
    with pytest.raises(ValueError, match=r"gradient\(theta, data\) must have shape \(2, 3\)"):
        local_risk_minimization([0.5, 0.6], lambda th, d: th, epsilon=1.0, buckets=4)
