"""Error metrics (Defs 3.11–3.13) against brute force, and the workloads."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from dpcount.privacy import GaussianNoise
from dpcount.ranges import (
    MECHANISMS,
    AllRanges,
    CorrelatedPerturbation,
    DenseWorkload,
    IdentityMechanism,
    RangeWorkload,
    build_mechanism,
    expected_worst_case_error,
    max_query_variance,
    nodal_level_variances,
    nodal_ranges,
    paper_monte_carlo_errors,
    query_variances,
    random_dense_queries,
    total_squared_error,
    worst_case_expected_error,
)
from tests.stats import Z_TOLERANCE

NAMES = sorted(MECHANISMS)


def listed(n: int) -> RangeWorkload:
    lo, hi = AllRanges(n).ranges()
    return RangeWorkload(n, lo, hi)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1, 2, 6, 16, 37])
def test_all_ranges_metrics_equal_the_listed_workload(name: str, n: int) -> None:
    """Implicit all-ranges metrics (no listing) = the same metrics over all listed ranges."""
    mech = build_mechanism(name, n, epsilon=0.7, delta=1e-6, rng=0)
    explicit = listed(n)
    variances = query_variances(mech, explicit)
    assert total_squared_error(mech) == pytest.approx(variances.sum(), rel=1e-10)
    assert total_squared_error(mech, AllRanges(n)) == pytest.approx(variances.sum(), rel=1e-10)
    assert max_query_variance(mech) == pytest.approx(variances.max(), rel=1e-10)
    assert worst_case_expected_error(mech) == pytest.approx(
        math.sqrt(2 / math.pi) * math.sqrt(variances.max()), rel=1e-10
    )
    assert total_squared_error(mech, explicit) == pytest.approx(variances.sum(), rel=1e-12)


def test_identity_closed_forms() -> None:
    n = 50
    mech = IdentityMechanism(n, epsilon=1.0, delta=1e-6, rng=0)
    s2 = mech.sigma**2
    assert total_squared_error(mech) == pytest.approx(s2 * n * (n + 1) * (n + 2) / 6)
    assert max_query_variance(mech) == pytest.approx(s2 * n)


@pytest.mark.parametrize("n", [4, 64, 1000])
def test_theorem_3_20_nodal_queries(n: int) -> None:
    """Node queries: err_{W,2} = (2n − 1)σ², err^∞_W = √(2/π)σ, every level's variance σ²."""
    mech = CorrelatedPerturbation(n, epsilon=1.0, delta=1e-6, rng=0)
    nodes = nodal_ranges(n)
    assert total_squared_error(mech, nodes) == pytest.approx((2 * n - 1) * mech.sigma**2)
    assert worst_case_expected_error(mech, nodes) == pytest.approx(
        math.sqrt(2 / math.pi) * mech.sigma
    )
    for level in nodal_level_variances(mech):
        np.testing.assert_allclose(level, mech.sigma**2, rtol=1e-12)


def test_nodal_level_variances_of_the_tree_baseline_are_flat() -> None:
    mech = build_mechanism("tree", 32, epsilon=1.0, delta=1e-6)
    levels = nodal_level_variances(mech)
    assert len(levels) == 6 and [lv.size for lv in levels] == [1, 2, 4, 8, 16, 32]
    for level in levels:
        np.testing.assert_allclose(level, mech.sigma**2)


@pytest.mark.parametrize("name", ["correlated", "identity", "tree", "wavelet"])
def test_expected_worst_case_error_per_draw_is_exact_and_estimate_is_sane(name: str) -> None:
    n = 12
    mech = build_mechanism(name, n, epsilon=1.0, delta=1e-3, rng=0)
    est = expected_worst_case_error(mech, draws=200, rng=1)
    assert est.draws == 200 and est.samples.shape == (200,)
    assert est.stderr == pytest.approx(est.samples.std(ddof=1) / math.sqrt(200))
    # Each draw equals the brute-force max over all listed ranges of the same release.
    gen = np.random.default_rng(1)
    lo, hi = AllRanges(n).ranges()
    first = mech._release(np.zeros(n), gen)
    assert est.samples[0] == pytest.approx(np.abs(first.query(lo, hi)).max())
    # Prop. 3.14: err^∞_W ≤ err_{W,∞}, and the max is at least the max's typical size.
    assert worst_case_expected_error(mech) <= est.mean + Z_TOLERANCE * est.stderr
    # Explicit workloads give the same per-draw maxima.
    again = expected_worst_case_error(mech, listed(n), draws=200, rng=1)
    np.testing.assert_allclose(again.samples, est.samples)


def test_expected_worst_case_dense_workload() -> None:
    mech = build_mechanism("hierarchical", 16, epsilon=1.0, delta=1e-3, rng=0)
    queries = random_dense_queries(16, count=30, rng=2)
    est = expected_worst_case_error(mech, queries, draws=50, rng=3)
    gen = np.random.default_rng(3)
    release = mech._release(np.zeros(16), gen)
    assert est.samples[0] == pytest.approx(np.abs(release.answer(queries.weights)).max())  # type: ignore[attr-defined]


def test_two_dimensional_all_rectangles() -> None:
    mech = CorrelatedPerturbation((5, 4), epsilon=1.0, delta=1e-6, rng=0)
    unit = GaussianNoise(1.0)
    rows = query_variances(
        CorrelatedPerturbation(5, epsilon=1.0, delta=1e-6).with_sampler(unit), listed(5)
    )
    cols = query_variances(
        CorrelatedPerturbation(4, epsilon=1.0, delta=1e-6).with_sampler(unit), listed(4)
    )
    brute = np.outer(rows, cols) * mech.sigma**2
    assert total_squared_error(mech) == pytest.approx(brute.sum())
    assert max_query_variance(mech) == pytest.approx(brute.max())
    est = expected_worst_case_error(mech, draws=5, rng=0)
    assert est.mean > 0
    with pytest.raises(ValueError, match="all-rectangles workload"):
        total_squared_error(mech, nodal_ranges(5))


def test_paper_estimator_is_unbiased_for_the_total() -> None:
    n = 64
    mech = CorrelatedPerturbation(n, epsilon=1.0, delta=1e-6, rng=0)
    est = paper_monte_carlo_errors(mech, samples=500, runs=400, rng=1)
    exact = total_squared_error(mech)
    se = est.total_squared_error.std(ddof=1) / math.sqrt(est.total_squared_error.size)
    assert abs(est.total_squared_error.mean() - exact) < Z_TOLERANCE * se
    assert abs(est.total_squared_error.mean() - 2 * exact) > Z_TOLERANCE * se
    # max over sampled ranges never exceeds the true max over all ranges of the same draw.
    assert np.all(est.worst_case_error > 0)
    # The errors do not depend on the data: same draws with x or with zeros.
    with_data = paper_monte_carlo_errors(mech, samples=100, runs=3, rng=1, x=np.arange(n) * 7.0)
    without = paper_monte_carlo_errors(mech, samples=100, runs=3, rng=1)
    np.testing.assert_allclose(
        with_data.total_squared_error, without.total_squared_error, rtol=1e-6
    )


def test_uniform_range_sampler() -> None:
    """App. C.4's scheme is uniform over the n(n+1)/2 ranges (chi-square)."""
    n = 6
    lo, hi = AllRanges(n).sample(60000, rng=4)
    assert np.all((lo >= 0) & (lo <= hi) & (hi < n))
    index = {pair: i for i, pair in enumerate(zip(*AllRanges(n).ranges(), strict=True))}
    counts = np.bincount(
        [index[p] for p in zip(lo.tolist(), hi.tolist(), strict=True)], minlength=21
    )
    assert chisquare(counts).pvalue > 1e-6
    skewed = counts.copy()
    skewed[0] += 1000
    assert chisquare(skewed).pvalue < 1e-6


def test_random_dense_queries_follow_app_c2() -> None:
    q = random_dense_queries(40, count=500, rng=0)
    sizes = q.weights.sum(axis=1)
    assert q.weights.shape == (500, 40) and set(np.unique(q.weights)) <= {0.0, 1.0}
    assert sizes.min() >= 10 and sizes.max() <= 40
    assert len(np.unique(sizes)) > 20
    np.testing.assert_allclose(q.gram(), q.weights.T @ q.weights)


def test_workload_grams() -> None:
    n = 7
    w = listed(n).weights()
    np.testing.assert_allclose(AllRanges(n).gram(), w.T @ w)
    np.testing.assert_allclose(listed(n).gram(), w.T @ w)
    nodes = nodal_ranges(n)
    np.testing.assert_allclose(nodes.gram(), nodes.weights().T @ nodes.weights())


def test_workload_validation() -> None:
    with pytest.raises(ValueError, match="lo must be <= hi, got lo=3 > hi=1"):
        RangeWorkload(5, np.array([3]), np.array([1]))
    with pytest.raises(ValueError, match=r"hi must be integers in \[0, 5\), got 5"):
        RangeWorkload(5, np.array([0]), np.array([5]))
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        DenseWorkload(np.zeros(3))
    with pytest.raises(ValueError, match="workload is over n=4 cells, the mechanism over n=5"):
        total_squared_error(CorrelatedPerturbation(5, epsilon=1.0, delta=1e-6), AllRanges(4))
    with pytest.raises(
        TypeError, match="workload must be AllRanges, RangeWorkload or DenseWorkload"
    ):
        total_squared_error(CorrelatedPerturbation(5, epsilon=1.0, delta=1e-6), [(0, 1)])
    with pytest.raises(ValueError, match="listing all ranges needs n <= 4096"):
        AllRanges(5000).ranges()
