"""Honaker Online: the closed-form variances, an independent GLS oracle, and the noise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpcount.counting import BinaryTree, Honaker
from dpcount.counting.honaker import (
    honaker_level_variance,
    honaker_max_variance_units,
    honaker_mean_variance_units,
    honaker_step_variance_units,
)
from dpcount.privacy import ConstantNoise
from tests.counting.factorization.test_dense import ArrayDraw
from tests.stats import assert_variances_match


def test_issue_values() -> None:
    assert honaker_step_variance_units(1) == 1.0
    assert honaker_step_variance_units(2) == pytest.approx(2 / 3, rel=1e-15)
    assert honaker_step_variance_units(4) == pytest.approx(4 / 7, rel=1e-15)
    assert honaker_step_variance_units(8) == pytest.approx(8 / 15, rel=1e-15)
    assert honaker_step_variance_units(7) == pytest.approx(4 / 7 + 2 / 3 + 1, rel=1e-15)


def gls_node_variance(level: int) -> Fraction:
    """Variance (units of σ²) of the best linear unbiased estimate of a level-j node's sum
    from every noisy node of its subtree — generalized least squares, exact rationals."""
    leaves = 1 << level
    rows = []
    for j in range(level + 1):
        for m in range(leaves >> j):
            rows.append([1 if m << j <= i < (m + 1) << j else 0 for i in range(leaves)])
    # Normal matrix RᵀR (integers), solve (RᵀR) w = 1 exactly; variance = 1ᵀ w.
    n = leaves
    G = [[Fraction(sum(r[a] * r[b] for r in rows)) for b in range(n)] for a in range(n)]
    rhs = [Fraction(1)] * n
    for c in range(n):  # Gauss–Jordan
        p = next(r for r in range(c, n) if G[r][c] != 0)
        G[c], G[p], rhs[c], rhs[p] = G[p], G[c], rhs[p], rhs[c]
        for r in range(n):
            if r != c and G[r][c] != 0:
                factor = G[r][c] / G[c][c]
                G[r] = [a - factor * b for a, b in zip(G[r], G[c], strict=True)]
                rhs[r] -= factor * rhs[c]
    return sum((rhs[i] / G[i][i] for i in range(n)), Fraction(0))


@pytest.mark.parametrize("level", range(5))
def test_level_variance_is_the_subtree_gls_variance(level: int) -> None:
    exact = gls_node_variance(level)
    assert exact == Fraction(2**level, 2 ** (level + 1) - 1)
    assert honaker_level_variance(level) == pytest.approx(float(exact), rel=1e-15)


@pytest.mark.parametrize("T", [1, 2, 3, 8, 100, 1000, 4097])
def test_closed_forms_match_per_step_values(T: int) -> None:
    per_step = np.array([honaker_step_variance_units(t) for t in range(1, T + 1)])
    m = Honaker(T, epsilon=1.0, rng=0)
    np.testing.assert_allclose(m.noise_coefficients(), per_step, rtol=1e-14)
    assert honaker_mean_variance_units(T) == pytest.approx(per_step.mean(), rel=1e-13)
    assert honaker_max_variance_units(T) == pytest.approx(per_step.max(), rel=1e-14)
    assert m.mse() == pytest.approx(float(m.variances().mean()), rel=1e-12)
    assert m.max_variance() == pytest.approx(float(m.variances().max()), rel=1e-13)


def test_never_worse_than_the_binary_tree_with_the_same_privacy() -> None:
    for T in [1, 7, 64, 1000, 12345]:
        h, b = Honaker(T, epsilon=1.0), BinaryTree(T, epsilon=1.0)
        assert h.height == b.height and h.noise_scale == b.noise_scale
        assert np.all(h.variances() <= b.variances() + 1e-12)
        assert h.mse() < b.mse() or T == 1


def test_fixed_noise_release_equals_the_online_estimator() -> None:
    """With given node noises, the release equals Honaker's recursion evaluated directly."""
    T = 13
    m = Honaker(T, epsilon=1.0, rng=0)
    L, _ = m.dense_factorization()
    z = np.random.default_rng(1).normal(size=L.shape[1])
    # Draw order of the per-step stream: at step t the leaf, then the completed nodes
    # bottom-up; map it to the dense (level, position) order.
    order = []
    for t in range(1, T + 1):
        j = 0
        order.append((0, t - 1))
        while not (t >> j) & 1:
            j += 1
            order.append((j, (t >> j) - 1))
    index = {}
    for j in range(m.height):
        for q in range(T >> j):
            index[(j, q)] = len(index)
    draws = np.array([z[index[node]] for node in order])
    s = m.with_sampler(ArrayDraw(draws)).stream()
    out = np.array([s.update(0.0) for _ in range(T)])
    np.testing.assert_allclose(out, L @ z, atol=1e-12)


def test_state_holds_at_most_log_t_values() -> None:
    m = Honaker(1000, epsilon=1.0, rng=0)
    s = m.stream()
    for t in range(1, 1001):
        s.update(0.0)
        assert s.live_count() == bin(t).count("1") <= 10


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_noise_statistics(noise: str) -> None:
    T, reps = 48, 30000
    m = Honaker(T, epsilon=1.0, delta=1e-6 if noise == "gaussian" else None, noise=noise, rng=9)
    assert_variances_match(m.release(np.zeros((T, reps))).T, m.variances())


def test_constant_noise_batch_equals_chunks() -> None:
    m = Honaker(200, epsilon=1.0).with_sampler(ConstantNoise(1.0))
    batch = m.release(np.zeros(200))
    s = m.stream()
    parts = [s.update_many(np.zeros(n)) for n in (3, 64, 1, 100, 32)]
    np.testing.assert_allclose(np.concatenate(parts), batch, rtol=1e-13)


def test_invalid_horizon() -> None:
    with pytest.raises(ValueError, match=r"horizon must be >= 1, got 0"):
        Honaker(0, epsilon=1.0)
