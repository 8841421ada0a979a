"""Noise samplers and rng normalization."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcount.privacy import (
    ConstantNoise,
    GaussianNoise,
    LaplaceNoise,
    NoiseBuffer,
    ZeroNoise,
    as_generator,
)
from dpcount.privacy.source import NoiseSource

N = 200_000


def test_laplace_sampler_distribution() -> None:
    x = LaplaceNoise(2.0).sample(np.random.default_rng(1), N)
    assert stats.kstest(x, stats.laplace(scale=2.0).cdf).pvalue > 1e-3
    # A 5% wrong scale is rejected by the same test on the same data.
    assert stats.kstest(x, stats.laplace(scale=2.1).cdf).pvalue < 1e-6
    assert LaplaceNoise(2.0).variance == 8.0


def test_gaussian_sampler_distribution() -> None:
    x = GaussianNoise(3.0).sample(np.random.default_rng(2), N)
    assert stats.kstest(x, stats.norm(scale=3.0).cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.norm(scale=3.15).cdf).pvalue < 1e-6
    # sigma is a standard deviation, not a variance
    assert GaussianNoise(3.0).variance == 9.0


def test_test_samplers() -> None:
    rng = np.random.default_rng(0)
    assert np.all(ZeroNoise().sample(rng, (3, 2)) == 0)
    assert np.all(ConstantNoise(1.5).sample(rng, 4) == 1.5)


@pytest.mark.parametrize("dim", [None, 3])
def test_buffer_hands_out_each_draw_once_in_order(dim: int | None) -> None:
    """take_one/take interleaved reproduce exactly the sampler's own sequence."""
    sampler = GaussianNoise(1.0)
    reference = sampler.sample(np.random.default_rng(5), (5000,) if dim is None else (5000, dim))
    buf = NoiseBuffer(
        NoiseSource.generator(sampler, np.random.default_rng(5), dim), dim, block=5000
    )
    got = [buf.take_one() for _ in range(7)]
    got.extend(buf.take(100))
    got.extend(buf.take_one() for _ in range(3))
    np.testing.assert_array_equal(np.asarray(got), reference[:110])
    assert len(buf.pending()) == 5000 - 110


def test_as_generator() -> None:
    g = np.random.default_rng(3)
    assert as_generator(g) is g
    assert as_generator(7).random() == np.random.default_rng(7).random()
    a, b = as_generator(None), as_generator(None)
    assert a.random() != b.random()  # fresh OS entropy each time
    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator"):
        as_generator(np.random.RandomState(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rng must be"):
        as_generator(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"rng seed must be >= 0, got -1"):
        as_generator(-1)


def test_sampler_parameters_validated() -> None:
    with pytest.raises(ValueError, match=r"scale must be > 0, got -1"):
        LaplaceNoise(-1)
    with pytest.raises(ValueError, match=r"sigma must be finite, got inf"):
        GaussianNoise(float("inf"))
