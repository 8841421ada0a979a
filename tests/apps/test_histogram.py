"""ContinualHistogram (constant-matters Cor. B.1), top-1 (App. D), Zipf data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from dpcount.apps import (
    ContinualHistogram,
    TopItem,
    histogram_sensitivity,
    top1_counts,
    zipf_items,
)
from dpcount.privacy import ZeroNoise
from tests.stats import assert_variances_match


def random_insert_delete(rng: np.random.Generator, T: int, u: int, b: int) -> list[tuple]:
    """Steps (inserted, removed) with at most b items, never removing absent items."""
    present = np.zeros(u, dtype=int)
    steps = []
    for _ in range(T):
        k = int(rng.integers(0, b + 1))
        ins, rem = [], []
        for j in rng.choice(u, size=k, replace=False):
            if present[j] > 0 and rng.random() < 0.4:
                rem.append(int(j))
                present[j] -= 1
            else:
                ins.append(int(j))
                present[j] += 1
        steps.append((ins, rem))
    return steps


@pytest.mark.parametrize(
    ("mechanism", "noise", "delta"),
    [
        ("kary", "laplace", None),
        ("binary", "gaussian", 1e-6),
        ("kary", "gaussian", 1e-5),
    ],
)
def test_zero_noise_insertions_and_deletions(
    mechanism: str, noise: str, delta: float | None
) -> None:
    T, u, b = 60, 12, 3
    rng = np.random.default_rng(1)
    h = ContinualHistogram(
        u,
        T,
        epsilon=1.0,
        delta=delta,
        max_items_per_step=b,
        mechanism=mechanism,
        noise=noise,
        rng=0,
    ).with_sampler(ZeroNoise())
    steps = random_insert_delete(rng, T, u, b)
    truth = np.zeros(u)
    for t, (ins, rem) in enumerate(steps):
        if t < 20:
            out = h.update(ins, removed=rem)
        elif t < 40:
            x = np.zeros(u, dtype=int)
            x[ins] += 1
            x[rem] -= 1
            out = h.update_vector(x)
        else:
            break
        truth[ins] += 1
        truth[rem] -= 1
        np.testing.assert_array_equal(out, truth)
    block = np.zeros((T - 40, u), dtype=int)
    for r, (ins, rem) in enumerate(steps[40:]):
        block[r, ins] += 1
        block[r, rem] -= 1
    out = h.update_many(block)
    np.testing.assert_array_equal(out, truth + np.cumsum(block, 0))
    assert h.step == T and h.privacy is None
    assert (h.latest >= 0).all()


def test_multiplicity_and_top_items() -> None:
    h = ContinualHistogram(
        5, 4, epsilon=1.0, delta=None, max_items_per_step=4, max_count_per_item=2
    ).with_sampler(ZeroNoise())
    h.update([3, 3, 1])
    h.update([1, 4, 4, 0])
    assert h.top1() == TopItem(1, 2.0)  # ties broken by the smaller item
    assert h.topk(3) == [TopItem(1, 2.0), TopItem(3, 2.0), TopItem(4, 2.0)]
    h.update([], removed=[3, 3])
    assert h.latest.tolist() == [1.0, 2.0, 0.0, 0.0, 2.0]


def test_histogram_sensitivity_against_brute_force() -> None:
    """Largest l1/l2 norm of a change of at most b occurrences, at most m per item."""
    u = 4
    for b in range(1, 5):
        for m in range(1, 4):
            best1 = best2 = 0.0
            for delta in itertools.product(range(-m, m + 1), repeat=u):
                d = np.array(delta)
                if np.abs(d).sum() <= b:
                    best1 = max(best1, float(np.abs(d).sum()))
                    best2 = max(best2, float(np.linalg.norm(d)))
            s = histogram_sensitivity(b, m)
            assert (s.l1, s.l2) == pytest.approx((best1, best2), rel=1e-12)
    assert histogram_sensitivity(9).l2 == 3.0  # Cor. B.1: sqrt(b)


def test_calibration_uses_b_for_laplace_and_sqrt_b_for_gaussian() -> None:
    lap = ContinualHistogram(10, 100, epsilon=0.5, delta=None, max_items_per_step=4)
    assert lap.mechanism.noise_scale == pytest.approx(lap.mechanism.height * 4 / 0.5)
    gau = ContinualHistogram(
        10, 100, epsilon=0.5, delta=1e-6, max_items_per_step=4, mechanism="binary", noise="gaussian"
    )
    assert gau.noise == "gaussian"
    assert gau.privacy is not None
    assert gau.privacy.l2_sensitivity == pytest.approx(math.sqrt(gau.mechanism.height) * 2.0)
    assert "at most 4 item insertions/removals" in gau.describe()


@pytest.mark.parametrize(
    ("mechanism", "noise", "delta"),
    [
        ("kary", "laplace", None),
        ("binary", "gaussian", 1e-6),
    ],
)
def test_noise_variance_per_item_matches_exact(
    mechanism: str, noise: str, delta: float | None
) -> None:
    T, u, b = 16, 4000, 2
    h = ContinualHistogram(
        u,
        T,
        epsilon=1.0,
        delta=delta,
        max_items_per_step=b,
        mechanism=mechanism,
        noise=noise,
        rng=3,
    )
    rng = np.random.default_rng(4)
    x = np.zeros((T, u), dtype=int)
    for t in range(T):
        x[t, rng.choice(u, size=b, replace=False)] = 1
    errors = h.update_many(x) - np.cumsum(x, 0)
    assert_variances_match(errors.T, h.variances())


def test_error_bound_is_the_gaussian_union_bound() -> None:
    h = ContinualHistogram(
        20,
        50,
        epsilon=1.0,
        delta=1e-6,
        max_items_per_step=2,
        mechanism="binary",
        noise="gaussian",
        rng=0,
    )
    beta = 0.1
    expected = np.sqrt(h.variances()) * norm.isf(beta / (2 * 20 * 50))
    np.testing.assert_allclose(h.error_bound(beta), expected, rtol=1e-9)
    with pytest.raises(ValueError, match=r"error_bound needs Gaussian noise.*'laplace'"):
        ContinualHistogram(20, 50, epsilon=1.0, noise="laplace").error_bound()
    with pytest.raises(ValueError, match=r"error_bound needs Gaussian noise.*'discrete-gaussian'"):
        ContinualHistogram(20, 50, epsilon=1.0, delta=1e-6).error_bound()


def test_top1_statistic_on_zipf_stream() -> None:
    """App. D: 2048 Zipf items from 20; the zero-noise top-1 is the true max count."""
    items = zipf_items(20, 2048, rng=5)
    p = 1 / np.arange(1, 21)
    p /= p.sum()
    freq = np.bincount(items, minlength=20) / 2048
    z = (freq - p) / np.sqrt(p * (1 - p) / 2048)
    assert np.max(np.abs(z)) < 5.5
    assert np.max(np.abs((freq - 2 * p) / np.sqrt(p * (1 - p) / 2048))) > 5.5
    h = ContinualHistogram(20, 2048, epsilon=0.1).with_sampler(ZeroNoise())
    released = h.update_many(np.eye(20, dtype=int)[items])
    truth = np.cumsum(np.eye(20)[items], 0)
    np.testing.assert_array_equal(top1_counts(released), truth.max(axis=1))
    assert h.top1() == TopItem(int(np.argmax(truth[-1])), float(truth[-1].max()))


def test_default_with_delta_is_the_integer_tree() -> None:
    """Counts are integers: the default is the k-ary tree with discrete Gaussian noise;
    asking for Gaussian noise keeps the square-root factorization."""
    h = ContinualHistogram(20, 64, epsilon=0.5, delta=1e-10, rng=0)
    assert h.noise == "discrete-gaussian" and h.mechanism.name == "kary-19-sub"
    assert h.update([3]).dtype == np.float64
    h = ContinualHistogram(20, 64, epsilon=0.5, delta=1e-10, noise="gaussian", rng=0)
    assert h.noise == "gaussian" and h.mechanism.privacy.noise == "gaussian"
    assert h.mechanism.name == "sqrt"
    exact = h.with_sampler(ZeroNoise())
    np.testing.assert_array_equal(exact.update([3]), np.eye(20)[3])


def test_input_errors_and_rejected_steps_are_not_consumed() -> None:
    h = ContinualHistogram(5, 3, epsilon=1.0, delta=None, max_items_per_step=2).with_sampler(
        ZeroNoise()
    )
    with pytest.raises(
        ValueError, match=r"items must be integers in \[0, 5\), got 5 at position 1"
    ):
        h.update([1, 5])
    with pytest.raises(ValueError, match=r"removed must be integers in \[0, 5\), got -1"):
        h.update([], removed=[-1])
    with pytest.raises(TypeError, match=r"items must hold integers"):
        h.update([1.0])
    with pytest.raises(
        ValueError, match=r"step 1 has 3 item insertions/removals, more than max_items_per_step=2"
    ):
        h.update([0, 1, 2])
    with pytest.raises(
        ValueError, match=r"step 1 changes item 1 by 2, more than max_count_per_item=1"
    ):
        h.update([1, 1])
    with pytest.raises(ValueError, match=r"item 2 is both inserted and removed"):
        h.update([2], removed=[2])
    with pytest.raises(ValueError, match=r"step 1 removes item 4 more often than it is present"):
        h.update([], removed=[4])
    with pytest.raises(ValueError, match=r"x must have shape \(5,\), got shape \(4,\)"):
        h.update_vector([0, 0, 0, 1])
    with pytest.raises(ValueError, match=r"x must hold integer counts, got 0.5"):
        h.update_vector([0.5, 0, 0, 0, 0])
    with pytest.raises(ValueError, match=r"xs must have shape \(steps, 5\)"):
        h.update_many(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"no histogram released yet"):
        h.top1()
    assert h.step == 0
    h.update([0])
    with pytest.raises(ValueError, match=r"step 3 removes item 0 more often"):
        h.update_many([[-1, 0, 0, 0, 0], [-1, 0, 0, 0, 0]])
    assert h.step == 1
    with pytest.raises(ValueError, match=r"k must be <= 5, got 6"):
        h.topk(6)
    h.update_many([[0, 1, 0, 0, 0], [0, 0, 1, 0, 0]])
    with pytest.raises(ValueError, match=r"horizon"):
        h.update([1])
    with pytest.raises(ValueError, match=r"universe_size must be >= 1, got 0"):
        ContinualHistogram(0, 3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"max_items_per_step must be >= 1, got 0"):
        ContinualHistogram(3, 3, epsilon=1.0, delta=None, max_items_per_step=0)
