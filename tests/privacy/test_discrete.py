"""Exact discrete samplers (CKS 2020 Alg. 1-3): pmf, variance, Bernoulli(exp(-gamma))."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcount.privacy import DiscreteGaussianNoise, DiscreteLaplaceNoise
from dpcount.privacy.discrete import (
    bernoulli_exp,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    rational_at_least,
    sample_discrete_gaussian,
    sample_discrete_laplace,
)
from dpcount.privacy.sampling import GeneratorBlock, exact, laws

N = 200_000


def chi_square_pvalue(x: NDArray[np.int64], pmf: Callable[[NDArray[np.int64]], NDArray]) -> float:
    """Pearson chi-square of integer samples against a pmf on Z.

    Cells: every integer whose expected count is >= 5, plus the two pooled tails
    (their mass summed from the pmf over 10^5 further integers, far past convergence).
    """
    n = x.size
    wide = np.arange(int(x.min()) - 1000, int(x.max()) + 1001)
    keep = wide[np.asarray(pmf(wide)) * n >= 5]
    a, b = int(keep[0]), int(keep[-1])
    inner = np.arange(a, b + 1)
    expected = (
        np.concatenate(
            [
                [float(np.sum(pmf(np.arange(a - 100_000, a))))],
                np.asarray(pmf(inner), dtype=np.float64),
                [float(np.sum(pmf(np.arange(b + 1, b + 100_001))))],
            ]
        )
        * n
    )
    observed = np.bincount(np.clip(x, a - 1, b + 1) - (a - 1), minlength=b - a + 3)
    mask = expected > 1e-300
    chi2 = float(np.sum((observed[mask] - expected[mask]) ** 2 / expected[mask]))
    return float(stats.chi2.sf(chi2, int(mask.sum()) - 1))


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 24.0])
def test_discrete_laplace_matches_exact_pmf_and_rejects_wrong_scale(scale: float) -> None:
    sampler = DiscreteLaplaceNoise(scale)
    x = sampler.sample(np.random.default_rng(11), N)
    assert x.dtype == np.int64
    t = float(sampler.scale)
    assert chi_square_pvalue(x, lambda y: discrete_laplace_pmf(y, t)) > 1e-4
    # The same data reject a 5% wrong scale.
    assert chi_square_pvalue(x, lambda y: discrete_laplace_pmf(y, 1.05 * t)) < 1e-8


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.7, 20.0])
def test_discrete_gaussian_matches_exact_pmf_and_rejects_wrong_scale(sigma: float) -> None:
    sampler = DiscreteGaussianNoise(sigma)
    x = sampler.sample(np.random.default_rng(12), N)
    assert x.dtype == np.int64
    s2 = float(sampler.sigma2)
    assert chi_square_pvalue(x, lambda y: discrete_gaussian_pmf(y, s2)) > 1e-4
    assert chi_square_pvalue(x, lambda y: discrete_gaussian_pmf(y, 1.1025 * s2)) < 1e-8


def _counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of ``exact.<name>`` (the exact decimal path)."""
    calls: list[int] = []
    real = getattr(exact, name)

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(exact, name, counted)
    return calls


@pytest.mark.slow
def test_exact_decimal_path_matches_pmf(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2^-5 float margin sends ~10% of the decisions to the exact decimal path (more
    words of V, correctly rounded logs): the law is still the exact pmf."""
    monkeypatch.setattr(exact, "_MARGIN", 2.0**-5)
    floors = _counted(monkeypatch, "exact_floor_t_exp")
    greater = _counted(monkeypatch, "exact_exp_greater")
    x = sample_discrete_gaussian(np.random.default_rng(3), Fraction(9), 20_000)
    assert len(floors) > 1000 and len(greater) > 300  # the exact path really ran
    assert chi_square_pvalue(x, lambda y: discrete_gaussian_pmf(y, 9.0)) > 1e-4
    assert chi_square_pvalue(x, lambda y: discrete_gaussian_pmf(y, 11.0)) < 1e-6


def test_generator_block_words_are_uniform_and_fresh() -> None:
    block = GeneratorBlock(np.random.default_rng(5), (1000, 4))
    w = block.words("")
    assert w.shape == (4000, 2) and w.dtype == np.uint64
    assert not np.array_equal(block.words(""), w)  # every request draws new words
    ones = np.unpackbits(w.view(np.uint8)).mean()
    assert abs(ones - 0.5) < 6 * math.sqrt(0.25 / (w.size * 64))
    assert block.words("x", np.array([3, 9])).shape == (2, 2)
    assert block.extension("ext1", 0, 1) != block.extension("ext1", 0, 1)


@pytest.mark.slow
def test_bernoulli_exp_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bernoulli(e^-1.5) with most decisions on the exact path (a float margin of 1/2
    decides only the V whose −ln V is far below γ)."""
    monkeypatch.setattr(exact, "_MARGIN", 0.5)
    calls = _counted(monkeypatch, "exact_exp_greater")
    n = 20_000
    hits = bernoulli_exp(np.random.default_rng(8), 3, 2, size=n)
    assert len(calls) > n // 2
    p = math.exp(-1.5)
    se = math.sqrt(p * (1 - p) / n)
    assert abs(hits.mean() - p) <= 5.5 * se
    assert abs(hits.mean() - math.exp(-1.1 * 1.5)) > 5.5 * se


@pytest.mark.parametrize("t", [Fraction(1), Fraction(37, 3), Fraction(1000)])
def test_geometric_law(t: Fraction) -> None:
    """G = floor(t * -ln V): P[G >= g] = e^{-g/t} (table, enclosure and exact paths)."""
    g1, g2 = laws._geometric_pair(GeneratorBlock(np.random.default_rng(9), (150_000,)), "", t)
    v = np.concatenate([g1, g2])
    for g in (1, 2, int(t) + 1, 3 * int(t)):
        p = math.exp(-g / float(t))
        se = math.sqrt(p * (1 - p) / v.size)
        assert abs(np.mean(v >= g) - p) <= 5.5 * se
    # power: a 3% wrong scale is rejected at g = t
    g = int(t)
    p = math.exp(-g / float(t))
    se = math.sqrt(p * (1 - p) / v.size)
    assert abs(np.mean(v >= g) - math.exp(-1.03 * g / float(t))) > 5.5 * se


@pytest.mark.parametrize("scale", [0.2, 1.0, 7.5, 300.0])
def test_discrete_laplace_variance_closed_form(scale: float) -> None:
    mpmath.mp.dps = 40
    t = mpmath.mpf(scale)
    num = 2 * mpmath.nsum(lambda y: y**2 * mpmath.exp(-y / t), [1, mpmath.inf])
    den = 1 + 2 * mpmath.nsum(lambda y: mpmath.exp(-y / t), [1, mpmath.inf])
    assert discrete_laplace_variance(scale) == pytest.approx(float(num / den), rel=1e-12)
    assert DiscreteLaplaceNoise(scale).variance == pytest.approx(float(num / den), rel=1e-10)


@pytest.mark.parametrize("sigma2", [0.09, 0.5, 1.0, 4.0, 30.25, 900.0])
def test_discrete_gaussian_variance_by_summation(sigma2: float) -> None:
    mpmath.mp.dps = 40
    s2 = mpmath.mpf(sigma2)
    # Direct sums over y = 1..20σ+1 (mpmath.nsum's extrapolation takes ~2 s at σ² = 900):
    # past 20σ every term is below y²·e^{-200}, so the tail is far below the 1e-12 checked.
    ys = range(1, math.ceil(20 * math.sqrt(sigma2)) + 2)
    weights = [mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) for y in ys]
    num = 2 * mpmath.fsum(y * y * w for y, w in zip(ys, weights, strict=True))
    den = 1 + 2 * mpmath.fsum(weights)
    want = float(num / den)
    got = discrete_gaussian_variance(sigma2)
    assert got == pytest.approx(want, rel=1e-12)
    assert got <= sigma2
    if sigma2 <= 1.0:
        assert got < sigma2 * (1 - 1e-9)  # visibly below sigma^2 for small sigma


def test_sampler_variance_is_the_true_variance() -> None:
    """variance property == empirical variance (and != sigma^2 where they differ)."""
    sampler = DiscreteGaussianNoise(0.5)
    x = sampler.sample(np.random.default_rng(4), 400_000).astype(np.float64)
    sq = x * x
    se = sq.std(ddof=1) / math.sqrt(x.size)
    assert abs(sq.mean() - sampler.variance) < 5.5 * se
    assert abs(sq.mean() - 0.25) > 5.5 * se  # sigma^2 would be wrong here


def test_rational_rounding_is_upward_and_fits() -> None:
    for value in [0.3, 1.0, 2.0 / 3.0, 85.59968099162089, 1e-5, 1e9]:
        r = rational_at_least(value, 2**40)
        assert r >= Fraction(value)
        assert r.numerator <= 2**40 or r.denominator == 1
        assert float(r - Fraction(value)) <= value * 2**-30
    assert DiscreteLaplaceNoise(Fraction(5, 2)).scale == Fraction(5, 2)
    g = DiscreteGaussianNoise(3.7)
    assert g.sigma2 >= Fraction(3.7) ** 2
    assert Fraction(g.sigma) ** 2 >= g.sigma2


def test_shapes_and_validation() -> None:
    rng = np.random.default_rng(0)
    assert sample_discrete_laplace(rng, Fraction(3), (4, 5)).shape == (4, 5)
    assert sample_discrete_gaussian(rng, Fraction(2), 7).shape == (7,)
    with pytest.raises(ValueError, match=r"scale must be > 0, got -1"):
        DiscreteLaplaceNoise(-1.0)
    with pytest.raises(ValueError, match=r"sigma must be finite, got inf"):
        DiscreteGaussianNoise(float("inf"))
    with pytest.raises(TypeError, match=r"sigma must be a real number"):
        DiscreteGaussianNoise("2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"gamma_den must be in \(0, 2\^63\), got 0"):
        bernoulli_exp(rng, 1, 0, size=3)
    with pytest.raises(ValueError, match=r"scale must be a rational in"):
        sample_discrete_laplace(rng, Fraction(2**41), 3)
