"""Exact noise models against brute force over dense covariances (small n)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpcount.ranges import level_profile, split_variances
from dpcount.ranges._halving import HalvingCascade, _upper_hull
from dpcount.ranges._models import DenseCovariance, IdentityCovariance
from dpcount.ranges._tree import BalancedTree
from dpcount.ranges.baselines.tree import TreeCountModel, canonical_decomposition
from tests.ranges_reference import (
    canonical_count,
    cascade_covariance,
    random_profile,
    range_variances,
)

SIZES = [*range(1, 34), 48, 64, 65, 100]


def halving(n: int, profile: list[float], padded: bool = False) -> HalvingCascade:
    tree = BalancedTree(1 << BalancedTree(n).depth) if padded else BalancedTree(n)
    return HalvingCascade(tree, n, profile[0], split_variances(profile))


Model = HalvingCascade | IdentityCovariance | DenseCovariance | TreeCountModel


def check_against_dense(model: Model, cov: np.ndarray | None, brute_var: np.ndarray) -> None:
    n = model.n
    lo, hi = np.triu_indices(n)
    np.testing.assert_allclose(model.range_variance(lo, hi + 1), brute_var, rtol=1e-11, atol=1e-12)
    assert model.all_ranges_total() == pytest.approx(brute_var.sum(), rel=1e-11)
    assert model.all_ranges_max() == pytest.approx(brute_var.max(), rel=1e-11)
    if cov is not None:
        w = np.random.default_rng(n).normal(size=(6, n))
        np.testing.assert_allclose(
            model.query_variance(w), np.einsum("ij,jk,ik->i", w, cov, w), rtol=1e-10
        )


@pytest.mark.parametrize("n", SIZES)
def test_halving_cascade_on_balanced_tree(n: int) -> None:
    rng = np.random.default_rng(n)
    for profile in (list(level_profile(n)), random_profile(n, rng)):
        cov = cascade_covariance(n, profile)
        check_against_dense(halving(n, profile), cov, range_variances(cov)[2])


@pytest.mark.parametrize("n", SIZES)
def test_halving_cascade_on_padded_perfect_tree(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    profile = random_profile(1 << BalancedTree(n).depth, rng)
    full = cascade_covariance(1 << BalancedTree(n).depth, profile)
    cov = full[:n, :n]
    check_against_dense(halving(n, profile, padded=True), cov, range_variances(cov)[2])


def test_theorem_3_20_and_lemma_3_15_bounds() -> None:
    """Nodal: every node σ²; all ranges: (K−1)/3 + 1 ≤ max Var/σ² ≤ 2K − 2 (Lemma 3.15/3.17)."""
    for k in range(2, 17):
        n = 2**k
        model = halving(n, list(level_profile(n)))
        worst = model.all_ranges_max()
        assert worst <= 2 * k - 2 + 1e-9
        assert worst >= (k - 1) / 3 + 1 - 1e-9
        assert model.node_variances == (1.0,) * (k + 1)


def test_identity_and_dense_models() -> None:
    for n in (1, 5, 17):
        cov = 2.5 * np.eye(n)
        check_against_dense(IdentityCovariance(n, 2.5), cov, range_variances(cov)[2])
        rng = np.random.default_rng(n)
        a = rng.normal(size=(n, n))
        dense = a @ a.T + np.eye(n)
        check_against_dense(DenseCovariance(dense), dense, range_variances(dense)[2])


@pytest.mark.parametrize("n", [*range(1, 34), 64, 100])
def test_tree_count_model_against_recursive_decomposition(n: int) -> None:
    depth = BalancedTree(n).depth
    model = TreeCountModel(depth, n, 3.0)
    lo, hi = np.triu_indices(n)
    counts = np.array([canonical_count(depth, a, b + 1) for a, b in zip(lo, hi, strict=True)])
    check_against_dense(model, None, 3.0 * counts)
    # Sums of node values along the decomposition, with node value = its heap index.
    heap = np.arange(2 << depth, dtype=np.float64)
    total, count = canonical_decomposition(depth, lo, hi + 1, heap)
    np.testing.assert_array_equal(count, counts)
    assert np.all(total >= count)  # every node used has index >= 1


def test_tree_worst_decomposition_is_2k_minus_2() -> None:
    for k in range(2, 21):
        assert TreeCountModel(k, 2**k, 1.0).all_ranges_max() == 2 * k - 2


def test_tree_model_subset_queries() -> None:
    depth, n = 4, 13
    model = TreeCountModel(depth, n, 1.0)
    rng = np.random.default_rng(2)
    w = (rng.random((20, n)) < 0.6).astype(float)
    expected = []
    for row in w:
        # Maximal nodes: perfect-tree nodes fully inside the set whose parent is not.
        inside = {(s, e) for s in range(16) for e in range(s + 1, 17)
                  if ((e - s) & (e - s - 1)) == 0 and s % (e - s) == 0
                  and e <= n and row[s:e].all()}  # fmt: skip
        maximal = [u for u in inside if not any(p != u and p[0] <= u[0] and u[1] <= p[1]
                                                  for p in inside)]  # fmt: skip
        expected.append(len(maximal))
    np.testing.assert_array_equal(model.query_variance(w), expected)
    with pytest.raises(ValueError, match="0/1"):
        model.query_variance(w * 0.5)


@given(
    st.lists(
        st.tuples(st.floats(-5, 5), st.floats(-5, 5)),
        min_size=1,
        max_size=200,
        unique_by=lambda p: p[0],
    )
)
def test_upper_hull_maximizes_every_linear_objective(points: list[tuple[float, float]]) -> None:
    pts = np.array(sorted(points))
    xs, ys = pts[:, 0], pts[:, 1]
    hull = _upper_hull(xs, ys)
    for t in (-10.0, -1.0, -0.1, 0.0, 0.3, 2.0, 50.0):
        assert np.max(ys[hull] + t * xs[hull]) == pytest.approx(np.max(ys + t * xs), abs=1e-9)


def test_all_ranges_large_n_runs_and_agrees_with_sampled_ranges() -> None:
    """n = 2000 (non power of two): the exact total equals the mean over *all* ranges
    computed in chunks from range_variance (no listing inside the model)."""
    n = 2000
    model = halving(n, list(level_profile(n)))
    lo, hi = np.triu_indices(n)
    assert model.all_ranges_total() == pytest.approx(
        model.range_variance(lo, hi + 1).sum(), rel=1e-10
    )
    assert model.all_ranges_max() == pytest.approx(
        model.range_variance(lo, hi + 1).max(), rel=1e-12
    )
