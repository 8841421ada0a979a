"""Contract suite over every range mechanism: structure with zero noise first, then the
noise (exact variances vs Monte Carlo), then each baseline against its dense oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from dpcount.privacy import GaussianNoise, ZeroNoise, gaussian_sigma
from dpcount.ranges import (
    MECHANISMS,
    CorrelatedPerturbation,
    EigenDesignMechanism,
    HierarchicalMechanism,
    HistogramRelease,
    IdentityMechanism,
    TreeMechanism,
    WaveletMechanism,
    build_mechanism,
    nodal_ranges,
)
from dpcount.ranges.baselines.eigen import eigen_weights
from dpcount.ranges.baselines.hierarchical import least_squares
from dpcount.ranges.baselines.tree import TreeRelease
from tests.ranges_reference import build_tree, hierarchical_gls, perfect_tree_nodes
from tests.stats import Z_TOLERANCE, assert_variances_match

NAMES = sorted(MECHANISMS)
SIZES = [1, 2, 3, 5, 8, 13, 16]


def truth_of(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    prefix = np.concatenate(([0.0], np.cumsum(x)))
    return prefix[hi + 1] - prefix[lo]


def all_ranges(n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.triu_indices(n)
    return lo.astype(np.int64), hi.astype(np.int64)


# ---- structure ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_zero_noise_answers_every_range_exactly(name: str, n: int) -> None:
    x = np.random.default_rng(n).integers(0, 50, n).astype(float)
    release = (
        build_mechanism(name, n, epsilon=1.0, delta=1e-6, rng=0)
        .with_sampler(ZeroNoise())
        .release(x)
    )
    lo, hi = all_ranges(n)
    np.testing.assert_allclose(release.query(lo, hi), truth_of(x, lo, hi), atol=1e-9)
    assert release.query(0, n - 1) == pytest.approx(x.sum())
    assert isinstance(release.query(0, 0), float)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "tree"])
def test_consistent_releases_come_from_one_vector(name: str) -> None:
    release = build_mechanism(name, 13, epsilon=1.0, delta=1e-6, rng=1).release(np.arange(13.0))
    assert isinstance(release, HistogramRelease)
    lo, hi = all_ranges(13)
    np.testing.assert_allclose(release.query(lo, hi), truth_of(release.values, lo, hi), atol=1e-9)
    with pytest.raises(ValueError, match="read-only"):
        release.values[0] = 0.0


def test_tree_release_is_not_consistent_but_uses_canonical_nodes() -> None:
    release = TreeMechanism(8, epsilon=1.0, delta=1e-6, rng=2).release(np.zeros(8))
    assert isinstance(release, TreeRelease)
    # [0, 7] is the root alone; the leaves' sum is a different noisy answer.
    assert release.query(0, 7) == pytest.approx(release.node_values[1])
    assert release.query(0, 7) != pytest.approx(release.values.sum())
    assert release.range_variance(0, 7) == pytest.approx(release.range_variance(3, 3))
    assert release.range_variance(1, 6) == pytest.approx(4 * release.range_variance(3, 3))


# ---- noise: exact variance, unbiasedness, intervals --------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [5, pytest.param(13, marks=pytest.mark.slow)])
def test_exact_range_variances_match_monte_carlo(name: str, n: int) -> None:
    mech = build_mechanism(name, n, epsilon=1.0, delta=1e-3, rng=3)
    x = np.arange(n, dtype=float)
    lo, hi = all_ranges(n)
    truth = truth_of(x, lo, hi)
    errors = np.stack([mech.release(x).query(lo, hi) - truth for _ in range(3000)])
    assert_variances_match(errors, mech.range_variance(lo, hi))


@pytest.mark.parametrize("name", NAMES)
def test_dense_queries_variance_matches_monte_carlo(name: str) -> None:
    n = 11
    mech = build_mechanism(name, n, epsilon=1.0, delta=1e-3, rng=4)
    w = (np.random.default_rng(5).random((6, n)) < 0.5).astype(float)
    x = np.arange(n, dtype=float)
    truth = w @ x
    errors = np.stack([mech.release(x).answer(w) - truth for _ in range(3000)])  # type: ignore[attr-defined]
    assert_variances_match(errors, mech.query_variance(w))
    np.testing.assert_allclose(mech.release(x).query_variance(w), mech.query_variance(w))  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["correlated", "hierarchical", "tree"])
def test_intervals_cover_at_their_level(name: str) -> None:
    n, level = 9, 0.9
    mech = build_mechanism(name, n, epsilon=1.0, delta=1e-3, rng=6)
    x = np.ones(n)
    lo, hi = all_ranges(n)
    truth = truth_of(x, lo, hi)
    hits = []
    for _ in range(600):
        low, high = mech.release(x).interval(lo, hi, level=level)
        hits.append((low <= truth) & (truth <= high))
    rate = np.mean(hits, axis=0)
    se = math.sqrt(level * (1 - level) / 600)
    assert np.max(np.abs(rate - level)) < Z_TOLERANCE * se
    assert abs(np.mean(hits) - level) < Z_TOLERANCE * se  # pooled (correlated ranges)


def test_interval_is_answer_plus_minus_z_sd() -> None:
    release = CorrelatedPerturbation(16, epsilon=1.0, delta=1e-6, rng=7).release(np.zeros(16))
    low, high = release.interval(2, 9, level=0.95)
    sd = math.sqrt(release.range_variance(2, 9))
    assert (high - low) / 2 == pytest.approx(1.959963984540054 * sd)
    assert (high + low) / 2 == pytest.approx(release.query(2, 9))


# ---- the correlated mechanism -------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 8, 100, 1000])
def test_every_node_has_variance_sigma_squared(n: int) -> None:
    """Theorem 3.3 for any n: the exact variance of every tree node's answer is σ²."""
    mech = CorrelatedPerturbation(n, epsilon=0.5, delta=1e-6, rng=0)
    nodes = nodal_ranges(n)
    np.testing.assert_allclose(mech.range_variance(nodes.lo, nodes.hi), mech.sigma**2, rtol=1e-12)
    assert nodes.count == 2 * n - 1


def test_level_variances_control_each_level() -> None:
    """Utility control: a chosen variance per depth, exact and checked by Monte Carlo."""
    profile = [0.5, 1.0, 2.0, 1.0, 3.0]
    mech = CorrelatedPerturbation(16, epsilon=1.0, delta=1e-6, rng=8, level_variances=profile)
    nodes = nodal_ranges(16)
    expected = mech.sigma**2 * np.asarray(profile)[nodes.depth]
    np.testing.assert_allclose(mech.range_variance(nodes.lo, nodes.hi), expected, rtol=1e-12)
    # 1200 releases: a 0.8× answer has pooled z ≈ 17 (31 nodes), far past 5.5.
    errors = np.stack([mech.release(np.zeros(16)).query(nodes.lo, nodes.hi) for _ in range(1200)])
    assert_variances_match(errors, expected)
    assert mech.node_variance(2) == pytest.approx(2.0 * mech.sigma**2)


def test_correlated_two_dimensional_rectangles() -> None:
    shape = (6, 5)
    mech = CorrelatedPerturbation(shape, epsilon=1.0, delta=1e-3, rng=9)
    x = np.arange(30.0).reshape(shape)
    r0, r1 = np.triu_indices(6)
    c0, c1 = np.triu_indices(5)
    lo = np.stack(np.broadcast_arrays(r0[:, None], c0[None, :]), axis=-1).reshape(-1, 2)
    hi = np.stack(np.broadcast_arrays(r1[:, None], c1[None, :]), axis=-1).reshape(-1, 2)
    truth = np.array([x[a : b + 1, c : d + 1].sum() for (a, c), (b, d) in zip(lo, hi, strict=True)])
    zero = mech.with_sampler(ZeroNoise()).release(x)
    np.testing.assert_allclose(zero.query(lo, hi), truth, atol=1e-9)
    one = (
        CorrelatedPerturbation(6, epsilon=1.0, delta=1e-3),
        CorrelatedPerturbation(5, epsilon=1.0, delta=1e-3),
    )
    product = one[0].with_sampler(GaussianNoise(1.0)).range_variance(lo[:, 0], hi[:, 0]) * one[
        1
    ].with_sampler(GaussianNoise(1.0)).range_variance(lo[:, 1], hi[:, 1])
    np.testing.assert_allclose(mech.range_variance(lo, hi), mech.sigma**2 * product, rtol=1e-12)
    # 800 releases: a 0.8× answer has pooled z ≈ 18 (315 rectangles), far past 5.5.
    errors = np.stack([mech.release(x).query(lo, hi) - truth for _ in range(800)])
    assert_variances_match(errors, mech.range_variance(lo, hi))
    # Calibration: the 2-D precision is the product (1 + 3/3)·(1 + 3/3).
    assert mech.precision_max_diag == pytest.approx(4.0)


def test_identity_two_dimensional() -> None:
    mech = IdentityMechanism((4, 3), epsilon=1.0, delta=1e-6, rng=1)
    assert mech.range_variance([0, 0], [3, 2]) == pytest.approx(12 * mech.sigma**2)
    release = mech.with_sampler(ZeroNoise()).release(np.ones((4, 3)))
    assert release.query([1, 1], [2, 2]) == pytest.approx(4.0)


# ---- baselines against their dense oracles ---------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11, 16])
def test_hierarchical_is_the_least_squares_estimate(n: int) -> None:
    mech = HierarchicalMechanism(n, epsilon=1.0, delta=1e-6, rng=0)
    depth = mech.depth
    a, cov = hierarchical_gls(depth, n)
    rng = np.random.default_rng(n)
    noisy = rng.normal(size=a.shape[0]) * 10
    nodes = perfect_tree_nodes(depth)
    per_depth = []
    i = 0
    for d in range(depth + 1):
        per_depth.append(noisy[i : i + (1 << d)])
        i += 1 << d
    assert len(nodes) == i
    expected = np.linalg.lstsq(a, noisy, rcond=None)[0]
    np.testing.assert_allclose(least_squares(per_depth), expected, atol=1e-9)
    # Exact variances = σ²·(AᵀA)⁻¹ restricted to the real cells.
    lo, hi = all_ranges(n)
    brute = np.array([cov[s : e + 1, s : e + 1].sum() for s, e in zip(lo, hi, strict=True)])
    np.testing.assert_allclose(mech.range_variance(lo, hi), mech.sigma**2 * brute, rtol=1e-10)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 8, 13])
def test_wavelet_covariance_is_the_inverse_haar_map(n: int) -> None:
    mech = WaveletMechanism(n, epsilon=1.0, delta=1e-6, rng=0)
    depth = mech.depth
    size = 1 << depth
    # Measurement matrix: total, then S(left) − S(right) for every internal node.
    rows = [np.ones(size)]
    for d in range(depth):
        width = size >> d
        for p in range(1 << d):
            r = np.zeros(size)
            r[p * width : p * width + width // 2] = 1
            r[p * width + width // 2 : (p + 1) * width] = -1
            rows.append(r)
    inverse = np.linalg.inv(np.array(rows))
    cov = (inverse @ inverse.T)[:n, :n]
    lo, hi = all_ranges(n)
    brute = np.array([cov[s : e + 1, s : e + 1].sum() for s, e in zip(lo, hi, strict=True)])
    np.testing.assert_allclose(mech.range_variance(lo, hi), mech.sigma**2 * brute, rtol=1e-10)
    # Every cell is in K + 1 weighted coefficients with weight ±1.
    np.testing.assert_allclose(np.sqrt((np.array(rows) ** 2).sum(axis=0)), math.sqrt(depth + 1))


@pytest.mark.parametrize(
    ("mech_cls", "l2"),
    [
        (IdentityMechanism, lambda k: 1.0),
        (TreeMechanism, lambda k: math.sqrt(k + 1)),
        (HierarchicalMechanism, lambda k: math.sqrt(k + 1)),
        (WaveletMechanism, lambda k: math.sqrt(k + 1)),
        (CorrelatedPerturbation, lambda k: math.sqrt(1 + k / 3)),
    ],
)
@pytest.mark.parametrize("n", [1, 6, 8, 1000])
def test_sensitivities_and_calibration(mech_cls: type, l2: object, n: int) -> None:
    depth = 0 if n == 1 else math.ceil(math.log2(n))
    mech = mech_cls(n, epsilon=0.5, delta=1e-7, rng=0)
    expected = l2(depth)  # type: ignore[operator]
    assert mech.privacy.l2_sensitivity == pytest.approx(expected)
    assert mech.sigma == pytest.approx(gaussian_sigma(expected, 0.5, 1e-7), rel=1e-12)
    assert "add/remove one record" in mech.privacy.neighbouring
    assert "delta=1e-07" in mech.describe()


def test_tree_node_sensitivity_by_brute_force() -> None:
    """√(levels): every cell's change moves one node per level (dense incidence)."""
    depth = 4
    nodes = perfect_tree_nodes(depth)
    a = np.zeros((len(nodes), 16))
    for i, (s, e) in enumerate(nodes):
        a[i, s:e] = 1
    assert np.sqrt((a**2).sum(axis=0)).max() == pytest.approx(
        TreeMechanism(16, epsilon=1, delta=1e-6).l2_sensitivity
    )


def test_eigen_design_weights_are_optimal_and_sensitivity_one() -> None:
    n = 6
    mech = EigenDesignMechanism(n, epsilon=1.0, delta=1e-6, rng=0)
    gram = mech.workload.gram()
    lam, q = np.linalg.eigh(gram)
    squares = q**2
    u = eigen_weights(lam, squares)
    assert np.max(squares @ u) == pytest.approx(1.0)
    assert mech.l2_sensitivity == pytest.approx(1.0)

    def objective(v: np.ndarray) -> float:
        return float(np.sum(lam / v))

    best = minimize(
        objective,
        np.full(n, 1.0 / n),
        method="SLSQP",
        bounds=[(1e-9, None)] * n,
        constraints=[{"type": "ineq", "fun": lambda v: 1.0 - squares @ v}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert objective(u) <= best.fun * (1 + 1e-6)
    # Exact covariance of the estimate: σ²·Q diag(1/u) Qᵀ.
    cov = (mech._vectors / mech.weights) @ mech._vectors.T * mech.sigma**2
    lo, hi = all_ranges(n)
    brute = np.array([cov[s : e + 1, s : e + 1].sum() for s, e in zip(lo, hi, strict=True)])
    np.testing.assert_allclose(mech.range_variance(lo, hi), brute, rtol=1e-10)


def test_eigen_design_beats_identity_on_all_ranges() -> None:
    from dpcount.ranges import total_squared_error

    eigen = EigenDesignMechanism(64, epsilon=1.0, delta=1e-6, rng=0)
    identity = IdentityMechanism(64, epsilon=1.0, delta=1e-6, rng=0)
    assert total_squared_error(eigen) < 0.5 * total_squared_error(identity)


def test_eigen_design_rejects_large_n() -> None:
    with pytest.raises(ValueError, match="at most 1024 cells for EigenDesign"):
        EigenDesignMechanism(1025, epsilon=1.0, delta=1e-6)


def test_tree_max_abs_range_sum_against_brute_force() -> None:
    for n in (1, 2, 3, 5, 8, 13, 16):
        for seed in range(3):
            release = TreeMechanism(n, epsilon=1.0, delta=1e-6, rng=seed).release(np.zeros(n))
            lo, hi = all_ranges(n)
            assert release.max_abs_range_sum() == pytest.approx(np.abs(release.query(lo, hi)).max())


def test_histogram_max_abs_range_sum_against_brute_force() -> None:
    release = CorrelatedPerturbation(11, epsilon=1.0, delta=1e-6, rng=3).release(np.zeros(11))
    lo, hi = all_ranges(11)
    assert release.max_abs_range_sum() == pytest.approx(np.abs(release.query(lo, hi)).max())
    release2 = CorrelatedPerturbation((4, 5), epsilon=1.0, delta=1e-6, rng=3).release(
        np.zeros((4, 5))
    )
    v = release2.values
    brute = max(
        abs(v[a : b + 1, c : d + 1].sum())
        for a in range(4) for b in range(a, 4) for c in range(5) for d in range(c, 5)
    )  # fmt: skip
    assert release2.max_abs_range_sum() == pytest.approx(brute)


# ---- interface -------------------------------------------------------------------------------


def test_seeds_reproduce_and_default_is_fresh() -> None:
    a = CorrelatedPerturbation(32, epsilon=1.0, delta=1e-6, rng=5).release(np.zeros(32)).values
    b = CorrelatedPerturbation(32, epsilon=1.0, delta=1e-6, rng=5).release(np.zeros(32)).values
    np.testing.assert_array_equal(a, b)
    mech = CorrelatedPerturbation(32, epsilon=1.0, delta=1e-6, rng=5)
    assert not np.array_equal(mech.release(np.zeros(32)).values, mech.release(np.zeros(32)).values)
    assert not np.array_equal(
        CorrelatedPerturbation(32, epsilon=1.0, delta=1e-6).release(np.zeros(32)).values,
        CorrelatedPerturbation(32, epsilon=1.0, delta=1e-6).release(np.zeros(32)).values,
    )


def test_with_sampler_drops_privacy() -> None:
    mech = CorrelatedPerturbation(8, epsilon=1.0, delta=1e-6, rng=0)
    assert mech.privacy is not None
    test = mech.with_sampler(ZeroNoise())
    assert test.privacy is None and "no privacy" in test.describe()
    assert mech.privacy is not None


@pytest.mark.parametrize(
    ("lo", "hi", "error", "match"),
    [
        (3, 2, ValueError, "lo must be <= hi, got lo=3 > hi=2"),
        (-1, 2, ValueError, r"lo must be integers in \[0, 10\), got -1"),
        (0, 10, ValueError, r"hi must be integers in \[0, 10\), got 10"),
        (0.0, 2, TypeError, "lo must hold integers"),
        ([0, 5], [4, 2], ValueError, "lo must be <= hi, got lo=5 > hi=2"),
        (True, 2, TypeError, "lo must hold integers"),
    ],
)
def test_bad_bounds(lo: object, hi: object, error: type[Exception], match: str) -> None:
    release = CorrelatedPerturbation(10, epsilon=1.0, delta=1e-6, rng=0).release(np.zeros(10))
    with pytest.raises(error, match=match):
        release.query(lo, hi)
    with pytest.raises(error, match=match):
        release.range_variance(lo, hi)


def test_bad_two_dimensional_bounds() -> None:
    release = CorrelatedPerturbation((3, 4), epsilon=1.0, delta=1e-6, rng=0).release(
        np.zeros((3, 4))
    )
    with pytest.raises(ValueError, match="last axis of length 2"):
        release.query(0, 1)
    with pytest.raises(
        ValueError, match=r"hi\[..., 1\] \(column\) must be integers in \[0, 4\), got 4"
    ):
        release.query([0, 0], [2, 4])
    with pytest.raises(ValueError, match="lo column must be <= hi column"):
        release.query([0, 3], [2, 1])


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (np.zeros(9), ValueError, r"x must have shape \(10,\), got shape \(9,\)"),
        (np.array(["a"] * 10), TypeError, "x must hold real numbers"),
        (np.r_[np.zeros(9), np.nan], ValueError, r"x must be finite; index \(9,\) holds nan"),
    ],
)
def test_bad_data(x: np.ndarray, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        CorrelatedPerturbation(10, epsilon=1.0, delta=1e-6).release(x)


@pytest.mark.parametrize("name", ["tree", "hierarchical", "wavelet", "eigen"])
def test_one_dimensional_baselines_reject_2d(name: str) -> None:
    with pytest.raises(ValueError, match="shape must have 1 to 1 dimensions"):
        build_mechanism(name, (4, 4), epsilon=1.0, delta=1e-6)


def test_registry_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="mechanism must be one of"):
        build_mechanism("laplace", 4, epsilon=1.0, delta=1e-6)


def test_balanced_tree_is_the_one_of_the_reference() -> None:
    nodes = nodal_ranges(11)
    expected = sorted((s, e - 1, d) for s, e, d in build_tree(11))
    assert (
        sorted(zip(nodes.lo.tolist(), nodes.hi.tolist(), nodes.depth.tolist(), strict=True))
        == expected
    )
