"""Balanced trees and Cascade Sampling: structure against dense oracles, then the noise."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import dpcount.ranges.cascade as cascade_module
from dpcount.privacy import ConstantNoise, GaussianNoise, ZeroNoise
from dpcount.ranges import cascade_sample, level_profile, split_variances
from dpcount.ranges._tree import BalancedTree, bit_reverse, reversal_table
from dpcount.ranges.cascade import _sample, _SequenceSource, sample_rows, sample_with
from tests.ranges_reference import (
    build_tree,
    cascade_covariance,
    cascade_map,
    definition_3_1,
    random_profile,
)
from tests.stats import assert_variances_match

SIZES = [*range(1, 41), 63, 64, 65, 100, 127, 129]


def implemented_map(
    shape: tuple[int, ...], profiles: list[list[float]] | None = None
) -> np.ndarray:
    """The implementation's linear map, by pushing each unit input through the cascade.

    Computed once per (shape, profiles, ``_BLOCK``) and read-only: the structure tests
    read the same default-profile maps (e.g. n = 13 in three of them).
    """
    profs = profiles or [level_profile(n) for n in shape]
    key = tuple(tuple(float(v) for v in p) for p in profs)
    return _implemented_map(tuple(shape), key, cascade_module._BLOCK)


@functools.cache
def _implemented_map(
    shape: tuple[int, ...], profiles: tuple[tuple[float, ...], ...], block: int
) -> np.ndarray:
    assert block == cascade_module._BLOCK  # the block size the map is computed with
    size = int(np.prod(shape))
    profs = [list(p) for p in profiles]
    cols = []
    for k in range(size):
        source = _SequenceSource(np.eye(size)[k])
        cols.append(_sample(shape, profs, 1.0, source).ravel())
        assert source.used == size  # exactly one input per cell
    out = np.array(cols).T
    out.flags.writeable = False
    return out


# ---- the tree -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [*range(1, 130), 255, 256, 257, 1000, 1025])
def test_balanced_tree_matches_recursive_builder(n: int) -> None:
    tree = BalancedTree(n)
    nodes = build_tree(n)
    assert tree.depth == max(d for _, _, d in nodes)
    for d in range(tree.depth):
        expected = sorted((s, e) for s, e, dd in nodes if dd == d)
        starts = tree.node_starts(d)
        np.testing.assert_array_equal(starts[:-1], [s for s, _ in expected])
        np.testing.assert_array_equal(starts[1:], [e for _, e in expected])
    leaf_depth = {s: d for s, e, d in nodes if e - s == 1}
    np.testing.assert_array_equal(tree.leaf_depths(), [leaf_depth[i] for i in range(n)])
    start, stop, depth = tree.node_ranges()
    assert sorted(zip(start.tolist(), stop.tolist(), depth.tolist(), strict=True)) == sorted(nodes)
    # Slot positions: each depth-K leaf one slot, each depth-(K−1) leaf two.
    slots = np.where(tree.leaf_depths() == tree.depth, 1, 2) if n > 1 else np.ones(1, int)
    expected_h = np.concatenate(([0], np.cumsum(slots)))
    np.testing.assert_array_equal(tree.half_positions(np.arange(n + 1)), expected_h)


def test_bit_reversal() -> None:
    np.testing.assert_array_equal(reversal_table(3), [0, 4, 2, 6, 1, 5, 3, 7])
    np.testing.assert_array_equal(bit_reverse(np.arange(8), 3), reversal_table(3))


# ---- the cascade's structure -----------------------------------------------------------


@pytest.mark.parametrize("k", range(1, 7))
def test_covariance_is_definition_3_1(k: int) -> None:
    lmap = implemented_map((2**k,))
    np.testing.assert_allclose(lmap @ lmap.T, definition_3_1(k), atol=1e-13)


@pytest.mark.parametrize(
    "block",
    [1 << 16, pytest.param(8, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow)],
)
def test_covariance_matches_reference_for_any_n(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alg. 2 on the balanced tree; small blocks force the subtree-by-subtree path."""
    monkeypatch.setattr(cascade_module, "_BLOCK", block)
    rng = np.random.default_rng(7)
    for n in SIZES:
        for profile in (level_profile(n), random_profile(n, rng)):
            got = implemented_map((n,), [profile])
            np.testing.assert_allclose(
                got @ got.T, cascade_covariance(n, profile), atol=1e-12, err_msg=f"n={n}"
            )


@pytest.mark.parametrize("n", SIZES)
def test_every_node_has_its_level_variance(n: int) -> None:
    """Theorem 3.3 (and its utility-control generalization): Var(node) = v_depth."""
    rng = np.random.default_rng(n)
    for profile in (level_profile(n), random_profile(n, rng)):
        cov = cascade_covariance(n, profile)
        lmap = implemented_map((n,), [profile])
        impl = lmap @ lmap.T
        for s, e, d in build_tree(n):
            assert cov[s:e, s:e].sum() == pytest.approx(profile[d], rel=1e-12)
            assert impl[s:e, s:e].sum() == pytest.approx(profile[d], rel=1e-12)


@pytest.mark.parametrize("block", [1 << 16, 8])
@pytest.mark.parametrize("shape", [(5, 7), (4, 4), (3, 1), (1, 6), (9, 6), (8, 3)])
def test_two_dimensional_covariance_is_kronecker(
    shape: tuple[int, int], block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alg. 3: Cov = C⁽¹⁾ ⊗ C⁽²⁾ (row-major), for default and custom profiles."""
    monkeypatch.setattr(cascade_module, "_BLOCK", block)
    rng = np.random.default_rng(1)
    for profiles in (
        [level_profile(n) for n in shape],
        [random_profile(n, rng) for n in shape],
    ):
        lmap = implemented_map(shape, profiles)
        expected = np.kron(
            cascade_covariance(shape[0], profiles[0]), cascade_covariance(shape[1], profiles[1])
        )
        np.testing.assert_allclose(lmap @ lmap.T, expected, atol=1e-12)


def test_zero_and_constant_samplers_drive_the_structure() -> None:
    rng = np.random.default_rng(0)
    profile = level_profile(11)
    np.testing.assert_array_equal(sample_with((11,), [profile], ZeroNoise(), rng), np.zeros(11))
    # All inputs equal to 2: the leaves are L·(2, ..., 2).
    got = sample_with((11,), [profile], ConstantNoise(2.0), rng)
    np.testing.assert_allclose(got, cascade_map(11, profile) @ np.full(11, 2.0), atol=1e-12)
    # GaussianNoise(σ) is cascade_sample with that σ (same stream).
    a = sample_with((11,), [profile], GaussianNoise(3.0), np.random.default_rng(5))
    b = cascade_sample(11, 3.0, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


# ---- the noise ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [8, 13])
def test_empirical_covariance_of_all_ranges(n: int) -> None:
    """Var of every range's noise matches the dense C (SE-based; 2× and 0.8× are rejected)."""
    sigma = 1.7
    profile = level_profile(n)
    cov = sigma**2 * cascade_covariance(n, profile)
    samples = sample_rows(6000, n, profile, sigma, np.random.default_rng(12))
    lo, hi = np.triu_indices(n)
    prefix = np.concatenate((np.zeros((samples.shape[0], 1)), np.cumsum(samples, axis=1)), axis=1)
    errors = prefix[:, hi + 1] - prefix[:, lo]
    expected = np.array([cov[a : b + 1, a : b + 1].sum() for a, b in zip(lo, hi, strict=True)])
    assert_variances_match(errors, expected)


def test_empirical_covariance_entries() -> None:
    """Entry-wise covariance against Definition 3.1 (k = 3), z-scores from the data."""
    samples = sample_rows(20000, 8, level_profile(8), 1.0, np.random.default_rng(4))
    products = samples[:, :, None] * samples[:, None, :]
    z = (products.mean(axis=0) - definition_3_1(3)) / (
        products.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    )
    assert np.max(np.abs(z)) < 5.5
    wrong = (products.mean(axis=0) - 2 * definition_3_1(3)) / (
        products.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    )
    assert np.max(np.abs(wrong)) > 5.5


def test_two_dimensional_rectangles_have_product_variance() -> None:
    """Every rectangle of a 3×5 cascade has variance v⁽¹⁾·v⁽²⁾ (SE-based z-scores).

    1500 draws: the pooled z of a 0.8× answer is ≈ 19 (and of a 2× one ≈ 95), far past
    the 5.5 rejected by ``assert_variances_match``.
    """
    rng = np.random.default_rng(8)
    samples = np.stack([cascade_sample((3, 5), 1.0, rng) for _ in range(1500)])
    c1, c2 = cascade_covariance(3, level_profile(3)), cascade_covariance(5, level_profile(5))
    r0, r1 = np.triu_indices(3)
    c0, cc1 = np.triu_indices(5)
    rows = np.repeat(np.arange(r0.size), c0.size)
    cols = np.tile(np.arange(c0.size), r0.size)
    table = np.zeros((samples.shape[0], 4, 6))
    table[:, 1:, 1:] = samples.cumsum(axis=1).cumsum(axis=2)
    a, b, c, d = r0[rows], r1[rows] + 1, c0[cols], cc1[cols] + 1
    errors = table[:, b, d] - table[:, a, d] - table[:, b, c] + table[:, a, c]
    v1 = np.array([c1[i : j + 1, i : j + 1].sum() for i, j in zip(r0, r1, strict=True)])
    v2 = np.array([c2[i : j + 1, i : j + 1].sum() for i, j in zip(c0, cc1, strict=True)])
    assert_variances_match(errors, v1[rows] * v2[cols])


def test_batched_rows_are_independent_cascades() -> None:
    """sample_rows (many cascades per call) has the same law as single draws."""
    rows = sample_rows(8000, 7, level_profile(7), 1.0, np.random.default_rng(3))
    lo, hi = np.triu_indices(7)
    prefix = np.concatenate((np.zeros((rows.shape[0], 1)), np.cumsum(rows, axis=1)), axis=1)
    cov = cascade_covariance(7, level_profile(7))
    expected = np.array([cov[a : b + 1, a : b + 1].sum() for a, b in zip(lo, hi, strict=True)])
    assert_variances_match(prefix[:, hi + 1] - prefix[:, lo], expected)
    # Rows are independent: the correlation of consecutive rows' totals is ~0.
    totals = rows.sum(axis=1)
    assert abs(np.corrcoef(totals[:-1], totals[1:])[0, 1]) < 5.5 / np.sqrt(totals.size)


def test_reproducible_with_seed_and_fresh_without() -> None:
    np.testing.assert_array_equal(cascade_sample(100, rng=1), cascade_sample(100, rng=1))
    assert not np.array_equal(cascade_sample(100), cascade_sample(100))
    gen = np.random.default_rng(2)
    assert not np.array_equal(cascade_sample(100, rng=gen), cascade_sample(100, rng=gen))


# ---- profiles and validation ------------------------------------------------------------


def test_split_variances_and_default_profile() -> None:
    assert level_profile(8) == (1.0, 1.0, 1.0, 1.0)
    assert split_variances(level_profile(8)) == (0.75, 0.75, 0.75)
    assert level_profile(1) == (1.0,)
    assert level_profile(5, [1, 2, 3, 4]) == (1.0, 2.0, 3.0, 4.0)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ([1, 1], ValueError, r"must have 4 entries \(depths 0..3"),
        ([1, 0, 1, 1], ValueError, r"level_variances\[1\] must be > 0, got 0"),
        ([1, 1, -2, 1], ValueError, r"level_variances\[2\] must be > 0"),
        ([1, 1, 0.25, 1], ValueError, r"level_variances\[2\] must be > level_variances\[1\]/4"),
        ([4, 1, 1, 1], ValueError, r"level_variances\[1\] must be > level_variances\[0\]/4 = 1.0"),
        ([1, float("nan"), 1, 1], ValueError, r"level_variances\[1\] must not be NaN"),
        ("1111", TypeError, "level_variances must be a sequence"),
        (3.0, TypeError, "level_variances must be a sequence"),
    ],
)
def test_bad_profiles_are_rejected(value: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        cascade_sample(5, level_variances=value)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"shape": 0}, ValueError, r"shape\[0\] must be >= 1, got 0"),
        ({"shape": (2, 3, 4)}, ValueError, "shape must have 1 to 2 dimensions"),
        ({"shape": 2.5}, TypeError, "shape must be an int or a tuple of ints"),
        ({"shape": (3, 1.0)}, TypeError, r"shape\[1\] must be an integer"),
        ({"shape": 4, "sigma": 0}, ValueError, "sigma must be > 0, got 0"),
        ({"shape": 4, "rng": -1}, ValueError, "rng seed must be >= 0"),
        ({"shape": (4, 4), "level_variances": [1, 1, 1]}, TypeError, "must be a pair"),
    ],
)
def test_bad_arguments_are_rejected(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        cascade_sample(**kwargs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_large_power_of_two_node_variances() -> None:
    """n = 2^22 (subtree-by-subtree path): the root and eight depth-10 nodes have variance σ²."""
    rng = np.random.default_rng(21)
    roots, mids = [], []
    for _ in range(200):
        noise = cascade_sample(1 << 22, 2.0, rng)
        roots.append(noise.sum())
        mids.append(noise.reshape(1024, -1).sum(axis=1)[:8])
    errors = np.column_stack((roots, np.array(mids)))
    assert_variances_match(errors, np.full(errors.shape[1], 4.0))
