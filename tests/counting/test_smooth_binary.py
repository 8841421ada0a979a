"""Smooth binary mechanism: leaves, height, sensitivity (h/2, not h/2 + 1), σ is a std."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcount.counting import FactorizationMechanism, SmoothBinary
from dpcount.counting.smooth_binary import balanced_leaves, next_balanced, smooth_binary_height
from dpcount.privacy import gaussian_sigma
from tests.counting.factorization.test_dense import RUNS, noise_matrix
from tests.stats import assert_variances_match, pooled_variance_z


def brute_balanced(h: int) -> list[int]:
    return [v for v in range(1 << h) if bin(v).count("1") == h // 2]


@pytest.mark.parametrize("h", [2, 4, 6, 8, 12])
def test_balanced_leaves_in_order(h: int) -> None:
    expected = brute_balanced(h)
    assert [next_balanced(b) for b in expected[:-1]] == expected[1:]
    got = balanced_leaves(expected[0], len(expected) - 1, h)
    assert got.tolist() == expected[1:]
    assert balanced_leaves(expected[3], 2, h).tolist() == expected[4:6] if h > 2 else True
    with pytest.raises(ValueError, match=r"fewer than 2 balanced leaves"):
        balanced_leaves(expected[-1], 2, h)


def test_height_is_smallest_even_with_more_balanced_leaves_than_steps() -> None:
    for T in range(1, 2000):
        h = smooth_binary_height(T)
        assert h % 2 == 0 and math.comb(h, h // 2) > T
        assert h == 2 or math.comb(h - 2, h // 2 - 1) <= T
    assert smooth_binary_height(1) == 2
    assert smooth_binary_height(2) == 4  # C(2, 1) = 2 leaves are not enough for T = 2
    assert smooth_binary_height(5) == 4
    assert smooth_binary_height(6) == 6
    with pytest.raises(ValueError, match=r"needs a tree of height 64 > 62"):
        smooth_binary_height(math.comb(62, 31))


@pytest.mark.parametrize("h", [2, 4, 6, 8])
def test_sensitivity_h_over_2_is_attained_at_full_capacity(h: int) -> None:
    T = math.comb(h, h // 2) - 1
    m = SmoothBinary(T, epsilon=1.0, delta=1e-6)
    assert m.height == h
    L, R = m.dense_factorization()
    fm = FactorizationMechanism(L, R, epsilon=1.0)
    assert fm._unit_sensitivities() == (h / 2, math.sqrt(h / 2))
    assert m._unit_sensitivities() == fm._unit_sensitivities()
    np.testing.assert_array_equal(L.sum(axis=1), np.full(T, h / 2))  # h/2 nodes per step


@pytest.mark.parametrize("h", [4, 6, 8])
def test_releasing_at_b_t_with_x_t_at_b_t_needs_h_over_2_plus_1(h: int) -> None:
    """The indexing of the public reference code (release t uses leaf b_{t−1}, x_t at
    b_{t−1}) puts x_1 into h/2 + 1 used nodes: sensitivity h/2 would under-noise."""
    leaves = brute_balanced(h)
    nodes: dict[tuple[int, int], int] = {}
    for b in leaves:
        for j in range(h):
            if (b >> j) & 1:
                nodes.setdefault((j, b >> (j + 1)), len(nodes))
    # x_1 must lie in [0, b_0) (1-indexed leaf b_0 = 0-indexed b_0 − 1): count its nodes.
    y = leaves[0] - 1
    count = sum(1 for (j, p) in nodes if (y >> (j + 1)) == p and not (y >> j) & 1)
    assert count == h // 2 + 1
    assert len(leaves) == math.comb(h, h // 2)


def test_sigma_is_a_standard_deviation_and_variance_is_constant() -> None:
    T, reps = 60, 40000
    eps, delta = 0.5, 1e-6
    m = SmoothBinary(T, epsilon=eps, delta=delta, rng=2)
    h = m.height
    sigma = gaussian_sigma(math.sqrt(h / 2), eps, delta)
    assert m.noise_scale == sigma
    np.testing.assert_allclose(m.variances(), np.full(T, h / 2 * sigma**2))
    assert m.mse() == m.max_variance() == pytest.approx(h / 2 * sigma**2)
    errors = m.release(np.zeros((T, reps))).T
    assert_variances_match(errors, m.variances())
    # Passing the variance as the standard deviation gives (h/2)σ⁴ per step: rejected.
    assert abs(pooled_variance_z(errors, np.full(T, h / 2 * sigma**4))) > 100


@pytest.mark.slow  # statistical; CI runs the slow set
def test_stream_and_chunks_share_live_nodes() -> None:
    m = SmoothBinary(69, epsilon=1.0, delta=1e-6)  # h = 8: the last balanced leaf is used

    cov = {name: (M := noise_matrix(m, run)) @ M.T for name, run in RUNS.items()}
    np.testing.assert_allclose(cov["steps"], cov["batch"], atol=1e-12)
    np.testing.assert_allclose(cov["mixed"], cov["batch"], atol=1e-12)
    s = m.stream()
    s.update(0.0)
    assert s.live_count() == m.height // 2


def test_laplace_variant_is_pure_dp() -> None:
    m = SmoothBinary(1000, epsilon=1.0, noise="laplace")
    assert m.privacy is not None and m.privacy.delta == 0.0
    assert m.noise_scale == m.height / 2


def test_popcount_table_fallback_matches_bin() -> None:
    from dpcount.counting.smooth_binary import _popcount16

    v = np.arange(0, 1 << 20, 977, dtype=np.int64)
    table = _popcount16()
    pc = table[v & 0xFFFF] + table[(v >> 16) & 0xFFFF]
    assert pc.tolist() == [bin(int(x)).count("1") for x in v]
