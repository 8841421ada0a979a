"""Noise sources: one sampler per distribution over a source's words (privacy.source)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpcount.privacy import (
    ConstantNoise,
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    GaussianNoise,
    LaplaceNoise,
    ZeroNoise,
)
from dpcount.privacy.sampling import GeneratorBlock
from dpcount.privacy.source import GeneratorWords, NoiseSource

SAMPLERS = [
    LaplaceNoise(1.5),
    GaussianNoise(2.5),
    DiscreteLaplaceNoise(3.25),
    DiscreteGaussianNoise(4.5),
    ZeroNoise(),
    ConstantNoise(2.0),
]


def test_continuous_seeded_streams_are_numpys_own() -> None:
    """The floating-point samplers on a Generator keep the 0.4 seeded streams: numpy's
    ziggurat normals and exponentials, bit for bit."""
    got = GaussianNoise(2.5).sample(np.random.default_rng(1), (3, 4))
    assert np.array_equal(got, np.random.default_rng(1).standard_normal((3, 4)) * 2.5)
    rng = np.random.default_rng(2)
    want = (rng.standard_exponential(7) - rng.standard_exponential(7)) * 1.5
    assert np.array_equal(LaplaceNoise(1.5).sample(np.random.default_rng(2), 7), want)


@pytest.mark.parametrize("sampler", SAMPLERS, ids=repr)
def test_sample_is_draw_on_the_generators_words(sampler: Any) -> None:
    """sample(rng, size), a NoiseSource on a Generator and draw(GeneratorBlock) are one
    sampler: the same values from the same seed."""
    a = sampler.sample(np.random.default_rng(3), (5, 4))
    b = NoiseSource.generator(sampler, np.random.default_rng(3), 4).sample((5, 4))
    c = sampler.draw(GeneratorBlock(np.random.default_rng(3), (5, 4)))
    assert (
        a.dtype
        == b.dtype
        == c.dtype
        == (np.int64 if getattr(sampler, "integer", False) else np.float64)
    )
    assert np.array_equal(a, b) and np.array_equal(a, c)


def test_source_counts_rows_and_checks_the_width() -> None:
    scalar = NoiseSource.generator(GaussianNoise(1.0), np.random.default_rng(0))
    scalar.sample(7)
    scalar.sample((2, 3))
    assert scalar.rows_drawn == 13
    wide = NoiseSource(GaussianNoise(1.0), GeneratorWords(np.random.default_rng(0)), 3, start=5)
    assert wide.sample((2, 4, 3)).shape == (2, 4, 3)
    assert wide.rows_drawn == 13
    with pytest.raises(ValueError, match="must end with the source's width 3"):
        wide.sample((4, 2))


def test_no_words_draws_zeros_of_the_samplers_dtype() -> None:
    ints = NoiseSource(DiscreteLaplaceNoise(2.0), None, 3)
    out = ints.sample((4, 3))
    assert out.dtype == np.int64 and not out.any() and ints.rows_drawn == 4
    floats = NoiseSource(GaussianNoise(1.0), None).sample(5)
    assert floats.dtype == np.float64 and not floats.any()


class _OnlySample:
    """A third-party sampler with only sample(rng, size)."""

    variance = 1.0

    def sample(self, rng: np.random.Generator, size: Any) -> np.ndarray:
        return np.full(size, 7.0)


class _Words:
    """Words that are not a Generator's (as the keyed PRF's)."""

    def block(self, row: int, shape: tuple[int, ...]) -> Any:
        return GeneratorBlockWithout(shape)


class GeneratorBlockWithout(GeneratorBlock):
    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__(np.random.default_rng(0), shape)

    @property
    def generator(self) -> None:  # type: ignore[override]
        return None


def test_a_sampler_without_draw_works_on_a_generator_only() -> None:
    on_rng = NoiseSource.generator(_OnlySample(), np.random.default_rng(0))  # type: ignore[arg-type]
    assert np.array_equal(on_rng.sample(3), np.full(3, 7.0))
    keyed = NoiseSource(_OnlySample(), _Words())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no draw"):
        keyed.sample(3)
    # dpcount's samplers draw from any words
    assert NoiseSource(DiscreteGaussianNoise(2.0), _Words()).sample(4).dtype == np.int64


def test_bad_arguments_name_the_parameter() -> None:
    with pytest.raises(TypeError, match="sampler"):
        NoiseSource("gaussian", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="words"):
        NoiseSource(GaussianNoise(1.0), np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="width"):
        NoiseSource(GaussianNoise(1.0), None, 0)
    with pytest.raises(TypeError, match="rng"):
        GeneratorWords(3)  # type: ignore[arg-type]


def test_discrete_scale_is_what_the_sampler_draws() -> None:
    """A wrong scale changes the draws (the sampler reads its own rational scale)."""
    a = DiscreteLaplaceNoise(Fraction(13, 4)).sample(np.random.default_rng(4), 1000)
    b = DiscreteLaplaceNoise(Fraction(14, 4)).sample(np.random.default_rng(4), 1000)
    assert not np.array_equal(a, b)
