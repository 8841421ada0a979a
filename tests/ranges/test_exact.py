"""Audit finding 4 for the range mechanisms: data sums must be exact in float64.

A histogram whose total passes 2^53 makes the float64 node sums round: a change of 1 in
one cell moved the computed root of the tree baseline by 256 (old code). Every range
mechanism now refuses such data before anything is released.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpcount.privacy import ZeroNoise
from dpcount.ranges import MECHANISMS, build_mechanism, paper_monte_carlo_errors
from dpcount.ranges._exact import MAX_EXACT_SUM, check_exact_sums, grid_exponent
from dpcount.ranges.baselines._perfect import level_sums

NAMES = sorted(MECHANISMS)


def big_neighbours() -> tuple[np.ndarray, np.ndarray]:
    """Neighbours with total ~2^60: 128 cells of 2^53 and one cell 128 vs 129.

    Every cell is an exact float64 integer; the root 2^60 + 128 rounds (ties to even) to
    2^60 and 2^60 + 129 to 2^60 + 256.
    """
    x = np.zeros(256)
    x[:128] = 2.0**53
    x[128] = 128.0
    x2 = x.copy()
    x2[128] = 129.0
    return x, x2


def test_the_big_neighbours_break_the_float_sums() -> None:
    # The failure mode itself, independent of the mechanisms: the computed root sums of
    # the two neighbours differ by 256, not by 1.
    x, x2 = big_neighbours()
    roots = [level_sums(v, 8)[0][0] for v in (x, x2)]
    assert roots[1] - roots[0] == 256.0
    assert sum(int(v) for v in x2) - sum(int(v) for v in x) == 1  # the true change


@pytest.mark.parametrize("name", NAMES)
def test_release_refuses_a_total_beyond_2_53(name: str) -> None:
    # Old code: released both neighbours (tree: root node values 2^60 and 2^60 + 256 under
    # zero noise, i.e. 256 times the calibrated sensitivity). New code: refuses, naming
    # x and the cell where the running sum of |x| passes 2^53.
    x, x2 = big_neighbours()
    mech = build_mechanism(name, 256, epsilon=1.0, delta=1e-6, rng=0)
    for data in (x, x2):
        for m in (mech, mech.with_sampler(ZeroNoise())):
            with pytest.raises(ValueError, match=r"x is too large .* at index \(1,\)"):
                m.release(data)


@pytest.mark.parametrize("name", NAMES)
def test_a_total_of_exactly_2_53_is_released_with_exact_sums(name: str) -> None:
    # At the bound every partial sum is exact: the zero-noise answers of neighbours
    # differ by exactly 1 on every range holding the changed cell, 0 elsewhere.
    n = 16
    x = np.zeros(n)
    x[:4] = 2.0**50
    x[9] = 5.0
    x[8] = float(MAX_EXACT_SUM - 4 * 2**50 - 5)
    assert sum(int(v) for v in x) == MAX_EXACT_SUM
    x2 = x.copy()
    x2[9] -= 1.0
    mech = build_mechanism(name, n, epsilon=1.0, delta=1e-6, rng=0).with_sampler(ZeroNoise())
    lo, hi = np.triu_indices(n)
    a, b = mech.release(x).query(lo, hi), mech.release(x2).query(lo, hi)
    holds = (lo <= 9) & (hi >= 9)
    np.testing.assert_array_equal(a - b, holds.astype(float))
    tree = build_mechanism("tree", n, epsilon=1.0, delta=1e-6).with_sampler(ZeroNoise())
    if name == "tree":
        diff = tree.release(x).node_values - tree.release(x2).node_values  # type: ignore[attr-defined]
        assert sorted(diff.tolist()) == [0.0] * (2 * n - 5) + [1.0] * 5  # the 5 nodes on 9's path


def test_one_more_is_refused_and_the_first_index_is_named() -> None:
    x = np.zeros(10)
    x[3] = 2.0**52
    x[6] = 2.0**52
    check_exact_sums("x", x)  # exactly 2^53
    x[8] = 1.0
    with pytest.raises(ValueError, match=r"x is too large .* passes 2\^53 at index \(8,\)"):
        check_exact_sums("x", x)
    grid = np.zeros((3, 4))
    grid[1, 2] = -(2.0**53)
    grid[2, 0] = 1.0
    with pytest.raises(ValueError, match=r"at index \(2, 0\)"):
        check_exact_sums("x", grid)  # magnitudes count: signs do not cancel


def fraction_rule(values: np.ndarray) -> tuple[int, bool]:
    """Independent computation with exact rationals: (k, Σ|x|·2^k ≤ 2^53)."""
    fracs = [Fraction(float(v)) for v in values.ravel()]
    k = max(0, *(int(math.log2(f.denominator)) for f in fracs))
    return k, sum(abs(f) for f in fracs) * 2**k <= MAX_EXACT_SUM


@pytest.mark.parametrize("seed", range(40))
def test_rule_matches_exact_rational_arithmetic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    k = int(rng.integers(0, 60))
    top = int(rng.integers(1, 56))
    # Dyadic data near the bound: integers of up to `top` bits on the grid 2^-k.
    ints = rng.integers(0, 2**top, size=n, dtype=np.int64) * rng.choice([-1, 1], size=n)
    x = np.ldexp(ints.astype(np.float64), -k)
    if seed % 4 == 0:
        x[int(rng.integers(n))] = rng.normal()  # an arbitrary double (fine grid)
    want_k, want_ok = fraction_rule(x)
    assert grid_exponent(x) == want_k
    if want_ok:
        check_exact_sums("x", x)
    else:
        with pytest.raises(ValueError, match="x is too large"):
            check_exact_sums("x", x)


def test_fractional_data_on_a_coarse_grid_is_accepted_and_fine_fractions_are_not() -> None:
    check_exact_sums("x", np.array([0.5, 1.25, 3.0]))  # grid 2^-2, tiny total
    check_exact_sums("x", np.array([2.0**51 + 0.5, 2.0**51 - 1.0]))  # 2·Σ = 2^53 − 1
    with pytest.raises(ValueError, match=r"multiples of 2\^-1 .* <= 2\^53·2\^-1 = 2\^52"):
        check_exact_sums("x", np.array([2.0**51 + 0.5, 2.0**51]))  # 2·Σ = 2^53 + 1
    with pytest.raises(ValueError, match=r"multiples of 2\^-1074"):
        check_exact_sums("x", np.array([5e-324, 1.0]))
    check_exact_sums("x", np.zeros(4))


def test_paper_monte_carlo_errors_checks_the_data_like_release() -> None:
    # Old code passed x straight to the mechanism: with zero noise the 2^60 histogram
    # gave "errors" of 128 (float rounding of the truth and of the node sums).
    x, _ = big_neighbours()
    mech = build_mechanism("tree", 256, epsilon=1.0, delta=1e-6, rng=0).with_sampler(ZeroNoise())
    with pytest.raises(ValueError, match=r"x is too large .* at index \(1,\)"):
        paper_monte_carlo_errors(mech, samples=100, runs=1, x=x, rng=0)
    discrete = build_mechanism("tree", 8, epsilon=1.0, delta=1e-6, rng=0, noise="discrete-gaussian")
    with pytest.raises(ValueError, match=r"x must hold whole numbers .* index \(2,\)"):
        paper_monte_carlo_errors(discrete, samples=10, runs=1, x=[0, 1, 0.5, 0, 0, 0, 0, 0])
    ok = paper_monte_carlo_errors(mech, samples=100, runs=2, x=np.arange(256.0), rng=0)
    np.testing.assert_array_equal(ok.worst_case_error, [0.0, 0.0])
